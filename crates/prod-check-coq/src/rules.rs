//! Rules for untrusted text (model output): what may be sent to Coq at all.
//!
//! * A proposed lemma or a node statement is exactly one sentence `Lemma name binders : type.`
//!   (or `Theorem`, `Corollary`, `Proposition`, `Fact`, `Remark`), with no control prefix
//!   (`Time`, `Fail`, `Redirect`…), no attribute, no goal selector.
//! * A proof is a sequence of tactic sentences, bullets and braces. A tactic sentence, after an
//!   optional goal selector, starts with a lower-case identifier, `(` or `[`: every Coq
//!   vernacular command (`Qed`, `Abort`, `Axiom`, `Set`, `BackTo`, `Load`, `Redirect`, …) and
//!   every control starts with an upper-case letter, and attributes with `#[`.
//! * No NUL or other control characters; bounded sizes.
//!
//! These rules are the first line of defence only: the worker also checks Coq's own prompt after
//! every sentence and `Print Assumptions` at the end, so a rule that missed something still
//! cannot make a wrong proof `Proved`.

use std::ops::Range;

use prod_coq::{sentence_head, sentences, SentenceKind};

/// Longest statement accepted (bytes).
pub const MAX_STATEMENT_BYTES: usize = 20_000;
/// Longest proof accepted (bytes).
pub const MAX_PROOF_BYTES: usize = 200_000;
/// Most sentences in one proof.
pub const MAX_PROOF_SENTENCES: usize = 5_000;

/// The theorem keywords accepted for statements (one list for the whole project).
pub use prod_coq::THEOREM_KEYWORDS;

/// A checked statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The sentence as Coq will get it (trimmed, final dot included).
    pub text: String,
    pub name: String,
}

/// One proof step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub text: String,
    /// Byte range in the proof text.
    pub range: Range<usize>,
    /// A `hammer.` step, expanded by the checker.
    pub hammer: bool,
    /// The step starts with this unqualified capitalised word (`Qc_unfolds`): it runs only if
    /// Coq itself says the word names an Ltac tactic in the context (`Locate Ltac`), since
    /// every vernacular command is capitalised too.
    pub ltac_head: Option<String>,
}

/// Why the text cannot be run (shared with every backend).
pub use prod_check::RuleError;

fn plain_text(what: &str, text: &str, max: usize) -> Result<(), RuleError> {
    if text.len() > max {
        return Err(RuleError::Rejected(format!(
            "{what} is too long ({} bytes, at most {max})",
            text.len()
        )));
    }
    if let Some((i, c)) = text
        .char_indices()
        .find(|&(_, c)| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        let (line, col) = prod_coq::line_col(text, i);
        return Err(RuleError::Rejected(format!(
            "{what}: control character U+{:04X} at line {line}, column {col}",
            c as u32
        )));
    }
    Ok(())
}

/// Check a lemma a proof proposes: a [`check_statement`] with no attribute at all. A model has
/// no use for locality, and a proposal is matched to the nodes that prove it by its text.
pub fn check_proposed_lemma(text: &str) -> Result<Statement, RuleError> {
    let s = check_statement(text)?;
    if sentence_head(&s.text).has_attributes() {
        return Err(RuleError::Rejected(
            "statement: a proposed lemma may not have attributes".into(),
        ));
    }
    Ok(s)
}

/// Check a node's own statement (a library's theorem, or a lemma proposed by its parent).
pub fn check_statement(text: &str) -> Result<Statement, RuleError> {
    let rej = |m: String| Err(RuleError::Rejected(m));
    plain_text("statement", text, MAX_STATEMENT_BYTES)?;
    // The shared strict parser first: one `Keyword name binders : type.` sentence, no mutual
    // `with`, no glued comment, no attribute or control. The checks below stay as a second line.
    if let Err(e) = prod_coq::parse_statement(text) {
        return Err(RuleError::Rejected(format!("statement: {e}")));
    }
    let lexed = sentences(text);
    if let Some(e) = lexed.errors.first() {
        return rej(format!("statement: {}", e.message(text)));
    }
    let [sentence] = lexed.sentences.as_slice() else {
        return rej(format!(
            "statement must be exactly one sentence `Lemma name : type.`, found {}",
            lexed.sentences.len()
        ));
    };
    if sentence.kind != SentenceKind::Command {
        return rej("statement must be `Lemma name : type.`".into());
    }
    let s = sentence.text(text);
    let head = sentence_head(s);
    if let Some(c) = head.controls.first() {
        return rej(format!("statement: control `{}` is not allowed", c.name));
    }
    // Locality (`Local`, `#[local]`, …) only: it decides visibility, not what is proved.
    let mut attributes = head.attributes.iter().chain(&head.legacy_attributes);
    if attributes.any(|a| !prod_coq::is_locality_attribute(a)) {
        return rej("statement: attributes other than locality are not allowed".into());
    }
    if head.selector.is_some() {
        return rej("statement: goal selector is not allowed".into());
    }
    let Some(keyword) = head.keyword.filter(|k| THEOREM_KEYWORDS.contains(k)) else {
        return rej(format!(
            "statement must start with one of {}, found `{}`",
            THEOREM_KEYWORDS.join("/"),
            prod_coq::first_word(s).unwrap_or("")
        ));
    };
    let after = head.body[keyword.len()..].trim_start();
    let name: String = after
        .chars()
        .take_while(|&c| prod_coq::lexer::is_ident_char(c))
        .collect();
    if !prod_coq::is_identifier(&name) {
        return rej(format!(
            "statement: `{keyword}` must be followed by a lemma name"
        ));
    }
    if !after[name.len()..]
        .trim_start()
        .starts_with([':', '(', '{', '[', '`', '\''])
        && !after[name.len()..]
            .trim_start()
            .chars()
            .next()
            .is_some_and(prod_coq::lexer::is_ident_start)
    {
        return rej("statement: expected binders or `:` after the lemma name".into());
    }
    // A string with a line break or angle brackets could forge lines in Coq's answers (e.g. a
    // fake header in `Print Assumptions`); no honest statement needs one.
    let stripped = prod_coq::comments_stripped(s);
    let mut in_string = false;
    for c in stripped.chars() {
        if c == '"' {
            in_string = !in_string;
        } else if in_string && matches!(c, '\n' | '\r' | '<' | '>') {
            return rej("statement: string literals may not contain line breaks or `<`/`>`".into());
        }
    }
    Ok(Statement {
        text: s.to_string(),
        name,
    })
}

/// Split and check a proof (the conditional proof's text without `<invoke>`s).
pub fn check_proof(proof_text: &str) -> Result<Vec<Step>, RuleError> {
    plain_text("proof", proof_text, MAX_PROOF_BYTES)?;
    // One lexer decision for the checker and Coq: a comment glued to the token before it may
    // not be a comment for Coq at all (`idtac.(* . Abort. … *)`), so the sentence ends would
    // differ. Honest comments have a blank before them.
    if let Some(pos) = prod_coq::glued_comment(proof_text) {
        let (line, col) = prod_coq::line_col(proof_text, pos);
        return Err(RuleError::Rejected(format!(
            "line {line}, column {col}: comment glued to the previous character (put a blank before `(*`)"
        )));
    }
    if let Some(pos) = prod_coq::long_dot_run(proof_text) {
        let (line, col) = prod_coq::line_col(proof_text, pos);
        return Err(RuleError::Rejected(format!(
            "line {line}, column {col}: a run of four or more dots (Coq and the checker would split it differently)"
        )));
    }
    if let Some((pos, word)) = refused_word(proof_text) {
        let (line, col) = prod_coq::line_col(proof_text, pos);
        return Err(RuleError::Rejected(format!(
            "line {line}, column {col}: `{word}` is not allowed in a proof ({})",
            refusal_reason(word)
        )));
    }
    let lexed = sentences(proof_text);
    if lexed.sentences.len() > MAX_PROOF_SENTENCES {
        return Err(RuleError::Rejected(format!(
            "proof has more than {MAX_PROOF_SENTENCES} sentences"
        )));
    }
    let mut steps = Vec::with_capacity(lexed.sentences.len());
    for (i, sentence) in lexed.sentences.iter().enumerate() {
        let text = sentence.text(proof_text);
        let n = i + 1;
        let (line, col) = prod_coq::line_col(proof_text, sentence.range.start);
        let at = format!("step {n} (line {line}, column {col})");
        let (hammer, ltac_head) = match sentence.kind {
            SentenceKind::Bullet | SentenceKind::BraceClose => (false, None),
            SentenceKind::BraceOpen => (false, check_tactic_head(text, &at)?),
            SentenceKind::Command if is_unshelve(text) => (false, None),
            SentenceKind::Command => {
                let head = check_tactic_head(text, &at)?;
                (is_hammer(text), head)
            }
        };
        if !hammer && mentions_hammer(text) {
            return Err(RuleError::Rejected(format!(
                "{at}: `hammer` must be a sentence of its own (`hammer.`)"
            )));
        }
        steps.push(Step {
            text: text.to_string(),
            range: sentence.range.clone(),
            hammer,
            ltac_head,
        });
    }
    if let Some(e) = lexed.errors.first() {
        return Err(RuleError::Syntax {
            step: steps.len() + 1,
            message: e.message(proof_text),
        });
    }
    Ok(steps)
}

/// Tactics that defer a check to `Qed`, where only the kernel would catch a wrong term: sound
/// only if the kernel is right, and Coq 8.16's is not (its critical-bugs list).
pub const KERNEL_DEFERRING_TACTICS: &[&str] = &[
    "exact_no_check",
    "vm_cast_no_check",
    "native_cast_no_check",
    "change_no_check",
];

/// Fixpoints written by the proof itself reach the guard checker, which has known
/// proof-of-False bugs in Coq 8.16 that neither `coqc` nor `coqchk` catch; induction through
/// the library's own (trusted) recursors stays available.
pub const GUARD_CHECKED_WORDS: &[&str] = &["fix", "cofix"];

fn refusal_reason(word: &str) -> &'static str {
    if GUARD_CHECKED_WORDS.contains(&word) {
        "fixpoints written in a proof reach the guard checker's known bugs; use `induction`"
    } else {
        "it defers the check to the kernel alone"
    }
}

/// The first word of untrusted proof text that is refused wherever it stands (outside
/// comments and strings), with its byte offset.
fn refused_word(text: &str) -> Option<(usize, &str)> {
    prod_coq::identifiers(text).into_iter().find_map(|r| {
        let w = &text[r.clone()];
        let last = w.rsplit('.').next().unwrap_or(w);
        (KERNEL_DEFERRING_TACTICS.contains(&last) || GUARD_CHECKED_WORDS.contains(&w))
            .then_some((r.start, last))
    })
}

/// No statement of an attempt may mention a proposed lemma (other than by declaring it): a
/// proposal is elaborated where the earlier proposals exist and the node's statement after all
/// of them, while a node that proves the same text elaborates it without them, so the name
/// would mean two things and one text would be two statements (`Lemma negb : …` proposed,
/// then `if negb true then …` stated).
pub fn check_proposals_independent(
    lemmas: &[Statement],
    statement: &Statement,
) -> Result<(), RuleError> {
    let named = |text: &str, own: &str| -> Option<(String, usize)> {
        // Everything after the declared name (binders and type); the texts passed the parser.
        let body = prod_coq::parse_statement(text)
            .map(|p| p.binders_and_type)
            .ok()?;
        prod_coq::identifiers(&body).into_iter().find_map(|r| {
            let w = &body[r];
            let last = w.rsplit('.').next().unwrap_or(w);
            lemmas
                .iter()
                .position(|m| m.name == last && m.name != own)
                .map(|j| (w.to_string(), j))
        })
    };
    for (i, l) in lemmas.iter().enumerate() {
        if let Some((w, j)) = named(&l.text, &l.name) {
            return Err(RuleError::Rejected(format!(
                "proposed lemma {}'s statement mentions `{w}`, the name of proposed lemma {}: a proposal must mean the same without the others",
                i + 1,
                j + 1
            )));
        }
    }
    if let Some((w, j)) = named(&statement.text, "") {
        return Err(RuleError::Rejected(format!(
            "the statement mentions `{w}`, the name of proposed lemma {}: it must mean the same without its proposals",
            j + 1
        )));
    }
    Ok(())
}

/// `Unshelve.` is the one proof-mode command a proof may use: it only moves shelved goals (of
/// this proof) back into focus.
fn is_unshelve(text: &str) -> bool {
    prod_coq::comments_stripped(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        == ["Unshelve."]
}

/// `Ok(Some(word))`: the head is an unqualified capitalised word that must be confirmed as an
/// Ltac name by Coq before the step runs.
fn check_tactic_head(text: &str, at: &str) -> Result<Option<String>, RuleError> {
    let rej = |m: String| Err(RuleError::Rejected(format!("{at}: {m}")));
    let head = sentence_head(text);
    if let Some(c) = head.controls.first() {
        return rej(format!("`{}` is a command, not a tactic", c.name));
    }
    if head.has_attributes() {
        return rej("attributes are not allowed in a proof".into());
    }
    let body = head.body.trim_start();
    match head.keyword {
        Some(k) => {
            // A qualified name (`Z.nzsimpl`, `Z.swap_greater`) is a tactic from a module: Coq's
            // commands are keywords and never qualified.
            let qualified = k.contains('.');
            if !qualified && !k.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
                // Commands are keywords (never identifiers of the context); a capitalised
                // word passes only as a confirmed Ltac name, and only when the sentence does
                // not read as a command some other way.
                if !prod_coq::is_identifier(k) || COMMAND_WORDS.contains(&k) {
                    return rej(format!(
                        "`{k}` is a command, not a tactic (only tactics, bullets and braces)"
                    ));
                }
                return Ok(Some(k.to_string()));
            }
        }
        None => {
            // Bullets and braces after a selector (`2: {`) and Ltac's `(tac)` / `[> …]`.
            let ok = body.starts_with('{')
                || (body.starts_with('(') && !body.starts_with("(*"))
                || body.starts_with('[');
            if !ok {
                return rej(format!(
                    "`{}` does not start a tactic",
                    body.chars().take(20).collect::<String>()
                ));
            }
        }
    }
    Ok(None)
}

/// Vernacular words rejected outright, before any question to Coq (the Ltac confirmation
/// would refuse them too: they are keywords, not identifiers; this list only makes the
/// reason clear and the common cheats cheap).
const COMMAND_WORDS: &[&str] = &[
    "Qed",
    "Defined",
    "Admitted",
    "Abort",
    "Save",
    "Proof",
    "Axiom",
    "Axioms",
    "Parameter",
    "Parameters",
    "Conjecture",
    "Hypothesis",
    "Variable",
    "Variables",
    "Set",
    "Unset",
    "Local",
    "Global",
    "Export",
    "Import",
    "Require",
    "Load",
    "Cd",
    "Declare",
    "Redirect",
    "Time",
    "Timeout",
    "Fail",
    "Succeed",
    "Instructions",
    "BackTo",
    "Back",
    "Reset",
    "Undo",
    "Restart",
    "Focus",
    "Unfocus",
    "Unfocused",
    "Show",
    "Print",
    "Check",
    "Eval",
    "Compute",
    "Search",
    "Locate",
    "About",
    "Extraction",
    "Recursive",
    "Separate",
    "Ltac",
    "Ltac2",
    "Tactic",
    "Notation",
    "Infix",
    "Reserved",
    "Definition",
    "Fixpoint",
    "CoFixpoint",
    "Inductive",
    "CoInductive",
    "Lemma",
    "Theorem",
    "Module",
    "End",
    "Section",
    "Hint",
    "Instance",
    "Existing",
    "Canonical",
    "Coercion",
    "Opaque",
    "Transparent",
    "Arguments",
    "Implicit",
    "Generalizable",
    "Context",
    "Let",
    "Program",
    "Obligation",
    "Next",
    "Goal",
    "Guarded",
    "Abstract",
    "Strategy",
    "Typeclasses",
    "Create",
    "Remove",
    "Add",
    "Debug",
    "Drop",
    "Quit",
    "Optimize",
    "Primitive",
    "Register",
    "Scheme",
    "Combined",
    "Derive",
    "Functional",
    "Include",
    "Universe",
    "Universes",
    "Constraint",
    "Polymorphic",
    "Monomorphic",
    "Cumulative",
    "NonCumulative",
    "Private",
    "Attributes",
    "Unshelve",
    "Grab",
    "Existential",
    "Solve",
    "Obligations",
    "Final",
    "Hammer_version",
    "Hammer_print",
    "Hammer_cleanup",
    "Hammer_objects",
    "Hammer_features",
    "Predict",
    "Hammer_features_all",
];

fn is_hammer(text: &str) -> bool {
    prod_coq::comments_stripped(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        == ["hammer."]
}

fn mentions_hammer(text: &str) -> bool {
    prod_coq::identifiers(text)
        .into_iter()
        .any(|r| &text[r] == "hammer")
}

/// Does a tactic printed by CoqHammer pass the proof rules (one tactic sentence)?
pub fn check_replacement(tactic: &str) -> Result<String, RuleError> {
    let steps = check_proof(tactic)?;
    match steps.as_slice() {
        [s] if !s.hammer => Ok(s.text.clone()),
        _ => Err(RuleError::Rejected(format!(
            "hammer printed an unusable tactic {tactic:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(r: Result<impl std::fmt::Debug, RuleError>) -> bool {
        matches!(r, Err(RuleError::Rejected(_)))
    }

    #[test]
    fn statements() {
        let s = check_statement("  Lemma foo (n : nat) : n + 0 = n.  ").unwrap();
        assert_eq!(
            (s.name.as_str(), s.text.as_str()),
            ("foo", "Lemma foo (n : nat) : n + 0 = n.")
        );
        assert_eq!(check_statement("Theorem t: True.").unwrap().name, "t");
        assert_eq!(check_statement("Property p : True.").unwrap().name, "p");
        assert_eq!(check_statement("Example e : 1 = 1.").unwrap().name, "e");
        for bad in [
            "Lemma a : True. Axiom b : False.",
            "Axiom a : False.",
            "Fail Lemma a : True.",
            "#[program] Lemma a : True.",
            "Polymorphic Lemma a : True.",
            "Lemma : True.",
            "Lemma a : True",
            "Lemma a : True (* .",
            "Lemma a : \"x\ny\" = \"\".",
            "Lemma a : True.\0",
            "Definition a : True := I.",
            "Lemma a : True with b : False.",
            "Lemma a : True.(* c *)Axiom b : False.",
        ] {
            assert!(rejected(check_statement(bad)), "{bad:?} should be rejected");
        }
        for local in ["#[local] Lemma a : True.", "Local Lemma a : True."] {
            assert_eq!(check_statement(local).unwrap().text, local);
            assert!(
                rejected(check_proposed_lemma(local)),
                "{local:?} as a proposal"
            );
        }
    }

    #[test]
    fn proofs() {
        let steps =
            check_proof(" intros n. - simpl. { lia. } 2: { auto. } hammer. (auto). [> a | b].")
                .unwrap();
        assert_eq!(steps.len(), 12);
        assert!(steps[9].hammer);
        assert!(!steps[8].hammer);
        assert!(rejected(check_proof("all: hammer.")));
        for bad in [
            "intros. Qed.",
            "Admitted.",
            "Abort.",
            "(* hidden *) Qed.",
            "Time auto.",
            "Fail auto.",
            "Redirect \"x\" auto.",
            "#[local] auto.",
            "Local Ltac x := idtac.",
            "Axiom x : False.",
            "Set Guard Checking.",
            "BackTo 1.",
            "all: Qed.",
            "solve [hammer].",
            "intros.\0",
        ] {
            assert!(rejected(check_proof(bad)), "{bad:?} should be rejected");
        }
        assert!(matches!(
            check_proof("intros. lia"),
            Err(RuleError::Syntax { step: 2, .. })
        ));
        assert!(matches!(
            check_proof("idtac \"x. "),
            Err(RuleError::Syntax { .. })
        ));
        assert_eq!(check_proof("Z.nzsimpl. auto.").unwrap().len(), 2);
    }

    #[test]
    fn glued_comments_and_kernel_bypasses_are_refused() {
        for bad in [
            "idtac.(* . Abort. Lemma goal : True. idtac *). exact I.",
            "idtac `(* . Abort. *).",
            "exact I.(**)",
            "intros x'(* c *). auto.",
            "exact_no_check I.",
            "vm_cast_no_check (eq_refl 4).",
            "native_cast_no_check I.",
            "change_no_check True.",
            "Coq.Init.Tactics.exact_no_check I.",
            "fix IH 1.",
            "exact (fix f (n : nat) : False := f n).",
            "cofix CIH.",
            "idtac..... exact I.",
        ] {
            assert!(rejected(check_proof(bad)), "{bad:?} should be rejected");
        }
        // Comments written normally, and the words inside comments or strings, are fine.
        for ok in [
            "intros. (* a comment. *) auto.",
            "(* leading *) auto. (* fix this later *)",
            "idtac \"exact_no_check\". auto.",
            "induction n as [|n IHn]; simpl; auto.",
        ] {
            assert!(check_proof(ok).is_ok(), "{ok:?} should pass");
        }
    }

    #[test]
    fn proposals_may_not_mention_each_other() {
        let st = |t: &str| check_statement(t).unwrap();
        let ok = [st("Lemma a : True."), st("Lemma b (n : nat) : n = n.")];
        let goal = st("Lemma goal : False.");
        assert!(check_proposals_independent(&ok, &goal).is_ok());
        let bad = [st("Lemma x : nat."), st("Lemma aux : x = 1.")];
        assert!(rejected(check_proposals_independent(&bad, &goal)));
        let bad = [st("Lemma aux : Top.x = 1."), st("Lemma x : nat.")];
        assert!(rejected(check_proposals_independent(&bad, &goal)));
        // The node's own statement is elaborated after its proposals.
        let captured = st("Lemma h : if negb true then True else False.");
        let negb = [st("Lemma negb : bool -> {True} + {False}.")];
        assert!(rejected(check_proposals_independent(&negb, &captured)));
    }

    #[test]
    fn capitalised_heads_wait_for_coq_and_unshelve_passes() {
        let steps = check_proof("Qc_unfolds; ring. intros. Unshelve. 2: My_tac.").unwrap();
        let heads: Vec<Option<&str>> = steps.iter().map(|s| s.ltac_head.as_deref()).collect();
        assert_eq!(heads, [Some("Qc_unfolds"), None, None, Some("My_tac")]);
        for bad in [
            "Qed.",
            "Print Assumptions x.",
            "Grab Existential Variables.",
            "Unshelve. Qed.",
            "Show.",
        ] {
            assert!(rejected(check_proof(bad)), "{bad:?} should be rejected");
        }
    }
}

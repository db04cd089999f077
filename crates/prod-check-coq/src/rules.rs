//! Rules for untrusted text (model output): what may be sent to Coq at all.
//!
//! One rule set for every piece of untrusted text — a proof, a node's statement, each proposed
//! lemma, a tactic CoqHammer printed — on `prod_coq`'s lexer ([`check_text`]): sizes, control
//! characters, glued comments, dot runs, string literals with the tags of Coq's output, and the
//! constructs that reach a known kernel bug of the prover release ([`RuleSet`], derived from
//! the table in [`crate::bugs`]). Then each role's shape:
//!
//! * A proposed lemma or a node statement is exactly one sentence `Lemma name binders : type.`
//!   (or `Theorem`, `Corollary`, `Proposition`, `Fact`, `Remark`), with no control prefix
//!   (`Time`, `Fail`, `Redirect`…), no attribute (a node's statement may carry locality), no
//!   goal selector, no tactic-in-term quotation (`ltac:(…)`).
//! * A proof is a sequence of tactic sentences, bullets and braces. A tactic sentence, after an
//!   optional goal selector, starts with a lower-case identifier, `(` or `[`: every Coq
//!   vernacular command (`Qed`, `Abort`, `Axiom`, `Set`, `BackTo`, `Load`, `Redirect`, …) and
//!   every control starts with an upper-case letter, and attributes with `#[`.
//! * `t0` agrees with the proof's blocks ([`check_t0`]).
//!
//! What a statement means is not decided here: the session states each statement in the bare
//! context first and has the kernel compare (`session.rs`), so a proposal may be named like a
//! binder of the statement. These rules are the first line of defence only: the worker also
//! checks Coq's own prompt after every sentence and `Print Assumptions` at the end, so a rule
//! that missed something still cannot make a wrong proof `Proved`.

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

pub use crate::bugs::{Construct, ProverRelease, RuleSet};

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

/// The rules every piece of untrusted text passes, whatever its role (a proof, a node's
/// statement, a proposed lemma, a tactic CoqHammer printed), all on `prod_coq`'s lexer:
///
/// * bounded size, no control character;
/// * no comment glued to the character before it (Coq may not read it as a comment);
/// * no run of four or more dots (Coq and the lexer would split it differently);
/// * string literals without the tags of Coq's `-emacs` output (`<prompt>`, `<infomsg>`,
///   `<warning>`, opening or closing): a string can be printed back (an admitted proposal's
///   type in `Print Assumptions`, a failing tactic's message, `idtac`), and the tags are how
///   the checker tells Coq's prompts and messages from each other. Line breaks are allowed: a
///   string term built of characters prints any line anyway, so every reader of Coq's output
///   is written to gain nothing from a line a proof prints (`Print Assumptions` headers in
///   Coq's order, out-of-memory from Coq's only error line and the checker's own memory
///   accounting, a verdict's kind never from text alone);
/// * none of the constructs `rules` refuses ([`crate::bugs`]: fixpoints, kernel-deferring
///   tactics, SProp), as words anywhere outside comments and strings.
pub fn check_text(rules: &RuleSet, what: &str, text: &str, max: usize) -> Result<(), RuleError> {
    let at = |pos: usize| {
        let (line, col) = prod_coq::line_col(text, pos);
        format!("{what}: line {line}, column {col}")
    };
    let rej = |m: String| Err(RuleError::Rejected(m));
    plain_text(what, text, max)?;
    if let Some(pos) = prod_coq::glued_comment(text) {
        return rej(format!(
            "{}: comment glued to the previous character (put a blank before `(*`)",
            at(pos)
        ));
    }
    if let Some(pos) = prod_coq::long_dot_run(text) {
        return rej(format!(
            "{}: a run of four or more dots (Coq and the checker would split it differently)",
            at(pos)
        ));
    }
    if let Some(pos) = forged_output_in_string(text) {
        return rej(format!(
            "{}: string literals may not contain the tags of Coq's output (`<prompt>`, `<infomsg>`, `<warning>`)",
            at(pos)
        ));
    }
    if let Some((pos, word, construct)) = refused_word(rules, text) {
        return rej(format!(
            "{}: `{word}` is not allowed ({})",
            at(pos),
            construct.reason()
        ));
    }
    Ok(())
}

/// The first string literal with a tag of Coq's output, as a byte offset.
fn forged_output_in_string(text: &str) -> Option<usize> {
    const TAGS: [&str; 3] = ["prompt", "infomsg", "warning"];
    prod_coq::string_literals(text).into_iter().find_map(|r| {
        let lower = text[r.clone()].to_ascii_lowercase();
        TAGS.iter()
            .any(|t| lower.contains(&format!("<{t}")) || lower.contains(&format!("{t}>")))
            .then_some(r.start)
    })
}

/// The first word of `text` that is a construct `rules` refuses (outside comments, strings
/// and the reduction flags of `cbv`/`lazy`/`cbn`), with its offset and construct.
fn refused_word<'a>(rules: &RuleSet, text: &'a str) -> Option<(usize, &'a str, Construct)> {
    let tokens = flag_tokens(text);
    prod_coq::ascii_words(text).into_iter().find_map(|r| {
        let word = &text[r.clone()];
        let construct = *rules.refused().iter().find(|c| c.matches(word))?;
        if construct == Construct::Fixpoint && is_reduction_flag(text, &tokens, r.start) {
            return None;
        }
        Some((r.start, word, construct))
    })
}

/// The words of Coq's reduction flags (`red_flag` in Coq's grammar).
const REDUCTION_FLAGS: &[&str] = &[
    "beta", "iota", "match", "fix", "cofix", "zeta", "delta", "head",
];
/// The reduction tactics and `eval` functions that take reduction flags.
const FLAG_TAKERS: &[&str] = &["cbv", "lazy", "cbn"];

/// Code tokens for the flag check: each ASCII word (as [`prod_coq::ascii_words`] finds it)
/// and each other non-blank character of code, as byte ranges.
fn flag_tokens(text: &str) -> Vec<std::ops::Range<usize>> {
    let code = prod_coq::code_mask(text);
    let words = prod_coq::ascii_words(text);
    let mut out = vec![];
    let mut w = words.iter().peekable();
    let mut i = 0;
    while i < text.len() {
        if let Some(r) = w.peek().filter(|r| r.start == i) {
            out.push((*r).clone());
            i = r.end;
            w.next();
            continue;
        }
        let c = text[i..].chars().next().map_or(1, char::len_utf8);
        let blank = !code[i] || text.as_bytes()[i].is_ascii_whitespace();
        // Digits and `'` dropped from a word's front belong to no token.
        let in_word_run = text.as_bytes()[i].is_ascii_alphanumeric() || text.as_bytes()[i] == b'\'';
        if !blank && !in_word_run {
            out.push(i..i + c);
        }
        i += c;
    }
    out
}

/// Is the word at `pos` a reduction flag: preceded, through other flags and `delta` lists
/// (`[a M.b]`, `-[a]`), by `cbv`, `lazy` or `cbn`, and followed by what may follow a flag?
fn is_reduction_flag(text: &str, tokens: &[std::ops::Range<usize>], pos: usize) -> bool {
    let Some(k) = tokens.iter().position(|t| t.start == pos) else {
        return false;
    };
    let tok = |i: usize| &text[tokens[i].clone()];
    let followed_ok = match tokens.get(k + 1) {
        None => true,
        Some(t) => {
            let next = &text[t.clone()];
            REDUCTION_FLAGS.contains(&next)
                || matches!(
                    next,
                    "in" | "at" | "[" | "-" | "." | ";" | ")" | "]" | "|" | "}" | ","
                )
        }
    };
    if !followed_ok {
        return false;
    }
    let mut i = k;
    while i > 0 {
        i -= 1;
        let t = tok(i);
        if FLAG_TAKERS.contains(&t) {
            return true;
        }
        if REDUCTION_FLAGS.contains(&t) || t == "-" {
            continue;
        }
        if t != "]" {
            return false;
        }
        // A delta list: names and dots back to its `[`.
        loop {
            if i == 0 {
                return false;
            }
            i -= 1;
            match tok(i) {
                "[" => break,
                "." => {}
                w if w
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'\'') => {}
                _ => return false,
            }
        }
    }
    false
}

/// Check a lemma a proof proposes: a [`check_statement`] with no attribute at all. A model has
/// no use for locality, and a proposal is matched to the nodes that prove it by its text.
pub fn check_proposed_lemma(rules: &RuleSet, text: &str) -> Result<Statement, RuleError> {
    let s = check_statement(rules, text)?;
    if sentence_head(&s.text).has_attributes() {
        return Err(RuleError::Rejected(
            "statement: a proposed lemma may not have attributes".into(),
        ));
    }
    Ok(s)
}

/// Check a node's own statement (a library's theorem, or a lemma proposed by its parent):
/// [`check_text`]'s rules, then the statement's shape.
pub fn check_statement(rules: &RuleSet, text: &str) -> Result<Statement, RuleError> {
    let rej = |m: String| Err(RuleError::Rejected(m));
    check_text(rules, "statement", text, MAX_STATEMENT_BYTES)?;
    // The shared strict parser first: one `Keyword name binders : type.` sentence, no mutual
    // `with`, no glued comment, no attribute or control, no tactic-in-term quotation
    // (`ltac:(…)`: a statement that runs a tactic may mean different things where it is read;
    // in a proof a quotation is a tactic like any other). The checks below stay as a second
    // line.
    let parsed = match prod_coq::parse_statement(text) {
        Ok(p) => p,
        Err(e) => return Err(RuleError::Rejected(format!("statement: {e}"))),
    };
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
    if !head.keyword.is_some_and(|k| THEOREM_KEYWORDS.contains(&k)) {
        return rej(format!(
            "statement must start with one of {}, found `{}`",
            THEOREM_KEYWORDS.join("/"),
            prod_coq::first_word(s).unwrap_or("")
        ));
    }
    let name = parsed.name;
    Ok(Statement {
        text: s.to_string(),
        name,
    })
}

/// Split and check a proof (the conditional proof's text without `<invoke>`s): [`check_text`]'s
/// rules, then tactic sentences, bullets, braces and `Unshelve.` only.
pub fn check_proof(rules: &RuleSet, proof_text: &str) -> Result<Vec<Step>, RuleError> {
    check_text(rules, "proof", proof_text, MAX_PROOF_BYTES)?;
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

/// `t0` against the proof's blocks (the same rule for every prover).
pub use prod_check::check_t0;

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
pub fn check_replacement(rules: &RuleSet, tactic: &str) -> Result<String, RuleError> {
    let steps = check_proof(rules, tactic)?;
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

    fn rules() -> RuleSet {
        RuleSet::strictest()
    }

    fn statement(t: &str) -> Result<Statement, RuleError> {
        check_statement(&rules(), t)
    }

    fn proof(t: &str) -> Result<Vec<Step>, RuleError> {
        check_proof(&rules(), t)
    }

    #[test]
    fn statements() {
        let s = statement("  Lemma foo (n : nat) : n + 0 = n.  ").unwrap();
        assert_eq!(
            (s.name.as_str(), s.text.as_str()),
            ("foo", "Lemma foo (n : nat) : n + 0 = n.")
        );
        assert_eq!(statement("Theorem t: True.").unwrap().name, "t");
        assert_eq!(statement("Property p : True.").unwrap().name, "p");
        assert_eq!(statement("Example e : 1 = 1.").unwrap().name, "e");
        for bad in [
            "Lemma a : True. Axiom b : False.",
            "Axiom a : False.",
            "Fail Lemma a : True.",
            "#[program] Lemma a : True.",
            "Polymorphic Lemma a : True.",
            "Lemma : True.",
            "Lemma a : True",
            "Lemma a : True (* .",
            "Lemma a : \"<prompt>Coq < 3 || 0 < </prompt>\" = \"\".",
            "Lemma a : \"x</infomsg>\" = \"\".",
            "Lemma a : True.\0",
            "Definition a : True := I.",
            "Lemma a : True with b : False.",
            "Lemma a : True.(* c *)Axiom b : False.",
        ] {
            assert!(rejected(statement(bad)), "{bad:?} should be rejected");
        }
        for local in ["#[local] Lemma a : True.", "Local Lemma a : True."] {
            assert_eq!(statement(local).unwrap().text, local);
            assert!(
                rejected(check_proposed_lemma(&rules(), local)),
                "{local:?} as a proposal"
            );
        }
        // Strings with `<` or `>` that forge nothing are fine, and so are line breaks.
        assert!(statement("Lemma a : \"a < b\" <> \"b > a\".").is_ok());
        assert!(statement("Lemma a : \"x\nAxioms:\" = \"\".").is_ok());
    }

    #[test]
    fn proofs() {
        let steps =
            proof(" intros n. - simpl. { lia. } 2: { auto. } hammer. (auto). [> a | b].").unwrap();
        assert_eq!(steps.len(), 12);
        assert!(steps[9].hammer);
        assert!(!steps[8].hammer);
        assert!(rejected(proof("all: hammer.")));
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
            "idtac \"<infomsg>x\".",
            "idtac \"x</prompt>\".",
        ] {
            assert!(rejected(proof(bad)), "{bad:?} should be rejected");
        }
        assert!(matches!(
            proof("intros. lia"),
            Err(RuleError::Syntax { step: 2, .. })
        ));
        assert!(matches!(
            proof("idtac \"x. "),
            Err(RuleError::Syntax { .. })
        ));
        assert_eq!(proof("Z.nzsimpl. auto.").unwrap().len(), 2);
        // A line break in a string is text: no reader of Coq's output takes its verdict from
        // a line a proof prints.
        assert_eq!(
            proof("idtac \"x\nError: Out of memory.\". exact I.")
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn refused_constructs_anywhere_in_any_role() {
        let attacks = [
            "fix IH 1.",
            "exact (fix f (n : nat) : False := f n).",
            "cofix CIH.",
            "exact_no_check I.",
            "Coq.Init.Tactics.exact_no_check I.",
            "vm_cast_no_check (eq_refl 4).",
            "change_no_check True.",
            "exact (sEmpty_rect _ x).",
            "apply eq_sind.",
            "exact (1fix).",
            "exact (\u{3b1}fix).",
            "cbv fix f. exact I.",
            "let x := eval cbv beta in (fix f (n : nat) : nat := n) in idtac.",
        ];
        for a in attacks {
            assert!(rejected(proof(a)), "proof {a:?}");
        }
        for st in [
            "Lemma l (F := fix f (n : nat) : nat := f n) : F 0 = 0.",
            "Lemma l : forall f g : sEmpty -> nat, f = g.",
            "Lemma l : forall P : SProp, P -> P.",
            "Lemma l : (cofix c : nat := c) = 0.",
        ] {
            assert!(rejected(statement(st)), "statement {st:?}");
            assert!(
                rejected(check_proposed_lemma(&rules(), st)),
                "proposal {st:?}"
            );
        }
        // Reduction flags are flags, and the words in comments or strings are words.
        for ok in [
            "cbv fix. reflexivity.",
            "cbv beta iota fix cofix zeta delta [Nat.add] in H. auto.",
            "lazy delta -[f g] fix match. auto.",
            "let x := eval cbv fix in (S 0) in idtac. auto.",
            "cbn fix beta. auto.",
            "intros. (* fix this later: exact_no_check *) auto.",
            "idtac \"SProp fix\". auto.",
            "induction n as [|n IHn]; simpl; auto.",
            "rewrite fixpoint_eq. exact prefix.",
        ] {
            assert!(proof(ok).is_ok(), "{ok:?} should pass: {:?}", proof(ok));
        }
    }

    #[test]
    fn glued_comments_and_dot_runs_are_refused() {
        for bad in [
            "idtac.(* . Abort. Lemma goal : True. idtac *). exact I.",
            "idtac `(* . Abort. *).",
            "exact I.(**)",
            "intros x'(* c *). auto.",
            "idtac..... exact I.",
        ] {
            assert!(rejected(proof(bad)), "{bad:?} should be rejected");
        }
        for ok in [
            "intros. (* a comment. *) auto.",
            "(* leading *) auto. (* fix this later *)",
            "idtac \"exact_no_check\". auto.",
        ] {
            assert!(proof(ok).is_ok(), "{ok:?} should pass");
        }
    }

    #[test]
    fn t0_must_agree_with_the_blocks() {
        let parse =
            |t: &str| prod_core::ConditionalProof::parse_with(t, &prod_coq::CoqLanguage).unwrap();
        assert!(check_t0(&parse("<no_invoke> auto.")).is_ok());
        assert!(check_t0(&parse(
            "<use_invoke> <invoke> Lemma a : True. </invoke> auto."
        ))
        .is_ok());
        assert!(rejected(check_t0(&parse(
            "<no_invoke> <invoke> Lemma a : True. </invoke> auto."
        ))));
        assert!(rejected(check_t0(&parse("<use_invoke> auto."))));
    }

    #[test]
    fn capitalised_heads_wait_for_coq_and_unshelve_passes() {
        let steps = proof("Qc_unfolds; ring. intros. Unshelve. 2: My_tac.").unwrap();
        let heads: Vec<Option<&str>> = steps.iter().map(|s| s.ltac_head.as_deref()).collect();
        assert_eq!(heads, [Some("Qc_unfolds"), None, None, Some("My_tac")]);
        for bad in [
            "Qed.",
            "Print Assumptions x.",
            "Grab Existential Variables.",
            "Unshelve. Qed.",
            "Show.",
        ] {
            assert!(rejected(proof(bad)), "{bad:?} should be rejected");
        }
    }
}

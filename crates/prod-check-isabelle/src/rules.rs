//! Rules for untrusted text (model output): what may be sent to Isabelle at all.
//!
//! Isabelle's PIDE runs commands in interactive mode, where `sorry` is accepted silently whatever
//! `quick_and_dirty` says, and `oops` abandons a goal without an error. So the text is tokenised
//! with the Isar lexer of `prod-isar` and checked before any server call:
//!
//! * a statement (the node's or a proposed lemma) is exactly one `lemma`/`theorem`/`corollary`/
//!   `proposition` command: no other command keyword may follow;
//! * a proof is a sequence of *proof* commands (allow-list below) whose goal depth, counted as
//!   Isabelle does (`have`/`show`/`obtain`/… and `{` open, `by`/`.`/`..`/`done`/`qed` and `}`
//!   close), reaches zero exactly at its last command: nothing may run after the goal is closed;
//! * anywhere in the text — inside strings, cartouches and comments too, because methods such as
//!   Eisbach's `match` parse cartouches as Isar source — the words `sorry`, `oops`, `ML…`, `SML…`,
//!   `setup` (all `*_setup`), `oracle`, `axiomatization`, `quick_and_dirty`, `skip_proofs`,
//!   `tactic`, `raw_tactic`, `declaration`, and the checker's reserved `PRODCHK` prefix are
//!   rejected, as are the symbol `\<proof>`, antiquotations `@{…}` and control symbols `\<^…>`
//!   other than sub/superscripts and bold;
//! * no control characters but tab and line breaks; bounded sizes.
//!
//! These rules are the first line of defence only: the generated theory also makes Isabelle
//! audit the goal's theorem for oracles and new axioms (see [`crate::theory`]), so a rule that
//! missed something still cannot make a wrong proof `Proved`.

use std::ops::Range;

use prod_isar::{lex, Token, TokenKind};

/// Longest statement accepted (bytes).
pub const MAX_STATEMENT_BYTES: usize = 20_000;
/// Longest proof accepted (bytes).
pub const MAX_PROOF_BYTES: usize = 200_000;
/// Most commands in one proof.
pub const MAX_PROOF_STEPS: usize = 5_000;

/// Keywords that may start a statement (paper: lemma-like statements of the AFP).
pub const STATEMENT_KEYWORDS: [&str; 4] = ["lemma", "theorem", "corollary", "proposition"];

/// The step the model writes where a premise-selection tool should find the proof.
pub const HAMMER: &str = "sledgehammer";

/// Prefix of every name the checker writes into a theory; untrusted text may not mention it.
pub const RESERVED_PREFIX: &str = "PRODCHK";

/// How a proof command changes the goal depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Opens a (sub)goal or block: `have show obtain consider interpret subgoal {` (+1).
    Open,
    /// Closes the innermost goal or block: `by . .. done qed }` (−1).
    Close,
    /// Everything else allowed in a proof (`proof next using fix assume apply …`).
    Neutral,
    /// The `sledgehammer` step, replaced by a closing method (−1).
    Hammer,
}

/// The proof commands allowed in untrusted text, with their effect on the depth
/// (kinds from `Pure.thy`/`keyword.ML`: prf_goal, prf_asm_goal, prf_script_goal and prf_open
/// open; qed, qed_script, qed_block and prf_close close).
const PROOF_COMMANDS: &[(&str, Effect)] = &[
    ("have", Effect::Open),
    ("hence", Effect::Open),
    ("show", Effect::Open),
    ("thus", Effect::Open),
    ("obtain", Effect::Open),
    ("consider", Effect::Open),
    ("interpret", Effect::Open),
    ("subgoal", Effect::Open),
    ("{", Effect::Open),
    ("by", Effect::Close),
    (".", Effect::Close),
    ("..", Effect::Close),
    ("done", Effect::Close),
    ("qed", Effect::Close),
    ("}", Effect::Close),
    ("proof", Effect::Neutral),
    ("next", Effect::Neutral),
    ("then", Effect::Neutral),
    ("from", Effect::Neutral),
    ("with", Effect::Neutral),
    ("finally", Effect::Neutral),
    ("ultimately", Effect::Neutral),
    ("also", Effect::Neutral),
    ("moreover", Effect::Neutral),
    ("note", Effect::Neutral),
    ("using", Effect::Neutral),
    ("unfolding", Effect::Neutral),
    ("let", Effect::Neutral),
    ("write", Effect::Neutral),
    ("include", Effect::Neutral),
    ("including", Effect::Neutral),
    ("supply", Effect::Neutral),
    ("defer", Effect::Neutral),
    ("prefer", Effect::Neutral),
    ("apply", Effect::Neutral),
    ("apply_end", Effect::Neutral),
    ("back", Effect::Neutral),
    ("fix", Effect::Neutral),
    ("assume", Effect::Neutral),
    ("presume", Effect::Neutral),
    ("define", Effect::Neutral),
    ("case", Effect::Neutral),
    (HAMMER, Effect::Hammer),
];

/// Command keywords of Pure and HOL that are not allowed in untrusted proofs (theory-level,
/// diagnostic, document and cheating commands). A word in this list, outside strings and
/// cartouches, starts a command in Isabelle, so it is rejected wherever it stands.
const OTHER_COMMANDS: &[&str] = &[
    // cheating and closing everything
    "sorry",
    "oops",
    "\\<proof>",
    // theory structure and document
    "theory",
    "begin",
    "end",
    "context",
    "locale",
    "experiment",
    "class",
    "instantiation",
    "overloading",
    "notepad",
    "bundle",
    "open_bundle",
    "unbundle",
    "chapter",
    "section",
    "subsection",
    "subsubsection",
    "paragraph",
    "subparagraph",
    "text",
    "txt",
    "text_raw",
    // statements and specifications
    "lemma",
    "theorem",
    "corollary",
    "proposition",
    "schematic_goal",
    "lemmas",
    "declare",
    "definition",
    "abbreviation",
    "axiomatization",
    "consts",
    "typedecl",
    "type_synonym",
    "nonterminal",
    "judgment",
    "syntax",
    "no_syntax",
    "translations",
    "no_translations",
    "notation",
    "no_notation",
    "type_notation",
    "no_type_notation",
    "alias",
    "type_alias",
    "hide_class",
    "hide_type",
    "hide_const",
    "hide_fact",
    "named_theorems",
    "default_sort",
    "interpretation",
    "global_interpretation",
    "sublocale",
    "subclass",
    "instance",
    "function",
    "termination",
    "fun",
    "primrec",
    "datatype",
    "codatatype",
    "primcorec",
    "primcorecursive",
    "inductive",
    "coinductive",
    "inductive_set",
    "coinductive_set",
    "inductive_cases",
    "inductive_simps",
    "record",
    "typedef",
    "lift_definition",
    "specification",
    "partial_function",
    "quotient_type",
    "quotient_definition",
    "nominal_datatype",
    "fixrec",
    "domain",
    "method",
    "code_pred",
    "export_code",
    "code_printing",
    "code_reflect",
    "setup_lifting",
    "free_constructors",
    "old_rep_datatype",
    "functor",
    "bnf",
    // ML and other code
    "ML",
    "ML_prf",
    "ML_val",
    "ML_command",
    "ML_file",
    "ML_export",
    "ML_import",
    "SML_file",
    "SML_import",
    "SML_export",
    "setup",
    "local_setup",
    "attribute_setup",
    "method_setup",
    "simproc_setup",
    "declaration",
    "syntax_declaration",
    "oracle",
    "parse_translation",
    "print_translation",
    "parse_ast_translation",
    "print_ast_translation",
    "typed_print_translation",
    "external_file",
    "generate_file",
    // diagnostics
    "thm",
    "term",
    "typ",
    "prop",
    "value",
    "values",
    "prf",
    "full_prf",
    "thm_deps",
    "thm_oracles",
    "find_theorems",
    "find_consts",
    "print_state",
    "print_statement",
    "nitpick",
    "quickcheck",
    "refute",
    "try",
    "try0",
    "solve_direct",
    "welcome",
    "help",
];

/// Words rejected anywhere in untrusted text, even inside strings, cartouches and comments.
const BANNED_WORDS: &[&str] = &[
    "sorry",
    "oops",
    "ML",
    "SML",
    "setup",
    "oracle",
    "axiomatization",
    "axioms",
    "quick_and_dirty",
    "skip_proofs",
    "skip_proof",
    "Skip_Proof",
    "cheat_tac",
    "tactic",
    "raw_tactic",
    "declaration",
];

/// Control symbols allowed in untrusted text (layout of identifiers and terms only).
const ALLOWED_CONTROL_SYMBOLS: &[&str] = &[
    "\\<^sub>",
    "\\<^sup>",
    "\\<^bsub>",
    "\\<^esub>",
    "\\<^bsup>",
    "\\<^esup>",
    "\\<^bold>",
    "\\<^isub>",
    "\\<^isup>",
];

/// Why the text cannot be run (shared with every backend).
pub use prod_check::RuleError;

/// A checked statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// The text as written (trimmed).
    pub text: String,
    /// `lemma`, `theorem`, `corollary` or `proposition`.
    pub keyword: String,
    /// The statement's name, if it has one (`lemma foo: …`).
    pub name: Option<String>,
    /// Byte range of the name in `text`, or the empty range where a name can be inserted.
    pub name_range: Range<usize>,
}

impl Statement {
    /// The statement with its name replaced by (or given) `name`.
    pub fn renamed(&self, name: &str) -> String {
        let r = &self.name_range;
        if self.name.is_some() {
            format!("{}{}{}", &self.text[..r.start], name, &self.text[r.end..])
        } else {
            // Unnamed: `lemma "P"` → `lemma NAME: "P"`, `lemma [simp]: "P"` → `lemma NAME[simp]: "P"`.
            let rest = &self.text[r.start..];
            let sep = if rest.trim_start().starts_with('[') {
                ""
            } else {
                ":"
            };
            format!(
                "{} {}{} {}",
                &self.text[..r.start].trim_end(),
                name,
                sep,
                rest.trim_start()
            )
        }
    }
}

/// One proof command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The command's text (from its keyword to the next command), trailing blanks excluded.
    pub text: String,
    /// Byte range of `text` in the proof text.
    pub range: Range<usize>,
    /// The command keyword.
    pub command: String,
    pub effect: Effect,
}

impl Step {
    pub fn is_hammer(&self) -> bool {
        self.effect == Effect::Hammer
    }
}

fn proof_effect(word: &str) -> Option<Effect> {
    PROOF_COMMANDS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, e)| *e)
}

/// The command keywords known to the rules: our list, `prod-isar`'s Pure + HOL table with every
/// distribution group, and any extra declarations (e.g. the keywords of the AFP theories a
/// session imports). A known command that is not a proof command is rejected wherever it
/// stands; an unknown one is just a word to us, which is why the table should cover the session.
#[derive(Clone, Debug)]
pub struct Rules {
    table: prod_isar::keywords::KeywordTable,
}

impl Rules {
    /// The built-in tables only.
    pub fn standard() -> &'static Rules {
        static STANDARD: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();
        STANDARD.get_or_init(|| Rules::with_keywords("").unwrap_or_else(|_| Rules::bare()))
    }

    fn bare() -> Rules {
        Rules {
            table: prod_isar::keywords::KeywordTable::hol(),
        }
    }

    /// The built-in tables plus `decls`, in the syntax of a theory header's `keywords` section
    /// (`"foo" :: thy_decl and "bar" :: prf_decl`).
    pub fn with_keywords(decls: &str) -> Result<Rules, String> {
        let mut r = Rules::bare();
        let every_group: Vec<&str> = prod_isar::keywords::DISTRIBUTION_GROUPS
            .iter()
            .flat_map(|(prefixes, _)| prefixes.iter().copied())
            .collect();
        r.table.add_distribution_imports(every_group);
        if !decls.trim().is_empty() {
            let (ds, errors) = prod_isar::header::parse_keyword_decls(decls);
            if let Some(e) = errors.first() {
                return Err(format!("keyword declarations: {e:?}"));
            }
            for d in ds {
                r.table.add(&d.name, d.kind);
            }
        }
        Ok(r)
    }

    fn is_command(&self, word: &str) -> bool {
        proof_effect(word).is_some()
            || OTHER_COMMANDS.contains(&word)
            || self.table.is_command(word)
    }

    /// Is this token a command keyword (one that starts a command span)?
    fn command_word<'a>(&self, t: &Token, src: &'a str) -> Option<&'a str> {
        let text = t.text(src);
        match t.kind {
            TokenKind::Ident | TokenKind::Keyword | TokenKind::SymIdent => {
                self.is_command(text).then_some(text)
            }
            _ => None,
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    prod_isar::lexer::line_col(text, offset)
}

/// Size, control characters and the word-level bans (see the module documentation).
fn plain_text(what: &str, text: &str, max: usize) -> Result<(), RuleError> {
    let rej = |m: String| Err(RuleError::Rejected(m));
    if text.len() > max {
        return rej(format!(
            "{what} is too long ({} bytes, at most {max})",
            text.len()
        ));
    }
    if let Some((i, c)) = text
        .char_indices()
        .find(|&(_, c)| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        let (line, col) = line_col(text, i);
        return rej(format!(
            "{what}: control character U+{:04X} at line {line}, column {col}",
            c as u32
        ));
    }
    let at = |i: usize| {
        let (line, col) = line_col(text, i);
        format!("{what}, line {line}, column {col}")
    };
    // Words: maximal runs of ASCII letters, digits, `_` and `'` (Isabelle's quasi-letters).
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphanumeric() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'\'') {
                i += 1;
            }
            let word = &text[start..i];
            // The word inside `\<name>` is a symbol name, not a word (`\<ML>` does not exist, but
            // `\<open>` must not be read as `open`).
            let in_symbol = start >= 2 && &b[start - 2..start] == b"\\<";
            let in_control = start >= 3 && &b[start - 3..start] == b"\\<^";
            if in_symbol || in_control {
                continue;
            }
            if BANNED_WORDS.contains(&word)
                || word.starts_with("ML_")
                || word.starts_with("SML_")
                || word.ends_with("_setup")
                || word.contains(RESERVED_PREFIX)
            {
                return rej(format!(
                    "{}: `{word}` is not allowed in untrusted text",
                    at(start)
                ));
            }
            continue;
        }
        if text[i..].starts_with("\\<proof>") {
            return rej(format!("{}: `\\<proof>` is not allowed", at(i)));
        }
        if text[i..].starts_with("\\<^") {
            let end = text[i..].find('>').map(|e| i + e + 1).unwrap_or(text.len());
            let sym = &text[i..end];
            if !ALLOWED_CONTROL_SYMBOLS.contains(&sym) {
                return rej(format!("{}: control symbol `{sym}` is not allowed", at(i)));
            }
            i = end;
            continue;
        }
        if text[i..].starts_with("@{") {
            return rej(format!(
                "{}: antiquotations `@{{…}}` are not allowed",
                at(i)
            ));
        }
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    Ok(())
}

/// Lex, reporting the first lexical error as a syntax problem at `step`.
fn lexed(what: &str, text: &str, step: usize) -> Result<Vec<Token>, RuleError> {
    let (tokens, errors) = lex(text);
    if let Some(e) = errors.first() {
        let (line, col) = line_col(text, e.offset);
        return Err(RuleError::Syntax {
            step,
            message: format!("{what}, line {line}, column {col}: {}", e.message),
        });
    }
    Ok(tokens)
}

/// Check a statement with the standard rules.
pub fn check_statement(text: &str) -> Result<Statement, RuleError> {
    Rules::standard().check_statement(text)
}

/// Check a proof with the standard rules.
pub fn check_proof(proof_text: &str) -> Result<Vec<Step>, RuleError> {
    Rules::standard().check_proof(proof_text)
}

/// Check a Sledgehammer suggestion with the standard rules.
pub fn check_replacement(text: &str) -> Result<String, RuleError> {
    Rules::standard().check_replacement(text)
}

impl Rules {
    /// Check a statement (a proposed lemma or the node's own statement).
    pub fn check_statement(&self, text: &str) -> Result<Statement, RuleError> {
        let rej = |m: String| Err(RuleError::Rejected(m));
        let text = text.trim();
        plain_text("statement", text, MAX_STATEMENT_BYTES)?;
        let tokens = match lexed("statement", text, 0) {
            Ok(t) => t,
            Err(RuleError::Syntax { message, .. }) => return rej(message),
            Err(e) => return Err(e),
        };
        let proper: Vec<&Token> = tokens.iter().filter(|t| !t.is_improper()).collect();
        let Some(first) = proper.first() else {
            return rej("statement is empty".into());
        };
        let keyword = first.text(text);
        if first.kind != TokenKind::Ident || !STATEMENT_KEYWORDS.contains(&keyword) {
            return rej(format!(
                "statement must start with one of {}, found `{}`",
                STATEMENT_KEYWORDS.join("/"),
                keyword
            ));
        }
        if let Some(t) = proper[1..]
            .iter()
            .find(|t| self.command_word(t, text).is_some())
        {
            let (line, col) = line_col(text, t.range.start);
            return rej(format!(
            "statement must be a single `{keyword}` command; `{}` at line {line}, column {col} starts another command",
            t.text(text)
        ));
        }
        // Optional target `(in loc)` / `(open)`, then the optional name before `[` or `:`.
        let mut k = 1;
        if proper.get(k).map(|t| t.text(text)) == Some("(") {
            let close = proper[k..].iter().position(|t| t.text(text) == ")");
            match close {
                Some(c) if c <= 3 => k += c + 1,
                _ => return rej("statement: malformed `(in locale)` target".into()),
            }
        }
        let (name, name_range) = match (proper.get(k), proper.get(k + 1)) {
            (Some(n), Some(next))
                if n.kind == TokenKind::Ident && matches!(next.text(text), ":" | "[") =>
            {
                (Some(n.text(text).to_string()), n.range.clone())
            }
            (Some(n), _) => (None, n.range.start..n.range.start),
            (None, _) => return rej("statement has no proposition".into()),
        };
        if proper.len() <= k + if name.is_some() { 2 } else { 0 } {
            return rej("statement has no proposition".into());
        }
        Ok(Statement {
            text: text.to_string(),
            keyword: keyword.to_string(),
            name,
            name_range,
        })
    }

    /// Split and check a proof (the conditional proof's text without `<invoke>`s). The goal the
    /// proof is about counts as depth 1; the depth must reach 0 exactly at the last command.
    pub fn check_proof(&self, proof_text: &str) -> Result<Vec<Step>, RuleError> {
        self.check_closing_text("proof", proof_text, 1)
    }

    /// Split and check a text that must close `depth0` goals exactly at its last command (a
    /// proof, or Sledgehammer's suggestion): only proof commands, none after the goal is closed.
    fn check_closing_text(
        &self,
        what: &str,
        text: &str,
        depth0: i64,
    ) -> Result<Vec<Step>, RuleError> {
        plain_text(what, text, MAX_PROOF_BYTES)?;
        let tokens = lexed(what, text, 1)?;
        let starts = self.command_starts(what, text, &tokens)?;
        let mut steps = Vec::with_capacity(starts.len());
        let mut depth = depth0;
        for n in 0..starts.len() {
            let step = checked_step(text, &tokens, &starts, n, depth)?;
            match step.effect {
                Effect::Open => depth += 1,
                Effect::Close | Effect::Hammer => depth -= 1,
                Effect::Neutral => {}
            }
            steps.push(step);
        }
        if depth > 0 {
            let message = format!(
                "the {what} does not finish its goal ({depth} goal(s) or block(s) still open after the last command)"
            );
            return Err(RuleError::Syntax {
                step: steps.len() + 1,
                message,
            });
        }
        Ok(steps)
    }

    /// Split the tokens into command spans, as (token index, command word): nothing but blanks
    /// and comments may come before the first command, and the count is bounded.
    fn command_starts<'t>(
        &self,
        what: &str,
        text: &'t str,
        tokens: &[Token],
    ) -> Result<Vec<(usize, &'t str)>, RuleError> {
        let rej = |m: String| Err(RuleError::Rejected(m));
        let mut starts: Vec<(usize, &str)> = vec![]; // (token index, command word)
        for (i, t) in tokens.iter().enumerate() {
            if let Some(w) = self.command_word(t, text) {
                starts.push((i, w));
            } else if starts.is_empty() && !t.is_improper() {
                let (line, col) = line_col(text, t.range.start);
                return rej(format!(
                    "{what}: `{}` at line {line}, column {col} is not a proof command",
                    t.text(text)
                ));
            }
        }
        if starts.is_empty() {
            return Err(RuleError::Syntax {
                step: 1,
                message: format!("{what} is empty"),
            });
        }
        if starts.len() > MAX_PROOF_STEPS {
            return rej(format!("{what} has more than {MAX_PROOF_STEPS} commands"));
        }
        Ok(starts)
    }

    /// Does a replacement printed by Sledgehammer (`by (metis foo)`, `using a by blast`) pass the
    /// proof rules and close exactly one goal?
    pub fn check_replacement(&self, text: &str) -> Result<String, RuleError> {
        let text = text.trim();
        let steps = self.check_closing_text("sledgehammer's proof", text, 1)?;
        if steps.iter().any(Step::is_hammer) {
            return Err(RuleError::Rejected(
                "sledgehammer's proof calls sledgehammer".into(),
            ));
        }
        Ok(text.to_string())
    }
}

/// The `n`-th command span (0-based) as a step, checked at goal depth `depth` before it: a proof
/// command, not after the goal is finished, and a `sledgehammer` standing alone.
fn checked_step(
    text: &str,
    tokens: &[Token],
    starts: &[(usize, &str)],
    n: usize,
    depth: i64,
) -> Result<Step, RuleError> {
    let rej = |m: String| Err(RuleError::Rejected(m));
    let (ti, word) = starts[n];
    let k = n + 1;
    let start = tokens[ti].range.start;
    let end_tok = starts.get(n + 1).map_or(tokens.len(), |&(j, _)| j);
    let end = span_end(tokens, ti, end_tok);
    let (line, col) = line_col(text, start);
    let at = format!("step {k} (line {line}, column {col})");
    let Some(effect) = proof_effect(word) else {
        return rej(format!(
            "{at}: `{word}` is not a proof command (only proof commands are allowed)"
        ));
    };
    if depth <= 0 {
        return rej(format!(
            "{at}: `{word}` comes after the goal is already finished"
        ));
    }
    if effect == Effect::Hammer {
        let alone = tokens[ti + 1..end_tok].iter().all(Token::is_improper);
        if !alone {
            return rej(format!(
                "{at}: `{HAMMER}` must stand alone (no options or facts)"
            ));
        }
    }
    Ok(Step {
        text: text[start..end].to_string(),
        range: start..end,
        command: word.to_string(),
        effect,
    })
}

/// End byte of the span of tokens `ti..end_tok`: its last proper token's end (trailing blanks and
/// comments are not part of it), or the command word's end when there is none.
fn span_end(tokens: &[Token], ti: usize, end_tok: usize) -> usize {
    tokens[ti..end_tok]
        .iter()
        .rev()
        .find(|t| !t.is_improper())
        .map_or(tokens[ti].range.end, |t| t.range.end)
}

/// Sledgehammer's suggestion in one output message: `…Try this: by metis (2 ms)` → `by metis`.
pub fn try_this(message: &str) -> Option<String> {
    let i = message.find("Try this:")?;
    let rest = message[i + "Try this:".len()..].lines().next()?.trim();
    // Cut the timing: ` (2 ms)`, ` (0.4 ms)`, ` (1.2 s)`, ` (> 3 s)`.
    let cut = match rest.rfind(" (") {
        Some(p) if rest.ends_with("ms)") || rest.ends_with(" s)") => &rest[..p],
        _ => rest,
    };
    let cut = cut.trim();
    (!cut.is_empty()).then(|| cut.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected<T: std::fmt::Debug>(r: Result<T, RuleError>) -> bool {
        matches!(r, Err(RuleError::Rejected(_)))
    }

    #[test]
    fn statements() {
        let s = check_statement(" lemma foo: \"x \\<in> A \\<Longrightarrow> P x\" ").unwrap();
        assert_eq!(s.name.as_deref(), Some("foo"));
        assert_eq!(
            s.renamed("G"),
            "lemma G: \"x \\<in> A \\<Longrightarrow> P x\""
        );
        let s = check_statement("theorem \"P\"").unwrap();
        assert_eq!(s.name, None);
        assert_eq!(s.renamed("G"), "theorem G: \"P\"");
        let s = check_statement("lemma [simp]: \"P\"").unwrap();
        assert_eq!(s.renamed("G"), "lemma G [simp]: \"P\"");
        let s = check_statement("lemma (in group) inv_inv [simp]: \"inv (inv x) = x\"").unwrap();
        assert_eq!(s.name.as_deref(), Some("inv_inv"));
        assert_eq!(
            s.renamed("G"),
            "lemma (in group) G [simp]: \"inv (inv x) = x\""
        );
        let s = check_statement(
            "lemma mono:\n  assumes \"A \\<subseteq> B\"\n  shows \"f A \\<le> f B\"",
        )
        .unwrap();
        assert_eq!(s.name.as_deref(), Some("mono"));
        let s = check_statement("lemma assumes \"A\" shows \"A\"").unwrap();
        assert_eq!(s.renamed("G"), "lemma G: assumes \"A\" shows \"A\"");
        let s = check_statement("lemma a: \"A\" and b: \"B\"").unwrap();
        assert_eq!(s.name.as_deref(), Some("a"));
        for bad in [
            "lemma a: \"A\" by simp",
            "lemma a: \"A\" sorry",
            "definition f where \"f = 0\"",
            "schematic_goal a: \"?x = 1\"",
            "lemma a:",
            "lemma",
            "",
            "lemma a: \"A\"\nend",
            "lemma a: \"A\" \\<proof>",
            "lemma a: \"unclosed",
        ] {
            assert!(rejected(check_statement(bad)), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn proofs_and_depth() {
        let steps = check_proof(
            "proof -\n  have \"A\" by simp\n  then show ?thesis\n    apply auto\n    done\nqed",
        )
        .unwrap();
        let cmds: Vec<&str> = steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(
            cmds,
            ["proof", "have", "by", "then", "show", "apply", "done", "qed"]
        );
        assert_eq!(steps[1].text, "have \"A\"");
        let steps = check_proof("using assms sledgehammer").unwrap();
        assert!(steps[1].is_hammer());
        assert_eq!(check_proof(".").unwrap().len(), 1);
        assert_eq!(check_proof("by (auto simp: field_simps)").unwrap().len(), 1);
        assert_eq!(
            check_proof("proof (induct xs)\n case Nil then show ?case by simp\nnext\n case (Cons x xs) { fix y have \"y = y\" .. } then show ?case by auto\nqed").unwrap().len(),
            16
        );
        // Unfinished: a syntax failure after the last step, not a rejection.
        assert!(matches!(
            check_proof("proof -\n have \"A\" by simp"),
            Err(RuleError::Syntax { step: 4, .. })
        ));
        // Finished early: anything after is rejected.
        assert!(rejected(check_proof("by simp\nhave \"B\" by simp")));
        assert!(rejected(check_proof("by simp done")));
        assert!(rejected(check_proof("simp")));
        assert!(rejected(check_proof("sledgehammer [timeout = 100]")));
    }

    proptest::proptest! {
        /// Any text: the rules answer (accept, reject or syntax error) and never panic; accepted
        /// proofs split into steps that cover their commands in order.
        #[test]
        fn rules_never_panic(parts in proptest::collection::vec(proptest::sample::select(vec![
            "by", "simp", "have", "show", "qed", "proof", "{", "}", "sorry", "\"", "(*", "*)",
            "\\<open>", "\\<close>", "‹", "›", "\\<^sub>", "\\<", ".", " ", "\n", "x", "(", ")",
            "`", "sledgehammer", "using", "ML", "\u{0}", "ä", ":", "lemma", "done", "apply",
        ]), 0..40)) {
            let text: String = parts.concat();
            let _ = check_statement(&text);
            if let Ok(steps) = check_proof(&text) {
                let mut last = 0;
                for s in &steps {
                    proptest::prop_assert!(s.range.start >= last);
                    proptest::prop_assert_eq!(&text[s.range.clone()], s.text.as_str());
                    last = s.range.end;
                }
            }
            let _ = check_replacement(&text);
            let _ = try_this(&text);
        }
    }

    #[test]
    fn keyword_tables() {
        // HOL's table (from prod-isar) knows commands our own list does not name.
        assert!(rejected(check_proof("by simp\nprint_simpset")));
        assert!(rejected(check_proof(
            "by simp\nlift_definition f :: nat is 0 ."
        )));
        // A session's own command: unknown to the standard rules, rejected once declared.
        let afp = Rules::with_keywords("\"cheat_decl\" :: thy_decl and \"fancy\"").unwrap();
        assert_eq!(check_proof("by simp cheat_decl x").unwrap().len(), 1);
        assert!(rejected(afp.check_proof("by simp cheat_decl x")));
        assert_eq!(afp.check_proof("by (simp add: fancy)").unwrap().len(), 1);
        assert!(Rules::with_keywords("\"x\" :: no_such_kind").is_err());
    }

    #[test]
    fn replacements_and_try_this() {
        assert_eq!(
            try_this("metis: Try this: by metis (2 ms)").as_deref(),
            Some("by metis")
        );
        assert_eq!(
            try_this("presburger: Try this: by presburger (0.4 ms)").as_deref(),
            Some("by presburger")
        );
        assert_eq!(
            try_this("e: Try this: by (metis foo(1) bar) (1.2 s)").as_deref(),
            Some("by (metis foo(1) bar)")
        );
        assert_eq!(try_this("Sledgehammering..."), None);
        assert_eq!(
            check_replacement("by (metis foo)").unwrap(),
            "by (metis foo)"
        );
        assert!(check_replacement("using a by blast").is_ok());
        assert!(check_replacement("by simp done").is_err());
        assert!(check_replacement("by (tactic \\<open>all_tac\\<close>)").is_err());
        assert!(check_replacement("sledgehammer").is_err());
    }
}

//! Lemma statements: the strict parser for UNTRUSTED statements ([`parse_statement`]) and the
//! lenient splitter the [`crate::CoqLanguage`] operations use on trusted or already-checked text.
//!
//! A statement is one sentence `Keyword name binders? : type.` where `Keyword` is one of
//! [`THEOREM_KEYWORDS`] (all equivalent for ProD: each opens a proof that `Qed` closes).

use crate::head::{sentence_head, Head};
use crate::lexer::{
    comments_blanked, is_blank, is_identifier, line_col, sentences, skip_string, Sentence,
    SentenceKind,
};

/// Keywords that declare a lemma. Coq 8.16 `thm_token` plus `Example` (a `Definition` synonym
/// that, without a body, opens a proof in the same way).
pub const THEOREM_KEYWORDS: &[&str] = &[
    "Lemma",
    "Theorem",
    "Fact",
    "Remark",
    "Corollary",
    "Proposition",
    "Property",
    "Example",
];

/// Identifier-shaped keywords of Coq's term and vernacular grammar: never a lemma name.
pub const RESERVED: &[&str] = &[
    "as", "at", "cofix", "else", "end", "exists", "exists2", "fix", "for", "forall", "fun", "if",
    "IF", "in", "let", "match", "mod", "return", "then", "using", "where", "with", "Prop", "Set",
    "SProp", "Type", "struct",
];

/// A parsed untrusted lemma statement.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Statement {
    /// `Lemma`, `Theorem`, … (one of [`THEOREM_KEYWORDS`]).
    pub keyword: String,
    /// The declared name (an unqualified identifier, not a keyword).
    pub name: String,
    /// Everything after the name without the final dot, comments removed and blank runs
    /// outside strings collapsed to one space (meaning-preserving, see [`crate::language`]):
    /// `(n : nat) : n + 0 = n`.
    pub binders_and_type: String,
}

impl Statement {
    /// The statement as one Coq sentence, comments gone: `Lemma name (n : nat) : n + 0 = n.`
    /// The final dot is glued only to an identifier, a closing bracket or a string; after a
    /// symbol it is separated by a space (`: ..` must not become `: ...`, `+` `.` not `+.`).
    pub fn to_sentence(&self) -> String {
        let glue =
            self.binders_and_type.chars().last().is_some_and(|c| {
                crate::lexer::is_ident_char(c) || matches!(c, ')' | ']' | '}' | '"')
            });
        let space = if glue { "" } else { " " };
        format!(
            "{} {} {}{space}.",
            self.keyword, self.name, self.binders_and_type
        )
    }

    /// The same statement under another name.
    pub fn renamed(&self, name: &str) -> Statement {
        Statement {
            name: name.to_string(),
            ..self.clone()
        }
    }
}

/// Why an untrusted statement was refused. Messages name the position (line:column) when
/// there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StatementError {
    #[error("statement does not lex: {0}")]
    Lex(String),
    #[error("a statement must be exactly one sentence ending with `.`, found {0}")]
    SentenceCount(usize),
    #[error("a statement must be a declaration, found a {0:?}")]
    NotACommand(SentenceKind),
    #[error("control `{0}` is not allowed in a statement")]
    Control(String),
    #[error("attribute `{0}` is not allowed in a statement")]
    Attribute(String),
    #[error("goal selector `{0}` is not allowed in a statement")]
    Selector(String),
    #[error("statement must start with one of {THEOREM_KEYWORDS:?}, found `{0}`")]
    Keyword(String),
    #[error("`{0}` is not a plain identifier usable as a lemma name")]
    Name(String),
    #[error("statement ends with `...`, not `.`")]
    Ellipsis,
    #[error("line {line}, column {column}: comment glued to the previous character (put a blank before `(*`)")]
    GluedComment { line: usize, column: usize },
    #[error("line {line}, column {column}: `{head}:(…)` runs a tactic inside the statement; a statement must mean the same wherever it is read")]
    Quotation {
        line: usize,
        column: usize,
        head: String,
    },
    #[error("statement does not re-render as one sentence: {0}")]
    Rendering(String),
    #[error("line {line}, column {column}: {what}")]
    Syntax {
        line: usize,
        column: usize,
        what: String,
    },
}

/// Parse an untrusted lemma statement: exactly one sentence `Keyword ident binders? : term.`
/// with no control (`Time`, `Redirect`, `Fail`, …), no attribute but locality (`#[…]`,
/// `Program`, `Polymorphic`, …; `Local`, `Global`, `#[local]`, `#[global]` are accepted and
/// dropped), no goal selector, no second sentence, no mutual `with`. Comments are
/// allowed anywhere and dropped from the result. Binders are identifiers, `_`, and bracketed
/// groups (`(x : T)`, `{A}`, `[x]`, `` `{C A} ``, `'(a, b)`).
pub fn parse_statement(text: &str) -> Result<Statement, StatementError> {
    let sentence = one_command(text)?;
    refuse_context_dependent(text)?;
    // Comments blanked byte for byte: offsets in `s` are offsets in `text`.
    let blanked = comments_blanked(text);
    let s = &blanked[..sentence.range.end];
    let head = sentence_head(&s[sentence.range.start..]);
    let keyword = theorem_keyword(&head)?;
    if s.trim_end().ends_with("...") {
        return Err(StatementError::Ellipsis);
    }
    let (name, rest_full) = lemma_name(&head.body[keyword.len()..])?;
    // Drop the final dot (the lexer guarantees the sentence ends with exactly one here).
    let rest = rest_full.strip_suffix('.').unwrap_or(rest_full);
    let rest_offset = s.len() - rest_full.len();
    check_binders_and_type(rest).map_err(|(pos, what)| {
        let (line, column) = line_col(text, rest_offset + pos);
        StatementError::Syntax { line, column, what }
    })?;
    let statement = Statement {
        keyword: keyword.to_string(),
        name: name.to_string(),
        binders_and_type: crate::layout::collapse_layout(rest),
    };
    check_rendering(&statement)?;
    Ok(statement)
}

/// The statement's one sentence, which must lex and be a command.
fn one_command(text: &str) -> Result<Sentence, StatementError> {
    let lexed = sentences(text);
    if let Some(e) = lexed.errors.first() {
        return Err(StatementError::Lex(e.message(text)));
    }
    let [sentence] = lexed.sentences.as_slice() else {
        return Err(StatementError::SentenceCount(lexed.sentences.len()));
    };
    if sentence.kind != SentenceKind::Command {
        return Err(StatementError::NotACommand(sentence.kind));
    }
    Ok(sentence.clone())
}

/// Refuses text that Coq may read differently from the checker, or differently in another
/// environment: a glued comment, a term that runs a tactic.
fn refuse_context_dependent(text: &str) -> Result<(), StatementError> {
    // A comment glued after a character may be lexed by Coq as part of a token (`x.(* c *)`
    // is `.(` `*` …), so blanking it could change the sentence; refuse it.
    if let Some(start) = crate::lexer::glued_comment(text) {
        let (line, column) = line_col(text, start);
        return Err(StatementError::GluedComment { line, column });
    }
    // A term that runs a tactic elaborates differently in different environments (the node
    // that proposes a lemma has other proposals in scope, the node that proves it does not).
    if let Some((pos, head)) = crate::lexer::term_quotation(text) {
        let (line, column) = line_col(text, pos);
        return Err(StatementError::Quotation {
            line,
            column,
            head: head.to_string(),
        });
    }
    Ok(())
}

/// The theorem keyword of a statement's head, which must have no control, no attribute but
/// locality and no goal selector.
fn theorem_keyword<'a>(head: &Head<'a>) -> Result<&'a str, StatementError> {
    if let Some(c) = head.controls.first() {
        return Err(StatementError::Control(c.name.to_string()));
    }
    // Locality only decides what is visible after the enclosing section or module ends, never
    // what is proved: accepted, and dropped from the statement the checker writes.
    let refused = head
        .attributes
        .iter()
        .chain(&head.legacy_attributes)
        .find(|a| !is_locality_attribute(a));
    if let Some(a) = refused {
        return Err(StatementError::Attribute(a.to_string()));
    }
    if let Some(sel) = head.selector {
        return Err(StatementError::Selector(sel.to_string()));
    }
    let keyword = head.keyword.unwrap_or("");
    if !THEOREM_KEYWORDS.contains(&keyword) {
        let found = if keyword.is_empty() {
            head.body.chars().take(20).collect()
        } else {
            keyword.to_string()
        };
        return Err(StatementError::Keyword(found));
    }
    Ok(keyword)
}

/// The lemma's name at the start of `after_kw` (the text after the keyword), and the text
/// after the name.
fn lemma_name(after_kw: &str) -> Result<(&str, &str), StatementError> {
    let name_start = after_kw.len()
        - after_kw
            .trim_start_matches(|c: char| c.is_ascii() && is_blank(c as u8))
            .len();
    let after_name_ws = &after_kw[name_start..];
    let name_len = after_name_ws
        .char_indices()
        .find(|&(_, c)| !(crate::lexer::is_ident_char(c) || c == '.'))
        .map_or(after_name_ws.len(), |(i, _)| i);
    let name = &after_name_ws[..name_len];
    if !is_identifier(name) || RESERVED.contains(&name) {
        let shown = if name.is_empty() {
            after_name_ws.chars().take(20).collect()
        } else {
            name.to_string()
        };
        return Err(StatementError::Name(shown));
    }
    Ok((name, &after_name_ws[name_len..]))
}

/// Post-condition: what callers will write to Coq is exactly one command sentence.
fn check_rendering(statement: &Statement) -> Result<(), StatementError> {
    let rendered = statement.to_sentence();
    let relexed = sentences(&rendered);
    if !relexed.errors.is_empty()
        || relexed.sentences.len() != 1
        || relexed.sentences[0].kind != SentenceKind::Command
        || relexed.sentences[0].range != (0..rendered.len())
    {
        return Err(StatementError::Rendering(rendered));
    }
    Ok(())
}

/// `Local`, `Global`, `#[local]`, `#[global]` (blanks inside the brackets allowed).
pub fn is_locality_attribute(attribute: &str) -> bool {
    let inner = attribute
        .strip_prefix("#[")
        .and_then(|a| a.strip_suffix(']'))
        .map(str::trim);
    matches!(attribute, "Local" | "Global") || matches!(inner, Some("local" | "global"))
}

/// `i` at an opening bracket: index after the matching closer (brackets of any kind nest;
/// strings are skipped). Err on a mismatch or an unclosed group.
fn skip_group(b: &[u8], mut i: usize) -> Result<usize, String> {
    let mut stack = vec![];
    while i < b.len() {
        match b[i] {
            c @ (b'(' | b'[' | b'{') => stack.push(c),
            c @ (b')' | b']' | b'}') => {
                let open = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if stack.pop() != Some(open) {
                    return Err(format!("unbalanced `{}`", c as char));
                }
                if stack.is_empty() {
                    return Ok(i + 1);
                }
            }
            b'"' => {
                i = skip_string(b, i).map_err(|_| "unclosed string".to_string())?;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Err("unclosed bracket".into())
}

fn is_lone_colon(b: &[u8], i: usize) -> bool {
    b[i] == b':'
        && !matches!(b.get(i + 1), Some(b'=' | b':' | b'>' | b'<'))
        && (i == 0 || !b":<".contains(&b[i - 1]))
}

/// Binders then a lone `:` then a non-empty type with no top-level mutual `with`.
fn check_binders_and_type(rest: &str) -> Result<(), (usize, String)> {
    let ty_offset = skip_binders_to_colon(rest)?;
    let ty = &rest[ty_offset..];
    if ty.trim().is_empty() {
        return Err((ty_offset, "empty type after `:`".into()));
    }
    reject_mutual_with(ty, ty_offset)
}

/// The binders before the type: the index just after the lone `:` that ends them. Err (offset,
/// what) at the first thing that is neither a binder group nor a binder name, or at the end.
fn skip_binders_to_colon(rest: &str) -> Result<usize, (usize, String)> {
    let b = rest.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && is_blank(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return Err((i, "expected `:` and the lemma's type".into()));
        }
        match b[i] {
            b':' if is_lone_colon(b, i) => return Ok(i + 1),
            b'(' | b'{' | b'[' => i = skip_group(b, i).map_err(|e| (i, e))?,
            b'`' | b'\'' if matches!(b.get(i + 1), Some(b'(' | b'{' | b'[')) => {
                i = skip_group(b, i + 1).map_err(|e| (i, e))?
            }
            _ => i = skip_binder_name(rest, i)?,
        }
    }
}

/// `i` at a bare binder: the index after its name. Only an identifier or `_` that is not a
/// reserved word is a binder; anything else is refused, so no other construct slips in here.
fn skip_binder_name(rest: &str, i: usize) -> Result<usize, (usize, String)> {
    let word = ident_at(rest, i);
    if word.is_empty()
        || !(is_identifier(&word) || word == "_")
        || RESERVED.contains(&word.as_str())
    {
        let shown: String = rest[i..].chars().take(15).collect();
        return Err((i, format!("expected a binder or `:`, found `{shown}`")));
    }
    Ok(i + word.len())
}

/// The identifier characters starting at byte `i` of `s` (empty when there are none).
fn ident_at(s: &str, i: usize) -> String {
    s[i..]
        .chars()
        .take_while(|&c| crate::lexer::is_ident_char(c))
        .collect()
}

/// Whether byte `j` of `b` starts a word rather than continuing one (an identifier character,
/// `_`, `'`, `.` or a non-ASCII byte just before it continues the word or qualified name).
fn starts_word(b: &[u8], j: usize) -> bool {
    j == 0 || !(b[j - 1].is_ascii_alphanumeric() || b"_'.".contains(&b[j - 1]) || b[j - 1] >= 0x80)
}

/// Top-level `with` outside `match … end` would declare mutual theorems (`Lemma a : A with
/// b : B.`): a second lemma smuggled into one statement. `ty_offset` is where `ty` starts in
/// the text the error offsets refer to.
fn reject_mutual_with(ty: &str, ty_offset: usize) -> Result<(), (usize, String)> {
    let tb = ty.as_bytes();
    let mut j = 0;
    let mut depth = 0usize;
    let mut matches = 0usize;
    while j < tb.len() {
        match tb[j] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                j = skip_string(tb, j)
                    .map_err(|_| (ty_offset + j, "unclosed string".to_string()))?;
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                let ch = ty[j..].chars().next().unwrap_or(' ');
                if !crate::lexer::is_ident_start(ch) {
                    j += ch.len_utf8();
                    continue;
                }
                let prev_ok = starts_word(tb, j);
                let word = ident_at(ty, j);
                if prev_ok && depth == 0 {
                    match word.as_str() {
                        "match" => matches += 1,
                        "end" => matches = matches.saturating_sub(1),
                        "with" if matches == 0 => {
                            return Err((
                                ty_offset + j,
                                "mutual `with` is not allowed in a statement".into(),
                            ))
                        }
                        _ => {}
                    }
                }
                j += word.len();
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    Ok(())
}

/// The parts of a declaration as the lenient operations need them: byte ranges in the
/// ORIGINAL text of the keyword and of the name, and the end of the text before the final dot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parts {
    pub name: std::ops::Range<usize>,
    /// Start of the text after the name.
    pub rest_start: usize,
    /// End of the sentence before its final `.`.
    pub rest_end: usize,
}

/// Lenient split of a trusted declaration: the text must be exactly one complete sentence
/// whose first word (after blanks and comments, with no control or attribute before it) is a
/// theorem keyword followed by an identifier. `None` otherwise.
pub(crate) fn parts(text: &str) -> Option<Parts> {
    let lexed = sentences(text);
    if !lexed.errors.is_empty() || lexed.sentences.len() != 1 {
        return None;
    }
    let sentence = &lexed.sentences[0];
    if sentence.kind != SentenceKind::Command {
        return None;
    }
    let st = sentence.text(text);
    let head = sentence_head(st);
    if !head.controls.is_empty() || head.has_attributes() || head.selector.is_some() {
        return None;
    }
    let keyword = head.keyword?;
    if !THEOREM_KEYWORDS.contains(&keyword) {
        return None;
    }
    let body_off = sentence.range.start + (st.len() - head.body.len());
    let b = text.as_bytes();
    let mut i = body_off + keyword.len();
    // Blanks and comments between the keyword and the name.
    loop {
        while i < sentence.range.end && is_blank(b[i]) {
            i += 1;
        }
        if b.get(i) == Some(&b'(') && b.get(i + 1) == Some(&b'*') {
            i = crate::lexer::skip_comment(b, i).ok()?;
        } else {
            break;
        }
    }
    let name_end = text[i..]
        .char_indices()
        .find(|&(_, c)| !crate::lexer::is_ident_char(c))
        .map_or(text.len(), |(k, _)| i + k);
    if !is_identifier(&text[i..name_end]) {
        return None;
    }
    let end = sentence.range.end;
    if text[..end].ends_with("...") {
        return None;
    }
    Some(Parts {
        name: i..name_end,
        rest_start: name_end,
        rest_end: end - 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts() {
        let s = parse_statement("Lemma foo (n : nat) {A} `{Eq A} '(a, b) : (* c *) n + 0 = n.")
            .unwrap();
        assert_eq!(s.keyword, "Lemma");
        assert_eq!(s.name, "foo");
        assert_eq!(
            s.binders_and_type,
            "(n : nat) {A} `{Eq A} '(a, b) : n + 0 = n"
        );
        let s = parse_statement("  Theorem t: forall x, match x with 0 => True | _ => True end.")
            .unwrap();
        assert_eq!(
            s.to_sentence(),
            "Theorem t : forall x, match x with 0 => True | _ => True end."
        );
        assert!(parse_statement("Example e : let x := 1 in x = 1.").is_ok());
    }

    #[test]
    fn locality_is_accepted_and_dropped() {
        for t in [
            "Local Lemma a : True.",
            "Global Lemma a : True.",
            "#[local] Lemma a : True.",
            "#[ global ] Lemma a : True.",
        ] {
            let s = parse_statement(t).unwrap();
            assert_eq!(s.to_sentence(), "Lemma a : True.", "{t}");
        }
    }

    #[test]
    fn rejects() {
        use StatementError::*;
        let err = |t: &str| parse_statement(t).unwrap_err();
        assert!(matches!(
            err("Lemma a : True. Lemma b : False."),
            SentenceCount(2)
        ));
        assert!(matches!(err("Program Lemma a : True."), Attribute(_)));
        assert!(matches!(err("Polymorphic Lemma a : True."), Attribute(_)));
        assert!(matches!(err("Local Program Lemma a : True."), Attribute(_)));
        assert!(matches!(
            err("#[local, program] Lemma a : True."),
            Attribute(_)
        ));
        assert!(matches!(err("Local Time Lemma a : True."), Control(_)));
        assert!(matches!(err("Time Lemma a : True."), Control(_)));
        assert!(matches!(err("Redirect \"x\" Lemma a : True."), Control(_)));
        assert!(matches!(err("Axiom a : False."), Keyword(_)));
        assert!(matches!(err("Definition a : nat."), Keyword(_)));
        assert!(matches!(err("Lemma M.a : True."), Name(_)));
        assert!(matches!(err("Lemma forall : True."), Name(_)));
        assert!(matches!(
            err("Lemma a : True with b : False."),
            Syntax { .. }
        ));
        assert!(matches!(err("Lemma a True."), Syntax { .. }));
        assert!(matches!(err("Lemma a : ."), Syntax { .. }));
        assert!(matches!(err("Lemma a : True"), Lex(_)));
        assert!(matches!(err("Lemma a : True (* ."), Lex(_)));
        assert!(matches!(err("Lemma a : True..."), Ellipsis));
        assert!(matches!(err("Lemma a (x : nat : True."), Syntax { .. }));
        assert!(matches!(err("-"), NotACommand(_)));
        assert!(matches!(
            err("Lemma a : True.(* c *)Axiom b : False."),
            GluedComment {
                line: 1,
                column: 16
            }
        ));
        assert!(matches!(
            err("Lemma a : True.(**)\nAxiom b : False."),
            GluedComment { .. }
        ));
        assert!(matches!(err(""), SentenceCount(0)));
        for q in [
            "Lemma aux : ltac:(first [exact False | exact True]).",
            "Lemma aux : ltac2 :(exact True).",
            "Lemma aux (n : nat) : n = constr:(0).",
            "Lemma aux : (* c *) uconstr:(True).",
            "Lemma aux : ltac (* c *) :(exact False).",
            "Lemma aux : ltac\n:(exact False).",
            "Lemma aux : ltac:\n  (exact False).",
        ] {
            assert!(matches!(err(q), Quotation { .. }), "{q}");
        }
        // Only a quotation head followed by `:` is one: a binder or a field may be so named.
        assert!(parse_statement("Lemma ok (constr : nat) : constr = constr.").is_ok());
        assert!(parse_statement("Lemma ok (ident : nat) : \"ltac:(x)\" = \"\".").is_ok());
    }

    #[test]
    fn lenient_parts() {
        let t = "Lemma (* c *) foo (n : nat) : n = n.";
        let p = parts(t).unwrap();
        assert_eq!(&t[p.name.clone()], "foo");
        assert_eq!(&t[p.rest_start..p.rest_end], " (n : nat) : n = n");
        assert!(parts("Lemma a : True. Qed.").is_none());
        assert!(parts("Definition a := 1.").is_none());
    }
}

//! What the prover-neutral core needs to know about a proof language.
//!
//! The tree logic (children, global correctness, assembly) is written once; the Coq and Isabelle
//! crates implement this trait so that the core can compare statements, name lemmas and print a
//! complete proof without knowing either syntax.
//!
//! That includes where the language's string literals and comments are ([`ProofLanguage::literals`]):
//! the conditional-proof markers are found only outside them, as the prover would read the text.

use std::ops::Range;

/// What kind of text a [`Literal`] is. A closed enum: the conditional-proof parser's error names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LiteralKind {
    /// Quoted text the prover reads as one token: Coq's `"…"` strings; Isabelle's strings,
    /// alt strings, cartouches and verbatim text.
    String,
    /// A comment: Coq's and Isabelle's nested `(* … *)`, Isabelle's formal comments.
    Comment,
}

/// One string literal or comment of a text, as the language's own lexer finds it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Literal {
    /// Byte range in the lexed text, delimiters included; an unclosed literal runs to the end.
    pub range: Range<usize>,
    pub kind: LiteralKind,
    /// Did its closing delimiter come before the end of the text?
    pub closed: bool,
}

/// Prover-specific text operations used by the core.
///
/// A *statement* is a complete declaration as the model writes it inside `<invoke> … </invoke>`
/// and as a node carries it, e.g. Coq `Lemma foo (n : nat) : n + 0 = n.` or Isabelle
/// `lemma foo: "n + 0 = (n::nat)"`.
pub trait ProofLanguage: Send + Sync {
    /// Short name for messages ("coq", "isabelle").
    fn name(&self) -> &'static str;

    /// The string literals and comments of `text` (outermost only, in order, not overlapping),
    /// lexed as the prover lexes a proof: strings inside comments, nesting and escapes as the
    /// prover has them. [`crate::ConditionalProof::parse_with`] finds its markers only outside
    /// these, so a marker written inside a string or a comment is text of the proof, and a
    /// literal that never closes is an error there rather than a silent split. An
    /// implementation must be the lexer its checker splits and sends the text with.
    fn literals(&self, text: &str) -> Vec<Literal>;

    /// The declared name of a statement (`foo` in `Lemma foo : …`), if it has one.
    fn lemma_name(&self, statement: &str) -> Option<String>;

    /// The key under which two statements are "the same lemma" (paper §2, children of a node):
    /// the lemma's name does not matter and layout does not matter. Implementations must
    /// document exactly what they normalise; they must never identify two statements that
    /// could mean different things.
    fn normalize_statement(&self, statement: &str) -> String;

    /// Does a statement mean the same wherever it is read? A proposed lemma is elaborated where
    /// `in_scope`, the node's other proposals, are declared, and a node's own statement after
    /// all of its proposals; a node that proves the same text elaborates it without them. Only
    /// a self-contained statement may be matched (paper §2 takes this for granted; a statement
    /// that runs a tactic or names a proposal can elaborate to two different statements).
    /// Implementations must answer `false` whenever they cannot tell.
    fn statement_is_self_contained(&self, _statement: &str, _in_scope: &[String]) -> bool {
        true
    }

    /// The same statement declared under another name.
    fn rename_statement(&self, statement: &str, new_name: &str) -> String;

    /// Does `proof_text` (proof segments, no `<invoke>` tags) refer to the identifier `name`?
    /// Must be lexically aware (comments, strings, longer identifiers are not references).
    fn mentions(&self, proof_text: &str, name: &str) -> bool;

    /// Replace every reference to the identifiers in `renames` (old → new) in `proof_text`.
    fn rename_references(&self, proof_text: &str, renames: &[(String, String)]) -> String;

    /// Remove every reference to `name` from `proof_text` (the "unnecessary lemma" filter of
    /// paper §3.2): drop it from argument lists, and drop steps that still need it.
    fn remove_references(&self, proof_text: &str, name: &str) -> String;

    /// A lemma admitted without proof (Isabelle `sorry`, Coq `Admitted`), as it is put into a
    /// context: used for augmented examples and for local checking.
    fn render_admitted(&self, statement: &str) -> String;

    /// A lemma with its complete proof (`proof_text` is the proof body without `<invoke>`s).
    fn render_proved(&self, statement: &str, proof_text: &str) -> String;

    /// Every identifier-like word of `text` outside comments and strings, each part of a
    /// qualified name separately: what assembly must not capture with a lemma's name. May
    /// over-approximate (a word too many only makes a name longer), never miss a word.
    fn words(&self, text: &str) -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Is `name` a legal fresh lemma name in this language? Used when assembly must rename.
    fn is_identifier(&self, name: &str) -> bool {
        let mut chars = name.chars();
        matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
            && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '\'')
    }
}

/// Collapse every run of Unicode whitespace to one space and trim the ends: the layout part of
/// statement normalisation that every language shares.
pub fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn collapse() {
        assert_eq!(collapse_whitespace("  a \n\t b  "), "a b");
        assert_eq!(collapse_whitespace(""), "");
    }
}

/// A deliberately tiny language for the core's own tests and property tests: statements are
/// `Lemma NAME : BODY.`, identifiers are `[A-Za-z0-9_']+`, sentences end at `.`, literals are
/// `"…"` strings (`""` a quote) and nested `(* … *)` comments with strings inside read as strings.
/// Not a prover: real languages live in `prod-coq` and the Isabelle crate.
#[doc(hidden)]
pub mod tests_support {
    use super::*;

    pub struct ToyLanguage;

    fn is_ident_char(c: char) -> bool {
        c.is_alphanumeric() || c == '_' || c == '\''
    }

    /// Byte ranges of identifier tokens.
    fn idents(s: &str) -> Vec<(usize, usize)> {
        let mut out = vec![];
        let mut start = None;
        for (i, c) in s.char_indices() {
            match (is_ident_char(c), start) {
                (true, None) => start = Some(i),
                (false, Some(b)) => {
                    out.push((b, i));
                    start = None
                }
                _ => {}
            }
        }
        if let Some(b) = start {
            out.push((b, s.len()));
        }
        out
    }

    /// End of the string opening at `i` (just after its closing quote), or `None`.
    fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
        i += 1;
        while i < b.len() {
            match (b[i], b.get(i + 1)) {
                (b'"', Some(b'"')) => i += 2,
                (b'"', _) => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    }

    /// End of the comment opening at `i` (just after its `*)`), or `None`.
    fn comment_end(b: &[u8], mut i: usize) -> Option<usize> {
        let mut depth = 0usize;
        while i < b.len() {
            match (b[i], b.get(i + 1)) {
                (b'(', Some(b'*')) => {
                    depth += 1;
                    i += 2;
                }
                (b'*', Some(b')')) => {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                (b'"', _) => i = string_end(b, i)?,
                _ => i += 1,
            }
        }
        None
    }

    impl ProofLanguage for ToyLanguage {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn literals(&self, text: &str) -> Vec<Literal> {
            let b = text.as_bytes();
            let mut out = vec![];
            let mut i = 0;
            while i < b.len() {
                let (kind, end) = match (b[i], b.get(i + 1)) {
                    (b'(', Some(b'*')) => (LiteralKind::Comment, comment_end(b, i)),
                    (b'"', _) => (LiteralKind::String, string_end(b, i)),
                    _ => {
                        i += 1;
                        continue;
                    }
                };
                out.push(Literal {
                    range: i..end.unwrap_or(b.len()),
                    kind,
                    closed: end.is_some(),
                });
                i = end.unwrap_or(b.len());
            }
            out
        }
        fn lemma_name(&self, statement: &str) -> Option<String> {
            let rest = statement.trim().strip_prefix("Lemma")?;
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|&c| is_ident_char(c))
                .collect();
            (!name.is_empty()).then_some(name)
        }
        fn normalize_statement(&self, statement: &str) -> String {
            let s = collapse_whitespace(statement);
            match (self.lemma_name(&s), s.find(':')) {
                (Some(_), Some(colon)) => s[colon..].to_string(),
                _ => s,
            }
        }
        fn rename_statement(&self, statement: &str, new_name: &str) -> String {
            match (self.lemma_name(statement), statement.find(':')) {
                (Some(_), Some(colon)) => format!("Lemma {new_name} {}", &statement[colon..]),
                _ => statement.to_string(),
            }
        }
        fn mentions(&self, text: &str, name: &str) -> bool {
            idents(text).into_iter().any(|(a, b)| &text[a..b] == name)
        }
        fn rename_references(&self, text: &str, renames: &[(String, String)]) -> String {
            let mut out = String::new();
            let mut last = 0;
            for (a, b) in idents(text) {
                if let Some((_, new)) = renames.iter().find(|(old, _)| old == &text[a..b]) {
                    out.push_str(&text[last..a]);
                    out.push_str(new);
                    last = b;
                }
            }
            out.push_str(&text[last..]);
            out
        }
        fn remove_references(&self, text: &str, name: &str) -> String {
            text.split_inclusive('.')
                .filter(|s| !self.mentions(s, name))
                .collect()
        }
        fn render_admitted(&self, statement: &str) -> String {
            format!("{} Admitted.", statement.trim())
        }
        fn render_proved(&self, statement: &str, proof_text: &str) -> String {
            format!("{}\nProof. {} Qed.", statement.trim(), proof_text.trim())
        }
    }
}

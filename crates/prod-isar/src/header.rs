//! Theory headers: `theory X imports A "B" keywords "foo" :: thy_decl and "bar" abbrevs … begin`.
//!
//! Grammar from isar-ref ("Theory commands") and `Pure/Thy/thy_header.ML`:
//! `keyword_decls = string+ ('::' name tags)? ('==' name)?`, groups separated by `and`,
//! `tags = ('%' name)*`. The kind name may be quoted (Pure writes `:: "qed"`).

use std::ops::Range;

use crate::keyword_kind::KeywordKind;
use crate::lexer::{lex, Token, TokenKind};

/// One keyword declared by a header: minor when `kind` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordDecl {
    pub name: String,
    pub kind: Option<KeywordKind>,
}

/// A parsed theory header.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TheoryHeader {
    /// The theory name as written (unquoted).
    pub name: String,
    /// Imports as written (unquoted): `Main`, `"HOL-Library.Multiset"`, `"../Entry/Thy"`, …
    pub imports: Vec<String>,
    /// Keyword declarations in order.
    pub keywords: Vec<KeywordDecl>,
    /// Byte range from the `theory` keyword to the end of `begin`.
    pub range: Range<usize>,
}

/// A problem in a header (or a keyword declaration list) at byte `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    pub message: String,
    pub offset: usize,
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for HeaderError {}

/// The text of a name token: strings lose their quotes and `\"`/`\\` escapes.
pub fn name_text(tok: &Token, src: &str) -> String {
    let t = tok.text(src);
    match tok.kind {
        TokenKind::String | TokenKind::AltString if t.len() >= 2 => unescape(&t[1..t.len() - 1]),
        TokenKind::Cartouche => t
            .strip_prefix("\\<open>")
            .and_then(|s| s.strip_suffix("\\<close>"))
            .or_else(|| {
                t.strip_prefix('\u{2039}')
                    .and_then(|s| s.strip_suffix('\u{203a}'))
            })
            .unwrap_or(t)
            .to_string(),
        _ => t.to_string(),
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(&n) = it.peek() {
                if n == '"' || n == '\\' || n == '`' {
                    out.push(n);
                    it.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// Proper (non-space, non-comment) tokens of `src`.
fn proper(tokens: &[Token]) -> Vec<&Token> {
    tokens.iter().filter(|t| !t.is_improper()).collect()
}

fn is_word(t: &Token, src: &str, w: &str) -> bool {
    (t.kind == TokenKind::Ident || t.kind == TokenKind::Keyword) && t.text(src) == w
}

/// Parses keyword declarations starting at `toks[i]`; stops at the first token that cannot
/// continue them and returns its index.
fn keyword_decls_at(
    toks: &[&Token],
    src: &str,
    mut i: usize,
    out: &mut Vec<KeywordDecl>,
    errors: &mut Vec<HeaderError>,
) -> usize {
    loop {
        let group_start = out.len();
        while let Some(t) = toks.get(i) {
            if t.kind != TokenKind::String {
                break;
            }
            out.push(KeywordDecl {
                name: name_text(t, src),
                kind: None,
            });
            i += 1;
        }
        if out.len() == group_start {
            if let Some(t) = toks.get(i) {
                errors.push(HeaderError {
                    message: format!("expected a quoted keyword, found {:?}", t.text(src)),
                    offset: t.range.start,
                });
            }
            return i;
        }
        if toks.get(i).is_some_and(|t| is_word(t, src, "::")) {
            i += 1;
            match toks.get(i) {
                Some(t) if matches!(t.kind, TokenKind::Ident | TokenKind::String) => {
                    let kname = name_text(t, src);
                    match KeywordKind::from_name(&kname) {
                        Some(k) => {
                            for d in &mut out[group_start..] {
                                d.kind = Some(k);
                            }
                        }
                        None => errors.push(HeaderError {
                            message: format!("unknown outer syntax keyword kind {kname:?}"),
                            offset: t.range.start,
                        }),
                    }
                    i += 1;
                }
                other => {
                    errors.push(HeaderError {
                        message: "expected a keyword kind after ::".into(),
                        offset: other.map(|t| t.range.start).unwrap_or(src.len()),
                    });
                    return i;
                }
            }
            // Tags: `% name`.
            while toks.get(i).is_some_and(|t| is_word(t, src, "%")) {
                i += 2;
            }
        }
        // Old-style abbreviation `== name`.
        if toks.get(i).is_some_and(|t| is_word(t, src, "==")) {
            i += 2;
        }
        if toks.get(i).is_some_and(|t| is_word(t, src, "and")) {
            i += 1;
        } else {
            return i.min(toks.len());
        }
    }
}

/// Parses a bare keyword declaration list (`"a" "b" :: thy_decl and "c"`), as in a header's
/// `keywords` section.
pub fn parse_keyword_decls(text: &str) -> (Vec<KeywordDecl>, Vec<HeaderError>) {
    let (tokens, lex_errors) = lex(text);
    let mut errors: Vec<HeaderError> = lex_errors
        .into_iter()
        .map(|e| HeaderError {
            message: e.message,
            offset: e.offset,
        })
        .collect();
    let toks = proper(&tokens);
    let mut out = Vec::new();
    let i = keyword_decls_at(&toks, text, 0, &mut out, &mut errors);
    if let Some(t) = toks.get(i) {
        errors.push(HeaderError {
            message: format!("unexpected {:?} in keyword declarations", t.text(text)),
            offset: t.range.start,
        });
    }
    (out, errors)
}

/// Parses the header of a theory file, lexing only up to its `begin`.
pub fn parse_header(text: &str) -> Result<TheoryHeader, HeaderError> {
    let (tokens, _) = crate::lexer::lex_prefix(text, |t, src| {
        t.kind == TokenKind::Ident && t.text(src) == "begin"
    });
    parse_header_tokens(text, &tokens)
}

/// Parses the header from already lexed tokens. Document commands and comments may precede
/// `theory`; everything after `begin` is ignored.
pub fn parse_header_tokens(text: &str, tokens: &[Token]) -> Result<TheoryHeader, HeaderError> {
    let toks = proper(tokens);
    let start = theory_keyword_at(&toks, text)?;
    let mut h = TheoryHeader {
        range: toks[start].range.start..toks[start].range.end,
        ..TheoryHeader::default()
    };
    let i = theory_name_at(&toks, text, start + 1, &mut h)?;
    header_sections_at(&toks, text, i, &mut h)?;
    Ok(h)
}

/// A header error at byte `offset`.
fn err(message: String, offset: usize) -> HeaderError {
    HeaderError { message, offset }
}

/// The index of the `theory` keyword, after the document text that alone may precede it:
/// `section ‹…›`, `text ‹…›`, `chapter %tag ‹…›`.
fn theory_keyword_at(toks: &[&Token], text: &str) -> Result<usize, HeaderError> {
    let mut start = 0;
    loop {
        let Some(t) = toks.get(start) else {
            return Err(err("no `theory` header found".into(), 0));
        };
        let w = t.text(text);
        if t.kind == TokenKind::Ident && w == "theory" {
            return Ok(start);
        }
        let document = t.kind == TokenKind::Ident
            && matches!(
                w,
                "chapter"
                    | "section"
                    | "subsection"
                    | "subsubsection"
                    | "paragraph"
                    | "subparagraph"
                    | "text"
                    | "txt"
                    | "text_raw"
            );
        if !document {
            return Err(err(
                format!("expected the `theory` header, found {w:?}"),
                t.range.start,
            ));
        }
        start += 1;
        while toks.get(start).is_some_and(|t| is_word(t, text, "%")) {
            start += 2;
        }
        if toks.get(start).is_some_and(|t| {
            matches!(
                t.kind,
                TokenKind::String | TokenKind::Cartouche | TokenKind::Verbatim | TokenKind::Ident
            )
        }) {
            start += 1;
        }
    }
}

/// Reads the theory name into `h.name`, from `toks[i]` just after `theory` (document tags
/// skipped); returns the index after the name.
fn theory_name_at(
    toks: &[&Token],
    text: &str,
    mut i: usize,
    h: &mut TheoryHeader,
) -> Result<usize, HeaderError> {
    // Document tags: `theory %invisible X`.
    while toks.get(i).is_some_and(|t| is_word(t, text, "%")) {
        i += 2;
    }
    match toks.get(i) {
        Some(t) if matches!(t.kind, TokenKind::Ident | TokenKind::String) => {
            h.name = name_text(t, text);
            Ok(i + 1)
        }
        other => Err(err(
            "expected a theory name after `theory`".into(),
            other.map(|t| t.range.start).unwrap_or(text.len()),
        )),
    }
}

/// Reads the `imports`, `keywords` and `abbrevs` sections from `toks[i]` up to `begin`,
/// which ends `h.range`; the first keyword declaration error, if any, is returned at the end.
fn header_sections_at(
    toks: &[&Token],
    text: &str,
    mut i: usize,
    h: &mut TheoryHeader,
) -> Result<(), HeaderError> {
    let mut errors = Vec::new();
    loop {
        let Some(t) = toks.get(i) else {
            return Err(err(
                format!("theory {} header has no `begin`", h.name),
                h.range.start,
            ));
        };
        if is_word(t, text, "begin") {
            h.range.end = t.range.end;
            break;
        } else if is_word(t, text, "imports") {
            i = imports_at(toks, text, i + 1, &mut h.imports);
        } else if is_word(t, text, "keywords") {
            i = keyword_decls_at(toks, text, i + 1, &mut h.keywords, &mut errors);
        } else if is_word(t, text, "abbrevs") {
            // Abbreviations only matter to editors: skip to the next header word.
            i += 1;
            while toks
                .get(i)
                .is_some_and(|t| !(t.kind == TokenKind::Ident && is_header_word(t.text(text))))
            {
                i += 1;
            }
        } else {
            return Err(err(
                format!(
                    "unexpected {:?} in the header of theory {} (expected imports, keywords, abbrevs or begin)",
                    t.text(text),
                    h.name
                ),
                t.range.start,
            ));
        }
    }
    match errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Reads the imported theory names from `toks[i]` into `imports`, up to the next header word
/// or non-name; returns the index where they stop.
fn imports_at(toks: &[&Token], text: &str, mut i: usize, imports: &mut Vec<String>) -> usize {
    while let Some(t) = toks.get(i) {
        let word = t.text(text);
        let is_name = matches!(t.kind, TokenKind::Ident | TokenKind::String);
        if !is_name || (t.kind == TokenKind::Ident && is_header_word(word)) {
            break;
        }
        imports.push(name_text(t, text));
        i += 1;
    }
    i
}

fn is_header_word(w: &str) -> bool {
    matches!(w, "imports" | "keywords" | "abbrevs" | "begin")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_with_keywords_and_abbrevs() {
        let src = "(* c *) section \\<open>S\\<close>\ntheory %invisible X imports Main \"HOL-Library.Multiset\" \"../E/T\"\n keywords \"foo\" :: thy_decl % \"ML\" and \"bar\" and \"baz\" \"qux\" :: \"qed\"\n abbrevs \"a\" = \"b\" and \"c\" = \"d\"\nbegin\nlemma x: True by simp\nend";
        let h = parse_header(src).unwrap();
        assert_eq!(h.name, "X");
        assert_eq!(h.imports, vec!["Main", "HOL-Library.Multiset", "../E/T"]);
        let kw: Vec<(&str, Option<KeywordKind>)> = h
            .keywords
            .iter()
            .map(|d| (d.name.as_str(), d.kind))
            .collect();
        assert_eq!(
            kw,
            vec![
                ("foo", Some(KeywordKind::ThyDecl)),
                ("bar", None),
                ("baz", Some(KeywordKind::Qed)),
                ("qux", Some(KeywordKind::Qed)),
            ]
        );
        assert!(
            src[h.range.clone()].starts_with("theory %invisible X")
                && src[h.range.clone()].ends_with("begin")
        );
    }

    #[test]
    fn header_errors_name_the_position() {
        assert!(parse_header("lemma x").is_err());
        assert!(parse_header("lemma x: \"theory\" using theory by simp").is_err());
        assert!(parse_header("text {* t *} section %important \"s\" theory A begin").is_ok());
        assert!(parse_header("chapter Limit\ntheory Limit imports Main begin").is_ok());
        let e = parse_header("theory X imports Main").unwrap_err();
        assert!(e.message.contains("begin"));
        let e = parse_header("theory X keywords \"a\" :: nonsense begin").unwrap_err();
        assert!(e.message.contains("nonsense"), "{e:?}");
    }
}

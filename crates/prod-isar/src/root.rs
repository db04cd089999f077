//! Isabelle session ROOT and ROOTS files.
//!
//! Grammar from the system manual (`Sessions.thy`, "Session ROOT specifications"):
//! ```text
//! chapter NAME
//! session NAME [(groups)] [in DIR] = [PARENT +]
//!   [description TEXT] [options [k = v, …]] [sessions S…] [directories D…]
//!   (theories [opts] T [(global)] …)* [document_theories …]
//!   (document_files [(in DIR)] F…)* (export_files [(in DIR)] [[N]] P…)* [export_classpath …]
//! ```
//! ROOT files share the outer lexical syntax of theories (strings, cartouches, nested comments),
//! so they are read with [`crate::lexer`].

use crate::header::name_text;
use crate::lexer::{lex, line_col, Token, TokenKind};

/// One `session` entry of a ROOT file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Session {
    pub name: String,
    /// The `chapter` in force (e.g. `AFP`).
    pub chapter: Option<String>,
    pub groups: Vec<String>,
    /// `in DIR`: the session's directory relative to the ROOT file.
    pub dir: Option<String>,
    /// `= Parent +`.
    pub parent: Option<String>,
    pub description: Option<String>,
    /// `options [k = v, flag]` (value `None` for a bare flag).
    pub options: Vec<(String, Option<String>)>,
    /// `sessions` clause: further sessions whose theories may be imported.
    pub sessions: Vec<String>,
    pub directories: Vec<String>,
    /// Theories of all `theories` sections, in order (global ones included).
    pub theories: Vec<String>,
    pub document_theories: Vec<String>,
    pub document_files: Vec<String>,
}

/// A ROOT syntax problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootError {
    pub message: String,
    pub offset: usize,
}

impl std::fmt::Display for RootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for RootError {}

const SECTION_WORDS: &[&str] = &[
    "description",
    "options",
    "sessions",
    "directories",
    "theories",
    "document_theories",
    "document_files",
    "export_files",
    "export_classpath",
    "session",
    "chapter",
];

struct Cursor<'a> {
    src: &'a str,
    toks: Vec<&'a Token>,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<&'a Token> {
        self.toks.get(self.i).copied()
    }
    fn peek_text(&self) -> Option<&'a str> {
        self.peek().map(|t| t.text(self.src))
    }
    fn at(&self, w: &str) -> bool {
        self.peek().is_some_and(|t| {
            matches!(t.kind, TokenKind::Ident | TokenKind::Keyword) && t.text(self.src) == w
        })
    }
    fn at_section_word(&self) -> bool {
        self.peek().is_some_and(|t| {
            t.kind == TokenKind::Ident && SECTION_WORDS.contains(&t.text(self.src))
        })
    }
    fn offset(&self) -> usize {
        self.peek().map(|t| t.range.start).unwrap_or(self.src.len())
    }
    /// A name: a string/cartouche, or adjacent word tokens glued (`HOL-Library`, `root.tex`).
    fn name(&mut self) -> Option<String> {
        let t = self.peek()?;
        match t.kind {
            TokenKind::String | TokenKind::Cartouche | TokenKind::AltString => {
                self.i += 1;
                Some(name_text(t, self.src))
            }
            TokenKind::Ident | TokenKind::Nat | TokenKind::Float | TokenKind::SymIdent => {
                let start = t.range.start;
                let mut end = t.range.end;
                self.i += 1;
                while let Some(n) = self.peek() {
                    let glue = n.range.start == end
                        && (matches!(
                            n.kind,
                            TokenKind::Ident
                                | TokenKind::Nat
                                | TokenKind::Float
                                | TokenKind::SymIdent
                        ) || (n.kind == TokenKind::Keyword
                            && matches!(n.text(self.src), "." | "..")));
                    if !glue {
                        break;
                    }
                    end = n.range.end;
                    self.i += 1;
                }
                Some(self.src[start..end].to_string())
            }
            _ => None,
        }
    }
    /// Names until a section word or something that is not a name.
    fn names(&mut self) -> Vec<String> {
        let mut v = Vec::new();
        while !self.at_section_word() {
            match self.name() {
                Some(n) => v.push(n),
                None => break,
            }
        }
        v
    }
    /// Skips a balanced `[ … ]` or `( … )` group when present; returns its tokens' texts.
    fn group(&mut self, open: &str, close: &str) -> Option<Vec<&'a Token>> {
        if !self.at(open) {
            return None;
        }
        let mut depth = 0usize;
        let mut inner = Vec::new();
        while let Some(t) = self.peek() {
            self.i += 1;
            let s = t.text(self.src);
            if t.kind == TokenKind::Keyword && s == open {
                depth += 1;
                if depth == 1 {
                    continue;
                }
            } else if t.kind == TokenKind::Keyword && s == close {
                depth -= 1;
                if depth == 0 {
                    return Some(inner);
                }
            }
            inner.push(t);
        }
        Some(inner)
    }
}

/// Parses a ROOT file: its sessions, and the problems found (parsing continues at the next
/// `session` after an error).
pub fn parse_root(text: &str) -> (Vec<Session>, Vec<RootError>) {
    let (tokens, lex_errors) = lex(text);
    let mut errors: Vec<RootError> = lex_errors
        .into_iter()
        .map(|e| RootError {
            message: e.message,
            offset: e.offset,
        })
        .collect();
    let mut c = Cursor {
        src: text,
        toks: tokens.iter().filter(|t| !t.is_improper()).collect(),
        i: 0,
    };
    let mut sessions = Vec::new();
    let mut chapter: Option<String> = None;
    while c.peek().is_some() {
        if c.at("chapter") {
            c.i += 1;
            chapter = c.name();
            continue;
        }
        if !c.at("session") {
            errors.push(c.error(
                c.offset(),
                format!(
                    "expected `session` or `chapter`, found {:?}",
                    c.peek_text().unwrap_or("")
                ),
            ));
            c.resync();
            continue;
        }
        c.i += 1;
        match session_header(&mut c, &chapter) {
            Ok(mut s) => {
                session_sections(&mut c, &mut s, &mut errors);
                sessions.push(s);
            }
            Err(e) => errors.push(e),
        }
    }
    (sessions, errors)
}

impl Cursor<'_> {
    /// A problem at `offset`, its message prefixed with the line and column.
    fn error(&self, offset: usize, msg: String) -> RootError {
        let (line, col) = line_col(self.src, offset);
        RootError {
            message: format!("line {line}, column {col}: {msg}"),
            offset,
        }
    }

    /// Past the unexpected token, on to the next `session`/`chapter`.
    fn resync(&mut self) {
        self.i += 1;
        while self.peek().is_some() && !self.at("session") && !self.at("chapter") {
            self.i += 1;
        }
    }

    /// The names of a `theories`/`document_theories` section, `(global)` markers skipped.
    fn theory_names(&mut self) -> Vec<String> {
        let mut v = Vec::new();
        while !self.at_section_word() {
            if self.group("(", ")").is_some() {
                continue; // `(global)`
            }
            match self.name() {
                Some(n) => v.push(n),
                None => break,
            }
        }
        v
    }
}

/// After the `session` word: `NAME [(groups)] [in DIR] = [PARENT +]`, in the `chapter` in
/// force; the error when the name or the `=` is missing.
fn session_header(c: &mut Cursor, chapter: &Option<String>) -> Result<Session, RootError> {
    let mut s = Session {
        chapter: chapter.clone(),
        ..Session::default()
    };
    match c.name() {
        Some(n) => s.name = n,
        None => return Err(c.error(c.offset(), "expected a session name".into())),
    }
    if let Some(g) = c.group("(", ")") {
        s.groups = g
            .iter()
            .map(|t| name_text(t, c.src))
            .filter(|x| x != ",")
            .collect();
    }
    if c.at("in") {
        c.i += 1;
        s.dir = c.name();
    }
    if !c.at("=") {
        return Err(c.error(c.offset(), format!("expected `=` after session {}", s.name)));
    }
    c.i += 1;
    // `= Parent +` (the parent is optional only for Pure).
    let save = c.i;
    if let Some(p) = c.name() {
        if c.at("+") {
            c.i += 1;
            s.parent = Some(p);
        } else {
            c.i = save;
        }
    }
    Ok(s)
}

/// The session's sections (`description`, `options`, `theories`, …) up to the next
/// `session`/`chapter`; an unknown word is an error, skipped to the next section word.
fn session_sections(c: &mut Cursor, s: &mut Session, errors: &mut Vec<RootError>) {
    while let Some(w) = c.peek_text() {
        if c.at("session") || c.at("chapter") {
            break;
        }
        c.i += 1;
        match w {
            "description" => s.description = c.name(),
            "options" => {
                if let Some(g) = c.group("[", "]") {
                    s.options = parse_options(&g, c.src);
                }
            }
            "sessions" => s.sessions.extend(c.names()),
            "directories" => s.directories.extend(c.names()),
            "theories" | "document_theories" => {
                c.group("[", "]");
                let v = c.theory_names();
                if w == "theories" {
                    s.theories.extend(v);
                } else {
                    s.document_theories.extend(v);
                }
            }
            "document_files" | "export_files" | "export_classpath" => {
                c.group("(", ")");
                c.group("[", "]");
                let v = c.names();
                if w == "document_files" {
                    s.document_files.extend(v);
                }
            }
            other => {
                errors.push(c.error(
                    c.toks[c.i - 1].range.start,
                    format!("unexpected {other:?} in session {}", s.name),
                ));
                while c.peek().is_some() && !c.at_section_word() {
                    c.i += 1;
                }
            }
        }
    }
}

fn parse_options(toks: &[&Token], src: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for part in toks.split(|t| t.kind == TokenKind::Keyword && t.text(src) == ",") {
        let mut it = part.split(|t| t.kind == TokenKind::Keyword && t.text(src) == "=");
        let key: String = it
            .next()
            .unwrap_or(&[])
            .iter()
            .map(|t| name_text(t, src))
            .collect();
        let val = it
            .next()
            .map(|v| v.iter().map(|t| name_text(t, src)).collect::<String>());
        if !key.is_empty() {
            out.push((key, val));
        }
    }
    out
}

/// Parses a ROOTS file: one directory per line; blank lines and `#` comments are ignored.
pub fn parse_roots(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_typical_afp_root() {
        let src = "chapter AFP\n\n(* a comment *)\nsession XML (AFP) = \"HOL-Library\" +\n  options [timeout = 600, quick_and_dirty]\n  sessions\n    Certification_Monads\n    Show\n  theories [document = false]\n    Xmlt \"Sub/Other\" (global)\n  document_files\n    \"root.tex\" root.bib\n\nsession XML_Ex in \"ex\" = XML +\n  description \\<open>examples\\<close>\n  directories \"ex\"\n  theories Ex\n";
        let (s, e) = parse_root(src);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "XML");
        assert_eq!(s[0].chapter.as_deref(), Some("AFP"));
        assert_eq!(s[0].groups, vec!["AFP"]);
        assert_eq!(s[0].parent.as_deref(), Some("HOL-Library"));
        assert_eq!(
            s[0].options,
            vec![
                ("timeout".to_string(), Some("600".to_string())),
                ("quick_and_dirty".to_string(), None)
            ]
        );
        assert_eq!(s[0].sessions, vec!["Certification_Monads", "Show"]);
        assert_eq!(s[0].theories, vec!["Xmlt", "Sub/Other"]);
        assert_eq!(s[0].document_files, vec!["root.tex", "root.bib"]);
        assert_eq!(s[1].dir.as_deref(), Some("ex"));
        assert_eq!(s[1].parent.as_deref(), Some("XML"));
        assert_eq!(s[1].description.as_deref(), Some("examples"));
    }

    #[test]
    fn errors_name_the_line() {
        let (_, e) = parse_root("chapter AFP\nsession = X +\n");
        assert!(e[0].message.starts_with("line 2"), "{e:?}");
        assert_eq!(parse_roots("A\n# c\n\nB # d\n"), vec!["A", "B"]);
    }
}

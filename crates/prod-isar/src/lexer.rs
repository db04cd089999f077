//! Lossless lexer of Isabelle/Isar outer syntax.
//!
//! Follows the lexical rules of the isar-ref manual (`Outer_Syntax.thy`, "Lexical matters") and
//! `Pure/General/symbol.ML`: identifiers with `\<...>` letters and `\<^sub>` subscripts, nested
//! `(* *)` comments, nested cartouches (`\<open>…\<close>` and the rendered `‹…›`, which may be
//! mixed), strings, altstrings, `{* *}` verbatim text and formal comments (`\<comment>`/`―`,
//! `\<^cancel>`, `\<^latex>`, `\<^marker>` and the old `--`, each with the text after it).
//!
//! The lexer does not know the keyword table: whether an identifier (or `{`, `.`, `\<proof>`, …)
//! starts a command is the table's decision. Symbolic tokens that Pure's bootstrap declares as minor
//! keywords (`::`, `==`, `(`, …) are reported as [`TokenKind::Keyword`] so that parsers of headers and
//! fact references need not look at sym-ident text.
//!
//! `lex` never fails: the tokens cover the input exactly, in order, and every problem (unclosed
//! comment, stray `\<close>`, unknown character) yields an [`TokenKind::Error`] token plus a
//! [`LexError`] naming the position. [`literals`] is the same lexing seen as the strings and
//! comments of a text, closed or not (what the conditional-proof parser skips).

use std::ops::Range;

use prod_core::{Literal, LiteralKind};

/// What a token is. See the module documentation for the exact rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TokenKind {
    /// Short or long identifier (`foo`, `foo.bar`, `x\<^sub>1`, `\<alpha>'`); command words too.
    Ident,
    /// Symbolic keyword: `::`, `==`, `=>`, `(`, `)`, `[`, `]`, `{`, `}`, `.`, `..`, `,`, `:`, `|`, …
    Keyword,
    /// Natural number.
    Nat,
    /// `nat.nat`.
    Float,
    /// `"…"` with `\"`, `\\` and `\ddd` escapes; may span lines.
    String,
    /// `` `…` ``.
    AltString,
    /// `\<open>…\<close>` or `‹…›`, nested.
    Cartouche,
    /// `{* … *}`.
    Verbatim,
    /// `(* … *)`, nested.
    Comment,
    /// `\<comment>`/`―`/`\<^cancel>`/`\<^latex>`/`\<^marker>` with its cartouche, or `--` with its
    /// string, cartouche or verbatim text.
    FormalComment,
    /// Blanks and line breaks.
    Space,
    /// Symbolic identifier: a run of `! # $ % & * + - / < = > ? @ ^ _ | ~`, or one `\<foo>` that is
    /// not a letter (e.g. `\<proof>`, `\<Longrightarrow>`), or one non-letter non-ASCII character.
    SymIdent,
    /// `'a` (and the schematic `?'a`).
    TypeVar,
    /// `?x` or `?x.1`.
    Var,
    /// Unclosed or unknown text; the error list says why.
    Error,
}

/// One token: its kind and its byte range in the lexed text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Token {
    pub kind: TokenKind,
    pub range: Range<usize>,
}

impl Token {
    /// The token's text in `src` (the text that was lexed).
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.range.clone()).unwrap_or("")
    }

    /// Comments, formal comments and spaces: void for the outer syntax.
    pub fn is_improper(&self) -> bool {
        matches!(
            self.kind,
            TokenKind::Space | TokenKind::Comment | TokenKind::FormalComment
        )
    }
}

/// A lexical problem at byte `offset` of the input.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LexError {
    pub message: String,
    pub offset: usize,
}

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for LexError {}

/// 1-based line and column (in chars) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut off = offset.min(text.len());
    while off > 0 && !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = &text[..off];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map(|p| p + 1).unwrap_or(0);
    (line, before[line_start..].chars().count() + 1)
}

/// Lexes `text` completely. Never fails: returns every token (covering the input losslessly, in
/// order) and the errors found.
pub fn lex(text: &str) -> (Vec<Token>, Vec<LexError>) {
    lex_prefix(text, |_, _| false)
}

/// Lexes `text` up to and including the first token for which `stop(token, text)` holds (or to
/// the end). Used to read theory headers without lexing whole files.
pub fn lex_prefix(
    text: &str,
    mut stop: impl FnMut(&Token, &str) -> bool,
) -> (Vec<Token>, Vec<LexError>) {
    let mut lx = Lexer {
        src: text,
        b: text.as_bytes(),
        tokens: Vec::new(),
        errors: Vec::new(),
        literal_errors: Vec::new(),
    };
    lx.run(&mut stop);
    (lx.tokens, lx.errors)
}

/// The strings, alt strings, cartouches, verbatim texts, comments and formal comments of `text`
/// (in order, the outermost only), as [`lex`] finds them; one that never closes runs to the end
/// and is not `closed`. This is what `IsarLanguage` gives the conditional-proof parser, which
/// finds its markers only outside these.
pub fn literals(text: &str) -> Vec<Literal> {
    let mut lx = Lexer {
        src: text,
        b: text.as_bytes(),
        tokens: Vec::new(),
        errors: Vec::new(),
        literal_errors: Vec::new(),
    };
    lx.run(&mut |_, _| false);
    let mut errors = lx.literal_errors.iter().peekable();
    let mut out = vec![];
    for t in &lx.tokens {
        let (kind, closed) = match t.kind {
            TokenKind::String
            | TokenKind::AltString
            | TokenKind::Cartouche
            | TokenKind::Verbatim => (LiteralKind::String, true),
            TokenKind::Comment | TokenKind::FormalComment => (LiteralKind::Comment, true),
            TokenKind::Error => {
                while errors.peek().is_some_and(|e| e.0 < t.range.start) {
                    errors.next();
                }
                match errors.peek() {
                    Some(&&(start, kind, closed)) if start == t.range.start => (kind, closed),
                    _ => continue,
                }
            }
            _ => continue,
        };
        out.push(Literal {
            range: t.range.clone(),
            kind,
            closed,
        });
    }
    out
}

/// Symbolic minor keywords of Pure's bootstrap and `Pure.thy` header (plus the command keywords
/// `{ } . ..`), which the lexer reports as [`TokenKind::Keyword`] when a whole sym run equals one.
const SYM_KEYWORDS: &[&str] = &["!!", "!", "+", "<", "<=", "==", "=>", "?", "%", "=", "|"];

/// `\<name>` symbols that Pure declares as minor keywords.
const SYMBOL_KEYWORDS: &[&str] = &[
    "\\<equiv>",
    "\\<leftharpoondown>",
    "\\<rightharpoonup>",
    "\\<rightleftharpoons>",
    "\\<subseteq>",
];

/// Greek letters that Isabelle counts as letters (`\<lambda>` is deliberately absent: it binds).
const GREEK: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "mu",
    "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "Gamma",
    "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega",
];

fn is_sym_char(c: u8) -> bool {
    matches!(
        c,
        b'!' | b'#'
            | b'$'
            | b'%'
            | b'&'
            | b'*'
            | b'+'
            | b'-'
            | b'/'
            | b'<'
            | b'='
            | b'>'
            | b'?'
            | b'@'
            | b'^'
            | b'_'
            | b'|'
            | b'~'
    )
}

fn is_blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `\<name>` names that are letters: `\<A>`..`\<z>`, `\<AA>`..`\<zz>` (calligraphic, fraktur)
/// and the Greek letters except `\<lambda>`.
fn is_letter_symbol_name(name: &str) -> bool {
    let n = name.as_bytes();
    match n.len() {
        1 => n[0].is_ascii_alphabetic(),
        2 if n[0].is_ascii_alphabetic() && n[0] == n[1] => true,
        _ => GREEK.contains(&name),
    }
}

const CARTOUCHE_OPEN: &str = "\\<open>";
const CARTOUCHE_CLOSE: &str = "\\<close>";
const OPEN_UTF8: &str = "\u{2039}"; // ‹
const CLOSE_UTF8: &str = "\u{203a}"; // ›

struct Lexer<'a> {
    src: &'a str,
    b: &'a [u8],
    tokens: Vec<Token>,
    errors: Vec<LexError>,
    /// The error tokens that are literals (by start offset): a string with a bad escape
    /// (closed), or quoted text, a cartouche, verbatim text or a comment that never closes.
    literal_errors: Vec<(usize, LiteralKind, bool)>,
}

/// The symbol `\<...>` starting at `i`: its end and name (with a leading `^` for control symbols).
fn symbol_at(b: &[u8], i: usize) -> Option<(usize, &[u8])> {
    if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'<') {
        return None;
    }
    let mut j = i + 2;
    if b.get(j) == Some(&b'^') {
        j += 1;
    }
    let name_start = j;
    if !b.get(j).is_some_and(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    while b
        .get(j)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        j += 1;
    }
    if b.get(j) == Some(&b'>') {
        Some((j + 1, &b[name_start - usize::from(b[i + 2] == b'^')..j]))
    } else {
        None
    }
}

impl<'a> Lexer<'a> {
    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        self.tokens.push(Token {
            kind,
            range: start..end,
        });
    }

    fn error(&mut self, start: usize, end: usize, message: String) {
        let (line, col) = line_col(self.src, start);
        self.errors.push(LexError {
            message: format!("line {line}, column {col}: {message}"),
            offset: start,
        });
        self.push(TokenKind::Error, start, end);
    }

    fn starts_with(&self, i: usize, s: &str) -> bool {
        self.b.get(i..i + s.len()) == Some(s.as_bytes())
    }

    /// The char at byte `i` (which must be a char boundary).
    fn char_at(&self, i: usize) -> Option<char> {
        self.src.get(i..).and_then(|s| s.chars().next())
    }

    /// Byte length of the char at `i` (1 when `i` is not a boundary, which cannot happen for the
    /// positions this lexer visits).
    fn char_len(&self, i: usize) -> usize {
        self.char_at(i).map(char::len_utf8).unwrap_or(1)
    }

    /// End of a letter at `i`, if one starts there.
    fn letter_end(&self, i: usize) -> Option<usize> {
        let c = *self.b.get(i)?;
        if c.is_ascii_alphabetic() {
            return Some(i + 1);
        }
        if c == b'\\' {
            let (end, name) = symbol_at(self.b, i)?;
            let name = std::str::from_utf8(name).ok()?;
            return is_letter_symbol_name(name).then_some(end);
        }
        if c >= 0x80 {
            let ch = self.char_at(i)?;
            if ch.is_alphabetic() {
                return Some(i + ch.len_utf8());
            }
        }
        None
    }

    /// End of a quasi-letter (letter, digit, `_`, `'`) at `i`.
    fn quasi_letter_end(&self, i: usize) -> Option<usize> {
        match self.b.get(i) {
            Some(c) if c.is_ascii_digit() || *c == b'_' || *c == b'\'' => Some(i + 1),
            _ => self.letter_end(i),
        }
    }

    /// `short_ident = letter (subscript? quasiletter)*` starting at `i`.
    fn short_ident_end(&self, i: usize) -> Option<usize> {
        let mut j = self.letter_end(i)?;
        loop {
            if let Some(e) = self.quasi_letter_end(j) {
                j = e;
                continue;
            }
            if let Some((e, name)) = symbol_at(self.b, j) {
                if matches!(name, b"^sub" | b"^isub" | b"^isup" | b"^sup") {
                    if let Some(e2) = self.quasi_letter_end(e) {
                        j = e2;
                        continue;
                    }
                }
            }
            return Some(j);
        }
    }

    /// `long_ident = short_ident (. short_ident)*` starting at `i`.
    fn long_ident_end(&self, i: usize) -> Option<usize> {
        let mut j = self.short_ident_end(i)?;
        while self.b.get(j) == Some(&b'.') {
            match self.short_ident_end(j + 1) {
                Some(e) => j = e,
                None => break,
            }
        }
        Some(j)
    }

    fn nat_end(&self, i: usize) -> Option<usize> {
        let mut j = i;
        while self.b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        (j > i).then_some(j)
    }

    /// End of a cartouche opening at `i` (either spelling), or `Err(end of input)` if unclosed.
    fn cartouche_end(&self, i: usize) -> Result<usize, usize> {
        let mut depth = 0usize;
        let mut j = i;
        while j < self.b.len() {
            if self.starts_with(j, CARTOUCHE_OPEN) {
                depth += 1;
                j += CARTOUCHE_OPEN.len();
            } else if self.starts_with(j, OPEN_UTF8) {
                depth += 1;
                j += OPEN_UTF8.len();
            } else if self.starts_with(j, CARTOUCHE_CLOSE) || self.starts_with(j, CLOSE_UTF8) {
                j += if self.b[j] == b'\\' {
                    CARTOUCHE_CLOSE.len()
                } else {
                    CLOSE_UTF8.len()
                };
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(j);
                }
            } else {
                j += self.char_len(j);
            }
        }
        Err(self.b.len())
    }

    fn is_cartouche_open(&self, i: usize) -> bool {
        self.starts_with(i, CARTOUCHE_OPEN) || self.starts_with(i, OPEN_UTF8)
    }

    /// Quoted text, `q` the quote byte; `Err(end)` if unclosed. The escapes are Isabelle's
    /// (`Symbol_Pos.scan_str`): `\q`, `\\` and `\ddd`; a symbol `\<name>` is no escape. The
    /// offset of any other backslash comes back too: Isabelle rejects such a string.
    fn quoted_end(&self, i: usize, q: u8) -> Result<(usize, Option<usize>), usize> {
        let mut j = i + 1;
        let mut bad = None;
        while j < self.b.len() {
            let c = self.b[j];
            if c == q {
                return Ok((j + 1, bad));
            }
            if c == b'\\' {
                if let Some((end, _)) = symbol_at(self.b, j) {
                    j = end;
                    continue;
                }
                let next = self.b.get(j + 1).copied();
                let digits = self
                    .b
                    .get(j + 1..j + 4)
                    .is_some_and(|d| d.iter().all(u8::is_ascii_digit));
                if next == Some(q) || next == Some(b'\\') {
                    j += 2;
                } else if digits {
                    j += 4;
                } else {
                    bad.get_or_insert(j);
                    j += 1;
                }
            } else {
                j += self.char_len(j);
            }
        }
        Err(self.b.len())
    }

    /// A string or alt string token (an error token when unclosed or with a bad escape).
    fn quoted(&mut self, kind: TokenKind, start: usize, q: u8, what: &str) {
        match self.quoted_end(start, q) {
            Ok((end, None)) => self.push(kind, start, end),
            Ok((end, Some(at))) => {
                self.literal_errors.push((start, LiteralKind::String, true));
                let (line, col) = line_col(self.src, at);
                self.error(
                    start,
                    end,
                    format!(
                        "bad escape character in {what} (backslash at line {line}, column {col})"
                    ),
                )
            }
            Err(end) => {
                self.literal_errors
                    .push((start, LiteralKind::String, false));
                self.error(start, end, format!("unclosed {what}"))
            }
        }
    }

    fn comment_end(&self, i: usize) -> Result<usize, usize> {
        let mut depth = 0usize;
        let mut j = i;
        while j < self.b.len() {
            if self.starts_with(j, "(*") {
                depth += 1;
                j += 2;
            } else if self.starts_with(j, "*)") {
                j += 2;
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Ok(j);
                }
            } else {
                j += self.char_len(j);
            }
        }
        Err(self.b.len())
    }

    fn verbatim_end(&self, i: usize) -> Result<usize, usize> {
        let mut j = i + 2;
        while j < self.b.len() {
            if self.starts_with(j, "*}") {
                return Ok(j + 2);
            }
            j += self.char_len(j);
        }
        Err(self.b.len())
    }

    /// Emits a delimited token (`Ok(end)`) or an error token up to end of input.
    fn delimited(&mut self, kind: TokenKind, start: usize, r: Result<usize, usize>, what: &str) {
        match r {
            Ok(end) => self.push(kind, start, end),
            Err(end) => {
                let literal = match kind {
                    TokenKind::Comment | TokenKind::FormalComment => LiteralKind::Comment,
                    _ => LiteralKind::String,
                };
                self.literal_errors.push((start, literal, false));
                self.error(start, end, format!("unclosed {what}"))
            }
        }
    }

    /// Formal comment: the marker `start..after_marker`, optional blanks when `blanks_ok`, then a
    /// cartouche (or, for the old `--`, also a string or verbatim text).
    fn formal_comment(&mut self, start: usize, after_marker: usize, blanks_ok: bool, old: bool) {
        let mut j = after_marker;
        if blanks_ok {
            while self.b.get(j).is_some_and(|c| is_blank(*c)) {
                j += 1;
            }
        }
        let marker = self.src.get(start..after_marker).unwrap_or("?").to_string();
        let body = if self.is_cartouche_open(j) {
            Some(self.cartouche_end(j))
        } else if old && self.b.get(j) == Some(&b'"') {
            Some(self.quoted_end(j, b'"').map(|(end, _)| end))
        } else if old && self.starts_with(j, "{*") {
            Some(self.verbatim_end(j))
        } else {
            None
        };
        match body {
            Some(r) => self.delimited(
                TokenKind::FormalComment,
                start,
                r,
                &format!("text after formal comment marker {marker}"),
            ),
            None => self.error(
                start,
                after_marker,
                format!("formal comment marker {marker} is not followed by a cartouche"),
            ),
        }
    }

    /// Lexes from the start, one token at a time, until the input ends or `stop` accepts the
    /// last token.
    fn run(&mut self, stop: &mut dyn FnMut(&Token, &str) -> bool) {
        let mut i = 0;
        while i < self.b.len() {
            self.token_at(i);
            i = self
                .tokens
                .last()
                .map(|t| t.range.end)
                .unwrap_or(i + 1)
                .max(i + 1);
            if self.tokens.last().is_some_and(|t| stop(t, self.src)) {
                return;
            }
        }
    }

    /// Emits the token (or error token) that starts at byte `i`, chosen by its first byte.
    fn token_at(&mut self, i: usize) {
        let start = i;
        let c = self.b[i];
        match c {
            _ if is_blank(c) => {
                let mut end = i;
                while self.b.get(end).is_some_and(|c| is_blank(*c)) {
                    end += 1;
                }
                self.push(TokenKind::Space, start, end);
            }
            b'(' if self.b.get(i + 1) == Some(&b'*') => {
                let r = self.comment_end(i);
                self.delimited(TokenKind::Comment, start, r, "comment (* ... *)");
            }
            b'{' if self.b.get(i + 1) == Some(&b'*') => {
                let r = self.verbatim_end(i);
                self.delimited(TokenKind::Verbatim, start, r, "verbatim text {* ... *}");
            }
            b'"' => self.quoted(TokenKind::String, start, b'"', "string \"...\""),
            b'`' => self.quoted(TokenKind::AltString, start, b'`', "alt string `...`"),
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b',' | b';' => {
                self.push(TokenKind::Keyword, start, i + 1);
            }
            b':' => {
                let end = if self.b.get(i + 1) == Some(&b':') {
                    i + 2
                } else {
                    i + 1
                };
                self.push(TokenKind::Keyword, start, end);
            }
            b'.' => {
                let end = if self.b.get(i + 1) == Some(&b'.') {
                    i + 2
                } else {
                    i + 1
                };
                self.push(TokenKind::Keyword, start, end);
            }
            b'\'' => match self.short_ident_end(i + 1) {
                Some(end) => self.push(TokenKind::TypeVar, start, end),
                None => self.error(start, i + 1, "stray ' (not a type variable)".into()),
            },
            b'?' if self.short_ident_end(i + 1).is_some()
                || (self.b.get(i + 1) == Some(&b'\'') && self.short_ident_end(i + 2).is_some()) =>
            {
                self.schematic_var(i)
            }
            b'0'..=b'9' => self.number(i),
            b'\\' => self.backslash(i),
            _ if is_sym_char(c) => self.sym_run(i),
            _ if c.is_ascii_alphabetic() => {
                let end = self.long_ident_end(i).unwrap_or(i + 1);
                self.push(TokenKind::Ident, start, end);
            }
            _ if c >= 0x80 => self.non_ascii(i),
            _ => {
                self.error(
                    start,
                    i + 1,
                    format!("unexpected character {:?}", char::from(c)),
                );
            }
        }
    }

    /// A schematic variable `?x`, `?x.1` or schematic type variable `?'a` at `i` (the caller
    /// has checked that a name follows the `?`).
    fn schematic_var(&mut self, i: usize) {
        let (kind, id_start) = if self.b[i + 1] == b'\'' {
            (TokenKind::TypeVar, i + 2)
        } else {
            (TokenKind::Var, i + 1)
        };
        let mut end = self.short_ident_end(id_start).unwrap_or(id_start);
        // `?x.1`: an index after a dot.
        if self.b.get(end) == Some(&b'.') {
            if let Some(e) = self.nat_end(end + 1) {
                end = e;
            }
        }
        self.push(kind, i, end);
    }

    /// A natural number, or a float when a dot and digits follow, at `i`.
    fn number(&mut self, i: usize) {
        let mut end = self.nat_end(i).unwrap_or(i + 1);
        let mut kind = TokenKind::Nat;
        if self.b.get(end) == Some(&b'.') {
            if let Some(e) = self.nat_end(end + 1) {
                end = e;
                kind = TokenKind::Float;
            }
        }
        self.push(kind, i, end);
    }

    /// A run of symbol characters at `i`: an old-style `--` formal comment, a symbolic keyword,
    /// or a symbolic identifier.
    fn sym_run(&mut self, i: usize) {
        let mut end = i;
        while self.b.get(end).is_some_and(|c| is_sym_char(*c)) {
            end += 1;
        }
        let run = &self.src[i..end];
        if run == "--" && self.old_comment_follows(end) {
            self.formal_comment(i, end, true, true);
        } else if SYM_KEYWORDS.contains(&run) {
            self.push(TokenKind::Keyword, i, end);
        } else {
            self.push(TokenKind::SymIdent, i, end);
        }
    }

    /// `--` starts an old-style formal comment only when text follows (else it is a sym ident).
    fn old_comment_follows(&self, mut j: usize) -> bool {
        while self.b.get(j).is_some_and(|c| is_blank(*c)) {
            j += 1;
        }
        self.is_cartouche_open(j) || self.b.get(j) == Some(&b'"') || self.starts_with(j, "{*")
    }

    fn backslash(&mut self, i: usize) {
        let Some((end, name)) = symbol_at(self.b, i) else {
            let (line, col) = line_col(self.src, i);
            let msg = if self.b.get(i + 1) == Some(&b'<') {
                "malformed symbol (expected \\<name>)"
            } else {
                "stray backslash"
            };
            self.errors.push(LexError {
                message: format!("line {line}, column {col}: {msg}"),
                offset: i,
            });
            self.push(TokenKind::Error, i, i + 1);
            return;
        };
        let name = std::str::from_utf8(name).unwrap_or("");
        match name {
            "open" => {
                let r = self.cartouche_end(i);
                self.delimited(
                    TokenKind::Cartouche,
                    i,
                    r,
                    "cartouche \\<open> ... \\<close>",
                );
            }
            "close" => self.error(i, end, "\\<close> without \\<open>".into()),
            "comment" => self.formal_comment(i, end, true, false),
            "^cancel" | "^latex" | "^marker" => self.formal_comment(i, end, true, false),
            _ if is_letter_symbol_name(name) => {
                let e = self.long_ident_end(i).unwrap_or(end);
                self.push(TokenKind::Ident, i, e);
            }
            _ => {
                let text = &self.src[i..end];
                let kind = if SYMBOL_KEYWORDS.contains(&text) {
                    TokenKind::Keyword
                } else {
                    TokenKind::SymIdent
                };
                self.push(kind, i, end);
            }
        }
    }

    fn non_ascii(&mut self, i: usize) {
        let Some(ch) = self.char_at(i) else {
            // Not reachable for valid &str input at a token boundary; be safe anyway.
            self.error(i, i + 1, "invalid UTF-8 position".into());
            return;
        };
        let len = ch.len_utf8();
        match ch {
            '\u{2039}' => {
                let r = self.cartouche_end(i);
                self.delimited(
                    TokenKind::Cartouche,
                    i,
                    r,
                    "cartouche \u{2039} ... \u{203a}",
                );
            }
            '\u{203a}' => self.error(i, i + len, "\u{203a} without \u{2039}".into()),
            '\u{2015}' => self.formal_comment(i, i + len, true, false),
            _ if ch.is_alphabetic() => {
                let e = self.long_ident_end(i).unwrap_or(i + len);
                self.push(TokenKind::Ident, i, e);
            }
            _ => self.push(TokenKind::SymIdent, i, i + len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<(TokenKind, &str)> {
        let (toks, _) = lex(s);
        toks.iter()
            .filter(|t| t.kind != TokenKind::Space)
            .map(|t| (t.kind, t.text(s)))
            .collect()
    }

    #[test]
    fn idents_and_keywords() {
        use TokenKind::*;
        assert_eq!(
            kinds("lemma foo.bar_1': \"x\" x\\<^sub>1 \\<alpha>' \\<pi>'' \\<AA> ::"),
            vec![
                (Ident, "lemma"),
                (Ident, "foo.bar_1'"),
                (Keyword, ":"),
                (String, "\"x\""),
                (Ident, "x\\<^sub>1"),
                (Ident, "\\<alpha>'"),
                (Ident, "\\<pi>''"),
                (Ident, "\\<AA>"),
                (Keyword, "::"),
            ]
        );
    }

    #[test]
    fn nested_comment_and_cartouche() {
        use TokenKind::*;
        assert_eq!(
            kinds("(* a (* b *) c *) \\<open>x ‹y› \\<close> z"),
            vec![
                (Comment, "(* a (* b *) c *)"),
                (Cartouche, "\\<open>x ‹y› \\<close>"),
                (Ident, "z")
            ]
        );
    }

    #[test]
    fn formal_comments() {
        use TokenKind::*;
        assert_eq!(
            kinds("by simp \\<comment> \\<open>c\\<close> -- \"old\" ― ‹x› \\<^marker>\\<open>tag\\<close> -- x"),
            vec![
                (Ident, "by"),
                (Ident, "simp"),
                (FormalComment, "\\<comment> \\<open>c\\<close>"),
                (FormalComment, "-- \"old\""),
                (FormalComment, "― ‹x›"),
                (FormalComment, "\\<^marker>\\<open>tag\\<close>"),
                (SymIdent, "--"),
                (Ident, "x"),
            ]
        );
    }

    #[test]
    fn vars_numbers_symbols() {
        use TokenKind::*;
        assert_eq!(
            kinds("?x ?y.2 'a ?'b 12 1.5 ==> == \\<proof> . .. { } {* v *}"),
            vec![
                (Var, "?x"),
                (Var, "?y.2"),
                (TypeVar, "'a"),
                (TypeVar, "?'b"),
                (Nat, "12"),
                (Float, "1.5"),
                (SymIdent, "==>"),
                (Keyword, "=="),
                (SymIdent, "\\<proof>"),
                (Keyword, "."),
                (Keyword, ".."),
                (Keyword, "{"),
                (Keyword, "}"),
                (Verbatim, "{* v *}"),
            ]
        );
    }

    #[test]
    fn errors_are_reported_and_lossless() {
        for s in [
            "(* open",
            "\"abc",
            "\\<open> x",
            "\\<close>",
            "\\x",
            "\\<comment> x",
            "'",
            "\u{1}",
            "\"a\\x\"",
        ] {
            let (toks, errs) = lex(s);
            assert!(!errs.is_empty(), "{s:?}");
            assert!(toks.iter().any(|t| t.kind == TokenKind::Error), "{s:?}");
            let joined: String = toks.iter().map(|t| t.text(s)).collect();
            assert_eq!(joined, s);
        }
    }

    #[test]
    fn line_col_counts_chars() {
        assert_eq!(line_col("ab\n‹c", 6), (2, 2));
        assert_eq!(line_col("", 5), (1, 1));
    }
}

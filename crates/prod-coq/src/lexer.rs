//! Coq sentence lexer and identifier lexer (never fails, never panics).
//!
//! Follows Coq 8.16's own lexer (`clexer.ml`) where it matters for splitting:
//! * comments `(* … *)` nest, and a `"` inside a comment opens a string that must close
//!   (so `(* "*)" *)` is one comment), exactly as Coq does;
//! * strings `"…"` escape a quote by doubling it (`""`);
//! * a sentence ends at a `.` followed by a blank (space, tab, newline, CR, form feed) or by the
//!   end of the input; a run of two dots (`..`, recursive notations) never ends a sentence, a run
//!   of three (`...`, the `Proof with` terminator) followed by a blank does;
//! * `.` glued to a letter (`Nat.add_comm`, `x.(f)`) is never an end;
//! * at the start of a sentence, a run of one repeated bullet character (`-`, `--`, `+++`, `*`)
//!   and a single `{` or `}` are sentences of their own; `{|` (record syntax) is not a brace;
//!   a goal selector followed by a brace (`2: {`, `[goal]: {`) is one `BraceOpen` sentence.

use std::ops::Range;

/// What a sentence is, as far as the lexer can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SentenceKind {
    /// Anything that ends with `.` (or `...`): a vernacular command or a tactic.
    Command,
    /// A bullet `-`, `+`, `*` or a run of one of them (`--`, `***`).
    Bullet,
    /// `{`, possibly with a goal selector (`2: {`, `[x]: {`).
    BraceOpen,
    /// `}`.
    BraceClose,
}

/// One sentence: its byte range in the input (starting at its first significant character,
/// i.e. after leading blanks and comments, and ending just after the final `.`, bullet or brace).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Sentence {
    pub range: Range<usize>,
    pub kind: SentenceKind,
}

impl Sentence {
    /// The sentence's text in `input` (the string it was lexed from).
    pub fn text<'a>(&self, input: &'a str) -> &'a str {
        input.get(self.range.clone()).unwrap_or("")
    }
}

/// Why the input is not a clean sequence of complete sentences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum LexErrorKind {
    /// `(*` without its `*)` (the position is the comment's `(`).
    UnclosedComment,
    /// `"` without its closing quote (the position is the opening quote).
    UnclosedString,
    /// Text after the last sentence that is not ended by a `.` (position: its first character).
    MissingFinalDot,
}

/// A lexing problem at byte offset `pos` of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct LexError {
    pub pos: usize,
    pub kind: LexErrorKind,
}

impl LexError {
    /// A message naming the 1-based line and column, e.g. `line 3, column 5: unclosed comment`.
    pub fn message(&self, input: &str) -> String {
        let (line, col) = line_col(input, self.pos);
        let what = match self.kind {
            LexErrorKind::UnclosedComment => "unclosed comment `(*`",
            LexErrorKind::UnclosedString => "unclosed string `\"`",
            LexErrorKind::MissingFinalDot => "sentence not ended by `.`",
        };
        format!("line {line}, column {col}: {what}")
    }
}

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            LexErrorKind::UnclosedComment => "unclosed comment",
            LexErrorKind::UnclosedString => "unclosed string",
            LexErrorKind::MissingFinalDot => "sentence not ended by `.`",
        };
        write!(f, "{what} at byte {}", self.pos)
    }
}

/// The result of [`sentences`]: every complete sentence found, and what went wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lexed {
    pub sentences: Vec<Sentence>,
    pub errors: Vec<LexError>,
}

impl Lexed {
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// 1-based (line, column) of byte offset `pos` (columns count characters). Offsets past the
/// end or inside a character are clamped.
pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let mut pos = pos.min(text.len());
    while !text.is_char_boundary(pos) {
        pos -= 1;
    }
    let before = &text[..pos];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Coq's blanks (`clexer.ml`): only these separate a sentence-ending dot.
pub(crate) fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c)
}

/// `i` is at `(*`. Returns the index just after the matching `*)`, or `Err(())` if the comment
/// (or a string inside it) never closes.
pub(crate) fn skip_comment(b: &[u8], mut i: usize) -> Result<usize, ()> {
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'(' if b.get(i + 1) == Some(&b'*') => {
                depth += 1;
                i += 2;
            }
            b'*' if b.get(i + 1) == Some(&b')') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Ok(i);
                }
            }
            b'"' => i = skip_string(b, i)?,
            _ => i += 1,
        }
    }
    Err(())
}

/// `i` is at `"`. Returns the index just after the closing quote (`""` is an escaped quote).
pub(crate) fn skip_string(b: &[u8], mut i: usize) -> Result<usize, ()> {
    i += 1;
    while i < b.len() {
        if b[i] == b'"' {
            if b.get(i + 1) == Some(&b'"') {
                i += 2;
            } else {
                return Ok(i + 1);
            }
        } else {
            i += 1;
        }
    }
    Err(())
}

fn is_comment_start(b: &[u8], i: usize) -> bool {
    b[i] == b'(' && b.get(i + 1) == Some(&b'*')
}

/// Skip blanks and comments from `i`. `Err(pos)` names an unclosed comment.
fn skip_layout(b: &[u8], mut i: usize) -> Result<usize, usize> {
    while i < b.len() {
        if is_blank(b[i]) {
            i += 1;
        } else if is_comment_start(b, i) {
            i = skip_comment(b, i).map_err(|_| i)?;
        } else {
            break;
        }
    }
    Ok(i)
}

/// At a sentence start: `N: {`, `[name]: {` → the end of the brace.
fn selector_brace(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    if b[j].is_ascii_digit() {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
    } else if b[j] == b'[' {
        j += 1;
        while j < b.len() && is_blank(b[j]) {
            j += 1;
        }
        let s = j;
        while j < b.len()
            && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'\'' || b[j] >= 0x80)
        {
            j += 1;
        }
        if j == s {
            return None;
        }
        while j < b.len() && is_blank(b[j]) {
            j += 1;
        }
        if b.get(j) != Some(&b']') {
            return None;
        }
        j += 1;
    } else {
        return None;
    }
    while j < b.len() && is_blank(b[j]) {
        j += 1;
    }
    if b.get(j) != Some(&b':') {
        return None;
    }
    j += 1;
    while j < b.len() && is_blank(b[j]) {
        j += 1;
    }
    (b.get(j) == Some(&b'{') && b.get(j + 1) != Some(&b'|')).then_some(j + 1)
}

/// Scan a command starting at `i` up to its terminating dot. `Ok(end)` is just after the dot;
/// `Err(error)` when the input ends first.
fn command_end(b: &[u8], start: usize) -> Result<usize, LexError> {
    let mut j = start;
    while j < b.len() {
        match b[j] {
            b'(' if b.get(j + 1) == Some(&b'*') => {
                j = skip_comment(b, j).map_err(|_| LexError {
                    pos: j,
                    kind: LexErrorKind::UnclosedComment,
                })?;
            }
            b'"' => {
                j = skip_string(b, j).map_err(|_| LexError {
                    pos: j,
                    kind: LexErrorKind::UnclosedString,
                })?;
            }
            b'.' => {
                let mut k = j;
                while k < b.len() && b[k] == b'.' {
                    k += 1;
                }
                let run = k - j;
                if run != 2 && (k == b.len() || is_blank(b[k])) {
                    return Ok(k);
                }
                j = k;
            }
            _ => j += 1,
        }
    }
    Err(LexError {
        pos: start,
        kind: LexErrorKind::MissingFinalDot,
    })
}

/// Split Coq text into sentences. Never fails: problems are listed in `errors` (at most one,
/// since lexing stops at the first) and every complete sentence before them is returned.
pub fn sentences(text: &str) -> Lexed {
    let b = text.as_bytes();
    let mut out = Lexed::default();
    let mut i = 0;
    loop {
        i = match skip_layout(b, i) {
            Ok(i) => i,
            Err(pos) => {
                out.errors.push(LexError {
                    pos,
                    kind: LexErrorKind::UnclosedComment,
                });
                break;
            }
        };
        if i >= b.len() {
            break;
        }
        let c = b[i];
        let (end, kind) = match c {
            b'-' | b'+' | b'*' => {
                let mut j = i;
                while j < b.len() && b[j] == c {
                    j += 1;
                }
                (j, SentenceKind::Bullet)
            }
            b'{' if b.get(i + 1) != Some(&b'|') => (i + 1, SentenceKind::BraceOpen),
            b'}' => (i + 1, SentenceKind::BraceClose),
            _ => match selector_brace(b, i) {
                Some(end) => (end, SentenceKind::BraceOpen),
                None => match command_end(b, i) {
                    Ok(end) => (end, SentenceKind::Command),
                    Err(e) => {
                        out.errors.push(e);
                        break;
                    }
                },
            },
        };
        out.sentences.push(Sentence {
            range: i..end,
            kind,
        });
        i = end;
    }
    out
}

/// The text with every comment replaced by one space (strings are kept verbatim, so a `(*`
/// inside a string is not a comment). An unclosed comment swallows the rest of the text.
///
/// Caveat: Coq lexes a comment glued after a symbol as part of that symbol when a token
/// continues with `(` (`x.(* c *)` is `.(` then `*` …, a syntax error), so on such (invalid)
/// text the result can have a sentence end the input did not have. Code that must preserve
/// sentence structure checks for glued comments (see `parse_statement`) or re-lexes.
pub fn comments_stripped(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut i = 0;
    while i < b.len() {
        if is_comment_start(b, i) {
            out.push_str(&text[last..i]);
            out.push(' ');
            i = skip_comment(b, i).unwrap_or(b.len());
            last = i;
        } else if b[i] == b'"' {
            i = skip_string(b, i).unwrap_or(b.len());
        } else {
            i += 1;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// The first comment glued to the character before it (`idtac.(* … *)`, `` `(* `` …), as a
/// byte offset of its `(`. Coq lexes symbols greedily from its keyword table, so `.(`, `` `( ``
/// and the like are tokens and the `*` after them is not a comment start for Coq: a splitter
/// that took it for one would disagree with Coq on where the sentence ends. Untrusted text
/// with such a comment is refused (an honest comment has a blank before it).
pub fn glued_comment(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    comments(text)
        .into_iter()
        .map(|r| r.start)
        .find(|&start| start > 0 && !is_blank(b[start - 1]))
}

/// Quotation heads that put a tactic (or another elaborator) inside a term: `ltac:(…)`,
/// `ltac2:(…)`, `constr:(…)`, …
pub const TERM_QUOTATIONS: &[&str] = &[
    "ltac",
    "ltac1",
    "ltac2",
    "mltac",
    "constr",
    "open_constr",
    "uconstr",
    "preterm",
    "ident",
    "pattern",
    "reference",
];

/// The first tactic-in-term quotation (`ltac:(…)`, `constr:(…)`, …) outside comments and
/// strings, as `(byte offset, head)`. A term that runs a tactic can mean different things in
/// different environments (it may look names up), so untrusted statements may not hold one.
pub fn term_quotation(text: &str) -> Option<(usize, &str)> {
    // Comments count as blanks here, as they do for Coq (`ltac (* c *) :(…)`).
    let blanked = comments_blanked(text);
    let b = blanked.as_bytes();
    let skip = |mut j: usize| {
        while j < b.len() && is_blank(b[j]) {
            j += 1;
        }
        j
    };
    identifiers(text).into_iter().find_map(|r| {
        let word = &text[r.clone()];
        if !TERM_QUOTATIONS.contains(&word) {
            return None;
        }
        let j = skip(r.end);
        // A character Coq might read as a blank that this lexer does not: assume the worst.
        if b.get(j).is_some_and(|&c| c >= 0x80) {
            return Some((r.start, word));
        }
        if b.get(j) != Some(&b':') {
            return None;
        }
        let k = skip(j + 1);
        (b.get(k).is_none_or(|&c| c == b'(' || c >= 0x80)).then_some((r.start, word))
    })
}

/// The first run of four or more dots outside comments and strings (its byte offset). Coq
/// lexes such a run as `...` followed by more dots and may then read past the sentence end
/// that this lexer sees, so untrusted text may not contain one (no honest proof does).
pub fn long_dot_run(text: &str) -> Option<usize> {
    let blanked = comments_blanked(text);
    let b = blanked.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => i = skip_string(b, i).unwrap_or(b.len()),
            b'.' => {
                let start = i;
                while i < b.len() && b[i] == b'.' {
                    i += 1;
                }
                if i - start >= 4 {
                    return Some(start);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Byte ranges of the comments (outermost only, `(*` to `*)` inclusive; an unclosed one runs
/// to the end), outside strings, in order.
pub fn comments(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if is_comment_start(b, i) {
            let end = skip_comment(b, i).unwrap_or(b.len());
            out.push(i..end);
            i = end;
        } else if b[i] == b'"' {
            i = skip_string(b, i).unwrap_or(b.len());
        } else {
            i += 1;
        }
    }
    out
}

/// The text with every comment blanked out byte for byte (each byte becomes a space, newlines
/// are kept), so offsets and line numbers stay those of the input. Strings are kept verbatim.
pub fn comments_blanked(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if is_comment_start(b, i) {
            let end = skip_comment(b, i).unwrap_or(b.len());
            out.extend(
                b[i..end]
                    .iter()
                    .map(|&c| if c == b'\n' { b'\n' } else { b' ' }),
            );
            i = end;
        } else if b[i] == b'"' {
            let end = skip_string(b, i).unwrap_or(b.len());
            out.extend_from_slice(&b[i..end]);
            i = end;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only whole comments (which start and end on ASCII bytes) were replaced, by ASCII bytes.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The comments and string literals of `text` as Coq's lexer reads them (outermost only, in
/// order): a comment nests and lexes the strings inside it, a string ends at a `"` that is not
/// `""`. An unclosed one runs to the end and is not `closed`. This is what
/// [`crate::CoqLanguage`] gives the conditional-proof parser, which finds its markers only
/// outside these.
pub fn literals(text: &str) -> Vec<prod_core::Literal> {
    let b = text.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let (kind, end) = if is_comment_start(b, i) {
            (prod_core::LiteralKind::Comment, skip_comment(b, i))
        } else if b[i] == b'"' {
            (prod_core::LiteralKind::String, skip_string(b, i))
        } else {
            i += 1;
            continue;
        };
        out.push(prod_core::Literal {
            range: i..end.unwrap_or(b.len()),
            kind,
            closed: end.is_ok(),
        });
        i = end.unwrap_or(b.len());
    }
    out
}

/// Byte ranges of the string literals outside comments (quotes included; an unclosed one runs
/// to the end), in order.
pub fn string_literals(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if is_comment_start(b, i) {
            i = skip_comment(b, i).unwrap_or(b.len());
        } else if b[i] == b'"' {
            let end = skip_string(b, i).unwrap_or(b.len());
            out.push(i..end);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The words of a text as the soundness rules read it: maximal runs of ASCII identifier
/// characters (letters, digits, `_`, `'`) outside comments and strings, with leading digits
/// dropped (`1fix` is the number `1` and the word `fix` for Coq), as byte ranges.
///
/// This is deliberately coarser than [`identifiers`]: every character that is not ASCII ends a
/// word, and so does `.`. Wherever Coq's Unicode tables and this crate's disagree on whether a
/// character continues an identifier (`αfix`, `fix·`), the word `fix` is still found, and a
/// qualified name yields each of its parts (`Coq.Init.Tactics.exact_no_check` ends in
/// `exact_no_check`). A rule that refuses a word may refuse an honest identifier that merely
/// contains it next to a non-ASCII letter; it never misses the word Coq reads.
pub fn ascii_words(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let code = code_mask(text);
    let is_word =
        |i: usize| code[i] && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'\'');
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        if !is_word(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_word(i) {
            i += 1;
        }
        let mut s = start;
        while s < i && (b[s].is_ascii_digit() || b[s] == b'\'') {
            s += 1;
        }
        if s < i {
            out.push(s..i);
        }
    }
    out
}

/// `true` for each byte of `text` that is code: outside comments and string literals.
pub fn code_mask(text: &str) -> Vec<bool> {
    let mut mask = vec![true; text.len()];
    for r in comments(text).into_iter().chain(string_literals(text)) {
        mask[r].iter_mut().for_each(|m| *m = false);
    }
    mask
}

fn char_at(text: &str, i: usize) -> Option<char> {
    text.get(i..).and_then(|s| s.chars().next())
}

/// Can `c` start a Coq identifier? (Letters, including Unicode letters, and `_`.)
pub fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

/// Can `c` continue a Coq identifier? (Letters, digits, `_`, `'`.)
pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '\''
}

/// Is `s` one (unqualified) Coq identifier token? (`_` alone is the wildcard, not an identifier.)
pub fn is_identifier(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if is_ident_start(c)) && cs.all(is_ident_char) && s != "_"
}

/// End of the identifier (qualified: `A.b.c` is one token) that starts at `i`.
fn ident_end(text: &str, mut i: usize) -> usize {
    loop {
        while let Some(c) = char_at(text, i) {
            if !is_ident_char(c) {
                break;
            }
            i += c.len_utf8();
        }
        // `.` glued to an identifier start continues a qualified name (Coq's FIELD token).
        if text.as_bytes().get(i) == Some(&b'.') && char_at(text, i + 1).is_some_and(is_ident_start)
        {
            i += 1;
        } else {
            return i;
        }
    }
}

/// Byte ranges of the identifier tokens outside comments and strings, in order.
///
/// * A qualified name `A.b.c` is ONE token, so `M.foo` is not a reference to a plain `foo`:
///   it names `foo` inside module `M`, which may be another constant. ProD's proposed lemmas
///   are declared in the current file and referred to unqualified; renaming the last segment
///   of a qualified name could capture an unrelated constant. Callers that need the parts
///   split the token at `.` themselves.
/// * `_` alone is the wildcard, not an identifier. Numbers (`12`, `0x1F`, `1_000`) are skipped
///   whole, so `1e5` yields nothing.
/// * A scope key glued to `%` (`x%nat`, `(a + b)%Z`) is not returned: it names a scope, not a
///   term.
/// * Keywords (`forall`, `fun`, `match`, …) are identifier-shaped and ARE returned; they can
///   never be the name of a lemma, so comparing against a lemma name is unaffected.
pub fn identifiers(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if is_comment_start(b, i) {
            i = skip_comment(b, i).unwrap_or(b.len());
        } else if c == b'"' {
            i = skip_string(b, i).unwrap_or(b.len());
        } else if c.is_ascii_digit() {
            // A number and whatever identifier characters are glued to it.
            i = ident_end_unqualified(text, i);
        } else if c < 0x80 && !(c.is_ascii_alphabetic() || c == b'_') {
            i += 1;
        } else {
            let ch = char_at(text, i).unwrap_or('\u{0}');
            if is_ident_start(ch) {
                let end = ident_end(text, i);
                let scope_key = i > 0 && b[i - 1] == b'%';
                if !scope_key && &text[i..end] != "_" {
                    out.push(i..end);
                }
                i = end;
            } else if ch.is_alphanumeric() {
                // A non-ASCII digit: part of a number-like token, not an identifier start.
                i = ident_end_unqualified(text, i);
            } else {
                i += ch.len_utf8().max(1);
            }
        }
    }
    out
}

fn ident_end_unqualified(text: &str, mut i: usize) -> usize {
    while let Some(c) = char_at(text, i) {
        if !is_ident_char(c) {
            break;
        }
        i += c.len_utf8();
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> Vec<(&str, SentenceKind)> {
        let l = sentences(t);
        assert!(l.errors.is_empty(), "{:?}", l.errors);
        l.sentences.iter().map(|s| (s.text(t), s.kind)).collect()
    }

    #[test]
    fn basic_split() {
        use SentenceKind::*;
        let t = "Lemma a : Nat.add_comm = x. (* c. *) Proof.\n- intros. + auto...\n{| x := 1 |}. 2: { now idtac \"a.\"\"b\". }";
        assert_eq!(
            split(t),
            vec![
                ("Lemma a : Nat.add_comm = x.", Command),
                ("Proof.", Command),
                ("-", Bullet),
                ("intros.", Command),
                ("+", Bullet),
                ("auto...", Command),
                ("{| x := 1 |}.", Command),
                ("2: {", BraceOpen),
                ("now idtac \"a.\"\"b\".", Command),
                ("}", BraceClose),
            ]
        );
    }

    #[test]
    fn errors() {
        let l = sentences("a. (* (* *) ");
        assert_eq!(l.sentences.len(), 1);
        assert_eq!(
            l.errors,
            vec![LexError {
                pos: 3,
                kind: LexErrorKind::UnclosedComment
            }]
        );
        let l = sentences("a. b \"x. ");
        assert_eq!(
            l.errors,
            vec![LexError {
                pos: 5,
                kind: LexErrorKind::UnclosedString
            }]
        );
        let l = sentences("a. b");
        assert_eq!(
            l.errors,
            vec![LexError {
                pos: 3,
                kind: LexErrorKind::MissingFinalDot
            }]
        );
        assert_eq!(
            l.errors[0].message("a. b"),
            "line 1, column 4: sentence not ended by `.`"
        );
    }

    #[test]
    fn idents() {
        let t = "rewrite M.foo, foo' (* foo *) \"foo\" x%nat 1e5 _ @bar.";
        let ids: Vec<&str> = identifiers(t).into_iter().map(|r| &t[r]).collect();
        assert_eq!(ids, vec!["rewrite", "M.foo", "foo'", "x", "bar"]);
    }

    #[test]
    fn strip() {
        assert_eq!(comments_stripped("a(*x(*y*)*)b \"(*\" c"), "a b \"(*\" c");
        assert_eq!(
            comments_blanked("a(*é\n*)b \"(*\" c"),
            "a    \n  b \"(*\" c"
        );
    }
}

//! Coq text in a canonical layout: the layout steps of the statement key (see
//! [`crate::language`]: comments that separate tokens and blank runs become one space, and with
//! [`normalize_layout`] blanks beside the delimiters in [`GLUE_SAFE`] go), strings untouched.
//! Its own module because both the statement parser and the language use it.

use crate::lexer::{is_blank, skip_string};

/// Comments preceded by a blank (or at the start) replaced by one space; other comments kept
/// verbatim, because Coq may lex a comment glued after a symbol as part of a token
/// (`x.(* c *)` starts with the token `.(`), so removing it could change the meaning.
pub(crate) fn comments_spaced_when_separate(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for r in crate::lexer::comments(text) {
        if r.start == 0 || is_blank(b[r.start - 1]) {
            out.push_str(&text[last..r.start]);
            out.push(' ');
            last = r.end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// Step 3 of the normalisation: may the blank between `prev` and `next` be dropped? Only
/// between an ASCII letter/digit and one of the delimiters in [`GLUE_SAFE`], where no default Coq
/// token spans the boundary (identifiers never contain these, and these never start a token
/// that continues with a letter or digit), so `n+0` and `n + 0`, `(n:nat)` and `( n : nat )`
/// lex to the same tokens.
fn glue_is_safe(prev: Option<char>, next: Option<char>) -> bool {
    let (Some(p), Some(n)) = (prev, next) else {
        return true;
    };
    let word = |c: char| c.is_ascii_alphanumeric();
    let delim = |c: char| GLUE_SAFE.contains(c);
    (word(p) && delim(n)) || (delim(p) && word(n))
}

/// Delimiters that a blank may be removed next to (beside a letter or digit). Deliberately
/// absent: `.` (qualified names, `.+1`), `'` `_` (identifier characters), `"` (strings),
/// `%` (scope keys), `@`, `?`, `!`, `-` (`-1`, `@f`, `?x`, `!x` read differently), `#`, `$`,
/// `` ` ``, and every non-ASCII symbol.
pub const GLUE_SAFE: &str = "()[]{},;:=+*<>|&~/^";

/// Steps 1–3 of the normalisation (see the module documentation).
pub fn normalize_layout(text: &str) -> String {
    layout(text, true)
}

/// Steps 1–2 only (comments and blank runs): a readable canonical layout, same tokens.
pub fn collapse_layout(text: &str) -> String {
    layout(text, false)
}

fn layout(text: &str, glue: bool) -> String {
    let s = comments_spaced_when_separate(text);
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut last = 0;
    let mut pending_space = false;
    while i < b.len() {
        if is_blank(b[i]) {
            let start = i;
            while i < b.len() && is_blank(b[i]) {
                i += 1;
            }
            out.push_str(&s[last..start]);
            last = i;
            pending_space =
                !(glue && glue_is_safe(s[..start].chars().next_back(), s[i..].chars().next()));
            continue;
        }
        if pending_space {
            if !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
        }
        if b[i] == b'"' {
            i = skip_string(b, i).unwrap_or(b.len());
        } else {
            i += 1;
        }
    }
    // `last` is only advanced at blank runs, so the tail is copied verbatim (strings included).
    out.push_str(&s[last..]);
    out
}

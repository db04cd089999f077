//! What a sentence starts with: the information a checker needs to classify it.
//!
//! Coq's grammar (8.16, `g_vernac.mlg`) reads a sentence as
//! `control* attributes* legacy_attribute* command`, where the controls are `Time`,
//! `Redirect "file"`, `Timeout n`, `Fail`, `Succeed` (and `Instructions`, `Profile` in later
//! versions), attributes are `#[…]`, and legacy attributes are the words `Local`, `Global`,
//! `Polymorphic`, `Monomorphic`, `Cumulative`, `NonCumulative`, `Private`, `Program`.
//! [`sentence_head`] peels these off (in any order, so a shuffled prefix cannot hide one) and
//! reports every one of them, then an optional goal selector (`2:`, `all:`, `[x]:`, `1-3,5:`,
//! `!:`, `par:`), then the first word of the command itself.

use crate::lexer::{is_blank, is_ident_char, is_ident_start, skip_comment, skip_string};

/// A control prefix, e.g. `Timeout 5` → `{ name: "Timeout", argument: Some("5") }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control<'a> {
    pub name: &'a str,
    /// The argument of `Timeout` (a number) or `Redirect` (a string, quotes included).
    pub argument: Option<&'a str>,
}

/// The prefix of one sentence, see the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head<'a> {
    /// `Time`, `Timeout n`, `Redirect "f"`, `Fail`, `Succeed`, … in order of appearance.
    pub controls: Vec<Control<'a>>,
    /// Each `#[…]` attribute, brackets included (an unclosed one runs to the end).
    pub attributes: Vec<&'a str>,
    /// Legacy attribute words (`Local`, `Global`, `Program`, `Polymorphic`, …).
    pub legacy_attributes: Vec<&'a str>,
    /// A goal selector before the command, without its colon (`2`, `all`, `[x]`, `1-3, 5`).
    pub selector: Option<&'a str>,
    /// The first word of the command: an identifier (possibly qualified, e.g. `Nat.foo`) or,
    /// when the command starts with a symbol, `None`.
    pub keyword: Option<&'a str>,
    /// The command text starting at `keyword` (or at the first symbol), up to the end of the
    /// sentence (final dot included when the input had it).
    pub body: &'a str,
}

impl Head<'_> {
    /// Any attribute at all (`#[…]` or legacy)?
    pub fn has_attributes(&self) -> bool {
        !self.attributes.is_empty() || !self.legacy_attributes.is_empty()
    }
}

/// The controls of Coq 8.16 (plus later ones, so that they are reported, not taken for tactics).
pub const CONTROLS: &[&str] = &[
    "Time",
    "Redirect",
    "Timeout",
    "Fail",
    "Succeed",
    "Instructions",
    "Profile",
];

/// Legacy attribute words (Coq 8.16 `legacy_attr`).
pub const LEGACY_ATTRIBUTES: &[&str] = &[
    "Local",
    "Global",
    "Polymorphic",
    "Monomorphic",
    "Cumulative",
    "NonCumulative",
    "Private",
    "Program",
];

/// Skip blanks and comments (an unclosed comment runs to the end).
fn skip_layout(s: &str, mut i: usize) -> usize {
    let b = s.as_bytes();
    while i < b.len() {
        if is_blank(b[i]) {
            i += 1;
        } else if b[i] == b'(' && b.get(i + 1) == Some(&b'*') {
            i = skip_comment(b, i).unwrap_or(b.len());
        } else {
            break;
        }
    }
    i
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|t| t.chars().next())
}

/// The identifier (qualified allowed) starting at `i`, if one does.
fn word_at(s: &str, i: usize) -> Option<&str> {
    if !char_at(s, i).is_some_and(is_ident_start) {
        return None;
    }
    let mut j = i;
    loop {
        while let Some(c) = char_at(s, j) {
            if !is_ident_char(c) {
                break;
            }
            j += c.len_utf8();
        }
        if s.as_bytes().get(j) == Some(&b'.') && char_at(s, j + 1).is_some_and(is_ident_start) {
            j += 1;
        } else {
            return Some(&s[i..j]);
        }
    }
}

/// The first word of a sentence, after blanks and comments, WITHOUT skipping anything else:
/// an identifier (`intros`, `Lemma`, `Nat.foo`), or `#[` for an attribute, or the first
/// symbol character (`-`, `{`, `(`, `[`, …). `None` for an empty (or comment-only) sentence.
pub fn first_word(sentence: &str) -> Option<&str> {
    let i = skip_layout(sentence, 0);
    if let Some(w) = word_at(sentence, i) {
        return Some(w);
    }
    if sentence[i..].starts_with("#[") {
        return Some(&sentence[i..i + 2]);
    }
    char_at(sentence, i).map(|c| &sentence[i..i + c.len_utf8()])
}

/// End of a `#[ … ]` attribute starting at `i` (brackets nest, strings are skipped).
fn attribute_end(s: &str, i: usize) -> usize {
    let b = s.as_bytes();
    let mut depth = 0usize;
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            b'"' => {
                j = skip_string(b, j).unwrap_or(b.len());
                continue;
            }
            b'(' if b.get(j + 1) == Some(&b'*') => {
                j = skip_comment(b, j).unwrap_or(b.len());
                continue;
            }
            _ => {}
        }
        j += 1;
    }
    b.len()
}

/// A goal selector at `i` (`2`, `all`, `[x]`, `1-3, 5`, `!`, `par`), returning the index of its
/// colon. Only accepted when followed by a lone `:` (not `:=`, `::`, `:>`).
fn selector_colon(s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut j = i;
    if let Some(w) = word_at(s, i) {
        if w != "all" && w != "par" {
            return None;
        }
        j += w.len();
    } else if b.get(j) == Some(&b'!') {
        j += 1;
    } else if b.get(j) == Some(&b'[') {
        j += 1;
        j = skip_layout(s, j);
        let w = word_at(s, j)?;
        j = skip_layout(s, j + w.len());
        if b.get(j) != Some(&b']') {
            return None;
        }
        j += 1;
    } else if b.get(j).is_some_and(|c| c.is_ascii_digit()) {
        // Ranges and lists of goal numbers: `1`, `1-3`, `1, 3-4`.
        while j < b.len()
            && (b[j].is_ascii_digit() || b[j] == b'-' || b[j] == b',' || is_blank(b[j]))
        {
            j += 1;
        }
    } else {
        return None;
    }
    j = skip_layout(s, j);
    (b.get(j) == Some(&b':') && !matches!(b.get(j + 1), Some(b'=' | b':' | b'>'))).then_some(j)
}

/// Peel controls, attributes and a goal selector off a sentence; see [`Head`].
pub fn sentence_head(sentence: &str) -> Head<'_> {
    let b = sentence.as_bytes();
    let mut head = Head::default();
    let mut i = skip_layout(sentence, 0);
    loop {
        if sentence[i..].starts_with("#[") {
            let end = attribute_end(sentence, i);
            head.attributes.push(&sentence[i..end]);
            i = skip_layout(sentence, end);
            continue;
        }
        let Some(w) = word_at(sentence, i) else { break };
        if CONTROLS.contains(&w) {
            let mut j = skip_layout(sentence, i + w.len());
            let mut argument = None;
            if w == "Timeout" && b.get(j).is_some_and(|c| c.is_ascii_digit()) {
                let s = j;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                argument = Some(&sentence[s..j]);
                j = skip_layout(sentence, j);
            } else if w == "Redirect" && b.get(j) == Some(&b'"') {
                let s = j;
                j = skip_string(b, j).unwrap_or(b.len());
                argument = Some(&sentence[s..j]);
                j = skip_layout(sentence, j);
            }
            head.controls.push(Control { name: w, argument });
            i = j;
        } else if LEGACY_ATTRIBUTES.contains(&w) {
            head.legacy_attributes.push(w);
            i = skip_layout(sentence, i + w.len());
        } else {
            break;
        }
    }
    if let Some(colon) = selector_colon(sentence, i) {
        head.selector = Some(sentence[i..colon].trim_end());
        i = skip_layout(sentence, colon + 1);
    }
    head.keyword = word_at(sentence, i);
    head.body = &sentence[i..];
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads() {
        let h = sentence_head("(* c *) Time Timeout 5 #[local] Program Fail Lemma x : True.");
        assert_eq!(
            h.controls.iter().map(|c| c.name).collect::<Vec<_>>(),
            vec!["Time", "Timeout", "Fail"]
        );
        assert_eq!(h.controls[1].argument, Some("5"));
        assert_eq!(h.attributes, vec!["#[local]"]);
        assert_eq!(h.legacy_attributes, vec!["Program"]);
        assert_eq!(h.keyword, Some("Lemma"));
        assert!(h.has_attributes());

        let h = sentence_head("Redirect \"/tmp/x\" Print nat.");
        assert_eq!(
            h.controls,
            vec![Control {
                name: "Redirect",
                argument: Some("\"/tmp/x\"")
            }]
        );
        assert_eq!(h.keyword, Some("Print"));

        let h = sentence_head("all: intros.");
        assert_eq!((h.selector, h.keyword), (Some("all"), Some("intros")));
        let h = sentence_head("1-2, 4 : auto.");
        assert_eq!((h.selector, h.keyword), (Some("1-2, 4"), Some("auto")));
        let h = sentence_head("[ x ]: auto.");
        assert_eq!((h.selector, h.keyword), (Some("[ x ]"), Some("auto")));
        let h = sentence_head("(intros; auto).");
        assert_eq!(
            (h.selector, h.keyword, h.body),
            (None, None, "(intros; auto).")
        );
        let h = sentence_head("all := 3.");
        assert_eq!((h.selector, h.keyword), (None, Some("all")));
    }

    #[test]
    fn first_words() {
        assert_eq!(first_word("  (* x *) Nat.foo bar."), Some("Nat.foo"));
        assert_eq!(first_word("#[local] Hint x."), Some("#["));
        assert_eq!(first_word("- "), Some("-"));
        assert_eq!(first_word("(* only *)"), None);
    }
}

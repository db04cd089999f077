//! A Rust file's code with comments, string and character literals, and `#[cfg(test)]` items
//! replaced by blanks, line structure kept: what the tidy tests read.

/// `src` with every comment and literal blanked (newlines kept, so line numbers stay).
pub fn without_comments_and_literals(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        i = match b[i] {
            '/' if next == Some('/') => line_comment(&b, i, &mut out),
            '/' if next == Some('*') => block_comment(&b, i, &mut out),
            _ if raw_string_start(&b, i).is_some() => raw_string(&b, i, &mut out),
            '"' => string(&b, i, &mut out),
            '\'' if is_char_literal(&b, i) => char_literal(&b, i, &mut out),
            c => {
                out.push(c);
                i + 1
            }
        };
    }
    out
}

fn blank(c: char) -> char {
    if c == '\n' {
        '\n'
    } else {
        ' '
    }
}

/// `// …` up to the line's end, blanked; the index after it.
fn line_comment(b: &[char], mut i: usize, out: &mut String) -> usize {
    while i < b.len() && b[i] != '\n' {
        out.push(' ');
        i += 1;
    }
    i
}

/// `/* … */`, nested, blanked; the index after it.
fn block_comment(b: &[char], mut i: usize, out: &mut String) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            depth += 1;
            out.push_str("  ");
            i += 2;
        } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
            depth -= 1;
            out.push_str("  ");
            i += 2;
            if depth == 0 {
                break;
            }
        } else {
            out.push(blank(b[i]));
            i += 1;
        }
    }
    i
}

/// `r"…"`, `r#"…"#`, `br"…"`: the quotes kept, the rest blanked; the index after it.
fn raw_string(b: &[char], i: usize, out: &mut String) -> usize {
    let hashes = raw_string_start(b, i).unwrap_or(0);
    let open = i + hashes + if b[i] == 'b' { 3 } else { 2 };
    out.push('"');
    for _ in i + 1..open {
        out.push(' ');
    }
    let mut i = open;
    while i < b.len() {
        if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
            out.push('"');
            for _ in 0..hashes {
                out.push(' ');
            }
            return i + 1 + hashes;
        }
        out.push(blank(b[i]));
        i += 1;
    }
    i
}

/// `"…"` with escapes: the quotes kept, the rest blanked; the index after it.
fn string(b: &[char], i: usize, out: &mut String) -> usize {
    out.push('"');
    let mut i = i + 1;
    while i < b.len() && b[i] != '"' {
        if b[i] == '\\' && i + 1 < b.len() {
            out.push(' ');
            out.push(blank(b[i + 1]));
            i += 2;
        } else {
            out.push(blank(b[i]));
            i += 1;
        }
    }
    out.push('"');
    i + 1
}

/// `'x'`, `'\n'`, `'\u{…}'`: the quotes kept, the rest blanked; the index after it.
fn char_literal(b: &[char], i: usize, out: &mut String) -> usize {
    out.push('\'');
    let mut i = i + 1;
    while i < b.len() && b[i] != '\'' {
        if b[i] == '\\' {
            out.push(' ');
            i += 1;
        }
        out.push(' ');
        i += 1;
    }
    out.push('\'');
    i + 1
}

/// At `i`, a raw string literal (`r"`, `r#"`, `br"`, …) that is not the end of an identifier:
/// its number of hashes.
fn raw_string_start(b: &[char], i: usize) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    if i > 0 && ident(b[i - 1]) {
        return None;
    }
    let mut j = i;
    if b[j] == 'b' {
        j += 1;
    }
    if b.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (b.get(j) == Some(&'"')).then_some(hashes)
}

/// Is the `'` at `i` a character literal (`'a'`, `'\n'`, `'\u{1F600}'`), not a lifetime?
fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!(
        (b.get(i + 1), b.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// `code` (already without comments and literals) with every item under `#[cfg(test)]`
/// blanked: the attribute, the attributes after it, and the item up to its closing brace or
/// semicolon.
pub fn without_test_items(code: &str) -> String {
    const ATTR: &str = "#[cfg(test)]";
    let mut b: Vec<char> = code.chars().collect();
    let text: String = b.iter().collect();
    let starts: Vec<usize> = text
        .match_indices(ATTR)
        .map(|(byte, _)| text[..byte].chars().count())
        .collect();
    for start in starts.into_iter().rev() {
        let end = item_end(&b, start + ATTR.chars().count());
        for c in b.iter_mut().take(end).skip(start) {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    b.into_iter().collect()
}

/// The index just past the item that starts at or after `from`: its matching `}` when a brace
/// comes before any `;` at depth 0, else its `;`.
fn item_end(b: &[char], from: usize) -> usize {
    let mut depth = 0usize;
    let mut i = from;
    while i < b.len() {
        match b[i] {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// A file's code as the tidy tests read it: no comments, no literals, no test items.
pub fn code(src: &str) -> String {
    without_test_items(&without_comments_and_literals(src))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_literals_and_test_items_are_blanked_lines_kept() {
        let src = "fn a() { let s = \"{ // }\"; let c = '{'; } // }\n/* { /* } */ */ fn b<'a>(x: &'a str) {}\nlet r = r#\"}\"#;\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn c() {}\n";
        let out = code(src);
        assert_eq!(out.lines().count(), src.lines().count());
        assert_eq!(out.matches('{').count(), out.matches('}').count(), "{out}");
        assert!(out.contains("fn b<'a>(x: &'a str) {}"), "{out}");
        assert!(!out.contains("fn t"), "{out}");
        assert!(out.contains("fn c() {}"), "{out}");
    }
}

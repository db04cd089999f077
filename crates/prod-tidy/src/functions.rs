//! Every function of a file and its length in lines, from its `fn` line to its closing brace
//! (test items left out), and whether a plain comment right above it says why it is long.

use crate::source;

/// One function of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// 1-based line of `fn`.
    pub line: usize,
    /// Lines from `fn` to the closing brace.
    pub length: usize,
    /// A `//` comment in the block right above it (comments, docs, attributes) says why it is
    /// long: it contains "long" or "screen".
    pub says_why: bool,
}

/// The functions with a body in `src` (trait method declarations without one are left out).
pub fn functions(src: &str) -> Vec<Function> {
    let code = source::code(src);
    let code_lines: Vec<&str> = code.lines().collect();
    let src_lines: Vec<&str> = src.lines().collect();
    let mut out = vec![];
    for (i, line) in code_lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let Some(end) = body_end(&code_lines, i) else {
            continue;
        };
        out.push(Function {
            name,
            line: i + 1,
            length: end - i + 1,
            says_why: says_why(&src_lines, i),
        });
    }
    out
}

/// The name of the function a line declares (`pub(crate) const unsafe fn name…`).
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        let qualifier = w == "pub"
            || w.starts_with("pub(")
            || matches!(
                w,
                "const" | "async" | "unsafe" | "extern" | "\"\"" | "default"
            );
        if w == "fn" {
            let name: String = words
                .next()?
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return (!name.is_empty()).then_some(name);
        }
        if !qualifier {
            return None;
        }
    }
    None
}

/// The line of the brace that closes the body of the function declared on line `start`; `None`
/// when a `;` ends the declaration first.
fn body_end(lines: &[&str], start: usize) -> Option<usize> {
    let mut depth = 0i64;
    let mut opened = false;
    for (j, line) in lines.iter().enumerate().skip(start) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                ';' if !opened && depth == 0 => return None,
                _ => {}
            }
            if opened && depth == 0 {
                return Some(j);
            }
        }
    }
    None
}

/// Does a `//` comment in the block of comments, docs and attributes right above line `i` say
/// why the function is long?
fn says_why(src: &[&str], i: usize) -> bool {
    src[..i]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .filter(|l| l.starts_with("//") && !l.starts_with("///") && !l.starts_with("//!"))
        .any(|l| {
            let l = l.to_lowercase();
            l.contains("long") || l.contains("screen")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_names_and_reasons() {
        let src = "trait T { fn decl(&self); }\n\
                   // Long: one table.\n\
                   /// Docs.\n\
                   #[inline]\n\
                   pub(crate) fn table() -> u32 {\n    let s = \"}\";\n    1\n}\n\
                   fn short() {}\n\
                   #[cfg(test)]\nmod tests {\n    fn hidden() {\n    }\n}\n";
        let f = functions(src);
        let names: Vec<(&str, usize, bool)> = f
            .iter()
            .map(|f| (f.name.as_str(), f.length, f.says_why))
            .collect();
        assert_eq!(names, vec![("table", 4, true), ("short", 1, false)]);
    }
}

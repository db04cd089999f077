//! Coq `.glob` files: the compiler's own record of what every name in a file resolved to.
//!
//! Format (Coq 8.16), one entry per line after `DIGEST …` and `F<logical path>`:
//! * `R<bp>:<ep> <file> <secpath> <name> <kind>` — a reference at bytes `bp..=ep` of the `.v`
//!   source to `name` defined in logical file `<file>` (`<kind>` `lib` marks a resolved `Require`);
//! * `<kind> <bp>:<ep> <secpath> <name>` — a definition (`prf` for Lemma/Theorem, `def`, `ind`, …).
//!
//! We keep only what the dataset needs: resolved `Require`s (file dependencies) and references
//! to names defined in the same file (premise use inside the file).

use serde::Serialize;

/// A reference to a name defined in some logical file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GlobRef {
    /// Byte offsets into the `.v` source (`end` exclusive).
    pub start: usize,
    pub end: usize,
    /// Logical path of the file that defines the name (`Coq.Lists.List`).
    pub file: String,
    /// Short name (last component; Coq records `M.c` as `c`).
    pub name: String,
    /// `thm`, `def`, `lib`, `ind`, …
    pub kind: String,
}

/// A definition recorded in the file itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GlobDef {
    pub start: usize,
    pub end: usize,
    /// Module/section path inside the file (`<>` is empty).
    pub secpath: String,
    pub name: String,
    pub kind: String,
}

/// A parsed `.glob` file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Glob {
    /// The `F…` line: the logical path of this file.
    pub logical: String,
    /// Logical paths of the `Require`d files, in order, deduplicated.
    pub requires: Vec<String>,
    /// Each name of a `Require` with what it resolved to: (start, end, logical path).
    pub required_at: Vec<(usize, usize, String)>,
    pub refs: Vec<GlobRef>,
    pub defs: Vec<GlobDef>,
}

fn span(s: &str) -> Option<(usize, usize)> {
    let (a, b) = s.split_once(':')?;
    let a: usize = a.parse().ok()?;
    let b: usize = b.parse().ok()?;
    (a <= b).then_some((a, b + 1))
}

/// Parse a `.glob` file. Unknown or malformed lines are skipped (the format has grown over Coq
/// versions, and a missing reference only makes the textual fallback's job larger); the number of
/// lines skipped is returned so callers can report it.
pub fn parse(text: &str) -> (Glob, usize) {
    let mut g = Glob::default();
    let mut bad = 0;
    for line in text.lines() {
        if line.is_empty() || line.starts_with("DIGEST") {
            continue;
        }
        if let Some(rest) = line.strip_prefix('F') {
            if g.logical.is_empty() {
                g.logical = rest.trim().to_string();
                continue;
            }
        }
        let mut parts = line.split_whitespace();
        let Some(head) = parts.next() else { continue };
        if let Some(sp) = head.strip_prefix('R') {
            let fields: Vec<&str> = parts.collect();
            match (span(sp), fields.as_slice()) {
                (Some((start, end)), [file, _secpath, name, kind]) => {
                    if *kind == "lib" {
                        g.required_at.push((start, end, file.to_string()));
                        if !g.requires.iter().any(|r| r == file) {
                            g.requires.push(file.to_string());
                        }
                    } else {
                        let short = name.rsplit('.').next().unwrap_or(name);
                        g.refs.push(GlobRef {
                            start,
                            end,
                            file: file.to_string(),
                            name: short.to_string(),
                            kind: kind.to_string(),
                        });
                    }
                }
                _ => bad += 1,
            }
        } else {
            let fields: Vec<&str> = parts.collect();
            match fields.as_slice() {
                [sp, secpath, name] => match span(sp) {
                    Some((start, end)) => g.defs.push(GlobDef {
                        start,
                        end,
                        secpath: if *secpath == "<>" {
                            String::new()
                        } else {
                            secpath.to_string()
                        },
                        name: name.to_string(),
                        kind: head.to_string(),
                    }),
                    None => bad += 1,
                },
                _ => bad += 1,
            }
        }
    }
    (g, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Excerpt of a real `coqc -dump-glob` output for a file of our own (tests/data/glob/T.v).
    const SAMPLE: &str = "DIGEST 476c7b7f9b8d24bc6454d82bba4bd10a\nFTop.T\nR15:19 Coq.Arith.Arith <> <> lib\nR21:23 Coq.micromega.Lia <> <> lib\nsec 34:34 <> S\nprf 61:61 <> a\nR65:65 Top.T <> S.n var\nR127:127 Top.T <> a thm\nprf 158:158 M c\nR276:278 Top.T <> c thm\nR21:23 Coq.micromega.Lia <> <> lib\ngarbage line here x y z\n";

    #[test]
    fn parses_requires_refs_defs() {
        let (g, bad) = parse(SAMPLE);
        assert_eq!(g.logical, "Top.T");
        assert_eq!(g.requires, ["Coq.Arith.Arith", "Coq.micromega.Lia"]);
        assert_eq!(bad, 1);
        let thm: Vec<_> = g
            .refs
            .iter()
            .filter(|r| r.kind == "thm")
            .map(|r| (r.start, r.end, r.name.as_str()))
            .collect();
        assert_eq!(thm, [(127, 128, "a"), (276, 279, "c")]);
        assert_eq!(
            g.refs
                .iter()
                .find(|r| r.kind == "var")
                .map(|r| r.name.as_str()),
            Some("n")
        );
        let defs: Vec<_> = g
            .defs
            .iter()
            .map(|d| (d.kind.as_str(), d.secpath.as_str(), d.name.as_str()))
            .collect();
        assert_eq!(
            defs,
            [("sec", "", "S"), ("prf", "", "a"), ("prf", "M", "c")]
        );
    }

    #[test]
    fn never_panics_on_junk() {
        for s in [
            "",
            "R",
            "R1:",
            "R:2 a b c d",
            "R5:1 a b c d",
            "prf x y z",
            "F",
            "\u{0}\u{feff}R1:2 é é é é",
        ] {
            let _ = parse(s);
        }
    }
}

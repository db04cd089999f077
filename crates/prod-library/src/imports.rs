//! Qualified imports: a library's own unqualified `Require`s rewritten to `From Root Require …`
//! at dataset-build time, so that every context loads in a Coq that sees the library only as an
//! installed root (the checker, the final cold `coqc`, `prod check`).
//!
//! Why: a library is compiled with its sources bound to its root by `-R src Flocq`, which makes
//! every file reachable by its short name (`Require Import Zaux.`). An installed library under
//! `user-contrib/Flocq` is only reachable qualified (Coq adds `user-contrib` like `-Q`), so the
//! dataset's contexts would not load. Rewriting instead of carrying `-R` bindings to the checker
//! needs no checker change, and it is sound by construction: `From Flocq Require Import
//! Core.Zaux.` can only find the file `Flocq.Core.Zaux` of the installed root (Coq searches the
//! logical paths under `Flocq` that end in `Core`), never a file outside it.
//!
//! Rules, each conservative (a sentence we cannot rewrite exactly is left as it was and reported):
//! * Only `Require [Import|Export] q1 … qn.` sentences without controls, attributes, import
//!   categories or a `From` are touched; `Import M.`/`Export M.` (modules) never.
//! * Each name is resolved as the library's compilation resolved it: the `.glob`'s `lib` record at
//!   the name's position when there is one, else Coq's own lookup rules ([`Resolver`]: the
//!   library's implicit (`-R`) roots first, then the stdlib).
//! * A name that resolved to the stdlib, or that already is the full logical path, is kept; any
//!   other becomes its logical path relative to its root under `From Root`. Runs of names with
//!   different roots are split into consecutive sentences in the same order (`Require Import
//!   Reals. From Flocq Require Import Core.Zaux.`): the same files are loaded and imported in the
//!   same order. A path below the root that would start with a keyword goes into the prefix
//!   (`From Flocq.Prop Require Import Relative.`: a leading `Prop.` lexes as the sort).
//! * Edits only insert or replace text on one line: comments, layout and line numbers survive.

use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;

use prod_coq::statement::RESERVED;
use prod_coq::{comments_blanked, identifiers, sentence_head, sentences};

use crate::discovery::Library;
use crate::glob::Glob;

/// One replacement in the original text: `range` becomes `text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub text: String,
}

/// How the library's compilation resolved one required name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Loads the same file where the library is installed: the stdlib, or a full logical path.
    Keep,
    /// `From root Require … rel` (`root`: the library's root, or a directory path below it).
    Qualify { root: String, rel: String },
}

impl Target {
    /// The target of name `name` that resolved to the file with logical path `logical`. The
    /// `From` prefix is the root, extended while the rest would start with a keyword:
    /// `Flocq.Prop.Relative` is `From Flocq.Prop Require … Relative` (a leading `Prop.` is read
    /// as the sort `Prop`; after a dot it is a field name).
    pub fn of(name: &str, logical: &str) -> Target {
        let parts: Vec<&str> = logical.split('.').collect();
        if parts.len() < 2 || parts[0] == "Coq" || name == logical {
            return Target::Keep;
        }
        match (1..parts.len()).find(|&k| !RESERVED.contains(&parts[k])) {
            Some(k) => Target::Qualify {
                root: parts[..k].join("."),
                rel: parts[k..].join("."),
            },
            None => Target::Keep,
        }
    }

    /// The `From` prefix, if any.
    fn from(&self) -> Option<&str> {
        match self {
            Target::Qualify { root, .. } => Some(root),
            Target::Keep => None,
        }
    }
}

/// A source with its `Require`s qualified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewritten {
    pub text: String,
    /// The edits, in order, as ranges of the ORIGINAL text.
    pub edits: Vec<Edit>,
    /// Names left as they were, with why: `(byte offset in the original, message)`.
    pub unresolved: Vec<(usize, String)>,
}

impl Rewritten {
    /// No edit.
    pub fn unchanged(source: &str) -> Rewritten {
        Rewritten {
            text: source.to_string(),
            ..Default::default()
        }
    }

    /// Where byte `offset` of the original text is in the rewritten one (offsets inside a
    /// replaced range map to its start).
    pub fn shift(&self, offset: usize) -> usize {
        let mut delta = 0isize;
        for e in &self.edits {
            if e.range.end <= offset {
                delta += e.text.len() as isize - e.range.len() as isize;
            } else if e.range.start < offset {
                return (e.range.start as isize + delta) as usize;
            } else {
                break;
            }
        }
        (offset as isize + delta) as usize
    }

    /// `glob` with every position moved to the rewritten text.
    pub fn shift_glob(&self, glob: &Glob) -> Glob {
        let mut g = glob.clone();
        for r in &mut g.refs {
            (r.start, r.end) = (self.shift(r.start), self.shift(r.end));
        }
        for d in &mut g.defs {
            (d.start, d.end) = (self.shift(d.start), self.shift(d.end));
        }
        for r in &mut g.required_at {
            (r.0, r.1) = (self.shift(r.0), self.shift(r.1));
        }
        g
    }
}

/// A `Require` sentence we can rewrite: offsets relative to the sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequireSentence {
    /// Where the `Require` keyword starts.
    pub keyword: usize,
    /// `Require`, `Require Import` or `Require Export`.
    pub head: String,
    pub names: Vec<Range<usize>>,
}

/// What a sentence is, for this module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    NotRequire,
    /// A `Require` we do not rewrite (with why).
    Unsupported(&'static str),
    Require(RequireSentence),
}

/// Classify one sentence (its text, final dot included).
pub fn parse_require(sentence: &str) -> Parsed {
    let blank = comments_blanked(sentence);
    let head = sentence_head(&blank);
    // `From X Require …` is already qualified by its root.
    if head.keyword != Some("Require") {
        return Parsed::NotRequire;
    }
    if head.has_attributes() || !head.controls.is_empty() || head.selector.is_some() {
        return Parsed::Unsupported("controls or attributes");
    }
    let keyword = blank.len() - head.body.len();
    let ids = identifiers(&blank[keyword..]);
    let words: Vec<&str> = ids.iter().map(|r| &blank[keyword..][r.clone()]).collect();
    let skip = 1 + usize::from(matches!(words.get(1), Some(&("Import" | "Export"))));
    let names: Vec<Range<usize>> = ids[skip.min(ids.len())..]
        .iter()
        .map(|r| r.start + keyword..r.end + keyword)
        .collect();
    // Everything but the head words, the names, blanks and the final dot is something else
    // (import categories `(notations)`, `-`, strings): not rewritten.
    let mut rest = blank.clone().into_bytes();
    for r in ids.iter().map(|r| r.start + keyword..r.end + keyword) {
        rest[r].fill(b' ');
    }
    let rest = String::from_utf8_lossy(&rest);
    let rest = rest.trim_end().strip_suffix('.').unwrap_or(&rest);
    if names.is_empty() || !rest.trim().is_empty() {
        return Parsed::Unsupported("unexpected tokens");
    }
    Parsed::Require(RequireSentence {
        keyword,
        head: words[..skip].join(" "),
        names,
    })
}

/// The edits that qualify one parsed sentence starting at byte `at`, given each name's target.
/// Consecutive names with the same `From` prefix (or none) stay in one sentence.
pub fn sentence_edits(
    sentence: &str,
    at: usize,
    req: &RequireSentence,
    targets: &[Target],
) -> Vec<Edit> {
    let mut edits = Vec::new();
    for (k, (name, target)) in req.names.iter().zip(targets).enumerate() {
        let from = target
            .from()
            .map(|r| format!("From {r} "))
            .unwrap_or_default();
        if k == 0 && !from.is_empty() {
            edits.push(insert(at + req.keyword, from));
        } else if k > 0 && targets[k - 1].from() != target.from() {
            let prev = req.names[k - 1].end;
            edits.push(insert(at + prev, format!(". {from}{}", req.head)));
        }
        if let Target::Qualify { rel, .. } = target {
            if &sentence[name.clone()] != rel {
                edits.push(Edit {
                    range: at + name.start..at + name.end,
                    text: rel.clone(),
                });
            }
        }
    }
    edits
}

fn insert(at: usize, text: String) -> Edit {
    Edit {
        range: at..at,
        text,
    }
}

/// Rewrite every `Require` of `source`. `resolve(offset, name)` says how the name at byte
/// `offset` of `source` resolved when the library was compiled (`Err`: unknown, kept).
pub fn qualify_requires(
    source: &str,
    resolve: &dyn Fn(usize, &str) -> Result<Target, String>,
) -> Rewritten {
    let mut out = Rewritten::default();
    for s in &sentences(source).sentences {
        let text = s.text(source);
        let req = match parse_require(text) {
            Parsed::Require(r) => r,
            Parsed::NotRequire => continue,
            Parsed::Unsupported(why) => {
                if needs_rewrite(text, s.range.start, resolve) {
                    out.unresolved
                        .push((s.range.start, format!("{why}: {}", text.trim())));
                }
                continue;
            }
        };
        let targets: Vec<Target> = req
            .names
            .iter()
            .map(|r| {
                let name = &text[r.clone()];
                resolve(s.range.start + r.start, name).unwrap_or_else(|e| {
                    out.unresolved
                        .push((s.range.start + r.start, format!("{name}: {e}")));
                    Target::Keep
                })
            })
            .collect();
        out.edits
            .extend(sentence_edits(text, s.range.start, &req, &targets));
    }
    out.text = apply(source, &out.edits);
    out
}

/// Does an unsupported `Require` sentence name something that would need qualifying?
fn needs_rewrite(
    text: &str,
    at: usize,
    resolve: &dyn Fn(usize, &str) -> Result<Target, String>,
) -> bool {
    identifiers(text)
        .into_iter()
        .any(|r| matches!(resolve(at + r.start, &text[r]), Ok(Target::Qualify { .. })))
}

/// Apply ordered, non-overlapping edits.
pub fn apply(source: &str, edits: &[Edit]) -> String {
    let mut out = String::with_capacity(source.len() + edits.len() * 16);
    let mut pos = 0;
    for e in edits {
        out.push_str(&source[pos..e.range.start]);
        out.push_str(&e.text);
        pos = e.range.end;
    }
    out.push_str(&source[pos..]);
    out
}

/// Coq's lookup of a `Require`d name as the library's own build saw it (Coq 8.16,
/// `Loadpath.locate_qualified_library`): a name `d1.….dk.base` is a file `base` whose directory
/// path ends in `d1.….dk` under an implicit (`-R`) binding, or exactly `d1.….dk` under a `-Q`
/// one; the command line's bindings (the library's) come before the stdlib's.
#[derive(Clone, Debug, Default)]
pub struct Resolver {
    /// Logical paths of the library's files, with the load path each belongs to.
    files: Vec<(String, usize)>,
    /// Per load path: recursive (`-R`)?
    recursive: Vec<bool>,
    /// A project's files see each other's `-R` roots; a Debian root sees only itself.
    shared_roots: bool,
    stdlib: HashSet<String>,
}

impl Resolver {
    /// The resolver of `lib`, with the stdlib of `coqlib`.
    pub fn new(lib: &Library, coqlib: &Path) -> Resolver {
        // The innermost binding a file lies under (nested `-R` directories).
        let lp_of = |p: &Path| {
            (0..lib.load_paths.len())
                .filter(|&i| p.starts_with(&lib.load_paths[i].dir))
                .max_by_key(|&i| lib.load_paths[i].dir.components().count())
        };
        let files = lib
            .files
            .iter()
            .filter_map(|f| Some((f.logical.clone(), lp_of(&f.path)?)))
            .collect();
        let stdlib = crate::discovery::stdlib_logical_paths(coqlib);
        Resolver {
            files,
            recursive: lib.load_paths.iter().map(|lp| lp.recursive).collect(),
            shared_roots: !lib.load_paths.iter().any(|lp| lp.dir.starts_with(coqlib)),
            stdlib,
        }
    }

    /// Resolve `name` required by the library file with logical path `from`.
    pub fn resolve(&self, from: &str, name: &str) -> Result<String, String> {
        let own = self.files.iter().find(|f| f.0 == from).map(|f| f.1);
        let implicit = |lp: usize| self.recursive[lp] && (self.shared_roots || Some(lp) == own);
        let hits: Vec<&str> = self
            .files
            .iter()
            .filter(|(l, lp)| {
                if implicit(*lp) {
                    suffix_match(l, name)
                } else {
                    l == name
                }
            })
            .map(|(l, _)| l.as_str())
            .collect();
        match hits.as_slice() {
            [one] => Ok(one.to_string()),
            [] => self
                .stdlib
                .iter()
                .find(|l| suffix_match(l, name))
                .cloned()
                .ok_or_else(|| "not found in the library or the stdlib".into()),
            many => Err(format!("ambiguous: {}", many.join(", "))),
        }
    }
}

/// Is `name` (`d1.….dk.base`) a dot-suffix of `logical`?
fn suffix_match(logical: &str, name: &str) -> bool {
    logical == name || logical.strip_suffix(name).is_some_and(|p| p.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(Target::of("Reals", "Coq.Reals.Reals"), Target::Keep);
        assert_eq!(
            Target::of("Flocq.Core.Zaux", "Flocq.Core.Zaux"),
            Target::Keep
        );
        assert_eq!(
            Target::of("Zaux", "Flocq.Core.Zaux"),
            Target::Qualify {
                root: "Flocq".into(),
                rel: "Core.Zaux".into()
            }
        );
        assert_eq!(
            Target::of("Relative", "Flocq.Prop.Relative"),
            Target::Qualify {
                root: "Flocq.Prop".into(),
                rel: "Relative".into()
            }
        );
        assert_eq!(Target::of("Prop", "Flocq.Prop"), Target::Keep);
    }

    #[test]
    fn shift_maps_offsets() {
        let r = Rewritten {
            text: String::new(),
            edits: vec![
                insert(2, "ab".into()),
                Edit {
                    range: 5..7,
                    text: "xyz".into(),
                },
            ],
            unresolved: vec![],
        };
        assert_eq!(r.shift(0), 0);
        assert_eq!(r.shift(2), 4);
        assert_eq!(r.shift(5), 7);
        assert_eq!(r.shift(7), 10);
        assert_eq!(r.shift(9), 12);
    }

    #[test]
    fn suffixes() {
        assert!(suffix_match("Flocq.Core.Zaux", "Zaux"));
        assert!(suffix_match("Flocq.Core.Zaux", "Core.Zaux"));
        assert!(!suffix_match("Flocq.Core.Zaux", "aux"));
        assert!(!suffix_match("Flocq.Core.Zaux", "Prop.Zaux"));
    }
}

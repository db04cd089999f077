//! A crate's modules (one per file: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`, `lib.rs` and
//! `main.rs` the root) and the references between them in non-test code: `crate::a::…`,
//! `super::…`, `self::…`, and a bare `child::…` of one of the module's own children. A module
//! and its ancestors are one namespace: references between them (a parent declaring or
//! re-exporting its child, a child using its parent's items) are not edges. A *circle* is a
//! strongly connected set of two or more modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::source;

/// Module path → the modules it refers to.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module graph of the crate in `dir` (its `src/`; binaries under `src/bin/` left out).
pub fn graph(dir: &Path) -> Graph {
    let src = dir.join("src");
    let mut code = BTreeMap::new();
    for f in crate::rust_files(&src) {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        if rel.starts_with("bin/") || rel == "tests.rs" || rel.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        code.insert(module_path(&rel), source::code(&text));
    }
    let modules: BTreeSet<String> = code.keys().cloned().collect();
    let mut g = Graph::new();
    for (m, text) in &code {
        let targets = references(m, text, &modules)
            .into_iter()
            .filter(|t| t != m && !is_ancestor(t, m) && !is_ancestor(m, t))
            .collect();
        g.insert(m.clone(), targets);
    }
    g
}

/// `a/b.rs`, `a/b/mod.rs` → `a::b`; `lib.rs`, `main.rs` → `` (the root).
pub fn module_path(rel: &str) -> String {
    let p = rel.trim_end_matches(".rs");
    let p = p.strip_suffix("/mod").unwrap_or(p);
    if p == "lib" || p == "main" {
        String::new()
    } else {
        p.replace('/', "::")
    }
}

fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}::{b}")
    }
}

fn parent(m: &str) -> String {
    m.rsplit_once("::")
        .map(|(p, _)| p.to_string())
        .unwrap_or_default()
}

/// The longest module that `base::path…` names (`None`: no module beyond `base` itself).
fn resolve(base: &str, segments: &[&str], modules: &BTreeSet<String>) -> Option<String> {
    let mut found = None;
    let mut cur = base.to_string();
    for s in segments {
        cur = join(&cur, s);
        if modules.contains(&cur) {
            found = Some(cur.clone());
        } else {
            break;
        }
    }
    found
}

/// The modules module `m`'s code refers to.
fn references(m: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let words = paths(code);
    for path in words {
        let segs: Vec<&str> = path.split("::").collect();
        let (base, rest): (String, &[&str]) = match segs[0] {
            "crate" => (String::new(), &segs[1..]),
            "self" => (m.to_string(), &segs[1..]),
            "super" => {
                let mut base = parent(m);
                let mut k = 1;
                while segs.get(k) == Some(&"super") {
                    base = parent(&base);
                    k += 1;
                }
                (base, &segs[k..])
            }
            // A bare path: one of this module's own children.
            _ => (m.to_string(), &segs[..]),
        };
        if let Some(t) = resolve(&base, rest, modules) {
            out.insert(t);
        } else if segs[0] == "super" {
            out.insert(base);
        }
    }
    out
}

/// Every path `a::b::c` in `code`, with `use` groups (`crate::{a, b::c}`) expanded.
pub(crate) fn paths(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = vec![];
    let mut i = 0;
    while i < chars.len() {
        if ident(chars[i]) && (i == 0 || !(ident(chars[i - 1]) || chars[i - 1] == ':')) {
            let (path, next) = read_path(&chars, i);
            if path.contains("::") {
                out.push(path.clone());
            }
            if chars.get(next) == Some(&'{') && path.ends_with("::") {
                for item in group_items(&chars, next) {
                    out.push(format!("{path}{item}"));
                }
            }
            i = next.max(i + 1);
        } else {
            i += 1;
        }
    }
    out.into_iter()
        .map(|p| p.trim_end_matches("::").to_string())
        .collect()
}

/// The path starting at `i` (identifiers joined by `::`, a trailing `::` kept before a group)
/// and the index after it.
fn read_path(chars: &[char], mut i: usize) -> (String, usize) {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut path = String::new();
    loop {
        while i < chars.len() && ident(chars[i]) {
            path.push(chars[i]);
            i += 1;
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            path.push_str("::");
            i += 2;
            if chars.get(i).is_some_and(|c| ident(*c)) {
                continue;
            }
        }
        return (path, i);
    }
}

/// The items of a `{ … }` group at `open` (nested groups flattened one level: `b::{c, d}`
/// gives `b::c`, `b::d`).
fn group_items(chars: &[char], open: usize) -> Vec<String> {
    let mut depth = 0;
    let mut end = open;
    for (k, c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = k;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner: String = chars[open + 1..end].iter().collect();
    let mut items = vec![];
    for part in split_top(&inner) {
        let part = part.trim();
        if let Some((head, group)) = part.split_once("::{") {
            let group = group.trim_end_matches('}');
            for g in split_top(group) {
                items.push(format!("{head}::{}", g.trim()));
            }
        } else if !part.is_empty() {
            items.push(part.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    items
}

fn split_top(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

/// The circles of `g`: its strongly connected sets of two or more modules (Tarjan), each
/// sorted, in sorted order.
pub fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        g: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = vec![];
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        out: vec![],
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out.sort();
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_circles() {
        let modules: BTreeSet<String> = ["", "a", "b", "b::c", "d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let r = references(
            "a",
            "use crate::{b::c::X, d};\nfn f() { super::y(); }",
            &modules,
        );
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            vec!["".to_string(), "b::c".into(), "d".into()]
        );
        let r = references("b", "fn f() { c::g(); crate::a::h() }", &modules);
        assert_eq!(
            r.into_iter().collect::<Vec<_>>(),
            vec!["a".to_string(), "b::c".into()]
        );
        let mut g = Graph::new();
        g.insert("a".into(), ["b".to_string()].into());
        g.insert("b".into(), ["a".to_string()].into());
        g.insert("c".into(), ["a".to_string()].into());
        assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".into()]]);
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_path("lib.rs"), "");
        assert_eq!(module_path("a/b.rs"), "a::b");
        assert_eq!(module_path("a/mod.rs"), "a");
    }
}

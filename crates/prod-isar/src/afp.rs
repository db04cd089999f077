//! The Archive of Formal Proofs as a graph of entries, and the paper's splits.
//!
//! An AFP release unpacks to `thys/ROOTS` (entry directories), `thys/<Entry>/ROOT` (sessions),
//! `thys/<Entry>/**/*.thy` and `metadata/entries/<Entry>.toml` (title, `date`, …). An entry
//! depends on another when one of its sessions has a session of the other as parent or in its
//! `sessions` clause, or one of its theories imports a theory of the other
//! (`"Session.Theory"`, `"$AFP/Entry/Theory"` or `"../Entry/Theory"`).
//!
//! The same resolution of imports gives each theory's keyword table: HOL's plus the `keywords`
//! of every AFP theory it imports, transitively (so AFP-defined commands segment correctly and
//! unrelated entries' commands do not leak in).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use crate::header::{parse_header, KeywordDecl};
use crate::keywords::KeywordTable;
use crate::root::{parse_root, parse_roots, Session};

/// The paper's 36 holdout entries (Appendix A.3), in the paper's order.
pub const HOLDOUT_ENTRIES: [&str; 36] = [
    "Verified_SAT_Based_AI_Planning",
    "SIFPL",
    "Khovanskii_Theorem",
    "Bondy",
    "Rewriting_Z",
    "Decreasing-Diagrams-II",
    "Registers",
    "LocalLexing",
    "FeatherweightJava",
    "FFT",
    "Knot_Theory",
    "Eval_FO",
    "Saturation_Framework_Extensions",
    "Hales_Jewett",
    "SPARCv8",
    "CoSMeDis",
    "LP_Duality",
    "PAPP_Impossibility",
    "Groebner_Macaulay",
    "Abstract-Hoare-Logics",
    "PCF",
    "Jordan_Hoelder",
    "Knights_Tour",
    "FOL_Seq_Calc3",
    "Cartan_FP",
    "InformationFlowSlicing_Inter",
    "LOFT",
    "Diophantine_Eqns_Lin_Hom",
    "Dynamic_Tables",
    "Schutz_Spacetime",
    "Elliptic_Curves_Group_Law",
    "ArrowImpossibilityGS",
    "Goodstein_Lambda",
    "XML",
    "GenClock",
    "Topological_Semantics",
];

/// A problem met while reading the AFP (the entry or file it concerns is in the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfpError {
    pub message: String,
}

impl std::fmt::Display for AfpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AfpError {}

/// One AFP entry.
#[derive(Debug, Clone, Default)]
pub struct Entry {
    pub name: String,
    pub dir: PathBuf,
    pub sessions: Vec<Session>,
    /// All `.thy` files under the entry's directory, sorted.
    pub theory_files: Vec<PathBuf>,
}

/// The AFP `thys` directory, read: entries, sessions, theory files and the dependency graph.
#[derive(Debug, Default)]
pub struct Afp {
    pub thys: PathBuf,
    /// Entries by name (the directory names listed in `thys/ROOTS`).
    pub entries: BTreeMap<String, Entry>,
    /// Session name -> entry name.
    pub session_entry: HashMap<String, String>,
    /// Entry -> the AFP entries it depends on directly (never itself).
    pub deps: BTreeMap<String, BTreeSet<String>>,
    /// Problems found (unreadable ROOT, unknown parent session, …); none of them is fatal.
    pub errors: Vec<AfpError>,
    /// Theory file stem -> files, per entry (for resolving `Session.Theory` imports).
    stems: HashMap<String, HashMap<String, Vec<PathBuf>>>,
}

fn walk_thy(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk_thy(&p, out);
        } else if p.extension().is_some_and(|x| x == "thy") {
            out.push(p);
        }
    }
}

/// Lexically normalises `a/b/../c` to `a/c` (no file system access: paths may not exist).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Where an import points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportTarget {
    /// A theory file of the AFP.
    File(PathBuf),
    /// A theory of an Isabelle distribution session (`Main`, `"HOL-Library.Multiset"`), or a
    /// name that resolves to no AFP file.
    External(String),
}

impl Afp {
    /// Reads `thys/ROOTS` (or, without it, every directory holding a ROOT file), each entry's
    /// ROOT and its theory files, and every theory header's imports for the dependency graph.
    pub fn load(thys: &Path) -> Result<Afp, AfpError> {
        let mut afp = Afp {
            thys: thys.to_path_buf(),
            ..Afp::default()
        };
        let names = match std::fs::read_to_string(thys.join("ROOTS")) {
            Ok(t) => parse_roots(&t),
            Err(_) => {
                let rd = std::fs::read_dir(thys).map_err(|e| AfpError {
                    message: format!("cannot read AFP thys directory {}: {e}", thys.display()),
                })?;
                let mut v: Vec<String> = rd
                    .flatten()
                    .filter(|e| e.path().join("ROOT").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                v.sort();
                v
            }
        };
        for name in names {
            let dir = thys.join(&name);
            let root = dir.join("ROOT");
            let sessions = match std::fs::read_to_string(&root) {
                Ok(t) => {
                    let (s, errs) = parse_root(&t);
                    for e in errs {
                        afp.errors.push(AfpError {
                            message: format!("{}: {}", root.display(), e.message),
                        });
                    }
                    s
                }
                Err(e) => {
                    afp.errors.push(AfpError {
                        message: format!("entry {name}: cannot read {}: {e}", root.display()),
                    });
                    Vec::new()
                }
            };
            let mut files = Vec::new();
            walk_thy(&dir, &mut files);
            files.sort();
            for s in &sessions {
                afp.session_entry.insert(s.name.clone(), name.clone());
            }
            let mut stems: HashMap<String, Vec<PathBuf>> = HashMap::new();
            for f in &files {
                if let Some(st) = f.file_stem() {
                    stems
                        .entry(st.to_string_lossy().into_owned())
                        .or_default()
                        .push(f.clone());
                }
            }
            afp.stems.insert(name.clone(), stems);
            afp.entries.insert(
                name.clone(),
                Entry {
                    name,
                    dir,
                    sessions,
                    theory_files: files,
                },
            );
        }
        afp.compute_deps();
        Ok(afp)
    }

    fn compute_deps(&mut self) {
        let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut errors = Vec::new();
        for (name, entry) in &self.entries {
            let d = deps.entry(name.clone()).or_default();
            for s in &entry.sessions {
                for other in s.parent.iter().chain(s.sessions.iter()) {
                    if let Some(e) = self.session_entry.get(other) {
                        d.insert(e.clone());
                    }
                }
            }
            for f in &entry.theory_files {
                let text = match std::fs::read_to_string(f) {
                    Ok(t) => t,
                    Err(e) => {
                        errors.push(AfpError {
                            message: format!("{}: {e}", f.display()),
                        });
                        continue;
                    }
                };
                let Ok(h) = parse_header(&text) else { continue };
                for imp in &h.imports {
                    if let ImportTarget::File(p) = self.resolve_import(f, imp) {
                        if let Some(e) = self.entry_of_file(&p) {
                            d.insert(e.to_string());
                        }
                    }
                }
            }
            d.remove(name);
        }
        self.deps = deps;
        self.errors.extend(errors);
    }

    /// The entry whose directory contains `file`.
    pub fn entry_of_file(&self, file: &Path) -> Option<&str> {
        let rel = file.strip_prefix(&self.thys).ok()?;
        let first = rel.components().next()?;
        let name = first.as_os_str().to_string_lossy();
        self.entries.get(name.as_ref()).map(|e| e.name.as_str())
    }

    /// Resolves an import written in theory `from` (a file path) to an AFP theory file when it
    /// names one. Rules (Isabelle's `Resources.import_name`, simplified to what the AFP uses):
    /// a path (`"../E/T"`, `"$AFP/E/T"`, `"sub/T"`) is relative to the importing file's directory;
    /// `Session.Theory` with an AFP session is looked up in that session's entry; a plain name
    /// is first a file beside the importer, then a theory of the importer's own entry.
    pub fn resolve_import(&self, from: &Path, import: &str) -> ImportTarget {
        let base = from.parent().unwrap_or(Path::new(""));
        let is_path = import.contains('/') || import.starts_with('$');
        if is_path {
            let p = if let Some(rest) = import.strip_prefix("$AFP/") {
                self.thys.join(rest)
            } else if import.starts_with('$') {
                return ImportTarget::External(import.to_string());
            } else {
                base.join(import)
            };
            let f = normalize(&p.with_extension("thy"));
            return if f.is_file() {
                ImportTarget::File(f)
            } else {
                ImportTarget::External(import.to_string())
            };
        }
        // Session-qualified `Session.Theory`.
        if let Some((sess, thy)) = import.split_once('.') {
            if let Some(entry) = self.session_entry.get(sess) {
                return match self.find_in_entry(entry, thy, from) {
                    Some(f) => ImportTarget::File(f),
                    None => ImportTarget::External(import.to_string()),
                };
            }
            return ImportTarget::External(import.to_string());
        }
        let beside = base.join(format!("{import}.thy"));
        if beside.is_file() {
            return ImportTarget::File(normalize(&beside));
        }
        if let Some(entry) = self.entry_of_file(from) {
            if let Some(f) = self.find_in_entry(entry, import, from) {
                return ImportTarget::File(f);
            }
        }
        ImportTarget::External(import.to_string())
    }

    /// A theory file named `thy` in `entry`, preferring the one closest to `near`.
    fn find_in_entry(&self, entry: &str, thy: &str, near: &Path) -> Option<PathBuf> {
        let stem = thy.rsplit('/').next().unwrap_or(thy);
        let files = self.stems.get(entry)?.get(stem)?;
        let near_dir = near.parent().unwrap_or(Path::new(""));
        files
            .iter()
            .find(|f| f.parent() == Some(near_dir))
            .or_else(|| files.iter().min_by_key(|f| f.components().count()))
            .cloned()
    }

    /// The theory files of `entry` that its sessions actually check: those listed under
    /// `theories` in its ROOT and everything of the entry they import, transitively. Files
    /// outside this set are never loaded by Isabelle (stale or broken files exist in the AFP).
    pub fn session_theory_files(&self, entry: &str) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        let Some(e) = self.entries.get(entry) else {
            return out;
        };
        let mut todo: Vec<PathBuf> = Vec::new();
        for s in &e.sessions {
            let base = normalize(&e.dir.join(s.dir.as_deref().unwrap_or(".")));
            // Resolve each listed theory as an import written in a file of the session directory.
            let anchor = base.join("ROOT");
            for t in &s.theories {
                let mut found = None;
                for d in std::iter::once(".").chain(s.directories.iter().map(String::as_str)) {
                    let f = normalize(&base.join(d).join(format!("{t}.thy")));
                    if f.is_file() {
                        found = Some(f);
                        break;
                    }
                }
                let found = found.or_else(|| match self.resolve_import(&anchor, t) {
                    ImportTarget::File(f) => Some(f),
                    ImportTarget::External(_) => None,
                });
                if let Some(f) = found {
                    todo.push(f);
                }
            }
        }
        while let Some(f) = todo.pop() {
            if self.entry_of_file(&f) != Some(entry) || !out.insert(f.clone()) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            let Ok(h) = parse_header(&text) else { continue };
            for imp in &h.imports {
                if let ImportTarget::File(p) = self.resolve_import(&f, imp) {
                    todo.push(p);
                }
            }
        }
        out
    }

    /// Entries in dependency order: every entry after all entries it depends on, except
    /// within a dependency cycle. Entry-level cycles exist in the AFP because an entry's extra
    /// sessions may use entries that use its main session (Collections' `Collections_Examples`
    /// uses CAVA_Automata, which uses Collections); the members of each such strongly connected
    /// component are listed together, by name, and the components are returned as well.
    pub fn topological_order(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let names: Vec<&str> = self.deps.keys().map(String::as_str).collect();
        let index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let succ: Vec<Vec<usize>> = names
            .iter()
            .map(|n| {
                self.deps[*n]
                    .iter()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .collect()
            })
            .collect();
        // Tarjan's algorithm emits components in reverse topological order of the condensation
        // with edges entry -> dependency, i.e. dependencies first: exactly the order we want.
        let comps = tarjan_scc(&succ);
        let mut order = Vec::with_capacity(names.len());
        let mut cycles = Vec::new();
        for mut comp in comps {
            comp.sort_by_key(|&i| names[i]);
            let members: Vec<String> = comp.iter().map(|&i| names[i].to_string()).collect();
            if members.len() > 1 {
                cycles.push(members.clone());
            }
            order.extend(members);
        }
        (order, cycles)
    }

    /// Entries that depend on `entry`, directly or transitively.
    pub fn dependents(&self, entry: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo = vec![entry.to_string()];
        while let Some(e) = todo.pop() {
            for (user, ds) in &self.deps {
                if ds.contains(&e) && out.insert(user.clone()) {
                    todo.push(user.clone());
                }
            }
        }
        out
    }

    /// Entries `entry` depends on, transitively.
    pub fn transitive_deps(&self, entry: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo = vec![entry.to_string()];
        while let Some(e) = todo.pop() {
            for d in self.deps.get(&e).into_iter().flatten() {
                if out.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        out
    }
}

/// Strongly connected components of a graph given by successor lists (iterative Tarjan, so deep
/// graphs cannot overflow the stack). Components come out sinks first.
fn tarjan_scc(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut comps = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next successor position)
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if let Some(&w) = succ[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comps.push(comp);
                }
            }
        }
    }
    comps
}

/// Keyword tables per theory file: HOL's plus the keywords of every AFP theory imported,
/// transitively, plus the theory's own, plus the distribution groups
/// ([`crate::keywords::DISTRIBUTION_GROUPS`]) that any of these theories imports. Memoised;
/// import cycles are cut.
pub struct KeywordResolver<'a> {
    afp: &'a Afp,
    base: KeywordTable,
    cache: HashMap<PathBuf, std::rc::Rc<Imported>>,
}

/// What a theory brings along: keywords declared by it and its AFP imports, and the names of
/// the distribution theories they import.
#[derive(Debug, Default)]
struct Imported {
    decls: Vec<KeywordDecl>,
    external: BTreeSet<String>,
}

impl<'a> KeywordResolver<'a> {
    pub fn new(afp: &'a Afp, base: KeywordTable) -> Self {
        Self {
            afp,
            base,
            cache: HashMap::new(),
        }
    }

    /// The keyword table for segmenting `file` (which has text `text`).
    pub fn table_for(&mut self, file: &Path, text: &str) -> KeywordTable {
        let mut t = self.base.clone();
        let Ok(h) = parse_header(text) else { return t };
        let mut external: BTreeSet<String> = BTreeSet::new();
        let mut decls: Vec<KeywordDecl> = Vec::new();
        for imp in &h.imports {
            match self.afp.resolve_import(file, imp) {
                ImportTarget::File(p) => {
                    let mut visiting = HashSet::new();
                    let i = self.imported(&p, &mut visiting);
                    decls.extend(i.decls.iter().cloned());
                    external.extend(i.external.iter().cloned());
                }
                ImportTarget::External(n) => {
                    external.insert(n);
                }
            }
        }
        t.add_distribution_imports(external.iter().map(String::as_str));
        for d in &decls {
            t.add(&d.name, d.kind);
        }
        t.extend_from_header(&h);
        t
    }

    fn imported(&mut self, file: &Path, visiting: &mut HashSet<PathBuf>) -> std::rc::Rc<Imported> {
        if let Some(c) = self.cache.get(file) {
            return c.clone();
        }
        if !visiting.insert(file.to_path_buf()) {
            return std::rc::Rc::new(Imported::default());
        }
        let mut out = Imported::default();
        let mut decls: Vec<KeywordDecl> = Vec::new();
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(h) = parse_header(&text) {
                for imp in &h.imports {
                    match self.afp.resolve_import(file, imp) {
                        ImportTarget::File(p) => {
                            let i = self.imported(&p, visiting);
                            decls.extend(i.decls.iter().cloned());
                            out.external.extend(i.external.iter().cloned());
                        }
                        ImportTarget::External(n) => {
                            out.external.insert(n);
                        }
                    }
                }
                decls.extend(h.keywords);
            }
        }
        // Later declarations win, so keep the last of duplicates only.
        let mut seen = HashSet::new();
        out.decls = decls
            .into_iter()
            .rev()
            .filter(|d| seen.insert(d.name.clone()))
            .collect();
        out.decls.reverse();
        let rc = std::rc::Rc::new(out);
        visiting.remove(file);
        self.cache.insert(file.to_path_buf(), rc.clone());
        rc
    }
}

/// The `date` of an entry from `metadata/entries/<Entry>.toml` (`YYYY-MM-DD`).
///
/// Only the top-level `date = 2014-10-03` line is read: some AFP 2022 metadata files are not
/// strict TOML (e.g. `Abstract-Hoare-Logics.toml` repeats its `[related]` table), so a full TOML
/// parser rejects them.
pub fn entry_date(metadata_entries: &Path, entry: &str) -> Result<String, AfpError> {
    let path = metadata_entries.join(format!("{entry}.toml"));
    let text = std::fs::read_to_string(&path).map_err(|e| AfpError {
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('[') {
            break; // past the top-level keys
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim() != "date" {
            continue;
        }
        let v = value.trim().trim_matches('"');
        let d = v.get(..10).unwrap_or(v);
        if is_iso_date(d) {
            return Ok(d.to_string());
        }
        return Err(AfpError {
            message: format!("{}:{}: date {v:?} is not YYYY-MM-DD", path.display(), n + 1),
        });
    }
    Err(AfpError {
        message: format!("{}: no top-level `date`", path.display()),
    })
}

/// Whether `s` is `YYYY-MM-DD` (digits in place; string order is then date order).
pub fn is_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// The entries dated strictly after `after` (`YYYY-MM-DD`), for an out-of-distribution split.
/// Entries without readable metadata are returned in the error list, not guessed.
pub fn entries_after(
    metadata_entries: &Path,
    entries: impl IntoIterator<Item = impl AsRef<str>>,
    after: &str,
) -> Result<(Vec<String>, Vec<AfpError>), AfpError> {
    if !is_iso_date(after) {
        return Err(AfpError {
            message: format!("--after {after:?}: expected a date YYYY-MM-DD"),
        });
    }
    let mut out = Vec::new();
    let mut errs = Vec::new();
    for e in entries {
        match entry_date(metadata_entries, e.as_ref()) {
            Ok(d) if d.as_str() > after => out.push(e.as_ref().to_string()),
            Ok(_) => {}
            Err(err) => errs.push(err),
        }
    }
    Ok((out, errs))
}

//! The compiled copy of a user's own project, kept in the dataset directory.
//!
//! A dataset's texts import the project's files qualified (`From MyLib Require Import Base.`),
//! and `Require` loads compiled `.vo` files. A Debian library has them installed under
//! `coqc -where`; a user's project has not, so `dataset build` copies the project's sources to
//! `<out>/lib/<Root>/<rel>.v` (the path below the logical root `Root`), compiles them there in
//! dependency order with the checker's prover flags, and records one binding per root in
//! `stats.json` as a path relative to the dataset directory (`{"dir": "lib/MyLib", "logical":
//! "MyLib"}`). The checker binds exactly these directories (`-Q`), read-only.
//!
//! Soundness of a binding is decided where it is used (the directory must lie inside the
//! dataset, its root may not shadow the prover's own or an installed library); here the build
//! only makes sure that `lib/` holds nothing but what it wrote (stale files, links and unknown
//! roots are removed) and that a root which would shadow an installed library is not compiled.
//!
//! Rebuilding reuses every `.vo` that is newer than its source and its dependencies' `.vo`
//! (like `make`). A file that does not compile is reported in the notes with Coq's message;
//! files that require it are skipped. Without `coqc`, nothing is compiled and a note says so.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::discovery::{Library, LoadPath};

/// The directory of compiled copies inside a dataset directory.
pub const LIB_DIR: &str = "lib";

/// Flags of every compilation besides the prover's (`prod_coq::PROVER_FLAGS`, the checker's):
/// quiet, no `.glob` files.
const COQC_FLAGS: &[&str] = &["-q", "-noglob"];

/// Logical roots that belong to the prover itself (Coq 8, Rocq 9): never bound to a project.
pub const PROVER_ROOTS: &[&str] = &["Coq", "Stdlib", "Corelib", "Rocq", "Ltac2"];

/// Would binding `root` shadow the prover's own library or one installed under `coqlib`
/// (`coqc -where`)?
pub fn shadows_installed(root: &str, coqlib: &Path) -> bool {
    let first = root.split('.').next().unwrap_or(root);
    PROVER_ROOTS.contains(&first) || coqlib.join("user-contrib").join(first).exists()
}

/// What compiling a project did.
#[derive(Clone, Debug, Default)]
pub struct Compiled {
    /// One `-Q` binding per compiled root, `dir` relative to the dataset directory.
    pub bindings: Vec<LoadPath>,
    /// Files compiled now / reused from an earlier build / not compiled.
    pub compiled: usize,
    pub reused: usize,
    pub failed: usize,
    pub notes: Vec<String>,
}

/// Where each file of `lib` goes below `lib/`: (root, path of the `.v` relative to `lib/<root>`),
/// or why it cannot be compiled.
fn placement(logical: &str, coqlib: &Path) -> Result<(String, PathBuf), String> {
    let parts: Vec<&str> = logical.split('.').collect();
    if parts.len() < 2 {
        return Err(format!(
            "{logical}: no logical root (bound with an empty name); it cannot be bound with -Q"
        ));
    }
    if !parts.iter().all(|p| prod_coq::is_identifier(p)) {
        return Err(format!("{logical}: not a logical path of identifiers"));
    }
    if shadows_installed(parts[0], coqlib) {
        return Err(format!(
            "{logical}: its root {} is the prover's own or an installed library's; binding it would shadow that library",
            parts[0]
        ));
    }
    let mut rel: PathBuf = parts[1..].iter().collect();
    rel.set_extension("v");
    Ok((parts[0].to_string(), rel))
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok()
}

/// Remove everything below `dir` that is not in `keep` (paths relative to `dir`); links are
/// always removed. Empty directories go too.
fn prune(dir: &Path, rel: &Path, keep: &HashSet<PathBuf>) -> std::io::Result<bool> {
    let mut empty = true;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let ft = e.file_type()?;
        let r = rel.join(e.file_name());
        if ft.is_dir() {
            if prune(&e.path(), &r, keep)? {
                std::fs::remove_dir(e.path())?;
            } else {
                empty = false;
            }
        } else if ft.is_file() && keep.contains(&r) {
            empty = false;
        } else {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(empty)
}

/// The first lines of Coq's error output.
fn coq_error(out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let text: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    text.iter()
        .take(4)
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(400)
        .collect()
}

/// Copy the files of a user's project (`lib`, discovered from its directory, dependencies
/// resolved) to `<out_dir>/lib/<Root>/…` and compile them there with `coqc` in dependency order.
pub fn compile_project(lib: &Library, out_dir: &Path, coqlib: &Path, coqc: &Path) -> Compiled {
    let mut c = Compiled::default();
    let place: Vec<Option<(String, PathBuf)>> = lib
        .files
        .iter()
        .map(|f| match placement(&f.logical, coqlib) {
            Ok(p) => Some(p),
            Err(e) => {
                c.notes.push(format!("not compiled: {e}"));
                None
            }
        })
        .collect();
    let lib_dir = out_dir.join(LIB_DIR);
    // Only what this build writes stays below lib/ (a binding then holds the project only).
    if lib_dir.is_dir() {
        if let Err(e) = prune(&lib_dir, Path::new(""), &kept_paths(&place)) {
            c.notes
                .push(format!("cannot clean {}: {e}", lib_dir.display()));
            return c;
        }
    }
    let roots: BTreeSet<String> = place.iter().flatten().map(|(r, _)| r.clone()).collect();
    if roots.is_empty() {
        return c;
    }
    match Command::new(coqc).arg("-v").output() {
        Ok(o) if o.status.success() => {}
        _ => {
            c.failed = place.iter().flatten().count();
            c.notes.push(format!(
                "not compiled: `{} -v` does not run; the project's files are not in lib/, so its contexts will not load in the checker (install Coq and rebuild)",
                coqc.display()
            ));
            return c;
        }
    }
    let order = dependency_order(lib);
    let mut b = Builder {
        lib,
        out_dir,
        coqc,
        place: &place,
        roots: &roots,
        ok: vec![false; lib.files.len()],
        built_now: vec![false; lib.files.len()],
        bound: BTreeMap::new(),
        failures: vec![],
        compiled: 0,
        reused: 0,
    };
    for &i in &order {
        b.build(i);
    }
    for (i, p) in place.iter().enumerate() {
        if p.is_some() && !order.contains(&i) {
            b.failures
                .push(format!("{}: on a dependency cycle", lib.files[i].logical));
        }
    }
    b.summarise(c)
}

/// The paths (relative to `lib/`) a build with placements `place` writes: the copied source,
/// its compiled files and Coq's `.aux` file.
fn kept_paths(place: &[Option<(String, PathBuf)>]) -> HashSet<PathBuf> {
    let mut keep: HashSet<PathBuf> = HashSet::new();
    for (root, rel) in place.iter().flatten() {
        let base = Path::new(root).join(rel);
        for ext in ["v", "vo", "vos", "vok"] {
            keep.insert(base.with_extension(ext));
        }
        let stem = rel
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        keep.insert(base.with_file_name(format!(".{stem}.aux")));
    }
    keep
}

/// The files of `lib` in dependency order (Kahn); files on a cycle never become ready and are
/// left out.
fn dependency_order(lib: &Library) -> Vec<usize> {
    let n = lib.files.len();
    let mut indegree: Vec<usize> = (0..n)
        .map(|i| lib.file_deps.get(i).map_or(0, |d| d.len()))
        .collect();
    let mut users: Vec<Vec<usize>> = vec![vec![]; n];
    for i in 0..n {
        for &d in lib.file_deps.get(i).map(Vec::as_slice).unwrap_or(&[]) {
            if d < n {
                users[d].push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).rev().collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(u);
            }
        }
    }
    order
}

/// The compilation of one project's files, one [`Builder::build`] per file in dependency order.
struct Builder<'a> {
    lib: &'a Library,
    out_dir: &'a Path,
    coqc: &'a Path,
    place: &'a [Option<(String, PathBuf)>],
    roots: &'a BTreeSet<String>,
    /// Compiled now or reused.
    ok: Vec<bool>,
    built_now: Vec<bool>,
    /// Files compiled or reused per root.
    bound: BTreeMap<String, usize>,
    failures: Vec<String>,
    compiled: usize,
    reused: usize,
}

impl Builder<'_> {
    /// Copy file `i` below `lib/` and compile it, unless a dependency failed or its `.vo` is
    /// fresh.
    fn build(&mut self, i: usize) {
        let Some((root, rel)) = &self.place[i] else {
            return;
        };
        let (lib, out_dir) = (self.lib, self.out_dir);
        let f = &lib.files[i];
        let deps = lib.file_deps.get(i).map(Vec::as_slice).unwrap_or(&[]);
        if let Some(&d) = deps.iter().find(|&&d| !self.ok[d]) {
            self.failures.push(format!(
                "{}: requires {}, which did not compile",
                f.logical, lib.files[d].logical
            ));
            return;
        }
        let v_rel = Path::new(LIB_DIR).join(root).join(rel);
        let v = out_dir.join(&v_rel);
        let vo = v.with_extension("vo");
        if let Err(e) = self.copy_source(i, &v) {
            self.failures.push(e);
            return;
        }
        if self.is_fresh(deps, &v, &vo) {
            self.ok[i] = true;
            self.reused += 1;
            *self.bound.entry(root.clone()).or_default() += 1;
            return;
        }
        let mut cmd = Command::new(self.coqc);
        cmd.current_dir(out_dir)
            .args(COQC_FLAGS)
            .args(prod_coq::PROVER_FLAGS)
            .args(&f.flags);
        for r in self.roots {
            cmd.arg("-R").arg(Path::new(LIB_DIR).join(r)).arg(r);
        }
        cmd.arg(&v_rel);
        match cmd.output() {
            Ok(o) if o.status.success() && vo.is_file() => {
                self.ok[i] = true;
                self.built_now[i] = true;
                self.compiled += 1;
                *self.bound.entry(root.clone()).or_default() += 1;
            }
            Ok(o) => {
                let _ = std::fs::remove_file(&vo);
                let msg = format!("{}: coqc failed: {}", f.logical, coq_error(&o));
                self.failures.push(msg);
            }
            Err(e) => self.failures.push(format!(
                "{}: cannot run {}: {e}",
                f.logical,
                self.coqc.display()
            )),
        }
    }

    /// Copy file `i`'s source to `v` unless it is there already; `Err`: the failure note.
    fn copy_source(&self, i: usize, v: &Path) -> Result<(), String> {
        let f = &self.lib.files[i];
        let source = std::fs::read(&f.path)
            .map_err(|e| format!("{}: {}: {e}", f.logical, f.path.display()))?;
        let written = std::fs::read(v).ok();
        if written.as_deref() != Some(source.as_slice()) {
            let dir = v.parent().unwrap_or(self.out_dir);
            std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::write(v, &source))
                .map_err(|e| format!("{}: {}: {e}", f.logical, v.display()))?;
        }
        Ok(())
    }

    /// Is `vo` newer than its source `v` and than the `.vo` of each dependency (none of them
    /// rebuilt in this build)?
    fn is_fresh(&self, deps: &[usize], v: &Path, vo: &Path) -> bool {
        mtime(vo).is_some_and(|t| {
            mtime(v).is_some_and(|s| s <= t)
                && deps.iter().all(|&d| {
                    !self.built_now[d]
                        && self.place[d].as_ref().is_some_and(|(r, p)| {
                            let dep_vo = self.out_dir.join(LIB_DIR).join(r).join(p);
                            mtime(&dep_vo.with_extension("vo")).is_some_and(|dt| dt <= t)
                        })
                })
        })
    }

    /// The result: counts, the failures as notes, one binding per root with a file in it.
    fn summarise(self, mut c: Compiled) -> Compiled {
        c.compiled = self.compiled;
        c.reused = self.reused;
        c.failed = self.failures.len();
        for f in self.failures {
            c.notes.push(format!("not compiled: {f}"));
        }
        c.bindings = self
            .bound
            .keys()
            .map(|root| LoadPath {
                dir: Path::new(LIB_DIR).join(root),
                logical: root.clone(),
                recursive: false,
            })
            .collect();
        c.notes.push(format!(
            "compiled the project into {}/ ({} files compiled, {} reused, {} not compiled); bindings: {}",
            LIB_DIR,
            c.compiled,
            c.reused,
            c.failed,
            c.bindings
                .iter()
                .map(|b| format!("-Q {} {}", b.dir.display(), b.logical))
                .collect::<Vec<_>>()
                .join(" ")
        ));
        c
    }
}

/// One binding of a dataset, resolved for the checker: an existing directory inside the
/// dataset (canonical path) and its logical root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedBinding {
    pub dir: PathBuf,
    pub logical: String,
}

/// The load-path bindings the checker needs for dataset `dataset_dir` (from its `stats.json`).
///
/// A relative `dir` must resolve (links followed) to a directory inside the dataset, and its
/// root may not shadow the prover's own or an installed library (`installed(root)`); an
/// absolute `dir` is a library the prover has installed (the stdlib, a Debian package) and needs
/// no binding, so it is accepted only when `installed(root)` says so. Anything else is an error
/// naming the binding.
pub fn dataset_bindings(
    dataset_dir: &Path,
    installed: &dyn Fn(&str) -> bool,
) -> Result<Vec<ResolvedBinding>, String> {
    if !dataset_dir.join("stats.json").exists() {
        // Hand-made datasets (tests, converted data) have no stats and no bindings.
        return Ok(vec![]);
    }
    let stats = crate::schema::read_stats(dataset_dir)?;
    let base = dataset_dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dataset_dir.display()))?;
    let mut out = vec![];
    for lp in &stats.load_paths {
        let what = format!(
            "{}: binding {} = {}",
            dataset_dir.join("stats.json").display(),
            lp.dir.display(),
            lp.logical
        );
        let root = lp.logical.split('.').next().unwrap_or("");
        if lp.dir.is_absolute() {
            if installed(root) {
                continue;
            }
            return Err(format!(
                "{what}: points outside the dataset directory to a library the checker's Coq does not have installed (only the dataset's own lib/ may be bound; rebuild the dataset)"
            ));
        }
        if !lp.logical.split('.').all(prod_coq::is_identifier) {
            return Err(format!(
                "{what}: the logical root is not a dotted identifier"
            ));
        }
        if installed(root) {
            return Err(format!(
                "{what}: {root} is the prover's own or an installed library; binding it would shadow that library"
            ));
        }
        let dir = base
            .join(&lp.dir)
            .canonicalize()
            .map_err(|e| format!("{what}: {e}"))?;
        if !dir.starts_with(&base) || dir == base {
            return Err(format!(
                "{what}: points outside the dataset directory {}",
                base.display()
            ));
        }
        if !dir.is_dir() {
            return Err(format!("{what}: not a directory"));
        }
        out.push(ResolvedBinding {
            dir,
            logical: lp.logical.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_by_logical_root() {
        let coqlib = Path::new("/nonexistent-coqlib");
        assert_eq!(
            placement("MyLib.sub.Top", coqlib).unwrap(),
            ("MyLib".to_string(), PathBuf::from("sub/Top.v"))
        );
        assert!(placement("Top", coqlib).is_err());
        assert!(placement("Coq.Init.Foo", coqlib)
            .unwrap_err()
            .contains("shadow"));
        assert!(shadows_installed("Stdlib", coqlib));
        assert!(!shadows_installed("MyLib", coqlib));
    }

    #[test]
    fn dataset_bindings_stay_inside_the_dataset() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = tmp.path().join("ds");
        std::fs::create_dir_all(ds.join("lib/MyLib")).unwrap();
        std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
        let write = |lps: &str| {
            std::fs::write(ds.join("stats.json"), format!("{{\"load_paths\": {lps}}}")).unwrap()
        };
        let installed = |r: &str| r == "Coq";
        write(
            r#"[{"dir": "lib/MyLib", "logical": "MyLib", "recursive": false}, {"dir": "/usr/lib/ocaml/coq/theories", "logical": "Coq", "recursive": true}]"#,
        );
        let b = dataset_bindings(&ds, &installed).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].logical, "MyLib");
        assert!(b[0].dir.is_absolute() && b[0].dir.ends_with("lib/MyLib"));
        for bad in [
            r#"[{"dir": "../elsewhere", "logical": "MyLib", "recursive": false}]"#,
            r#"[{"dir": "/tmp", "logical": "MyLib", "recursive": false}]"#,
            r#"[{"dir": "lib/MyLib", "logical": "Coq", "recursive": false}]"#,
            r#"[{"dir": ".", "logical": "MyLib", "recursive": false}]"#,
            r#"[{"dir": "lib/Missing", "logical": "MyLib", "recursive": false}]"#,
        ] {
            write(bad);
            assert!(dataset_bindings(&ds, &installed).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("elsewhere"), ds.join("lib/Link")).unwrap();
            write(r#"[{"dir": "lib/Link", "logical": "MyLib", "recursive": false}]"#);
            let e = dataset_bindings(&ds, &installed).unwrap_err();
            assert!(e.contains("outside"), "{e}");
        }
    }
}

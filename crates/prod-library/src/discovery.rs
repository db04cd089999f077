//! Library discovery (deliverable 1): which `.v` files make up a library, their logical paths,
//! their `.glob` files, the Coq flags they need, and their dependencies (file and package level).
//!
//! Sources of truth, in order of preference:
//! * the Debian layout: the stdlib in `<coqlib>/theories` (logical root `Coq`), every other
//!   library in `<coqlib>/user-contrib/<Root>/…` (logical root `<Root>`); the Debian package that
//!   owns each file comes from dpkg's own file lists (`/var/lib/dpkg/info/libcoq-*.list`);
//! * a user's project: the `-R`/`-Q` lines and file names of its `_CoqProject`;
//! * dependencies: the `R… lib` lines of the `.glob` file (Coq's own resolution); where a file
//!   has no `.glob` (the Debian stdlib ships none), one `coqdep` run over the whole library.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Where a Coq installation keeps its libraries (`coqc -where`).
pub const DEFAULT_COQLIB: &str = "/usr/lib/ocaml/coq";

/// Libraries that live in their own "world": they need `-noinit -indices-matter` and cannot be
/// mixed with the stdlib world in one file.
pub const SEPARATE_WORLDS: [&str; 2] = ["HoTT", "UniMath"];

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("library {0:?} not found: expected `stdlib`, `all`, a libcoq-* package, a user-contrib root, or a directory")]
    NotFound(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: no .v files found")]
    Empty(String),
    /// The AFP (Isabelle path): not an unpacked AFP, an unknown entry, no theories.
    #[error("{0}")]
    Afp(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DiscoveryError + '_ {
    move |source| DiscoveryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A `-R`/`-Q` mapping from a directory to a logical root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadPath {
    pub dir: PathBuf,
    pub logical: String,
    /// `-R` (true) or `-Q` (false).
    #[serde(default)]
    pub recursive: bool,
}

/// One source file of a library.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceFile {
    pub path: PathBuf,
    /// Logical path, e.g. `Coq.Lists.List`.
    pub logical: String,
    pub glob: Option<PathBuf>,
    /// The package (unit of the dependency split): `stdlib`, a Debian package name, or a root.
    pub package: String,
    /// Extra `coqc` flags the file needs (`-noinit -indices-matter` for HoTT/UniMath).
    pub flags: Vec<String>,
}

/// A named set of source files with their load paths and dependencies.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Library {
    pub name: String,
    pub files: Vec<SourceFile>,
    pub load_paths: Vec<LoadPath>,
    /// `file_deps[i]`: indices of the library files that file `i` requires (direct).
    pub file_deps: Vec<Vec<usize>>,
    /// How each file's dependencies were found: "glob", "coqdep", or "none".
    pub dep_source: Vec<&'static str>,
    /// Package → packages it requires (inside this library only).
    pub package_deps: BTreeMap<String, BTreeSet<String>>,
    /// Human-readable notes: excluded roots and why, coqdep failures, …
    pub notes: Vec<String>,
}

/// What `--library` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibrarySpec {
    Stdlib,
    All,
    /// A Debian package (`libcoq-mathcomp-ssreflect`) or a user-contrib root (`Hammer`).
    Package(String),
    Path(PathBuf),
}

impl LibrarySpec {
    pub fn parse(s: &str) -> LibrarySpec {
        match s {
            "stdlib" | "libcoq-stdlib" => LibrarySpec::Stdlib,
            "all" => LibrarySpec::All,
            _ if s.contains('/') || Path::new(s).is_dir() => LibrarySpec::Path(PathBuf::from(s)),
            _ => LibrarySpec::Package(s.to_string()),
        }
    }
}

/// All `.v` files under `dir`, sorted (deterministic output).
fn v_files(dir: &Path) -> Result<Vec<PathBuf>, DiscoveryError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(io(&d))? {
            let entry = entry.map_err(io(&d))?;
            let p = entry.path();
            let ft = entry.file_type().map_err(io(&p))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && p.extension().is_some_and(|e| e == "v") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `dir/A/B/C.v` under load path (`dir`, `Root`) → `Root.A.B.C`.
fn logical_of(lp: &LoadPath, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(&lp.dir).ok()?.with_extension("");
    let mut parts: Vec<String> = if lp.logical.is_empty() {
        vec![]
    } else {
        vec![lp.logical.clone()]
    };
    for c in rel.components() {
        parts.push(c.as_os_str().to_str()?.to_string());
    }
    Some(parts.join("."))
}

fn with_glob(path: &Path) -> Option<PathBuf> {
    let g = path.with_extension("glob");
    g.is_file().then_some(g)
}

/// Which Debian package owns each file, from dpkg's file lists (exact and fast; no `dpkg -S`).
/// Every installed Debian `libcoq-*` package with the `.v` files dpkg lists for it (empty for
/// packages that ship only compiled files, such as `libcoq-interval`, or only plugins), sorted
/// by name. Empty where there is no dpkg database.
fn debian_sources() -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/var/lib/dpkg/info") else {
        return out;
    };
    for entry in rd.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pkg) = name.strip_suffix(".list") else {
            continue;
        };
        let pkg = pkg.split(':').next().unwrap_or(pkg);
        if !pkg.starts_with("libcoq-") {
            continue;
        }
        let files = out.entry(pkg.to_string()).or_default();
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            files.extend(
                text.lines()
                    .filter(|l| l.ends_with(".v"))
                    .map(PathBuf::from),
            );
        }
    }
    out
}

/// Every installed Debian `libcoq-*` package with the number of `.v` sources it ships, sorted.
pub fn installed_packages() -> Vec<(String, usize)> {
    debian_sources()
        .into_iter()
        .map(|(p, f)| (p, f.len()))
        .collect()
}

/// Source file → the Debian package that installed it.
fn debian_owners() -> HashMap<PathBuf, String> {
    let mut owners = HashMap::new();
    for (pkg, files) in debian_sources() {
        for f in files {
            owners.insert(f, pkg.clone());
        }
    }
    owners
}

fn add_dir(
    lib: &mut Library,
    lp: LoadPath,
    package: &str,
    flags: &[String],
    owners: &HashMap<PathBuf, String>,
) -> Result<(), DiscoveryError> {
    for path in v_files(&lp.dir)? {
        let Some(logical) = logical_of(&lp, &path) else {
            continue;
        };
        let package = owners
            .get(&path)
            .cloned()
            .unwrap_or_else(|| package.to_string());
        lib.files.push(SourceFile {
            glob: with_glob(&path),
            path,
            logical,
            package,
            flags: flags.to_vec(),
        });
    }
    lib.load_paths.push(lp);
    Ok(())
}

fn world_flags(root: &str) -> Vec<String> {
    if SEPARATE_WORLDS.contains(&root) {
        vec!["-noinit".into(), "-indices-matter".into()]
    } else {
        vec![]
    }
}

/// Logical paths of the stdlib's files (`Coq.Lists.List`, …); empty when it is not there.
pub fn stdlib_logical_paths(coqlib: &Path) -> std::collections::HashSet<String> {
    let lp = LoadPath {
        dir: coqlib.join("theories"),
        logical: "Coq".into(),
        recursive: true,
    };
    v_files(&lp.dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| logical_of(&lp, p))
        .collect()
}

/// Discover a library. `coqlib` is the Coq installation root (`coqc -where`).
pub fn discover(spec: &LibrarySpec, coqlib: &Path) -> Result<Library, DiscoveryError> {
    let theories = coqlib.join("theories");
    let contrib = coqlib.join("user-contrib");
    let mut lib = Library::default();
    let stdlib_lp = LoadPath {
        dir: theories.clone(),
        logical: "Coq".into(),
        recursive: true,
    };
    match spec {
        LibrarySpec::Stdlib => {
            lib.name = "stdlib".into();
            if !theories.is_dir() {
                return Err(DiscoveryError::NotFound("stdlib".into()));
            }
            add_dir(&mut lib, stdlib_lp, "stdlib", &[], &HashMap::new())?;
        }
        LibrarySpec::All => {
            lib.name = "all".into();
            add_everything(&mut lib, stdlib_lp, &contrib)?;
        }
        LibrarySpec::Package(name) => {
            lib.name = name.clone();
            if name.starts_with("libcoq-") {
                add_debian_package(&mut lib, name, &contrib)?;
            } else {
                let dir = contrib.join(name);
                if !dir.is_dir() {
                    return Err(DiscoveryError::NotFound(name.clone()));
                }
                let lp = LoadPath {
                    dir,
                    logical: name.clone(),
                    recursive: true,
                };
                add_dir(&mut lib, lp, name, &world_flags(name), &debian_owners())?;
            }
        }
        LibrarySpec::Path(dir) => add_project(&mut lib, dir)?,
    }
    if lib.files.is_empty() {
        return Err(DiscoveryError::Empty(lib.name));
    }
    Ok(lib)
}

/// `all`: the stdlib and every root under `user-contrib` that can share its world.
fn add_everything(
    lib: &mut Library,
    stdlib_lp: LoadPath,
    contrib: &Path,
) -> Result<(), DiscoveryError> {
    let owners = debian_owners();
    add_dir(lib, stdlib_lp, "stdlib", &[], &owners)?;
    let mut roots: Vec<_> = std::fs::read_dir(contrib)
        .map_err(io(contrib))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    roots.sort();
    for root in roots {
        if SEPARATE_WORLDS.contains(&root.as_str()) {
            lib.notes.push(format!(
                "excluded {root}: needs -noinit -indices-matter and cannot share a world with the stdlib; build it alone with --library {root}"
            ));
            continue;
        }
        let lp = LoadPath {
            dir: contrib.join(&root),
            logical: root.clone(),
            recursive: true,
        };
        add_dir(lib, lp, &root, &[], &owners)?;
    }
    Ok(())
}

/// A Debian package (`libcoq-…`): exactly the `.v` files dpkg lists for it.
fn add_debian_package(lib: &mut Library, name: &str, contrib: &Path) -> Result<(), DiscoveryError> {
    let owners = debian_owners();
    let mut files: Vec<&PathBuf> = owners
        .iter()
        .filter(|(_, p)| *p == name)
        .map(|(f, _)| f)
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DiscoveryError::NotFound(name.to_string()));
    }
    let mut roots = BTreeSet::new();
    for f in files {
        let Ok(rel) = f.strip_prefix(contrib) else {
            continue;
        };
        let Some(root) = rel.components().next().and_then(|c| c.as_os_str().to_str()) else {
            continue;
        };
        roots.insert(root.to_string());
        let lp = LoadPath {
            dir: contrib.join(root),
            logical: root.to_string(),
            recursive: true,
        };
        if let Some(logical) = logical_of(&lp, f) {
            lib.files.push(SourceFile {
                path: f.clone(),
                logical,
                glob: with_glob(f),
                package: name.to_string(),
                flags: world_flags(root),
            });
        }
    }
    for root in roots {
        lib.load_paths.push(LoadPath {
            dir: contrib.join(&root),
            logical: root,
            recursive: true,
        });
    }
    Ok(())
}

/// A user's project directory: its `_CoqProject` load paths, else the directory bound to its
/// own name.
fn add_project(lib: &mut Library, dir: &Path) -> Result<(), DiscoveryError> {
    if !dir.is_dir() {
        return Err(DiscoveryError::NotFound(dir.display().to_string()));
    }
    lib.name = dir
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "project".into());
    let project = dir.join("_CoqProject");
    let lps = if project.is_file() {
        let text = std::fs::read_to_string(&project).map_err(io(&project))?;
        parse_coq_project(&text, dir)
    } else {
        vec![]
    };
    let lps = if lps.is_empty() {
        vec![LoadPath {
            dir: dir.to_path_buf(),
            logical: lib.name.clone(),
            recursive: true,
        }]
    } else {
        lps
    };
    // Longest directory first, so nested load paths win.
    let mut sorted = lps.clone();
    sorted.sort_by_key(|lp| std::cmp::Reverse(lp.dir.components().count()));
    for path in v_files(dir)? {
        let Some(logical) = sorted.iter().find_map(|lp| logical_of(lp, &path)) else {
            continue;
        };
        lib.files.push(SourceFile {
            glob: with_glob(&path),
            path,
            logical,
            package: lib.name.clone(),
            flags: vec![],
        });
    }
    lib.load_paths = lps;
    Ok(())
}

/// The `-R dir Root` / `-Q dir Root` lines of a `_CoqProject` (other options are ignored).
pub fn parse_coq_project(text: &str, base: &Path) -> Vec<LoadPath> {
    let words: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(|l| l.split_whitespace())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        match words[i] {
            flag @ ("-R" | "-Q") if i + 2 < words.len() => {
                let logical = words[i + 2].trim_matches('"');
                out.push(LoadPath {
                    dir: base.join(words[i + 1].trim_matches('"')),
                    logical: if logical == "\"\"" {
                        String::new()
                    } else {
                        logical.to_string()
                    },
                    recursive: flag == "-R",
                });
                i += 3;
            }
            _ => i += 1,
        }
    }
    out
}

/// Fill `file_deps`, `dep_source` and `package_deps`: `.glob` `R… lib` lines where a glob exists,
/// one `coqdep` call for the others (textual `Require` resolution is not attempted: `coqdep`
/// implements Coq's own suffix lookup). Dependencies on files outside the library are dropped.
pub fn resolve_dependencies(lib: &mut Library, coqlib: &Path) {
    let n = lib.files.len();
    lib.file_deps = vec![Vec::new(); n];
    lib.dep_source = vec!["none"; n];
    let by_logical: HashMap<&str, usize> = lib
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.logical.as_str(), i))
        .collect();
    let mut missing = Vec::new();
    for (i, f) in lib.files.iter().enumerate() {
        let text = f
            .glob
            .as_ref()
            .and_then(|g| std::fs::read_to_string(g).ok());
        match text {
            Some(text) => {
                let (g, _) = crate::glob::parse(&text);
                lib.file_deps[i] = g
                    .requires
                    .iter()
                    .filter_map(|r| by_logical.get(r.as_str()).copied())
                    .collect();
                lib.dep_source[i] = "glob";
            }
            None => missing.push(i),
        }
    }
    // The stdlib is compiled seeing only itself (`-boot -R theories Coq`); giving coqdep the
    // user-contrib roots too would resolve a stdlib `Require Import Tactics` to `Hammer.Tactics`.
    let theories = coqlib.join("theories");
    let (in_stdlib, others): (Vec<usize>, Vec<usize>) = missing
        .iter()
        .partition(|&&i| lib.files[i].path.starts_with(&theories));
    for (group, stdlib_only) in [(in_stdlib, true), (others, false)] {
        if group.is_empty() {
            continue;
        }
        match run_coqdep(lib, &group, coqlib, stdlib_only) {
            Ok(deps) => {
                for (i, d) in deps {
                    lib.file_deps[i] = d;
                    lib.dep_source[i] = "coqdep";
                }
            }
            Err(e) => lib.notes.push(format!(
                "coqdep failed ({e}); {} files have no dependency information",
                group.len()
            )),
        }
    }
    add_prelude_edges(lib);
    for d in &mut lib.file_deps {
        d.sort_unstable();
        d.dedup();
    }
    lib.package_deps.clear();
    for (i, deps) in lib.file_deps.iter().enumerate() {
        let p = &lib.files[i].package;
        let entry = lib.package_deps.entry(p.clone()).or_default();
        for &j in deps {
            if lib.files[j].package != *p {
                entry.insert(lib.files[j].package.clone());
            }
        }
    }
}

/// Coq loads `Coq.Init.Prelude` before every file not compiled with `-noinit` (the stdlib's
/// `Init` files are): an edge no `Require` shows, so a test split cannot take a file the prelude
/// re-exports (`Coq.Init.Peano`) while every training file loads it.
fn add_prelude_edges(lib: &mut Library) {
    let Some(prelude) = lib
        .files
        .iter()
        .position(|f| f.logical == "Coq.Init.Prelude")
    else {
        return;
    };
    for (i, f) in lib.files.iter().enumerate() {
        let noinit = f.logical.starts_with("Coq.Init.") || f.flags.iter().any(|x| x == "-noinit");
        if !noinit && i != prelude {
            lib.file_deps[i].push(prelude);
        }
    }
}

fn run_coqdep(
    lib: &Library,
    which: &[usize],
    coqlib: &Path,
    stdlib_only: bool,
) -> Result<Vec<(usize, Vec<usize>)>, String> {
    let mut cmd = Command::new("coqdep");
    cmd.arg("-boot");
    let theories = coqlib.join("theories");
    let mut lps: Vec<LoadPath> = lib
        .load_paths
        .iter()
        .filter(|lp| !stdlib_only || lp.dir == theories)
        .cloned()
        .collect();
    if !lps.iter().any(|lp| lp.dir == theories) {
        lps.push(LoadPath {
            dir: theories,
            logical: "Coq".into(),
            recursive: true,
        });
    }
    for lp in &lps {
        cmd.arg(if lp.recursive { "-R" } else { "-Q" })
            .arg(&lp.dir)
            .arg(if lp.logical.is_empty() {
                "\"\""
            } else {
                &lp.logical
            });
    }
    for &i in which {
        cmd.arg(&lib.files[i].path);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run coqdep: {e}"))?;
    if !out.status.success() && out.stdout.is_empty() {
        return Err(format!(
            "coqdep exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("")
        ));
    }
    let by_path: HashMap<PathBuf, usize> = lib
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.path.with_extension(""), i))
        .collect();
    Ok(parse_coqdep(
        &String::from_utf8_lossy(&out.stdout),
        &by_path,
    ))
}

/// Parse `coqdep` output lines `A.vo A.glob …: A.v B.vo C.vo`, mapping paths (without extension)
/// to file indices.
pub fn parse_coqdep(text: &str, by_path: &HashMap<PathBuf, usize>) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((targets, deps)) = line.split_once(": ") else {
            continue;
        };
        let Some(target) = targets
            .split_whitespace()
            .next()
            .and_then(|t| t.strip_suffix(".vo"))
        else {
            continue;
        };
        let Some(&i) = by_path.get(Path::new(target)) else {
            continue;
        };
        let d = deps
            .split_whitespace()
            .filter_map(|t| t.strip_suffix(".vo"))
            .filter_map(|t| by_path.get(Path::new(t)).copied())
            .filter(|&j| j != i)
            .collect();
        out.push((i, d));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coq_project_load_paths() {
        let lps = parse_coq_project(
            "# comment\n-R theories MyLib\n-Q src \"\"\n-arg -w\ntheories/A.v\n",
            Path::new("/p"),
        );
        assert_eq!(lps.len(), 2);
        assert_eq!(
            lps[0],
            LoadPath {
                dir: "/p/theories".into(),
                logical: "MyLib".into(),
                recursive: true
            }
        );
        assert!(!lps[1].recursive);
    }

    #[test]
    fn logical_paths() {
        let lp = LoadPath {
            dir: "/c/theories".into(),
            logical: "Coq".into(),
            recursive: true,
        };
        assert_eq!(
            logical_of(&lp, Path::new("/c/theories/Lists/List.v")).as_deref(),
            Some("Coq.Lists.List")
        );
        assert_eq!(logical_of(&lp, Path::new("/elsewhere/X.v")), None);
    }

    #[test]
    fn coqdep_lines() {
        let mut by = HashMap::new();
        by.insert(PathBuf::from("/t/A"), 0);
        by.insert(PathBuf::from("/t/B"), 1);
        let out = parse_coqdep("/t/B.vo /t/B.glob /t/B.v.beautified /t/B.required_vo: /t/B.v /t/A.vo /x/Y.vo\n/t/B.vio: /t/B.v /t/A.vio\n", &by);
        assert_eq!(out, vec![(1, vec![0])]);
    }

    #[test]
    fn spec_parsing() {
        assert_eq!(LibrarySpec::parse("stdlib"), LibrarySpec::Stdlib);
        assert_eq!(LibrarySpec::parse("all"), LibrarySpec::All);
        assert_eq!(
            LibrarySpec::parse("libcoq-hammer"),
            LibrarySpec::Package("libcoq-hammer".into())
        );
        assert_eq!(LibrarySpec::parse("./x"), LibrarySpec::Path("./x".into()));
    }
}

//! Tests over the real AFP (2022-12-06): the paper's holdout split, the dependency graph, dates,
//! and lexing + segmenting every theory.
//!
//! The AFP is read from `$PROD_AFP_DIR` (a directory holding `thys/` and `metadata/`), else from
//! the cache `/tmp/afp-2022-12-06`, else unpacked there from `$PROD_AFP_TARBALL` or
//! `../shared/data/afp-2022-12-06.tar.xz` beside the repository. Without any of them the tests say
//! so and pass without checking anything (the data is not part of the repository), except under
//! `CI=true`, where they fail ([`prod_test_support::require`]).
//!
//! `afp_full_sweep` reads all 7,298 theories (about 10 s in the test profile on 2 cores); see its
//! figures with `cargo test -p prod-isar --release --test isar afp::afp_full_sweep -- --nocapture`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use prod_isar::afp::{entries_after, entry_date, Afp, KeywordResolver, HOLDOUT_ENTRIES};
use prod_isar::{segment_theory, KeywordTable};

const CACHE: &str = "/tmp/afp-2022-12-06";
/// The project's shared data lives beside the repository (`../shared`).
const TARBALL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/data/afp-2022-12-06.tar.xz"
);

/// The AFP's directory, or `None` (see [`prod_test_support::require`]).
fn afp_root() -> Option<PathBuf> {
    let root = find_afp_root();
    prod_test_support::require(
        root.is_some(),
        "the AFP is not readable here (see the file header)",
    );
    root
}

fn find_afp_root() -> Option<PathBuf> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        if let Some(d) = std::env::var_os("PROD_AFP_DIR") {
            return Some(PathBuf::from(d));
        }
        let cache = Path::new(CACHE);
        if cache.join("thys/ROOTS").is_file() {
            return Some(cache.to_path_buf());
        }
        let tarball = std::env::var_os("PROD_AFP_TARBALL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(TARBALL));
        if !tarball.is_file() {
            eprintln!(
                "no AFP here (set PROD_AFP_DIR, or provide {} or {})",
                CACHE,
                tarball.display()
            );
            return None;
        }
        // Unpack next to the cache and rename, so an interrupted unpack is never used.
        let partial = PathBuf::from(format!("{CACHE}.partial-{}", std::process::id()));
        std::fs::create_dir_all(&partial).ok()?;
        eprintln!("unpacking {} to {CACHE} (takes a while)", tarball.display());
        let ok = std::process::Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&partial)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("could not unpack {}", tarball.display());
            let _ = std::fs::remove_dir_all(&partial);
            return None;
        }
        // The tarball holds `thys/` and `metadata/` at its top, or inside one directory.
        let top = if partial.join("thys").is_dir() {
            partial.clone()
        } else {
            std::fs::read_dir(&partial)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.join("thys").is_dir())?
        };
        if std::fs::rename(&top, cache).is_err() && !cache.join("thys/ROOTS").is_file() {
            return None;
        }
        let _ = std::fs::remove_dir_all(&partial);
        Some(cache.to_path_buf())
    })
    .clone()
}

fn afp() -> Option<&'static Afp> {
    static AFP: OnceLock<Option<Afp>> = OnceLock::new();
    AFP.get_or_init(|| {
        let root = afp_root()?;
        let t = Instant::now();
        let afp = Afp::load(&root.join("thys")).expect("AFP thys readable");
        eprintln!(
            "AFP loaded: {} entries, {} sessions, {} load problems, {:.2?}",
            afp.entries.len(),
            afp.session_entry.len(),
            afp.errors.len(),
            t.elapsed()
        );
        Some(afp)
    })
    .as_ref()
}

#[derive(Default, Debug)]
struct Counts {
    theories: usize,
    bytes: usize,
    commands: usize,
    blocks: usize,
    /// lemma / theorem / corollary / proposition blocks (isar-tools' "statements").
    statements: usize,
    one_step: usize,
    unclosed: usize,
    inferred: usize,
    errors: usize,
}

/// Segments every theory of `entries`; returns per-entry counts and error lines (errors in files
/// no session loads are counted apart: the AFP holds a few stale, broken files).
fn sweep(afp: &Afp, entries: &[&str]) -> (BTreeMap<String, Counts>, Vec<String>, Vec<String>) {
    let mut resolver = KeywordResolver::new(afp, KeywordTable::hol());
    let mut per = BTreeMap::new();
    let mut errors = Vec::new();
    let mut orphan_errors = Vec::new();
    for name in entries {
        let entry = afp.entries.get(*name).expect("entry exists");
        let checked = afp.session_theory_files(name);
        let mut c = Counts::default();
        for f in &entry.theory_files {
            let text = std::fs::read_to_string(f).expect("theory is UTF-8 text");
            let table = resolver.table_for(f, &text);
            let th = segment_theory(&text, &table);
            let joined: String = th.spans.iter().map(|s| s.text(&text)).collect();
            assert!(joined == text, "{}: spans are not lossless", f.display());
            c.theories += 1;
            c.bytes += text.len();
            c.commands += th.spans.iter().filter(|s| s.name.is_some()).count();
            c.blocks += th.blocks.len();
            for b in &th.blocks {
                let kw = th.spans[b.statement].name.as_deref().unwrap_or("");
                if matches!(kw, "lemma" | "theorem" | "corollary" | "proposition") {
                    c.statements += 1;
                    if b.proof_steps().len() == 1 {
                        c.one_step += 1;
                    }
                }
                c.unclosed += usize::from(!b.closed);
                c.inferred += usize::from(!b.declared_goal);
            }
            c.errors += th.errors.len();
            for e in &th.errors {
                let line = format!("{}: {}", f.display(), e.message);
                if checked.contains(f) {
                    errors.push(line);
                } else {
                    orphan_errors.push(line);
                }
            }
        }
        per.insert(name.to_string(), c);
    }
    (per, errors, orphan_errors)
}

fn total(per: &BTreeMap<String, Counts>) -> Counts {
    let mut t = Counts::default();
    for c in per.values() {
        t.theories += c.theories;
        t.bytes += c.bytes;
        t.commands += c.commands;
        t.blocks += c.blocks;
        t.statements += c.statements;
        t.one_step += c.one_step;
        t.unclosed += c.unclosed;
        t.inferred += c.inferred;
        t.errors += c.errors;
    }
    t
}

#[test]
fn holdout_entries_exist_and_nothing_depends_on_them() {
    let Some(afp) = afp() else { return };
    let mut theories = 0;
    for e in HOLDOUT_ENTRIES {
        let entry = afp
            .entries
            .get(e)
            .unwrap_or_else(|| panic!("holdout entry {e} is not in the AFP"));
        theories += entry.theory_files.len();
        let users = afp.dependents(e);
        assert!(users.is_empty(), "{e} is used by {users:?}");
    }
    eprintln!("holdout: 36 entries, {theories} theory files");
    // The issue's own count, measured independently with a Python script.
    assert_eq!(theories, 293);
    let union: std::collections::BTreeSet<String> = HOLDOUT_ENTRIES
        .iter()
        .flat_map(|e| afp.transitive_deps(e))
        .collect();
    eprintln!(
        "holdout: {} AFP entries in their transitive dependencies",
        union.len()
    );
}

#[test]
fn dependency_graph_is_acyclic_and_ordered() {
    let Some(afp) = afp() else { return };
    let (order, cycles) = afp.topological_order();
    assert_eq!(order.len(), afp.entries.len());
    let pos: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, e)| (e.as_str(), i))
        .collect();
    let same_cycle = |a: &str, b: &str| {
        cycles
            .iter()
            .any(|c| c.iter().any(|x| x == a) && c.iter().any(|x| x == b))
    };
    for (e, ds) in &afp.deps {
        for d in ds {
            assert!(
                pos[d.as_str()] < pos[e.as_str()] || same_cycle(d, e),
                "{d} must come before {e}"
            );
        }
    }
    eprintln!("entry-level dependency cycles (through extra sessions): {cycles:?}");
    // No holdout entry is on a cycle.
    for c in &cycles {
        assert!(
            !c.iter().any(|e| HOLDOUT_ENTRIES.contains(&e.as_str())),
            "{c:?}"
        );
    }
    let with_deps = afp.deps.values().filter(|d| !d.is_empty()).count();
    eprintln!("entries with at least one AFP dependency: {with_deps}");
    // Spot checks from the entries' ROOT files.
    assert!(afp.deps["XML"].contains("Certification_Monads"));
    assert!(afp.deps["Registers"].contains("Complex_Bounded_Operators"));
    assert!(afp.deps["LP_Duality"].contains("Linear_Inequalities"));
}

#[test]
fn date_split_reads_metadata() {
    let Some(root) = afp_root() else { return };
    let Some(afp) = afp() else { return };
    let meta = root.join("metadata/entries");
    for e in HOLDOUT_ENTRIES {
        let d = entry_date(&meta, e).expect("holdout entry has a date");
        assert!(d.as_str() <= "2022-12-06", "{e} dated {d}");
    }
    let (after, errs) = entries_after(&meta, afp.entries.keys(), "2022-06-01").expect("valid date");
    assert!(errs.is_empty(), "{errs:?}");
    assert!(!after.is_empty());
    for e in &after {
        assert!(entry_date(&meta, e).expect("date").as_str() > "2022-06-01");
    }
    eprintln!("entries dated after 2022-06-01: {}", after.len());
    assert!(entries_after(&meta, ["XML"], "June 2022").is_err());
}

#[test]
fn holdout_theories_segment_cleanly() {
    let Some(afp) = afp() else { return };
    let t = Instant::now();
    let (per, errors, orphan_errors) = sweep(afp, &HOLDOUT_ENTRIES);
    let elapsed = t.elapsed();
    for (e, c) in &per {
        eprintln!(
            "{e:<34} theories {:>3} commands {:>6} blocks {:>5} statements {:>5} one-step {:>4} unclosed {}",
            c.theories, c.commands, c.blocks, c.statements, c.one_step, c.unclosed
        );
    }
    let tot = total(&per);
    eprintln!(
        "holdout total: {tot:?} in {elapsed:.2?} (isar-tools: 7,925 statements, 2,418 one-step)"
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(orphan_errors.is_empty(), "{}", orphan_errors.join("\n"));
    assert_eq!(tot.unclosed, 0);
}

#[test]
fn afp_full_sweep() {
    let Some(afp) = afp() else { return };
    let names: Vec<&str> = afp.entries.keys().map(String::as_str).collect();
    let t = Instant::now();
    let (per, errors, orphan_errors) = sweep(afp, &names);
    let elapsed = t.elapsed();
    let tot = total(&per);
    eprintln!("AFP total: {tot:?} in {elapsed:.2?}");
    eprintln!(
        "errors in files no session loads ({}):",
        orphan_errors.len()
    );
    for e in &orphan_errors {
        eprintln!("  {e}");
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert_eq!(
        tot.theories,
        afp.entries
            .values()
            .map(|e| e.theory_files.len())
            .sum::<usize>()
    );
}

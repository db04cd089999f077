//! The Isabelle path end to end: a tiny AFP-like tree of our own (`tests/data/afp_mini`: five
//! entries, ROOTs, metadata dates, a stale theory no session loads) through
//! `prod_library::dataset::build_from` with the three AFP splits; then the real AFP (the
//! holdout split of a few entries), skipped with a message when it is not on this machine.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use prod_core::ConditionalProof;
use prod_library::dataset::{self, read_examples, read_sources, DatasetConfig, Example, Stats};
use prod_library::isar::{AfpOptions, AfpSource, AfpSplit, EntrySelection};

const SPLIT_FILES: [&str; 8] = [
    "train", "val", "test", "rl", "sft", "train_wl", "val_wl", "test_wl",
];

fn mini() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/afp_mini")
}

fn build(root: &Path, split: AfpSplit, entries: EntrySelection, out: &Path) -> Stats {
    let src = AfpSource::load(root, AfpOptions { split, entries }).expect("load AFP");
    let cfg = DatasetConfig {
        threads: 2,
        context_bytes: 4096,
        ..Default::default()
    };
    dataset::build_from(&src, out, &cfg, &|_, _| {}, std::time::Instant::now()).expect("build")
}

/// Every line of every split file has exactly the documented fields (the Coq schema), and the
/// invariants every dataset keeps.
fn check_dataset(dir: &Path, stats: &Stats) -> Vec<Example> {
    let schema: BTreeSet<String> = {
        let e = read_examples(&dir.join("train.jsonl"))
            .unwrap()
            .into_iter()
            .next()
            .expect("a train example");
        serde_json::to_value(&e)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let sources = read_sources(dir).unwrap();
    let mut all = Vec::new();
    for split in SPLIT_FILES {
        let path = dir.join(format!("{split}.jsonl"));
        for (n, line) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let keys: BTreeSet<String> = v.as_object().unwrap().keys().cloned().collect();
            assert_eq!(keys, schema, "{split}.jsonl:{}", n + 1);
            let e: Example = serde_json::from_value(v).unwrap();
            for text in [&e.conditional_proof, &e.conditional_proof_original] {
                let cp = ConditionalProof::parse_with(text, &prod_isar::IsarLanguage)
                    .unwrap_or_else(|err| panic!("{}: {err}", e.id));
                assert!(cp.t0_consistent(), "{}", e.id);
            }
            assert!(
                e.statement.starts_with("lemma")
                    || e.statement.starts_with("theorem")
                    || e.statement.starts_with("corollary")
                    || e.statement.starts_with("proposition"),
                "{}",
                e.statement
            );
            for l in &e.proposed_lemmas {
                assert!(
                    l.starts_with("lemma")
                        || l.starts_with("theorem")
                        || l.starts_with("corollary")
                        || l.starts_with("proposition"),
                    "{l}"
                );
            }
            let src = &sources[&e.logical_path];
            assert!(src.body_start > 0, "{}", e.logical_path);
            let full = e.full_context(src).unwrap();
            assert!(
                full.starts_with("theory ") && src.source[..src.body_start].ends_with("begin"),
                "{}",
                e.id
            );
            assert!(full.ends_with(&e.context), "{}", e.id);
            let checker = e.checker_context(src).unwrap();
            assert!(
                !checker.contains("imports") || !checker.trim_start().starts_with("theory"),
                "{}",
                e.id
            );
            assert!(full.ends_with(&checker));
            assert!(!e.imports.is_empty());
            assert_eq!(e.library, "afp");
            if split == "test" || split == "test_wl" {
                assert!(e.in_tree);
                assert!(stats.test_units.contains(&e.package), "{}", e.id);
            } else {
                assert!(
                    !stats.test_units.contains(&e.package),
                    "{} is from a test entry",
                    e.id
                );
                assert!(
                    !stats.excluded_units.contains(&e.package),
                    "{} is from an excluded entry",
                    e.id
                );
            }
            all.push(e);
        }
    }
    assert_eq!(stats.prover, "isabelle");
    assert_eq!(stats.split_unit, "entry");
    assert_eq!(stats.unclosed_blocks, 0);
    all
}

#[test]
fn mini_afp_holdout_split() {
    let out = tempfile::tempdir().unwrap();
    let stats = build(&mini(), AfpSplit::Holdout, EntrySelection::All, out.path());
    // XML is one of the paper's 36 holdout entries; the other 35 are not in this tree.
    assert_eq!(stats.test_units, ["XML"]);
    // The stale theory is in no session: 5 session theories.
    assert_eq!(stats.files, 5);
    assert_eq!(stats.blocks, 9);
    assert_eq!(stats.goal_blocks, 9);
    assert_eq!(stats.blocks_per_test_unit["XML"], 2);
    let all = check_dataset(out.path(), &stats);
    let test: Vec<&Example> = all
        .iter()
        .filter(|e| e.split == "test" && e.variant == "wo_lemmas")
        .collect();
    // Both XML theorems are in T_tree: tag_main (root, proposes tag_helper), tag_helper.
    assert_eq!(test.len(), 2);
    let main = test.iter().find(|e| e.name == "tag_main").unwrap();
    assert_eq!(main.proposed_names, ["tag_helper"]);
    assert_eq!(main.depth, 1);
    assert_eq!(main.imports, ["Base.Base_Thy"]);
    // `by (metis …)` became `sledgehammer`; twice_0 is another entry's fact: never proposed.
    assert!(
        main.conditional_proof
            .contains("using twice_0 sledgehammer"),
        "{}",
        main.conditional_proof
    );
    assert!(main
        .conditional_proof_original
        .contains("by (metis add_0_right)"));
    // Augmented SFT copies use `sorry` for the moved lemmas (IsarLanguage).
    let aug: Vec<&Example> = all.iter().filter(|e| e.variant == "augmented").collect();
    assert!(!aug.is_empty());
    for a in aug {
        assert!(a.context_extra.contains("sorry"), "{}", a.context_extra);
        assert!(a.conditional_proof.starts_with("<no_invoke>"));
    }
    assert!(!all.iter().any(|e| e.file.ends_with("Stale.thy")));
}

#[test]
fn mini_afp_date_split_leaves_out_dependants() {
    let out = tempfile::tempdir().unwrap();
    let stats = build(
        &mini(),
        AfpSplit::After("2022-06-01".into()),
        EntrySelection::All,
        out.path(),
    );
    assert_eq!(stats.test_units, ["Late"]);
    // Uses_Late needs Late: its examples would see a test entry, so they go nowhere.
    assert_eq!(stats.excluded_units, ["Uses_Late"]);
    assert_eq!(stats.examples_excluded, 1);
    let all = check_dataset(out.path(), &stats);
    assert!(!all.iter().any(|e| e.package == "Uses_Late"));
    assert!(all.iter().any(|e| e.package == "XML" && e.split != "test"));
}

#[test]
fn mini_afp_dependency_split_and_entry_selection() {
    let out = tempfile::tempdir().unwrap();
    let stats = build(&mini(), AfpSplit::Deps, EntrySelection::All, out.path());
    // Sinks: XML, Uses_Base, Uses_Late (nothing depends on them); ceil(10% of 3) = 1, then
    // more until MIN_TEST_THEOREMS T_tree theorems: the mini AFP has fewer, so every sink with one.
    assert!(!stats.test_units.is_empty());
    for u in &stats.test_units {
        assert!(
            ["XML", "Uses_Base", "Uses_Late"].contains(&u.as_str()),
            "{:?}",
            stats.test_units
        );
    }
    assert!(stats.examples_per_split["test"] > 0);
    check_dataset(out.path(), &stats);
    // The first two entries in dependency order, then a named selection.
    let src = AfpSource::load(
        &mini(),
        AfpOptions {
            split: AfpSplit::Holdout,
            entries: EntrySelection::First(2),
        },
    )
    .unwrap();
    assert_eq!(src.entries.len(), 2);
    let src = AfpSource::load(
        &mini(),
        AfpOptions {
            split: AfpSplit::Holdout,
            entries: EntrySelection::Named(vec!["XML".into(), "Base".into()]),
        },
    )
    .unwrap();
    assert_eq!(src.entries, ["Base", "XML"]);
    assert!(AfpSource::load(
        &mini(),
        AfpOptions {
            split: AfpSplit::Holdout,
            entries: EntrySelection::Named(vec!["Nope".into()])
        }
    )
    .is_err());
    assert!(
        AfpSource::load(Path::new(env!("CARGO_MANIFEST_DIR")), AfpOptions::default()).is_err(),
        "not an AFP"
    );
}

/// The real AFP 2022-12-06: `$PROD_AFP_DIR`, `/tmp/afp-2022-12-06`, or the entries below unpacked
/// from `../shared/data/afp-2022-12-06.tar.xz` beside the repository (or `$PROD_AFP_TARBALL`).
fn real_afp(entries: &[&str], tmp: &Path) -> Option<PathBuf> {
    // With PROD_AFP_DIR set, only that directory counts (set it to a missing path to test the tarball).
    let dir = std::env::var("PROD_AFP_DIR").unwrap_or_else(|_| "/tmp/afp-2022-12-06".to_string());
    if Path::new(&dir).join("thys/ROOTS").is_file() {
        return Some(PathBuf::from(dir));
    }
    let tarball = std::env::var("PROD_AFP_TARBALL").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/afp-2022-12-06.tar.xz"
        )
        .into()
    });
    let missing = "no AFP here (set PROD_AFP_DIR to an unpacked AFP or PROD_AFP_TARBALL to afp-2022-12-06.tar.xz)";
    if !prod_test_support::require(Path::new(&tarball).is_file(), missing) {
        return None;
    }
    let mut cmd = std::process::Command::new("tar");
    // The release tarball holds `thys/` and `metadata/` at its top.
    cmd.arg("-xf")
        .arg(&tarball)
        .arg("-C")
        .arg(tmp)
        .arg("thys/ROOTS")
        .arg("metadata/entries");
    for e in entries {
        cmd.arg(format!("thys/{e}"));
    }
    let status = cmd.status().ok()?;
    assert!(status.success(), "tar failed");
    Some(tmp.to_path_buf())
}

#[test]
fn real_afp_holdout_entries() {
    // Four holdout entries that import only distribution sessions.
    let entries = ["XML", "FFT", "Knot_Theory", "Bondy"];
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = real_afp(&entries, tmp.path()) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let stats = build(
        &root,
        AfpSplit::Holdout,
        EntrySelection::Named(entries.iter().map(|e| e.to_string()).collect()),
        out.path(),
    );
    let names: HashSet<&str> = stats.test_units.iter().map(String::as_str).collect();
    assert_eq!(names, entries.iter().copied().collect());
    assert_eq!(stats.unclosed_blocks, 0);
    assert_eq!(stats.files_failed, 0);
    assert!(stats.blocks >= 250, "{stats:?}");
    assert!(stats.examples_per_split["test"] > 100, "{stats:?}");
    assert_eq!(stats.examples_per_split["train"], 0);
    assert!(stats.replaced_steps > 0 && stats.peeled > 0);
    eprintln!(
        "real AFP, {entries:?}: blocks {} test {} per entry {:?}",
        stats.blocks, stats.examples_per_split["test"], stats.blocks_per_test_unit
    );
    // Test files only: check_dataset needs a train example for the schema; read test instead.
    let sources = read_sources(out.path()).unwrap();
    for e in read_examples(&out.path().join("test.jsonl")).unwrap() {
        let cp =
            ConditionalProof::parse_with(&e.conditional_proof, &prod_isar::IsarLanguage).unwrap();
        assert!(cp.t0_consistent());
        let src = &sources[&e.logical_path];
        let header = &src.source[..src.body_start];
        assert!(
            header.contains("theory") && header.ends_with("begin"),
            "{}",
            e.id
        );
        assert!(e.full_context(src).unwrap().len() >= src.body_start);
        assert!(!e.statement.starts_with("private"));
    }
}

#[test]
fn output_does_not_depend_on_the_thread_count() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, threads) in [(a.path(), 1), (b.path(), 3)] {
        let src = AfpSource::load(&mini(), AfpOptions::default()).unwrap();
        let cfg = DatasetConfig {
            threads,
            val_fraction: 0.3,
            ..Default::default()
        };
        dataset::build_from(&src, dir, &cfg, &|_, _| {}, std::time::Instant::now()).unwrap();
    }
    for name in SPLIT_FILES.iter().chain(&["sources", "skipped"]) {
        let f = format!("{name}.jsonl");
        assert_eq!(
            std::fs::read(a.path().join(&f)).unwrap(),
            std::fs::read(b.path().join(&f)).unwrap(),
            "{f}"
        );
    }
}

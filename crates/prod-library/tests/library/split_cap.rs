//! The per-file cap on the test split, end to end on a synthetic project whose one large file
//! would otherwise dominate its test split. Skips when `coqdep` is absent.

use std::collections::HashSet;

use prod_library::dataset::{self, read_examples, DatasetConfig, SplitUnit};
use prod_library::discovery::LibrarySpec;

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

/// `n` independent lemmas named `{prefix}_{i}`.
fn lemmas(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("Lemma {prefix}_{i} : {i} = {i}.\nProof. reflexivity. Qed.\n"))
        .collect()
}

/// A project of independent files (every one a dependency sink): `Big` with 100 theorems and
/// ten files with 3 each.
fn project(dir: &std::path::Path) -> std::path::PathBuf {
    let root = dir.join("proj");
    write(&root, "_CoqProject", "-R theories Cap\n");
    write(&root, "theories/Big.v", &lemmas("big", 100));
    for k in 0..10 {
        write(
            &root,
            &format!("theories/Small{k}.v"),
            &lemmas(&format!("small{k}"), 3),
        );
    }
    root
}

fn build(root: &std::path::Path, out: &std::path::Path, file_cap: f64) -> dataset::Stats {
    let cfg = DatasetConfig {
        unit: SplitUnit::File,
        test_fraction: 0.1,
        val_fraction: 0.0,
        // Every file is needed to reach 35 theorems once Big is capped.
        test_min_theorems: 35,
        test_file_cap: file_cap,
        seed: 1,
        threads: 2,
        ..Default::default()
    };
    dataset::build(
        &LibrarySpec::Path(root.to_path_buf()),
        out,
        &cfg,
        Some(&prod_coq::CoqLanguage),
        &|_, _| {},
    )
    .unwrap()
}

fn has_coqdep() -> bool {
    std::process::Command::new("coqdep")
        .arg("-h")
        .output()
        .is_ok()
}

#[test]
fn one_large_file_holds_at_most_the_cap_and_its_other_theorems_go_nowhere() {
    if !prod_test_support::require(has_coqdep(), "coqdep is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = project(dir.path());
    let out = dir.path().join("out");
    let stats = build(&root, &out, 0.15);
    // Largest c with c ≤ 0.15 (c + 10 · min(3, c)) is 5: 5 + 30 = 35 theorems, Big 5/35.
    assert_eq!(stats.test_units.len(), 11, "{stats:?}");
    assert_eq!(stats.test_file_cap, Some(5));
    assert_eq!(stats.test_theorems, 35);
    assert_eq!(stats.test_dropped_by_cap, 95);
    assert_eq!(stats.test_max_file, "Cap.Big");
    assert!(
        stats.test_max_file_share <= 0.15,
        "{}",
        stats.test_max_file_share
    );
    assert_eq!(stats.examples_per_split["test"], 35);
    let test = read_examples(&out.join("test.jsonl")).unwrap();
    let test_wl = read_examples(&out.join("test_wl.jsonl")).unwrap();
    assert_eq!(
        test.iter().filter(|e| e.logical_path == "Cap.Big").count(),
        5
    );
    let ids: HashSet<&str> = test.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        test_wl.iter().map(|e| e.id.as_str()).collect(),
        "test and test_wl hold the same theorems"
    );
    // Big is a test unit: the 95 theorems beyond the cap are in no split.
    for f in ["train", "val", "sft", "rl", "train_wl", "val_wl"] {
        let lines = read_examples(&out.join(format!("{f}.jsonl"))).unwrap();
        assert!(lines.iter().all(|e| e.logical_path != "Cap.Big"), "{f}");
    }
    // The same build again keeps the same five (seeded).
    let again = dir.path().join("again");
    build(&root, &again, 0.15);
    let test2 = read_examples(&again.join("test.jsonl")).unwrap();
    assert_eq!(
        test.iter().map(|e| &e.id).collect::<Vec<_>>(),
        test2.iter().map(|e| &e.id).collect::<Vec<_>>()
    );
}

#[test]
fn without_the_cap_the_large_file_dominates() {
    if !prod_test_support::require(has_coqdep(), "coqdep is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = project(dir.path());
    let out = dir.path().join("out");
    let stats = build(&root, &out, 1.0);
    assert_eq!(stats.test_file_cap, None);
    assert_eq!(stats.test_dropped_by_cap, 0);
    // Unit draws stop at 35 theorems: whichever files were drawn, each keeps all of its own.
    assert!(stats.test_theorems >= 35);
    assert_eq!(stats.test_theorems, stats.examples_per_split["test"]);
    if stats.test_units.iter().any(|u| u == "Cap.Big") {
        assert!(stats.test_max_file_share > 0.5 && stats.test_max_file == "Cap.Big");
    }
}

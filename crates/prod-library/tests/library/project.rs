//! A user's own project (a directory with a `_CoqProject`): discovery, `coqdep` dependencies,
//! the dependency split and the output files, end to end. Skips when `coqdep` is absent.

use prod_library::dataset::{self, read_examples, read_sources, DatasetConfig, SplitUnit};
use prod_library::discovery::{self, LibrarySpec};

fn write(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn project_with_coq_project_builds_and_splits_by_dependencies() {
    let here = std::process::Command::new("coqdep")
        .arg("-h")
        .output()
        .is_ok();
    if !prod_test_support::require(here, "coqdep is not installed") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    write(&root, "_CoqProject", "-R theories My\n");
    write(
        &root,
        "theories/Base.v",
        "Lemma base_l : True.\nProof. exact I. Qed.\n",
    );
    // Mid requires Base; Top1 and Top2 require Mid: the sinks are Top1 and Top2.
    write(&root, "theories/Mid.v", "Require Import My.Base.\nLemma mid_a : True.\nProof. exact I. Qed.\nLemma mid_b : True /\\ True.\nProof. split; apply mid_a. Qed.\n");
    write(
        &root,
        "theories/sub/Top1.v",
        "Require Import My.Mid.\nLemma t1 : True.\nProof. exact base_l. Qed.\n",
    );
    write(&root, "theories/sub/Top2.v", "From My Require Import Mid.\nLemma t2a : 1 = 1.\nProof. lia. Qed.\nLemma t2b : 1 = 1 /\\ True.\nProof. split. apply t2a. exact I. Qed.\n");

    let coqlib = std::path::PathBuf::from(discovery::DEFAULT_COQLIB);
    let mut lib = discovery::discover(&LibrarySpec::Path(root.clone()), &coqlib).unwrap();
    let logical: Vec<&str> = lib.files.iter().map(|f| f.logical.as_str()).collect();
    assert_eq!(logical, ["My.Base", "My.Mid", "My.sub.Top1", "My.sub.Top2"]);
    discovery::resolve_dependencies(&mut lib, &coqlib);
    assert_eq!(
        lib.file_deps,
        vec![vec![], vec![0], vec![1], vec![1]],
        "{:?}",
        lib.notes
    );
    assert!(lib.dep_source.iter().all(|s| *s == "coqdep"));

    let out = dir.path().join("out");
    let cfg = DatasetConfig {
        coqlib,
        unit: SplitUnit::File,
        test_fraction: 0.5,
        val_fraction: 0.0,
        seed: 3,
        ..Default::default()
    };
    let stats = dataset::build(
        &LibrarySpec::Path(root),
        &out,
        &cfg,
        Some(&prod_coq::CoqLanguage),
        &|_, _| {},
    )
    .unwrap();
    // Both sinks: ceil(10% of 2) = 1, then the other one for MIN_TEST_THEOREMS.
    assert_eq!(stats.test_units, ["My.sub.Top1", "My.sub.Top2"]);
    let train = read_examples(&out.join("train.jsonl")).unwrap();
    assert!(train
        .iter()
        .all(|e| !stats.test_units.contains(&e.logical_path)));
    assert!(train.iter().any(|e| e.logical_path == "My.Base"));
    // Mid: mid_b uses mid_a, both peeled; mid_b proposes mid_a.
    let mid_b = train.iter().find(|e| e.name == "mid_b").unwrap();
    assert_eq!(
        mid_b.conditional_proof,
        "<use_invoke> <invoke> Lemma mid_a : True. </invoke> split; apply mid_a."
    );
    assert_eq!(mid_b.depth, 1);
    // The augmented copy of mid_b: the lemma is admitted in the context, nothing is proposed.
    let sft = read_examples(&out.join("sft.jsonl")).unwrap();
    let aug = sft
        .iter()
        .find(|e| e.variant == "augmented" && e.name == "mid_b")
        .unwrap();
    assert!(
        aug.context.ends_with("\nLemma mid_a : True.\nAdmitted.\n"),
        "{:?}",
        aug.context
    );
    assert!(aug.conditional_proof.starts_with("<no_invoke>"));
    // Full contexts come back from sources.jsonl.
    let sources = read_sources(&out).unwrap();
    assert_eq!(
        aug.full_context(&sources["My.Mid"]).unwrap(),
        format!("Require Import My.Base.\n\n{}", aug.context_extra)
    );
    // Test examples are T_tree theorems of the test files only.
    let test = read_examples(&out.join("test.jsonl")).unwrap();
    for e in &test {
        assert!(stats.test_units.contains(&e.logical_path));
        assert!(e.in_tree);
    }
    // lia is hammer-replaceable.
    let t2a = test.iter().find(|e| e.name == "t2a").unwrap();
    assert_eq!(t2a.conditional_proof, "<no_invoke> hammer.");
    assert_eq!(t2a.conditional_proof_original, "<no_invoke> lia.");
}

#[test]
fn unknown_library_is_a_clear_error() {
    let e = discovery::discover(
        &LibrarySpec::Package("no-such-lib".into()),
        std::path::Path::new(discovery::DEFAULT_COQLIB),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no-such-lib"));
}

fn coqc(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("coqc")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `tests/data/project_r`: `-R src MyLib`, unqualified imports of project files (alone, mixed
/// with stdlib names, partially qualified, `Require Export`). The dataset's texts import them
/// as `From MyLib Require …`, and every reduced file compiles where MyLib is bound with `-Q`
/// only (as an installed root is), which the original files do not.
#[test]
fn project_imports_are_qualified_and_load_from_the_binding_alone() {
    let here = coqc(std::path::Path::new("."), &["-v"]).status.code() == Some(0);
    if !prod_test_support::require(here, "coqc is not installed") {
        return;
    }
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/project_r");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project_r");
    std::fs::create_dir_all(&root).unwrap();
    prod_test_support::copy_tree(&fixture, &root);
    let out = tmp.path().join("out");
    let cfg = DatasetConfig {
        unit: SplitUnit::File,
        ..Default::default()
    };
    let spec = LibrarySpec::Path(root.clone());
    let stats =
        dataset::build(&spec, &out, &cfg, Some(&prod_coq::CoqLanguage), &|_, _| {}).unwrap();
    assert_eq!(stats.skipped_by_reason.get("import_unresolved"), None);
    assert_eq!(stats.load_paths.len(), 1);
    assert_eq!(stats.load_paths[0].logical, "MyLib");
    // Only the sink with T_tree theorems can be the test unit (Other requires Top).
    assert_eq!(stats.test_units, ["MyLib.sub.Other"]);
    let sources = read_sources(&out).unwrap();
    let requires = |l: &str| -> Vec<String> {
        sources[l]
            .reduced
            .lines()
            .filter(|x| x.contains("Require"))
            .map(String::from)
            .collect()
    };
    assert_eq!(
        requires("MyLib.Mid"),
        [
            "From MyLib Require Import Base.",
            "Require Import Arith Lia."
        ]
    );
    assert_eq!(
        requires("MyLib.sub.Top"),
        [
            "From MyLib Require Import Mid. Require Import Arith. From MyLib Require Import Base.",
            "Require Import Lia."
        ]
    );
    assert_eq!(
        requires("MyLib.sub.Other"),
        [
            "From MyLib Require Export Base.",
            "From MyLib Require Import sub.Top."
        ]
    );
    // Compile the project as its build does, then each reduced file with `-Q` only.
    for f in [
        "src/Base.v",
        "src/Mid.v",
        "src/sub/Top.v",
        "src/sub/Other.v",
    ] {
        let o = coqc(&root, &["-R", "src", "MyLib", f]);
        assert!(
            o.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for (logical, src) in &sources {
        let file = tmp.path().join(format!("{}.v", logical.replace('.', "_")));
        std::fs::write(&file, &src.reduced).unwrap();
        let o = coqc(&root, &["-Q", "src", "MyLib", file.to_str().unwrap()]);
        assert!(
            o.status.success(),
            "{logical}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = coqc(&root, &["-Q", "src", "MyLib", "src/Mid.v"]);
    assert!(
        !o.status.success(),
        "the unqualified original should not load with -Q alone"
    );

    // The dataset carries the project compiled, bound relative to the dataset directory, and
    // every reduced file compiles against that copy alone.
    assert_eq!(
        stats.load_paths,
        [prod_library::discovery::LoadPath {
            dir: "lib/MyLib".into(),
            logical: "MyLib".into(),
            recursive: false
        }]
    );
    for rel in ["Base", "Mid", "sub/Top", "sub/Other"] {
        assert!(out.join(format!("lib/MyLib/{rel}.vo")).is_file(), "{rel}");
    }
    let lib = out.join("lib/MyLib");
    for (logical, src) in &sources {
        let file = tmp.path().join(format!("{}.v", logical.replace('.', "_")));
        std::fs::write(&file, &src.reduced).unwrap();
        let o = coqc(
            tmp.path(),
            &["-Q", lib.to_str().unwrap(), "MyLib", file.to_str().unwrap()],
        );
        assert!(
            o.status.success(),
            "{logical}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // A rebuild reuses every .vo and removes what the build did not write.
    std::fs::write(lib.join("Stray.vo"), "x").unwrap();
    let again =
        dataset::build(&spec, &out, &cfg, Some(&prod_coq::CoqLanguage), &|_, _| {}).unwrap();
    assert!(
        again
            .notes
            .iter()
            .any(|n| n.contains("0 files compiled, 4 reused, 0 not compiled")),
        "{:?}",
        again.notes
    );
    assert!(!lib.join("Stray.vo").exists());
    // A file that does not compile is reported, and so is the file that requires it.
    std::fs::write(
        root.join("src/sub/Top.v"),
        "Lemma broken : False.\nProof. exact I. Qed.\n",
    )
    .unwrap();
    let broken =
        dataset::build(&spec, &out, &cfg, Some(&prod_coq::CoqLanguage), &|_, _| {}).unwrap();
    let notes = broken.notes.join("\n");
    assert!(
        notes.contains("not compiled: MyLib.sub.Top: coqc failed"),
        "{notes}"
    );
    assert!(
        notes.contains("not compiled: MyLib.sub.Other: requires MyLib.sub.Top"),
        "{notes}"
    );
    assert!(!lib.join("sub/Top.vo").exists());
}

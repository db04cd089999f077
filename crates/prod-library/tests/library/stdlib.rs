//! The real stdlib (`libcoq-stdlib`, installed with `coq`): build the dataset and check its
//! invariants; optionally (ignored test) compile every reduced file with `coqc`.
//! Both skip with a message when the stdlib sources are absent (fail under `CI=true`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use prod_core::ConditionalProof;
use prod_library::dataset::{self, read_examples, DatasetConfig};
use prod_library::discovery::{self, LibrarySpec};

fn coqlib() -> Option<PathBuf> {
    let p = PathBuf::from(discovery::DEFAULT_COQLIB);
    let missing = format!(
        "no Coq stdlib sources under {} (install libcoq-stdlib)",
        p.display()
    );
    prod_test_support::require(p.join("theories/Init/Prelude.v").is_file(), &missing).then_some(p)
}

#[test]
fn stdlib_dataset_invariants() {
    let Some(coqlib) = coqlib() else { return };
    let dir = tempfile::tempdir().unwrap();
    let cfg = DatasetConfig {
        coqlib: coqlib.clone(),
        threads: 2,
        ..Default::default()
    };
    let stats =
        dataset::build(&LibrarySpec::Stdlib, dir.path(), &cfg, None, &|_, _| {}).expect("build");
    assert!(stats.files > 500, "{stats:?}");
    assert!(stats.blocks > 10_000);
    assert!(stats.examples_per_split["train"] > 5_000);
    assert!(stats.examples_per_split["test"] > 0);
    assert!(stats.peeled > 0 && stats.peeled_share < 1.0);

    // Every skipped block has a reason; the reasons add up in stats.
    let skipped = std::fs::read_to_string(dir.path().join("skipped.jsonl")).unwrap();
    let mut n = 0;
    for line in skipped.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            v["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{line}"
        );
        n += 1;
    }
    assert_eq!(n, stats.skipped_by_reason.values().sum::<usize>());

    // Every conditional proof parses, round-trips, and its t0 agrees with its lemmas.
    let mut ids = HashSet::new();
    let mut test_files = HashSet::new();
    let mut example_files = HashSet::new();
    let mut sources: HashMap<String, String> = HashMap::new();
    let records = dataset::read_sources(dir.path()).unwrap();
    for split in [
        "train", "val", "test", "rl", "sft", "train_wl", "val_wl", "test_wl",
    ] {
        for e in read_examples(&dir.path().join(format!("{split}.jsonl"))).unwrap() {
            for text in [&e.conditional_proof, &e.conditional_proof_original] {
                let cp = ConditionalProof::parse_with(text, &prod_coq::CoqLanguage)
                    .unwrap_or_else(|err| panic!("{}: {err}", e.id));
                assert_eq!(&cp.to_string(), text);
                assert!(cp.t0_consistent(), "{}", e.id);
            }
            let cp =
                ConditionalProof::parse_with(&e.conditional_proof, &prod_coq::CoqLanguage).unwrap();
            assert_eq!(cp.lemmas().collect::<Vec<_>>(), e.proposed_lemmas);
            // Proposed lemmas are never in the context (they were peeled).
            // (Statements that occur twice in the file, e.g. in two modules, cannot be told apart here.)
            let source = sources
                .entry(e.file.clone())
                .or_insert_with(|| std::fs::read_to_string(&e.file).unwrap());
            let full = e
                .full_context(&records[&e.logical_path])
                .expect("context offsets lie in the file");
            assert!(
                full.ends_with(&e.context),
                "{}: inline context is not the tail of the full one",
                e.id
            );
            for lemma in &e.proposed_lemmas {
                if source.matches(lemma.as_str()).count() == 1 {
                    assert!(
                        !full.contains(lemma.as_str()),
                        "{}: {lemma} in context",
                        e.id
                    );
                }
            }
            if split == "test" {
                assert!(e.in_tree, "test keeps only T_tree theorems");
                test_files.insert(e.logical_path.clone());
            }
            if split == "train" {
                assert!(ids.insert(e.id.clone()), "duplicate id {}", e.id);
            }
            example_files.insert(e.logical_path.clone());
        }
    }

    // No training example comes from, or from a file that depends on, a test file (files
    // without examples may: a test unit only has to be invisible to the examples).
    let mut lib = discovery::discover(&LibrarySpec::Stdlib, &coqlib).unwrap();
    discovery::resolve_dependencies(&mut lib, &coqlib);
    let idx: HashMap<&str, usize> = lib
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.logical.as_str(), i))
        .collect();
    let test_idx: Vec<usize> = stats.test_units.iter().map(|u| idx[u.as_str()]).collect();
    for d in prod_library::split::dependants_of(&lib.file_deps, &test_idx) {
        let file = &lib.files[d].logical;
        assert!(
            !example_files.contains(file),
            "{file} has examples and requires a test unit"
        );
    }
    assert!(stats.examples_per_split["test"] >= prod_library::split::MIN_TEST_THEOREMS);
    // No file holds more than the per-file cap's share of the test theorems.
    assert_eq!(stats.test_theorems, stats.examples_per_split["test"]);
    let test_lines = read_examples(&dir.path().join("test.jsonl")).unwrap();
    let mut per_file: HashMap<&str, usize> = HashMap::new();
    for e in &test_lines {
        *per_file.entry(e.logical_path.as_str()).or_default() += 1;
    }
    let max = per_file.values().copied().max().unwrap_or(0);
    assert!(
        max as f64 <= prod_library::split::TEST_FILE_CAP * stats.test_theorems as f64,
        "{per_file:?}"
    );
    assert!((stats.test_max_file_share - max as f64 / stats.test_theorems as f64).abs() < 1e-9);
    assert!(
        stats.blocks_per_test_unit.values().all(|&b| b > 0),
        "a test unit without theorems: {:?}",
        stats.blocks_per_test_unit
    );
    for e in read_examples(&dir.path().join("train.jsonl")).unwrap() {
        assert!(
            !stats.test_units.contains(&e.logical_path),
            "{} is from a test file",
            e.id
        );
    }
    assert!(test_files.iter().all(|f| stats.test_units.contains(f)));
}

/// Compile every stdlib file with its peeled pairs removed (a copy under a fresh logical root).
/// Long (minutes): `cargo test -p prod-library --release -- --ignored reduced --nocapture`.
/// `PROD_REDUCED_LIMIT=N` checks only the first N files; `PROD_REDUCED_ONLY=a,b` only matching ones.
#[test]
#[ignore]
fn stdlib_reduced_files_compile() {
    let Some(coqlib) = coqlib() else { return };
    // `PROD_REDUCED_LIBRARY=libcoq-mathcomp-ssreflect` checks another installed library instead.
    let spec = std::env::var("PROD_REDUCED_LIBRARY")
        .map(|s| LibrarySpec::parse(&s))
        .unwrap_or(LibrarySpec::Stdlib);
    let lib = discovery::discover(&spec, &coqlib).unwrap();
    let limit: usize = std::env::var("PROD_REDUCED_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    // `PROD_REDUCED_ONLY=List,Znumtheory` restricts the run to files whose logical path contains one of them.
    let only: Vec<String> = std::env::var("PROD_REDUCED_ONLY")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let tmp = tempfile::tempdir().unwrap();
    let jobs: Vec<(usize, PathBuf, PathBuf)> = lib
        .files
        .iter()
        .enumerate()
        // Init files are compiled with -boot -noinit and define the prelude itself.
        .filter(|(_, f)| !f.logical.starts_with("Coq.Init."))
        .filter(|(_, f)| only.is_empty() || only.iter().any(|o| f.logical.contains(o.as_str())))
        .take(limit)
        .map(|(i, f)| (i, f.path.clone(), tmp.path().join(format!("R{i}.v"))))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let compile = |path: &Path| -> Result<(), String> {
        let out = std::process::Command::new("coqc")
            .arg("-q")
            .arg("-Q")
            .arg(tmp.path())
            .arg("Reduced")
            .arg(path)
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(6)
                .collect::<Vec<_>>()
                .join(" | "))
        }
    };
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((_, src, dst)) = jobs.get(k) else {
                    break;
                };
                let text = std::fs::read_to_string(src).unwrap();
                let glob = std::fs::read_to_string(src.with_extension("glob"))
                    .ok()
                    .map(|g| prod_library::glob::parse(&g).0);
                let cf = prod_library::coq::segment(&text, glob.as_ref());
                let peeling = prod_library::peel(&cf.segments);
                if peeling.peeled_count() == 0 {
                    continue;
                }
                std::fs::write(
                    dst,
                    prod_library::examples::reduced_source(&cf.segments, &peeling),
                )
                .unwrap();
                if let Err(e) = compile(dst) {
                    // A file that does not compile as a copy even unreduced is not our failure.
                    std::fs::write(dst, &text).unwrap();
                    let original = compile(dst).is_ok();
                    failures
                        .lock()
                        .unwrap()
                        .push((src.display().to_string(), original, e));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let ours: Vec<_> = failures.iter().filter(|f| f.1).collect();
    for f in &failures {
        eprintln!("{} (original copy compiles: {}): {}", f.0, f.1, f.2);
    }
    eprintln!(
        "checked {} files; {} reduced files fail, {} of them compile unreduced",
        jobs.len(),
        failures.len(),
        ours.len()
    );
    assert!(
        ours.is_empty(),
        "{} reduced files fail where the original compiles",
        ours.len()
    );
}

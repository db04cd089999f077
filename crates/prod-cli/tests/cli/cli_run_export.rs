//! `prod run export`: a real `prod eval` run (the `project_r` fixture's dataset, the real Coq, a
//! scripted policy that answers in turn with a correct proof, a proof proposing a lemma and a
//! wrong one) exported node by node, checked against the run's own summary; bad input exits 2.
//! A failed `prod eval` start leaves nothing behind.
//! Under `CI=true` a missing Coq fails instead of skipping.
#![cfg(feature = "policy")]

use super::common::prod;
use crate::common;

use std::path::Path;
use std::process::Command;

macro_rules! prod {
    ($($a:expr),* $(,)?) => { prod(&[$(std::ffi::OsStr::new($a)),*]) };
}

const ANSWERS: [&str; 3] = [
    "<no_invoke> rewrite twice_0. repeat split.",
    "<use_invoke> <invoke> Lemma aux : twice 0 = 0. </invoke> rewrite aux. repeat split.",
    "<no_invoke> exact I.",
];

/// The `project_r` dataset in `tmp/ds`, a model folder (a tokenizer: the fake server samples)
/// in `tmp/model`, and the fake inference server; `None` without Coq.
fn setup(
    tmp: &Path,
) -> Option<(
    std::path::PathBuf,
    std::path::PathBuf,
    prod_remote::testing::Fake,
)> {
    let here = Command::new("coqc").arg("-v").output().is_ok();
    if !prod_test_support::require(here, "coqc is not installed") {
        return None;
    }
    let project = tmp.join("project_r");
    prod_test_support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../prod-library/tests/data/project_r"),
        &project,
    );
    let data = tmp.join("ds");
    let (code, _, err) = prod!(
        "dataset",
        "build",
        "--library",
        &project,
        "--out",
        &data,
        "--unit",
        "file"
    );
    assert_eq!(code, 0, "{err}");
    let (fake, model) = common::scripted_policy(tmp, &ANSWERS);
    Some((data, model, fake))
}

#[test]
fn every_node_of_an_eval_run_is_exported_with_its_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((data, model, fake)) = setup(tmp.path()) else {
        return;
    };
    let run = tmp.path().join("run");
    let (code, stdout, err) = prod!(
        "eval",
        "--model",
        &model,
        "--dataset",
        &data,
        "--split",
        "test",
        "--k",
        "1",
        "--samples",
        "3",
        "--depth",
        "1",
        "--workers",
        "1",
        "--no-hammer",
        "--remote-url",
        &fake.url,
        "--out",
        &run,
        "--json",
    );
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let outcomes = &summary["evaluations"][0]["node_outcomes"];

    let (code, exported, err) = prod!("run", "export", &run);
    assert_eq!(code, 0, "{err}");
    let all: Vec<serde_json::Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The run's canaries are exported too, in their own phase, apart from the evaluation.
    let (lines, canaries): (Vec<_>, Vec<_>) = all.into_iter().partition(|l| l["phase"] == "eval");
    assert!(!canaries.is_empty() && canaries.iter().all(|l| l["phase"] == "canary"));
    assert_eq!(
        lines.len() as u64,
        outcomes["nodes"].as_u64().unwrap(),
        "{outcomes}"
    );
    let count =
        |f: &dyn Fn(&serde_json::Value) -> bool| lines.iter().filter(|l| f(l)).count() as u64;
    assert_eq!(
        count(&|l| l["local"] == "proved"),
        outcomes["proved"].as_u64().unwrap()
    );
    assert_eq!(
        count(&|l| l["local"] == "failed"),
        outcomes["failed"].as_u64().unwrap()
    );
    assert_eq!(
        count(&|l| l["global"] == "correct"),
        outcomes["globally_correct"].as_u64().unwrap()
    );
    assert!(count(&|l| l["local"] == "proved") > 0, "{exported}");
    // A new store records truncation: every node says whether the token limit cut it, and the
    // cut ones that were not proved are the report's own class.
    assert!(
        lines.iter().all(|l| l["truncated"].is_boolean()),
        "{exported}"
    );
    assert_eq!(
        count(&|l| l["truncated"] == true && l["local"] != "proved"),
        outcomes["truncated"].as_u64().unwrap(),
        "{outcomes}"
    );
    assert!(
        count(&|l| l["depth"] == 1) > 0,
        "a proposed lemma became a node: {exported}"
    );
    let test_ids = std::fs::read_to_string(data.join("test.jsonl")).unwrap();
    for l in &lines {
        assert_eq!(
            (l["round"].as_u64(), l["phase"].as_str()),
            (Some(0), Some("eval")),
            "{l}"
        );
        assert!(
            ["sampled", "ground_truth"].contains(&l["origin"].as_str().unwrap()),
            "{l}"
        );
        if l["depth"] == 0 {
            let id = l["theorem_id"].as_str().unwrap();
            assert!(test_ids.contains(&format!("\"id\":\"{id}\"")), "{id}");
        }
        match l["local"].as_str() {
            Some("failed") => {
                assert!(l["local_step"].is_u64(), "{l}");
                assert!(!l["local_message"].as_str().unwrap().is_empty(), "{l}");
            }
            Some("proved") => {
                assert!(l["local_seconds"].is_f64(), "{l}");
                assert!(l["local_universe_constraints"].is_array(), "{l}");
            }
            _ => {}
        }
        if l["global"] == "correct" {
            assert_eq!(l["local"], "proved", "{l}");
            assert!(l["height"].is_u64(), "{l}");
        }
    }

    // --out writes the same lines, through a file renamed into place.
    let file = tmp.path().join("nodes.jsonl");
    let (code, stdout, err) = prod!("run", "export", &run, "--out", &file);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        err.contains(&format!("exported {} nodes", lines.len() + canaries.len())),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), exported);
    assert!(!tmp.path().join("nodes.jsonl.tmp").exists());

    // Bad input: no run store there (nothing created), an unknown format.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, _, err) = prod!("run", "export", &empty);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no run store"), "{err}");
    assert!(!empty.join("run.sqlite").exists());
    let (code, _, err) = prod!("run", "export", &run, "--format", "parquet");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give --out FILE"), "{err}");

    // Parquet: the same rows and columns, typed (an always-null column keeps its type).
    let pq = tmp.path().join("nodes.parquet");
    let (code, _, err) = prod!("run", "export", &run, "--format", "parquet", "--out", &pq);
    assert_eq!(code, 0, "{err}");
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(std::fs::File::open(&pq).unwrap()).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr_ptr();
    let fields = schema.root_schema().get_fields();
    let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
    let keys: Vec<&str> = lines[0]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(names, keys);
    let seconds = fields.iter().find(|f| f.name() == "local_seconds").unwrap();
    assert_eq!(seconds.get_physical_type(), parquet::basic::Type::DOUBLE);
    let rows = reader.metadata().file_metadata().num_rows() as usize;
    assert_eq!(rows, lines.len() + canaries.len());
}

/// A start that fails before any work (here a load path that is not a directory) leaves no
/// run store behind, so the corrected command runs; a directory that held a run keeps it.
#[test]
fn a_failed_eval_start_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((data, model, fake)) = setup(tmp.path()) else {
        return;
    };
    let eval = |run: &Path, extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = [
            "eval",
            "--model",
            model.to_str().unwrap(),
            "--dataset",
            data.to_str().unwrap(),
            "--split",
            "test",
            "--k",
            "1",
            "--samples",
            "1",
            "--depth",
            "1",
            "--workers",
            "1",
            // About starting a run, not about the baseline (nor the user's cache it writes).
            "--no-hammer-baseline",
            "--remote-url",
            &fake.url,
            "--json",
            "--out",
            run.to_str().unwrap(),
        ]
        .iter()
        .map(Into::into)
        .collect();
        args.extend(extra.iter().map(Into::into));
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        prod(&refs)
    };
    let bad = ["--load-path", "/nonexistent-prod-dir=Foo"];
    let run = tmp.path().join("run");
    let (code, _, err) = eval(&run, &bad);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a directory"), "{err}");
    assert!(!run.exists(), "a failed start left {}", run.display());
    // In a directory that was there, only what the start created goes.
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("notes.txt"), "mine").unwrap();
    let (code, _, err) = eval(&run, &bad);
    assert_eq!(code, 2, "{err}");
    let left: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, ["notes.txt"]);
    // The corrected command runs.
    let (code, _, err) = eval(&run, &[]);
    assert_eq!(code, 0, "{err}");
    // A run that did work is kept when a later start fails; a changed setting is named.
    let (code, _, err) = eval(&run, &bad);
    assert_eq!(code, 2, "{err}");
    assert!(run.join("run.sqlite").is_file());
    let (code, _, err) = eval(&run, &["--max-new-tokens", "7"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("max_new_tokens: stored 256, now 7"), "{err}");
    let (code, _, err) = eval(&run, &[]);
    assert_eq!(code, 0, "{err}");
}

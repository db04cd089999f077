//! A user's own project through the whole pipeline: `prod-library`'s fixture
//! `tests/data/project_r` (`-R src MyLib`, several files, unqualified imports) goes through
//! `dataset build` (the project compiled into the dataset's `lib/`, bound in stats.json) →
//! `dataset validate` (every example proved, none lost to infra) → `prod check` of one of its
//! examples → `prod eval` with a scripted policy (a fake inference server answering every
//! theorem with one fixed proof). Bindings that leave the dataset or shadow Coq are refused
//! (exit 2); a dataset without its bindings reports each context that does not load once per
//! file, with Coq's reason. A dataset folder is written atomically (a rebuild killed at any
//! moment leaves the old dataset or a refused folder; a file cut short is named) and loads in
//! Hugging Face `datasets` with one call (`PROD_PYTHON`). Under `CI=true` a missing Coq (or
//! `datasets`) fails instead of skipping.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn prod(args: &[&str]) -> (i32, String, String) {
    prod_with_input(args, None)
}

/// Run `prod ARGS` (progress lines every 50 ms: stderr is a pipe here).
fn prod_with_input(args: &[&str], input: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(args)
        .env("PROD_PROGRESS_SECS", "0.05")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prod runs");
    if let Some(text) = input {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Is Coq here? Under `CI=true` its absence is a failure, not a skip.
fn coq_installed() -> bool {
    let here = Command::new("coqc").arg("-v").output().is_ok()
        && Command::new("coqtop").arg("-v").output().is_ok();
    prod_test_support::require(here, "coqc/coqtop are not installed")
}

/// `tmp/project_r` (a copy of the fixture) built into `tmp/ds`.
fn build_project(tmp: &Path) -> std::path::PathBuf {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../prod-library/tests/data/project_r");
    let project = tmp.join("project_r");
    prod_test_support::copy_tree(&fixture, &project);
    let dir = tmp.join("ds");
    let (code, stdout, err) = prod(&[
        "dataset",
        "build",
        "--library",
        project.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--unit",
        "file",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("compiled the project into lib/ (4 files compiled"),
        "{stdout}"
    );
    dir
}

fn stats(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap()
}

fn set_load_paths(dir: &Path, load_paths: serde_json::Value) {
    let mut s = stats(dir);
    s["load_paths"] = load_paths;
    std::fs::write(dir.join("stats.json"), s.to_string()).unwrap();
}

fn validate(dir: &Path, split: &str) -> (i32, serde_json::Value, String) {
    validate_with(dir, split, &[])
}

/// `prod dataset validate DIR --split SPLIT --sample 50 --json EXTRA…`: exit code, counts, stderr.
fn validate_with(dir: &Path, split: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec![
        "dataset",
        "validate",
        dir.to_str().unwrap(),
        "--split",
        split,
        "--sample",
        "50",
        "--json",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, err) = prod(&args);
    let counts = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (code, counts, err)
}

#[test]
fn project_goes_through_build_validate_and_check_with_its_own_bindings() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let sources = std::fs::read_to_string(dir.join("sources.jsonl")).unwrap();
    assert!(
        sources.contains("From MyLib Require Import Base."),
        "{sources}"
    );
    assert_eq!(
        stats(&dir)["load_paths"],
        serde_json::json!([{"dir": "lib/MyLib", "logical": "MyLib", "recursive": false}])
    );
    assert!(dir.join("lib/MyLib/sub/Top.vo").is_file());

    // Every example of the project is proved in its own context, with the dataset's binding.
    let t = Instant::now();
    for split in ["train", "test"] {
        let (code, counts, err) = validate(&dir, split);
        assert_eq!(code, 0, "{err}");
        let checked = counts["checked"].as_u64().unwrap();
        assert!(checked >= 1, "{counts}");
        assert_eq!(
            counts["proved"].as_u64().unwrap(),
            checked,
            "{counts} {err}"
        );
        assert_eq!(counts["infra"], 0, "{counts} {err}");
        assert!(
            err.contains(&format!("validate: {checked}/{checked} nodes (100%)")),
            "{err}"
        );
    }
    assert!(
        t.elapsed() < Duration::from_secs(120),
        "took {:?}",
        t.elapsed()
    );

    // Ground-truth trees (`twice_mid_S` through `twice_mid`, `top_c` through `top_b`, …):
    // checked node by node, assembled and compiled cold, every one proved.
    let mut trees = 0;
    for split in ["train", "val", "test"] {
        let (code, counts, err) = validate_with(&dir, split, &["--trees"]);
        assert_eq!(code, 0, "{err}");
        let checked = counts["checked"].as_u64().unwrap();
        assert_eq!(counts["proved"].as_u64(), Some(checked), "{counts} {err}");
        trees += checked;
    }
    assert!(trees >= 2, "{trees} trees");

    // `prod check` of one example (full context from sources.jsonl), given the dataset.
    let train: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let top_a = train.iter().find(|e| e["name"] == "top_a").unwrap();
    let record: serde_json::Value = sources
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["logical_path"] == top_a["logical_path"])
        .unwrap();
    let end = top_a["context_end"].as_u64().unwrap() as usize;
    let context = format!(
        "{}{}",
        &record["reduced"].as_str().unwrap()[..end],
        top_a["context_extra"].as_str().unwrap()
    );
    let node = serde_json::json!({
        "id": "top_a", "context": context, "statement": top_a["statement"],
        "proof": top_a["conditional_proof_original"],
    });
    let input = format!("{node}\n");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["check", "-", "--json", "--workers", "1", "--no-hammer"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        prod_with_input(&a, Some(&input))
    };
    let (code, stdout, err) = run(&["--dataset", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["verdict"], "proved", "{line}");
    // The same with the binding given explicitly.
    let explicit = format!("{}=MyLib", dir.join("lib/MyLib").display());
    let (code, stdout, err) = run(&["--load-path", &explicit]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("\"verdict\":\"proved\""), "{stdout}");
    // Without any binding the context does not load.
    let (code, stdout, _) = run(&[]);
    assert_eq!(code, 0);
    assert!(stdout.contains("\"verdict\":\"infra\""), "{stdout}");
    assert!(stdout.contains("MyLib"), "{stdout}");
    // A binding may not shadow Coq's own library.
    let shadow = format!("{}=Coq", dir.join("lib/MyLib").display());
    let (code, _, err) = run(&["--load-path", &shadow]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("shadow"), "{err}");
}

#[test]
fn bindings_outside_the_dataset_or_shadowing_coq_are_refused() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let elsewhere = tmp.path().join("elsewhere");
    prod_test_support::copy_tree(&dir.join("lib/MyLib"), &elsewhere);
    for (lp, why) in [
        (
            serde_json::json!([{"dir": "../elsewhere", "logical": "MyLib"}]),
            "outside",
        ),
        (
            serde_json::json!([{"dir": elsewhere, "logical": "MyLib"}]),
            "outside",
        ),
        (
            serde_json::json!([{"dir": "lib/MyLib", "logical": "Coq"}]),
            "shadow",
        ),
    ] {
        set_load_paths(&dir, lp.clone());
        let (code, _, err) = validate(&dir, "train");
        assert_eq!(code, 2, "{lp}: {err}");
        assert!(err.contains(why), "{lp}: {err}");
    }

    // Without its binding, each context that does not load is reported once per file.
    set_load_paths(&dir, serde_json::json!([]));
    let (code, counts, err) = validate(&dir, "train");
    assert_eq!(code, 0, "{err}");
    let (proved, infra) = (
        counts["proved"].as_u64().unwrap(),
        counts["infra"].as_u64().unwrap(),
    );
    // Base has no imports and loads; Mid and Top need MyLib.
    assert!(proved >= 2 && infra >= 2, "{counts} {err}");
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("context does not load ("))
        .collect();
    assert_eq!(reports.len(), 2, "{err}");
    assert!(reports.iter().all(|l| l.contains("MyLib")), "{err}");
}

/// `prod eval` on the project's test split, sampling from a fake inference server that
/// answers every theorem with one proof using the library's `twice_0`.
#[cfg(feature = "policy")]
#[test]
fn project_evaluates_with_a_scripted_policy() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let (fake, model) =
        common::scripted_policy(tmp.path(), &["<no_invoke> rewrite twice_0. repeat split."]);
    let out = tmp.path().join("run");
    let (code, stdout, err) = prod(&[
        "eval",
        "--model",
        model.to_str().unwrap(),
        "--dataset",
        dir.to_str().unwrap(),
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
        "--no-hammer",
        "--remote-url",
        &fake.url,
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let e = &summary["evaluations"][0];
    assert_eq!(e["infra_nodes"], 0, "{summary}");
    let pass1 = e["pass_at_k"][0]["estimate"].as_f64().unwrap();
    assert!(pass1 > 0.0, "{summary} {err}");
}

/// Every `*.jsonl` file and the card of a dataset folder, by name.
fn dataset_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            (name.ends_with(".jsonl") || name == "README.md")
                .then(|| (name, std::fs::read(e.path()).unwrap()))
        })
        .collect()
}

fn build_into(project: &Path, out: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_prod"));
    c.args(["dataset", "build", "--library"])
        .arg(project)
        .arg("--out")
        .arg(out)
        .args(["--unit", "file", "--threads", "1"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

#[test]
fn a_cut_or_interrupted_dataset_is_refused_and_a_rebuild_replaces_the_folder() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let old = build_project(tmp.path());
    let project = tmp.path().join("project_r");
    let d = old.to_str().unwrap();
    let (code, _, err) = prod(&["dataset", "stats", d]);
    assert_eq!(code, 0, "{err}");
    // A file cut short after the build: `dataset stats` and every reader name it.
    let pristine = tmp.path().join("pristine");
    prod_test_support::copy_tree(&old, &pristine);
    let train = old.join("train.jsonl");
    let text = std::fs::read_to_string(&train).unwrap();
    let first = text.lines().next().unwrap().to_string() + "\n";
    std::fs::write(&train, &first).unwrap();
    let (code, _, err) = prod(&["dataset", "stats", d]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("train.jsonl: 1 lines, but stats.json records"),
        "{err}"
    );
    let (code, _, err) = validate(&old, "train");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("train.jsonl: 1 lines"), "{err}");

    // The new build differs from the old one (a validation split); the reference is a build
    // into a fresh folder.
    let new_args = ["--val-fraction", "0.5"];
    let fresh = tmp.path().join("fresh");
    let st = build_into(&project, &fresh, &new_args).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (want_old, want_new) = (dataset_files(&pristine), dataset_files(&fresh));
    assert_ne!(want_old, want_new);

    // Killed at any moment, a rebuild over the old folder leaves the old dataset or a folder
    // every reader refuses, never a mixture that passes for complete.
    let mut outcomes = std::collections::BTreeSet::new();
    for delay_ms in [0u64, 30, 100, 250, 500, 1000, 2000] {
        let dir = tmp.path().join(format!("killed-{delay_ms}"));
        prod_test_support::copy_tree(&pristine, &dir);
        let mut child = build_into(&project, &dir, &new_args).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let (code, _, err) = prod(&["dataset", "stats", dir.to_str().unwrap()]);
        let files = dataset_files(&dir);
        if code == 0 {
            let which = if files == want_old {
                "old"
            } else if files == want_new {
                "new"
            } else {
                panic!("killed after {delay_ms} ms: a complete-looking folder that is neither build: {:?}", files.keys());
            };
            outcomes.insert(which);
        } else {
            assert_eq!(code, 2, "{err}");
            assert!(err.contains("interrupted"), "{err}");
            let (code, _, err) = validate(&dir, "train");
            assert_eq!(code, 2, "{err}");
            outcomes.insert("refused");
        }
        eprintln!("killed after {delay_ms} ms ({status}): {outcomes:?}");
    }

    // A rebuild over the old folder gives exactly the fresh build, with nothing left over.
    let st = build_into(&project, &old, &new_args).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    assert_eq!(dataset_files(&old), want_new);
    let left: Vec<String> = std::fs::read_dir(&old)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".tmp") || n.starts_with(".prod-build"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let (code, _, err) = prod(&["dataset", "stats", d]);
    assert_eq!(code, 0, "{err}");

    // A user's own README.md is never overwritten by the card.
    let mine = tmp.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("README.md"), "my notes\n").unwrap();
    let st = build_into(&project, &mine, &[]).output().unwrap();
    assert_eq!(st.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&st.stderr).contains("README.md not written by"));
    assert_eq!(
        std::fs::read_to_string(mine.join("README.md")).unwrap(),
        "my notes\n"
    );
}

fn python() -> Option<std::path::PathBuf> {
    prod_test_support::python_with(
        &["datasets"],
        "set PROD_PYTHON to a Python with Hugging Face `datasets` (python/requirements-ci.txt)",
    )
}

/// Loads every config of a dataset folder with `datasets` and prints, as JSON, the rows of each
/// config's splits, the splits of `load_dataset(DIR)`, and every column type.
const LOAD_DATASET: &str = r#"
import json, sys, datasets
d = sys.argv[1]
out = {"configs": {}, "types": {}}
for c in datasets.get_dataset_config_names(d):
    dd = datasets.load_dataset(d, c)
    out["configs"][c] = {s: dd[s].num_rows for s in dd}
    for s in dd:
        for name, f in dd[s].features.items():
            out["types"][f"{c}/{s}/{name}"] = str(f)
default = datasets.load_dataset(d)
out["default"] = {s: default[s].num_rows for s in default}
t = datasets.load_dataset(d, split="test")
twl = datasets.load_dataset(d, "w_lemmas", split="test")
out["test_and_test_wl"] = len(datasets.concatenate_datasets([t, twl]))
out["same_theorems"] = sorted(t["id"]) == sorted(twl["id"])
out["test_rows"] = t.to_list()
print(json.dumps(out))
"#;

#[test]
fn a_dataset_folder_loads_in_hugging_face_datasets_with_one_call() {
    if !coq_installed() {
        return;
    }
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project_r");
    prod_test_support::copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../prod-library/tests/data/project_r"),
        &project,
    );
    let dir = tmp.path().join("ds");
    let st = build_into(&project, &dir, &["--val-fraction", "0.3"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let written = stats(&dir)["files_written"].clone();
    let n = |f: &str| written[f].as_u64().unwrap();
    assert!(n("train") > 0 && n("val") > 0 && n("test") > 0, "{written}");
    let load_with = |py: &Path, dir: &Path| {
        let out = Command::new(py)
            .args(["-c", LOAD_DATASET])
            .arg(dir)
            .env("HF_HOME", tmp.path().join("hf"))
            .env("HF_DATASETS_OFFLINE", "1")
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        // datasets ≥ 5 warns of splits without `num_bytes` (and then ignores the card's splits).
        assert!(!err.contains("Ignoring part of dataset_info"), "{err}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let load = |dir: &Path| load_with(&py, dir);
    let got = load(&dir);
    // The same with the RL venv's newer `datasets`, when there is one.
    if let Some(rl) = std::env::var_os("PROD_RL_PYTHON").filter(|p| Path::new(p).exists()) {
        let again = load_with(Path::new(&rl), &dir);
        assert_eq!(again["configs"], got["configs"]);
    }
    // Every variant is its own config, each split with exactly its file's rows.
    let splits = |pairs: &[(&str, &str)]| {
        serde_json::Value::Object(
            pairs
                .iter()
                .filter(|(_, f)| n(f) > 0)
                .map(|(s, f)| (s.to_string(), serde_json::json!(n(f))))
                .collect(),
        )
    };
    let want = serde_json::json!({
        "default": splits(&[("train", "train"), ("validation", "val"), ("test", "test")]),
        "w_lemmas": splits(&[("train", "train_wl"), ("validation", "val_wl"), ("test", "test_wl")]),
        "sft": splits(&[("train", "sft")]),
        "rl": splits(&[("train", "rl")]),
        "sources": splits(&[("train", "sources")]),
        "skipped": splits(&[("train", "skipped")]),
    });
    let want: serde_json::Map<String, serde_json::Value> = want
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| !v.as_object().unwrap().is_empty())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got["configs"], serde_json::Value::Object(want.clone()));
    // One call gives the default config: train / validation / test, not train + train_wl.
    assert_eq!(got["default"], want["default"]);
    assert_eq!(got["test_and_test_wl"], 2 * n("test"));
    assert_eq!(got["same_theorems"], true);
    // No column is typed null: always-empty lists are lists of strings.
    let types = got["types"].as_object().unwrap();
    assert!(
        types.values().all(|t| !t.to_string().contains("null")),
        "{types:?}"
    );
    assert!(types["default/train/flags"]
        .as_str()
        .unwrap()
        .contains("string"));
    assert!(types["w_lemmas/test/proposed_lemmas"]
        .as_str()
        .unwrap()
        .contains("string"));
    assert!(types["default/train/depth"]
        .as_str()
        .unwrap()
        .contains("int64"));

    // The Parquet form loads the same way: the same configs, splits, types and rows.
    let pq = tmp.path().join("pq");
    let (code, stdout, err) = prod(&[
        "dataset",
        "parquet",
        dir.to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        stdout.lines().count(),
        written
            .as_object()
            .unwrap()
            .values()
            .filter(|v| v.as_u64() > Some(0))
            .count(),
        "{stdout}"
    );
    assert!(
        pq.join("default/test.parquet").is_file() && pq.join("w_lemmas/train.parquet").is_file()
    );
    let again = load(&pq);
    assert_eq!(again["configs"], got["configs"]);
    assert_eq!(again["types"], got["types"]);
    assert_eq!(again["test_rows"], got["test_rows"]);
    // A rerun replaces its own folder; a folder it did not write is never touched.
    let (code, _, err) = prod(&[
        "dataset",
        "parquet",
        dir.to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = prod(&[
        "dataset",
        "parquet",
        dir.to_str().unwrap(),
        "--out",
        project.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a Parquet dataset folder written by prod"),
        "{err}"
    );
}

/// Reads an export's Parquet file with `datasets` and prints its rows as JSON.
const LOAD_EXPORT: &str = r#"
import json, sys, datasets
d = datasets.load_dataset("parquet", data_files=sys.argv[1], split="train")
print(json.dumps({"features": {k: str(v) for k, v in d.features.items()}, "rows": d.to_list()}))
"#;

/// `prod dataset export`: every row of the split, in each framework's schema, with a reward
/// input whose context loads in the real checker (the inline `context` is cut; the export's is
/// the full one, by byte offsets), and the Parquet file verl reads loads with `datasets`.
#[test]
fn exported_rows_load_in_the_checker_in_each_frameworks_schema() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let read_jsonl = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let examples = read_jsonl(&dir.join("train.jsonl"));
    let export = |fw: &str, format: &str| {
        let out = tmp.path().join(format!("{fw}-{format}"));
        let (code, stdout, err) = prod(&[
            "dataset",
            "export",
            dir.to_str().unwrap(),
            "--for",
            fw,
            "--split",
            "train",
            "--format",
            format,
            "--prompt-context-bytes",
            "200",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let manifest: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(manifest["rows"], examples.len(), "{manifest}");
        assert_eq!(manifest["dropped"], serde_json::json!({}), "{manifest}");
        out
    };
    // TRL's columns: the reward input of each row, checked with its ground truth.
    let trl = read_jsonl(&export("trl", "jsonl").join("train.jsonl"));
    let mut input = String::new();
    for (row, e) in trl.iter().zip(&examples) {
        assert_eq!(row["id"], e["id"]);
        let context = row["context"].as_str().unwrap();
        assert!(context.ends_with(e["context"].as_str().unwrap()));
        let prompt = row["prompt"].as_str().unwrap();
        assert!(prompt.ends_with(&format!("{}\n", e["statement"].as_str().unwrap())));
        assert!(prompt.len() <= 200 + e["statement"].as_str().unwrap().len() + 2);
        let node = serde_json::json!({"id": row["id"], "statement": row["statement"],
            "imports": row["imports"], "context": context,
            "proof": e["conditional_proof_original"]});
        input.push_str(&format!("{node}\n"));
    }
    let (code, stdout, err) = prod_with_input(
        &[
            "check",
            "-",
            "--json",
            "--workers",
            "1",
            "--no-hammer",
            "--dataset",
            dir.to_str().unwrap(),
        ],
        Some(&input),
    );
    assert_eq!(code, 0, "{err}");
    let verdicts: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), trl.len());
    for v in &verdicts {
        assert_eq!(v["verdict"], "proved", "{v}");
    }
    // OpenRLHF's label and verl's ground truth are the same reward input.
    let openrlhf = read_jsonl(&export("openrlhf", "jsonl").join("train.jsonl"));
    for (row, t) in openrlhf.iter().zip(&trl) {
        let label: serde_json::Value =
            serde_json::from_str(row["label"].as_str().unwrap()).unwrap();
        assert_eq!(label["context"], t["context"]);
        assert_eq!(label["statement"], t["statement"]);
    }
    let verl = export("verl", "parquet").join("train.parquet");
    let Some(py) = python() else { return };
    let out = Command::new(py)
        .args(["-c", LOAD_EXPORT])
        .arg(&verl)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let features = got["features"].as_object().unwrap();
    let names: Vec<&str> = features.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "data_source",
            "prompt",
            "ability",
            "reward_model",
            "extra_info"
        ]
    );
    for (row, t) in got["rows"].as_array().unwrap().iter().zip(&trl) {
        assert_eq!(row["prompt"][0]["role"], "user");
        assert_eq!(row["prompt"][0]["content"], t["prompt"]);
        let gt: serde_json::Value =
            serde_json::from_str(row["reward_model"]["ground_truth"].as_str().unwrap()).unwrap();
        assert_eq!(gt["context"], t["context"]);
        assert_eq!(row["extra_info"]["id"], t["id"]);
    }
}

/// `prod dataset export`'s verification (the RL split's default): rows whose context the real
/// Coq refuses, or whose ground truth it does not prove, are left out and counted, the others
/// kept. A sentence Coq refuses (`Z.`) is put into one file's text between two of its rows'
/// contexts (bytes that were blank, so no offset moves): the row before it is kept, the two
/// after it are left out, with Coq's reason; a row of another file gets a wrong ground truth.
/// Without verification every row is written and export.json says why.
#[test]
fn verification_leaves_out_exactly_the_rows_that_do_not_load_or_prove() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let sources = std::fs::read_to_string(dir.join("sources.jsonl")).unwrap();
    let mut lines = vec![];
    for l in sources.lines() {
        let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
        if r["logical_path"] == "MyLib.sub.Top" {
            let mut text = r["reduced"].as_str().unwrap().as_bytes().to_vec();
            assert_eq!(&text[175..177], b"\n\n", "the fixture changed");
            text[175..177].copy_from_slice(b"Z.");
            r["reduced"] = String::from_utf8(text).unwrap().into();
        }
        lines.push(r.to_string());
    }
    std::fs::write(dir.join("sources.jsonl"), lines.join("\n") + "\n").unwrap();
    // One row of another file gets a ground truth Coq refuses (its context loads).
    let rl = std::fs::read_to_string(dir.join("rl.jsonl")).unwrap();
    let mut wrong_id = String::new();
    let rows: Vec<String> = rl
        .lines()
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
            if wrong_id.is_empty() && r["logical_path"] != "MyLib.sub.Top" {
                wrong_id = r["id"].as_str().unwrap().to_string();
                r["conditional_proof_original"] = "<no_invoke> exact I.".into();
            }
            r.to_string()
        })
        .collect();
    std::fs::write(dir.join("rl.jsonl"), rows.join("\n") + "\n").unwrap();
    let out = tmp.path().join("verified");
    let (code, stdout, err) = prod(&[
        "dataset",
        "export",
        dir.to_str().unwrap(),
        "--for",
        "openrlhf",
        "--format",
        "jsonl",
        "--workers",
        "1",
        "--no-hammer",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // The RL split is verified by default: contexts, then ground truths.
    assert_eq!(m["verified"], true, "{m}");
    assert_eq!(m["dropped"]["context_does_not_load"], 2, "{m}");
    assert_eq!(m["dropped"]["ground_truth_not_proved"], 1, "{m}");
    assert!(
        m["not_proved"][&wrong_id]
            .as_str()
            .unwrap()
            .starts_with("failed: "),
        "{m}"
    );
    assert!(
        m["not_loaded"]["MyLib.sub.Top"]
            .as_str()
            .unwrap()
            .contains("`Z.`"),
        "{m}"
    );
    let ids: Vec<String> = std::fs::read_to_string(out.join("rl.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids.len(), 4, "{ids:?}");
    assert!(ids.iter().any(|i| i.contains("top_a")), "{ids:?}");
    assert!(!ids
        .iter()
        .any(|i| i.contains("top_b") || i.contains("top_c") || i.contains(&wrong_id)));
    // Not verified: every row is written, and export.json says why.
    for (extra, why) in [
        (&["--no-verify"][..], "--no-verify"),
        (
            &["--split", "train"][..],
            "the train split is verified only with --verify",
        ),
    ] {
        let mut args = vec![
            "dataset",
            "export",
            dir.to_str().unwrap(),
            "--for",
            "trl",
            "--format",
            "jsonl",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, err) = prod(&args);
        assert_eq!(code, 0, "{err}");
        let m: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(
            (&m["verified"], &m["not_verified"]),
            (&false.into(), &why.into())
        );
        assert_eq!(m["dropped"], serde_json::json!({}), "{m}");
    }
}

/// A tokenizer whose tokens are the runs of word characters and the runs of other visible
/// characters (`tokenizers`' `Whitespace` pre-tokenizer, every token unknown): its counts are
/// known without it.
const RUNS_TOKENIZER: &str = r#"{"version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}}"#;

fn runs(text: &str) -> usize {
    let class = |c: char| {
        if c.is_whitespace() {
            0
        } else if c.is_alphanumeric() || c == '_' {
            1
        } else {
            2
        }
    };
    let mut n = 0;
    let mut last = 0;
    for c in text.chars() {
        let k = class(c);
        n += usize::from(k != 0 && k != last);
        last = k;
    }
    n
}

/// `prod dataset export --tokenizer --prompt-tokens`: token percentiles of the prompts and
/// ground truths as written, and every prompt within the budget, its context cut at line
/// starts (the statement kept whole); rows whose statement alone is over it are left out.
#[test]
fn export_reports_token_lengths_and_caps_prompts_to_a_budget() {
    if !coq_installed() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_project(tmp.path());
    let tok = tmp.path().join("tokenizer.json");
    std::fs::write(&tok, RUNS_TOKENIZER).unwrap();
    let examples: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("train.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let export = |budget: Option<&str>| {
        let out = tmp.path().join(format!("tok-{}", budget.unwrap_or("none")));
        let mut args = vec![
            "dataset",
            "export",
            dir.to_str().unwrap(),
            "--for",
            "trl",
            "--split",
            "train",
            "--format",
            "jsonl",
            "--tokenizer",
            tok.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        if let Some(b) = budget {
            args.extend_from_slice(&["--prompt-tokens", b]);
        }
        let (code, stdout, err) = prod(&args);
        assert_eq!(code, 0, "{err}");
        let m: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        let rows: Vec<serde_json::Value> = std::fs::read_to_string(out.join("train.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (m, rows)
    };
    let pct = |mut v: Vec<usize>| {
        v.sort_unstable();
        let at = |q: usize| v[(q * v.len()).div_ceil(100).max(1) - 1];
        serde_json::json!({"rows": v.len(), "p50": at(50), "p90": at(90), "p95": at(95),
                           "p99": at(99), "max": v[v.len() - 1]})
    };
    let (m, whole) = export(None);
    assert_eq!(whole.len(), examples.len());
    let counts: Vec<usize> = whole
        .iter()
        .map(|r| runs(r["prompt"].as_str().unwrap()))
        .collect();
    assert_eq!(m["tokens"]["prompt"], pct(counts.clone()), "{m}");
    let truths: Vec<usize> = examples
        .iter()
        .map(|e| runs(e["conditional_proof"].as_str().unwrap()))
        .collect();
    assert_eq!(m["tokens"]["ground_truth_completion"], pct(truths), "{m}");
    // A budget between the shortest and the longest prompt: long prompts lose context lines.
    let (lo, hi) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
    assert!(lo < hi, "{counts:?}");
    let budget = (lo + hi) / 2;
    let (m, capped) = export(Some(&budget.to_string()));
    assert_eq!(m["prompt_tokens"], budget);
    let mut cut = 0;
    for (r, w) in capped.iter().zip(&whole) {
        let (p, full) = (r["prompt"].as_str().unwrap(), w["prompt"].as_str().unwrap());
        assert!(runs(p) <= budget, "{p:?}");
        assert!(full.ends_with(p), "a tail of the uncapped prompt");
        assert!(p.ends_with(&format!("{}\n", r["statement"].as_str().unwrap().trim())));
        assert!(
            p == full || full[..full.len() - p.len()].ends_with('\n'),
            "cut at a line"
        );
        cut += usize::from(p != full);
    }
    assert!(cut > 0);
    let capped_counts: Vec<usize> = capped
        .iter()
        .map(|r| runs(r["prompt"].as_str().unwrap()))
        .collect();
    assert_eq!(m["tokens"]["prompt"], pct(capped_counts));
    // A budget below every statement: every row is left out, counted.
    let (m, none) = export(Some("2"));
    assert!(none.is_empty());
    assert_eq!(
        m["dropped"]["prompt_over_token_budget"],
        examples.len(),
        "{m}"
    );
    assert_eq!(m["tokens"]["prompt"]["rows"], 0);
    // --prompt-tokens needs --tokenizer.
    let (code, _, err) = prod(&[
        "dataset",
        "export",
        dir.to_str().unwrap(),
        "--for",
        "trl",
        "--split",
        "train",
        "--prompt-tokens",
        "10",
        "--out",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
}

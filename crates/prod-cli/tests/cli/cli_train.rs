//! `prod train` end to end on a tiny random model: value lines in, a lower eval loss out; SFT
//! examples written for an external trainer.
#![cfg(feature = "policy")]

use std::path::Path;
use std::process::{Command, Output};

const PROD: &str = env!("CARGO_BIN_EXE_prod");

/// `prod ARGS` in `dir`.
fn prod_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(PROD)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// A tiny random model `m` in `dir`, its tokenizer trained on `n` short lemmas.
fn tiny_model(dir: &Path, n: usize) {
    let corpus: String = (0..n)
        .map(|i| format!("Lemma l{i} : {i} + 0 = {i}. Proof. lia. Qed.\n"))
        .collect();
    std::fs::write(dir.join("corpus.txt"), corpus).unwrap();
    let st = prod_in(
        dir,
        &[
            "model",
            "init",
            "--corpus",
            "corpus.txt",
            "--vocab-size",
            "300",
            "--out",
            "m",
        ],
    );
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

#[test]
fn value_training_lowers_the_value_loss() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut values = String::new();
    for i in 0..24 {
        let line = serde_json::json!({"context": "", "statement": format!("Lemma l{i} : {i} + 0 = {i}."), "proved": i % 3 != 0});
        values.push_str(&format!("{line}\n"));
    }
    std::fs::write(d.join("values.jsonl"), values).unwrap();
    tiny_model(d, 24);
    let prod = PROD;
    let out = Command::new(prod)
        .args([
            "train",
            "value",
            "--model",
            "m",
            "--data",
            "values.jsonl",
            "--eval",
            "values.jsonl",
            "--steps",
            "6",
            "--macro-batch",
            "8",
            "--micro-batch",
            "8",
            "--lr",
            "3e-3",
            "--warmup",
            "0",
            "--out",
            "v",
            "--json",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let (before, after) = (
        last["eval_loss_before"].as_f64().unwrap(),
        last["eval_loss_after"].as_f64().unwrap(),
    );
    assert!(after < before, "value loss {before} -> {after}");
    assert!(d.join("v/tokenizer.json").is_file());
    // SFT refuses value-only data with a clear message.
    let sft = Command::new(prod)
        .args([
            "train",
            "sft",
            "--model",
            "m",
            "--data",
            "values.jsonl",
            "--steps",
            "1",
            "--out",
            "s",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(!sft.status.success());
    assert!(String::from_utf8_lossy(&sft.stderr).contains("no usable training example"));
}

/// `prod train sft --write-examples`: the examples an SFT run would train on, in the format an
/// external trainer reads (python/train_weighted.py), and nothing trained; the count agrees
/// with what a training run on the same flags reports.
#[test]
fn sft_examples_are_written_for_an_external_trainer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut sft = String::new();
    for i in 0..12 {
        let proof = if i % 4 == 0 {
            format!("<use_invoke> <invoke> Lemma a{i} : {i} = {i}. </invoke> lia.")
        } else {
            "<no_invoke> lia.".to_string()
        };
        let line = serde_json::json!({"context": "Require Import Lia.", "statement": format!("Lemma l{i} : {i} + 0 = {i}."), "conditional_proof": proof});
        sft.push_str(&format!("{line}\n"));
    }
    // Too long for --max-seq-len: dropped, as training drops it.
    let long = serde_json::json!({"context": "", "statement": format!("Lemma big : {} = 0.", "1 + ".repeat(200)), "conditional_proof": "<no_invoke> lia."});
    sft.push_str(&format!("{long}\n"));
    std::fs::write(d.join("sft.jsonl"), sft).unwrap();
    tiny_model(d, 12);
    let run = |args: &[&str]| prod_in(d, args);
    let common = [
        "train",
        "sft",
        "--model",
        "m",
        "--data",
        "sft.jsonl",
        "--max-seq-len",
        "96",
        "--json",
    ];
    let w = run(&[&common[..], &["--write-examples", "ex/sft.jsonl"]].concat());
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&w.stdout).trim()).unwrap();
    assert_eq!(
        (report["examples"].as_u64(), report["skipped"].as_u64()),
        (Some(12), Some(1)),
        "{report}"
    );
    assert!((report["use_invoke_share"].as_f64().unwrap() - 0.25).abs() < 1e-9);
    let text = std::fs::read_to_string(d.join("ex/sft.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 12);
    for e in &lines {
        let (p, c) = (
            e["prompt"].as_str().unwrap(),
            e["completion"].as_str().unwrap(),
        );
        assert!(
            p.contains("Lemma l") && p.contains("Require Import Lia."),
            "{e}"
        );
        assert!(
            c.starts_with("<use_invoke>") || c.starts_with("<no_invoke>"),
            "{e}"
        );
        assert_eq!(e["weight"].as_f64(), Some(1.0));
        let ids = |k: &str| e[k].as_array().unwrap().len();
        assert!(ids("prompt_ids") > 0 && ids("completion_ids") > 0);
        assert!(ids("prompt_ids") + ids("completion_ids") <= 96, "{e}");
    }
    assert!(!d.join("s").exists(), "nothing trained");
    // Training on the same flags sees the same examples.
    let t = run(&[&common[..], &["--steps", "1", "--out", "s"]].concat());
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&t.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["examples"].as_u64(), Some(12), "{first}");
    // Neither --out nor --write-examples: a usage error.
    let none = run(&common);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--out"));
}

/// A model folder of an architecture the native model does not implement (`model_type:
/// mistral`) is refused on load with its name and exit 2, never sampled as Llama; and a folder
/// `prod` writes carries ProD's markers as plain tokens, which trainers' decoding keeps.
#[test]
fn other_architectures_are_refused_and_markers_are_plain() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_model(d, 8);
    let tok: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("m/tokenizer.json")).unwrap()).unwrap();
    let markers: Vec<&serde_json::Value> = tok["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["content"].as_str().unwrap().ends_with("invoke>"))
        .collect();
    assert_eq!(markers.len(), 4, "{markers:?}");
    assert!(markers.iter().all(|t| t["special"] == false), "{markers:?}");
    let sample = |d: &Path| {
        prod_in(
            d,
            &[
                "model",
                "sample",
                "--model",
                "m",
                "--prompt",
                "Lemma a : True.",
                "--n",
                "1",
            ],
        )
    };
    assert!(sample(d).status.success());
    let cfg_path = d.join("m/config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg["model_type"] = "mistral".into();
    cfg["architectures"] = serde_json::json!(["MistralForCausalLM"]);
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let out = sample(d);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("model_type \"mistral\" is not supported") && err.contains("Llama"),
        "{err}"
    );
}

/// `prod model sample --data`: n samples per dataset line, each with its line's id and whether
/// it parses; a forced `t0` begins every sample; the last line sums them up.
#[test]
fn dataset_samples_say_whether_they_parse_and_sum_up() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tiny_model(d, 8);
    let lines: String = (0..3)
        .map(|i| {
            let l = serde_json::json!({"id": format!("t{i}"), "context": "Require Import Lia.",
                "statement": format!("Lemma l{i} : {i} + 0 = {i}."), "conditional_proof": "<no_invoke> lia."});
            format!("{l}\n")
        })
        .collect();
    std::fs::write(d.join("test.jsonl"), lines).unwrap();
    let args = [
        "model",
        "sample",
        "--model",
        "m",
        "--data",
        "test.jsonl",
        "--limit",
        "2",
        "--n",
        "2",
        "--max-new-tokens",
        "8",
        "--force-t0",
        "no-invoke",
        "--json",
    ];
    let out = prod_in(d, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 5, "{rows:?}");
    let ids: Vec<&str> = rows[..4]
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["t0", "t0", "t1", "t1"]);
    assert!(rows[..4].iter().all(|r| r["conditional_proof"]
        .as_str()
        .unwrap()
        .starts_with("<no_invoke>")
        && r["parses"].is_boolean()
        && r["tokens"].as_u64().unwrap() <= 8));
    let parsed = rows[..4].iter().filter(|r| r["parses"] == true).count() as u64;
    let sum = &rows[4];
    assert_eq!(
        (
            sum["summary"].as_bool(),
            sum["samples"].as_u64(),
            sum["parse_as_conditional_proof"].as_u64()
        ),
        (Some(true), Some(4), Some(parsed)),
        "{sum}"
    );
    let missing = prod_in(d, &["model", "sample", "--model", "m"]);
    assert_eq!(missing.status.code(), Some(2));
}

//! `prod train value` end to end on a tiny random model: value lines in, a lower eval loss out.
#![cfg(feature = "policy")]

use std::process::Command;

#[test]
fn value_training_lowers_the_value_loss() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut corpus = String::new();
    let mut values = String::new();
    for i in 0..24 {
        corpus.push_str(&format!("Lemma l{i} : {i} + 0 = {i}. Proof. lia. Qed.\n"));
        let line = serde_json::json!({"context": "", "statement": format!("Lemma l{i} : {i} + 0 = {i}."), "proved": i % 3 != 0});
        values.push_str(&format!("{line}\n"));
    }
    std::fs::write(d.join("corpus.txt"), corpus).unwrap();
    std::fs::write(d.join("values.jsonl"), values).unwrap();
    let prod = env!("CARGO_BIN_EXE_prod");
    let st = Command::new(prod)
        .args([
            "model",
            "init",
            "--corpus",
            "corpus.txt",
            "--vocab-size",
            "300",
            "--out",
            "m",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
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

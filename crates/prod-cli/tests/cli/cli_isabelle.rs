//! The CLI on Isabelle, as a user runs it: `prod dataset build --prover isabelle` on a small
//! AFP-like library (prod-library's `afp_mini`), then `prod eval --prover isabelle` and `prod rl`
//! with `prover = "isabelle"` against a fake Isabelle server that replays recorded replies of a
//! real Isabelle2022 server (the policy: a fake OpenAI-compatible server for `eval`, a tiny random
//! model for `rl`). Rerunning either command resumes and checks nothing again.

#![cfg(feature = "policy")]

use std::path::{Path, PathBuf};
use std::process::Command;

use prod_check_isabelle::testing::{Fake, PASSWORD};

fn prod(args: &[&str]) -> (i32, String, String) {
    prod_with_config(args, None)
}

/// `prod ARGS` with `PROD_CONFIG` set to `config` (or unset).
fn prod_with_config(args: &[&str], config: Option<&Path>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_prod"));
    match config {
        Some(c) => cmd.env("PROD_CONFIG", c),
        None => cmd.env_remove("PROD_CONFIG"),
    };
    prod_test_support::run(cmd.args(args))
}

fn afp_mini() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../prod-library/tests/data/afp_mini")
        .canonicalize()
        .expect("prod-library's afp_mini fixture")
}

/// The fake server: `WRONG` in a theory is an error there; anything else is proved.
fn fake() -> Option<Fake> {
    prod_check_isabelle::testing::fails_where("WRONG")
}

fn use_theories(fake: &Fake) -> usize {
    fake.commands()
        .iter()
        .filter(|c| *c == "use_theories")
        .count()
}

fn build(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let (code, _, err) = prod(&[
        "dataset",
        "build",
        "--prover",
        "isabelle",
        "--library",
        afp_mini().to_str().unwrap(),
        "--out",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    data
}

#[test]
fn prod_eval_with_the_isabelle_prover() {
    let Some(fake) = fake() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = build(tmp.path());
    // Every completion: a proof by unfolding, right for `tag_helper`; `tag_main` says WRONG.
    let policy = prod_remote::testing::serve(std::sync::Arc::new(
        |_path: &str, req: &serde_json::Value, _n: usize| {
            let n = req["n"].as_u64().unwrap_or(1);
            let prompt = req["prompt"].to_string();
            let text = if prompt.contains("twice 1 + twice 0") {
                "<no_invoke> by (simp add: WRONG)"
            } else {
                "<no_invoke> by (simp add: twice_def)"
            };
            let choices: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"index": i, "text": text}))
                .collect();
            (200, serde_json::json!({"choices": choices}).to_string())
        },
    ));
    let model = tmp.path().join("model");
    std::fs::create_dir_all(&model).unwrap();
    let tok = prod_policy::ProdTokenizer::train_bpe(
        ["lemma tag_helper: \"twice 1 = 2\"".to_string()].iter(),
        300,
        1,
    )
    .unwrap();
    tok.save(&model.join("tokenizer.json")).unwrap();
    // The server's session directory is on the machine the replies were recorded on: the
    // checker writes its theories where prod.toml says (`[check.isabelle] work_dir`).
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = tmp.path().join("prod.toml");
    std::fs::write(
        &config,
        format!("[check.isabelle]\nwork_dir = {work:?}\nmax_attempts = 1\n"),
    )
    .unwrap();
    let out = tmp.path().join("run");
    let args = [
        "eval",
        "--prover",
        "isabelle",
        "--server",
        &fake.addr,
        "--password",
        PASSWORD,
        "--model",
        model.to_str().unwrap(),
        "--dataset",
        data.to_str().unwrap(),
        "--k",
        "1,2",
        "--samples",
        "2",
        "--depth",
        "1",
        "--workers",
        "1",
        "--remote-url",
        &policy.url,
        "--remote-server",
        "llama_cpp",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let (code, stdout, err) = prod_with_config(&args, Some(&config));
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let e = &summary["evaluations"][0];
    assert_eq!(e["theorems"], 2, "{summary}");
    assert_eq!(e["infra_nodes"], 0, "{summary}");
    assert_eq!(e["pass_at_k"][0]["estimate"], 0.5, "{summary} {err}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["prover"], "isabelle Isabelle2022");
    // The job records the session, not the server's address or password.
    let job = run["config"].to_string();
    assert!(job.contains("\"prover\":\"isabelle\""), "{job}");
    let checked = use_theories(&fake);
    assert!(
        checked >= 4,
        "2 theorems × 2 trees, plus final checks: {checked}"
    );
    assert!(fake.commands().iter().any(|c| c == "session_stop"));

    // The same command again: resumed, nothing checked again, the same result.
    let (code, stdout2, err) = prod_with_config(&args, Some(&config));
    assert_eq!(code, 0, "{err}");
    let again: serde_json::Value = serde_json::from_str(stdout2.trim()).unwrap();
    assert_eq!(
        again["evaluations"][0]["pass_at_k"],
        summary["evaluations"][0]["pass_at_k"]
    );
    assert_eq!(use_theories(&fake), checked);
}

#[test]
fn prod_rl_with_prover_isabelle_in_its_config() {
    let Some(fake) = fake() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let data = build(tmp.path());
    let model = tmp.path().join("model");
    let (code, _, err) = prod(&[
        "model",
        "init",
        "--corpus",
        data.join("rl.jsonl").to_str().unwrap(),
        "--vocab-size",
        "300",
        "--hidden",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--kv-heads",
        "1",
        "--intermediate",
        "64",
        "--out",
        model.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = tmp.path().join("rl.toml");
    std::fs::write(
        &config,
        format!(
            "model = {model:?}\ndataset = {data:?}\nprover = \"isabelle\"\nrounds = 1\nbatch = 3\ndepth = 1\n\
             learning_rate = 1e-3\nwarmup_steps = 0\nmacro_batch = 8\nmicro_batch = 4\nmax_seq_len = 512\n\
             [sampling]\nmax_new_tokens = 8\n\
             [isabelle]\nserver = {:?}\npassword = {PASSWORD:?}\nwork_dir = {work:?}\nmax_attempts = 1\n",
            fake.addr
        ),
    )
    .unwrap();
    let out = tmp.path().join("run");
    let args = [
        "rl",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let (code, _, err) = prod(&args);
    assert_eq!(code, 0, "{err}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["prover"], "isabelle Isabelle2022");
    assert_eq!(run["rounds"].as_array().map(Vec::len), Some(1), "{run}");
    let checked = use_theories(&fake);
    assert!(checked > 0);
    let (code, _, err) = prod(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(use_theories(&fake), checked);
    // A misspelt key in the [isabelle] section is the user's error.
    std::fs::write(
        &config,
        "prover = \"isabelle\"\n[isabelle]\nservr = \"x\"\n",
    )
    .unwrap();
    let (code, _, err) = prod(&args);
    assert_eq!(code, 2, "{err}");
}

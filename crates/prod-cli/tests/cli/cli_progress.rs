//! Long work never sits silent in a log: when stderr is not a terminal, `prod check` and
//! `prod dataset build` print a progress line every `PROD_PROGRESS_SECS` (30 s by default; a
//! fraction of a second here) naming the phase, the unit and the count, and a closing line.
//! Results stay on stdout. Real Coq.

use std::process::Command;

fn coq_installed() -> bool {
    let here = Command::new("coqtop").arg("-v").output().is_ok();
    prod_test_support::require(here, "coqtop is not installed")
}

/// Run `prod ARGS` with progress lines every 50 ms; (exit code, stdout, stderr).
fn prod(args: &[&str]) -> (i32, String, String) {
    prod_test_support::run(
        Command::new(env!("CARGO_BIN_EXE_prod"))
            .args(args)
            .env_remove("PROD_CONFIG")
            .env("PROD_PROGRESS_SECS", "0.05"),
    )
}

#[test]
fn check_logs_its_progress_on_stderr_and_its_verdicts_on_stdout() {
    if !coq_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let nodes = dir.path().join("nodes.jsonl");
    let lines: Vec<String> = (0..3)
        .map(|i| {
            serde_json::json!({"id": i, "imports": "From Coq Require Import Arith.",
                "statement": format!("Lemma l{i} : {i} + 0 = {i}."),
                "proof": if i == 2 { "<no_invoke> exact I." } else { "<no_invoke> reflexivity." }})
            .to_string()
        })
        .collect();
    std::fs::write(&nodes, lines.join("\n")).unwrap();
    let (code, out, err) = prod(&[
        "check",
        nodes.to_str().unwrap(),
        "--json",
        "--workers",
        "1",
        "--no-hammer",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().count(),
        3,
        "stdout holds the verdicts only: {out}"
    );
    assert!(out.lines().all(|l| l.starts_with('{')), "{out}");
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("check: ")).collect();
    assert!(!progress.is_empty(), "no progress line in: {err}");
    assert!(
        progress
            .iter()
            .all(|l| l.contains("/3 nodes (") && l.contains("nodes/s")),
        "{progress:?}"
    );
    let last = progress.last().unwrap();
    assert!(
        last.starts_with("check: 3/3 nodes (100%)")
            && last.contains("failed 1, proved 2")
            && last.ends_with("(done)"),
        "{last}"
    );
}

#[test]
fn a_dataset_build_counts_files_and_says_so() {
    if !coq_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("ds");
    // CoqHammer's five files (the whole stdlib is built in prod-library's tests): a build of
    // a fraction of a second, so a line every millisecond.
    let (code, out, err) = prod_test_support::run(
        Command::new(env!("CARGO_BIN_EXE_prod"))
            .args([
                "dataset",
                "build",
                "--prover",
                "coq",
                "--library",
                "Hammer",
                "--out",
            ])
            .arg(&out_dir)
            .env_remove("PROD_CONFIG")
            .env("PROD_PROGRESS_SECS", "0.001"),
    );
    assert_eq!(code, 0, "{err}");
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("build: ")).collect();
    assert!(!progress.is_empty(), "no progress line in: {err}\n{out}");
    assert!(
        progress
            .iter()
            .all(|l| l.contains(" files") && !l.contains("examples")),
        "{progress:?}"
    );
}

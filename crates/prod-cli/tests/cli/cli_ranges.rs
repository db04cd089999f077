//! Out-of-range numbers are bad input: exit code 2 and a message naming the option or the
//! config key, before any prover, model or database is touched.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Run `prod ARGS` in `dir`; returns (exit code, stdout, stderr).
fn prod_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    prod_test_support::run(
        Command::new(env!("CARGO_BIN_EXE_prod"))
            .args(args)
            .current_dir(dir)
            .env_remove("PROD_CONFIG"),
    )
}

fn check_example() -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/check.jsonl");
    p.to_str().unwrap().to_string()
}

/// `prod ARGS` exits with 2 and its stderr contains every one of `wanted`.
fn refused(dir: &Path, args: &[&str], wanted: &[&str]) {
    let (code, _, err) = prod_in(dir, args);
    assert_eq!(code, 2, "prod {args:?}: {err}");
    for w in wanted {
        assert!(err.contains(w), "prod {args:?}: no {w:?} in {err}");
    }
}

#[test]
fn check_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = check_example();
    refused(
        d,
        &["check", &file, "--timeout", "0"],
        &["--timeout", "≥ 1"],
    );
    refused(
        d,
        &["check", &file, "--timeout", "-1"],
        &["--timeout", "≥ 1"],
    );
    refused(
        d,
        &["check", &file, "--workers", "0"],
        &["--workers", "≥ 1"],
    );
    refused(d, &["check", &file, "--memory-mb", "0"], &["--memory-mb"]);
}

#[test]
fn dataset_fractions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    refused(
        d,
        &["dataset", "build", "--out", "out", "--test-fraction", "1.5"],
        &["--test-fraction", "[0, 1)"],
    );
    refused(
        d,
        &["dataset", "build", "--out", "out", "--val-fraction", "nan"],
        &["--val-fraction"],
    );
    let sum = [
        "dataset",
        "build",
        "--out",
        "out",
        "--test-fraction",
        "0.6",
        "--val-fraction",
        "0.4",
    ];
    refused(
        d,
        &sum,
        &["--test-fraction 0.6", "--val-fraction 0.4", "less than 1"],
    );
    refused(
        d,
        &["dataset", "validate", "data", "--sample", "0"],
        &["--sample"],
    );
}

#[test]
fn queue_and_bench_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let work = [
        "queue",
        "work",
        "--store",
        "host=/nonexistent",
        "--run",
        "r",
    ];
    let with =
        |extra: &[&'static str]| -> Vec<&str> { work.iter().chain(extra).copied().collect() };
    refused(d, &with(&["--lease", "0"]), &["--lease", "> 0"]);
    refused(d, &with(&["--lease", "inf"]), &["--lease"]);
    refused(d, &with(&["--idle-exit", "-1"]), &["--idle-exit", "≥ 0"]);
    refused(d, &with(&["--batch", "0"]), &["--batch"]);
    refused(d, &with(&["--timeout", "0"]), &["--timeout"]);
    refused(d, &["bench", "tree", "--repeat", "0"], &["--repeat"]);
    refused(d, &["bench", "check", "--workers", "0"], &["--workers"]);
}

#[test]
fn config_file_check_coq_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("prod.toml"), "[check.coq]\nstep_timeout_s = 0\n").unwrap();
    let file = check_example();
    // Found as ./prod.toml, and given with --config.
    refused(
        d,
        &["check", &file],
        &["prod.toml", "[check.coq] step_timeout_s = 0", "at least 1"],
    );
    std::fs::write(
        d.join("other.toml"),
        "[check.coq]\n[check.coq.hammer]\ntimeout_s = 0\n",
    )
    .unwrap();
    refused(
        d,
        &["check", &file, "--config", "other.toml"],
        &["other.toml", "[check.coq] hammer.timeout_s = 0"],
    );
    std::fs::write(d.join("isa.toml"), "[check.isabelle]\nworkers = 0\n").unwrap();
    refused(
        d,
        &["check", &file, "--config", "isa.toml"],
        &["[check.isabelle] workers = 0"],
    );
    // `prod queue work` reads the same section before it connects.
    refused(
        d,
        &[
            "queue",
            "work",
            "--store",
            "host=/nonexistent",
            "--run",
            "r",
        ],
        &["[check.coq] step_timeout_s = 0"],
    );
}

#[cfg(feature = "policy")]
mod policy {
    use super::*;

    #[test]
    fn sampling_training_and_model_options() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sample = ["model", "sample", "--model", "m", "--prompt", "x"];
        let with =
            |extra: &[&'static str]| -> Vec<&str> { sample.iter().chain(extra).copied().collect() };
        refused(
            d,
            &with(&["--temperature", "-1"]),
            &["--temperature", "≥ 0"],
        );
        refused(d, &with(&["--temperature", "nan"]), &["--temperature"]);
        refused(d, &with(&["--top-p", "0"]), &["--top-p", "(0, 1]"]);
        refused(d, &with(&["--top-p", "1.5"]), &["--top-p"]);
        refused(d, &with(&["--n", "0"]), &["--n"]);
        refused(d, &with(&["--max-new-tokens", "0"]), &["--max-new-tokens"]);
        let train = [
            "train", "sft", "--model", "m", "--data", "x.jsonl", "--out", "o",
        ];
        let train_with =
            |extra: &[&'static str]| -> Vec<&str> { train.iter().chain(extra).copied().collect() };
        refused(d, &train_with(&["--lr", "0"]), &["--lr", "> 0"]);
        refused(
            d,
            &train_with(&["--micro-batch", "8", "--macro-batch", "4"]),
            &["--micro-batch 8", "--macro-batch 4"],
        );
        refused(
            d,
            &[
                "model", "init", "--corpus", "c", "--out", "o", "--hidden", "100", "--heads", "3",
            ],
            &["--hidden 100", "--heads 3"],
        );
        refused(
            d,
            &[
                "model", "init", "--corpus", "c", "--out", "o", "--layers", "0",
            ],
            &["--layers"],
        );
        let eval = ["eval", "--model", "m", "--dataset", "ds", "--out", "o"];
        let eval_with =
            |extra: &[&'static str]| -> Vec<&str> { eval.iter().chain(extra).copied().collect() };
        refused(d, &eval_with(&["--k", "1,0"]), &["--k"]);
        refused(
            d,
            &eval_with(&["--final-timeout", "0"]),
            &["--final-timeout"],
        );
        refused(d, &eval_with(&["--theorems", "0"]), &["--theorems"]);
        refused(d, &eval_with(&["--bootstrap", "0"]), &["--bootstrap"]);
        refused(d, &["demo", "--minutes", "0"], &["--minutes", "> 0"]);
    }

    #[test]
    fn rl_config_keys() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let head = "model = \"m\"\ndataset = \"ds\"\n";
        let cases = [
            ("rounds = 0\nlearning_rate = 0.0\n", "rounds = 0"),
            ("learning_rate = 0.0\n", "learning_rate = 0"),
            ("micro_batch = 8\nmacro_batch = 4\n", "macro_batch = 4"),
            ("[sampling]\ntop_p = 0.0\n", "sampling.top_p = 0"),
            ("[coq]\nstep_timeout_s = 0\n", "coq.step_timeout_s = 0"),
        ];
        for (body, wanted) in cases {
            std::fs::write(d.join("rl.toml"), format!("{head}{body}")).unwrap();
            refused(
                d,
                &["rl", "--config", "rl.toml", "--out", "run"],
                &["rl.toml", wanted],
            );
            assert!(!d.join("run").exists(), "nothing is started for {body:?}");
        }
    }

    /// Temperature 0 is greedy sampling, not an error: every sample is the same.
    #[test]
    fn temperature_zero_samples_greedily() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let corpus: String = (0..20)
            .map(|i| format!("Lemma l{i} : {i} + 0 = {i}. Proof. lia. Qed.\n"))
            .collect();
        std::fs::write(d.join("corpus.txt"), corpus).unwrap();
        let init = [
            "model",
            "init",
            "--corpus",
            "corpus.txt",
            "--vocab-size",
            "300",
            "--hidden",
            "32",
            "--layers",
            "1",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--intermediate",
            "64",
            "--out",
            "m",
        ];
        let (code, _, err) = prod_in(d, &init);
        assert_eq!(code, 0, "{err}");
        let sample = [
            "model",
            "sample",
            "--model",
            "m",
            "--prompt",
            "Lemma",
            "--temperature",
            "0",
            "--top-p",
            "1",
            "--n",
            "3",
            "--max-new-tokens",
            "6",
            "--json",
        ];
        let (code, out, err) = prod_in(d, &sample);
        assert_eq!(code, 0, "{err}");
        let texts: Vec<String> = out
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["text"].to_string())
            .collect();
        assert_eq!(texts.len(), 3, "{out}");
        assert!(texts.iter().all(|t| *t == texts[0]), "{texts:?}");
    }
}

/// A prover root that is not one is bad input, named by its flag, before any Coq starts.
#[test]
fn coq_root_must_be_a_root() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = check_example();
    let not_a_root = d.to_str().unwrap();
    refused(
        d,
        &["check", &file, "--coq-root", not_a_root],
        &["--coq-root", "not a Debian root", "install-rocq.sh"],
    );
    refused(
        d,
        &["bench", "check", "--coq-root", not_a_root],
        &["--coq-root", "not a Debian root"],
    );
}

//! `prod experiment` through the binary: `--help` with its examples, bad input (exit 2), and a
//! tiny end-to-end run with the real Coq killed (SIGKILL) mid-way and rerun: the rerun skips
//! the stages that finished and completes the table.
#![cfg(feature = "policy")]

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{line, SOURCE};

fn write_fixture(d: &Path) {
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    let add = line(
        "t_add",
        "Lemma t_add : forall n : nat, n + 0 = n.",
        "<no_invoke> intros n. lia.",
        &[],
        "wo_lemmas",
    );
    let dbl_line = line(
        "t_double",
        "Lemma t_double : forall n : nat, double n = 2 * n.",
        &format!("<use_invoke> <invoke> {dbl} </invoke> intros n. rewrite dbl. lia."),
        &[dbl],
        "wo_lemmas",
    );
    let dbl_wl = line(
        "t_double",
        "Lemma t_double : forall n : nat, double n = 2 * n.",
        "<no_invoke> intros n. unfold double. lia.",
        &[],
        "w_lemmas",
    );
    let data = d.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("sft.jsonl"), format!("{add}{dbl_line}{dbl_wl}")).unwrap();
    std::fs::write(data.join("train_wl.jsonl"), format!("{add}{dbl_wl}")).unwrap();
    std::fs::write(data.join("rl.jsonl"), format!("{add}{dbl_line}")).unwrap();
    std::fs::write(
        data.join("test.jsonl"),
        line(
            "h_zero",
            "Lemma h_zero : forall n : nat, 0 + n = n.",
            "<no_invoke> intros n. lia.",
            &[],
            "wo_lemmas",
        ),
    )
    .unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": SOURCE, "reduced": SOURCE});
    std::fs::write(data.join("sources.jsonl"), src.to_string() + "\n").unwrap();
    std::fs::write(
        d.join("corpus.txt"),
        format!("{SOURCE}\n{dbl}\nintros n. lia. rewrite dbl.\n").repeat(20),
    )
    .unwrap();
    let st = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args([
            "model",
            "init",
            "--corpus",
            "corpus.txt",
            "--vocab-size",
            "300",
            "--out",
            "base",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    std::fs::write(
        d.join("exp.toml"),
        "base_model = \"base\"\ndataset = \"data\"\nsft_steps = 1\nrounds = 1\nbatch = 2\nrl_depth = 1\ntheorems = 0\n\
         curve_theorems = 1\ncurve_samples = 2\nbootstrap = 20\n\
         [sampling]\nmax_new_tokens = 8\ncontext_tokens = 48\ndecode_weights = \"f32\"\n[coq]\nhammer = false\n[rl]\nmax_seq_len = 256\n",
    )
    .unwrap();
}

fn prod(d: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(args)
        .current_dir(d)
        .output()
        .unwrap()
}

#[test]
fn help_shows_an_example_and_bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let help = String::from_utf8(prod(d, &["experiment", "--help"]).stdout).unwrap();
    assert!(
        help.lines()
            .any(|l| l.trim() == "prod experiment --out runs/table2"),
        "{help}"
    );
    std::fs::write(d.join("bad.toml"), "roundz = 2\n").unwrap();
    let o = prod(d, &["experiment", "--config", "bad.toml", "--out", "o"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("roundz"));
    let o = prod(d, &["experiment", "--base-model", "nowhere", "--out", "o"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = prod(d, &["experiment", "--samples", "4", "--out", "o"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("samples"));
    // Given SFT models come in pairs, and must be there.
    let o = prod(d, &["experiment", "--sft-model", "m", "--out", "o"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sft-nolemma-model"));
    let o = prod(
        d,
        &[
            "experiment",
            "--sft-model",
            "m",
            "--sft-nolemma-model",
            "n",
            "--out",
            "o",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sft_models: no model at m"));
}

#[test]
fn a_killed_experiment_resumes_skipping_finished_stages() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_fixture(d);
    let args = [
        "experiment",
        "--config",
        "exp.toml",
        "--out",
        "out",
        "--workers",
        "1",
        "--json",
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(args)
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once both SFT stages are finished (their markers written).
    let deadline = Instant::now() + Duration::from_secs(120);
    while !d.join("out/sft_nolemma/done.json").exists() && Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(d.join("out/sft/done.json").exists());
    let o = prod(d, &args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("[sft] finished before, skipped"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ran: Vec<&str> = v["ran"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        !ran.contains(&"sft") && ran.contains(&"eval-rl_nolemma"),
        "{ran:?}"
    );
    assert_eq!(v["methods"].as_array().unwrap().len(), 4);
    let table = std::fs::read_to_string(d.join("out/table.md")).unwrap();
    assert!(table.contains("| RL w/o lemma proposal |"), "{table}");
}

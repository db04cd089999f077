//! `prod dataset build` + `validate` on a user's own project (`prod-library`'s fixture
//! `tests/data/project_r`: `-R src MyLib`, unqualified imports), with stderr not a terminal:
//! the imports come out qualified, validation prints progress lines, and a context that does not
//! load (MyLib is not installed where the checker looks) is reported once per file with Coq's
//! reason — at once, not after the context deadline. Skipped without `coqtop`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn prod(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(args)
        .output()
        .expect("prod runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn project_dataset_validates_with_progress_and_one_report_per_broken_context() {
    if Command::new("coqtop").arg("-v").output().is_err() {
        eprintln!("SKIP: coqtop not installed");
        return;
    }
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../prod-library/tests/data/project_r");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("ds");
    let (code, _, err) = prod(&[
        "dataset",
        "build",
        "--library",
        fixture.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--unit",
        "file",
    ]);
    assert_eq!(code, 0, "{err}");
    let sources = std::fs::read_to_string(dir.join("sources.jsonl")).unwrap();
    assert!(
        sources.contains("From MyLib Require Import Base."),
        "{sources}"
    );

    let t = Instant::now();
    let (code, stdout, err) = prod(&[
        "dataset",
        "validate",
        dir.to_str().unwrap(),
        "--split",
        "train",
        "--sample",
        "50",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let counts: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let checked = counts["checked"].as_u64().unwrap();
    let (proved, infra) = (
        counts["proved"].as_u64().unwrap(),
        counts["infra"].as_u64().unwrap(),
    );
    // Base has no imports and loads; Mid and Top need MyLib bound, which the checker is not.
    assert!(
        proved >= 2 && infra >= 2 && proved + infra == checked,
        "{counts} {err}"
    );
    assert!(
        err.contains(&format!("validate: {checked}/{checked} checked")),
        "{err}"
    );
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("context does not load ("))
        .collect();
    assert_eq!(reports.len(), 2, "{err}");
    assert!(reports.iter().all(|l| l.contains("MyLib")), "{err}");
    assert!(!err.lines().any(|l| l.starts_with("miss ")), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(120),
        "took {:?}",
        t.elapsed()
    );
}

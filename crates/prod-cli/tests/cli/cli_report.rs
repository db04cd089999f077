//! `prod report`: writes report.html, summary.md and the figures from a run file (the
//! prod-report fixtures), and rejects bad input with exit 2 naming the position.

use super::common::prod;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../prod-report/tests/data")
        .join(name)
}

#[test]
fn writes_the_report_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let (code, stdout, stderr) = prod(&[
        "report",
        fixture("full.json").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["figures"].as_array().unwrap().len(), 8, "{v}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    // The summary is exactly the library's golden Markdown for this run.
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert_eq!(md, std::fs::read_to_string(fixture("full.md")).unwrap());
    let svg = std::fs::read_to_string(out.join("pass-at-k.svg")).unwrap();
    assert_eq!(
        svg,
        std::fs::read_to_string(fixture("full.pass-at-k.svg")).unwrap()
    );
}

#[test]
fn bad_json_is_exit_2_with_position() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.json");
    std::fs::write(
        &run,
        "{\n  \"title\": \"x\",\n  \"evaluations\": [ { \"name\": 3 } ]\n}\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (code, _, stderr) = prod(&[
        "report",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("line 3 column"), "{stderr}");
    assert!(
        !out.join("report.html").exists(),
        "nothing is written for bad input"
    );
    let (code, _, stderr) = prod(&[
        "report",
        dir.path().join("missing.json").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("missing.json"), "{stderr}");
}

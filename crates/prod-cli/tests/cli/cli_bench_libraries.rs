//! `prod bench libraries` on one installed Debian library (CoqHammer's, which the test suite
//! installs): its row counts what the build found, every sampled ground-truth proof is checked
//! by the real Coq, a rerun reuses the saved row, and an unknown package is bad input.

use super::common::prod;

use crate::common;

#[test]
fn one_library_row_is_checked_saved_and_reused() {
    if !common::have_coq_hammer() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench");
    let args = [
        "bench",
        "libraries",
        "--only",
        "libcoq-hammer",
        "--sample",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let (code, stdout, err) = prod(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let row = &v["rows"][0];
    assert_eq!(row["library"], "libcoq-hammer", "{v}");
    assert!(row["files"].as_u64().unwrap() >= 1, "{v}");
    assert!(row["examples"].as_u64().unwrap() >= 4, "{v}");
    let counts = &row["counts"];
    assert_eq!(counts["checked"], 4, "{v}");
    assert_eq!(counts["proved"], 4, "{v}\n{err}");
    assert!(out.join("libcoq-hammer/bench.json").is_file());
    // A rerun with the same sample reuses the saved row instead of checking again.
    let (code, stdout2, err) = prod(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("done before"), "{err}");
    let v2: serde_json::Value = serde_json::from_str(stdout2.trim()).unwrap();
    assert_eq!(v2["rows"][0]["counts"], v["rows"][0]["counts"]);
}

#[test]
fn unknown_package_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = prod(&[
        "bench",
        "libraries",
        "--only",
        "libcoq-no-such-library",
        "--out",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("libcoq-no-such-library"), "{err}");
}

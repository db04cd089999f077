//! `prod bench hammer` with the real Coq and CoqHammer's fixed tactic list (the provers off, to
//! keep the suite quick): a goal the list closes and one it cannot (an induction), the closing
//! tactic and phase in the rows, a rerun that measures nothing again, and bad input (an unknown
//! profile, a profile listed twice, a missing split).

use super::common::prod;

use crate::common;

fn write_dataset(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let lines = [
        common::line(
            "add0",
            "Lemma add0 : forall n : nat, n + 0 = n.",
            "<no_invoke> intros n. lia.",
            &[],
            "",
        ),
        common::line(
            "dbl_even",
            "Lemma dbl_even : forall n : nat, Nat.even (double n) = true.",
            "<no_invoke> intros n. induction n; simpl; auto.",
            &[],
            "",
        ),
    ];
    std::fs::write(dir.join("test.jsonl"), lines.concat()).unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture",
        "flags": [], "source": common::SOURCE, "reduced": common::SOURCE});
    std::fs::write(dir.join("sources.jsonl"), src.to_string() + "\n").unwrap();
}

#[test]
fn the_fixed_list_closes_what_it_can_under_each_profile_and_a_rerun_resumes() {
    if !common::have_coq_hammer() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_dataset(&data);
    let out = tmp.path().join("bench");
    let args = [
        "bench",
        "hammer",
        "--dataset",
        data.to_str().unwrap(),
        "--profiles",
        "fixed-only",
        "--workers",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let (code, stdout, err) = prod(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (v["theorems"].as_u64(), v["complete"].as_u64()),
        (Some(2), Some(2))
    );
    for p in v["profiles"].as_array().unwrap() {
        assert_eq!(p["proved"], 1, "{p}");
        assert_eq!(
            (p["by_fixed"].as_u64(), p["by_provers"].as_u64()),
            (Some(1), Some(0))
        );
        assert_eq!(p["by_tactic"]["lia"], 1, "{p}");
    }
    assert_eq!(v["against_first"], serde_json::json!([]));
    let rows = std::fs::read_to_string(out.join("rows.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(
        rows.contains(r#""closed_by":"lia.","phase":"fixed""#),
        "{rows}"
    );

    // A rerun measures nothing again and reports the same goals, as text.
    let text_args: Vec<&str> = args[..args.len() - 1].to_vec();
    let (code, stdout, err) = prod(&text_args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(out.join("rows.jsonl")).unwrap(),
        rows
    );
    assert!(
        stdout.contains("| fixed-only | 1 / 2 | 1 | 0 |"),
        "{stdout}"
    );
    assert!(stdout.contains("fixed-only closed by: lia 1"), "{stdout}");
}

#[test]
fn bad_profiles_and_splits_are_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_dataset(&data);
    let out = tmp.path().join("bench");
    let base = ["bench", "hammer", "--dataset", data.to_str().unwrap()];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        prod(&a)
    };
    let (code, _, err) = run(&["--profiles", "default,quick"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("quick"), "{err}");
    let (code, _, err) = run(&["--profiles", "default,default"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("listed twice"), "{err}");
    let (code, _, err) = run(&["--split", "val"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("val.jsonl"), "{err}");
}

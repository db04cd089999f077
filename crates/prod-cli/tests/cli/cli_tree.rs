//! `prod tree solve` against data files: `tests/data/tree/NAME.jsonl` beside the expected
//! outputs `NAME.expected` (refresh with `UPDATE_EXPECT=1 cargo test -p prod-cli`).

use super::common::prod;
use std::path::{Path, PathBuf};
use std::process::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tree")
        .join(name)
}

fn expect(name: &str, actual: &str) {
    let path = data(name);
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}: run with UPDATE_EXPECT=1", path.display()));
    assert_eq!(
        actual,
        want,
        "output differs from {} (UPDATE_EXPECT=1 to refresh)",
        path.display()
    );
}

#[test]
fn solve_json() {
    let (code, out, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    expect("basic.solve.expected", &out);
    // The interface: one object per input node, same order, exactly these fields.
    let ids: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ids,
        [
            "root",
            "plus_zero_a",
            "plus_zero_b",
            "cyc_a",
            "cyc_b",
            "other_ctx",
            "needs_other_ctx",
            "unchecked_child"
        ]
    );
}

#[test]
fn solve_table() {
    let (code, out, _) = prod(&["tree", "solve", data("basic.jsonl").to_str().unwrap()]);
    assert_eq!(code, 0);
    expect("basic.table.expected", &out);
}

#[test]
fn assemble_root() {
    let (code, out, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--assemble",
        "root",
    ]);
    assert_eq!(code, 0, "{err}");
    expect("basic.assemble_root.expected", &without_tags(&out));
}

/// The final check's file with its random tags (`prod_root_anchor_…`) as `TAG`.
fn without_tags(file: &str) -> String {
    let mut out = file.to_string();
    for prefix in ["prod_root_anchor_", "prod_root_same_"] {
        let mut at = 0;
        while let Some(i) = out[at..].find(prefix) {
            let start = at + i + prefix.len();
            let end = start
                + out[start..]
                    .find(|c: char| !c.is_ascii_hexdigit())
                    .unwrap_or(out.len() - start);
            out.replace_range(start..end, "TAG");
            at = start;
        }
    }
    out
}

#[test]
fn assemble_refuses_incorrect_and_unknown() {
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--assemble",
        "cyc_a",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("not globally correct"), "{err}");
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--assemble",
        "nope",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no node with id 'nope'"), "{err}");
}

#[test]
fn bad_input_names_the_line() {
    let (code, out, err) = prod(&[
        "tree",
        "solve",
        data("bad_proof.jsonl").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("line 2") && err.contains("byte 13"), "{err}");
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        data("bad_json.jsonl").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("line 2"), "{err}");
    let (code, _, err) = prod(&["tree", "solve", "/nonexistent/file.jsonl"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot open"), "{err}");
}

/// The assembled proof is a complete file: the real `coqc` compiles it alone (its imports and
/// context included), and `Print Assumptions` finds no axiom (the proposed lemma is proved,
/// not admitted).
#[test]
fn assembled_proof_compiles_with_real_coq() {
    let (code, text, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--assemble",
        "root",
    ]);
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("Assembled.v");
    std::fs::write(&file, format!("{text}\nPrint Assumptions add_0_r_twice.\n")).unwrap();
    let out = match Command::new("coqc")
        .arg("-q")
        .arg(&file)
        .current_dir(dir.path())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            panic!("coqc is required for this test (scripts/install-deps.sh installs it): {e}")
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "coqc failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Closed under the global context"),
        "{stdout}"
    );
}

/// Proposals whose meaning depends on where they are read (a tactic in the statement, a sibling
/// proposal's name) are never proved by another node, even when every node claims local
/// correctness: the tree of `False` stays not proved; the honest tree beside it is proved.
#[test]
fn context_dependent_proposals_prove_nothing() {
    let (code, out, err) = prod(&[
        "tree",
        "solve",
        data("context_dependent.jsonl").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let verdict = |id: &str| -> serde_json::Value {
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["id"] == id)
            .unwrap()["globally_correct"]
            .clone()
    };
    assert_eq!(verdict("root"), serde_json::json!(false), "{out}");
    assert_eq!(verdict("root2"), serde_json::json!(false), "{out}");
    assert_eq!(verdict("honest"), serde_json::json!(true), "{out}");
    expect("context_dependent.solve.expected", &out);
}

/// `prod check`'s input is `tree solve`'s input, and `check --json`'s output its local verdicts
/// (--verdicts): ids as numbers or strings, `imports` part of what a child must share, a
/// proof that is not a conditional proof rejected by check and locally incorrect here.
#[test]
fn tree_solve_reads_what_check_reads_and_writes() {
    let nodes = data("check_then_solve.jsonl");
    let (code, checked, err) =
        prod(&["check", nodes.to_str().unwrap(), "--json", "--workers", "1"]);
    assert_eq!(code, 0, "{err}");
    let kinds: Vec<String> = checked
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["verdict"].to_string())
        .collect();
    assert_eq!(
        kinds,
        [
            "\"proved\"",
            "\"proved\"",
            "\"rejected\"",
            "\"failed\"",
            "\"proved\"",
            "\"proved\""
        ],
        "{checked}"
    );
    let dir = tempfile::tempdir().unwrap();
    let verdicts = dir.path().join("verdicts.jsonl");
    std::fs::write(&verdicts, &checked).unwrap();
    let (code, out, err) = prod(&[
        "tree",
        "solve",
        nodes.to_str().unwrap(),
        "--verdicts",
        verdicts.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let global: Vec<String> = out.lines().map(String::from).collect();
    assert_eq!(
        global,
        [
            r#"{"id":1,"globally_correct":true}"#,
            r#"{"id":"pz","globally_correct":true}"#,
            r#"{"id":"garbage","globally_correct":false}"#,
            r#"{"id":"wrong","globally_correct":false}"#,
            r#"{"id":"zk_plain","globally_correct":true}"#,
            // Its lemma is proved only under other imports.
            r#"{"id":"root3","globally_correct":false}"#,
        ]
    );
    let (code, text, err) = prod(&[
        "tree",
        "solve",
        nodes.to_str().unwrap(),
        "--verdicts",
        verdicts.to_str().unwrap(),
        "--assemble",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("Lemma") && !text.contains("<invoke>"),
        "{text}"
    );

    // Bad input, each exit 2 naming what is wrong.
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let misspelt = write(
        "misspelt.jsonl",
        r#"{"id": "a", "contxt": "", "statement": "Lemma a : True.", "proof": "<no_invoke> exact I."}"#,
    );
    for cmd in [vec!["tree", "solve", &misspelt], vec!["check", &misspelt]] {
        let (code, _, err) = prod(&cmd);
        assert_eq!(code, 2, "{cmd:?}: {err}");
        assert!(err.contains("unknown field `contxt`"), "{cmd:?}: {err}");
    }
    let stray = write(
        "stray.jsonl",
        &format!("{checked}{{\"id\": \"nobody\", \"verdict\": \"proved\"}}\n"),
    );
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        nodes.to_str().unwrap(),
        "--verdicts",
        &stray,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not nodes: nobody"), "{err}");
    let twice = write("twice.jsonl", &format!("{checked}{checked}"));
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        nodes.to_str().unwrap(),
        "--verdicts",
        &twice,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("line 7: a second verdict for id '1'"), "{err}");
    let (code, _, err) = prod(&[
        "tree",
        "solve",
        data("basic.jsonl").to_str().unwrap(),
        "--verdicts",
        verdicts.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give one of them"), "{err}");
}

#[test]
fn an_empty_input_is_said_not_silent() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let (code, out, err) = prod(&["check", empty.to_str().unwrap(), "--json"]);
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(err.contains("no nodes, nothing to check"), "{err}");
}

/// `tree solve` decides roots, so it runs the canary alarm every such path runs
/// (`prod_prover::canary_alarm`): a node stating `0 = 1` that comes out accepted (here through
/// a lemma, on claimed local verdicts) is reported on stderr and the command exits 3 after
/// printing its verdicts; a canary that is not accepted is no alarm.
#[test]
fn an_accepted_canary_is_a_soundness_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: &[serde_json::Value]| {
        let p = dir.path().join(name);
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let root = serde_json::json!({"id": "root", "statement": "Theorem bad : 0 = 1.",
        "proof": "<use_invoke> <invoke> Lemma b : 0 = 1. </invoke> exact b.", "locally_correct": true});
    let child = |claim: bool| {
        serde_json::json!({"id": "child", "statement": "Lemma b2 : forall n : nat, n = S n.",
            "proof": "<no_invoke> admit.", "locally_correct": claim})
    };
    let lemma = serde_json::json!({"id": "lemma", "statement": "Lemma b : 0 = 1.",
        "proof": "<use_invoke> <invoke> Lemma b2 : forall n : nat, n = S n. </invoke> exact (b2 0).",
        "locally_correct": true});
    let accepted = write(
        "accepted.jsonl",
        &[root.clone(), lemma.clone(), child(true)],
    );
    let (code, out, err) = prod(&["tree", "solve", &accepted, "--json"]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    for id in ["\"root\"", "\"lemma\"", "\"child\""] {
        assert!(err.contains("SOUNDNESS ALARM") && err.contains(id), "{err}");
    }
    let refused = write("refused.jsonl", &[root, lemma, child(false)]);
    let (code, out, err) = prod(&["tree", "solve", &refused, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("ALARM"), "{err}");
    assert!(
        out.contains(r#"{"id":"root","globally_correct":false}"#),
        "{out}"
    );
}

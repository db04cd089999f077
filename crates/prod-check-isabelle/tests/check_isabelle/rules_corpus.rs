//! The cheat corpus (`tests/data/cheats.txt`): every text is Rejected before any server call, with
//! the reasons in `tests/data/cheats.expected` (refresh with `UPDATE_EXPECT=1`); the honest
//! corpus (`tests/data/honest.txt`) passes the rules.

use crate::common;

use prod_check::{CheckRequest, Checker, Verdict};
use prod_check_isabelle::{plan, IsabelleCheckConfig, IsabelleChecker};
use prod_core::ConditionalProof;

const GOAL: &str = "lemma goal: \"x = x\"";

struct Case {
    name: String,
    kind: String,
    text: String,
}

fn cases(file: &str) -> Vec<Case> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out: Vec<Case> = vec![];
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("=== ") {
            let (name, kind) = head.split_once(' ').unwrap();
            out.push(Case {
                name: name.into(),
                kind: kind.trim_matches(['(', ')']).into(),
                text: String::new(),
            });
        } else if line.starts_with('#') && out.is_empty() {
            continue;
        } else if let Some(c) = out.last_mut() {
            if !c.text.is_empty() {
                c.text.push('\n');
            }
            c.text.push_str(line);
        }
    }
    out
}

fn request(c: &Case) -> CheckRequest {
    let (statement, proof) = match c.kind.as_str() {
        "proof" => (GOAL.to_string(), c.text.clone()),
        "statement" => (c.text.clone(), "<no_invoke> by simp".to_string()),
        "lemma" => (
            GOAL.to_string(),
            format!("<use_invoke> <invoke> {} </invoke> by simp", c.text),
        ),
        k => panic!("unknown case kind {k}"),
    };
    let proof = ConditionalProof::parse_with(&proof, &prod_isar::IsarLanguage)
        .unwrap_or_else(|e| panic!("{}: {e:?}", c.name));
    CheckRequest::new("Main", "", &statement, proof)
}

#[test]
fn cheats_are_rejected_before_any_server_call() {
    let cases = cases("cheats.txt");
    assert!(cases.len() >= 25, "only {} cheats", cases.len());
    // A real listener that counts connections: none may be made.
    let fake = common::Fake::start(false);
    let cfg = IsabelleCheckConfig {
        server: fake.addr.clone(),
        password: common::PASSWORD.into(),
        ..Default::default()
    };
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    let requests: Vec<CheckRequest> = cases.iter().map(request).collect();
    let verdicts = checker.check_batch(&requests, &|_, _| {});
    let mut report = String::new();
    for (c, v) in cases.iter().zip(&verdicts) {
        match v {
            Verdict::Rejected { reason } => report.push_str(&format!("{}: {reason}\n", c.name)),
            other => panic!("{} was not rejected: {other:?}", c.name),
        }
    }
    assert_eq!(checker.connections_opened(), 0);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(fake.accepts.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(fake.commands().is_empty());
    let expected = format!("{}/tests/data/cheats.expected", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected, &report).unwrap();
    }
    let want = std::fs::read_to_string(&expected).unwrap_or_default();
    assert_eq!(
        report, want,
        "rejection reasons changed (UPDATE_EXPECT=1 to accept)"
    );
}

#[test]
fn honest_texts_pass_the_rules() {
    let cases = cases("honest.txt");
    assert!(cases.len() >= 10);
    for c in &cases {
        if let Err(v) = plan(&request(c)) {
            panic!("{} was refused: {v:?}", c.name);
        }
    }
}

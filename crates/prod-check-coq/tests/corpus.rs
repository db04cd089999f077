//! The soundness corpus: cheating attempts (none may be proved) and honest proofs (all proved),
//! checked by the real Coq. Data: `tests/data/{cheats,honest}.jsonl`.

mod common;

use prod_check::{Checker, Verdict};
use prod_check_coq::CoqChecker;

#[test]
fn no_cheat_is_proved_and_every_honest_proof_is() {
    let cheats = common::load("cheats.jsonl");
    let honest = common::load("honest.jsonl");
    assert!(cheats.len() >= 40);
    let checker = CoqChecker::new(common::config(2)).unwrap();
    // Where the plugin builds, the pool must use it (its `ProdAssumptions` then decides every
    // `proved` below); elsewhere the corpus runs on `Print Assumptions`.
    let builds = prod_check_coq::plugin::ensure_built(&checker.config().plugin_dir()).is_ok();
    assert_eq!(checker.config().plugin.is_some(), builds);
    eprintln!("assumptions by: {}", checker.config().assumptions_command());
    let all: Vec<&common::Case> = cheats.iter().chain(honest.iter()).collect();
    let requests: Vec<_> = all.iter().map(|c| common::request(c)).collect();
    let verdicts = checker.check_batch(&requests, &|_, _| {});
    let mut problems = vec![];
    for (c, v) in all.iter().zip(&verdicts) {
        let kind = v.kind().as_str();
        let ok = match c.expect.as_str() {
            "not_proved" => !v.is_proved() && kind != "infra",
            e => kind == e,
        };
        if !ok {
            problems.push(format!("{}: expected {}, got {:?}", c.id, c.expect, v));
        }
        if let (Some(want), Verdict::Proved { axioms, .. }) = (&c.axioms, v) {
            if want != axioms {
                problems.push(format!(
                    "{}: expected axioms {want:?}, got {axioms:?}",
                    c.id
                ));
            }
        }
        // The soundness property itself, stated separately from the expected kinds.
        if c.expect != "proved" {
            assert!(!v.is_proved(), "CHEAT PROVED: {} {:?}", c.id, v);
        }
    }
    for (c, v) in all.iter().zip(&verdicts) {
        eprintln!("{:28} {}", c.id, serde_json::to_string(v).unwrap());
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

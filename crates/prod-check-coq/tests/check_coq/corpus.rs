//! The soundness corpus: cheating attempts (none may be proved) and honest proofs (all proved),
//! checked by the real Coq, on every supported prover version (`common::provers`). Data:
//! `tests/data/{cheats,honest}.jsonl`.

use crate::common;

use std::path::PathBuf;

use prod_check::{Checker, Verdict};
use prod_check_coq::CoqChecker;

#[test]
fn no_cheat_is_proved_and_every_honest_proof_is() {
    let _machine = common::whole_machine();
    for (version, root) in common::provers() {
        check_corpus(version, &root);
    }
}

fn check_corpus(version: &str, root: &Option<PathBuf>) {
    let cheats = common::load("cheats.jsonl");
    let honest = common::load("honest.jsonl");
    assert!(cheats.len() >= 40);
    let checker = CoqChecker::new(common::config_for(2, root)).unwrap();
    // The plugin is loaded on both releases (the term audit decides every `proved` below);
    // on 8.16 its `ProdAssumptions` prints the assumptions too.
    assert!(checker.config().plugin.is_some());
    if root.is_none() {
        assert_eq!(
            checker.config().assumptions_command(),
            prod_check_coq::plugin::PRINT_COMMAND
        );
    }
    eprintln!(
        "{version}: {}; assumptions by: {}",
        checker.fingerprint(),
        checker.config().assumptions_command()
    );
    let all: Vec<&common::Case> = cheats.iter().chain(honest.iter()).collect();
    let verdicts = common::check_cases(version, root, &all);
    let mut problems = vec![];
    for (c, v) in all.iter().zip(&verdicts) {
        let kind = v.kind().as_str();
        let ok = match c.expect.as_str() {
            "not_proved" => !v.is_proved() && kind != "infra",
            e => kind == e,
        };
        if !ok {
            problems.push(format!(
                "{version}: {}: expected {}, got {:?}",
                c.id, c.expect, v
            ));
        }
        if let (Some(want), Verdict::Proved { axioms, .. }) = (&c.axioms, v) {
            if !common::same_axioms(want, axioms) {
                problems.push(format!(
                    "{version}: {}: expected axioms {want:?}, got {axioms:?}",
                    c.id
                ));
            }
        }
        // The soundness property itself, stated separately from the expected kinds.
        if c.expect != "proved" {
            assert!(
                !v.is_proved(),
                "CHEAT PROVED on {version}: {} {:?}",
                c.id,
                v
            );
        }
    }
    for (c, v) in all.iter().zip(&verdicts) {
        eprintln!(
            "{version} {:28} {}",
            c.id,
            serde_json::to_string(v).unwrap()
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

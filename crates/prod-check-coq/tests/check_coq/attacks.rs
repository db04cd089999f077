//! Red-team corpus: attacks on the Coq checker's soundness (none may be proved, none may end in
//! `infra`) next to honest look-alikes (all proved), checked by the real Coq. Data:
//! `tests/data/attacks.jsonl`. The family of a case is the prefix of its id:
//!
//! * `lex_` — the checker's sentence splitter against Coq's lexer (glued comments, dots,
//!   blanks Coq does or does not take for blanks, bullets, braces, selectors, strings);
//! * `ax_` — axioms of the context with the short name of a proposed lemma (modules, `Import`,
//!   functors, aliases, sections): a proof that is legitimately proved relative to a context
//!   axiom must report that axiom, not only the proposal;
//! * `st_` — statements whose meaning depends on where they are read (tactic quotations,
//!   proposals naming each other, proposals that capture a name of the node's statement,
//!   universe levels);
//! * `int_` — checks stopped by Coq's timeout or the watchdog;
//! * `k_` — Coq 8.16.1's own kernel weaknesses reachable from tactic text (VM casts, native
//!   casts, `*_no_check`, fixpoints);
//! * `fixs_` — fixpoints carried by statements: a node's statement or a proposed lemma (or a
//!   let-binder of one) holding 8.16.1's ill-guarded fixpoint, used by a proof that never
//!   writes `fix`;
//! * `sp_` — SProp terms that reach 8.16.1's conversion bug without `*_no_check`;
//! * `ctx_` — a context's `Admitted`/`Axiom`/`Parameter`/`Conjecture` constants, which excuse
//!   nothing unless the case's `allowed_axioms` names them;
//! * `kind_` — text a proof prints that names an infrastructure failure or a time-out: the
//!   verdict's kind comes from what the checker knows;
//! * `t0_` — a `t0` that disagrees with the proof's blocks;
//! * `bf_` — fixpoints built at run time from terms that hold none (Ltac2's `Constr.Unsafe`,
//!   Ltac1's `context` substitution of a library fixpoint or cofixpoint, inside `abstract` or
//!   beside a proposal): refused by the term audit of the kernel's term (and the Ltac2 builders
//!   by the text rules first); honest proofs that unfold library fixpoints are proved.
//!
//! Honest look-alikes have `_ok_` in their id; every other case is an attack. An attack either
//! expects a kind that is not `proved` (`not_proved` = anything but `proved` and `infra`), or
//! (`ax_` only) expects `proved` with an exact axiom list. A case's optional `allowed_axioms`
//! are allowed by its checker (cases are checked in groups of equal lists). Some `st_` attacks are one node of a
//! proof tree whose other nodes are honest-looking `st_ok_` cases (the lemma a parent proposes
//! is the statement of a child): each node alone looks fine, the tree proves `False`. The
//! optional `note` field of a line (ignored by the loader) says what the case is after.
//!
//! `PROD_ATTACKS_ONLY=id1,id2` runs only the named cases (for investigating one attack; the
//! family-size checks are skipped then).

use crate::common;

use prod_check::Verdict;

const FAMILIES: [&str; 11] = [
    "lex_", "ax_", "st_", "int_", "k_", "fixs_", "sp_", "ctx_", "kind_", "t0_", "bf_",
];

fn is_honest(c: &common::Case) -> bool {
    c.id.contains("_ok_")
}

#[test]
fn no_attack_is_proved_and_every_look_alike_is() {
    let _machine = common::shared_machine();
    let all = common::load("attacks.jsonl");
    let only: Option<Vec<String>> = std::env::var("PROD_ATTACKS_ONLY")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());

    // The corpus itself: unique ids, every case in a family, honest cases expect `proved`,
    // attacks that expect `proved` pin their axioms.
    let mut ids = std::collections::HashSet::new();
    for c in &all {
        assert!(ids.insert(c.id.as_str()), "duplicate id {}", c.id);
        assert!(
            FAMILIES.iter().any(|f| c.id.starts_with(f)),
            "{}: id has no family prefix",
            c.id
        );
        if is_honest(c) {
            assert_eq!(
                c.expect, "proved",
                "{}: a look-alike must expect proved",
                c.id
            );
        } else if c.expect == "proved" {
            assert!(
                c.id.starts_with("ax_") && c.axioms.is_some(),
                "{}: an attack expecting `proved` must be an `ax_` case with its axioms",
                c.id
            );
        }
    }
    if only.is_none() {
        for f in FAMILIES {
            let attacks = all
                .iter()
                .filter(|c| c.id.starts_with(f) && !is_honest(c))
                .count();
            assert!(attacks >= 5, "family {f}: only {attacks} attacks");
        }
        let honest = all.iter().filter(|c| is_honest(c)).count();
        assert!(honest >= 8, "only {honest} honest look-alikes");
    }

    let cases: Vec<&common::Case> = all
        .iter()
        .filter(|c| only.as_ref().is_none_or(|o| o.contains(&c.id)))
        .collect();
    for (version, root) in common::provers() {
        check_cases(version, &root, &cases);
    }
}

/// Every case on one prover version.
fn check_cases(version: &str, root: &Option<std::path::PathBuf>, cases: &[&common::Case]) {
    let start = std::time::Instant::now();
    let verdicts = common::check_cases(version, root, cases);
    eprintln!(
        "{} cases in {:.1} s",
        cases.len(),
        start.elapsed().as_secs_f64()
    );
    let mut problems = vec![];
    let mut proved_attacks = vec![];
    for (c, v) in cases.iter().zip(&verdicts) {
        let kind = v.kind().as_str();
        let json = serde_json::to_string(v).unwrap();
        eprintln!("{version} {:44} {:10} {}", c.id, c.expect, json);
        let ok = match c.expect.as_str() {
            "not_proved" => !v.is_proved() && kind != "infra",
            e => kind == e,
        };
        if !ok {
            problems.push(format!(
                "{version}: {}: expected {}, got {json}",
                c.id, c.expect
            ));
        }
        if let (Some(want), Verdict::Proved { axioms, .. }) = (&c.axioms, v) {
            if !common::same_axioms(want, axioms) {
                problems.push(format!(
                    "{}: expected axioms {want:?}, got {axioms:?}",
                    c.id
                ));
            }
        }
        if !is_honest(c) && c.expect != "proved" && v.is_proved() {
            proved_attacks.push(format!("{}: {json}", c.id));
        }
        if !is_honest(c) && kind == "infra" {
            problems.push(format!("{}: an attack ended in infra: {json}", c.id));
        }
    }
    // The soundness property itself, reported apart from the expected kinds.
    assert!(
        proved_attacks.is_empty(),
        "ATTACKS PROVED on {version}:\n{}\n\nother problems:\n{}",
        proved_attacks.join("\n"),
        problems.join("\n")
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

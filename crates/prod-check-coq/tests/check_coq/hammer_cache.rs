//! The per-goal memory of `hammer.` results, with the real Coq: a goal met again is answered
//! from it (a remembered tactic re-run by Coq, a remembered failure repeated), the scope keeps
//! other contexts and other admitted lemmas apart, and a wrong memory never proves anything.
//! The provers are off here (the fixed tactic list only): the memory works the same way for
//! both stages, and the suite stays quick.

use crate::common;

use prod_check::{CheckRequest, Checker, Verdict, VerdictKind};
use prod_check_coq::hammer_cache::Outcome;
use prod_check_coq::CoqChecker;
use prod_core::ConditionalProof;

fn coq_here() -> bool {
    let hammer = std::process::Command::new("coqc")
        .arg("-where")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|w| {
            std::path::Path::new(w.trim())
                .join("user-contrib/Hammer")
                .is_dir()
        });
    prod_test_support::require(
        hammer,
        "coqc with CoqHammer is not installed (scripts/install-deps.sh)",
    )
}

fn checker(workers: usize) -> CoqChecker {
    let mut cfg = common::config(workers);
    cfg.hammer.use_atp = false;
    CoqChecker::new(cfg).unwrap()
}

fn req(context: &str, statement: &str, proof: &str) -> CheckRequest {
    CheckRequest::new(
        "From Coq Require Import Arith.",
        context,
        statement,
        ConditionalProof::parse_with(proof, &prod_coq::CoqLanguage).unwrap(),
    )
}

fn replacement(v: &Verdict) -> Option<String> {
    match v {
        Verdict::Proved { replacements, .. } => replacements.first().map(|r| r.tactic.clone()),
        _ => None,
    }
}

#[test]
fn the_same_goal_is_expanded_once_and_answered_from_memory() {
    let _machine = common::shared_machine();
    if !coq_here() {
        return;
    }
    let c = checker(2);
    let h = "<no_invoke> hammer.";
    let batch = [
        req("", "Lemma a : forall n : nat, n + 0 = n.", h),
        // The same goal under another name: the lemma's name is not part of the goal.
        req("", "Lemma b : forall n : nat, n + 0 = n.", h),
        req("", "Lemma c : 2 + 2 = 5.", h),
        req("", "Lemma d : 2 + 2 = 5.", h),
    ];
    let v = c.check_batch(&batch, &|_, _| {});
    let kinds: Vec<VerdictKind> = v.iter().map(Verdict::kind).collect();
    assert_eq!(
        kinds,
        [
            VerdictKind::Proved,
            VerdictKind::Proved,
            VerdictKind::Failed,
            VerdictKind::Failed
        ],
        "{v:?}"
    );
    assert!(replacement(&v[0]).is_some());
    assert_eq!(replacement(&v[0]), replacement(&v[1]));
    assert_eq!(v[2].message(), v[3].message());
    let s = c.hammer_stats().unwrap();
    // Two workers take a and b (then c and d) together: the second waits for the first's
    // result instead of running the fixed list again.
    assert_eq!(
        (
            s.calls,
            s.fixed_closed,
            s.cache_closed,
            s.cache_failed,
            s.atp_calls
        ),
        (4, 1, 1, 1, 0),
        "{s:?}"
    );
    assert_eq!(c.hammer_cache().len(), 2);
}

#[test]
fn other_contexts_and_other_admitted_lemmas_are_other_goals() {
    let _machine = common::shared_machine();
    if !coq_here() {
        return;
    }
    let c = checker(1);
    let goal = "Lemma g : 2 + 2 = k.";
    // The same printed goal: closed where k is 4, not where k is 5, and with an admitted
    // lemma the environment is another one (the provers could use it).
    let v = c.check_batch(
        &[
            req("Definition k := 4.", goal, "<no_invoke> hammer."),
            req("Definition k := 5.", goal, "<no_invoke> hammer."),
            req(
                "Definition k := 5.",
                goal,
                "<use_invoke> <invoke> Lemma l : True. </invoke> hammer.",
            ),
        ],
        &|_, _| {},
    );
    assert_eq!(v[0].kind(), VerdictKind::Proved, "{v:?}");
    assert_eq!(v[1].kind(), VerdictKind::Failed, "{v:?}");
    assert_eq!(v[2].kind(), VerdictKind::Failed, "{v:?}");
    let s = c.hammer_stats().unwrap();
    assert_eq!((s.calls, s.cache_hits(), s.cache_stale), (3, 0, 0), "{s:?}");
    assert_eq!(c.hammer_cache().len(), 3);
}

#[test]
fn a_wrong_memory_never_proves_and_a_refused_tactic_is_expanded_afresh() {
    let _machine = common::shared_machine();
    if !coq_here() {
        return;
    }
    let c = checker(1);
    let goal = |name: &str| format!("Lemma {name} : forall n : nat, n + 0 = n.");
    let h = "<no_invoke> hammer.";
    let first = c.check(&req("", &goal("a"), h));
    let real = replacement(&first).expect("the fixed list proves it");
    // A remembered tactic that does not close the goal: `solve` refuses it, the step is
    // expanded afresh and the tactic Coq accepted is the one recorded.
    c.hammer_cache().rewrite_for_test(|o| {
        *o = Outcome::Closed {
            run: "solve [ idtac ].".into(),
            replacement: "idtac.".into(),
        }
    });
    let second = c.check(&req("", &goal("b"), h));
    assert_eq!(replacement(&second), Some(real.clone()), "{second:?}");
    let s = c.hammer_stats().unwrap();
    assert_eq!((s.cache_stale, s.fixed_closed, s.cache_closed), (1, 2, 0));
    // Even a memory that proposes a sentence Coq accepts without closing the goal proves
    // nothing: the proof is still open at `Qed`.
    c.hammer_cache().rewrite_for_test(|o| {
        *o = Outcome::Closed {
            run: "idtac.".into(),
            replacement: "idtac.".into(),
        }
    });
    let third = c.check(&req("", &goal("c"), h));
    assert!(!third.is_proved(), "{third:?}");
    // A remembered failure is repeated without running anything (the goal is closable).
    c.hammer_cache().rewrite_for_test(|o| {
        *o = Outcome::Failed {
            timed_out: false,
            message: "hammer: remembered".into(),
        }
    });
    let fourth = c.check(&req("", &goal("d"), h));
    assert_eq!(
        fourth,
        Verdict::Failed {
            step: 1,
            message: "hammer: remembered".into()
        }
    );
}

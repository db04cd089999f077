//! Canaries (`prod_run::canary`): `False`, `0 = 1` and `forall n, n = S n` in the run's own
//! context, sampled, checked by the real Coq, solved and re-checked like any theorem in a phase
//! of their own. A policy that tries the known cheats on them gets no canary accepted; a
//! checker with a bug (here one that accepts everything, the only way to make the real path
//! accept a canary on purpose) raises the alarm: the offending nodes are saved and the run is
//! told to stop.

use crate::common;

use prod_check::{CheckRequest, Checker, Progress, Verdict};
use prod_rl::{Completion, PolicyError, SampleRequest};
use prod_run::canary::{run_canaries, stop_on_alarm, ALARM_FILE};
use prod_run::prover::{CoqFinal, FinalProof};
use prod_run::{
    Bars, CheckSetup, EvalOptions, FinalCheck, Phase, RunContext, RunStore, SeqPolicy, Theorem,
};

/// Tries a cheat on every canary root (and `admit` on every proposed lemma).
#[derive(Default)]
struct Cheater {
    asked: usize,
}

const CHEATS: [&str; 4] = [
    "<no_invoke> exact_no_check I.",
    "<use_invoke> <invoke> Lemma h : False. </invoke> exact (False_rect _ h).",
    "<no_invoke> intros. admit.",
    "<no_invoke> idtac \"Error: Out of memory.\"; fail.",
];

impl SeqPolicy for Cheater {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        Ok(requests
            .iter()
            .map(|r| {
                self.asked += 1;
                if r.statement.contains("prod_canary") {
                    CHEATS[self.asked % CHEATS.len()].to_string()
                } else {
                    "<no_invoke> admit.".to_string()
                }
            })
            .map(Completion::ended)
            .collect())
    }
    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

/// A checker with a soundness bug: every node is proved, every assembled proof too.
struct AcceptsAll;

fn proved() -> Verdict {
    Verdict::Proved {
        axioms: vec![],
        replacements: vec![],
        time: std::time::Duration::ZERO,
        universe_constraints: vec![],
    }
}

impl Checker for AcceptsAll {
    fn prover(&self) -> &'static str {
        "coq"
    }
    fn fingerprint(&self) -> String {
        "accepts everything".into()
    }
    fn check_batch(&self, r: &[CheckRequest], _: Progress<'_>) -> Vec<Verdict> {
        r.iter().map(|_| proved()).collect()
    }
}

impl FinalCheck for AcceptsAll {
    fn final_check(&self, _: &FinalProof<'_>) -> (Verdict, String) {
        (proved(), String::new())
    }
}

fn theorem() -> Theorem {
    Theorem {
        id: "t".into(),
        context: common::SOURCE.into(),
        statement: "Lemma t : double 1 = 2.".into(),
        ground_truth: None,
        depth: Some(0),
        scope: vec![],
        qualified_name: "t".into(),
        file: "Fix.v".into(),
    }
}

fn options() -> EvalOptions {
    EvalOptions {
        ks: vec![1],
        samples: 4,
        depth: 1,
        bootstrap: 10,
        final_timeout_s: 60,
        // The tests' checker has no hammer: no hammer leaves.
        hammer_leaves: false,
        ..Default::default()
    }
}

#[test]
fn no_cheat_makes_a_canary_and_a_broken_checker_raises_the_alarm() {
    let run = tempfile::tempdir().unwrap();
    let store = RunStore::open_dir(run.path()).unwrap();
    let coq = common::coq();
    let final_check = CoqFinal(common::coq_config());
    let lang = prod_coq::CoqLanguage;
    let statements = Default::default();
    let ctx = RunContext {
        store: &store,
        prover: CheckSetup {
            checker: &coq,
            lang: &lang,
            final_check: &final_check,
        },
        out: run.path(),
        bars: &Bars::hidden(),
        dataset_statements: &statements,
    };
    let check = run_canaries(&ctx, &mut Cheater::default(), &[theorem()], &options(), 0).unwrap();
    assert_eq!(check.canaries, 3);
    assert!(check.nodes >= 12, "{check:?}");
    assert!(check.alarms.is_empty(), "{check:?}");
    assert!(stop_on_alarm(&check, run.path()).is_ok());
    assert!(!run.path().join(ALARM_FILE).exists());
    // The canaries live in a phase of their own: nothing of them in an evaluation.
    assert!(store.nodes(0, Phase::Eval).unwrap().is_empty());
    let canary_roots = store
        .nodes(0, Phase::Canary)
        .unwrap()
        .into_iter()
        .filter(|n| n.depth == 0)
        .count();
    assert_eq!(canary_roots, 12);

    // A checker that accepts everything is caught by the same run.
    let broken_run = tempfile::tempdir().unwrap();
    let broken_store = RunStore::open_dir(broken_run.path()).unwrap();
    let ctx = RunContext {
        store: &broken_store,
        prover: CheckSetup {
            checker: &AcceptsAll,
            lang: &lang,
            final_check: &AcceptsAll,
        },
        out: broken_run.path(),
        bars: &Bars::hidden(),
        dataset_statements: &statements,
    };
    let check = run_canaries(&ctx, &mut Cheater::default(), &[theorem()], &options(), 0).unwrap();
    assert_eq!(check.alarms.len(), 12, "{check:?}");
    assert!(check.alarms.iter().all(|a| a.canary.starts_with("canary/")));
    // Why each was accepted is prod-prover's one rule, the same on every path: a proof without
    // a proposal is accepted locally, one through a lemma globally.
    let why = |a: prod_prover::Accepted| {
        check
            .alarms
            .iter()
            .filter(|x| x.what == a.to_string())
            .count()
    };
    assert!(why(prod_prover::Accepted::Locally) > 0, "{check:?}");
    assert!(why(prod_prover::Accepted::Globally) > 0, "{check:?}");
    assert_eq!(
        why(prod_prover::Accepted::Locally) + why(prod_prover::Accepted::Globally),
        12,
        "{check:?}"
    );
    let saved = std::fs::read_to_string(broken_run.path().join(ALARM_FILE)).unwrap();
    assert!(saved.lines().count() >= 12, "{saved}");
    let e = stop_on_alarm(&check, broken_run.path()).unwrap_err();
    assert!(e.to_string().contains("SOUNDNESS ALARM"), "{e}");
}

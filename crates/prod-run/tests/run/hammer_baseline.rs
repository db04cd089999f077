//! CoqHammer alone beside a policy, with the real Coq (the fixed tactic list; the provers are
//! off to keep the suite quick, and the baseline runs them the same way when on): one
//! `hammer.` root per theorem checked and re-checked cold like any tree, the paired comparison
//! with the policy's pass@k, the proposed lemmas a sampled `hammer.` child closed, the hammer's
//! counts per phase, a resumed baseline that checks nothing again, and a second run on the same
//! theorems answered from the baseline's cross-run cache.

use std::collections::HashSet;

use prod_check::Checker;
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_rl::{Completion, PolicyError, SampleRequest};
use prod_run::baseline::{compare, run_hammer_baseline, HAMMER_BASELINE};
use prod_run::{run_eval, Bars, CheckSetup, EvalOptions, Phase, RunStore, SeqPolicy, Theorem};

use crate::common;
use common::SOURCE as CONTEXT;

/// t_add through a lemma left to the hammer (named `aux0`, `aux1`, … in turn: another node,
/// the same goal); t_double by hand; t_false wrong.
struct Scripted {
    lemmas: usize,
}

impl SeqPolicy for Scripted {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        Ok(requests
            .iter()
            .map(|r| {
                let s = r.statement;
                if s.contains("t_add") {
                    let l = format!("aux{}", self.lemmas);
                    self.lemmas += 1;
                    format!("<use_invoke> <invoke> Lemma {l} : forall m : nat, m + 0 = m. </invoke> intros n. apply {l}.")
                } else if s.contains("aux") {
                    "<no_invoke> hammer.".to_string()
                } else if s.contains("t_double") {
                    "<no_invoke> intros n. unfold double. lia.".to_string()
                } else {
                    "<no_invoke> reflexivity.".to_string()
                }
            })
            .map(Completion::ended)
            .collect())
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

fn theorems() -> Vec<Theorem> {
    let t = |id: &str, statement: &str| Theorem {
        id: id.into(),
        context: CONTEXT.into(),
        statement: statement.into(),
        ground_truth: None,
        depth: Some(0),
        scope: vec![],
        qualified_name: id.into(),
        file: "Fix.v".into(),
    };
    vec![
        t("t_add", "Lemma t_add : forall n : nat, n + 0 = n."),
        t(
            "t_double",
            "Lemma t_double : forall n : nat, double n = 2 * n.",
        ),
        t("t_false", "Lemma t_false : 1 = 2."),
    ]
}

/// The checker with the hammer's fixed list (no provers), one worker.
fn coq_config() -> CoqCheckConfig {
    let mut cfg = CoqCheckConfig {
        workers: 1,
        step_timeout_s: 5,
        ..Default::default()
    };
    cfg.hammer.use_atp = false;
    cfg
}

fn opts() -> EvalOptions {
    EvalOptions {
        name: "scripted".into(),
        ks: vec![1, 2],
        samples: 2,
        depth: 2,
        bootstrap: 200,
        final_timeout_s: 60,
        ..Default::default()
    }
}

#[test]
fn coqhammer_alone_beside_the_policy_paired_resumed_and_cached_across_runs() {
    let cfg = coq_config();
    let coq = CoqChecker::new(cfg.clone()).expect("coq is installed");
    if !prod_test_support::require(
        coq.config().hammer.enabled,
        "CoqHammer is not installed (scripts/install-deps.sh)",
    ) {
        return;
    }
    let lang = prod_coq::CoqLanguage;
    let none = HashSet::new();
    let final_check = prod_run::CoqFinal(cfg.clone());
    let setup = CheckSetup {
        checker: &coq,
        lang: &lang,
        final_check: &final_check,
    };
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("hammer-baseline.sqlite");
    let ths = theorems();
    let dir = tmp.path().join("run");
    let store = RunStore::open_dir(&dir).unwrap();
    let ctx = prod_run::RunContext {
        store: &store,
        prover: setup,
        out: &dir,
        bars: &Bars::hidden(),
        dataset_statements: &none,
    };

    // The policy: t_add in both trees through `aux`, which a sampled `hammer.` child closes.
    let before = coq.hammer_stats();
    let method = run_eval(
        &ctx,
        &mut Scripted { lemmas: 0 },
        &ths,
        &opts(),
        0,
        Phase::Eval,
    )
    .unwrap();
    let m = &method.evaluation;
    let proved: Vec<usize> = method.per_theorem.iter().map(|p| p.2).collect();
    assert_eq!(proved, [2, 2, 0]);
    assert_eq!(m.lemmas_closed_by_hammer, Some(2), "one per tree");
    assert_eq!(m.sampled_trees_height_ge1, Some(2));
    let kinds: Vec<&str> = m.examples.iter().map(|x| x.kind.as_str()).collect();
    let x = m
        .examples
        .iter()
        .find(|x| x.kind == "a proposed lemma closed by a sampled hammer. child")
        .unwrap_or_else(|| panic!("{kinds:?}"));
    assert!(x.proved && x.height == Some(1));
    assert!(x
        .nodes
        .iter()
        .any(|n| n.depth == 1 && n.completion == "<no_invoke> hammer." && n.verdict == "proved"));
    // The second tree's lemma is another node with the same goal in the same scope: answered
    // from memory.
    let h = coq.hammer_stats().unwrap().since(&before.unwrap());
    assert_eq!(
        (h.calls, h.fixed_closed, h.cache_closed, h.atp_calls),
        (2, 1, 1, 0),
        "{h:?}"
    );

    // CoqHammer alone on the same theorems, with the same checker.
    let b = run_hammer_baseline(&ctx, &ths, &opts(), Some(&shared)).unwrap();
    let e = &b.result.evaluation;
    assert_eq!(
        (e.name.as_str(), e.samples_per_theorem),
        (HAMMER_BASELINE, 1)
    );
    let hammer_proved: Vec<usize> = b.result.per_theorem.iter().map(|p| p.2).collect();
    assert_eq!(hammer_proved[0], 1, "lia closes n + 0 = n");
    assert_eq!(hammer_proved[2], 0, "1 = 2 is false");
    let used = e.hammer.expect("counted");
    assert_eq!(used.calls, 3, "{used:?}");
    // One fixed proof per theorem: no token limit applies, so no "cut" class; the policy's
    // evaluation in the same store has one.
    assert_eq!(e.node_outcomes.as_ref().map(|o| o.truncated), Some(None));
    assert_eq!(m.node_outcomes.as_ref().map(|o| o.truncated), Some(Some(0)));
    assert_eq!(e.pass_at_k.len(), 1);
    let hp1 = e.pass_at_k[0].estimate;
    let want = hammer_proved.iter().filter(|&&c| c > 0).count() as f64 / 3.0;
    assert!((hp1 - want).abs() < 1e-12);

    // Paired: t_add by both, t_false by neither, t_double by the policy and maybe the hammer.
    let c = compare(
        m,
        e,
        &[1, 2],
        prod_core::pass_at_k::Bootstrap {
            resamples: 500,
            seed: 0,
        },
    );
    let double_by_hammer = hammer_proved[1] > 0;
    assert_eq!(
        (
            c.both,
            c.method_only,
            c.baseline_only,
            c.neither,
            c.unpaired
        ),
        (
            1 + usize::from(double_by_hammer),
            usize::from(!double_by_hammer),
            0,
            1,
            0
        )
    );
    let d2 = c.rows[1].difference.as_ref().unwrap();
    // The policy proves 2 of 3 in every tree; the hammer's pass@2 is its pass@1.
    assert!((d2.estimate - (2.0 / 3.0 - want)).abs() < 1e-12, "{d2:?}");
    assert_eq!(c.rows[1].baseline.as_ref().map(|p| p.estimate), Some(hp1));
    assert!(d2.ci_low <= d2.estimate && d2.estimate <= d2.ci_high);

    // Resumed: the baseline checks nothing again.
    let again = run_hammer_baseline(&ctx, &ths, &opts(), Some(&shared)).unwrap();
    assert_eq!(again.result.times.checked_now, 0);
    assert_eq!(again.result.per_theorem, b.result.per_theorem);

    // Another run (a new store, a new checker): the baseline's checks come from the shared
    // cache, no hammer runs.
    let coq2 = CoqChecker::new(cfg.clone()).unwrap();
    let dir2 = tmp.path().join("run2");
    let store2 = RunStore::open_dir(&dir2).unwrap();
    let ctx2 = prod_run::RunContext {
        store: &store2,
        prover: CheckSetup {
            checker: &coq2,
            ..setup
        },
        out: &dir2,
        bars: &Bars::hidden(),
        dataset_statements: &none,
    };
    let cached = run_hammer_baseline(&ctx2, &ths, &opts(), Some(&shared)).unwrap();
    assert_eq!(cached.result.per_theorem, b.result.per_theorem);
    assert_eq!(cached.result.evaluation.hammer.map(|h| h.calls), Some(0));
    assert_eq!(store2.nodes(0, Phase::HammerBaseline).unwrap().len(), 3);
}

//! Hammer leaves with the real Coq (the hammer's fixed tactic list; the provers off to keep the
//! suite quick): every distinct lemma a tree proposes also gets a `<no_invoke> hammer.` node,
//! stored with its own origin, checked once per goal, counted for global correctness like any
//! node and re-checked cold in the assembled proof; never one for the root's own statement; the
//! same trees scored without their leaves beside them; a resumed evaluation checks nothing
//! again.

use std::collections::HashSet;

use prod_check::Checker;
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_rl::{Completion, Origin, PolicyError, SampleRequest};
use prod_run::baseline::{compare, run_hammer_baseline};
use prod_run::{run_eval, Bars, CheckSetup, EvalOptions, Phase, RunStore, SeqPolicy, Theorem};

use crate::common;
use common::SOURCE as CONTEXT;

/// t_add through `aux`, whose sampled proof is wrong (the leaf closes it); t_double by hand;
/// t_false through a false lemma; t_self through its own statement, which a leaf would close
/// but must not get.
struct Scripted;

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
                let text = if s.contains("t_add") {
                    "<use_invoke> <invoke> Lemma aux : forall m : nat, m + 0 = m. </invoke> intros n. apply aux."
                } else if s.contains("t_double") {
                    "<no_invoke> intros n. unfold double. lia."
                } else if s.contains("t_false") {
                    "<use_invoke> <invoke> Lemma bad : 2 = 3. </invoke> exfalso. discriminate bad."
                } else if s.contains("Lemma t_self ") {
                    "<use_invoke> <invoke> Lemma again : forall n : nat, 0 + n = n. </invoke> exact again."
                } else {
                    // Every lemma's sampled proof is wrong.
                    "<no_invoke> exact I."
                };
                Completion::ended(text)
            })
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
        depth: Some(1),
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
        t("t_self", "Lemma t_self : forall n : nat, 0 + n = n."),
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
        depth: 1,
        bootstrap: 200,
        final_timeout_s: 60,
        hammer_leaves: true,
        ..Default::default()
    }
}

#[test]
fn hammer_leaves_prove_lemmas_never_the_root_and_are_reported_apart() {
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
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let store = RunStore::open_dir(&dir).unwrap();
    let ctx = prod_run::RunContext {
        store: &store,
        prover: CheckSetup {
            checker: &coq,
            lang: &lang,
            final_check: &final_check,
        },
        out: &dir,
        bars: &Bars::hidden(),
        dataset_statements: &none,
    };
    let ths = theorems();
    let before = coq.hammer_stats().unwrap();
    let r = run_eval(&ctx, &mut Scripted, &ths, &opts(), 0, Phase::Eval).unwrap();

    // The leaves: one per distinct lemma and tree, stored under their own origin, one level
    // below their proposer; none for `again`, which states t_self itself.
    let nodes = store.nodes(0, Phase::Eval).unwrap();
    let leaves: Vec<_> = nodes
        .iter()
        .filter(|n| n.origin == Origin::HammerLeaf)
        .collect();
    let mut stated: Vec<(u32, &str)> = leaves
        .iter()
        .map(|n| (n.tree, n.statement.as_str()))
        .collect();
    stated.sort();
    assert_eq!(
        stated,
        [
            (0, "Lemma aux : forall m : nat, m + 0 = m."),
            (0, "Lemma bad : 2 = 3."),
            (1, "Lemma aux : forall m : nat, m + 0 = m."),
            (1, "Lemma bad : 2 = 3."),
        ]
    );
    assert!(leaves
        .iter()
        .all(|n| n.depth == 1 && n.completion == "<no_invoke> hammer." && n.theorem.is_none()));
    // Checked once per goal: the two trees' leaves are one request each.
    let h = coq.hammer_stats().unwrap().since(&before);
    assert_eq!(h.calls, 2, "{h:?}");

    // With the leaves: t_add through `aux` (its sampled proof fails), t_double by hand; t_false
    // and t_self not (`bad` is false; the root's own statement got no leaf).
    let proved: Vec<usize> = r.per_theorem.iter().map(|p| p.2).collect();
    assert_eq!(proved, [2, 2, 0, 0]);
    let e = &r.evaluation;
    let l = e.hammer_leaves.as_ref().expect("leaves reported");
    assert_eq!((l.leaves, l.proved), (4, 2));
    assert_eq!(
        (
            l.theorems_without_leaves,
            l.theorems_only_with_leaves,
            l.trees_with_leaves
        ),
        (Some(1), Some(1), Some(2))
    );
    // A leaf is no sampled node: the tree that needed one is not "built from sampled nodes".
    assert_eq!(e.sampled_trees_height_ge1, Some(0));
    assert_eq!(
        e.lemmas_closed_by_hammer,
        Some(0),
        "no sampled hammer. child"
    );

    // The same trees without their leaves: t_double only.
    let w = r.without_leaves.as_ref().expect("scored without leaves");
    assert_eq!(l.without.as_deref(), Some(w.name.as_str()));
    let alone: Vec<usize> = w.theorems_detail.iter().map(|t| t.proved_trees).collect();
    assert_eq!(alone, [0, 2, 0, 0]);
    let judged: Vec<usize> = w.theorems_detail.iter().map(|t| t.trees).collect();
    assert_eq!(judged, [2, 2, 2, 2]);
    assert!((e.pass_at_k[0].estimate - 0.5).abs() < 1e-12);
    assert!((w.pass_at_k[0].estimate - 0.25).abs() < 1e-12);

    // The assembled proof of t_add carries the tactic the hammer found, never `hammer.`.
    let x = e
        .examples
        .iter()
        .find(|x| x.theorem == "t_add" && x.proved)
        .expect("t_add's proved tree shown");
    let text = x.assembled_proof.as_deref().unwrap();
    assert!(text.contains("aux") && !text.contains("hammer."), "{text}");

    // Resumed: nothing checked again, the same result.
    let again = run_eval(&ctx, &mut Scripted, &ths, &opts(), 0, Phase::Eval).unwrap();
    assert_eq!(again.times.checked_now, 0);
    assert_eq!(again.per_theorem, r.per_theorem);
    assert_eq!(again.without_leaves, r.without_leaves);

    // Beside CoqHammer alone, paired: the hammer proves t_self (which ProD's root never got
    // hammered for) and t_add; ProD with leaves t_add and t_double.
    let b = run_hammer_baseline(&ctx, &ths, &opts(), None).unwrap();
    let boot = prod_core::pass_at_k::Bootstrap {
        resamples: 200,
        seed: 0,
    };
    let hammer = &b.result.evaluation;
    let by_hammer: Vec<usize> = b.result.per_theorem.iter().map(|p| p.2).collect();
    assert_eq!((by_hammer[0], by_hammer[2], by_hammer[3]), (1, 0, 1));
    let c = compare(e, hammer, &[1], boot);
    assert_eq!((c.baseline_only, c.neither), (1, 1), "t_self; t_false");
    let cw = compare(w, hammer, &[1], boot);
    assert_eq!(cw.both + cw.method_only, 1, "t_double alone");
}

/// A run store made before hammer leaves existed keeps its identity: such a store's
/// `eval_job` has no `hammer_leaves` key, which is exactly what a run with them off writes. It
/// resumes with `--no-hammer-leaves`; with them on (the default) the settings differ and the
/// error names the key.
#[test]
fn a_store_from_before_hammer_leaves_resumes_with_them_off() {
    let coq = coq_config();
    let probe = CoqChecker::new(coq.clone()).expect("coq is installed");
    if !prod_test_support::require(
        probe.config().hammer.enabled,
        "CoqHammer is not installed (scripts/install-deps.sh)",
    ) {
        return;
    }
    drop(probe);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let add = common::example(
        "t_add",
        "Lemma t_add : forall n : nat, n + 0 = n.",
        "<no_invoke> intros n. lia.",
        &[],
    );
    let lines = serde_json::to_string(&add).unwrap() + "\n";
    std::fs::write(data.join("rl.jsonl"), lines).unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": CONTEXT, "reduced": CONTEXT});
    std::fs::write(data.join("sources.jsonl"), src.to_string() + "\n").unwrap();
    let trees = tmp.path().join("trees.jsonl");
    let header = serde_json::json!({"format": "prod-trees", "version": 1, "model": "m", "samples": 1, "depth": 1, "temperature": 0.0, "split": "rl", "theorems": 1});
    let root = serde_json::json!({"node": 1, "tree": 0, "depth": 0, "parent": null, "theorem": "Fix:t_add", "statement": add.statement, "forced_t0": null, "t0": "use_invoke",
        "completion": "<use_invoke> <invoke> Lemma aux : forall m : nat, m + 0 = m. </invoke> intros n. apply aux."});
    let child = serde_json::json!({"node": 2, "tree": 0, "depth": 1, "parent": 1, "theorem": "Fix:t_add", "statement": "Lemma aux : forall m : nat, m + 0 = m.", "forced_t0": "no_invoke", "t0": "no_invoke",
        "completion": "<no_invoke> exact I."});
    std::fs::write(&trees, format!("{header}\n{root}\n{child}\n")).unwrap();
    let out = tmp.path().join("run");
    let job = |leaves: bool| prod_run::EvalJob {
        model: Default::default(),
        dataset: data.clone(),
        theorems: None,
        options: EvalOptions {
            split: "rl".into(),
            ks: vec![1],
            hammer_leaves: leaves,
            final_timeout_s: 60,
            bootstrap: 100,
            ..Default::default()
        },
        sampling: Default::default(),
        prover: Default::default(),
        coq: prod_run::CoqJobConfig {
            workers: 1,
            step_timeout_s: coq.step_timeout_s,
            hammer: true,
            hammer_atp: false,
            ..Default::default()
        },
        isabelle: None,
        out: out.clone(),
        cache: None,
        remote: None,
        postgres: None,
        trees: Some(trees.clone()),
        hammer_baseline: Default::default(),
    };
    // Without leaves: what every run was before the setting; the identity has no key for it.
    let (_, off) = prod_run::run_eval_job(&job(false), &Bars::hidden()).unwrap();
    assert_eq!(off.per_theorem[0].2, 0, "aux's sampled proof is wrong");
    assert!(off.without_leaves.is_none() && off.evaluation.hammer_leaves.is_none());
    let store = RunStore::open_dir(&out).unwrap();
    let id = store.get_meta("eval_job").unwrap().unwrap();
    assert!(!id.contains("hammer_leaves"), "{id}");
    drop(store);
    // With leaves (the default): refused, naming the setting.
    let e = prod_run::run_eval_job(&job(true), &Bars::hidden()).unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains("hammer_leaves"), "{text}");
    // With them off: resumed, nothing checked again.
    let (_, again) = prod_run::run_eval_job(&job(false), &Bars::hidden()).unwrap();
    assert_eq!(again.times.checked_now, 0);
    assert_eq!(again.per_theorem, off.per_theorem);
}

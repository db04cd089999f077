//! `prod experiment` end to end at tiny size with the real Coq: a tiny random "pretrained" model,
//! a one-file dataset, both SFT stages, both RL stages (one round each), the four evaluations,
//! `experiment.json` and `table.md`; then reruns: everything finished is skipped, and stages
//! whose marker is gone (a kill before it was written) run again — the SFT stage from a clean
//! directory, the RL and evaluation stages resumed from their run stores with the same figures;
//! finally the same SFT models given to a new experiment, which trains nothing. CoqHammer alone
//! (its fixed tactic list) is the fifth row, every method paired with it.

use std::path::Path;

use prod_run::experiment::{ExperimentConfig, ExperimentJob, ExperimentResult, GivenSftModels};
use prod_run::{Bars, CoqJobConfig, FirstToken, NativeParams};

use crate::common;
use common::example;

fn write_dataset(dir: &Path) {
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    let train = [
        example(
            "t_add",
            "Lemma t_add : forall n : nat, n + 0 = n.",
            "<no_invoke> intros n. lia.",
            &[],
        ),
        example(
            "t_double",
            "Lemma t_double : forall n : nat, double n = 2 * n.",
            &format!("<use_invoke> <invoke> {dbl} </invoke> intros n. rewrite dbl. lia."),
            &[dbl],
        ),
        example(
            "t_mul",
            "Lemma t_mul : forall n : nat, n * 1 = n.",
            "<no_invoke> intros n. lia.",
            &[],
        ),
    ];
    // The base model, rl.jsonl and sources.jsonl.
    common::write_fixture(dir, &train);
    let lines = |es: &[prod_library::dataset::Example]| -> String {
        es.iter()
            .map(|e| serde_json::to_string(e).unwrap() + "\n")
            .collect()
    };
    let mut sft = train.to_vec();
    let mut aug = train[1].clone();
    aug.id.push_str(":augmented");
    aug.variant = "augmented".into();
    aug.context_extra = format!("\n{dbl}\nAdmitted.\n");
    aug.conditional_proof = "<no_invoke> intros n. unfold double. lia.".into();
    aug.proposed_lemmas = vec![];
    sft.push(aug.clone());
    std::fs::write(dir.join("sft.jsonl"), lines(&sft)).unwrap();
    let wl: Vec<_> = train
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.variant = "w_lemmas".into();
            if !e.proposed_lemmas.is_empty() {
                e.conditional_proof = aug.conditional_proof.clone();
                e.proposed_lemmas.clear();
            }
            e
        })
        .collect();
    std::fs::write(dir.join("train_wl.jsonl"), lines(&wl)).unwrap();
    let test = [
        example(
            "h_zero",
            "Lemma h_zero : forall n : nat, 0 + n = n.",
            "<no_invoke> intros n. lia.",
            &[],
        ),
        example(
            "h_succ",
            "Lemma h_succ : forall n : nat, S n = n + 1.",
            "<no_invoke> intros n. lia.",
            &[],
        ),
    ];
    std::fs::write(dir.join("test.jsonl"), lines(&test)).unwrap();
}

fn config(dir: &Path) -> ExperimentConfig {
    let d = ExperimentConfig::default();
    ExperimentConfig {
        base_model: dir.join("model"),
        dataset: dir.to_path_buf(),
        sft_minutes: 5.0,
        sft_steps: 2,
        rounds: 1,
        batch: 2,
        rl_depth: 1,
        theorems: 0,
        samples: 8,
        depth: 2,
        curve_theorems: 1,
        curve_samples: 2,
        bootstrap: 50,
        workers: 1,
        // Every sample begins with a `t0`, so that its nodes reach Coq.
        sampling: NativeParams {
            sampling: prod_core::Sampling {
                max_new_tokens: 12,
                context_tokens: 64,
                ..prod_core::Sampling::default()
            },
            first_token: FirstToken::T0,
            ..NativeParams::default()
        },
        coq: CoqJobConfig {
            workers: 1,
            hammer: true,
            hammer_atp: false,
            ..CoqJobConfig::default()
        },
        hammer_cache: Some(dir.join("hammer-baseline.sqlite")),
        rl: prod_run::RlConfig {
            learning_rate: 1e-3,
            warmup_steps: 0,
            ..d.rl.clone()
        },
        ..d
    }
}

fn run(dir: &Path, out: &Path) -> ExperimentResult {
    let job = ExperimentJob {
        out: out.to_path_buf(),
        config: config(dir),
    };
    prod_run::run_experiment(&job, &Bars::hidden())
        .unwrap()
        .result
}

/// What must not change between a run and its resumption (not the timings).
fn figures(r: &ExperimentResult) -> String {
    let rows: Vec<_> = r
        .methods
        .iter()
        .map(|m| {
            let curve: Vec<_> = m.rounds.iter().map(|x| (x.round, x.eval.clone())).collect();
            serde_json::json!([
                m.method,
                m.pass_at_k,
                m.vs_prod_sft,
                m.depth_table,
                m.replay_novel_lemma_share,
                curve,
                m.vs_hammer
            ])
        })
        .collect();
    serde_json::to_string(&(rows, r.hammer.as_ref().map(|h| (&h.pass_at_k, h.proved)))).unwrap()
}

#[test]
fn experiment_runs_all_four_methods_and_resumes_stage_by_stage() {
    let data = tempfile::tempdir().unwrap();
    write_dataset(data.path());
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path();
    let first = run(data.path(), out);
    let stages = [
        "sft",
        "sft_nolemma",
        "eval-prod_sft",
        "eval-hammer",
        "eval-sft_nolemma",
        "rl",
        "rl_nolemma",
        "eval-prod_rl",
        "eval-rl_nolemma",
    ];
    assert_eq!(first.ran, stages);
    for s in stages {
        assert!(out.join(s).join("done.json").is_file(), "{s}");
    }
    // CoqHammer alone: `lia` (first in its fixed list) proves both held-out theorems.
    let h = first.hammer.as_ref().expect("the baseline ran");
    assert_eq!((h.theorems, h.proved), (2, 2));
    assert_eq!(h.pass_at_k.iter().map(|p| p.k).collect::<Vec<_>>(), [1]);
    assert!(h
        .hammer
        .is_some_and(|u| u.calls == 2 && u.fixed_closed == 2));
    assert!(out.join(&h.report).is_file());
    let keys: Vec<&str> = first.methods.iter().map(|m| m.method.as_str()).collect();
    assert_eq!(keys, ["prod_sft", "sft_nolemma", "prod_rl", "rl_nolemma"]);
    for m in &first.methods {
        let ks: Vec<usize> = m.pass_at_k.iter().map(|p| p.k).collect();
        assert_eq!(ks, [1, 4, 8], "{}", m.method);
        assert!(m.pass_at_k.iter().all(|p| p.theorems_judged == 2), "{m:?}");
        assert!(out.join(&m.report).is_file(), "{}", m.report.display());
        // The Fig. 5 table counts every evaluated theorem.
        assert_eq!(
            m.depth_table.iter().map(|c| c.count).sum::<usize>(),
            2,
            "{m:?}"
        );
        let c = m.vs_hammer.as_ref().expect("paired with the hammer");
        assert_eq!(c.rows.iter().map(|r| r.k).collect::<Vec<_>>(), [1, 4, 8]);
        assert_eq!(c.both + c.baseline_only, 2, "{c:?}");
        assert_eq!(c.method_only + c.neither + c.unpaired, 0, "{c:?}");
        if m.method == "prod_sft" {
            assert!(m.vs_prod_sft.is_empty());
            assert!(m.sft.as_ref().is_some_and(|t| t.steps == 2));
        } else {
            let ks: Vec<usize> = m.vs_prod_sft.iter().map(|d| d.k).collect();
            assert_eq!(ks, [1, 4, 8], "{}", m.method);
            assert!(m
                .vs_prod_sft
                .iter()
                .all(|d| d.ci_low <= d.estimate && d.estimate <= d.ci_high && d.theorems == 2));
        }
        if m.method.contains("rl") {
            // Round 0 (the SFT model) and round 1 on the held-out curve.
            let rounds: Vec<u32> = m
                .rounds
                .iter()
                .filter(|r| r.eval.is_some())
                .map(|r| r.round)
                .collect();
            assert_eq!(rounds, [0, 1], "{}", m.method);
            assert!(
                m.rounds
                    .iter()
                    .all(|r| r.eval_use_invoke_share_root.is_some()),
                "{}",
                m.method
            );
            // What round 1 trained on: the batch's ground truth, each with weight 1; the
            // baseline without lemma proposal never reinforces a `<use_invoke>` target.
            let r1 = m.rounds.iter().find(|r| r.round == 1).unwrap();
            let rf = r1.reinforced.as_ref().expect("round 1 records its batch");
            let gt = rf.ground_truth;
            assert!(gt.examples >= 2 && gt.weighted == gt.examples, "{rf:?}");
            assert!((gt.weight - gt.examples as f64).abs() < 1e-9, "{rf:?}");
            let n: usize = rf.origins().iter().map(|(_, t)| t.examples).sum();
            assert_eq!(n, r1.examples, "{rf:?}");
            if m.method == "rl_nolemma" {
                assert_eq!(rf.use_invoke_share(), Some(0.0), "{rf:?}");
            }
            assert!(out.join(m.rl_report.as_ref().unwrap()).is_file());
            assert!(
                m.model.ends_with("checkpoints/round-1"),
                "{}",
                m.model.display()
            );
        }
    }
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    for needle in [
        "| ProD-SFT |",
        "| SFT w/o lemma proposal |",
        "| ProD-RL |",
        "| RL w/o lemma proposal |",
        "Δ pass@8",
        "(baseline)",
        "[eval](eval-prod_rl/report.html)",
        "[RL run](rl/report.html)",
        "Fig. 5",
        "per round",
        "what each round reinforced",
        "| CoqHammer alone (one attempt) | 100.0",
        "### Against CoqHammer alone",
        "[eval](eval-hammer/report.html)",
    ] {
        assert!(table.contains(needle), "{needle} not in\n{table}");
    }
    let json: ExperimentResult =
        serde_json::from_str(&std::fs::read_to_string(out.join("experiment.json")).unwrap())
            .unwrap();
    assert_eq!(figures(&json), figures(&first));

    // Everything finished: a rerun does nothing and gives the same table.
    let again = run(data.path(), out);
    assert!(again.ran.is_empty(), "{:?}", again.ran);
    assert_eq!(figures(&again), figures(&first));

    // Killed before their markers were written: an SFT stage with a stray file left behind
    // restarts from a clean directory; an RL stage and an evaluation resume from their stores.
    std::fs::remove_file(out.join("sft_nolemma/done.json")).unwrap();
    std::fs::write(out.join("sft_nolemma/stray.tmp"), "half a checkpoint").unwrap();
    std::fs::remove_file(out.join("rl/done.json")).unwrap();
    std::fs::remove_file(out.join("eval-rl_nolemma/done.json")).unwrap();
    let resumed = run(data.path(), out);
    assert_eq!(resumed.ran, ["sft_nolemma", "rl", "eval-rl_nolemma"]);
    assert!(!out.join("sft_nolemma/stray.tmp").exists());
    assert_eq!(figures(&resumed), figures(&first));

    // The same SFT models given to a new experiment: no SFT stage runs, and the rest gives the
    // same figures (same models, same seeds).
    let given_dir = tempfile::tempdir().unwrap();
    let given = given_dir.path();
    let job = ExperimentJob {
        out: given.to_path_buf(),
        config: ExperimentConfig {
            base_model: data.path().join("no-such-model"),
            sft_models: Some(GivenSftModels {
                prod: out.join("sft/model"),
                nolemma: out.join("sft_nolemma/model"),
            }),
            ..config(data.path())
        },
    };
    let from_given = prod_run::run_experiment(&job, &Bars::hidden())
        .unwrap()
        .result;
    assert_eq!(from_given.ran, &stages[2..]);
    assert!(!given.join("sft").exists() && !given.join("sft_nolemma").exists());
    assert!(from_given.methods.iter().all(|m| m.sft.is_none()));
    assert_eq!(figures(&from_given), figures(&first));
    let table = std::fs::read_to_string(given.join("table.md")).unwrap();
    assert!(
        table.contains("Given, not trained by this experiment"),
        "{table}"
    );
}

#[test]
fn bad_settings_are_the_users_error() {
    let data = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut c = config(data.path());
    c.samples = 4;
    let job = ExperimentJob {
        out: out.path().to_path_buf(),
        config: c,
    };
    let e = prod_run::run_experiment(&job, &Bars::hidden()).unwrap_err();
    assert!(
        e.downcast_ref::<prod_run::BadInput>().is_some() && e.to_string().contains("samples"),
        "{e}"
    );
    // No base model.
    let job = ExperimentJob {
        out: out.path().to_path_buf(),
        config: config(data.path()),
    };
    let e = prod_run::run_experiment(&job, &Bars::hidden()).unwrap_err();
    assert!(
        e.downcast_ref::<prod_run::BadInput>().is_some()
            && e.to_string().contains("pretrained model"),
        "{e}"
    );
    // A given SFT model that is not there.
    let job = ExperimentJob {
        out: out.path().to_path_buf(),
        config: ExperimentConfig {
            sft_models: Some(GivenSftModels {
                prod: data.path().join("sft"),
                nolemma: data.path().join("sft-wl"),
            }),
            ..config(data.path())
        },
    };
    let e = prod_run::run_experiment(&job, &Bars::hidden()).unwrap_err();
    assert!(
        e.downcast_ref::<prod_run::BadInput>().is_some() && e.to_string().contains("sft_models"),
        "{e}"
    );
}

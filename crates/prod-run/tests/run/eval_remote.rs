//! `prod eval`'s pipeline with a REMOTE policy: a fake OpenAI-compatible server (loopback HTTP)
//! answers every completion with the same proof; the real Coq checks every node and the cold
//! re-check confirms the proved trees. The theorem the proof fits is proved in every tree, the
//! other in none.

use std::collections::HashSet;

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_policy::ProdTokenizer;
use prod_remote::{RemoteConfig, RemotePolicy};
use prod_run::{run_eval, Bars, CheckSetup, EvalOptions, Phase, RemoteSeq, RunStore, Theorem};

/// Serves `text` as every completion (as many choices as asked for); returns the base URL.
pub fn fake_server(text: &'static str) -> String {
    let fake = prod_remote::testing::serve(std::sync::Arc::new(
        move |_path: &str, req: &serde_json::Value, _n: usize| {
            let n = req["n"].as_u64().unwrap_or(1);
            let choices: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"index": i, "text": text}))
                .collect();
            (200, serde_json::json!({"choices": choices}).to_string())
        },
    ));
    fake.url
}

#[test]
fn eval_samples_from_a_remote_server_and_checks_with_real_coq() {
    let url = fake_server("<no_invoke> intros n. lia.");
    let context = "From Coq Require Import Arith Lia.\n";
    let t = |id: &str, statement: &str| Theorem {
        id: id.into(),
        context: context.into(),
        statement: statement.into(),
        ground_truth: None,
        depth: Some(0),
        scope: vec![],
        qualified_name: id.into(),
        file: String::new(),
    };
    let theorems = vec![
        t("t_add", "Lemma t_add : forall n : nat, n + 0 = n."),
        t("t_false", "Lemma t_false : forall n : nat, n = n + 1."),
    ];
    let texts = [
        context,
        "Lemma t_add : forall n : nat, n + 0 = n.",
        "intros n. lia.",
    ];
    let tok = ProdTokenizer::train_bpe(texts.iter().map(|s| s.to_string()), 300, 1).unwrap();
    let mut policy = RemoteSeq(
        RemotePolicy::new(
            RemoteConfig {
                base_url: url,
                backoff_ms: 1,
                ..Default::default()
            },
            prod_core::Sampling::default(),
            tok,
        )
        .unwrap(),
    );

    let mut cfg = CoqCheckConfig {
        workers: 1,
        ..Default::default()
    };
    cfg.hammer.enabled = false;
    let coq = CoqChecker::new(cfg.clone()).expect("coq is installed");
    let lang = prod_coq::CoqLanguage;
    let setup = CheckSetup {
        checker: &coq,
        lang: &lang,
        final_check: &prod_run::CoqFinal(cfg.clone()),
    };
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::open_dir(dir.path()).unwrap();
    let opts = EvalOptions {
        ks: vec![1, 2],
        samples: 2,
        depth: 1,
        bootstrap: 100,
        final_timeout_s: 60,
        // The tests' checker has no hammer: no hammer leaves.
        hammer_leaves: false,
        ..Default::default()
    };
    let r = run_eval(
        &prod_run::RunContext {
            store: &store,
            prover: setup,
            out: std::path::Path::new("."),
            bars: &Bars::hidden(),
            dataset_statements: &HashSet::new(),
        },
        &mut policy,
        &theorems,
        &opts,
        0,
        Phase::Eval,
    )
    .unwrap();
    let per: Vec<(String, usize, usize)> = r
        .per_theorem
        .iter()
        .map(|(id, n, c, _)| (id.clone(), *n, *c))
        .collect();
    assert_eq!(per, vec![("t_add".into(), 2, 2), ("t_false".into(), 2, 0)]);
    let p1 = r.evaluation.pass_at_k.iter().find(|p| p.k == 1).unwrap();
    assert!((p1.estimate - 0.5).abs() < 1e-9, "{}", p1.estimate);
    assert_eq!(r.evaluation.infra_nodes, 0);
}

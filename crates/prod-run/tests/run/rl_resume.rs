//! ProD-RL end to end on a tiny config with the real Coq checker and a tiny random model:
//! two rounds (Algorithm 2, checks, global correctness, value examples, weighted-CE update,
//! checkpoints), then the same run killed during its second round's checks and resumed —
//! the same rounds come out, and no request reaches Coq twice; the per-round held-out pass@k
//! (the starting model as round 0, then every round) and the separate value model's
//! checkpoints survive the kills. Also: the same run with its
//! store in PostgreSQL and its checks done by queue workers.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;

use prod_check::{CachedChecker, Checker, VerificationCache};
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_policy::ProdTokenizer;
use prod_run::rl::run_rl;
use prod_run::RunContext;
use prod_run::{Bars, Phase, RlConfig, RunStore};

use crate::common;
use common::{example, Counting, SOURCE};

fn write_fixture(dir: &Path) {
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    common::write_fixture(
        dir,
        &[
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
        ],
    );
}

fn config(dir: &Path) -> RlConfig {
    common::rl_config(dir, 2)
}

fn run(
    dir: &Path,
    run_dir: &Path,
    coq: &CoqChecker,
    sent: &Mutex<Vec<String>>,
    die_after: Option<usize>,
) -> Vec<prod_run::rl::RoundRecord> {
    run_with(&config(dir), dir, run_dir, coq, sent, die_after)
}

fn run_with(
    cfg: &RlConfig,
    dir: &Path,
    run_dir: &Path,
    coq: &CoqChecker,
    sent: &Mutex<Vec<String>>,
    die_after: Option<usize>,
) -> Vec<prod_run::rl::RoundRecord> {
    let theorems = prod_run::load_theorems(dir, "rl", None, 0).unwrap();
    let store = RunStore::open_dir(run_dir).unwrap();
    let cache = VerificationCache::open(&run_dir.join("cache.sqlite")).unwrap();
    let checker = CachedChecker::new(
        Counting {
            inner: coq,
            sent,
            die_after,
        },
        cache,
    );
    let lang = prod_coq::CoqLanguage;
    let final_check = prod_run::CoqFinal(Default::default());
    let statements = Default::default();
    let env = RunContext {
        store: &store,
        prover: prod_run::CheckSetup {
            checker: &checker,
            lang: &lang,
            final_check: &final_check,
        },
        out: run_dir,
        bars: &Bars::hidden(),
        dataset_statements: &statements,
    };
    run_rl(cfg, &theorems, &env, &|_| Ok(())).unwrap()
}

#[test]
fn an_external_trainer_gets_the_rounds_examples_and_writes_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let coq = common::coq();
    let mut cfg = config(dir.path());
    cfg.rounds = 1;
    // A stand-in for python/train_weighted.py: needs the examples, writes a model directory.
    let script = "test -s \"$0\" && mkdir -p \"$2\" && cp -r \"$1\"/. \"$2\"/ && touch \"$2\"/trained-externally";
    cfg.external_trainer = ["sh", "-c", script, "{examples}", "{model}", "{out}"]
        .map(String::from)
        .to_vec();
    cfg.after_round = ["touch", "{out}/after-round"].map(String::from).to_vec();
    let run_dir = tempfile::tempdir().unwrap();
    let records = run_with(
        &cfg,
        dir.path(),
        run_dir.path(),
        &coq,
        &Mutex::new(vec![]),
        None,
    );
    assert_eq!(records.len(), 1);
    assert!(
        records[0].metrics.loss.is_some(),
        "the loss is measured on the new weights"
    );
    let ckpt = run_dir.path().join("checkpoints/round-1");
    assert!(ckpt.join("trained-externally").exists() && ckpt.join("after-round").exists());
    let tok = ProdTokenizer::from_file(&dir.path().join("model/tokenizer.json"), None).unwrap();
    let text =
        std::fs::read_to_string(run_dir.path().join("rounds/round-1/examples.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "ground truth at least");
    for l in &lines {
        let ids = |k: &str| -> Vec<u32> {
            l[k].as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect()
        };
        assert_eq!(
            tok.decode(&ids("prompt_ids")).unwrap(),
            l["prompt"].as_str().unwrap()
        );
        assert_eq!(
            tok.decode(&ids("completion_ids")).unwrap(),
            l["completion"].as_str().unwrap()
        );
        assert!(l["weight"].as_f64().unwrap() > 0.0);
    }
    // The separate value model: its examples (completions are value tokens, and only they) go
    // to the same trainer, from the SFT model, into the value checkpoint.
    assert!(!lines
        .iter()
        .any(|l| ["<true>", "<false>"].contains(&l["completion"].as_str().unwrap())));
    let text = std::fs::read_to_string(run_dir.path().join("rounds/round-1/value_examples.jsonl"))
        .unwrap();
    assert!(!text.is_empty());
    for l in text.lines() {
        let l: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(["<true>", "<false>"].contains(&l["completion"].as_str().unwrap()));
    }
    assert!(run_dir
        .path()
        .join("checkpoints/round-1-value/trained-externally")
        .exists());
}

/// `value_model`: the separate copy by default; older configs' booleans still read (`true`:
/// the policy's shared value head, `false`: none).
#[test]
fn value_model_config_reads_old_booleans() {
    use prod_run::ValueModel;
    let read = |t: &str| toml::from_str::<RlConfig>(t).map(|c| c.value_model);
    assert_eq!(read("value_model = true").unwrap(), ValueModel::Shared);
    assert_eq!(read("value_model = false").unwrap(), ValueModel::Off);
    assert_eq!(
        read("value_model = \"separate\"").unwrap(),
        ValueModel::Separate
    );
    assert_eq!(read("").unwrap(), ValueModel::Separate);
    assert!(read("value_model = \"both\"").is_err());
}

#[test]
fn rl_rounds_with_real_coq_resume_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let coq = common::coq();

    // Per-round evaluation on a fixed subset (here: the first two theorems of the RL split).
    let mut cfg = config(dir.path());
    cfg.eval = prod_run::RlEvalConfig {
        theorems: 2,
        split: "rl".into(),
        samples: 2,
        depth: 1,
        ks: vec![1, 2],
        bootstrap: 50,
        ..Default::default()
    };
    let run = |run_dir: &Path, sent: &Mutex<Vec<String>>, die_after: Option<usize>| {
        run_with(&cfg, dir.path(), run_dir, &coq, sent, die_after)
    };
    let start_eval = |run_dir: &Path| {
        let store = RunStore::open_dir(run_dir).unwrap();
        prod_run::rl::start_eval(&store).unwrap()
    };
    let ref_dir = tempfile::tempdir().unwrap();
    let sent_ref = Mutex::new(vec![]);
    let reference = run(ref_dir.path(), &sent_ref, None);
    assert_eq!(reference.len(), 2);
    let start = start_eval(ref_dir.path()).expect("the starting model is evaluated");
    assert_eq!(start.round, 0);
    let ks = |m: &prod_run::prod_report::RoundMetrics| -> Vec<usize> {
        m.eval.iter().flatten().map(|p| p.k).collect()
    };
    assert_eq!((ks(&start), start.eval_theorems), (vec![1, 2], 2));
    for r in &reference {
        let m = &r.metrics;
        assert_eq!((ks(m), m.eval_theorems), (vec![1, 2], 2), "{m:?}");
        // The separate value model, a copy of the SFT model trained on the value examples.
        assert!(ref_dir
            .path()
            .join(format!(
                "checkpoints/round-{}-value/model.safetensors",
                m.round
            ))
            .exists());
        assert!(m.value_loss.is_some() && m.filter_s >= 0.0, "{m:?}");
        assert!(m.tokens_per_s.is_some_and(|t| t > 0.0), "{m:?}");
    }
    for r in &reference {
        let m = &r.metrics;
        // Every round: 2 theorems with <no_invoke> samples, ground truth at depth 0 (checked by
        // Coq: both human proofs are locally correct), a checkpoint and a training loss.
        assert!(m.nodes >= 4, "{m:?}");
        assert!(
            m.locally_correct >= 2,
            "ground-truth proofs are locally correct: {m:?}"
        );
        assert!(m.examples >= 2 && m.loss.is_some(), "{m:?}");
        assert!(ref_dir
            .path()
            .join(format!("checkpoints/round-{}/model.safetensors", m.round))
            .exists());
    }
    let n = sent_ref.lock().unwrap().len();
    assert!(n >= 2, "ground truth went to Coq: {n}");

    // Killed while checking half-way, then again in the last round's evaluation, then resumed.
    let run_dir = tempfile::tempdir().unwrap();
    let sent = Mutex::new(vec![]);
    for die_after in [n / 2, n - 1] {
        let killed = catch_unwind(AssertUnwindSafe(|| {
            run(run_dir.path(), &sent, Some(die_after))
        }));
        assert!(killed.is_err(), "the run must have been killed");
        let store = RunStore::open_dir(run_dir.path()).unwrap();
        let done = store.checkpoints().unwrap();
        assert!(
            done.len() < 2 || !done[1].2.contains("\"eval\":["),
            "killed before the last round's evaluation finished"
        );
    }
    let resumed = run(run_dir.path(), &sent, None);
    let sent = sent.lock().unwrap().clone();
    let mut uniq = sent.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(
        uniq.len(),
        sent.len(),
        "a request reached Coq twice: {sent:#?}"
    );
    assert_eq!(
        sent.len(),
        n,
        "the resumed run checked exactly what the uninterrupted one did"
    );
    let key = |r: &prod_run::rl::RoundRecord| {
        let m = &r.metrics;
        (
            m.round,
            m.nodes,
            m.locally_correct,
            m.globally_correct,
            m.examples,
            m.replay_size,
        )
    };
    assert_eq!(
        resumed.iter().map(key).collect::<Vec<_>>(),
        reference.iter().map(key).collect::<Vec<_>>()
    );
    // The same held-out figures (same theorems, same seeds), and the value checkpoints.
    let evals = |rs: &[prod_run::rl::RoundRecord]| -> Vec<_> {
        rs.iter().map(|r| r.metrics.eval.clone()).collect()
    };
    assert_eq!(evals(&resumed), evals(&reference));
    assert_eq!(start_eval(run_dir.path()).unwrap().eval, start.eval);
    for round in 1..=2 {
        assert!(prod_run::rl::value_checkpoint(run_dir.path(), round)
            .join("model.safetensors")
            .exists());
    }
}

#[test]
fn filters_remove_unnecessary_lemmas_and_spot_trivial_proposals_with_real_coq() {
    use prod_core::ConditionalProof;
    use prod_run::rl::filter_proposals;
    let coq = common::coq();
    let lang = prod_coq::CoqLanguage;
    let cfg = RlConfig::default();
    // `u` is never needed; `k` states the theorem itself up to names: trivial.
    let p = ConditionalProof::parse_with(
        "<use_invoke> <invoke> Lemma u : 0 = 0. </invoke> <invoke> Lemma k : forall m : nat, m + 0 = m. </invoke> intros n. rewrite u. apply k.",
        &lang,
    )
    .unwrap();
    let f = filter_proposals(
        &coq,
        &lang,
        SOURCE,
        "Lemma t : forall n : nat, n + 0 = n.",
        p,
        &cfg,
    );
    assert_eq!(f.removed, 1, "{f:?}");
    assert_eq!(
        f.proof.lemmas().collect::<Vec<_>>(),
        ["Lemma k : forall m : nat, m + 0 = m."]
    );
    assert!(f.trivial);
    // A real decomposition: `dbl` is needed and does not close the theorem by itself.
    let p = ConditionalProof::parse_with(
        "<use_invoke> <invoke> Lemma dbl : forall n : nat, double n = n + n. </invoke> intros n. rewrite dbl. lia.",
        &lang,
    )
    .unwrap();
    let f = filter_proposals(
        &coq,
        &lang,
        SOURCE,
        "Lemma t_double : forall n : nat, double n = 2 * n.",
        p.clone(),
        &cfg,
    );
    assert_eq!((f.removed, f.trivial), (0, false), "{f:?}");
    assert_eq!(f.proof, p);
}

/// Checking at scale: a ProD-RL run whose run store is PostgreSQL and whose checks are
/// done only by queue workers (two threads with their own connections and Coq pools, as
/// `prod queue work` processes would be), while a third worker claims a batch mid-way and dies
/// without recording it. The rounds come out as in the embedded (SQLite, local Coq) run; every
/// check is recorded exactly once, no request reaches Coq twice, and the dead worker's claims
/// are retried after their lease.
#[test]
fn rl_rounds_on_postgres_with_queue_workers_one_of_them_dying() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let Some(pg) = prod_queue::testing::Pg::start() else {
        return;
    };
    let url = pg.url();
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let mut ccfg = CoqCheckConfig {
        workers: 1,
        ..Default::default()
    };
    ccfg.hammer.enabled = false;
    let coq = CoqChecker::new(ccfg.clone()).expect("coq is installed");

    let ref_dir = tempfile::tempdir().unwrap();
    let sent_ref = Mutex::new(vec![]);
    let reference = run(dir.path(), ref_dir.path(), &coq, &sent_ref, None);

    let run_dir = tempfile::tempdir().unwrap();
    let sent = Mutex::new(vec![]);
    let stop = AtomicBool::new(false);
    let dead_claims = Mutex::new(0usize);
    // Live workers hold their claims long enough for any check here; the dying one's 1 s claims
    // come back soon.
    let opts = prod_queue::WorkOptions {
        batch: 2,
        lease: Duration::from_secs(120),
        until_empty: false,
        poll: Duration::from_millis(50),
        ..Default::default()
    };
    let records = std::thread::scope(|s| {
        // The dying worker: claims one batch as soon as there is one, then is gone.
        s.spawn(|| {
            let mut q = prod_queue::Queue::connect(&url, "pg-run").unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(120) && !stop.load(Ordering::SeqCst) {
                let jobs = q
                    .claim("dead", &coq.fingerprint(), 2, Duration::from_secs(1))
                    .unwrap();
                if !jobs.is_empty() {
                    *dead_claims.lock().unwrap() = jobs.len();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let workers: Vec<_> = ["w1", "w2"]
            .into_iter()
            .map(|name| {
                let (url, stop, sent, ccfg, opts, dead_claims) =
                    (&url, &stop, &sent, &ccfg, &opts, &dead_claims);
                s.spawn(move || {
                    // Live workers start after the dead one took its claims.
                    while *dead_claims.lock().unwrap() == 0 && !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let coq = CoqChecker::new(ccfg.clone()).unwrap();
                    let counting = Counting {
                        inner: &coq,
                        sent,
                        die_after: None,
                    };
                    let mut q = prod_queue::Queue::connect(url, "pg-run").unwrap();
                    let mut recorded = 0;
                    while !stop.load(Ordering::SeqCst) {
                        recorded += prod_queue::work(&mut q, &counting, name, opts)
                            .unwrap()
                            .recorded;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    recorded
                })
            })
            .collect();
        let theorems = prod_run::load_theorems(dir.path(), "rl", None, 0).unwrap();
        let store = RunStore::open_postgres(&url, "pg-run").unwrap();
        assert_eq!(store.backend(), "postgres");
        let queue = prod_queue::Queue::connect(&url, "pg-run").unwrap();
        // The coordinator does no checking itself (its checker only fixes the fingerprint).
        let never = Counting {
            inner: &coq,
            sent: &Mutex::new(vec![]),
            die_after: Some(0),
        };
        let checker =
            prod_queue::QueueChecker::new(queue, never, false, "coordinator", opts.clone());
        let cache = VerificationCache::open(&run_dir.path().join("cache.sqlite")).unwrap();
        let checker = CachedChecker::new(checker, cache);
        let lang = prod_coq::CoqLanguage;
        let final_check = prod_run::CoqFinal(Default::default());
        let statements = Default::default();
        let env = RunContext {
            store: &store,
            prover: prod_run::CheckSetup {
                checker: &checker,
                lang: &lang,
                final_check: &final_check,
            },
            out: run_dir.path(),
            bars: &Bars::hidden(),
            dataset_statements: &statements,
        };
        let records = run_rl(&config(dir.path()), &theorems, &env, &|_| Ok(())).unwrap();
        stop.store(true, Ordering::SeqCst);
        let recorded: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        (records, recorded)
    });
    let (records, recorded) = records;
    let key = |r: &prod_run::rl::RoundRecord| {
        let m = &r.metrics;
        (
            m.round,
            m.nodes,
            m.locally_correct,
            m.globally_correct,
            m.examples,
            m.replay_size,
        )
    };
    assert_eq!(
        records.iter().map(key).collect::<Vec<_>>(),
        reference.iter().map(key).collect::<Vec<_>>()
    );
    let sent = sent.lock().unwrap().clone();
    let mut uniq = sent.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), sent.len(), "a request reached Coq twice");
    assert_eq!(
        sent.len(),
        sent_ref.lock().unwrap().len(),
        "the workers checked exactly what the embedded run checked"
    );
    let dead = *dead_claims.lock().unwrap();
    assert!(dead > 0, "the dying worker claimed a batch");
    let results = prod_queue::Queue::connect(&url, "pg-run")
        .unwrap()
        .results()
        .unwrap();
    assert_eq!(results.len(), sent.len());
    assert!(
        results
            .iter()
            .all(|(_, v, _, recordings)| v.is_some() && *recordings == 1),
        "each check recorded exactly once"
    );
    assert_eq!(
        recorded.iter().sum::<usize>(),
        results.len(),
        "every check recorded by a live worker ({recorded:?})"
    );
    let retried = results
        .iter()
        .filter(|(_, _, claims, _)| *claims >= 2)
        .count();
    assert!(
        retried >= dead,
        "the dead worker's {dead} claims were taken again ({retried})"
    );
    // The rounds are in PostgreSQL: running again finds them done and asks nothing (a checker
    // that dies on its first request).
    let store = RunStore::open_postgres(&url, "pg-run").unwrap();
    let never = Counting {
        inner: &coq,
        sent: &Mutex::new(vec![]),
        die_after: Some(0),
    };
    let lang = prod_coq::CoqLanguage;
    let final_check = prod_run::CoqFinal(Default::default());
    let statements = Default::default();
    let env = RunContext {
        store: &store,
        prover: prod_run::CheckSetup {
            checker: &never,
            lang: &lang,
            final_check: &final_check,
        },
        out: run_dir.path(),
        bars: &Bars::hidden(),
        dataset_statements: &statements,
    };
    let theorems = prod_run::load_theorems(dir.path(), "rl", None, 0).unwrap();
    let again = run_rl(&config(dir.path()), &theorems, &env, &|_| Ok(())).unwrap();
    assert_eq!(
        again.iter().map(key).collect::<Vec<_>>(),
        reference.iter().map(key).collect::<Vec<_>>()
    );
}

/// `prod rl` sampling from a remote server (a fake SGLang: every completion is
/// `intros n. lia.`, every two-token question answers 0.7 / 0.3). Its samples reach the real
/// Coq (some prove their theorem: the native random model never does), the value weights come
/// from the server, the policy trains natively, and `after_round` (where a real setup reloads
/// the server) sees each new checkpoint.
#[test]
fn rl_rounds_sample_from_a_remote_server() {
    use std::sync::Arc;
    let fake = prod_remote::testing::serve(Arc::new(|path: &str, body: &serde_json::Value, _| {
        if path.contains("generate") {
            let ids = body["token_ids_logprob"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let (a, b) = (
                ids.first().cloned().unwrap_or_default(),
                ids.get(1).cloned().unwrap_or_default(),
            );
            let meta = serde_json::json!({"output_token_ids_logprobs": [[[(0.7f64).ln(), a, null], [(0.3f64).ln(), b, null]]]});
            return (
                200,
                serde_json::json!({"text": "", "meta_info": meta}).to_string(),
            );
        }
        // What to sample comes from the run's one [sampling] table (12 new tokens, 0.7).
        assert_eq!(
            (body["max_tokens"].as_u64(), body["temperature"].as_f64()),
            (Some(12), Some(0.7)),
            "{body}"
        );
        let n = body["n"].as_u64().unwrap_or(1);
        let choices: Vec<serde_json::Value> = (0..n).map(|i| serde_json::json!({"index": i, "text": " intros n. lia.", "finish_reason": "stop"})).collect();
        (200, serde_json::json!({"choices": choices}).to_string())
    }));
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let coq = common::coq();
    let mut cfg = config(dir.path());
    cfg.remote = Some(prod_remote::RemoteConfig {
        base_url: fake.url.clone(),
        server: prod_remote::ServerKind::Sglang,
        backoff_ms: 1,
        ..Default::default()
    });
    cfg.after_round = ["touch", "{out}/served"].map(String::from).to_vec();
    let run_dir = tempfile::tempdir().unwrap();
    let records = run_with(
        &cfg,
        dir.path(),
        run_dir.path(),
        &coq,
        &Mutex::new(vec![]),
        None,
    );
    assert_eq!(records.len(), 2);
    let store = RunStore::open_dir(run_dir.path()).unwrap();
    for r in &records {
        let round = r.metrics.round;
        assert!(
            run_dir
                .path()
                .join(format!("checkpoints/round-{round}/served"))
                .exists(),
            "after_round ran on round {round}'s checkpoint"
        );
        assert!(
            r.metrics.loss.is_some(),
            "trained natively: {:?}",
            r.metrics
        );
        let nodes = store.nodes(round, Phase::Rl).unwrap();
        let proved_samples = nodes
            .iter()
            .filter(|n| {
                n.origin == prod_rl::Origin::Sampled
                    && store.verdict(n.id).unwrap().is_some_and(|v| v.is_proved())
            })
            .count();
        assert!(
            proved_samples > 0,
            "round {round}: the server's proof checks for n + 0 = n or n * 1 = n"
        );
    }
    let log = fake.log.lock().unwrap();
    assert!(
        log.iter().any(|(p, _)| p.contains("completions")),
        "samples came from the server"
    );
    assert!(
        log.iter().any(|(p, _)| p.contains("generate")),
        "two-token probabilities came from the server"
    );
}

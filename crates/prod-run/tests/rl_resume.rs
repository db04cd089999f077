//! ProD-RL end to end on a tiny config with the real Coq checker and a tiny random model:
//! two rounds (Algorithm 2, checks, global correctness, value examples, weighted-CE update,
//! checkpoints), then the same run killed during its second round's checks and resumed —
//! the same rounds come out, and no request reaches Coq twice.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Mutex;

use prod_check::{CachedChecker, CheckRequest, Checker, Progress, Verdict, VerificationCache};
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_library::dataset::{Example, SourceRecord};
use prod_policy::model::Llama;
use prod_policy::{LlamaConfig, ProdTokenizer};
use prod_run::rl::{run_rl, RlEnv};
use prod_run::{Bars, CoqJobConfig, NativeParams, RlConfig, RunStore};

const SOURCE: &str = "From Coq Require Import Arith Lia.\nDefinition double (n : nat) := n + n.\n";

fn example(name: &str, statement: &str, proof: &str, lemmas: &[&str]) -> Example {
    Example {
        id: format!("Fix:{name}"),
        library: "fixture".into(),
        package: "fixture".into(),
        file: "Fix.v".into(),
        logical_path: "Fix".into(),
        line: 3,
        position: 0,
        scope: vec![],
        qualified_name: name.into(),
        name: name.into(),
        imports: vec![],
        flags: vec![],
        context: SOURCE.into(),
        context_start: 0,
        context_end: SOURCE.len(),
        context_extra: String::new(),
        statement: statement.into(),
        conditional_proof: proof.into(),
        conditional_proof_original: proof.into(),
        proposed_lemmas: lemmas.iter().map(|s| s.to_string()).collect(),
        proposed_names: vec![],
        depth: u32::from(!lemmas.is_empty()),
        in_tree: true,
        proof_end: "qed".into(),
        replaced_steps: 0,
        split: "train".into(),
        variant: "wo_lemmas".into(),
    }
}

fn write_fixture(dir: &Path) {
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    let examples = [
        example("t_add", "Lemma t_add : forall n : nat, n + 0 = n.", "<no_invoke> intros n. lia.", &[]),
        example(
            "t_double",
            "Lemma t_double : forall n : nat, double n = 2 * n.",
            &format!("<use_invoke> <invoke> {dbl} </invoke> intros n. rewrite dbl. lia."),
            &[dbl],
        ),
        example("t_mul", "Lemma t_mul : forall n : nat, n * 1 = n.", "<no_invoke> intros n. lia.", &[]),
    ];
    let lines: Vec<String> = examples.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
    std::fs::write(dir.join("rl.jsonl"), lines.join("\n") + "\n").unwrap();
    // As JSON: the record may gain optional fields (Isabelle's `body_start`).
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": SOURCE, "reduced": SOURCE});
    let _: SourceRecord = serde_json::from_value(src.clone()).unwrap();
    std::fs::write(dir.join("sources.jsonl"), src.to_string() + "\n").unwrap();
    // The tiny model: BPE on the fixture's own text, random weights.
    let texts: Vec<String> = examples.iter().map(|e| format!("{SOURCE}\n{}\n{}", e.statement, e.conditional_proof)).collect();
    let tok = ProdTokenizer::train_bpe(texts.iter(), 300, 1).unwrap();
    let mut model = Llama::random(&LlamaConfig::tiny(tok.vocab_size()), 7, &prod_policy::candle_core::Device::Cpu).unwrap();
    prod_policy::save_model_dir(&dir.join("model"), &mut model, &tok).unwrap();
}

/// Real Coq behind a counter that can die (a kill) after `die_after` requests.
struct Counting<'a> {
    inner: &'a CoqChecker,
    sent: &'a Mutex<Vec<String>>,
    die_after: Option<usize>,
}

impl Checker for Counting<'_> {
    fn prover(&self) -> &'static str {
        "coq"
    }
    fn fingerprint(&self) -> String {
        self.inner.fingerprint()
    }
    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
        let mut out = vec![];
        for (i, r) in requests.iter().enumerate() {
            {
                let mut sent = self.sent.lock().unwrap();
                if self.die_after.is_some_and(|d| sent.len() >= d) {
                    drop(sent);
                    panic!("killed during checking");
                }
                sent.push(format!("{}|{}|{}", r.context.len(), r.statement, r.proof));
            }
            let v = self.inner.check(r);
            progress(i, &v);
            out.push(v);
        }
        out
    }
}

fn config(dir: &Path) -> RlConfig {
    RlConfig {
        model: dir.join("model"),
        dataset: dir.to_path_buf(),
        rounds: 2,
        batch: 2,
        depth: 1,
        learning_rate: 1e-3,
        warmup_steps: 0,
        macro_batch: 8,
        micro_batch: 4,
        max_seq_len: 512,
        sampling: NativeParams { max_new_tokens: 12, ..NativeParams::default() },
        coq: CoqJobConfig { workers: 1, hammer: false, ..CoqJobConfig::default() },
        ..RlConfig::default()
    }
}

fn run(dir: &Path, run_dir: &Path, coq: &CoqChecker, sent: &Mutex<Vec<String>>, die_after: Option<usize>) -> Vec<prod_run::rl::RoundRecord> {
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
    let checker = CachedChecker::new(Counting { inner: coq, sent, die_after }, cache);
    let lang = prod_coq::CoqLanguage;
    let statements = Default::default();
    let env = RlEnv { store: &store, checker: &checker, lang: &lang, out: run_dir, bars: &Bars::hidden(), dataset_statements: &statements };
    run_rl(cfg, &theorems, &env, &|_| Ok(())).unwrap()
}

#[test]
fn an_external_trainer_gets_the_rounds_examples_and_writes_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let mut ccfg = CoqCheckConfig { workers: 1, ..Default::default() };
    ccfg.hammer.enabled = false;
    let coq = CoqChecker::new(ccfg).expect("coq is installed");
    let mut cfg = config(dir.path());
    cfg.rounds = 1;
    // A stand-in for python/train_weighted.py: needs the examples, writes a model directory.
    let script = "test -s \"$0\" && mkdir -p \"$2\" && cp -r \"$1\"/. \"$2\"/ && touch \"$2\"/trained-externally";
    cfg.external_trainer = ["sh", "-c", script, "{examples}", "{model}", "{out}"].map(String::from).to_vec();
    cfg.after_round = ["touch", "{out}/after-round"].map(String::from).to_vec();
    let run_dir = tempfile::tempdir().unwrap();
    let records = run_with(&cfg, dir.path(), run_dir.path(), &coq, &Mutex::new(vec![]), None);
    assert_eq!(records.len(), 1);
    assert!(records[0].metrics.loss.is_some(), "the loss is measured on the new weights");
    let ckpt = run_dir.path().join("checkpoints/round-1");
    assert!(ckpt.join("trained-externally").exists() && ckpt.join("after-round").exists());
    let tok = ProdTokenizer::from_file(&dir.path().join("model/tokenizer.json"), None).unwrap();
    let text = std::fs::read_to_string(run_dir.path().join("rounds/round-1/examples.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2, "ground truth at least");
    for l in &lines {
        let ids = |k: &str| -> Vec<u32> { l[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect() };
        assert_eq!(tok.decode(&ids("prompt_ids")).unwrap(), l["prompt"].as_str().unwrap());
        assert_eq!(tok.decode(&ids("completion_ids")).unwrap(), l["completion"].as_str().unwrap());
        assert!(l["weight"].as_f64().unwrap() > 0.0);
    }
    // A value example's completion is one of the two value tokens.
    assert!(lines.iter().any(|l| ["<true>", "<false>"].contains(&l["completion"].as_str().unwrap())));
}

#[test]
fn rl_rounds_with_real_coq_resume_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    write_fixture(dir.path());
    let mut ccfg = CoqCheckConfig { workers: 1, ..Default::default() };
    ccfg.hammer.enabled = false;
    let coq = CoqChecker::new(ccfg).expect("coq is installed");

    let ref_dir = tempfile::tempdir().unwrap();
    let sent_ref = Mutex::new(vec![]);
    let reference = run(dir.path(), ref_dir.path(), &coq, &sent_ref, None);
    assert_eq!(reference.len(), 2);
    for r in &reference {
        let m = &r.metrics;
        // Every round: 2 theorems with <no_invoke> samples, ground truth at depth 0 (checked by
        // Coq: both human proofs are locally correct), a checkpoint and a training loss.
        assert!(m.nodes >= 4, "{m:?}");
        assert!(m.locally_correct >= 2, "ground-truth proofs are locally correct: {m:?}");
        assert!(m.examples >= 2 && m.loss.is_some(), "{m:?}");
        assert!(ref_dir.path().join(format!("checkpoints/round-{}/model.safetensors", m.round)).exists());
    }
    let n = sent_ref.lock().unwrap().len();
    assert!(n >= 2, "ground truth went to Coq: {n}");

    // Killed while checking in the last round, then resumed.
    let run_dir = tempfile::tempdir().unwrap();
    let sent = Mutex::new(vec![]);
    let killed = catch_unwind(AssertUnwindSafe(|| run(dir.path(), run_dir.path(), &coq, &sent, Some(n - 1))));
    assert!(killed.is_err(), "the run must have been killed");
    let store = RunStore::open_dir(run_dir.path()).unwrap();
    assert!(store.checkpoints().unwrap().len() < 2, "killed before the last round finished");
    drop(store);
    let resumed = run(dir.path(), run_dir.path(), &coq, &sent, None);
    let sent = sent.lock().unwrap().clone();
    let mut uniq = sent.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), sent.len(), "a request reached Coq twice: {sent:#?}");
    assert_eq!(sent.len(), n, "the resumed run checked exactly what the uninterrupted one did");
    let key = |r: &prod_run::rl::RoundRecord| {
        let m = &r.metrics;
        (m.round, m.nodes, m.locally_correct, m.globally_correct, m.examples, m.replay_size)
    };
    assert_eq!(resumed.iter().map(key).collect::<Vec<_>>(), reference.iter().map(key).collect::<Vec<_>>());
}

#[test]
fn filters_remove_unnecessary_lemmas_and_spot_trivial_proposals_with_real_coq() {
    use prod_core::ConditionalProof;
    use prod_run::rl::filter_proposals;
    let mut ccfg = CoqCheckConfig { workers: 1, ..Default::default() };
    ccfg.hammer.enabled = false;
    let coq = CoqChecker::new(ccfg).expect("coq is installed");
    let lang = prod_coq::CoqLanguage;
    let cfg = RlConfig::default();
    // `u` is never needed; `k` states the theorem itself up to names: trivial.
    let p = ConditionalProof::parse(
        "<use_invoke> <invoke> Lemma u : 0 = 0. </invoke> <invoke> Lemma k : forall m : nat, m + 0 = m. </invoke> intros n. rewrite u. apply k.",
    )
    .unwrap();
    let f = filter_proposals(&coq, &lang, SOURCE, "Lemma t : forall n : nat, n + 0 = n.", p, &cfg);
    assert_eq!(f.removed, 1, "{f:?}");
    assert_eq!(f.proof.lemmas().collect::<Vec<_>>(), ["Lemma k : forall m : nat, m + 0 = m."]);
    assert!(f.trivial);
    // A real decomposition: `dbl` is needed and does not close the theorem by itself.
    let p = ConditionalProof::parse(
        "<use_invoke> <invoke> Lemma dbl : forall n : nat, double n = n + n. </invoke> intros n. rewrite dbl. lia.",
    )
    .unwrap();
    let f = filter_proposals(&coq, &lang, SOURCE, "Lemma t_double : forall n : nat, double n = 2 * n.", p.clone(), &cfg);
    assert_eq!((f.removed, f.trivial), (0, false), "{f:?}");
    assert_eq!(f.proof, p);
}

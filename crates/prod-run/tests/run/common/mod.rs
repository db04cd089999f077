//! Fixtures shared by prod-run's integration tests: a one-file Coq "library" as dataset lines
//! (`rl.jsonl`, `sources.jsonl`), a tiny random model trained on nothing, and a small RL config.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Mutex;

use prod_check::{CheckRequest, Checker, Progress, Verdict};

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_library::dataset::{Example, SourceRecord};
use prod_policy::model::Llama;
use prod_policy::{LlamaConfig, ProdTokenizer};
use prod_run::{CoqJobConfig, NativeParams, RlConfig};

pub const SOURCE: &str =
    "From Coq Require Import Arith Lia.\nDefinition double (n : nat) := n + n.\n";

/// A dataset line of the fixture file.
pub fn example(name: &str, statement: &str, proof: &str, lemmas: &[&str]) -> Example {
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
        context_axioms: vec![],
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

/// `dir/rl.jsonl` (the examples), `dir/sources.jsonl` and `dir/model` (BPE on the examples'
/// text, random weights).
pub fn write_fixture(dir: &Path, examples: &[Example]) {
    let lines: Vec<String> = examples
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    std::fs::write(dir.join("rl.jsonl"), lines.join("\n") + "\n").unwrap();
    // As JSON: the record may gain optional fields (Isabelle's `body_start`).
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": SOURCE, "reduced": SOURCE});
    let _: SourceRecord = serde_json::from_value(src.clone()).unwrap();
    std::fs::write(dir.join("sources.jsonl"), src.to_string() + "\n").unwrap();
    let texts: Vec<String> = examples
        .iter()
        .map(|e| format!("{SOURCE}\n{}\n{}", e.statement, e.conditional_proof))
        .collect();
    tiny_model(&dir.join("model"), &texts);
}

/// A tiny random model in `dir`, its BPE tokenizer trained on `texts`.
pub fn tiny_model(dir: &Path, texts: &[String]) {
    let tok = ProdTokenizer::train_bpe(texts.iter(), 300, 1).unwrap();
    let mut model = Llama::random(
        &LlamaConfig::tiny(tok.vocab_size()),
        7,
        &prod_policy::candle_core::Device::Cpu,
    )
    .unwrap();
    prod_policy::save_model_dir(dir, &mut model, &tok).unwrap();
}

/// A small ProD-RL config over the fixture: 2 theorems a round, depth 1, 12 new tokens.
pub fn rl_config(dir: &Path, rounds: u32) -> RlConfig {
    RlConfig {
        model: dir.join("model"),
        dataset: dir.to_path_buf(),
        rounds,
        batch: 2,
        depth: 1,
        learning_rate: 1e-3,
        warmup_steps: 0,
        macro_batch: 8,
        micro_batch: 4,
        max_seq_len: 512,
        sampling: NativeParams {
            sampling: prod_core::Sampling {
                max_new_tokens: 12,
                ..prod_core::Sampling::default()
            },
            ..NativeParams::default()
        },
        coq: CoqJobConfig {
            workers: 1,
            hammer: false,
            ..CoqJobConfig::default()
        },
        ..RlConfig::default()
    }
}

/// The tests' Coq settings: one worker, no hammer.
pub fn coq_config() -> CoqCheckConfig {
    let mut cfg = CoqCheckConfig {
        workers: 1,
        ..Default::default()
    };
    cfg.hammer.enabled = false;
    cfg
}

/// The real Coq checker with [`coq_config`].
pub fn coq() -> CoqChecker {
    CoqChecker::new(coq_config()).expect("coq is installed")
}

/// Real Coq, one request at a time, behind a counter of what reaches it (context length,
/// statement, proof) that can die — a kill — once `die_after` requests went through.
pub struct Counting<'a> {
    pub inner: &'a CoqChecker,
    pub sent: &'a Mutex<Vec<String>>,
    pub die_after: Option<usize>,
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

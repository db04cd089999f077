//! ProD-RL rounds (paper §3.2, Appendix A.1): each round draws B theorems, generates
//! train-time proof trees (Algorithm 2), checks every node, filters lemma proposals, computes
//! global correctness, trains the value model on it, weights examples `γ^h·∏V(l)` (or expert
//! iteration), mixes in the replay buffer and updates the policy with weighted cross-entropy;
//! a checkpoint per round.
//!
//! Resume: completed rounds are skipped (their metrics and checkpoints are in the store); the
//! current round restarts from the previous checkpoint, re-generates its trees from the sample
//! log (no model call), checks only nodes without a stored verdict, gets filter checks from the
//! verification cache, and trains again from that checkpoint (and the value model from its own).
//!
//! Value model (`value_model`): by default, as in the paper, a separate copy initialised from
//! the SFT model, scoring V(l) through its `<true>`/`<false>` probabilities
//! (`prod_policy::prompt::value`) and trained with its own optimizer only on the round's
//! `(x, <true>|<false>)` examples; it is saved beside the policy as `checkpoints/round-N-value`
//! (external trainers get a second call with `value_examples.jsonl`). `shared` scores with the
//! policy's own head, trained in the policy's update, and `off` sets V = 1.
//! Replay buffer: FIFO of the rounds' fresh examples (`replay_capacity`), and each round's batch
//! adds `replay_mix × fresh` examples drawn from it.
//!
//! Per-round evaluation (`[eval]`): without a curve of held-out pass@k over rounds there is no
//! telling whether training helps, so the starting model ("round 0", kept in the store's meta)
//! and each round's checkpoint are evaluated with `run_eval` (Algorithm 1 trees, checks, cold
//! re-checks, 95% CIs) on the same first N theorems of a held-out split with the same
//! sampling seeds. The trees live in the run store under (round, `rl-eval`), so a killed
//! evaluation resumes like `prod eval`; a round whose figures are in its metrics is not
//! evaluated again. Every round also records its wall time by phase (sample, check, filter,
//! train) and the sampled tokens per second.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use prod_check::{CheckRequest, Checker};
use prod_core::{ConditionalProof, ProofLanguage};
use prod_policy::prompt::TrainExample;
use prod_report::RoundMetrics;
use prod_rl::examples::ExampleKind;
use prod_rl::filters::without_each_lemma;
use prod_rl::{GeneratedNode, ReplayBuffer, Weighting, GAMMA_PAPER};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::eval::Theorem;
use crate::policy::{mix_seed, NativeParams, NativePolicy, RemoteSeq, SeqPolicy};
use crate::progress::Bars;
use crate::prover::ProverKind;
use crate::store::{Phase, RunStore, StoredExample, StoredNode};

/// Which method a run trains (paper §4.3 and Appendix A.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// ProD-RL: REINFORCE weights γ^h·∏V(l) with lemma proposals.
    #[default]
    ProdRl,
    /// Expert iteration: weight 1 iff globally correct (with lemma proposals).
    ExpertIteration,
    /// RL without lemma proposal (Appendix A.2): only `<no_invoke>` samples; ground-truth
    /// proofs join with their lemmas moved into the context.
    NoLemmaProposal,
}

impl Method {
    /// The paper's name for the method (report titles, tables).
    pub fn display_name(self) -> &'static str {
        match self {
            Method::ProdRl => "ProD-RL",
            Method::ExpertIteration => "Expert iteration",
            Method::NoLemmaProposal => "RL w/o lemma proposal",
        }
    }
}

/// Where the value model V(l) of the weights comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ValueModel {
    /// A second model, initialised from the SFT model and trained only on the value examples
    /// (paper Appendix A.1); checkpointed per round in `checkpoints/round-N-value`.
    #[default]
    Separate,
    /// The policy's own `<true>`/`<false>` head, trained in the policy's update.
    Shared,
    /// No value model: every V(l) = 1.
    Off,
}

impl<'de> Deserialize<'de> for ValueModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Bool(bool),
            Name(String),
        }
        match Repr::deserialize(d)? {
            Repr::Bool(true) => Ok(ValueModel::Shared),
            Repr::Bool(false) => Ok(ValueModel::Off),
            Repr::Name(n) => match n.as_str() {
                "separate" => Ok(ValueModel::Separate),
                "shared" => Ok(ValueModel::Shared),
                "off" => Ok(ValueModel::Off),
                _ => Err(serde::de::Error::custom(format!(
                    "unknown value_model {n:?}: expected \"separate\", \"shared\" or \"off\""
                ))),
            },
        }
    }
}

/// `[eval]` of `rl.toml`: the per-round evaluation (Algorithm 1 trees, pass@k with bootstrap
/// CIs) on the first `theorems` theorems of `split`, the same ones and the same sampling seeds
/// every round, so that the rounds' figures form a curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlEvalConfig {
    /// Theorems evaluated (the first N of the split, in file order); 0 = no evaluation.
    pub theorems: usize,
    /// Split file (`{split}.jsonl` of the dataset), held out from the RL split.
    pub split: String,
    /// n: test-time trees per theorem.
    pub samples: u32,
    /// Depth limit of Algorithm 1 (paper: 2).
    pub depth: u32,
    /// pass@k for these k (those > samples are left out).
    pub ks: Vec<usize>,
    /// Evaluate after every `every`-th round (and always after the last).
    pub every: u32,
    pub final_timeout_s: u64,
    pub bootstrap: usize,
}

impl Default for RlEvalConfig {
    fn default() -> Self {
        RlEvalConfig {
            theorems: 0,
            split: "test".into(),
            samples: 4,
            depth: 2,
            ks: vec![1, 2, 4],
            every: 1,
            final_timeout_s: prod_prover::RUN_FINAL_TIMEOUT_S,
            bootstrap: prod_core::pass_at_k::DEFAULT_BOOTSTRAP,
        }
    }
}

impl RlEvalConfig {
    fn enabled(&self) -> bool {
        self.theorems > 0
    }

    /// Whether round `round` (0 = the starting model) of `rounds` is evaluated.
    pub fn due(&self, round: u32, rounds: u32) -> bool {
        self.enabled() && (round == 0 || round == rounds || round.is_multiple_of(self.every.max(1)))
    }
}

/// `rl.toml`. Paper values in comments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlConfig {
    /// Initial model directory (the SFT model).
    pub model: PathBuf,
    /// Dataset directory (`prod dataset build`).
    pub dataset: PathBuf,
    /// Split file the theorems come from (paper: the RL set, `rl.jsonl`).
    pub split: String,
    /// R (paper: 20).
    pub rounds: u32,
    /// B theorems per round (paper: 5,000).
    pub batch: usize,
    /// Depth limit of Algorithm 2 (paper: 3).
    pub depth: u32,
    pub method: Method,
    /// γ (paper: e^-0.0005).
    pub gamma: f64,
    /// The value model V of the weights γ^h·∏V(l), trained each round on global correctness:
    /// `"separate"` (paper: a copy of the SFT model with its own optimizer), `"shared"` (the
    /// policy's own `<true>`/`<false>` head, trained in the policy's update) or `"off"` (V = 1).
    /// `true`/`false` (older configs) read as `"shared"`/`"off"`.
    pub value_model: ValueModel,
    /// Remove unnecessary lemmas (one cached check per lemma).
    pub unnecessary_lemma_filter: bool,
    /// The prover: `"coq"` (the `[coq]` section) or `"isabelle"` (the `[isabelle]` section: a
    /// running Isabelle server, the keys of `[check.isabelle]` in `prod.toml`).
    #[serde(skip_serializing_if = "ProverKind::is_coq")]
    pub prover: ProverKind,
    /// Drop proposals whose theorem closes from one lemma alone by this tactic (`{lemma}` is
    /// replaced by the lemma's name); empty = only the same-statement test. Default: the
    /// prover's (Coq `intros; eauto using {lemma}.`, Isabelle `using {lemma} by auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial_tactic: Option<String>,
    pub replay_capacity: usize,
    pub replay_mix: f64,
    /// Optimizer (paper: 1e-5, macro batch 128).
    pub learning_rate: f64,
    pub warmup_steps: usize,
    pub macro_batch: usize,
    pub micro_batch: usize,
    pub max_seq_len: usize,
    /// Passes over each round's batch.
    pub epochs: usize,
    pub sampling: NativeParams,
    pub coq: crate::job::CoqJobConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isabelle: Option<prod_check_isabelle::IsabelleCheckConfig>,
    pub seed: u64,
    /// pass@k on a fixed held-out subset after every `every` rounds, and of the starting model
    /// as round 0 (off while `theorems = 0`).
    pub eval: RlEvalConfig,
    /// Scale-out training: instead of the native trainer, run this command each round (argv;
    /// `{examples}` = the round's `examples.jsonl`, `{model}` = the previous checkpoint (a
    /// Hugging Face model directory), `{out}` = where the new checkpoint must be written, in the
    /// same layout). Empty = the native trainer. Reference trainer: `python/train_weighted.py`.
    pub external_trainer: Vec<String>,
    /// Run after each round's checkpoint is written (same placeholders), e.g. to point a remote
    /// inference server at the new weights (SGLang `/update_weights_from_disk`, or a restart).
    pub after_round: Vec<String>,
    /// Sample (and score `V`, `P(<use_invoke>)`) on a remote inference server instead of the
    /// native model; the model directory of each round then only supplies the tokenizer.
    /// `after_round` must make the server serve `{out}` for the next round.
    pub remote: Option<prod_remote::RemoteConfig>,
    /// Scale-out: the run store and the checks in a PostgreSQL database, drained by
    /// `prod queue work` processes on any machine.
    pub postgres: Option<crate::job::SharedStore>,
}

impl Default for RlConfig {
    fn default() -> Self {
        RlConfig {
            model: PathBuf::new(),
            dataset: PathBuf::new(),
            split: "rl".into(),
            rounds: 20,
            batch: 5000,
            depth: 3,
            method: Method::ProdRl,
            gamma: GAMMA_PAPER,
            value_model: ValueModel::Separate,
            unnecessary_lemma_filter: true,
            prover: ProverKind::Coq,
            trivial_tactic: None,
            replay_capacity: 20_000,
            replay_mix: 0.5,
            learning_rate: 1e-5,
            warmup_steps: 10,
            macro_batch: 128,
            micro_batch: 4,
            max_seq_len: 2048,
            epochs: 1,
            sampling: NativeParams::default(),
            coq: crate::job::CoqJobConfig::default(),
            isabelle: None,
            seed: 0,
            eval: RlEvalConfig::default(),
            external_trainer: Vec::new(),
            after_round: Vec::new(),
            remote: None,
            postgres: None,
        }
    }
}

impl RlConfig {
    /// Every number in its range; the error names the key (`sampling.top_p = 0: …`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::ranges::*;
        at_least_one("rounds", self.rounds)?;
        at_least_one("batch", self.batch)?;
        open_closed_unit("gamma", self.gamma)?;
        finite_non_negative("replay_mix", self.replay_mix)?;
        finite_positive("learning_rate", self.learning_rate)?;
        at_least_one("macro_batch", self.macro_batch)?;
        at_least_one("micro_batch", self.micro_batch)?;
        if self.micro_batch > self.macro_batch {
            return Err(format!(
                "micro_batch = {} must not exceed macro_batch = {}",
                self.micro_batch, self.macro_batch
            ));
        }
        at_least_one("max_seq_len", self.max_seq_len)?;
        at_least_one("epochs", self.epochs)?;
        self.sampling
            .validate()
            .map_err(|e| format!("sampling.{e}"))?;
        self.coq.validate().map_err(|e| format!("coq.{e}"))?;
        if self.eval.enabled() {
            at_least_one("eval.samples", self.eval.samples)?;
            at_least_one("eval.every", self.eval.every)?;
            at_least_one("eval.bootstrap", self.eval.bootstrap)?;
            if let Some(k) = self.eval.ks.iter().find(|&&k| k == 0) {
                return Err(format!("eval.ks contains {k}: every k must be at least 1"));
            }
        }
        if let Some(r) = &self.remote {
            crate::policy::validate_remote(r).map_err(|e| format!("remote.{e}"))?;
            self.remote_sampling_in_one_place(r)?;
        }
        match &self.postgres {
            Some(p) => p.validate().map_err(|e| format!("postgres.{e}")),
            None => Ok(()),
        }
    }

    /// The remote server's settings with what to sample taken from `[sampling]`: the prompt's
    /// context length, the temperature, top-p and the completion length have one place, so a
    /// round trains on exactly the prompts it sampled with.
    pub fn remote_config(&self) -> Option<prod_remote::RemoteConfig> {
        self.remote.as_ref().map(|r| prod_remote::RemoteConfig {
            temperature: self.sampling.temperature,
            top_p: self.sampling.top_p,
            max_tokens: self.sampling.max_new_tokens,
            context_tokens: self.sampling.context_tokens,
            ..r.clone()
        })
    }

    /// A sampling setting written under `[remote]` that contradicts `[sampling]` is an error
    /// (it would be overridden by [`RlConfig::remote_config`]).
    fn remote_sampling_in_one_place(&self, r: &prod_remote::RemoteConfig) -> Result<(), String> {
        let d = prod_remote::RemoteConfig::default();
        let s = &self.sampling;
        let clash = |key: &str, theirs: String, default: String, ours: String, our_key: &str| {
            if theirs != default && theirs != ours {
                Err(format!(
                    "remote.{key} = {theirs}: a run samples and trains with sampling.{our_key} \
                     (= {ours}); set it there only"
                ))
            } else {
                Ok(())
            }
        };
        clash(
            "temperature",
            r.temperature.to_string(),
            d.temperature.to_string(),
            s.temperature.to_string(),
            "temperature",
        )?;
        clash(
            "top_p",
            r.top_p.to_string(),
            d.top_p.to_string(),
            s.top_p.to_string(),
            "top_p",
        )?;
        clash(
            "max_tokens",
            r.max_tokens.to_string(),
            d.max_tokens.to_string(),
            s.max_new_tokens.to_string(),
            "max_new_tokens",
        )?;
        clash(
            "context_tokens",
            r.context_tokens.to_string(),
            d.context_tokens.to_string(),
            s.context_tokens.to_string(),
            "context_tokens",
        )
    }

    /// The trivial-proposal tactic: the configured one, else the prover's.
    pub fn trivial_tactic(&self) -> &str {
        self.trivial_tactic
            .as_deref()
            .unwrap_or(self.prover.trivial_tactic())
    }

    /// The prover settings.
    pub fn prover_choice(&self) -> crate::job::ProverChoice<'_> {
        crate::job::ProverChoice {
            kind: self.prover,
            coq: &self.coq,
            isabelle: self.isabelle.as_ref(),
        }
    }

    pub(crate) fn weighting(&self) -> Weighting {
        match self.method {
            Method::ExpertIteration => Weighting::ExpertIteration,
            _ => Weighting::Reinforce { gamma: self.gamma },
        }
    }
}

pub(crate) fn goal_key(
    lang: &dyn ProofLanguage,
    context: &str,
    statement: &str,
) -> (String, String) {
    (
        crate::store::hash_fields(&[context]),
        lang.normalize_statement(statement),
    )
}

/// The theorems of round `round`: B drawn (seeded by round) from the split.
pub fn round_theorems(all: &[Theorem], batch: usize, seed: u64, round: u32) -> Vec<Theorem> {
    use rand::seq::SliceRandom;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(mix_seed(seed, 1_000_000 + round as u64));
    let mut v: Vec<Theorem> = all.to_vec();
    v.shuffle(&mut rng);
    v.truncate(batch);
    v
}

/// What a round produced, beyond the report metrics.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RoundRecord {
    pub metrics: RoundMetrics,
    /// The round's canaries, sampled from the round's policy before it trained.
    #[serde(default)]
    pub canaries: Option<prod_report::CanaryCheck>,
    /// Checks run by the filters (after the cache).
    pub filter_checks: usize,
    pub trivial_dropped: usize,
    pub lemmas_removed: usize,
}

pub(crate) fn load_policy_from(dir: &Path, params: &NativeParams) -> anyhow::Result<NativePolicy> {
    NativePolicy::load(dir, params.clone()).with_context(|| format!("load model {}", dir.display()))
}

/// A round's policy: the native model, or a remote server with the round's tokenizer.
// One value per round, never stored in bulk: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum RoundPolicy {
    Native(NativePolicy),
    Remote {
        seq: RemoteSeq,
        params: NativeParams,
    },
}

impl RoundPolicy {
    fn load(cfg: &RlConfig, dir: &Path) -> anyhow::Result<RoundPolicy> {
        match cfg.remote_config() {
            None => Ok(RoundPolicy::Native(load_policy_from(dir, &cfg.sampling)?)),
            Some(r) => Ok(RoundPolicy::Remote {
                seq: RemoteSeq::open(&r, dir).map_err(anyhow::Error::msg)?,
                params: cfg.sampling.clone(),
            }),
        }
    }

    pub(crate) fn seq(&mut self) -> &mut dyn SeqPolicy {
        match self {
            RoundPolicy::Native(p) => p,
            RoundPolicy::Remote { seq, .. } => seq,
        }
    }

    pub(crate) fn tok(&self) -> &prod_policy::ProdTokenizer {
        match self {
            RoundPolicy::Native(p) => &p.tok,
            RoundPolicy::Remote { seq, .. } => seq.0.tokenizer(),
        }
    }

    pub(crate) fn prompt(&self, context: &str, statement: &str) -> prod_policy::Result<Vec<u32>> {
        match self {
            RoundPolicy::Native(p) => p.prompt(context, statement),
            RoundPolicy::Remote { seq, params } => {
                crate::policy::prompt_ids(seq.0.tokenizer(), params, context, statement)
            }
        }
    }

    pub(crate) fn values(
        &mut self,
        goals: &[(&str, &str)],
    ) -> Result<Vec<f64>, prod_rl::PolicyError> {
        match self {
            RoundPolicy::Native(p) => p.values(goals),
            RoundPolicy::Remote { seq, .. } => seq.0.value(goals),
        }
    }
}

/// Run (or resume) all rounds. `initial` is the SFT model. Returns every round's record.
pub fn run_rl(
    cfg: &RlConfig,
    theorems: &[Theorem],
    env: &RunContext<'_>,
    on_round: &dyn Fn(&[RoundRecord]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<RoundRecord>> {
    let mut start = RoundStart::initial(cfg);
    let mut records: Vec<RoundRecord> = Vec::new();
    for (round, _path, metrics) in env.store.checkpoints()? {
        records.push(serde_json::from_str(&metrics)?);
        start.after(env.out, round);
    }
    let eval_set = eval_theorems(cfg)?;
    if cfg.eval.due(0, cfg.rounds) && env.store.get_meta(EVAL_START_KEY)?.is_none() {
        let mut policy = RoundPolicy::load(cfg, &cfg.model)?;
        let start = round_eval(cfg, env, &eval_set, 0, &mut policy)?;
        env.store
            .set_meta(EVAL_START_KEY, &serde_json::to_string(&start)?)?;
    }
    // Rounds finished before their evaluation was (a kill in between).
    for rec in records.iter_mut() {
        if cfg.eval.due(rec.metrics.round, cfg.rounds) && rec.metrics.eval.is_none() {
            evaluate_round(cfg, env, &eval_set, rec)?;
        }
    }
    let mut replay = replay_of(cfg, env.store, records.len() as u32)?;
    for round in (records.len() as u32 + 1)..=cfg.rounds {
        let mut policy = RoundPolicy::load(cfg, &start.ckpt)?;
        let r = crate::round::Round {
            cfg,
            env,
            round,
            start_ckpt: &start.ckpt,
            value_start: &start.value,
        };
        let mut rec = crate::round::run_round(&r, theorems, &mut policy, &mut replay)?;
        drop(policy);
        start.after(env.out, round);
        if cfg.eval.due(round, cfg.rounds) {
            evaluate_round(cfg, env, &eval_set, &mut rec)?;
        }
        records.push(rec);
        on_round(&records)?;
    }
    Ok(records)
}

/// Where the next round starts: the last checkpoint, and the separate value model's.
struct RoundStart {
    ckpt: PathBuf,
    value: PathBuf,
}

impl RoundStart {
    /// The SFT model (the separate value model starts as a copy of it).
    fn initial(cfg: &RlConfig) -> Self {
        RoundStart {
            ckpt: cfg.model.clone(),
            value: cfg.model.clone(),
        }
    }

    /// After round `round`: its checkpoint, and its value model when it saved one.
    fn after(&mut self, out: &Path, round: u32) {
        self.ckpt = round_checkpoint(out, round);
        if value_checkpoint(out, round).join("config.json").is_file() {
            self.value = value_checkpoint(out, round);
        }
    }
}

/// Evaluate a finished round's checkpoint and store the figures with the round's record.
fn evaluate_round(
    cfg: &RlConfig,
    env: &RunContext<'_>,
    eval_set: &[Theorem],
    rec: &mut RoundRecord,
) -> anyhow::Result<()> {
    let round = rec.metrics.round;
    let ckpt = round_checkpoint(env.out, round);
    let mut policy = RoundPolicy::load(cfg, &ckpt)?;
    let m = round_eval(cfg, env, eval_set, round, &mut policy)?;
    set_eval(&mut rec.metrics, m);
    env.store.put_checkpoint(
        round,
        &ckpt.display().to_string(),
        &serde_json::to_string(&*rec)?,
    )?;
    Ok(())
}

/// The replay buffer after `rounds` finished rounds: their fresh examples, in order.
fn replay_of(
    cfg: &RlConfig,
    store: &RunStore,
    rounds: u32,
) -> anyhow::Result<ReplayBuffer<StoredExample>> {
    let mut replay: ReplayBuffer<StoredExample> = ReplayBuffer::new(cfg.replay_capacity);
    for r in 1..=rounds {
        replay.extend(
            store
                .examples(r)?
                .into_iter()
                .filter(|e| e.kind != ExampleKind::Replayed),
        );
    }
    Ok(replay)
}

/// Where round `round`'s checkpoint is saved.
pub(crate) fn round_checkpoint(out: &Path, round: u32) -> PathBuf {
    out.join("checkpoints").join(format!("round-{round}"))
}

/// Where round `round`'s separate value model is saved (beside the policy's checkpoint).
pub fn value_checkpoint(out: &Path, round: u32) -> PathBuf {
    out.join("checkpoints").join(format!("round-{round}-value"))
}

/// Run-store key of the starting model's evaluation ("round 0").
pub const EVAL_START_KEY: &str = "rl_eval_round_0";

/// The per-round evaluation's theorems: the first `eval.theorems` of `eval.split`, in file order.
fn eval_theorems(cfg: &RlConfig) -> anyhow::Result<Vec<Theorem>> {
    if !cfg.eval.enabled() {
        return Ok(Vec::new());
    }
    let mut all = crate::eval::load_theorems(&cfg.dataset, &cfg.eval.split, None, cfg.seed)
        .map_err(crate::job::BadInput)?;
    all.truncate(cfg.eval.theorems);
    if all.is_empty() {
        return Err(crate::job::BadInput(format!(
            "eval: split {:?} of {} has no named theorems",
            cfg.eval.split,
            cfg.dataset.display()
        ))
        .into());
    }
    Ok(all)
}

/// One round's evaluation as stored: what goes into its metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundEval {
    pub pass_at_k: Vec<prod_report::PassAtK>,
    pub theorems: usize,
    pub seconds: f64,
    /// Share of the root samples that begin with `<use_invoke>`.
    #[serde(default)]
    pub use_invoke_share_root: Option<f64>,
}

fn set_eval(m: &mut RoundMetrics, e: RoundEval) {
    m.eval = Some(e.pass_at_k);
    m.eval_theorems = e.theorems;
    m.eval_s = e.seconds;
    m.eval_use_invoke_share_root = e.use_invoke_share_root;
}

/// The starting model's evaluation, when the run has one.
pub fn start_eval(store: &RunStore) -> anyhow::Result<Option<RoundMetrics>> {
    let Some(text) = store.get_meta(EVAL_START_KEY)? else {
        return Ok(None);
    };
    let e: RoundEval = serde_json::from_str(&text)?;
    let mut m = RoundMetrics::default();
    set_eval(&mut m, e);
    Ok(Some(m))
}

/// The evaluation settings of the fixed subset, under `name`.
fn eval_options(cfg: &RlConfig, name: String) -> crate::eval::EvalOptions {
    crate::eval::EvalOptions {
        name,
        split: cfg.eval.split.clone(),
        ks: cfg.eval.ks.clone(),
        samples: cfg.eval.samples,
        depth: cfg.eval.depth,
        final_timeout_s: cfg.eval.final_timeout_s,
        bootstrap: cfg.eval.bootstrap,
        seed: cfg.seed,
        temperature: cfg.sampling.temperature,
    }
}

/// Round `round`'s canaries, in the contexts of its theorems, sampled from its policy before
/// it trains: an accepted canary stops the run before a wrong proof is reinforced.
pub(crate) fn round_canaries(
    cfg: &RlConfig,
    env: &RunContext<'_>,
    theorems: &[Theorem],
    round: u32,
    policy: &mut RoundPolicy,
) -> anyhow::Result<prod_report::CanaryCheck> {
    let opts = eval_options(cfg, format!("round {round} canaries"));
    let check = crate::canary::run_canaries(env, policy.seq(), theorems, &opts, round)?;
    crate::canary::stop_on_alarm(&check, env.out)?;
    Ok(check)
}

/// Evaluate `policy` (round `round`'s checkpoint; 0 = the starting model) on the fixed subset:
/// Algorithm 1 trees in the run store under (round, "rl-eval"), resumable like `prod eval`,
/// with the same sampling seeds every round.
fn round_eval(
    cfg: &RlConfig,
    env: &RunContext<'_>,
    theorems: &[Theorem],
    round: u32,
    policy: &mut RoundPolicy,
) -> anyhow::Result<RoundEval> {
    let t = Instant::now();
    env.bars.say(&format!(
        "round {round}: pass@k on {} held-out theorems",
        theorems.len()
    ));
    let opts = eval_options(cfg, format!("round {round}"));
    let r = crate::eval::run_eval(env, policy.seq(), theorems, &opts, round, Phase::RlEval)?;
    Ok(RoundEval {
        use_invoke_share_root: r.evaluation.use_invoke_share_root,
        pass_at_k: r.evaluation.pass_at_k,
        theorems: theorems.len(),
        seconds: t.elapsed().as_secs_f64(),
    })
}

pub(crate) fn stored_to_generated(
    store: &RunStore,
    n: &StoredNode,
    completion: &str,
) -> anyhow::Result<GeneratedNode> {
    let context = store.context(&n.context_key)?.unwrap_or_default();
    Ok(GeneratedNode {
        context,
        statement: n.statement.clone(),
        depth: n.depth,
        tree: n.tree,
        forced_t0: n.forced_t0,
        origin: n.origin,
        completion: completion.to_string(),
        proof: ConditionalProof::parse(completion),
    })
}

/// The loss an external trainer reports in `OUT/trainer_metrics.json` (`{"loss": x}`), if any.
pub(crate) fn trainer_loss(ckpt: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(ckpt.join("trainer_metrics.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()?
        .get("loss")?
        .as_f64()
}

/// One JSON line per training example: `prompt`/`completion` text (special tokens kept),
/// `weight`, and the exact `prompt_ids`/`completion_ids` (loss on the completion only).
pub fn write_examples(
    path: &Path,
    examples: &[TrainExample],
    tok: &prod_policy::ProdTokenizer,
) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let tmp = path.with_extension("jsonl.tmp");
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?,
    );
    for e in examples {
        let (p, c) = e.ids.split_at(e.loss_from.min(e.ids.len()));
        let line = serde_json::json!({
            "prompt": tok.decode(p)?, "completion": tok.decode(c)?, "weight": e.weight,
            "prompt_ids": p, "completion_ids": c,
        });
        writeln!(f, "{line}")?;
    }
    f.flush()?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}

/// Run a configured command; a failure stops the run (it resumes from the last checkpoint).
pub(crate) fn run_command(what: &str, argv: &[String]) -> anyhow::Result<()> {
    let Some((program, args)) = argv.split_first() else {
        return Ok(());
    };
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("{what}: cannot run {program}"))?;
    if !status.success() {
        anyhow::bail!("{what} `{}` failed ({status})", argv.join(" "));
    }
    Ok(())
}

/// What the filters of Section 3.2 did to one locally correct proof.
#[derive(Clone, Debug, PartialEq)]
pub struct Filtered {
    /// The proof with unnecessary lemmas removed.
    pub proof: ConditionalProof,
    /// A remaining lemma directly implies the theorem: the example is dropped.
    pub trivial: bool,
    pub removed: usize,
    /// Checker calls made (the verification cache answers repeated ones).
    pub checks: usize,
}

/// The filters on one locally correct proof (paper §3.2, Step 2):
/// (b) unnecessary lemmas first — a lemma is removed when the proof, without it and every
/// reference to it, still checks (one check per lemma, repeated until nothing more goes);
/// (a) then the proposal is *trivial* when the theorem closes from one remaining lemma alone
/// by [`RlConfig::trivial_tactic`] (`{lemma}` = its name). An `Infra` verdict never removes anything.
pub fn filter_proposals(
    checker: &dyn Checker,
    lang: &dyn ProofLanguage,
    context: &str,
    statement: &str,
    mut proof: ConditionalProof,
    cfg: &RlConfig,
) -> Filtered {
    let (mut checks, mut removed) = (0, 0);
    let mut again = cfg.unnecessary_lemma_filter;
    while again {
        again = false;
        for (_, candidate) in without_each_lemma(&proof, lang) {
            checks += 1;
            if checker
                .check(&CheckRequest::new(
                    "",
                    context,
                    statement,
                    candidate.clone(),
                ))
                .is_proved()
            {
                proof = candidate;
                removed += 1;
                again = true;
                break;
            }
        }
    }
    let mut trivial = false;
    if !cfg.trivial_tactic().trim().is_empty() {
        for l in proof.lemmas() {
            let Some(name) = lang.lemma_name(l) else {
                continue;
            };
            let tactic = cfg.trivial_tactic().replace("{lemma}", &name);
            let Ok(p) =
                ConditionalProof::parse(&format!("<use_invoke> <invoke> {l} </invoke> {tactic}"))
            else {
                continue;
            };
            checks += 1;
            if checker
                .check(&CheckRequest::new("", context, statement, p))
                .is_proved()
            {
                trivial = true;
                break;
            }
        }
    }
    Filtered {
        proof,
        trivial,
        removed,
        checks,
    }
}

/// Lemma statements proposed in the replay buffer's targets (for the novel-lemma share).
pub(crate) fn replay_lemma_statements(replay: &ReplayBuffer<StoredExample>) -> Vec<String> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
    replay
        .draw(replay.len(), &mut rng)
        .into_iter()
        .filter(|e| e.weight > 0.0)
        .filter_map(|e| ConditionalProof::parse(&e.target).ok())
        .flat_map(|p| p.lemmas().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// `prod rl` as a job: load the config's dataset split, start the checker, run or resume all
/// rounds in `out`, and keep `out/run.json` current after every round.
pub fn run_rl_job(
    cfg: &RlConfig,
    out: &Path,
    bars: &Bars,
) -> anyhow::Result<(prod_report::RunReport, Vec<RoundRecord>)> {
    use crate::job::{open_store, run_theorems, write_report};
    let theorems = run_theorems(&cfg.dataset, &cfg.split, None, cfg.seed)?;
    let store = open_store(out, cfg.postgres.as_ref())?;
    store.ensure_meta("rl_config", &serde_json::to_string(&cfg.identity())?)?;
    let prover = cfg.prover_choice().start(
        &cfg.dataset,
        &out.join("cache.sqlite"),
        out,
        cfg.postgres.as_ref(),
    )?;
    let statements = crate::eval::dataset_statements(&cfg.dataset, prover.lang);
    let env = RunContext {
        store: &store,
        prover: prover.setup(),
        out,
        bars,
        dataset_statements: &statements,
    };
    let run = RlRun {
        cfg,
        theorems: theorems.len(),
        prover: prover.name.clone(),
        params: if cfg.remote.is_some() {
            None
        } else {
            NativePolicy::load(&cfg.model, cfg.sampling.clone())
                .map(|p| p.model.num_params() as u64)
                .ok()
        },
        store: &store,
    };
    let write = |records: &[RoundRecord]| -> anyhow::Result<()> {
        write_report(out, &run.report(records))?;
        Ok(())
    };
    let records = run_rl(cfg, &theorems, &env, &write)?;
    let report = run.report(&records);
    write_report(out, &report)?;
    Ok((report, records))
}

impl RlConfig {
    /// The configuration as the run store keeps it: what the run is, not where it runs
    /// (workers, Isabelle server address, PostgreSQL store left out), with the trivial tactic
    /// in effect written out (as stores from before the prover's default kept it).
    fn identity(&self) -> RlConfig {
        let mut fixed = self.clone();
        crate::job::leave_out_where(&mut fixed.coq, &mut fixed.isabelle, &mut fixed.postgres);
        fixed.trivial_tactic = Some(self.trivial_tactic().to_string());
        fixed
    }
}

/// What an RL run's `run.json` says besides the rounds.
struct RlRun<'a> {
    cfg: &'a RlConfig,
    theorems: usize,
    prover: String,
    /// The starting model's parameters (native models only).
    params: Option<u64>,
    store: &'a RunStore,
}

impl RlRun<'_> {
    /// `run.json` after `records`: the starting model's evaluation and every round's metrics.
    fn report(&self, records: &[RoundRecord]) -> prod_report::RunReport {
        let cfg = self.cfg;
        prod_report::RunReport {
        title: format!("{} run", cfg.method.display_name()),
        created: crate::job::now_rfc3339(),
        prover: self.prover.clone(),
        dataset: prod_report::DatasetInfo {
            name: cfg.dataset.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            split: cfg.split.clone(),
            size: self.theorems,
        },
        model: prod_report::ModelInfo { name: cfg.model.display().to_string(), params: self.params },
        config: serde_json::to_value(cfg).unwrap_or_default(),
        evaluations: vec![],
        canaries: records.iter().filter_map(|r| r.canaries.clone()).collect(),
        rounds: start_eval(self.store)
            .ok()
            .flatten()
            .into_iter()
            .chain(records.iter().map(|r| r.metrics.clone()))
            .collect(),
        notes: records
            .iter()
            .map(|r| {
                format!(
                    "round {}: {} filter checks, {} trivial proposals dropped, {} unnecessary lemmas removed",
                    r.metrics.round, r.filter_checks, r.trivial_dropped, r.lemmas_removed
                )
            })
            .collect(),
        comparisons: vec![],
    }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_sections_default_and_reject_unknown_keys() {
        let cfg: RlConfig = toml::from_str("model = \"m\"\ndataset = \"d\"\nrounds = 2\n[sampling]\nmax_new_tokens = 9\n[coq]\nworkers = 1\n").unwrap();
        assert_eq!(
            (
                cfg.rounds,
                cfg.sampling.max_new_tokens,
                cfg.sampling.temperature
            ),
            (2, 9, 0.7)
        );
        assert_eq!((cfg.coq.workers, cfg.coq.hammer), (1, true));
        assert_eq!(cfg.method, Method::ProdRl);
        assert!(toml::from_str::<RlConfig>("roundz = 2\n").is_err());
        assert!(toml::from_str::<RlConfig>("[coq]\nworkerz = 2\n").is_err());
        let m: RlConfig = toml::from_str("method = \"no_lemma_proposal\"\n").unwrap();
        assert_eq!(m.method, Method::NoLemmaProposal);
        assert_eq!(cfg.sampling.decode_weights, prod_policy::DecodeWeights::F32);
        let q: RlConfig = toml::from_str("[sampling]\ndecode_weights = \"q8\"\n").unwrap();
        assert_eq!(q.sampling.decode_weights, prod_policy::DecodeWeights::Q8);
        assert!(toml::from_str::<RlConfig>("[sampling]\ndecode_weights = \"q3\"\n").is_err());
    }

    #[test]
    fn validate_names_the_key_out_of_range() {
        let example = include_str!("../examples/rl-small.toml");
        assert_eq!(
            toml::from_str::<RlConfig>(example).unwrap().validate(),
            Ok(())
        );
        assert_eq!(RlConfig::default().validate(), Ok(()));
        let err = |text: &str| {
            toml::from_str::<RlConfig>(text)
                .unwrap()
                .validate()
                .unwrap_err()
        };
        assert_eq!(err("rounds = 0"), "rounds = 0: must be at least 1");
        assert!(err("learning_rate = 0.0").starts_with("learning_rate = 0: "));
        assert!(err("learning_rate = nan").starts_with("learning_rate = NaN: "));
        assert!(err("gamma = 1.5").starts_with("gamma"));
        assert!(err("micro_batch = 8\nmacro_batch = 4").contains("macro_batch = 4"));
        assert!(err("[sampling]\ntemperature = -1.0").starts_with("sampling.temperature = -1"));
        assert!(err("[sampling]\ntop_p = 0.0").starts_with("sampling.top_p = 0"));
        assert!(err("[coq]\nstep_timeout_s = 0").starts_with("coq.step_timeout_s = 0"));
        assert!(err("[remote]\nmax_tokens = 0").starts_with("remote.max_tokens = 0"));
        // One place for what to sample: [remote] may not contradict [sampling].
        assert!(err("[sampling]\ncontext_tokens = 64\n[remote]\ncontext_tokens = 256")
            .starts_with("remote.context_tokens = 256: a run samples and trains with sampling.context_tokens (= 64)"));
        let ok: RlConfig = toml::from_str("[sampling]\ncontext_tokens = 64\nmax_new_tokens = 9\n[remote]\nbase_url = \"http://x\"").unwrap();
        assert_eq!(ok.validate(), Ok(()));
        let r = ok.remote_config().unwrap();
        assert_eq!(
            (r.context_tokens, r.max_tokens, r.base_url.as_str()),
            (64, 9, "http://x")
        );
        assert!(err("[postgres]\nlease_s = -5.0").starts_with("postgres.lease_s = -5"));
        // Greedy sampling and a depth of 0 (no lemma proposals) are fine.
        let ok: RlConfig = toml::from_str("depth = 0\n[sampling]\ntemperature = 0.0").unwrap();
        assert_eq!(ok.validate(), Ok(()));
    }
}

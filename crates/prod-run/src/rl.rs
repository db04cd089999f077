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
//!
//! This module is the run over all rounds: resume, the rounds in order, the per-round
//! evaluation and `run.json`. The configuration is `rl_config`, one round's phases are
//! `round` and their building blocks `round_steps`; dependencies go one way (`rl` → `round` →
//! `round_steps` → `rl_config`), and the public items of those modules are re-exported here.

use std::path::{Path, PathBuf};
use std::time::Instant;

use prod_report::RoundMetrics;
use prod_rl::examples::ExampleKind;
use prod_rl::ReplayBuffer;
use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::eval::Theorem;
use crate::policy::NativePolicy;
use crate::progress::Bars;
use crate::round::Round;
use crate::store::{Phase, RunStore, StoredExample};

pub use crate::rl_config::{Method, RlConfig, RlEvalConfig, ValueModel};
pub use crate::round::{RoundPolicy, RoundRecord};
pub(crate) use crate::round_steps::round_checkpoint;
pub use crate::round_steps::{
    filter_proposals, round_theorems, value_checkpoint, write_examples, Filtered,
};

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
        let r = Round {
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
    let opts = cfg.eval_options(format!("round {round}"));
    let r = crate::eval::run_eval(env, policy.seq(), theorems, &opts, round, Phase::RlEval)?;
    Ok(RoundEval {
        use_invoke_share_root: r.evaluation.use_invoke_share_root,
        pass_at_k: r.evaluation.pass_at_k,
        theorems: theorems.len(),
        seconds: t.elapsed().as_secs_f64(),
    })
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
    store.ensure_meta(
        "rl_config",
        &crate::leaves::identity_text(&cfg.identity(), &["hammer_leaves"])?,
    )?;
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

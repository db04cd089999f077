//! One ProD-RL round (paper Algorithm 2, §3.2) as typed phases over the run context:
//!
//! ```text
//! sample ─► check ─► filter ─► solve ─► weigh ─► train ─► record
//! (trees)   (local)  (§3.2      (global   (γ^h·∏V(l),  (native or    (metrics,
//!                    filters)   verdicts)  replay mix)  external)     checkpoint)
//! ```
//!
//! Each phase reads what the one before produced and the run store; `sample` and `check` are
//! resumable on their own (sample log, verdicts), and a round counts as done once `record` has
//! stored its checkpoint. A resumed round repeats the cheap phases from stored data and asks
//! neither the policy nor the prover again.
//!
//! The round's policy (`RoundPolicy`: the native model or a remote server) and what the round
//! produced (`RoundRecord`) are defined here; the building blocks that are no phase (theorem
//! draw, checkpoint paths, §3.2 filters, training files) are `round_steps`, the settings
//! `rl_config`. Nothing here uses the run over all rounds (`rl`), which calls `run_round`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use prod_core::tree::{GlobalVerdict, LocalVerdict, Node};
use prod_core::ConditionalProof;
use prod_policy::prompt::{self, ExampleOptions, TrainExample};
use prod_policy::train::{eval_loss, Trainer};
use prod_policy::PolicyConfig;
use prod_report::RoundMetrics;
use prod_rl::examples::{
    round_examples, without_lemma_proposal, ExampleKind, RoundOutcome, WeightedExample,
};
use prod_rl::{generate_train_trees, Origin, ReplayBuffer, TreeGoal};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::check::local_verdict;
use crate::context::RunContext;
use crate::eval::{check_phase, to_stored, Theorem};
use crate::policy::{mix_seed, LoggedPolicy, NativeParams, NativePolicy, RemoteSeq, SeqPolicy};
use crate::rl_config::{Method, RlConfig, ValueModel};
use crate::round_steps::{
    filter_proposals, goal_key, load_policy_from, replay_lemma_statements, round_checkpoint,
    round_theorems, run_command, stored_to_generated, trainer_loss, value_checkpoint,
    write_examples,
};
use crate::store::{Phase, Step, StoredExample, StoredNode};

/// What one round works with besides its phases' outputs.
pub(crate) struct Round<'a> {
    pub cfg: &'a RlConfig,
    pub env: &'a RunContext<'a>,
    pub round: u32,
    /// The checkpoint the round starts from, and the separate value model's.
    pub start_ckpt: &'a Path,
    pub value_start: &'a Path,
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
    pub(crate) fn load(cfg: &RlConfig, dir: &Path) -> anyhow::Result<RoundPolicy> {
        match &cfg.remote {
            None => Ok(RoundPolicy::Native(load_policy_from(dir, &cfg.sampling)?)),
            Some(r) => Ok(RoundPolicy::Remote {
                seq: RemoteSeq::open(r, &cfg.sampling.sampling, dir).map_err(anyhow::Error::msg)?,
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

/// Run (or finish) one round: the phases in order.
pub(crate) fn run_round(
    r: &Round<'_>,
    all: &[Theorem],
    policy: &mut RoundPolicy,
    replay: &mut ReplayBuffer<StoredExample>,
) -> anyhow::Result<RoundRecord> {
    let theorems = round_theorems(all, r.cfg.batch, r.cfg.seed, r.round);
    r.env.bars.say(&format!(
        "round {}/{}: {} theorems",
        r.round,
        r.cfg.rounds,
        theorems.len()
    ));
    let sampled = sample(r, &theorems, policy)?;
    let hammer_before = r.env.prover.checker.hammer_stats();
    let t = Instant::now();
    check_phase(
        r.env.store,
        &sampled.nodes,
        (r.env.prover.checker, r.env.prover.lang),
        r.env.bars,
    )?;
    let check_s = t.elapsed().as_secs_f64();
    let filtered = filter(r, &sampled.nodes)?;
    let hammer = crate::baseline::hammer_use(hammer_before, r.env.prover.checker.hammer_stats());
    let global = solve_round(r, &sampled.nodes, &filtered)?;
    let canaries = round_canaries(r.cfg, r.env, &theorems, r.round, policy)?;
    let t = Instant::now();
    let mut weighed = weigh(
        r,
        &theorems,
        &sampled.nodes,
        &filtered,
        &global,
        policy,
        replay,
    )?;
    let trained = train(r, policy, &mut weighed)?;
    let train_s = t.elapsed().as_secs_f64();
    record(
        r,
        &Summary {
            weighed: &weighed,
            filtered: &filtered,
            global: &global,
            nodes: sampled.nodes.len(),
            seconds: (sampled.seconds, check_s, filtered.seconds, train_s),
            tokens_per_s: sampled.tokens_per_s,
            trained,
            replay,
            canaries,
            hammer,
            leaves: leaf_counts(&sampled.nodes, &filtered.local),
        },
    )
}

/// The round's hammer leaves and those the hammer proved (None: it had none).
fn leaf_counts(nodes: &[StoredNode], local: &[LocalVerdict]) -> Option<prod_report::HammerLeaves> {
    let leaves: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].origin == Origin::HammerLeaf)
        .collect();
    (!leaves.is_empty()).then(|| prod_report::HammerLeaves {
        leaves: leaves.len(),
        proved: leaves.iter().filter(|&&i| local[i].is_correct()).count(),
        ..Default::default()
    })
}

/// Round `round`'s canaries, in the contexts of its theorems, sampled from its policy before
/// it trains: an accepted canary stops the run before a wrong proof is reinforced.
fn round_canaries(
    cfg: &RlConfig,
    env: &RunContext<'_>,
    theorems: &[Theorem],
    round: u32,
    policy: &mut RoundPolicy,
) -> anyhow::Result<prod_report::CanaryCheck> {
    let opts = cfg.eval_options(format!("round {round} canaries"));
    let check = crate::canary::run_canaries(env, policy.seq(), theorems, &opts, round)?;
    crate::canary::stop_on_alarm(&check, env.out)?;
    Ok(check)
}

/// The round's nodes (Algorithm 2's trees, ground truth joining at level 0).
struct Sampled {
    nodes: Vec<StoredNode>,
    seconds: f64,
    tokens_per_s: Option<f64>,
}

fn sample(
    r: &Round<'_>,
    theorems: &[Theorem],
    policy: &mut RoundPolicy,
) -> anyhow::Result<Sampled> {
    let (store, cfg, round, phase) = (r.env.store, r.cfg, r.round, Phase::Rl);
    let t = Instant::now();
    if store.is_done(round, phase, Step::Sample)? {
        let nodes = store.nodes(round, phase)?;
        let seconds = t.elapsed().as_secs_f64();
        return Ok(Sampled {
            nodes,
            seconds,
            tokens_per_s: None,
        });
    }
    let no_lemmas = cfg.method == Method::NoLemmaProposal;
    let goals: Vec<TreeGoal> = theorems
        .iter()
        .map(|t| {
            let mut g = TreeGoal::new(t.context.clone(), t.statement.clone());
            // Without lemma proposal, ground truth joins as examples (lemmas in context), not as nodes.
            if !no_lemmas {
                g.ground_truth = t
                    .ground_truth
                    .as_deref()
                    .and_then(|p| ConditionalProof::parse_with(p, r.env.prover.lang).ok());
            }
            g
        })
        .collect();
    // Lemma goals are only known as they come: a count, no total.
    let pb = r.env.bars.bar("sample", "nodes", None);
    let tick = |n: usize| pb.inc(n as u64);
    let mut logged = LoggedPolicy::new(policy.seq(), store, round, phase);
    logged.on_progress = Some(&tick);
    let mut rng = SmallRng::seed_from_u64(mix_seed(cfg.seed, round as u64));
    // Depth 0 = the depth limit: every goal gets only a `<no_invoke>` sample.
    let depth = if no_lemmas { 0 } else { cfg.depth };
    let mut generated =
        generate_train_trees(&mut logged, &goals, depth, &mut rng, r.env.prover.lang)?;
    pb.finish();
    if cfg.hammer_leaves_in_effect() {
        generated = crate::leaves::with_leaves(&generated, r.env.prover.lang);
    }
    let tokens = match &*policy {
        RoundPolicy::Native(p) => Some(p.generated_tokens),
        RoundPolicy::Remote { .. } => None,
    };
    let index: HashMap<(String, String), i64> = theorems
        .iter()
        .enumerate()
        .map(|(i, t)| ((t.context.clone(), t.statement.clone()), i as i64))
        .collect();
    let stored = to_stored(store, &generated, round, phase, &|g, _| {
        if g.depth == 0 {
            index
                .get(&(g.context.clone(), g.statement.clone()))
                .copied()
        } else {
            None
        }
    })?;
    store.put_nodes(round, phase, &stored)?;
    let nodes = store.nodes(round, phase)?;
    store.mark_done(round, phase, Step::Sample, t.elapsed().as_secs_f64())?;
    let seconds = t.elapsed().as_secs_f64();
    Ok(Sampled {
        nodes,
        seconds,
        tokens_per_s: tokens.filter(|_| seconds > 0.0).map(|n| n as f64 / seconds),
    })
}

/// The nodes after the filters of §3.2: each node's completion (unnecessary lemmas removed),
/// its local verdict, and whether it was dropped as a trivial proposal.
struct Filtered {
    completions: Vec<String>,
    local: Vec<LocalVerdict>,
    trivial: Vec<bool>,
    checks: usize,
    trivial_dropped: usize,
    lemmas_removed: usize,
    seconds: f64,
}

fn filter(r: &Round<'_>, nodes: &[StoredNode]) -> anyhow::Result<Filtered> {
    let store = r.env.store;
    let t = Instant::now();
    let mut f = Filtered {
        completions: nodes.iter().map(|n| n.completion.clone()).collect(),
        local: Vec::with_capacity(nodes.len()),
        trivial: vec![false; nodes.len()],
        checks: 0,
        trivial_dropped: 0,
        lemmas_removed: 0,
        seconds: 0.0,
    };
    for n in nodes {
        f.local.push(local_verdict(store.verdict(n.id)?.as_ref()));
    }
    let mut contexts: HashMap<String, String> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if !f.local[i].is_correct() || n.origin == Origin::GroundTruth {
            continue;
        }
        let Ok(proof) = ConditionalProof::parse_with(&f.completions[i], r.env.prover.lang) else {
            continue;
        };
        if proof.lemma_count() == 0 {
            continue;
        }
        if !contexts.contains_key(&n.context_key) {
            let text = store.context(&n.context_key)?.unwrap_or_default();
            contexts.insert(n.context_key.clone(), text);
        }
        let ctx = &contexts[&n.context_key];
        let one = filter_proposals(
            r.env.prover.checker,
            r.env.prover.lang,
            ctx,
            &n.statement,
            proof,
            r.cfg,
        );
        f.checks += one.checks;
        f.lemmas_removed += one.removed;
        f.trivial[i] = one.trivial;
        f.trivial_dropped += usize::from(one.trivial);
        f.completions[i] = one.proof.to_string();
    }
    f.seconds = t.elapsed().as_secs_f64();
    Ok(f)
}

/// Global correctness over the round's forest (trivial proposals left out): one verdict per
/// node, stored with its height.
fn solve_round(
    r: &Round<'_>,
    nodes: &[StoredNode],
    f: &Filtered,
) -> anyhow::Result<Vec<GlobalVerdict>> {
    let mut solver = Vec::new();
    let mut solver_idx = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if f.trivial[i] {
            continue;
        }
        if let Ok(p) = ConditionalProof::parse_with(&f.completions[i], r.env.prover.lang) {
            solver.push(Node {
                id: n.id.to_string(),
                context: n.context_key.clone(),
                statement: n.statement.clone(),
                proof: p,
                local: f.local[i],
            });
            solver_idx.push(i);
        }
    }
    let forest = prod_prover::Forest::solve_nodes(solver, r.env.prover.lang);
    let solution = forest.solution();
    let mut global = vec![GlobalVerdict::Incorrect; nodes.len()];
    for (k, &i) in solver_idx.iter().enumerate() {
        global[i] = solution.verdict(k);
        r.env
            .store
            .put_global(nodes[i].id, global[i], solution.height(k))?;
    }
    for (i, l) in f.local.iter().enumerate() {
        if *l == LocalVerdict::Unknown && !solver_idx.contains(&i) {
            global[i] = GlobalVerdict::Undetermined;
        }
    }
    Ok(global)
}

/// The round's training data: the weighted batch (fresh examples and replayed ones), the
/// policy's and the value model's token examples, the separate value model (if any) and the
/// round's random stream (shuffling continues it).
struct Weighed {
    batch: Vec<StoredExample>,
    weight_sum: f64,
    train: Vec<TrainExample>,
    value_train: Vec<TrainExample>,
    value_policy: Option<NativePolicy>,
    rng: SmallRng,
}

fn weigh(
    r: &Round<'_>,
    theorems: &[Theorem],
    nodes: &[StoredNode],
    f: &Filtered,
    global: &[GlobalVerdict],
    policy: &mut RoundPolicy,
    replay: &mut ReplayBuffer<StoredExample>,
) -> anyhow::Result<Weighed> {
    let (cfg, lang) = (r.cfg, r.env.prover.lang);
    let kept: Vec<usize> = (0..nodes.len()).filter(|&i| !f.trivial[i]).collect();
    let mut generated = Vec::with_capacity(kept.len());
    for &i in &kept {
        generated.push(stored_to_generated(
            r.env.store,
            &nodes[i],
            &f.completions[i],
            lang,
        )?);
    }
    let kept_local: Vec<LocalVerdict> = kept.iter().map(|&i| f.local[i]).collect();
    let kept_global: Vec<GlobalVerdict> = kept.iter().map(|&i| global[i]).collect();
    // The separate value model: a copy of the SFT model, carried from round to round.
    let value_policy = match cfg.value_model {
        ValueModel::Separate => Some(load_policy_from(r.value_start, &cfg.sampling)?),
        _ => None,
    };
    let by_leaf = proved_by_leaves(lang, &generated, &kept_global);
    let value_of = lemma_values(cfg, &generated, &kept_local, &value_policy, policy)?;
    let mut value = |c: &str, l: &str| {
        if by_leaf.contains(&goal_key(lang, c, l)) {
            return 1.0;
        }
        value_of
            .get(&(c.to_string(), l.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    let tok = policy.tok().clone();
    let proof_tokens = |s: &str| tok.encode(s).map_or(s.len(), |ids| ids.len());
    let outcome = RoundOutcome {
        nodes: &generated,
        local: &kept_local,
        global: &kept_global,
    };
    let mut fresh: Vec<WeightedExample> =
        round_examples(&outcome, cfg.weighting(), &mut value, &proof_tokens, lang);
    if cfg.method == Method::NoLemmaProposal {
        fresh.extend(ground_truth_without_lemmas(theorems, lang));
    }
    let mut rng = SmallRng::seed_from_u64(mix_seed(cfg.seed, 2_000_000 + r.round as u64));
    let fresh_len = fresh.len();
    let mut batch = replay.mix_round(fresh, cfg.replay_mix, &mut rng);
    for e in batch.iter_mut().skip(fresh_len) {
        e.kind = ExampleKind::Replayed;
    }
    r.env.store.put_examples(r.round, &batch)?;
    // Value-model data: each distinct goal of the round with a decided global verdict.
    let mut goal_proved: HashMap<(String, String), (String, String, bool)> = HashMap::new();
    for (g, v) in generated.iter().zip(&kept_global) {
        let Some(b) = v.as_bool() else { continue };
        let e = goal_proved
            .entry(goal_key(lang, &g.context, &g.statement))
            .or_insert((g.context.clone(), g.statement.clone(), false));
        e.2 |= b;
    }
    let (train, weight_sum) = policy_examples(cfg, policy, &batch);
    let value_train = value_examples(cfg, policy, goal_proved);
    Ok(Weighed {
        batch,
        weight_sum,
        train,
        value_train,
        value_policy,
        rng,
    })
}

/// The goals a hammer leaf proved this round. A lemma among them is proved with certainty for
/// the node that proposed it: its V(l) is 1 (what the proposal earned), not the value model's
/// estimate (the hammer is deterministic, and every tree that proposes the lemma gets the leaf).
fn proved_by_leaves(
    lang: &dyn prod_core::ProofLanguage,
    generated: &[prod_rl::GeneratedNode],
    global: &[GlobalVerdict],
) -> std::collections::HashSet<(String, String)> {
    generated
        .iter()
        .zip(global)
        .filter(|(g, v)| g.origin == Origin::HammerLeaf && **v == GlobalVerdict::Correct)
        .map(|(g, _)| goal_key(lang, &g.context, &g.statement))
        .collect()
}

/// V(l) for every lemma of a locally correct node, scored in batches up front (1 when the
/// value model is off).
fn lemma_values(
    cfg: &RlConfig,
    generated: &[prod_rl::GeneratedNode],
    local: &[LocalVerdict],
    value_policy: &Option<NativePolicy>,
    policy: &mut RoundPolicy,
) -> anyhow::Result<HashMap<(String, String), f64>> {
    let mut wanted: Vec<(String, String)> = Vec::new();
    for (g, l) in generated.iter().zip(local) {
        if l.is_correct() {
            if let Ok(p) = &g.proof {
                for lem in p.lemmas() {
                    wanted.push((g.context.clone(), lem.to_string()));
                }
            }
        }
    }
    wanted.sort();
    wanted.dedup();
    let pairs: Vec<(&str, &str)> = wanted
        .iter()
        .map(|(c, s)| (c.as_str(), s.as_str()))
        .collect();
    let scores = match (value_policy, cfg.value_model) {
        (_, ValueModel::Off) => vec![1.0; pairs.len()],
        (Some(v), _) => v.values(&pairs)?,
        (None, _) => policy.values(&pairs)?,
    };
    Ok(wanted.into_iter().zip(scores).collect())
}

/// Without lemma proposal, the theorems' ground truth joins as examples with its lemmas moved
/// into the context.
fn ground_truth_without_lemmas(
    theorems: &[Theorem],
    lang: &dyn prod_core::ProofLanguage,
) -> Vec<WeightedExample> {
    let mut out = Vec::new();
    for t in theorems {
        let Some(gt) = t
            .ground_truth
            .as_deref()
            .and_then(|p| ConditionalProof::parse_with(p, lang).ok())
        else {
            continue;
        };
        let (context, plain) = without_lemma_proposal(&t.context, &gt, lang);
        out.push(WeightedExample {
            context,
            statement: t.statement.clone(),
            target: plain.to_string(),
            weight: 1.0,
            kind: ExampleKind::GroundTruth,
        });
    }
    out
}

/// The batch as token examples for the weighted cross-entropy (weight-0 examples give no
/// gradient and are skipped), and the batch's weight sum.
fn policy_examples(
    cfg: &RlConfig,
    policy: &RoundPolicy,
    batch: &[StoredExample],
) -> (Vec<TrainExample>, f64) {
    let opts = ExampleOptions {
        context_tokens: cfg.sampling.sampling.context_tokens,
        max_seq_len: cfg.max_seq_len,
        statement_in_loss: false,
    };
    let mut train = Vec::new();
    let mut weight_sum = 0.0;
    for e in batch {
        weight_sum += e.weight;
        if e.weight > 0.0 {
            if let Ok(x) = prompt::policy_example(
                policy.tok(),
                &e.context,
                &e.statement,
                &e.target,
                e.weight as f32,
                &opts,
            ) {
                train.push(x);
            }
        }
    }
    (train, weight_sum)
}

/// The value head's examples: each goal with `<true>` when one of its nodes was globally
/// correct, else `<false>`, in a fixed order.
fn value_examples(
    cfg: &RlConfig,
    policy: &RoundPolicy,
    goal_proved: HashMap<(String, String), (String, String, bool)>,
) -> Vec<TrainExample> {
    let mut out = Vec::new();
    if cfg.value_model == ValueModel::Off {
        return out;
    }
    let mut goals: Vec<(String, String, bool)> = goal_proved.into_values().collect();
    goals.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    for (c, s, proved) in goals {
        if let Ok(ids) = policy.prompt(&c, &s) {
            if ids.len() < cfg.max_seq_len {
                if let Ok(x) = prompt::value_example(policy.tok(), &ids, proved, 1.0) {
                    out.push(x);
                }
            }
        }
    }
    out
}

/// The losses a round's training reports.
struct Trained {
    loss: Option<f64>,
    value_loss: Option<f64>,
    ckpt: PathBuf,
}

/// Where a round's files go: the checkpoints and the examples the trainers read.
struct RoundFiles {
    ckpt: PathBuf,
    value_ckpt: PathBuf,
    examples: PathBuf,
    value_examples: PathBuf,
}

impl RoundFiles {
    fn of(r: &Round<'_>) -> Self {
        let dir = r.env.out.join("rounds").join(format!("round-{}", r.round));
        RoundFiles {
            ckpt: round_checkpoint(r.env.out, r.round),
            value_ckpt: value_checkpoint(r.env.out, r.round),
            examples: dir.join("examples.jsonl"),
            value_examples: dir.join("value_examples.jsonl"),
        }
    }

    /// A configured command with `{examples}`, `{model}` and `{out}` filled in.
    fn fill(argv: &[String], examples: &Path, model: &Path, out: &Path) -> Vec<String> {
        argv.iter()
            .map(|a| {
                a.replace("{examples}", &examples.display().to_string())
                    .replace("{model}", &model.display().to_string())
                    .replace("{out}", &out.display().to_string())
            })
            .collect()
    }
}

/// Train the policy (and the separate value model) on the round's examples: the shared value
/// examples join the policy's update; the separate model trains on its own. The examples are
/// always written (they are the record of what was trained on, and what external trainers
/// read); `after_round` runs once the checkpoint exists.
fn train(r: &Round<'_>, policy: &mut RoundPolicy, w: &mut Weighed) -> anyhow::Result<Trained> {
    let cfg = r.cfg;
    let shared_value = cfg.value_model == ValueModel::Shared;
    let mut all_train: Vec<TrainExample> = w
        .train
        .iter()
        .cloned()
        .chain(w.value_train.iter().filter(|_| shared_value).cloned())
        .collect();
    let mut value_only: Vec<TrainExample> = if w.value_policy.is_some() {
        w.value_train.clone()
    } else {
        Vec::new()
    };
    {
        use rand::seq::SliceRandom;
        all_train.shuffle(&mut w.rng);
        value_only.shuffle(&mut w.rng);
    }
    let files = RoundFiles::of(r);
    if w.value_policy.is_some() {
        write_examples(&files.value_examples, &value_only, policy.tok())?;
    }
    write_examples(&files.examples, &all_train, policy.tok())?;
    let (loss, value_loss) = if cfg.external_trainer.is_empty() {
        train_native(r, policy, w, &all_train, &value_only, &files)?
    } else {
        train_external(r, w, &files)?
    };
    if !cfg.after_round.is_empty() {
        let argv = RoundFiles::fill(&cfg.after_round, &files.examples, r.start_ckpt, &files.ckpt);
        run_command("after_round", &argv)?;
    }
    Ok(Trained {
        loss,
        value_loss,
        ckpt: files.ckpt,
    })
}

/// The configured external trainer writes the checkpoints; the losses are evaluated here on the
/// new weights (or read from the trainer when the served model is remote).
fn train_external(
    r: &Round<'_>,
    w: &Weighed,
    files: &RoundFiles,
) -> anyhow::Result<(Option<f64>, Option<f64>)> {
    let cfg = r.cfg;
    let trainer = |what: &str, examples: &Path, from: &Path, out: &Path| {
        let argv = RoundFiles::fill(&cfg.external_trainer, examples, from, out);
        run_command(&format!("external trainer ({what})"), &argv)?;
        if !out.join("config.json").is_file() {
            anyhow::bail!(
                "the external trainer wrote no {what} to {} (config.json missing)",
                out.display()
            );
        }
        Ok(())
    };
    trainer("policy", &files.examples, r.start_ckpt, &files.ckpt)?;
    if w.value_policy.is_some() {
        // The same trainer on the value examples, from the previous value model.
        trainer(
            "value model",
            &files.value_examples,
            r.value_start,
            &files.value_ckpt,
        )?;
    }
    if cfg.remote.is_some() {
        // The served model may be far too large to run here: the trainer's own figure.
        return Ok((trainer_loss(&files.ckpt), None));
    }
    let micro = cfg.micro_batch.max(1);
    let next = NativePolicy::load(&files.ckpt, cfg.sampling.clone())
        .with_context(|| format!("load {}", files.ckpt.display()))?;
    let value_loss = if w.value_train.is_empty() {
        None
    } else if w.value_policy.is_some() {
        let v = NativePolicy::load(&files.value_ckpt, cfg.sampling.clone())
            .with_context(|| format!("load {}", files.value_ckpt.display()))?;
        Some(eval_loss(&v.model, &w.value_train, micro)?)
    } else {
        Some(eval_loss(&next.model, &w.value_train, micro)?)
    };
    let loss = if w.train.is_empty() {
        None
    } else {
        Some(eval_loss(&next.model, &w.train, micro)?)
    };
    Ok((loss, value_loss))
}

/// The native trainer: AdamW steps over macro batches, the optimizer state carried with each
/// checkpoint (policy and separate value model alike).
fn train_native(
    r: &Round<'_>,
    policy: &mut RoundPolicy,
    w: &mut Weighed,
    all_train: &[TrainExample],
    value_only: &[TrainExample],
    files: &RoundFiles,
) -> anyhow::Result<(Option<f64>, Option<f64>)> {
    let cfg = r.cfg;
    let pcfg = PolicyConfig {
        learning_rate: cfg.learning_rate,
        warmup_steps: cfg.warmup_steps,
        macro_batch: cfg.macro_batch,
        micro_batch: cfg.micro_batch,
        max_seq_len: cfg.max_seq_len,
        context_tokens: cfg.sampling.sampling.context_tokens,
        ..PolicyConfig::default()
    };
    // Remote sampling with the native trainer: the weights are trained here and served there.
    let mut loaded;
    let policy: &mut NativePolicy = match policy {
        RoundPolicy::Native(p) => p,
        RoundPolicy::Remote { .. } => {
            loaded = load_policy_from(r.start_ckpt, &cfg.sampling)?;
            &mut loaded
        }
    };
    let mut trainer = resume_or_new(&pcfg, r.start_ckpt)?;
    let loss = run_steps(r, &mut trainer, &policy.model, all_train, "train")?;
    let micro = cfg.micro_batch.max(1);
    let value_loss = match w.value_policy.as_mut() {
        _ if w.value_train.is_empty() => None,
        None => Some(eval_loss(&policy.model, &w.value_train, micro)?),
        Some(v) => {
            // The separate value model: its own optimizer state, carried with its checkpoint.
            let mut vt = resume_or_new(&pcfg, r.value_start)?;
            run_steps(r, &mut vt, &v.model, value_only, "train value")?;
            save_checkpoint(&files.value_ckpt, &vt, v)?;
            Some(eval_loss(&v.model, &w.value_train, micro)?)
        }
    };
    save_checkpoint(&files.ckpt, &trainer, policy)?;
    Ok((loss, value_loss))
}

/// The optimizer of a checkpoint (its saved state), or a fresh one.
fn resume_or_new(pcfg: &PolicyConfig, ckpt: &Path) -> anyhow::Result<Trainer> {
    Ok(if ckpt.join("trainer_state.json").exists() {
        Trainer::resume(pcfg.clone(), ckpt)?
    } else {
        Trainer::new(pcfg.clone())
    })
}

/// `epochs` passes of macro-batch steps; the mean step loss.
fn run_steps(
    r: &Round<'_>,
    trainer: &mut Trainer,
    model: &prod_policy::model::Llama,
    examples: &[TrainExample],
    label: &str,
) -> anyhow::Result<Option<f64>> {
    let epochs = r.cfg.epochs.max(1);
    let pb = r
        .env
        .bars
        .bar(label, "examples", Some(examples.len() * epochs));
    let (mut sum, mut n) = (0.0, 0usize);
    for _ in 0..epochs {
        for chunk in examples.chunks(r.cfg.macro_batch.max(1)) {
            let s = trainer.step(model, chunk)?;
            sum += s.loss;
            n += 1;
            pb.inc(chunk.len() as u64);
            pb.set_message(format!("loss {:.3}", s.loss));
        }
    }
    pb.finish();
    Ok((n > 0).then(|| sum / n as f64))
}

/// The model and its optimizer state in `dir`.
fn save_checkpoint(dir: &Path, trainer: &Trainer, p: &mut NativePolicy) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    trainer.save_checkpoint(&p.model, dir)?;
    prod_policy::save_model_dir(dir, &mut p.model, &p.tok)?;
    Ok(())
}

/// The batch by origin, with the weight on targets that propose lemmas.
fn reinforced(batch: &[StoredExample]) -> prod_report::Reinforced {
    let mut r = prod_report::Reinforced::default();
    for e in batch {
        let tally = match e.kind {
            ExampleKind::Generated => &mut r.generated,
            ExampleKind::Augmented => &mut r.augmented,
            ExampleKind::GroundTruth => &mut r.ground_truth,
            ExampleKind::Replayed => &mut r.replayed,
        };
        tally.add(e.weight, e.proposes_lemmas());
    }
    r
}

/// What the round's record needs.
struct Summary<'a> {
    weighed: &'a Weighed,
    filtered: &'a Filtered,
    global: &'a [GlobalVerdict],
    nodes: usize,
    /// Seconds: sample, check, filter, train (weighing included).
    seconds: (f64, f64, f64, f64),
    tokens_per_s: Option<f64>,
    trained: Trained,
    replay: &'a ReplayBuffer<StoredExample>,
    canaries: prod_report::CanaryCheck,
    /// The `hammer.` steps of the check and filter phases.
    hammer: Option<prod_report::HammerUse>,
    /// The round's hammer leaves, and those proved.
    leaves: Option<prod_report::HammerLeaves>,
}

/// The round's metrics and its checkpoint in the run store: from here on the round is done.
fn record(r: &Round<'_>, s: &Summary<'_>) -> anyhow::Result<RoundRecord> {
    let env = r.env;
    let (sample_s, check_s, filter_s, train_s) = s.seconds;
    let batch = &s.weighed.batch;
    let replay_lemmas: Vec<String> = replay_lemma_statements(s.replay, env.prover.lang);
    let novel = replay_lemmas
        .iter()
        .filter(|l| {
            !env.dataset_statements
                .contains(&env.prover.lang.normalize_statement(l))
        })
        .count();
    let metrics = RoundMetrics {
        round: r.round,
        examples: batch.len(),
        mean_weight: (!batch.is_empty()).then(|| s.weighed.weight_sum / batch.len() as f64),
        locally_correct: s.filtered.local.iter().filter(|l| l.is_correct()).count(),
        globally_correct: s
            .global
            .iter()
            .filter(|g| **g == GlobalVerdict::Correct)
            .count(),
        nodes: s.nodes,
        sample_s,
        check_s,
        train_s,
        loss: s.trained.loss,
        value_loss: s.trained.value_loss,
        replay_size: s.replay.len(),
        novel_lemma_share: (!replay_lemmas.is_empty())
            .then(|| novel as f64 / replay_lemmas.len() as f64),
        filter_s,
        tokens_per_s: s.tokens_per_s,
        reinforced: Some(reinforced(batch)),
        hammer: s.hammer,
        hammer_leaves: s.leaves.clone(),
        ..RoundMetrics::default()
    };
    let rec = RoundRecord {
        canaries: Some(s.canaries.clone()),
        metrics,
        filter_checks: s.filtered.checks,
        trivial_dropped: s.filtered.trivial_dropped,
        lemmas_removed: s.filtered.lemmas_removed,
    };
    env.store.put_checkpoint(
        r.round,
        &s.trained.ckpt.display().to_string(),
        &serde_json::to_string(&rec)?,
    )?;
    env.store.mark_done(
        r.round,
        Phase::Rl,
        Step::Round,
        sample_s + check_s + filter_s + train_s,
    )?;
    Ok(rec)
}

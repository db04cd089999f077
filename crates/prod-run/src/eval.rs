//! Evaluation (paper §4.3): Algorithm 1 test-time proof trees, every node checked, global
//! correctness per tree, the assembled proof of each proved tree re-checked cold by the prover,
//! pass@k with 95% CIs, the Fig. 5 depth table and the novel-lemma share.
//!
//! Phases are resumable through the run store: `sample` (sample log + nodes), `check`
//! (verdicts; infra nodes asked again on every resume), `solve` (global verdicts per tree),
//! `final` (cold re-checks; infra ones retried). Nothing here knows the prover: its checker,
//! language and final check come in a [`CheckSetup`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use prod_check::{CheckRequest, Checker, Verdict};
use prod_core::pass_at_k::{estimate, Bootstrap, DepthTable, TheoremOutcome};
use prod_core::tree::GlobalVerdict;
use prod_core::{ConditionalProof, ProofLanguage};
use prod_prover::{CheckedNode, Forest, RootAssembly};
use prod_report::{DepthCell, Evaluation, PassAtK};
use prod_rl::{generate_test_trees, GeneratedNode, Origin, TreeGoal};
use serde::{Deserialize, Serialize};

use crate::check::{check_nodes, local_verdict};
use crate::context::RunContext;
use crate::outcomes::ProvedTree;
use crate::policy::{LoggedPolicy, SeqPolicy};
use crate::progress::Bars;
use crate::prover::FinalProof;
use crate::store::{Phase, RunStore, Step, StoredNode};

pub use crate::theorem::{dataset_statements, load_theorems, Theorem};

/// How an evaluation is run and scored; also `prod eval`'s flags (feature `clap`; the trees
/// per theorem default to the largest k there, the temperature is the sampling's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct EvalOptions {
    /// Name of this evaluation in the report ("ProD-SFT", "ProD-RL round 3", …).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EvalOptions::default().name))]
    pub name: String,
    /// Which split file of --dataset holds the theorems (test, val, train, rl, …).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EvalOptions::default().split))]
    pub split: String,
    /// pass@k for these k (comma-separated; each ≤ --samples).
    #[cfg_attr(feature = "clap", arg(long = "k", value_name = "K", value_delimiter = ',',
        default_values_t = EvalOptions::default().ks, value_parser = prod_core::range::parse::positive_usize))]
    pub ks: Vec<usize>,
    /// n: independent trees per theorem.
    #[cfg_attr(feature = "clap", arg(skip = EvalOptions::default().samples))]
    pub samples: u32,
    /// Depth limit of the trees (Algorithm 1; paper: 2; 0: no lemma proposals, `<no_invoke>`
    /// forced).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EvalOptions::default().depth))]
    pub depth: u32,
    /// Time limit of one cold `coqc` re-check of an assembled proof, seconds.
    #[cfg_attr(feature = "clap", arg(long = "final-timeout", value_name = "FINAL_TIMEOUT",
        default_value_t = EvalOptions::default().final_timeout_s, value_parser = prod_core::range::parse::positive_u64))]
    pub final_timeout_s: u64,
    /// Bootstrap rounds of each 95% interval (drawn from the stream of --seed; the interval is
    /// the hull of the bootstrap and Wilson's score interval).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EvalOptions::default().bootstrap,
        value_parser = prod_core::range::parse::positive_usize))]
    pub bootstrap: usize,
    /// Seed of sampling, of the theorem draw and of the bootstrap.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EvalOptions::default().seed))]
    pub seed: u64,
    #[cfg_attr(feature = "clap", arg(skip = EvalOptions::default().temperature))]
    pub temperature: f64,
    /// Hammer leaves ([`crate::leaves`]): every distinct lemma a tree proposes also gets a
    /// `<no_invoke> hammer.` node. Left out of a run store's identity when off (as every run
    /// was before the setting existed).
    #[cfg_attr(feature = "clap", arg(long = "no-hammer-leaves", action = clap::ArgAction::SetFalse,
        help = crate::leaves::OFF_HELP))]
    #[serde(default = "crate::leaves::default_on")]
    pub hammer_leaves: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            name: "eval".into(),
            split: "test".into(),
            ks: vec![1, 2, 4, 8, 16],
            samples: 16,
            depth: 2,
            final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
            bootstrap: Bootstrap::DEFAULT_RESAMPLES,
            seed: prod_core::DEFAULT_SEED,
            temperature: prod_core::PAPER_TEMPERATURE,
            hammer_leaves: crate::leaves::DEFAULT,
        }
    }
}

impl EvalOptions {
    /// How this evaluation's 95% intervals are drawn: `bootstrap` rounds from the stream of
    /// its seed.
    pub fn intervals(&self) -> Bootstrap {
        Bootstrap {
            resamples: self.bootstrap,
            seed: self.seed,
        }
    }
}

/// Seconds spent per phase (this process; phases skipped on resume count 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PhaseTimes {
    pub sample_s: f64,
    pub check_s: f64,
    pub solve_s: f64,
    pub final_s: f64,
    pub sampled_fresh: usize,
    pub sampled_replayed: usize,
    pub checked_now: usize,
    pub generated_tokens: usize,
}

/// What an evaluation produced: the report's evaluation plus per-theorem details.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalResult {
    pub evaluation: Evaluation,
    /// With hammer leaves: the same trees without them ([`without_leaves_name`]): what the
    /// policy's own nodes proved (pass@k, depth table, per-theorem counts), from the same
    /// checks.
    pub without_leaves: Option<Evaluation>,
    pub times: PhaseTimes,
    /// Per theorem: (id, judged trees, proved trees, lowest proving depth).
    pub per_theorem: Vec<(String, usize, usize, Option<u32>)>,
    pub nodes: usize,
    pub parsed_nodes: usize,
    pub locally_correct: usize,
}

/// Turn generated nodes into stored ones (contexts stored once, by key).
pub(crate) fn to_stored(
    store: &RunStore,
    generated: &[GeneratedNode],
    round: u32,
    phase: Phase,
    root_index: &dyn Fn(&GeneratedNode, usize) -> Option<i64>,
) -> crate::store::Result<Vec<StoredNode>> {
    let mut keys: HashMap<&str, String> = HashMap::new();
    let mut out = Vec::with_capacity(generated.len());
    for (i, g) in generated.iter().enumerate() {
        let key = match keys.get(g.context.as_str()) {
            Some(k) => k.clone(),
            None => {
                let k = store.put_context(&g.context)?;
                keys.insert(&g.context, k.clone());
                k
            }
        };
        out.push(StoredNode {
            id: 0,
            round,
            phase,
            theorem: root_index(g, i),
            depth: g.depth,
            tree: g.tree,
            forced_t0: g.forced_t0,
            origin: g.origin,
            context_key: key,
            statement: g.statement.clone(),
            completion: g.completion.clone(),
            truncated: g.truncated,
        });
    }
    Ok(out)
}

/// Check every stored node of (round, phase) that has no verdict yet. Completions that are not
/// conditional proofs (in the prover's language) are judged here (`Rejected`), without the
/// checker.
pub(crate) fn check_phase(
    store: &RunStore,
    nodes: &[StoredNode],
    (checker, lang): (&dyn Checker, &dyn ProofLanguage),
    bars: &Bars,
) -> crate::store::Result<crate::check::CheckStats> {
    let mut contexts: HashMap<String, String> = HashMap::new();
    let mut items = Vec::new();
    for n in nodes {
        match ConditionalProof::parse_with(&n.completion, lang) {
            Err(e) => {
                if store.verdict(n.id)?.is_none() {
                    store.put_verdict(
                        n.id,
                        &Verdict::rejected(format!("not a conditional proof: {e}")),
                    )?;
                }
            }
            Ok(p) => {
                if !contexts.contains_key(&n.context_key) {
                    let text = store.context(&n.context_key)?.unwrap_or_default();
                    contexts.insert(n.context_key.clone(), text);
                }
                let ctx = &contexts[&n.context_key];
                items.push((n.id, CheckRequest::new("", ctx, &n.statement, p)));
            }
        }
    }
    let pending = {
        let mut k = 0;
        for (id, _) in &items {
            if store.verdict(*id)?.is_none() {
                k += 1;
            }
        }
        k
    };
    let pb = bars.bar("check", "nodes", Some(pending));
    let stats = check_nodes(store, checker, &items, &|_| pb.inc(1))?;
    pb.finish();
    Ok(stats)
}

/// One tree's stored nodes solved (unparsable ones left out), with their stored ids.
pub(crate) fn solve_stored<'l>(
    store: &RunStore,
    nodes: &[&StoredNode],
    lang: &'l dyn ProofLanguage,
) -> crate::store::Result<(Forest<'l>, Vec<i64>)> {
    let (mut parsed, mut ids) = (Vec::new(), Vec::new());
    for n in nodes {
        let Ok(p) = ConditionalProof::parse_with(&n.completion, lang) else {
            continue;
        };
        parsed.push((p, store.verdict(n.id)?, *n));
        ids.push(n.id);
    }
    let checked = parsed.iter().map(|(p, v, n)| CheckedNode {
        id: n.id.to_string(),
        context: n.context_key.clone(),
        statement: n.statement.clone(),
        proof: p,
        verdict: v.as_ref(),
    });
    Ok((Forest::solve(checked, lang), ids))
}

/// Run (or resume) one evaluation under `round`/`phase` (e.g. 0/[`Phase::Eval`]): the phases
/// sample → check → solve (per tree, assembling the proved ones) → final (cold re-checks) →
/// score (pass@k, depth table, details).
pub fn run_eval(
    ctx: &RunContext<'_>,
    policy: &mut dyn SeqPolicy,
    theorems: &[Theorem],
    opts: &EvalOptions,
    round: u32,
    phase: Phase,
) -> anyhow::Result<EvalResult> {
    let store = ctx.store;
    let mut times = PhaseTimes::default();
    // The run's theorem list is its main evaluation's; canaries are checked beside it.
    if round == 0 && phase != Phase::Canary {
        ensure_theorems(store, theorems)?;
    }
    let t = Instant::now();
    let nodes = sample_trees(ctx, policy, theorems, opts, (round, phase), &mut times)?;
    times.sample_s = t.elapsed().as_secs_f64();
    judge_and_score(ctx, theorems, opts, (round, phase), &nodes, times)
}

/// The run's theorems, recorded once (a resumed run must have the same ones).
fn ensure_theorems(store: &RunStore, theorems: &[Theorem]) -> crate::store::Result<()> {
    let ids: Vec<(String, String)> = theorems
        .iter()
        .map(|t| (t.id.clone(), serde_json::to_string(t).unwrap_or_default()))
        .collect();
    store.ensure_theorems(&ids)
}

/// [`run_eval`] on proof trees sampled elsewhere (`prod eval --trees`): `generated` (every
/// tree's roots in the order of `theorems`, then its deeper levels) become the nodes of the
/// sample phase, and nothing is sampled; checking, solving, the cold re-checks and the scores
/// are those of any evaluation.
pub fn run_eval_given(
    ctx: &RunContext<'_>,
    generated: &[GeneratedNode],
    theorems: &[Theorem],
    opts: &EvalOptions,
    round: u32,
    phase: Phase,
) -> anyhow::Result<EvalResult> {
    let store = ctx.store;
    if round == 0 && phase != Phase::Canary {
        ensure_theorems(store, theorems)?;
    }
    let mut times = PhaseTimes::default();
    let t = Instant::now();
    let nodes = if store.is_done(round, phase, Step::Sample)? {
        store.nodes(round, phase)?
    } else {
        store_generated(ctx, generated, theorems.len(), opts, (round, phase), t)?
    };
    times.sample_s = t.elapsed().as_secs_f64();
    judge_and_score(ctx, theorems, opts, (round, phase), &nodes, times)
}

/// The phases after sampling: check → solve (per tree, assembling the proved ones) → final
/// (cold re-checks) → score.
fn judge_and_score(
    ctx: &RunContext<'_>,
    theorems: &[Theorem],
    opts: &EvalOptions,
    (round, phase): (u32, Phase),
    nodes: &[StoredNode],
    mut times: PhaseTimes,
) -> anyhow::Result<EvalResult> {
    // Always: infra nodes are asked again.
    let t = Instant::now();
    let prover = (ctx.prover.checker, ctx.prover.lang);
    let stats = check_phase(ctx.store, nodes, prover, ctx.bars)?;
    times.checked_now = stats.asked;
    times.check_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut solved = solve_trees(ctx, nodes, theorems, opts)?;
    times.solve_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let proved = final_checks(ctx, theorems, opts, (round, phase), &mut solved)?;
    times.final_s = t.elapsed().as_secs_f64();
    score(ctx, theorems, opts, nodes, &solved, &proved, times)
}

/// Algorithm 1's trees for every theorem (from the sample log on a resume); depth-0 nodes are
/// tied to their theorem.
fn sample_trees(
    ctx: &RunContext<'_>,
    policy: &mut dyn SeqPolicy,
    theorems: &[Theorem],
    opts: &EvalOptions,
    (round, phase): (u32, Phase),
    times: &mut PhaseTimes,
) -> anyhow::Result<Vec<StoredNode>> {
    let store = ctx.store;
    if store.is_done(round, phase, Step::Sample)? {
        return Ok(store.nodes(round, phase)?);
    }
    let t = Instant::now();
    let roots: Vec<TreeGoal> = theorems
        .iter()
        .map(|t| TreeGoal::new(t.context.clone(), t.statement.clone()))
        .collect();
    // Deeper levels are only known as they come: a count, no total.
    let pb = ctx.bars.bar("sample", "nodes", None);
    let tick = |n: usize| pb.inc(n as u64);
    let mut logged = LoggedPolicy::new(policy, store, round, phase);
    logged.on_progress = Some(&tick);
    let generated = generate_test_trees(
        &mut logged,
        &roots,
        opts.depth,
        opts.samples,
        ctx.prover.lang,
    )?;
    times.sampled_fresh = logged.fresh;
    times.sampled_replayed = logged.replayed;
    pb.finish();
    store_generated(ctx, &generated, roots.len(), opts, (round, phase), t)
}

/// Stores the generated nodes, with their hammer leaves when `opts` asks for them, as (round,
/// phase)'s nodes and marks sampling done. Depth-0 nodes of each tree come in the order of the
/// roots: they are tied to their theorem.
fn store_generated(
    ctx: &RunContext<'_>,
    generated: &[GeneratedNode],
    per_tree: usize,
    opts: &EvalOptions,
    (round, phase): (u32, Phase),
    started: Instant,
) -> anyhow::Result<Vec<StoredNode>> {
    let store = ctx.store;
    let with;
    let generated = if opts.hammer_leaves {
        with = crate::leaves::with_leaves(generated, ctx.prover.lang);
        &with[..]
    } else {
        generated
    };
    let mut depth0_seen: HashMap<u32, usize> = HashMap::new();
    let mut root_of = Vec::with_capacity(generated.len());
    for g in generated {
        if g.depth == 0 {
            let k = depth0_seen.entry(g.tree).or_default();
            root_of.push(Some((*k % per_tree.max(1)) as i64));
            *k += 1;
        } else {
            root_of.push(None);
        }
    }
    let stored = to_stored(store, generated, round, phase, &|_, i| root_of[i])?;
    store.put_nodes(round, phase, &stored)?;
    let nodes = store.nodes(round, phase)?;
    store.mark_done(round, phase, Step::Sample, started.elapsed().as_secs_f64())?;
    Ok(nodes)
}

/// One theorem's trees so far: (judged trees, proved trees, lowest proving height).
type TheoremCount = (usize, usize, Option<u32>);

/// A globally correct root, assembled, waiting for its cold re-check.
struct FinalJob {
    theorem: usize,
    tree: u32,
    assembled: prod_core::AssembledProof,
    hammer_replaced: bool,
    proved: ProvedTree,
}

/// What solving every tree found.
struct Solved {
    counts: Vec<TheoremCount>,
    /// Per theorem: the trees proved without hammer leaves (count, lowest height); judged as in
    /// `counts`.
    without: Vec<(usize, Option<u32>)>,
    /// (novel, all) lemmas proposed by globally correct nodes.
    novel: (usize, usize),
    globals: HashMap<i64, GlobalVerdict>,
    finals: Vec<FinalJob>,
}

/// Global correctness per tree (stored with heights); roots judged incorrect count as failed
/// samples, correct ones are assembled for the final check.
fn solve_trees(
    ctx: &RunContext<'_>,
    nodes: &[StoredNode],
    theorems: &[Theorem],
    opts: &EvalOptions,
) -> anyhow::Result<Solved> {
    let mut out = Solved {
        counts: vec![(0, 0, None); theorems.len()],
        without: vec![(0, None); theorems.len()],
        novel: (0, 0),
        globals: HashMap::new(),
        finals: Vec::new(),
    };
    let origin_of: HashMap<i64, Origin> = nodes.iter().map(|n| (n.id, n.origin)).collect();
    for tree in 0..opts.samples {
        let in_tree: Vec<&StoredNode> = nodes.iter().filter(|n| n.tree == tree).collect();
        let solved = solve_tree(ctx, &in_tree, &mut out)?;
        let plain = without_leaves(ctx, &in_tree)?;
        count_novel(ctx, &solved, &mut out.novel);
        for n in &in_tree {
            let Some(th) = n
                .theorem
                .and_then(|th| usize::try_from(th).ok())
                .filter(|&x| x < theorems.len())
            else {
                continue;
            };
            let trees = (&solved, plain.as_ref());
            judge_root(trees, n.id, (th, tree), theorems, &origin_of, &mut out);
        }
    }
    Ok(out)
}

/// One tree's parsable nodes as the solver saw them, with their stored ids.
struct SolvedTree<'l> {
    forest: Forest<'l>,
    ids: Vec<i64>,
}

/// Solve one tree and store each node's global verdict and height.
fn solve_tree<'l>(
    ctx: &RunContext<'l>,
    in_tree: &[&StoredNode],
    out: &mut Solved,
) -> anyhow::Result<SolvedTree<'l>> {
    let (forest, ids) = solve_stored(ctx.store, in_tree, ctx.prover.lang)?;
    for (i, id) in ids.iter().enumerate() {
        ctx.store
            .put_global(*id, forest.verdict(i), forest.height(i))?;
        out.globals.insert(*id, forest.verdict(i));
    }
    Ok(SolvedTree { forest, ids })
}

/// The tree without its hammer leaves, solved (and not stored): what the other nodes prove
/// alone. `None` when the tree has no leaf.
fn without_leaves<'l>(
    ctx: &RunContext<'l>,
    in_tree: &[&StoredNode],
) -> anyhow::Result<Option<SolvedTree<'l>>> {
    if !in_tree.iter().any(|n| n.origin == Origin::HammerLeaf) {
        return Ok(None);
    }
    let plain: Vec<&StoredNode> = in_tree
        .iter()
        .copied()
        .filter(|n| n.origin != Origin::HammerLeaf)
        .collect();
    let (forest, ids) = solve_stored(ctx.store, &plain, ctx.prover.lang)?;
    Ok(Some(SolvedTree { forest, ids }))
}

/// Count the lemmas proposed by globally correct nodes: (novel, all).
fn count_novel(ctx: &RunContext<'_>, t: &SolvedTree, novel: &mut (usize, usize)) {
    let lang = ctx.prover.lang;
    for (i, n) in t.forest.nodes().iter().enumerate() {
        if t.forest.verdict(i) == GlobalVerdict::Correct {
            for l in n.proof.lemmas() {
                novel.1 += 1;
                if !ctx
                    .dataset_statements
                    .contains(&lang.normalize_statement(l))
                {
                    novel.0 += 1;
                }
            }
        }
    }
}

/// A root of theorem `th` in `tree` (the tree, and the tree without its hammer leaves when it
/// has any): an incorrect (or unparsable, or unassemblable) one counts as a failed sample, a
/// correct one is assembled for the final check, an undetermined one is not judged. A root the
/// tree's nodes prove without the leaves is assembled from them alone, so that a proof counts
/// as one with hammer leaves only when it needs them.
fn judge_root(
    (t, plain): (&SolvedTree, Option<&SolvedTree>),
    id: i64,
    (th, tree): (usize, u32),
    theorems: &[Theorem],
    origin_of: &HashMap<i64, Origin>,
    out: &mut Solved,
) {
    let Some(si) = t.ids.iter().position(|&x| x == id) else {
        // Unparsable root: a judged, failed sample.
        out.counts[th].0 += 1;
        return;
    };
    match t.forest.verdict(si) {
        GlobalVerdict::Incorrect => out.counts[th].0 += 1,
        GlobalVerdict::Undetermined => {}
        GlobalVerdict::Correct => {
            // Proved without the leaves: that proof (the solutions only grow with nodes, so a
            // root the leaves are needed for is not correct without them).
            let alone = plain.and_then(|p| {
                let pi = p.ids.iter().position(|&x| x == id)?;
                (p.forest.verdict(pi) == GlobalVerdict::Correct).then_some((p, pi))
            });
            let (from, at, with_leaves) = match alone {
                Some((p, pi)) => (p, pi, false),
                None => (t, si, plain.is_some()),
            };
            match final_job(from, at, (th, tree), origin_of, with_leaves) {
                Ok(job) => out.finals.push(job),
                Err(e) => {
                    // Cannot be assembled (no name): judged as not proved, said loudly.
                    eprintln!(
                        "warning: theorem {}: tree {tree}: cannot assemble: {e}",
                        theorems[th].id
                    );
                    out.counts[th].0 += 1;
                }
            }
        }
    }
}

/// The assembled proof of the globally correct root `si`, ready for its cold re-check.
fn final_job(
    t: &SolvedTree,
    si: usize,
    (theorem, tree): (usize, u32),
    origin_of: &HashMap<i64, Origin>,
    with_leaves: bool,
) -> Result<FinalJob, prod_core::AssemblyError> {
    let RootAssembly {
        proof: assembled,
        hammer_replaced,
    } = t.forest.assemble(si)?;
    let origin = |node: usize| t.ids.get(node).and_then(|id| origin_of.get(id));
    let sampled_only = assembled
        .lemmas
        .iter()
        .all(|l| origin(l.node) == Some(&Origin::Sampled));
    Ok(FinalJob {
        theorem,
        tree,
        hammer_replaced,
        proved: ProvedTree {
            height: t.forest.height(si),
            assembled: assembled.text.clone(),
            sampled_only,
            with_leaves,
        },
        assembled,
    })
}

/// The cold re-check of every assembled proof (stored; infra ones are asked again on a
/// resume). A theorem counts a tree as proved only when this passes.
fn final_checks(
    ctx: &RunContext<'_>,
    theorems: &[Theorem],
    opts: &EvalOptions,
    (round, phase): (u32, Phase),
    solved: &mut Solved,
) -> anyhow::Result<HashMap<(usize, u32), ProvedTree>> {
    let store = ctx.store;
    let pb = ctx.bars.bar("final", "proofs", Some(solved.finals.len()));
    let mut proved_trees = HashMap::new();
    for job in std::mem::take(&mut solved.finals) {
        let (th, tree) = (job.theorem, job.tree);
        let v = match store.final_verdict(round, phase, th as i64, tree)? {
            Some(v) => v,
            None => {
                let t = &theorems[th];
                let (v, file) = ctx.prover.final_check.final_check(&FinalProof {
                    imports: "",
                    context: &t.context,
                    scope: &t.scope,
                    qualified_name: &t.qualified_name,
                    statement: &t.statement,
                    assembled: &job.assembled,
                    hammer_replaced: job.hammer_replaced,
                    timeout: Duration::from_secs(opts.final_timeout_s),
                });
                store.put_final(round, phase, th as i64, tree, &v, &file)?;
                v
            }
        };
        pb.inc(1);
        let count = &mut solved.counts[th];
        match v {
            Verdict::Proved { .. } => {
                count.0 += 1;
                count.1 += 1;
                count.2 = lower(count.2, job.proved.height);
                if !job.proved.with_leaves {
                    let w = &mut solved.without[th];
                    w.0 += 1;
                    w.1 = lower(w.1, job.proved.height);
                }
                proved_trees.insert((th, tree), job.proved);
            }
            Verdict::Infra { message } => eprintln!(
                "warning: theorem {}: tree {tree}: final check infra: {message}",
                theorems[th].id
            ),
            other => {
                // Locally checked nodes that do not compile together: a real failure, reported.
                eprintln!(
                    "warning: theorem {}: tree {tree}: assembled proof failed the cold check: {}",
                    theorems[th].id,
                    other.message()
                );
                count.0 += 1;
            }
        }
    }
    pb.finish();
    Ok(proved_trees)
}

/// The lower of two heights (a missing one left out).
fn lower(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// pass@k with 95% CIs, the depth table, node counts and the report's details; with hammer
/// leaves, also the same trees without them.
fn score(
    ctx: &RunContext<'_>,
    theorems: &[Theorem],
    opts: &EvalOptions,
    nodes: &[StoredNode],
    solved: &Solved,
    proved: &HashMap<(usize, u32), ProvedTree>,
    times: PhaseTimes,
) -> anyhow::Result<EvalResult> {
    let counts = &solved.counts;
    let n = node_verdicts(ctx.store, nodes, ctx.prover.lang)?;
    let judged: Vec<(usize, usize)> = counts.iter().map(|o| (o.0, o.1)).collect();
    let inputs = crate::outcomes::Inputs {
        theorems,
        nodes,
        verdicts: &n.verdicts,
        globals: &solved.globals,
        proved,
        judged: &judged,
        lang: ctx.prover.lang,
        // CoqHammer alone and the ceiling write fixed proofs: no token limit applies to them.
        truncation_recorded: ctx.store.records_truncation()?
            && nodes
                .iter()
                .all(|n| !matches!(n.phase, Phase::HammerBaseline | Phase::Ceiling)),
    };
    let details = crate::outcomes::details(&inputs);
    let novel = solved.novel;
    let mut evaluation = Evaluation {
        name: opts.name.clone(),
        split: opts.split.clone(),
        temperature: opts.temperature,
        samples_per_theorem: opts.samples as usize,
        theorems: theorems.len(),
        pass_at_k: pass_at_ks(opts, counts),
        depth_table: depth_table(theorems, counts),
        infra_nodes: n.infra,
        checked_nodes: n.checked,
        novel_lemma_share: (novel.1 > 0).then(|| novel.0 as f64 / novel.1 as f64),
        theorems_detail: details.theorems,
        node_outcomes: Some(details.node_outcomes),
        use_invoke_share_root: details.use_invoke_share_root,
        proposals: Some(details.proposals),
        sampled_trees_height_ge1: Some(details.sampled_trees_height_ge1),
        examples: details.examples,
        lemmas_closed_by_hammer: Some(details.lemmas_closed_by_hammer),
        hammer: None,
        hammer_leaves: None,
    };
    let without_leaves = opts
        .hammer_leaves
        .then(|| without_leaves_evaluation(opts, &inputs, solved, &mut evaluation));
    let per_theorem = theorems
        .iter()
        .zip(counts)
        .map(|(t, o)| (t.id.clone(), o.0, o.1, o.2))
        .collect();
    Ok(EvalResult {
        evaluation,
        without_leaves,
        times,
        per_theorem,
        nodes: nodes.len(),
        parsed_nodes: n.parsed,
        locally_correct: n.correct,
    })
}

/// The name of an evaluation's trees without their hammer leaves.
pub fn without_leaves_name(name: &str) -> String {
    format!("{name}, no hammer leaves")
}

/// The Fig. 5 table of per-theorem counts.
fn depth_table(theorems: &[Theorem], counts: &[TheoremCount]) -> Vec<DepthCell> {
    let mut table = DepthTable::default();
    for (t, o) in theorems.iter().zip(counts) {
        table.add(t.depth, if o.1 > 0 { o.2 } else { None });
    }
    DepthCell::from_table(&table)
}

/// The trees of an evaluation with hammer leaves, scored without them (the same judged trees;
/// proved: those whose proof needed no leaf), and what the leaves did, on `evaluation`.
fn without_leaves_evaluation(
    opts: &EvalOptions,
    inputs: &crate::outcomes::Inputs<'_>,
    solved: &Solved,
    evaluation: &mut Evaluation,
) -> Evaluation {
    let counts: Vec<TheoremCount> = solved
        .counts
        .iter()
        .zip(&solved.without)
        .map(|(c, w)| (c.0, w.0, w.1))
        .collect();
    let proved: HashMap<(usize, u32), ProvedTree> = inputs
        .proved
        .iter()
        .filter(|(_, p)| !p.with_leaves)
        .map(|(k, p)| (*k, p.clone()))
        .collect();
    let judged: Vec<(usize, usize)> = counts.iter().map(|o| (o.0, o.1)).collect();
    let theorems_detail = crate::outcomes::details(&crate::outcomes::Inputs {
        proved: &proved,
        judged: &judged,
        ..*inputs
    })
    .theorems;
    let name = without_leaves_name(&opts.name);
    let leaves: Vec<&StoredNode> = inputs
        .nodes
        .iter()
        .filter(|n| n.origin == Origin::HammerLeaf)
        .collect();
    let with = solved.counts.iter().filter(|c| c.1 > 0).count();
    let alone = counts.iter().filter(|c| c.1 > 0).count();
    evaluation.hammer_leaves = Some(prod_report::HammerLeaves {
        leaves: leaves.len(),
        proved: leaves
            .iter()
            .filter(|n| {
                matches!(
                    inputs.verdicts.get(&n.id),
                    Some(Some(Verdict::Proved { .. }))
                )
            })
            .count(),
        trees_with_leaves: Some(inputs.proved.values().filter(|p| p.with_leaves).count()),
        theorems_without_leaves: Some(alone),
        theorems_only_with_leaves: Some(with.saturating_sub(alone)),
        without: Some(name.clone()),
    });
    Evaluation {
        name,
        split: opts.split.clone(),
        temperature: opts.temperature,
        samples_per_theorem: opts.samples as usize,
        theorems: inputs.theorems.len(),
        pass_at_k: pass_at_ks(opts, &counts),
        depth_table: depth_table(inputs.theorems, &counts),
        theorems_detail,
        ..Evaluation::default()
    }
}

/// pass@k with 95% CIs for every asked k up to the samples per theorem.
fn pass_at_ks(opts: &EvalOptions, counts: &[TheoremCount]) -> Vec<PassAtK> {
    let outcomes: Vec<TheoremOutcome> = counts
        .iter()
        .map(|o| TheoremOutcome {
            samples: o.0,
            correct: o.1,
        })
        .collect();
    opts.ks
        .iter()
        .filter(|&&k| k <= opts.samples as usize)
        .filter_map(|&k| estimate(&outcomes, k, opts.intervals()))
        .map(|p| PassAtK::from_estimate(&p))
        .collect()
}

/// Every node's stored verdict, and how many nodes were checked, lost to infra, parse as
/// conditional proofs and are locally correct.
struct NodeVerdicts {
    verdicts: HashMap<i64, Option<Verdict>>,
    checked: usize,
    infra: usize,
    parsed: usize,
    correct: usize,
}

fn node_verdicts(
    store: &RunStore,
    nodes: &[StoredNode],
    lang: &dyn ProofLanguage,
) -> anyhow::Result<NodeVerdicts> {
    let mut out = NodeVerdicts {
        verdicts: HashMap::with_capacity(nodes.len()),
        checked: 0,
        infra: 0,
        parsed: 0,
        correct: 0,
    };
    for n in nodes {
        let v = store.verdict(n.id)?;
        match &v {
            Some(_) => out.checked += 1,
            None => out.infra += 1,
        }
        if ConditionalProof::parse_with(&n.completion, lang).is_ok() {
            out.parsed += 1;
        }
        if local_verdict(v.as_ref()).is_correct() {
            out.correct += 1;
        }
        out.verdicts.insert(n.id, v);
    }
    Ok(out)
}

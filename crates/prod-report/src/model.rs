//! The report's input: what a run (`prod eval`, `prod rl`) writes as RUN.json.
//!
//! These types are a contract between the run writer and the report, so changes are additive
//! only: new fields are `Option` or `#[serde(default)]`, and unknown fields are ignored so that
//! an older report binary still reads a newer RUN.json.
//!
//! Floats that can be undefined (a loss with no examples, a share of zero lemmas) are `Option`:
//! JSON has no NaN, and serde_json writes NaN as `null`, which a plain `f64` would refuse to read.

use serde::{Deserialize, Serialize};

/// One run: its setup, its evaluations (pass@k, Fig. 5 depths) and its RL rounds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct RunReport {
    pub title: String,
    /// When the run was made, as the writer formats it (e.g. RFC 3339); shown verbatim.
    #[serde(default)]
    pub created: String,
    /// The proof checker, e.g. "coq 8.16.1".
    #[serde(default)]
    pub prover: String,
    #[serde(default)]
    pub dataset: DatasetInfo,
    #[serde(default)]
    pub model: ModelInfo,
    /// The run's configuration as loaded (prod.toml sections), shown as JSON.
    #[serde(default)]
    pub config: serde_json::Value,
    #[serde(default)]
    pub evaluations: Vec<Evaluation>,
    #[serde(default)]
    pub rounds: Vec<RoundMetrics>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// Methods set against a baseline on the same theorems (ProD against CoqHammer alone).
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
    /// The canary checks of the run (one per evaluation or RL round that ran them).
    #[serde(default)]
    pub canaries: Vec<CanaryCheck>,
}

/// Statements no proof may prove (`False`, `0 = 1`, …), sampled and checked like the run's
/// theorems but never counted in pass@k: any accepted one is a soundness alarm.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct CanaryCheck {
    /// Canary theorems checked.
    pub canaries: usize,
    /// Their sampled nodes.
    #[serde(default)]
    pub nodes: usize,
    /// Canary roots the reward path accepted (must be empty).
    #[serde(default)]
    pub alarms: Vec<CanaryAlarm>,
}

/// One accepted canary root.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct CanaryAlarm {
    pub canary: String,
    pub tree: u32,
    pub node: i64,
    /// How it was accepted: locally correct without a proposal, globally correct, or through
    /// the final check.
    pub what: String,
    pub statement: String,
    pub completion: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct DatasetInfo {
    pub name: String,
    /// The split the run trained on / evaluated (e.g. "train", "valid", "test").
    #[serde(default)]
    pub split: String,
    /// Number of theorems in that split.
    #[serde(default)]
    pub size: usize,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    pub name: String,
    /// Parameter count, when known.
    #[serde(default)]
    pub params: Option<u64>,
}

/// One evaluation of one policy on one split at one temperature, e.g. "ProD-RL round 3" or
/// "SFT w/o lemma proposal".
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Evaluation {
    pub name: String,
    #[serde(default)]
    pub split: String,
    pub temperature: f64,
    /// n: samples (test-time proof trees) per theorem; pass@k is estimated for k ≤ n.
    pub samples_per_theorem: usize,
    /// Theorems evaluated.
    pub theorems: usize,
    #[serde(default)]
    pub pass_at_k: Vec<PassAtK>,
    /// Paper Fig. 5: theorems by (ground-truth depth, depth of the proving tree).
    #[serde(default)]
    pub depth_table: Vec<DepthCell>,
    /// Nodes whose check was lost to an infra failure (never counted as failed proofs).
    #[serde(default)]
    pub infra_nodes: usize,
    /// Nodes that were checked (judged).
    #[serde(default)]
    pub checked_nodes: usize,
    /// Share of proposed lemmas not in the dataset (paper: 37.7% of replay-buffer lemmas).
    #[serde(default)]
    pub novel_lemma_share: Option<f64>,
    /// Per theorem: what its trees did (empty in run files that predate it).
    #[serde(default)]
    pub theorems_detail: Vec<TheoremDetail>,
    /// Every node of the evaluation by verdict kind, with the most common failure messages.
    #[serde(default)]
    pub node_outcomes: Option<NodeOutcomes>,
    /// Share of root samples (depth 0) whose completion begins with `<use_invoke>`: how often
    /// the policy chose to propose lemmas for the theorem itself.
    #[serde(default)]
    pub use_invoke_share_root: Option<f64>,
    /// `<invoke>` lemmas proposed by all nodes (parsable completions only).
    #[serde(default)]
    pub proposals: Option<usize>,
    /// Proved trees (root globally correct, assembled proof passed the cold check) of height
    /// ≥ 1 whose every node was sampled by the policy (no ground-truth node): lemma proposal
    /// that worked end to end.
    #[serde(default)]
    pub sampled_trees_height_ge1: Option<usize>,
    /// A few example proof trees, node by node.
    #[serde(default)]
    pub examples: Vec<ExampleTree>,
    /// Proposed lemmas (per tree) proved by a sampled child whose proof is `hammer.` alone: the
    /// policy left the lemma to the hammer, and the hammer closed it.
    #[serde(default)]
    pub lemmas_closed_by_hammer: Option<usize>,
    /// What the `hammer.` steps of this evaluation's checks did and cost (the checks this
    /// invocation made; answers of the verification cache run no hammer).
    #[serde(default)]
    pub hammer: Option<HammerUse>,
    /// What the hammer leaves did (None: the evaluation had none).
    #[serde(default)]
    pub hammer_leaves: Option<HammerLeaves>,
}

/// Hammer leaves: every distinct lemma a tree proposed also got a `<no_invoke> hammer.` node
/// (never the root). What they proved, and which theorems needed them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct HammerLeaves {
    /// Leaf nodes (one per distinct proposed lemma and tree) and those the hammer proved.
    pub leaves: usize,
    pub proved: usize,
    /// Proved trees whose proof needed a hammer leaf (the tree's other nodes alone did not
    /// prove the theorem). None in an RL round.
    #[serde(default)]
    pub trees_with_leaves: Option<usize>,
    /// Theorems some tree proved without any hammer leaf, and theorems proved only by trees
    /// that needed one. None in an RL round.
    #[serde(default)]
    pub theorems_without_leaves: Option<usize>,
    #[serde(default)]
    pub theorems_only_with_leaves: Option<usize>,
    /// The evaluation of the same trees without their leaves (pass@k, depth table), by name.
    #[serde(default)]
    pub without: Option<String>,
}

/// The `hammer.` steps of one phase: calls, how they were closed, the per-goal memory's answers
/// and the seconds spent in the fixed tactic list and in the automated provers.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct HammerUse {
    /// `hammer.` steps expanded (memory answers included).
    pub calls: u64,
    /// Closed by a tactic of the fixed list.
    pub fixed_closed: u64,
    /// Calls of the automated provers, and those that closed the goal.
    pub atp_calls: u64,
    pub atp_closed: u64,
    /// Goals met before: closed again by the remembered tactic (re-run by the prover), failed
    /// again at once, or whose remembered tactic no longer worked (expanded afresh).
    pub cache_closed: u64,
    pub cache_failed: u64,
    pub cache_stale: u64,
    pub fixed_s: f64,
    pub atp_s: f64,
}

/// What one theorem's test-time trees did.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct TheoremDetail {
    /// Dataset id of the theorem.
    pub id: String,
    /// Its (qualified) name.
    #[serde(default)]
    pub name: String,
    /// Source file, when known.
    #[serde(default)]
    pub file: String,
    /// Depth of the ground-truth proof tree, when known.
    #[serde(default)]
    pub ground_truth_depth: Option<u32>,
    /// Trees judged (not lost to infra failures) and trees that proved it.
    pub trees: usize,
    pub proved_trees: usize,
    /// 1-based index of the first tree (sample) that proved it: it counts for pass@k from this k on
    /// when samples are taken in order.
    #[serde(default)]
    pub first_proved_sample: Option<usize>,
    /// Heights of the shallowest and deepest proving trees (0: a flat proof).
    #[serde(default)]
    pub proving_depth: Option<u32>,
    #[serde(default)]
    pub deepest_proving_depth: Option<u32>,
    /// Nodes sampled for it over all its trees (root and lemma nodes) and how many were locally
    /// correct.
    pub nodes: usize,
    pub locally_correct: usize,
}

/// Every node of an evaluation by verdict kind. `infra` nodes have no verdict (their check was
/// lost to an infrastructure failure): they are never counted as failures.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeOutcomes {
    pub nodes: usize,
    pub proved: usize,
    pub failed: usize,
    pub rejected: usize,
    pub timed_out: usize,
    pub infra: usize,
    /// Nodes the token limit cut that were then not proved (failed or refused): counted here
    /// instead of under `failed`/`rejected`. `None` when the run did not record cuts (a store
    /// from before they were recorded, or trees from a file without `stop`).
    #[serde(default)]
    pub truncated: Option<usize>,
    /// Nodes that are globally correct (proved together with a tree below them).
    #[serde(default)]
    pub globally_correct: usize,
    /// The most common failure messages (first line, truncated), most frequent first.
    #[serde(default)]
    pub top_failures: Vec<FailureCount>,
}

/// The label of [`NodeOutcomes::truncated`] in reports.
pub const CUT_LABEL: &str = "cut at the token limit";

impl NodeOutcomes {
    /// The verdict classes in report order with their counts (every node in exactly one):
    /// proved, failed, rejected, cut at the token limit (when the run recorded cuts), timed
    /// out, infra.
    pub fn classes(&self) -> Vec<(&'static str, usize)> {
        let mut v = vec![
            ("proved", self.proved),
            ("failed", self.failed),
            ("rejected", self.rejected),
        ];
        if let Some(t) = self.truncated {
            v.push((CUT_LABEL, t));
        }
        v.push(("timed out", self.timed_out));
        v.push(("infra", self.infra));
        v
    }
}

/// One failure message and how many nodes got it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct FailureCount {
    /// `failed` or `rejected`.
    pub kind: String,
    pub message: String,
    pub count: usize,
}

/// An example proof tree: one theorem's nodes in one test-time tree, root first.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ExampleTree {
    /// Why it was picked, e.g. "proved with proposed lemmas".
    pub kind: String,
    pub theorem: String,
    /// Tree (sample) index, 0-based.
    pub tree: u32,
    /// Whether the theorem counts as proved by this tree (cold check passed).
    pub proved: bool,
    /// Height of the proving tree, when proved.
    #[serde(default)]
    pub height: Option<u32>,
    pub nodes: Vec<ExampleNode>,
    /// The assembled complete proof (lemmas first, then the theorem), when proved.
    #[serde(default)]
    pub assembled_proof: Option<String>,
    /// Nodes left out of `nodes` to keep the example short.
    #[serde(default)]
    pub omitted_nodes: usize,
}

/// One node of an example tree.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ExampleNode {
    /// Level in the tree (0: the theorem).
    pub depth: u32,
    pub statement: String,
    /// The completion as the policy wrote it (possibly truncated).
    pub completion: String,
    /// `sampled` or `ground_truth`.
    pub origin: String,
    /// Local verdict kind: proved, failed, timed_out, rejected, or infra (no verdict).
    pub verdict: String,
    /// The token limit cut the completion (the model did not end it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The checker's message for a node that was not proved (first lines, truncated).
    #[serde(default)]
    pub message: String,
    /// Global correctness: correct, incorrect, undetermined, or empty when not a conditional proof.
    #[serde(default)]
    pub global: String,
    /// Statements of the lemmas it proposes.
    #[serde(default)]
    pub lemmas: Vec<String>,
}

/// pass@k with its 95% interval (bootstrap ∪ Wilson: see `prod_core::pass_at_k`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PassAtK {
    pub k: usize,
    pub estimate: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Theorems with at least k judged samples (the others are skipped, not failed).
    pub theorems_judged: usize,
    /// Theorems skipped because infra failures left fewer than k judged samples.
    #[serde(default)]
    pub theorems_skipped: usize,
}

impl PassAtK {
    /// From the estimator's result.
    pub fn from_estimate(p: &prod_core::pass_at_k::PassAtK) -> Self {
        PassAtK {
            k: p.k,
            estimate: p.estimate,
            ci_low: p.ci_low,
            ci_high: p.ci_high,
            theorems_judged: p.theorems,
            theorems_skipped: p.skipped,
        }
    }
}

/// One cell of Fig. 5: `count` theorems whose ground-truth proof tree has depth
/// `ground_truth_depth` (None: unknown) were proved by a tree of depth `proving_depth`
/// (None: not proved). Where several correct trees exist, the paper counts the deepest one.
/// Cells with the same pair are summed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DepthCell {
    pub ground_truth_depth: Option<u32>,
    pub proving_depth: Option<u32>,
    pub count: usize,
}

impl DepthCell {
    /// All cells of a `prod_core::pass_at_k::DepthTable`, in its order.
    pub fn from_table(t: &prod_core::pass_at_k::DepthTable) -> Vec<DepthCell> {
        t.rows()
            .into_iter()
            .map(|(g, p, count)| DepthCell {
                ground_truth_depth: g,
                proving_depth: p,
                count,
            })
            .collect()
    }
}

impl RoundMetrics {
    /// The starting model's evaluation, listed as round 0 before the trained rounds: evaluated,
    /// nothing sampled or trained.
    pub fn is_start(&self) -> bool {
        self.round == 0 && self.eval.is_some() && self.nodes == 0 && self.examples == 0
    }
}

impl RoundMetrics {
    /// The round's line as `prod rl` prints it as the run goes (round 0: the starting model's
    /// held-out pass@k only).
    pub fn line(&self) -> String {
        let r = self;
        let eval = r.eval.as_ref().map_or(String::new(), |ps| {
            let cells: Vec<String> = ps
                .iter()
                .map(|p| {
                    let (e, lo, hi) = (100.0 * p.estimate, 100.0 * p.ci_low, 100.0 * p.ci_high);
                    format!("pass@{} {e:.1}% [{lo:.1}, {hi:.1}]", p.k)
                })
                .collect();
            let (n, s) = (r.eval_theorems, r.eval_s);
            format!("; held-out ({n} theorems, {s:.0} s): {}", cells.join(", "))
        });
        if r.round == 0 {
            return format!("round 0 (starting model){eval}");
        }
        let loss = r.loss.map_or("-".into(), |l| format!("{l:.3}"));
        let speed = r
            .tokens_per_s
            .map_or("tokens/s -".into(), |t| format!("{t:.0} tokens/s"));
        format!(
            "round {}: {} nodes, {} locally / {} globally correct, {} examples (mean w {:.3}), loss {loss}, sample {:.0} s ({speed}), check {:.0} s, filter {:.0} s, train {:.0} s{eval}",
            r.round, r.nodes, r.locally_correct, r.globally_correct, r.examples,
            r.mean_weight.unwrap_or(0.0), r.sample_s, r.check_s, r.filter_s, r.train_s
        )
    }
}

/// What one ProD-RL round did (paper Section 3.2, Appendix A.1).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct RoundMetrics {
    pub round: u32,
    /// Training examples in the round's batch (after filters, with augmented and ground-truth ones).
    pub examples: usize,
    /// Mean example weight w (None when there were no examples).
    #[serde(default)]
    pub mean_weight: Option<f64>,
    /// Nodes of the round's train-time trees that were locally / globally correct.
    pub locally_correct: usize,
    pub globally_correct: usize,
    pub nodes: usize,
    /// Wall-clock seconds per phase.
    pub sample_s: f64,
    pub check_s: f64,
    pub train_s: f64,
    /// Mean weighted cross-entropy of the policy update (None when nothing was trained).
    #[serde(default)]
    pub loss: Option<f64>,
    /// Value model loss, when a value model is trained.
    #[serde(default)]
    pub value_loss: Option<f64>,
    /// Replay buffer size after the round.
    #[serde(default)]
    pub replay_size: usize,
    /// Share of the replay buffer's lemmas that are novel (not in the dataset).
    #[serde(default)]
    pub novel_lemma_share: Option<f64>,
    /// Wall-clock seconds of the lemma filters' checks (not part of `check_s`).
    #[serde(default)]
    pub filter_s: f64,
    /// Sampled tokens per second of `sample_s` (None when not measured: samples replayed from
    /// the log, or drawn from a remote server).
    #[serde(default)]
    pub tokens_per_s: Option<f64>,
    /// pass@k (95% CIs) of the round's checkpoint on the run's fixed held-out subset;
    /// round 0 is the starting model. None when the round was not evaluated.
    #[serde(default)]
    pub eval: Option<Vec<PassAtK>>,
    /// Theorems in that subset, and the evaluation's wall-clock seconds.
    #[serde(default)]
    pub eval_theorems: usize,
    #[serde(default)]
    pub eval_s: f64,
    /// Share of that evaluation's root samples that begin with `<use_invoke>`.
    #[serde(default)]
    pub eval_use_invoke_share_root: Option<f64>,
    /// What the policy update was trained on, by where the examples came from (None for the
    /// starting model and for runs recorded before it was kept).
    #[serde(default)]
    pub reinforced: Option<Reinforced>,
    /// The `hammer.` steps of the round's checks and filters (None when not counted).
    #[serde(default)]
    pub hammer: Option<HammerUse>,
    /// The round's hammer leaves and how many the hammer proved (None: the round had none).
    #[serde(default)]
    pub hammer_leaves: Option<HammerLeaves>,
}

/// A round's training batch by origin (paper §3.2, Step 3): the round's own conditional proofs,
/// their augmented copies (lemmas moved into the context), the batch's ground-truth proofs, and
/// earlier rounds' examples drawn from the replay buffer. What the update pushes the policy
/// towards is the weight, so each origin carries its summed weight and the part of it on
/// targets that propose lemmas.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Reinforced {
    pub generated: ExampleTally,
    pub augmented: ExampleTally,
    pub ground_truth: ExampleTally,
    pub replayed: ExampleTally,
}

/// Examples of one origin.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Default)]
pub struct ExampleTally {
    pub examples: usize,
    /// Those with weight > 0 (the others only count in the batch).
    pub weighted: usize,
    /// Σ weight.
    pub weight: f64,
    /// Σ weight of the examples whose target begins with `<use_invoke>`.
    pub use_invoke_weight: f64,
}

impl ExampleTally {
    /// Count one example.
    pub fn add(&mut self, weight: f64, use_invoke: bool) {
        self.examples += 1;
        if weight > 0.0 {
            self.weighted += 1;
            self.weight += weight;
            if use_invoke {
                self.use_invoke_weight += weight;
            }
        }
    }
}

impl Reinforced {
    /// The origins in table order, with their names.
    pub fn origins(&self) -> [(&'static str, &ExampleTally); 4] {
        [
            ("generated", &self.generated),
            ("augmented", &self.augmented),
            ("ground truth", &self.ground_truth),
            ("replayed", &self.replayed),
        ]
    }

    /// Share of the batch's weight on targets that propose lemmas (None when nothing weighs).
    pub fn use_invoke_share(&self) -> Option<f64> {
        let (w, u) = self.origins().iter().fold((0.0, 0.0), |(w, u), (_, t)| {
            (w + t.weight, u + t.use_invoke_weight)
        });
        (w > 0.0).then(|| u / w)
    }
}

// The comparison's data, computed by `crate::compare`.

/// pass@k of `method` minus pass@k of `baseline` on the theorems both evaluated.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PassAtKDifference {
    pub method: String,
    pub baseline: String,
    pub k: usize,
    pub estimate: f64,
    /// Paired 95% interval of the difference (bootstrap ∪ Newcombe).
    pub ci_low: f64,
    pub ci_high: f64,
    /// Theorems in both evaluations with at least k judged trees in each.
    pub theorems: usize,
    /// Theorems of the baseline left out (missing from `method`, or fewer than k judged trees).
    pub skipped: usize,
}

/// A method set against a baseline on the same theorems: pass@k of both, the paired difference
/// (method − baseline) and, per theorem, which of the two proved it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    /// The evaluations' names.
    pub method: String,
    pub baseline: String,
    /// The baseline made one deterministic attempt per theorem (CoqHammer alone): k attempts
    /// are k copies of it, so its pass@k is its pass@1 for every k.
    pub baseline_single_attempt: bool,
    pub rows: Vec<ComparisonRow>,
    /// Theorems judged by both, by who proved them.
    pub both: usize,
    pub method_only: usize,
    pub baseline_only: usize,
    pub neither: usize,
    /// Theorems of the method that the baseline has no judged attempt for, or the other way
    /// round (infrastructure failures): left out of the counts and the differences.
    pub unpaired: usize,
    /// Per theorem, in the method's order.
    pub theorems: Vec<TheoremPair>,
}

/// One k of a [`Comparison`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ComparisonRow {
    pub k: usize,
    pub method: Option<PassAtK>,
    pub baseline: Option<PassAtK>,
    /// method − baseline, paired 95% CI (bootstrap ∪ Newcombe).
    pub difference: Option<PassAtKDifference>,
}

/// One theorem in both evaluations.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct TheoremPair {
    pub id: String,
    #[serde(default)]
    pub name: String,
    pub method_trees: usize,
    pub method_proved: usize,
    /// `None`: the baseline has no row for it.
    pub baseline_trees: Option<usize>,
    pub baseline_proved: Option<usize>,
}

impl TheoremPair {
    /// Proved by the method / by the baseline; `None` when that side judged no attempt.
    pub fn method_proved(&self) -> Option<bool> {
        (self.method_trees > 0).then_some(self.method_proved > 0)
    }

    pub fn baseline_proved(&self) -> Option<bool> {
        match (self.baseline_trees, self.baseline_proved) {
            (Some(t), Some(p)) if t > 0 => Some(p > 0),
            _ => None,
        }
    }
}

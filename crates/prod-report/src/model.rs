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
}

/// pass@k with its bootstrap 95% interval (see `prod_core::pass_at_k`).
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
        t.rows().into_iter().map(|(g, p, count)| DepthCell { ground_truth_depth: g, proving_depth: p, count }).collect()
    }
}

impl RoundMetrics {
    /// The starting model's evaluation, listed as round 0 before the trained rounds: evaluated,
    /// nothing sampled or trained.
    pub fn is_start(&self) -> bool {
        self.round == 0 && self.eval.is_some() && self.nodes == 0 && self.examples == 0
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
    /// pass@k (bootstrap 95% CIs) of the round's checkpoint on the run's fixed held-out subset;
    /// round 0 is the starting model. None when the round was not evaluated.
    #[serde(default)]
    pub eval: Option<Vec<PassAtK>>,
    /// Theorems in that subset, and the evaluation's wall-clock seconds.
    #[serde(default)]
    pub eval_theorems: usize,
    #[serde(default)]
    pub eval_s: f64,
}

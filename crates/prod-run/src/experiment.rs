//! `prod experiment`: the paper's Table 2 (§5, "Main results") in miniature, in one resumable
//! command. Four methods get the same sampling budget and are evaluated the same way:
//!
//! | method | how it is trained |
//! |---|---|
//! | **ProD-SFT** | the pretrained base fine-tuned on `sft.jsonl` (both the w/o lemma lines, which propose lemmas, and their augmented copies), as `prod demo` does |
//! | **SFT w/o lemma proposal** | the same base, same steps, on data whose proofs propose nothing (default: D^{w/ l}, `train_wl.jsonl`, every human lemma kept in the context — the baseline the paper describes in §5; `nolemma_data = "no_invoke"`: the `<no_invoke>` lines of `sft.jsonl`) |
//! | **ProD-RL** | R rounds of [`crate::rl`] with [`Method::ProdRl`] from the ProD-SFT model |
//! | **RL w/o lemma proposal** | R rounds with [`Method::NoLemmaProposal`] (Appendix A.2) from the SFT-w/o-lemma model |
//!
//! Every model is evaluated by [`run_eval_job`] on the same held-out theorems (the whole split
//! or a seeded draw of `theorems`) with n trees each (default 8), depth 2, temperature 0.7:
//! pass@1/4/8 with 95% CIs (bootstrap ∪ Wilson), the Fig. 5 depth table, CoqHammer alone on the same theorems
//! with the same checker ([`crate::baseline`], stage `eval-hammer`), and — what a table of four
//! numbers does not tell — the difference of each method to ProD-SFT and to CoqHammer alone
//! with a *paired* CI (bootstrap ∪ Newcombe)
//! ([`prod_report::pass_at_k_difference`]: theorems resampled jointly across methods), the share
//! of novel lemmas in the RL runs' replay buffers (paper: 37.7%) and the per-round held-out
//! pass@k of the RL runs ([`RlEvalConfig`]).
//!
//! The SFT stages are CPU minutes by default; `sft_models` names two finished SFT models instead
//! (trained for one budget elsewhere, e.g. `prod train sft` over hours or a GPU), and the
//! experiment runs the rest from them.
//!
//! Why one command: the comparison is only fair when the four runs share the base model, the
//! dataset, the sampling settings, the theorems and the seeds; spelling that out over six
//! hand-written commands is where such comparisons go wrong.
//!
//! Resume: every stage has its own directory under OUT (`sft/`, `sft_nolemma/`, `rl/`,
//! `rl_nolemma/`, `eval-<method>/`) and is finished when its `done.json` exists (written
//! atomically, last). A finished stage is skipped; an unfinished SFT stage restarts cleanly (its
//! directory is removed: minutes of training, no checkpoint in between); RL and evaluation stages
//! resume from their run stores (nothing sampled or checked twice). Outputs: `OUT/experiment.json`
//! ([`ExperimentResult`]) and `OUT/table.md`, with links to each stage's `report.html`.

use crate::prover::ProverKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prod_report::{DepthCell, Evaluation, PassAtK, PassAtKDifference, RoundMetrics, RunReport};
use serde::{Deserialize, Serialize};

use crate::demo::{
    build_stdlib_dataset, fine_tune_pretrained, pretrained_context_tokens, pretrained_max_seq_len,
    ModelBase, SftData, SftOptions, TrainSummary,
};
use crate::eval::EvalOptions;
use crate::job::{
    run_eval_job, write_atomic, write_pages, write_report, BadInput, CoqJobConfig, EvalJob,
};
use crate::policy::{FirstToken, NativeParams};
use crate::progress::Bars;
use crate::rl::{run_rl_job, Method, RlConfig, RlEvalConfig, ValueModel};

/// The four methods of Table 2, in the order of the table: (key, display name).
pub const METHODS: [(&str, &str); 4] = [
    ("prod_sft", "ProD-SFT"),
    ("sft_nolemma", "SFT w/o lemma proposal"),
    ("prod_rl", "ProD-RL"),
    ("rl_nolemma", "RL w/o lemma proposal"),
];

/// pass@k reported for these k (and for n itself when n is larger).
const KS: [usize; 3] = [1, 4, 8];

/// `--config FILE` (TOML): every key optional; flags override it. The `[rl]`, `[sampling]` and
/// `[coq]` tables override single keys of the experiment's own defaults (not of `prod rl`'s
/// paper-sized ones). `rl.model`, `rl.dataset`, `rl.method`, `rl.rounds`, `rl.batch`,
/// `rl.depth`, `rl.sampling`, `rl.coq`, `rl.seed` and `rl.eval` are set by the experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExperimentConfig {
    /// The pretrained model both SFT stages start from (a `prod model import-gguf` directory).
    pub base_model: PathBuf,
    /// Finished SFT models used instead of the two SFT stages (both or neither: the comparison
    /// needs one training budget for both), e.g. trained longer than `sft_minutes` allows with
    /// `prod train sft`, or on a GPU with `python/train_weighted.py`. `base_model` is then unused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sft_models: Option<GivenSftModels>,
    /// Dataset directory; the Coq stdlib is built into it when it holds no dataset. Empty:
    /// `OUT/data`.
    pub dataset: PathBuf,
    /// Wall-clock budget of each SFT stage, minutes.
    pub sft_minutes: f64,
    /// Optimizer steps of each SFT stage (0: only `sft_minutes` bounds it).
    pub sft_steps: usize,
    /// The SFT w/o lemma proposal data: `"with_lemmas"` (`train_wl.jsonl`) or `"no_invoke"`.
    pub nolemma_data: SftData,
    /// R: RL rounds of each RL stage.
    pub rounds: u32,
    /// B: RL theorems per round.
    pub batch: usize,
    /// Depth limit of the RL rounds' trees (paper: 3).
    pub rl_depth: u32,
    /// Held-out split evaluated.
    pub split: String,
    /// Theorems evaluated per method (a seeded draw; 0: the whole split).
    pub theorems: usize,
    /// n: proof trees per theorem (at least 8: pass@8).
    pub samples: u32,
    /// Depth limit of the evaluation's trees (paper: 2).
    pub depth: u32,
    /// The RL stages' per-round held-out curve: theorems (the split's first N; 0: none) and
    /// trees per theorem.
    pub curve_theorems: usize,
    pub curve_samples: u32,
    /// Bootstrap rounds of each 95% interval.
    pub bootstrap: usize,
    pub workers: usize,
    pub seed: u64,
    /// Sampling of every evaluation and RL round (temperature 0.7 as in the paper).
    pub sampling: NativeParams,
    pub coq: CoqJobConfig,
    /// The prover of every stage: `"coq"` (the `[coq]` table) or `"isabelle"` (the `[isabelle]`
    /// table: a running Isabelle server; the dataset must then be given and be an Isabelle one,
    /// and there is no CoqHammer stage).
    #[serde(skip_serializing_if = "ProverKind::is_coq")]
    pub prover: ProverKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isabelle: Option<prod_check_isabelle::IsabelleCheckConfig>,
    /// The RL stages' update and filter settings (same optimizer settings as the SFT stage, as
    /// in the paper).
    pub rl: RlConfig,
    /// Evaluate CoqHammer alone on the same theorems (stage `eval-hammer`) and set every method
    /// against it.
    pub hammer_baseline: bool,
    /// The verification cache of that baseline's checks (default: shared by every run on this
    /// machine, [`crate::baseline::default_cache`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hammer_cache: Option<PathBuf>,
    /// Hammer leaves ([`crate::leaves`]) in every evaluation and RL round (overrides
    /// `rl.hammer_leaves`).
    pub hammer_leaves: bool,
}

/// `[sft_models]`: the ProD-SFT model and the SFT w/o lemma proposal model, trained elsewhere.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GivenSftModels {
    /// Trained on `sft.jsonl` (proposes lemmas).
    pub prod: PathBuf,
    /// Trained on data whose proofs propose nothing (`train_wl.jsonl`).
    pub nolemma: PathBuf,
}

/// The command line over the settings file (`prod experiment`'s flags): each flag that is
/// given replaces its key ([`ExperimentOverrides::apply`]).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ExperimentOverrides {
    /// The pretrained model both SFT stages start from. Default: $PROD_CACHE/models/smollm2-135m
    /// (PROD_CACHE defaults to ~/.cache/prod), where scripts/fetch-model.sh puts SmolLM2-135M.
    #[cfg_attr(feature = "clap", arg(long))]
    pub base_model: Option<PathBuf>,
    /// A finished ProD-SFT model (trained on sft.jsonl elsewhere, e.g. longer or on a GPU): the
    /// two SFT stages are skipped. Needs --sft-nolemma-model, trained with the same budget.
    #[cfg_attr(feature = "clap", arg(long, requires = "sft_nolemma_model"))]
    pub sft_model: Option<PathBuf>,
    /// The finished SFT w/o lemma proposal model (trained on train_wl.jsonl) to go with
    /// --sft-model.
    #[cfg_attr(feature = "clap", arg(long, requires = "sft_model"))]
    pub sft_nolemma_model: Option<PathBuf>,
    /// Dataset directory; the Coq stdlib dataset is built into it when absent. Default: OUT/data.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dataset: Option<PathBuf>,
    /// Wall-clock budget of each SFT stage, minutes (default 20).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_minutes))]
    pub sft_minutes: Option<f64>,
    /// Optimizer steps of each SFT stage (still bounded by --sft-minutes).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub sft_steps: Option<usize>,
    /// RL rounds per RL stage (default 2).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_u32))]
    pub rounds: Option<u32>,
    /// RL theorems per round (default 16).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub batch: Option<usize>,
    /// Proof trees per theorem in the evaluations (at least 8; default 8).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_u32))]
    pub samples: Option<u32>,
    /// Held-out theorems per evaluation, a seeded draw (default 40; 0: the whole split).
    #[cfg_attr(feature = "clap", arg(long))]
    pub theorems: Option<usize>,
    /// Coq workers (default 2).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub workers: Option<usize>,
    /// Seed of every stage (split draw, training, sampling, bootstrap); default from the config.
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// Leave out CoqHammer alone (the eval-hammer stage and the comparisons with it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_hammer_baseline: bool,
    /// Off over the config's `hammer_leaves`.
    #[cfg_attr(feature = "clap", arg(long, help = crate::leaves::OFF_HELP))]
    pub no_hammer_leaves: bool,
}

impl ExperimentOverrides {
    /// The given flags over `cfg`.
    pub fn apply(self, cfg: &mut ExperimentConfig) {
        if let (Some(prod), Some(nolemma)) = (self.sft_model, self.sft_nolemma_model) {
            cfg.sft_models = Some(GivenSftModels { prod, nolemma });
        }
        let set = |v: Option<PathBuf>, key: &mut PathBuf| v.into_iter().for_each(|v| *key = v);
        set(self.base_model, &mut cfg.base_model);
        set(self.dataset, &mut cfg.dataset);
        cfg.sft_minutes = self.sft_minutes.unwrap_or(cfg.sft_minutes);
        cfg.sft_steps = self.sft_steps.unwrap_or(cfg.sft_steps);
        cfg.rounds = self.rounds.unwrap_or(cfg.rounds);
        cfg.batch = self.batch.unwrap_or(cfg.batch);
        cfg.samples = self.samples.unwrap_or(cfg.samples);
        cfg.theorems = self.theorems.unwrap_or(cfg.theorems);
        cfg.workers = self.workers.unwrap_or(cfg.workers);
        cfg.seed = self.seed.unwrap_or(cfg.seed);
        cfg.hammer_baseline &= !self.no_hammer_baseline;
        cfg.hammer_leaves &= !self.no_hammer_leaves;
    }
}

impl Default for ExperimentConfig {
    fn default() -> Self {
        let base = match ModelBase::default_pretrained() {
            ModelBase::Pretrained(p) => p,
            ModelBase::FromScratch => PathBuf::new(),
        };
        let sampling = NativeParams {
            sampling: prod_core::Sampling {
                context_tokens: pretrained_context_tokens(),
                max_new_tokens: 128,
                ..prod_core::Sampling::default()
            },
            decode_weights: prod_policy::DecodeWeights::Q8,
            first_token: FirstToken::T0,
            ..NativeParams::default()
        };
        let rl = RlConfig {
            learning_rate: 3e-4,
            warmup_steps: 3,
            macro_batch: 8,
            micro_batch: 4,
            max_seq_len: pretrained_max_seq_len(),
            value_model: ValueModel::Separate,
            ..RlConfig::default()
        };
        ExperimentConfig {
            base_model: base,
            sft_models: None,
            dataset: PathBuf::new(),
            sft_minutes: 20.0,
            sft_steps: 0,
            nolemma_data: SftData::WithLemmas,
            rounds: 2,
            batch: 16,
            rl_depth: 2,
            split: "test".into(),
            theorems: 40,
            samples: 8,
            depth: 2,
            curve_theorems: 12,
            curve_samples: 4,
            bootstrap: prod_core::pass_at_k::Bootstrap::DEFAULT_RESAMPLES,
            workers: 2,
            seed: prod_core::DEFAULT_SEED,
            sampling,
            coq: CoqJobConfig {
                workers: 2,
                step_timeout_s: prod_check::TimeLimits::BUDGET.step_s,
                ..CoqJobConfig::default()
            },
            prover: ProverKind::Coq,
            isabelle: None,
            rl,
            hammer_baseline: true,
            hammer_cache: None,
            hammer_leaves: crate::leaves::DEFAULT,
        }
    }
}

/// `b` over `a`, table by table (a key of `b` replaces that key of `a`).
fn merge(a: &mut toml::Value, b: toml::Value) {
    match (a, b) {
        (toml::Value::Table(a), toml::Value::Table(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(x) if x.is_table() && v.is_table() => merge(x, v),
                    _ => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (a, b) => *a = b,
    }
}

impl ExperimentConfig {
    /// The settings file: its keys over the defaults, relative paths taken from its folder;
    /// every error is bad input naming the file.
    pub fn load(path: &Path) -> Result<ExperimentConfig, BadInput> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{shown}: {e}")))?;
        let mut cfg = Self::from_toml(&text).map_err(|e| BadInput(format!("{shown}: {e}")))?;
        let base = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        let given = cfg.sft_models.as_mut();
        let given = given
            .into_iter()
            .flat_map(|g| [&mut g.prod, &mut g.nolemma]);
        for p in [&mut cfg.base_model, &mut cfg.dataset]
            .into_iter()
            .chain(given)
        {
            if p.is_relative() && !p.as_os_str().is_empty() {
                *p = base.join(&*p);
            }
        }
        Ok(cfg)
    }

    /// The defaults with the keys of a TOML text over them; the error names the bad key.
    pub fn from_toml(text: &str) -> Result<ExperimentConfig, String> {
        let user: toml::Value = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut merged =
            toml::Value::try_from(ExperimentConfig::default()).map_err(|e| e.to_string())?;
        merge(&mut merged, user);
        merged
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())
    }

    /// Every number in its range; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        use crate::ranges::*;
        positive_seconds("sft_minutes", self.sft_minutes * 60.0).map_err(|_| {
            format!(
                "sft_minutes = {}: must be a positive number of minutes",
                self.sft_minutes
            )
        })?;
        at_least_one("rounds", self.rounds)?;
        at_least_one("batch", self.batch)?;
        at_least_one("rl_depth", self.rl_depth)?;
        at_least_one("workers", self.workers)?;
        at_least_one("bootstrap", self.bootstrap)?;
        if self.samples < 8 {
            return Err(format!(
                "samples = {}: must be at least 8 (pass@8)",
                self.samples
            ));
        }
        if self.curve_theorems > 0 {
            at_least_one("curve_samples", self.curve_samples)?;
        }
        self.sampling
            .validate()
            .map_err(|e| format!("sampling.{e}"))?;
        self.coq.validate().map_err(|e| format!("coq.{e}"))?;
        self.rl_config(Path::new("."), Path::new("."), Method::ProdRl)
            .validate()
            .map_err(|e| format!("rl.{e}"))
    }

    /// How the tables' 95% intervals are drawn: `bootstrap` rounds from the stream of `seed`.
    pub fn intervals(&self) -> prod_core::pass_at_k::Bootstrap {
        prod_core::pass_at_k::Bootstrap {
            resamples: self.bootstrap,
            seed: self.seed,
        }
    }

    /// The ks of the table: 1, 4, 8 (and n when larger).
    pub fn ks(&self) -> Vec<usize> {
        let mut ks: Vec<usize> = KS
            .iter()
            .copied()
            .filter(|&k| k <= self.samples as usize)
            .collect();
        if self.samples as usize > 8 {
            ks.push(self.samples as usize);
        }
        ks
    }

    /// Does the experiment evaluate CoqHammer alone (stage `eval-hammer`)? On Coq with the
    /// hammer on, unless `hammer_baseline = false`.
    pub fn runs_hammer_stage(&self) -> bool {
        self.hammer_baseline && self.coq.hammer && self.prover.is_coq()
    }

    /// The RL stage's config: the `[rl]` settings with the experiment's shared ones.
    pub fn rl_config(&self, model: &Path, dataset: &Path, method: Method) -> RlConfig {
        let mut rl = self.rl.clone();
        rl.model = model.to_path_buf();
        rl.dataset = dataset.to_path_buf();
        rl.method = method;
        rl.rounds = self.rounds;
        rl.batch = self.batch;
        rl.depth = self.rl_depth;
        rl.sampling = self.sampling.clone();
        rl.sampling.seed = self.seed;
        rl.coq = CoqJobConfig {
            workers: self.workers,
            ..self.coq.clone()
        };
        rl.prover = self.prover;
        rl.isabelle = self.isabelle.clone();
        rl.seed = self.seed;
        rl.hammer_leaves = self.hammer_leaves;
        rl.eval = RlEvalConfig {
            theorems: self.curve_theorems,
            split: self.split.clone(),
            samples: self.curve_samples.max(1),
            depth: self.depth,
            ks: [1, 2, 4, 8]
                .into_iter()
                .filter(|&k| k <= self.curve_samples as usize)
                .collect(),
            every: 1,
            final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
            bootstrap: self.bootstrap,
        };
        rl
    }

    /// A rough wall-clock estimate on 2 cores for a split of `split_size` theorems (a 135M model
    /// samples ~100 tokens/s with `q8` and the `t0` pass, and takes ~13 s per training step of 8
    /// examples of ≤ 512 tokens; CoqHammer alone takes ~12.5 s per theorem: the demo's
    /// measurements in docs/results.md): printed at the start, not a promise.
    pub fn estimate_s(&self, split_size: usize, build_dataset: bool) -> f64 {
        const TOKENS_PER_S: f64 = 100.0;
        const STEP_S: f64 = 13.0;
        let tokens = self.sampling.sampling.max_new_tokens as f64 * 0.7;
        // Trees of depth 2: the root and ~0.3 lemma nodes per root.
        let sample_s = |samples: f64| samples * 1.3 * tokens / TOKENS_PER_S;
        let theorems = if self.theorems == 0 {
            split_size
        } else {
            self.theorems.min(split_size)
        } as f64;
        let eval = sample_s(theorems * self.samples as f64) + theorems * self.samples as f64 * 0.1;
        let curve = sample_s((self.curve_theorems * self.curve_samples as usize) as f64);
        // Algorithm 2: ~3 samples per goal; the update on the round's examples plus the replay
        // share, the value model trained beside the policy.
        let round = sample_s(self.batch as f64 * 3.0)
            + (self.batch as f64 * 3.0 * (1.0 + self.rl.replay_mix) / self.rl.macro_batch as f64)
                .ceil()
                * STEP_S
                * 2.0
            + 60.0
            + curve;
        let sft = if self.sft_models.is_some() {
            0.0
        } else if self.sft_steps > 0 {
            (self.sft_steps as f64 * STEP_S + 60.0).min(self.sft_minutes * 60.0)
        } else {
            self.sft_minutes * 60.0
        };
        // CoqHammer alone: the fixed list, then the provers (50 theorems in 10.4 min with 2
        // workers, docs/results.md §1).
        let hammer = if self.runs_hammer_stage() {
            theorems * 12.5 * 2.0 / self.workers.max(1) as f64
        } else {
            0.0
        };
        (if build_dataset { 120.0 } else { 0.0 })
            + 2.0 * sft
            + 2.0 * (curve + self.rounds as f64 * round)
            + 4.0 * eval
            + hammer
    }
}

/// One experiment: where it lives and how it is set up.
#[derive(Clone, Debug)]
pub struct ExperimentJob {
    pub out: PathBuf,
    pub config: ExperimentConfig,
}

/// An RL stage as finished: its rounds (round 0: the starting model's held-out pass@k) and
/// the last round's novel share of the replay buffer's lemmas.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RlStage {
    pub checkpoint: PathBuf,
    pub rounds: Vec<RoundMetrics>,
    pub novel_lemma_share: Option<f64>,
    pub report: PathBuf,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodResult {
    pub method: String,
    pub name: String,
    pub model: PathBuf,
    pub pass_at_k: Vec<PassAtK>,
    /// pass@k of this method minus ProD-SFT's (paired CI); empty for ProD-SFT.
    pub vs_prod_sft: Vec<PassAtKDifference>,
    /// This method against CoqHammer alone on the same theorems (when the baseline ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_hammer: Option<prod_report::Comparison>,
    /// Paper Fig. 5: theorems by (ground-truth depth, depth of the proving tree).
    pub depth_table: Vec<DepthCell>,
    /// RL stages: share of the replay buffer's lemmas that are novel after the last round.
    pub replay_novel_lemma_share: Option<f64>,
    /// Share of the lemmas proposed by globally correct nodes in the evaluation that are novel.
    pub eval_novel_lemma_share: Option<f64>,
    pub use_invoke_share_root: Option<f64>,
    /// RL stages: the held-out pass@k of each round (0: the starting model).
    pub rounds: Vec<RoundMetrics>,
    pub sft: Option<TrainSummary>,
    /// The evaluation's `report.html` (and the RL run's, for RL stages), relative to OUT.
    pub report: PathBuf,
    pub rl_report: Option<PathBuf>,
}

/// `OUT/experiment.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub config: ExperimentConfig,
    pub dataset: PathBuf,
    pub split: String,
    pub theorems: usize,
    pub samples: u32,
    pub depth: u32,
    pub methods: Vec<MethodResult>,
    /// CoqHammer alone on the same theorems (one deterministic attempt each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hammer: Option<HammerRow>,
    /// Seconds this invocation took (stages skipped on resume count 0).
    pub seconds: f64,
    /// Stages this invocation ran (the rest were finished before).
    pub ran: Vec<String>,
}

/// CoqHammer alone as a row of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HammerRow {
    /// Its pass@1 (95% CI); with one deterministic attempt, also its pass@k for every k.
    pub pass_at_k: Vec<PassAtK>,
    pub theorems: usize,
    pub proved: usize,
    pub hammer: Option<prod_report::HammerUse>,
    pub report: PathBuf,
}

/// What `run_experiment` returns.
#[derive(Clone, Debug)]
pub struct ExperimentOutcome {
    pub result: ExperimentResult,
    pub json: PathBuf,
    pub table: PathBuf,
}

impl ExperimentOutcome {
    /// `prod experiment --json`'s line: where the files are, and the table's figures.
    pub fn json_line(&self) -> serde_json::Value {
        let r = &self.result;
        let methods: Vec<serde_json::Value> = r
            .methods
            .iter()
            .map(|m| {
                serde_json::json!({
                    "method": m.method, "name": m.name, "pass_at_k": m.pass_at_k, "vs_prod_sft": m.vs_prod_sft, "vs_hammer": m.vs_hammer,
                    "replay_novel_lemma_share": m.replay_novel_lemma_share, "report": m.report,
                })
            })
            .collect();
        serde_json::json!({"experiment": self.json, "table": self.table, "theorems": r.theorems,
            "samples": r.samples, "methods": methods, "hammer": r.hammer, "ran": r.ran, "seconds": r.seconds})
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

/// One stage of the experiment: its directory (named after it in the log), finished when its
/// `done.json` exists.
struct Stage<'a> {
    dir: &'a Path,
    name: String,
}

impl<'a> Stage<'a> {
    fn at(dir: &'a Path) -> Self {
        let name = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Stage { dir, name }
    }

    fn is_done(&self) -> bool {
        self.dir.join("done.json").is_file()
    }

    /// When the stage finished before: logged as skipped, and what it left (`read`).
    fn finished<T>(
        &self,
        read: impl FnOnce(&Path) -> anyhow::Result<T>,
    ) -> anyhow::Result<Option<T>> {
        if !self.is_done() {
            return Ok(None);
        }
        say(&format!("[{}] finished before, skipped", self.name));
        read(self.dir).map(Some)
    }

    /// Marks the stage finished (`done.json` holds `value`) and adds it to what this run ran.
    fn done<T: Serialize>(self, value: &T, ran: &mut Vec<String>) -> anyhow::Result<()> {
        write_atomic(
            &self.dir.join("done.json"),
            &(serde_json::to_string_pretty(value)? + "\n"),
        )?;
        ran.push(self.name);
        Ok(())
    }
}

/// The evaluation of the `run.json` in an evaluation stage's directory.
fn stage_evaluation(dir: &Path, report: RunReport) -> anyhow::Result<Evaluation> {
    report
        .evaluations
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}: no evaluation in run.json", dir.display()))
}

/// What an evaluation stage that finished before left: its `run.json`'s evaluation.
fn evaluation_in(dir: &Path) -> anyhow::Result<Evaluation> {
    stage_evaluation(dir, read_json(&dir.join("run.json"))?)
}

fn say(msg: &str) {
    eprintln!("experiment: {msg}");
}

/// Whether `dir` holds a dataset (a built one has `stats.json`; a hand-made one at least the
/// split files).
fn has_dataset(dir: &Path, split: &str) -> bool {
    dir.join("stats.json").is_file() || dir.join(format!("{split}.jsonl")).is_file()
}

/// Run (or resume) the whole experiment.
pub fn run_experiment(job: &ExperimentJob, bars: &Bars) -> anyhow::Result<ExperimentOutcome> {
    let start = Instant::now();
    let cfg = &job.config;
    cfg.validate().map_err(BadInput)?;
    check_models(cfg)?;
    let out = &job.out;
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let data = if cfg.dataset.as_os_str().is_empty() {
        out.join("data")
    } else {
        cfg.dataset.clone()
    };
    let build = !has_dataset(&data, &cfg.split);
    if build && !cfg.prover.is_coq() {
        return Err(BadInput(format!(
            "prover = \"isabelle\": no dataset at {} (split {}); build one with `prod dataset \
             build --prover isabelle` and set `dataset`",
            data.display(),
            cfg.split
        ))
        .into());
    }
    announce(cfg, &data, build, out);
    let mut ran = Vec::new();
    // 1. Dataset.
    if build {
        say(&format!(
            "[dataset] building the stdlib dataset → {}",
            data.display()
        ));
        build_stdlib_dataset(&data, cfg.seed, bars)?;
        ran.push("dataset".to_string());
    }
    let stages = run_stages(out, cfg, &data, &mut ran, bars)?;
    // 5. The table.
    let result = ExperimentResult {
        config: cfg.clone(),
        dataset: data.clone(),
        split: cfg.split.clone(),
        theorems: stages.e_sft.theorems,
        samples: cfg.samples,
        depth: cfg.depth,
        methods: method_results(out, cfg, &stages),
        hammer: stages.e_hammer.as_ref().map(|e| HammerRow {
            pass_at_k: e.pass_at_k.clone(),
            theorems: e.theorems,
            proved: e
                .theorems_detail
                .iter()
                .filter(|t| t.proved_trees > 0)
                .count(),
            hammer: e.hammer,
            report: PathBuf::from("eval-hammer/report.html"),
        }),
        seconds: start.elapsed().as_secs_f64(),
        ran,
    };
    let json = out.join("experiment.json");
    write_atomic(&json, &(serde_json::to_string_pretty(&result)? + "\n"))?;
    let table = out.join("table.md");
    write_atomic(&table, &render_table(&result))?;
    say(&format!(
        "done in {:.0} s: {} and {}",
        result.seconds,
        table.display(),
        json.display()
    ));
    Ok(ExperimentOutcome {
        result,
        json,
        table,
    })
}

/// The models the experiment starts from exist: the base model, or both given SFT models.
fn check_models(cfg: &ExperimentConfig) -> Result<(), BadInput> {
    let missing = |p: &Path| !p.join("config.json").is_file();
    match &cfg.sft_models {
        Some(g) => match [&g.prod, &g.nolemma].into_iter().find(|p| missing(p)) {
            Some(p) => Err(BadInput(format!(
                "sft_models: no model at {} (a directory with config.json)",
                p.display()
            ))),
            None => Ok(()),
        },
        None if missing(&cfg.base_model) => Err(BadInput(format!(
            "no pretrained model at {}: run scripts/fetch-model.sh (imports SmolLM2-135M), or pass --base-model DIR",
            cfg.base_model.display()
        ))),
        None => Ok(()),
    }
}

/// The plan and its rough duration, said before anything runs.
fn announce(cfg: &ExperimentConfig, data: &Path, build: bool, out: &Path) {
    let split_size = if build {
        328
    } else {
        prod_library::dataset::read_examples(&data.join(format!("{}.jsonl", cfg.split)))
            .map(|v| v.len())
            .unwrap_or(0)
    };
    say(&format!(
        "4 methods (and CoqHammer alone) × {} theorems × {} trees; {}, {} RL rounds of {} theorems; estimate ≈ {:.0} min on 2 cores (rough) → {}",
        if cfg.theorems == 0 { "all".to_string() } else { cfg.theorems.to_string() },
        cfg.samples,
        if cfg.sft_models.is_some() { "SFT models given".to_string() } else if cfg.sft_steps > 0 { format!("SFT {} steps (≤ {} min) each", cfg.sft_steps, cfg.sft_minutes) } else { format!("SFT {} min each", cfg.sft_minutes) },
        cfg.rounds,
        cfg.batch,
        cfg.estimate_s(split_size, build) / 60.0,
        out.display()
    ));
}

/// What the stages produced: the two SFT models (with their training summaries when the
/// experiment trained them), the two RL runs and the four evaluations.
struct Stages {
    sft_model: PathBuf,
    sft_nolemma_model: PathBuf,
    sft: Option<TrainSummary>,
    sft_nolemma: Option<TrainSummary>,
    rl: RlStage,
    rl_nolemma: RlStage,
    e_sft: Evaluation,
    e_sft_nolemma: Evaluation,
    e_rl: Evaluation,
    e_rl_nolemma: Evaluation,
    /// CoqHammer alone, when `hammer_baseline` is on.
    e_hammer: Option<Evaluation>,
}

/// The SFT stages, their evaluations (first: a kill later still leaves their rows), the RL
/// stages from each SFT model, then their evaluations.
fn run_stages(
    out: &Path,
    cfg: &ExperimentConfig,
    data: &Path,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<Stages> {
    // 2. The two SFT models.
    let [(sft_model, sft), (sft_nolemma_model, sft_nolemma)] =
        sft_stages(out, cfg, data, ran, bars)?;
    // 3. Evaluations of the SFT models.
    let eval_of = |key: &str, model: &Path, ran: &mut Vec<String>| {
        eval_stage(out, key, model, cfg, data, ran, bars)
    };
    let e_sft = eval_of("prod_sft", &sft_model, ran)?;
    let e_hammer = if cfg.runs_hammer_stage() {
        Some(hammer_stage(out, cfg, data, ran, bars)?)
    } else {
        None
    };
    let e_sft_nolemma = eval_of("sft_nolemma", &sft_nolemma_model, ran)?;
    // 4. RL from each SFT model, then their evaluations.
    let rl = rl_stage(
        &out.join("rl"),
        &cfg.rl_config(&sft_model, data, Method::ProdRl),
        ran,
        bars,
    )?;
    let rl_nolemma = rl_stage(
        &out.join("rl_nolemma"),
        &cfg.rl_config(&sft_nolemma_model, data, Method::NoLemmaProposal),
        ran,
        bars,
    )?;
    let e_rl = eval_of("prod_rl", &rl.checkpoint, ran)?;
    let e_rl_nolemma = eval_of("rl_nolemma", &rl_nolemma.checkpoint, ran)?;
    Ok(Stages {
        sft_model,
        sft_nolemma_model,
        sft,
        sft_nolemma,
        rl,
        rl_nolemma,
        e_sft,
        e_sft_nolemma,
        e_rl,
        e_rl_nolemma,
        e_hammer,
    })
}

/// The table's rows, in the order of [`METHODS`]: each method against ProD-SFT.
fn method_results(out: &Path, cfg: &ExperimentConfig, st: &Stages) -> Vec<MethodResult> {
    let rel = |p: &Path| {
        p.strip_prefix(out)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let rows = [
        ("prod_sft", &st.e_sft, st.sft.as_ref(), None, &st.sft_model),
        (
            "sft_nolemma",
            &st.e_sft_nolemma,
            st.sft_nolemma.as_ref(),
            None,
            &st.sft_nolemma_model,
        ),
        ("prod_rl", &st.e_rl, None, Some(&st.rl), &st.rl.checkpoint),
        (
            "rl_nolemma",
            &st.e_rl_nolemma,
            None,
            Some(&st.rl_nolemma),
            &st.rl_nolemma.checkpoint,
        ),
    ];
    rows.iter()
        .map(|(key, e, sft, rl, model)| MethodResult {
            method: key.to_string(),
            name: display_name(key).to_string(),
            model: rel(model),
            pass_at_k: e.pass_at_k.clone(),
            vs_prod_sft: if *key == "prod_sft" {
                vec![]
            } else {
                cfg.ks()
                    .into_iter()
                    .filter_map(|k| {
                        prod_report::pass_at_k_difference(&st.e_sft, e, k, cfg.intervals())
                    })
                    .collect()
            },
            vs_hammer: st
                .e_hammer
                .as_ref()
                .map(|h| crate::baseline::compare(e, h, &cfg.ks(), cfg.intervals())),
            depth_table: e.depth_table.clone(),
            replay_novel_lemma_share: rl.and_then(|r| r.novel_lemma_share),
            eval_novel_lemma_share: e.novel_lemma_share,
            use_invoke_share_root: e.use_invoke_share_root,
            rounds: rl.map(|r| r.rounds.clone()).unwrap_or_default(),
            sft: sft.cloned(),
            report: PathBuf::from(format!("eval-{key}/report.html")),
            rl_report: rl.map(|r| rel(&r.report)),
        })
        .collect()
}

fn display_name(key: &str) -> &'static str {
    if key == "hammer" {
        return crate::baseline::HAMMER_BASELINE;
    }
    METHODS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("?", |(_, n)| n)
}

/// The ProD-SFT and SFT w/o lemma proposal models, each with its training summary: the two
/// SFT stages, or the given models (`sft_models`) with none.
fn sft_stages(
    out: &Path,
    cfg: &ExperimentConfig,
    data: &Path,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<[(PathBuf, Option<TrainSummary>); 2]> {
    if let Some(g) = &cfg.sft_models {
        say(&format!(
            "[sft] given: ProD-SFT {}, SFT w/o lemma proposal {}",
            g.prod.display(),
            g.nolemma.display()
        ));
        return Ok([(g.prod.clone(), None), (g.nolemma.clone(), None)]);
    }
    let sft_opts = |which: SftData| SftOptions {
        budget: Duration::from_secs_f64(cfg.sft_minutes * 60.0),
        max_steps: (cfg.sft_steps > 0).then_some(cfg.sft_steps),
        data: which,
    };
    let (sft_dir, sft_nolemma_dir) = (out.join("sft"), out.join("sft_nolemma"));
    let sft = sft_stage(&sft_dir, cfg, data, &sft_opts(SftData::Sft), ran, bars)?;
    let sft_nolemma = sft_stage(
        &sft_nolemma_dir,
        cfg,
        data,
        &sft_opts(cfg.nolemma_data),
        ran,
        bars,
    )?;
    Ok([
        (sft_dir.join("model"), Some(sft)),
        (sft_nolemma_dir.join("model"), Some(sft_nolemma)),
    ])
}

/// An SFT stage: `DIR/model` from the base model; an unfinished one restarts cleanly.
fn sft_stage(
    dir: &Path,
    cfg: &ExperimentConfig,
    data: &Path,
    opts: &SftOptions,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<TrainSummary> {
    let stage = Stage::at(dir);
    if let Some(summary) = stage.finished(|d| read_json(&d.join("done.json")))? {
        return Ok(summary);
    }
    let name = &stage.name;
    if dir.exists() {
        say(&format!("[{name}] unfinished: restarting it"));
        std::fs::remove_dir_all(dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    say(&format!(
        "[{name}] fine-tuning {} on {:?} data → {}",
        cfg.base_model.display(),
        opts.data,
        dir.join("model").display()
    ));
    let summary = fine_tune_pretrained(
        &cfg.base_model,
        data,
        &dir.join("model"),
        opts,
        cfg.seed,
        bars,
    )?;
    say(&format!(
        "[{name}] {} steps on {} examples in {:.0} s; val loss {:.3} → {:.3}",
        summary.steps,
        summary.train_examples,
        summary.seconds,
        summary.eval_loss_before,
        summary.eval_loss_after
    ));
    stage.done(&summary, ran)?;
    Ok(summary)
}

/// An RL stage (resumes through its run store).
fn rl_stage(
    dir: &Path,
    rl: &RlConfig,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<RlStage> {
    let at = Stage::at(dir);
    if let Some(stage) = at.finished(|d| read_json(&d.join("done.json")))? {
        return Ok(stage);
    }
    say(&format!(
        "[{}] {} rounds of {:?} from {} → {}",
        at.name,
        rl.rounds,
        rl.method,
        rl.model.display(),
        dir.display()
    ));
    let (report, records) = run_rl_job(rl, dir, bars)?;
    write_pages(dir, &report)?;
    let stage = RlStage {
        checkpoint: crate::rl::round_checkpoint(dir, rl.rounds),
        rounds: report.rounds.clone(),
        novel_lemma_share: records.last().and_then(|r| r.metrics.novel_lemma_share),
        report: dir.join("report.html"),
    };
    if !stage.checkpoint.join("config.json").is_file() {
        anyhow::bail!(
            "{}: the last round's checkpoint is missing",
            stage.checkpoint.display()
        );
    }
    at.done(&stage, ran)?;
    Ok(stage)
}

/// The evaluation of one method's model in `OUT/eval-<key>` (resumes through its run store).
fn eval_stage(
    out: &Path,
    key: &str,
    model: &Path,
    cfg: &ExperimentConfig,
    data: &Path,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<Evaluation> {
    let dir = out.join(format!("eval-{key}"));
    let stage = Stage::at(&dir);
    if let Some(e) = stage.finished(evaluation_in)? {
        return Ok(e);
    }
    say(&format!(
        "[eval-{key}] {} on {} → {}",
        display_name(key),
        cfg.split,
        dir.display()
    ));
    let job = eval_job(cfg, key, model, data, &dir);
    let (mut report, _) = run_eval_job(&job, bars)?;
    report.title = format!("ProD experiment: {}", display_name(key));
    write_report(&dir, &report)?;
    write_pages(&dir, &report)?;
    let e = stage_evaluation(&dir, report)?;
    say(&format!("[eval-{key}] {}", fmt_pass(&e.pass_at_k)));
    stage.done(&serde_json::json!({"run_json": "run.json"}), ran)?;
    Ok(e)
}

/// CoqHammer alone on the evaluations' theorems, with their checker, in `OUT/eval-hammer`
/// (resumes through its run store; its checks are cached across runs).
fn hammer_stage(
    out: &Path,
    cfg: &ExperimentConfig,
    data: &Path,
    ran: &mut Vec<String>,
    bars: &Bars,
) -> anyhow::Result<Evaluation> {
    let dir = out.join("eval-hammer");
    let stage = Stage::at(&dir);
    if let Some(e) = stage.finished(evaluation_in)? {
        return Ok(e);
    }
    say(&format!(
        "[eval-hammer] {} on {} → {}",
        crate::baseline::HAMMER_BASELINE,
        cfg.split,
        dir.display()
    ));
    let mut job = eval_job(cfg, "hammer", Path::new(""), data, &dir);
    job.hammer_baseline.enabled = true;
    let report = crate::job::run_hammer_baseline_job(&job, bars)?;
    write_pages(&dir, &report)?;
    let e = stage_evaluation(&dir, report)?;
    say(&format!("[eval-hammer] {}", fmt_pass(&e.pass_at_k)));
    stage.done(&serde_json::json!({"run_json": "run.json"}), ran)?;
    Ok(e)
}

/// The evaluation job of one method (the same theorems, sampling and checker for all).
fn eval_job(cfg: &ExperimentConfig, key: &str, model: &Path, data: &Path, dir: &Path) -> EvalJob {
    EvalJob {
        model: model.to_path_buf(),
        dataset: data.to_path_buf(),
        theorems: (cfg.theorems > 0).then_some(cfg.theorems),
        options: EvalOptions {
            name: display_name(key).to_string(),
            split: cfg.split.clone(),
            ks: cfg.ks(),
            samples: cfg.samples,
            depth: cfg.depth,
            final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
            bootstrap: cfg.bootstrap,
            seed: cfg.seed,
            temperature: cfg.sampling.sampling.temperature,
            hammer_leaves: cfg.hammer_leaves,
        },
        sampling: NativeParams {
            seed: cfg.seed,
            ..cfg.sampling.clone()
        },
        coq: CoqJobConfig {
            workers: cfg.workers,
            ..cfg.coq.clone()
        },
        prover: cfg.prover,
        isabelle: cfg.isabelle.clone(),
        out: dir.to_path_buf(),
        cache: None,
        remote: None,
        postgres: None,
        trees: None,
        // The experiment evaluates the baseline once, as its own stage.
        hammer_baseline: crate::job::HammerBaseline {
            enabled: false,
            cache: cfg.hammer_cache.clone(),
        },
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

fn fmt_pass(ps: &[PassAtK]) -> String {
    ps.iter()
        .map(|p| {
            format!(
                "pass@{} {}% [{}, {}]",
                p.k,
                pct(p.estimate),
                pct(p.ci_low),
                pct(p.ci_high)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `OUT/table.md`: Table 2 in miniature, the Fig. 5 depth tables, the novel-lemma shares, the
/// RL runs' per-round curves and links to every report.
pub fn render_table(r: &ExperimentResult) -> String {
    let mut s = String::new();
    main_table(&mut s, r);
    hammer_table(&mut s, r);
    depth_tables(&mut s, r);
    round_curves(&mut s, r);
    round_reinforced(&mut s, r);
    sft_table(&mut s, r);
    s
}

/// Table 2: pass@k per method with CIs, the difference to ProD-SFT, the replay's novel lemmas.
fn main_table(s: &mut String, r: &ExperimentResult) {
    let ks: Vec<usize> = r.config.ks();
    main_table_head(s, r, &ks);
    for m in &r.methods {
        method_row(s, m, &ks);
    }
    if let Some(h) = &r.hammer {
        hammer_row(s, r, h, &ks);
    }
    s.push_str("\nNovel lemmas (replay): share of the lemmas in the RL run's replay buffer after its last round whose statement is in no split of the dataset (paper: 37.7%).\n");
}

/// Table 2's caption and column heads: pass@k, then Δ pass@k vs ProD-SFT, for each k.
fn main_table_head(s: &mut String, r: &ExperimentResult, ks: &[usize]) {
    s.push_str(&format!(
        "## Table 2 in miniature\n\n{} held-out theorems of split `{}`, {} proof trees each (depth ≤ {}), temperature {}; \
         pass@k in % with 95% CIs (bootstrap ∪ Wilson); Δ = the method's pass@k minus ProD-SFT's on the same theorems, with a paired \
         95% CI (the paired bootstrap, theorems resampled jointly, ∪ Newcombe's score interval).\n\n",
        r.theorems, r.split, r.samples, r.depth, r.config.sampling.sampling.temperature
    ));
    s.push_str("| method |");
    for k in ks {
        s.push_str(&format!(" pass@{k} |"));
    }
    for k in ks {
        s.push_str(&format!(" Δ pass@{k} vs ProD-SFT |"));
    }
    s.push_str(" novel lemmas (replay) | report |\n|---|");
    s.push_str(&"---|".repeat(2 * ks.len() + 2));
    s.push('\n');
}

/// A pass@k cell of the table: `estimate [low, high]` in percent, `–` when not measured.
fn pass_cell(p: Option<&PassAtK>) -> String {
    match p {
        Some(p) => format!(
            " {} [{}, {}] |",
            pct(p.estimate),
            pct(p.ci_low),
            pct(p.ci_high)
        ),
        None => " – |".into(),
    }
}

/// A method's row: pass@k, Δ vs ProD-SFT, the novel-lemma share, links to its reports.
fn method_row(s: &mut String, m: &MethodResult, ks: &[usize]) {
    s.push_str(&format!("| {} |", m.name));
    for k in ks {
        s.push_str(&pass_cell(m.pass_at_k.iter().find(|p| p.k == *k)));
    }
    for k in ks {
        match m.vs_prod_sft.iter().find(|d| d.k == *k) {
            Some(d) => s.push_str(&format!(
                " {:+.1} [{:+.1}, {:+.1}] |",
                100.0 * d.estimate,
                100.0 * d.ci_low,
                100.0 * d.ci_high
            )),
            None if m.method == "prod_sft" => s.push_str(" (baseline) |"),
            None => s.push_str(" – |"),
        }
    }
    s.push_str(&match m.replay_novel_lemma_share {
        Some(x) => format!(" {}% |", pct(x)),
        None => " – |".into(),
    });
    let mut links = format!(" [eval]({})", m.report.display());
    if let Some(rl) = &m.rl_report {
        links.push_str(&format!(", [RL run]({})", rl.display()));
    }
    s.push_str(&links);
    s.push_str(" |\n");
}

/// The hammer baseline's row: one deterministic attempt per theorem, so its pass@k is its
/// pass@1 for every k; Δ is the hammer minus ProD-SFT.
fn hammer_row(s: &mut String, r: &ExperimentResult, h: &HammerRow, ks: &[usize]) {
    s.push_str(&format!(
        "| {} (one attempt) |",
        crate::baseline::HAMMER_BASELINE
    ));
    let p1 = h.pass_at_k.iter().find(|p| p.k == 1);
    for _ in ks {
        s.push_str(&pass_cell(p1));
    }
    let vs_sft = r
        .methods
        .iter()
        .find(|m| m.method == "prod_sft")
        .and_then(|m| m.vs_hammer.as_ref());
    for k in ks {
        // The hammer minus ProD-SFT: the negated ProD-SFT − hammer difference.
        match vs_sft
            .and_then(|c| c.rows.iter().find(|row| row.k == *k))
            .and_then(|row| row.difference.as_ref())
        {
            Some(d) => s.push_str(&format!(
                " {:+.1} [{:+.1}, {:+.1}] |",
                -100.0 * d.estimate,
                -100.0 * d.ci_high,
                -100.0 * d.ci_low
            )),
            None => s.push_str(" – |"),
        }
    }
    s.push_str(&format!(" – | [eval]({}) |\n", h.report.display()));
}

/// Every method against CoqHammer alone: the paired difference per k and who proved what.
fn hammer_table(s: &mut String, r: &ExperimentResult) {
    let Some(h) = &r.hammer else { return };
    let ks = r.config.ks();
    s.push_str(&format!(
        "\n### Against {b}\n\n{b}: one `hammer.` per theorem (the fixed tactic list, then the provers), checked and re-checked \
         cold by the same checker; {p} of {n} theorems proved. A deterministic attempt: its pass@k is its pass@1. Δ = the \
         method's pass@k minus {b}'s, paired 95% CI (bootstrap ∪ Newcombe).\n\n| method |",
        b = crate::baseline::HAMMER_BASELINE,
        p = h.proved,
        n = h.theorems
    ));
    for k in &ks {
        s.push_str(&format!(" Δ pass@{k} |"));
    }
    s.push_str(" proved by both | method only | hammer only | neither |\n|---|");
    s.push_str(&"---|".repeat(ks.len() + 4));
    s.push('\n');
    for m in &r.methods {
        let Some(c) = &m.vs_hammer else { continue };
        s.push_str(&format!("| {} |", m.name));
        for k in &ks {
            match c
                .rows
                .iter()
                .find(|row| row.k == *k)
                .and_then(|row| row.difference.as_ref())
            {
                Some(d) => s.push_str(&format!(
                    " {:+.1} [{:+.1}, {:+.1}] |",
                    100.0 * d.estimate,
                    100.0 * d.ci_low,
                    100.0 * d.ci_high
                )),
                None => s.push_str(" – |"),
            }
        }
        s.push_str(&format!(
            " {} | {} | {} | {} |\n",
            c.both, c.method_only, c.baseline_only, c.neither
        ));
    }
    if let Some(u) = &h.hammer {
        s.push_str(&format!(
            "\n{}'s `hammer.` steps: {}.\n",
            crate::baseline::HAMMER_BASELINE,
            prod_report::tables::hammer_line(u)
        ));
    }
}

/// Fig. 5 per method: theorems by ground-truth depth, proved, and by proving tree height.
fn depth_tables(s: &mut String, r: &ExperimentResult) {
    s.push_str("\n### Proved theorems by ground-truth depth (paper Fig. 5)\n\nPer method and ground-truth proof depth: theorems, proved, and the proved ones by the height of the proving tree.\n\n");
    s.push_str("| method | ground-truth depth | theorems | proved | by tree height |\n|---|---|---|---|---|\n");
    for m in &r.methods {
        let mut depths: Vec<Option<u32>> =
            m.depth_table.iter().map(|c| c.ground_truth_depth).collect();
        depths.sort();
        depths.dedup();
        for g in depths {
            let cells: Vec<&DepthCell> = m
                .depth_table
                .iter()
                .filter(|c| c.ground_truth_depth == g)
                .collect();
            let total: usize = cells.iter().map(|c| c.count).sum();
            let proved: Vec<&&DepthCell> =
                cells.iter().filter(|c| c.proving_depth.is_some()).collect();
            let n_proved: usize = proved.iter().map(|c| c.count).sum();
            let by: Vec<String> = proved
                .iter()
                .map(|c| format!("h{}: {}", c.proving_depth.unwrap_or(0), c.count))
                .collect();
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                m.name,
                g.map_or("?".into(), |d| d.to_string()),
                total,
                n_proved,
                if by.is_empty() {
                    "–".into()
                } else {
                    by.join(", ")
                }
            ));
        }
    }
}

/// The RL runs' held-out pass@k per round.
fn round_curves(s: &mut String, r: &ExperimentResult) {
    s.push_str("\n### RL: held-out pass@k per round\n\nRound 0 is the starting SFT model; each round's checkpoint on the same first theorems of the split with the same seeds.\n\n");
    s.push_str("| method | round | theorems | pass@k (%, 95% CI) | novel lemmas (replay) |\n|---|---|---|---|---|\n");
    for m in r.methods.iter().filter(|m| !m.rounds.is_empty()) {
        for round in &m.rounds {
            let Some(e) = &round.eval else { continue };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                m.name,
                round.round,
                round.eval_theorems,
                fmt_pass(e),
                round
                    .novel_lemma_share
                    .map_or("–".into(), |x| format!("{}%", pct(x)))
            ));
        }
    }
}

/// What each RL round trained on, by origin, and how often the held-out roots proposed lemmas:
/// where a shift in the policy's first token comes from.
fn round_reinforced(s: &mut String, r: &ExperimentResult) {
    let rl = || r.methods.iter().filter(|m| !m.rounds.is_empty());
    if rl().flat_map(|m| &m.rounds).all(|x| x.reinforced.is_none()) {
        return;
    }
    s.push_str("\n### RL: what each round reinforced\n\nTraining examples by origin: with weight > 0 / all, and their summed weight Σw; the share of that weight on targets that begin with `<use_invoke>`; and the share of the round's held-out root samples that do (round 0: the starting model).\n\n| method | round |");
    for h in prod_report::tables::REINFORCED_HEADER {
        s.push_str(&format!(
            " {} |",
            h.replace("<use_invoke>", "`<use_invoke>`")
        ));
    }
    s.push('\n');
    s.push_str(&"|---".repeat(2 + prod_report::tables::REINFORCED_HEADER.len()));
    s.push_str("|\n");
    for m in rl() {
        for round in &m.rounds {
            let cells = prod_report::tables::reinforced_cells(round);
            s.push_str(&format!(
                "| {} | {} | {} |\n",
                m.name,
                round.round,
                cells.join(" | ")
            ));
        }
    }
}

/// The SFT stages: steps, examples, validation loss, seconds.
fn sft_table(s: &mut String, r: &ExperimentResult) {
    if let Some(g) = &r.config.sft_models {
        s.push_str(&format!(
            "\n### SFT\n\nGiven, not trained by this experiment: ProD-SFT `{}`, SFT w/o lemma proposal `{}`.\n",
            g.prod.display(),
            g.nolemma.display()
        ));
        return;
    }
    s.push_str("\n### SFT\n\n| model | steps | examples | val loss before → after | seconds |\n|---|---|---|---|---|\n");
    for m in &r.methods {
        if let Some(t) = &m.sft {
            s.push_str(&format!(
                "| {} | {} | {} | {:.3} → {:.3} | {:.0} |\n",
                m.name, t.steps, t.train_examples, t.eval_loss_before, t.eval_loss_after, t.seconds
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_takes_the_experiments_prover() {
        let c = ExperimentConfig::from_toml(
            "prover = \"isabelle\"\n[isabelle]\nserver = \"127.0.0.1:4711\"\n",
        )
        .unwrap();
        assert!(!c.runs_hammer_stage(), "CoqHammer is Coq's");
        let rl = c.rl_config(Path::new("m"), Path::new("d"), Method::ProdRl);
        assert_eq!(rl.prover, ProverKind::Isabelle);
        assert_eq!(rl.isabelle.as_ref().unwrap().server, "127.0.0.1:4711");
        let e = eval_job(
            &c,
            "prod_sft",
            Path::new("m"),
            Path::new("d"),
            Path::new("o"),
        );
        assert_eq!(e.prover, ProverKind::Isabelle);
        assert!(e.isabelle.is_some());
        // Coq by default, written as before (a resumed experiment's identity is unchanged).
        let coq = ExperimentConfig::from_toml("").unwrap();
        assert!(coq.prover.is_coq() && coq.runs_hammer_stage());
        let json = serde_json::to_string(&coq).unwrap();
        assert!(
            !json.contains("prover") && !json.contains("isabelle"),
            "{json}"
        );
    }

    #[test]
    fn config_keys_override_the_experiments_defaults_and_unknown_keys_are_refused() {
        let c = ExperimentConfig::from_toml(
            "rounds = 3\n[rl]\nlearning_rate = 1e-4\n[sampling]\nmax_new_tokens = 64\n",
        )
        .unwrap();
        assert_eq!(
            (
                c.rounds,
                c.rl.learning_rate,
                c.sampling.sampling.max_new_tokens
            ),
            (3, 1e-4, 64)
        );
        // Keys not given keep the experiment's defaults, not `prod rl`'s paper-sized ones.
        let d = ExperimentConfig::default();
        assert_eq!(
            (
                c.rl.macro_batch,
                c.rl.max_seq_len,
                c.sampling.sampling.temperature
            ),
            (d.rl.macro_batch, d.rl.max_seq_len, 0.7)
        );
        assert_eq!(c.nolemma_data, SftData::WithLemmas);
        assert_eq!(
            ExperimentConfig::from_toml("nolemma_data = \"no_invoke\"")
                .unwrap()
                .nolemma_data,
            SftData::NoInvoke
        );
        let g = ExperimentConfig::from_toml("[sft_models]\nprod = \"a\"\nnolemma = \"b\"\n")
            .unwrap()
            .sft_models
            .unwrap();
        assert_eq!((g.prod, g.nolemma), ("a".into(), "b".into()));
        let e = ExperimentConfig::from_toml("[sft_models]\nprod = \"a\"").unwrap_err();
        assert!(e.contains("nolemma"), "{e}");
        // Given models take the SFT stages out of the estimate.
        let given = ExperimentConfig {
            sft_models: Some(GivenSftModels {
                prod: "a".into(),
                nolemma: "b".into(),
            }),
            ..d.clone()
        };
        assert!(given.estimate_s(328, false) < d.estimate_s(328, false) - 2000.0);
        let e = ExperimentConfig::from_toml("roundz = 3").unwrap_err();
        assert!(e.contains("roundz"), "{e}");
        let e = ExperimentConfig::from_toml("[rl]\nmacro_btch = 3").unwrap_err();
        assert!(e.contains("macro_btch"), "{e}");
        let mut c = d.clone();
        c.samples = 4;
        assert!(c.validate().unwrap_err().contains("samples"));
        c.samples = 16;
        assert_eq!(c.ks(), vec![1, 4, 8, 16]);
        // The default sizing fits the 2.5 h budget on the stdlib test split.
        let est = d.estimate_s(328, true);
        assert!(est < 2.5 * 3600.0, "{est}");
    }
}

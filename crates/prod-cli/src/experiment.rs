//! `prod experiment`: the paper's Table 2 in miniature, one resumable command
//! (`prod_run::experiment`).

use std::path::PathBuf;

use clap::Args;
use prod_run::{Bars, ExperimentConfig, ExperimentJob};

use crate::ranges;

/// Table 2 in miniature: ProD-SFT, SFT w/o lemma proposal, ProD-RL, RL w/o lemma proposal.
///
/// The four from one pretrained base on one dataset, each evaluated on the same held-out
/// theorems with the real Coq (n trees per theorem, depth 2, temperature 0.7): pass@1/4/8 with
/// 95% CIs, CoqHammer alone on the same theorems with the same checker (stage eval-hammer), the
/// difference to ProD-SFT and to CoqHammer alone with a paired 95% CI, the Fig. 5 depth table,
/// the novel share of the RL runs' replay-buffer lemmas and their per-round held-out pass@k.
///
/// Writes OUT/experiment.json and OUT/table.md (with links to each stage's report.html). Each
/// stage has its own directory (sft/, sft_nolemma/, rl/, rl_nolemma/, eval-<method>/) and a
/// done.json written last: a rerun with the same --out skips finished stages, restarts an
/// unfinished SFT and resumes RL and evaluations from their run stores. The defaults fit about
/// 2.5 h on 2 cores (an estimate is printed at the start). Settings: --config FILE (TOML, keys of
/// prod_run::ExperimentConfig, with [rl], [sampling] and [coq] tables; `prover = "isabelle"` with
/// an [isabelle] table and a built Isabelle `dataset` runs every stage on Isabelle, without the
/// CoqHammer stage); flags override it.
///
/// Examples:
///   prod experiment --out runs/table2
///   prod experiment --out runs/table2 --sft-minutes 10 --rounds 1 --theorems 20
///   prod experiment --config table2.toml --out runs/table2 --json
///   prod experiment --sft-model models/sft --sft-nolemma-model models/sft-wl --out runs/table2
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct ExperimentArgs {
    /// Output directory (created; an existing one is resumed).
    #[arg(long, default_value = "runs/experiment")]
    pub out: PathBuf,
    /// TOML settings (prod_run::ExperimentConfig); relative paths are relative to the file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The pretrained model both SFT stages start from. Default: $PROD_CACHE/models/smollm2-135m
    /// (PROD_CACHE defaults to ~/.cache/prod), where scripts/fetch-model.sh puts SmolLM2-135M.
    #[arg(long)]
    pub base_model: Option<PathBuf>,
    /// A finished ProD-SFT model (trained on sft.jsonl elsewhere, e.g. longer or on a GPU): the
    /// two SFT stages are skipped. Needs --sft-nolemma-model, trained with the same budget.
    #[arg(long, requires = "sft_nolemma_model")]
    pub sft_model: Option<PathBuf>,
    /// The finished SFT w/o lemma proposal model (trained on train_wl.jsonl) to go with
    /// --sft-model.
    #[arg(long, requires = "sft_model")]
    pub sft_nolemma_model: Option<PathBuf>,
    /// Dataset directory; the Coq stdlib dataset is built into it when absent. Default: OUT/data.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Wall-clock budget of each SFT stage, minutes (default 20).
    #[arg(long, value_parser = ranges::positive_minutes)]
    pub sft_minutes: Option<f64>,
    /// Optimizer steps of each SFT stage (still bounded by --sft-minutes).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub sft_steps: Option<usize>,
    /// RL rounds per RL stage (default 2).
    #[arg(long, value_parser = ranges::positive_u32)]
    pub rounds: Option<u32>,
    /// RL theorems per round (default 16).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub batch: Option<usize>,
    /// Proof trees per theorem in the evaluations (at least 8; default 8).
    #[arg(long, value_parser = ranges::positive_u32)]
    pub samples: Option<u32>,
    /// Held-out theorems per evaluation, a seeded draw (default 40; 0: the whole split).
    #[arg(long)]
    pub theorems: Option<usize>,
    /// Coq workers (default 2).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Seed of every stage (split draw, training, sampling, bootstrap); default from the config.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Leave out CoqHammer alone (the eval-hammer stage and the comparisons with it).
    #[arg(long)]
    pub no_hammer_baseline: bool,
    /// Off over the config's `hammer_leaves`.
    #[command(flatten)]
    pub hammer_leaves: crate::eval::HammerLeavesArg,
    /// Print experiment.json's table as one JSON line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ExperimentArgs) -> i32 {
    let mut cfg = match &a.config {
        Some(p) => match ExperimentConfig::load(p) {
            Ok(c) => c,
            Err(e) => return crate::eval::error_code(e.into()),
        },
        None => ExperimentConfig::default(),
    };
    if let Some(v) = a.base_model {
        cfg.base_model = v;
    }
    if let (Some(prod), Some(nolemma)) = (a.sft_model, a.sft_nolemma_model) {
        cfg.sft_models = Some(prod_run::experiment::GivenSftModels { prod, nolemma });
    }
    if let Some(v) = a.dataset {
        cfg.dataset = v;
    }
    if let Some(v) = a.sft_minutes {
        cfg.sft_minutes = v;
    }
    if let Some(v) = a.sft_steps {
        cfg.sft_steps = v;
    }
    if let Some(v) = a.rounds {
        cfg.rounds = v;
    }
    if let Some(v) = a.batch {
        cfg.batch = v;
    }
    if let Some(v) = a.samples {
        cfg.samples = v;
    }
    if let Some(v) = a.theorems {
        cfg.theorems = v;
    }
    if let Some(v) = a.workers {
        cfg.workers = v;
    }
    if let Some(v) = a.seed {
        cfg.seed = v;
    }
    if a.no_hammer_baseline {
        cfg.hammer_baseline = false;
    }
    if a.hammer_leaves.no_hammer_leaves {
        cfg.hammer_leaves = false;
    }
    let bars = Bars::for_stderr(a.json);
    let job = ExperimentJob {
        out: a.out,
        config: cfg,
    };
    match prod_run::run_experiment(&job, &bars) {
        Ok(o) => print_outcome(&o, a.json),
        Err(e) => crate::eval::error_code(e),
    }
}

/// The table on stdout: `table.md`, or with `json` one JSON line.
fn print_outcome(o: &prod_run::experiment::ExperimentOutcome, json: bool) -> i32 {
    if json {
        println!("{}", o.json_line());
        return 0;
    }
    match std::fs::read_to_string(&o.table) {
        Ok(t) => print!("{t}"),
        Err(e) => eprintln!("warning: {}: {e}", o.table.display()),
    }
    0
}

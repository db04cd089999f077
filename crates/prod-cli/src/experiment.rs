//! `prod experiment`: the paper's Table 2 in miniature, one resumable command
//! (`prod_run::experiment`).

use std::path::PathBuf;

use clap::Args;
use prod_run::experiment::ExperimentOverrides;
use prod_run::{Bars, ExperimentConfig, ExperimentJob};

use crate::exit;

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
    #[command(flatten)]
    pub overrides: ExperimentOverrides,
    /// Print experiment.json's table as one JSON line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ExperimentArgs) -> exit::Result {
    let mut cfg = match &a.config {
        Some(p) => ExperimentConfig::load(p)?,
        None => ExperimentConfig::default(),
    };
    a.overrides.apply(&mut cfg);
    let bars = Bars::for_stderr(a.json);
    let job = ExperimentJob {
        out: a.out,
        config: cfg,
    };
    let o = prod_run::run_experiment(&job, &bars)?;
    // The table on stdout: `table.md`, or with `--json` one JSON line.
    if a.json {
        return exit::println(o.json_line());
    }
    match std::fs::read_to_string(&o.table) {
        Ok(t) => exit::print(&t),
        Err(e) => {
            eprintln!("warning: {}: {e}", o.table.display());
            Ok(())
        }
    }
}

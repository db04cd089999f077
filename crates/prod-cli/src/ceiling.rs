//! `prod ceiling`: the dataset's ground-truth decomposition with hammer leaves, beside
//! CoqHammer alone (`prod_run::ceiling`).

use clap::Args;
use prod_run::ceiling::{run_ceiling_job, CeilingJob};
use prod_run::{Bars, CoqFlags, CoqJobConfig};

use crate::{exit, ranges};

/// The ceiling: how much room decomposition leaves over the hammer.
///
/// If the policy proposed the lemmas the library's authors did, how many theorems would a
/// proof tree prove with CoqHammer closing the lemmas? Evaluated like `prod eval` (checked,
/// solved, assembled proofs re-checked cold; pass@1 with 95% CIs, the Fig. 5 table by
/// ground-truth depth), with the dataset's ground truth as the nodes: first row, each
/// theorem's ground truth at the root and every lemma it proposes a `<no_invoke> hammer.` leaf;
/// second row, the ground-truth tree to depth --depth (the human proof of every lemma down to
/// that level, where the split has it), every proposed lemma a hammer leaf. CoqHammer alone
/// on the same theorems beside them, paired theorem by theorem.
///
/// The theorems are those `prod eval --theorems N --seed S` draws, kept when their
/// ground-truth depth is at least --min-depth. Everything goes into RUN_DIR/run.sqlite
/// (rerunning resumes); results: RUN_DIR/run.json, report.html and summary.md.
///
/// Example:
///
///   prod ceiling --dataset data/stdlib --split test --theorems 100 --out runs/ceiling
#[derive(Args)]
pub struct CeilingArgs {
    #[command(flatten)]
    pub job: CeilingJob,
    /// Reads `[check.coq]` (`workers`, `step_timeout_s`, `root`, `load_paths`).
    #[command(flatten)]
    pub config: prod_prover::flags::ConfigArg,
    #[command(flatten)]
    pub prover_root: prod_prover::flags::ProverArgs,
    /// Coq workers [default: the config file's, else 2].
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit of one proof step, seconds [default: the config file's, else 10].
    #[arg(long, value_parser = ranges::positive_u32)]
    pub timeout: Option<u32>,
    /// Expand `hammer.` with the fixed tactic list only, without CoqHammer's provers.
    #[arg(long)]
    pub no_atp: bool,
    /// Print one JSON summary line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
}

/// The job of the flags over `[check.coq]` of the config file.
fn job_of(a: &CeilingArgs) -> anyhow::Result<CeilingJob> {
    let file = a
        .config
        .coq_config(&a.prover_root)
        .map_err(anyhow::Error::msg)?;
    let flags = CoqFlags {
        workers: a.workers,
        step_timeout_s: a.timeout,
        no_atp: a.no_atp,
        ..CoqFlags::default()
    };
    let coq = CoqJobConfig::resolve(file, flags).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(CeilingJob {
        coq,
        ..a.job.clone()
    })
}

pub fn run(a: CeilingArgs) -> exit::Result {
    let bars = Bars::for_stderr(a.json);
    let job = job_of(&a).map_err(|e| exit::input(format!("{e:#}")))?;
    let (report, _) =
        prod_run::job::undoing_a_failed_start(&a.job.out, &bars, || run_ceiling_job(&job, &bars))?;
    let path = a.job.out.join("run.json");
    if a.json {
        return exit::println(prod_run::prod_report::summary::summary_json(&report, &path));
    }
    eprintln!(
        "wrote {}, {} and {}",
        path.display(),
        a.job.out.join("report.html").display(),
        a.job.out.join("summary.md").display()
    );
    exit::print(&prod_run::prod_report::summary::terminal(&report))
}

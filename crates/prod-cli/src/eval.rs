//! `prod eval`: test-time proof trees (paper Algorithm 1), checked by Coq or Isabelle, pass@k.

use clap::Args;
use prod_run::flags::EvalFlags;
use prod_run::prod_report::summary;
use prod_run::Bars;

use crate::exit;

/// Evaluate a model: test-time proof trees (Algorithm 1) checked by the prover, pass@k with CIs.
///
/// For each theorem of a dataset split, `--samples` independent proof trees
/// (paper Algorithm 1: lemmas proposed at depth < `--depth` become the next level's theorems,
/// `<no_invoke>` is forced at the depth limit); every node is checked by the prover (the Coq
/// pool, or an Isabelle server with `--prover isabelle`; with the verification cache); global
/// correctness per tree; the assembled proof of each proved tree is re-checked cold (`coqc`, or
/// a fresh Isabelle session; a theorem counts as proved only if that passes); pass@k (unbiased
/// estimator, 95% CIs), the Fig. 5 depth table and the novel-lemma share.
///
/// Everything goes into RUN_DIR/run.sqlite; rerunning the same command resumes (nothing is
/// sampled or checked twice; nodes lost to infra failures are retried). Results:
/// RUN_DIR/run.json (render with `prod report RUN_DIR/run.json --out DIR`).
///
/// Examples:
///
///   prod eval --model models/toy-sft --dataset data/stdlib --theorems 20 --k 1,2,4 --out runs/eval1
///
///   prod eval --prover isabelle --server 127.0.0.1:4711 --password PW --dirs /opt/afp/thys --model models/afp-sft --dataset data/afp --k 1,4 --out runs/afp1
///
///   prod eval --trees gpu/prod-sft/trees.jsonl --dataset data/stdlib --k 1,4,8 --out runs/gpu-sft
#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub flags: EvalFlags,
    /// Print one JSON summary line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: EvalArgs) -> exit::Result {
    let bars = Bars::for_stderr(a.json);
    let job = a.flags.job()?;
    // A shared (PostgreSQL) store is not in --out: nothing there to undo.
    let result = match job.postgres {
        None => prod_run::job::undoing_a_failed_start(&job.out, &bars, || {
            prod_run::run_eval_job(&job, &bars)
        }),
        Some(_) => prod_run::run_eval_job(&job, &bars),
    };
    let (report, _) = result?;
    let path = job.out.join("run.json");
    if a.json {
        return exit::println(summary::summary_json(&report, &path));
    }
    let p = path.display();
    eprintln!("wrote {p} (render: prod report {p} --out DIR)");
    exit::print(&summary::terminal(&report))
}

//! `prod demo`: README command 1 — the whole pipeline on the embedded default.

use std::path::PathBuf;

use clap::Args;
use prod_run::{Bars, DemoJob, ModelBase};

use crate::exit;

/// The main job: stdlib dataset, a fine-tuned policy, proof trees checked by Coq, the report.
///
/// End to end with real Coq: build the Coq stdlib dataset, fine-tune a pretrained policy
/// (SmolLM2-135M, imported by scripts/fetch-model.sh) with ProD-SFT for what the budget leaves,
/// generate 4 proof trees (depth 2) for each of 50 held-out test theorems, check every node with
/// Coq (`hammer.` steps: the fixed tactic list, then CoqHammer's provers; every proposed lemma
/// also a `hammer.` leaf), re-check assembled proofs cold, evaluate CoqHammer alone on the same
/// theorems with the same checker, and write the report (run.json, report.html, summary.md)
/// with ProD and ProD without hammer leaves against CoqHammer alone (pass@k, the paired
/// difference, who proved what), and the ceiling beside them: on the drawn theorems a human
/// decomposed (ground-truth depth ≥ 1), the ground truth at the root with every lemma a hammer
/// leaf, against CoqHammer alone on the same theorems (`prod ceiling` measures it on any
/// split, and the ground-truth tree deeper).
///
/// Budget: ≈ `--minutes` on 2 cores: the evaluation and the CoqHammer baseline get what they
/// are expected to need (about 12 minutes for 50 theorems × 4 trees and the ceiling),
/// training the rest (at least a minute). Rerunning with the same --out reuses each finished step; the baseline's
/// checks are also cached across runs. `--from-scratch` trains a ~1.3 M-parameter model
/// instead (no download; it proves nothing).
///
/// Examples:
///   scripts/fetch-model.sh && prod demo --out runs/demo --minutes 16
///   prod demo --base-model models/my-llama --theorems 100
///   prod demo --from-scratch --theorems 8 --minutes 10
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub struct DemoArgs {
    #[command(flatten)]
    pub job: DemoJob,
    /// The pretrained model to fine-tune (a `prod model import-gguf` directory). Default:
    /// $PROD_CACHE/models/smollm2-135m (PROD_CACHE defaults to ~/.cache/prod), where
    /// scripts/fetch-model.sh puts SmolLM2-135M.
    #[arg(long, conflicts_with = "from_scratch")]
    pub base_model: Option<PathBuf>,
    /// Train a ~1.3 M-parameter model and tokenizer from scratch instead (no pretrained model
    /// needed; for tests and machines without one).
    #[arg(long)]
    pub from_scratch: bool,
    /// Print one JSON summary line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: DemoArgs) -> exit::Result {
    // Step headers go to stderr even without a terminal; bars only on one.
    let bars = Bars::for_stderr(a.json);
    let job = DemoJob {
        base: match (&a.base_model, a.from_scratch) {
            (_, true) => ModelBase::FromScratch,
            (Some(dir), false) => ModelBase::Pretrained(dir.clone()),
            (None, false) => ModelBase::default_pretrained(),
        },
        ..a.job.clone()
    };
    let o = prod_run::run_demo(&job, &bars)?;
    if a.json {
        return exit::println(o.summary_json());
    }
    if let Some(r) = &o.report() {
        exit::print(&prod_run::prod_report::summary::terminal(r))?;
    }
    let (html, json) = (o.report_html.display(), o.run_json.display());
    eprintln!(
        "[5/5] report: {html} (also {json} and summary.md); total {:.0} s",
        o.total_s
    );
    Ok(())
}

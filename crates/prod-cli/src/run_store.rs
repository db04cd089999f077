//! `prod run export RUN_DIR`: every node of a run store with its verdicts, as JSONL or Parquet
//! ([`prod_run::export`]), without opening SQLite by hand.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use prod_run::export::{self, ExportFormat};

use crate::exit;

#[derive(Subcommand)]
pub enum RunCommand {
    #[command(verbatim_doc_comment)]
    /// Every node of a run (prod eval, prod rl) with its verdicts, one JSON object per line.
    ///
    /// Fields: node, round, phase (eval, rl, rl-eval), tree, depth, theorem (index in the run's
    /// theorem list; null for a lemma node without one), theorem_id, origin (sampled,
    /// ground_truth), forced_t0, context_key, statement, completion, truncated (true when the
    /// token limit cut the completion; null in a store that did not record it); the local
    /// verdict: local
    /// (proved, failed, timed_out, rejected; null when the node was not checked or its check
    /// ended in infra, which is never stored), local_step (the failing or timed-out step),
    /// local_message (Coq's message, or the rejection reason), local_axioms, local_seconds,
    /// local_universe_constraints (what a proved node's proof adds to its statement's universe
    /// levels: such a node proves its own statement only);
    /// the global verdict: global (correct, incorrect, undetermined; null before the tree was
    /// solved) and height. Nodes come in the order the run stored them. Reads the store only.
    ///
    /// With --format parquet (needs --out) the same columns as one Parquet file (zstd), for
    /// pandas, DuckDB or Hugging Face `datasets`.
    ///
    /// Examples:
    ///   prod run export runs/e1 > nodes.jsonl
    ///   prod run export runs/e1 --out nodes.jsonl
    ///   prod run export runs/e1 --format parquet --out nodes.parquet
    Export(ExportArgs),
}

#[derive(Args)]
pub struct ExportArgs {
    /// The run directory (the --out of prod eval / prod rl), holding run.sqlite.
    pub run: PathBuf,
    /// Write to this file (through a temporary file renamed into place) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Output format: jsonl (one JSON object per node) or parquet (one file, needs --out).
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
}

pub fn run(cmd: RunCommand) -> exit::Result {
    match cmd {
        RunCommand::Export(a) => export(a),
    }
}

fn export(a: ExportArgs) -> exit::Result {
    if a.format == ExportFormat::Parquet && a.out.is_none() {
        return Err(exit::input(
            "--format parquet writes a file: give --out FILE",
        ));
    }
    let e = export::export_run(&a.run)?;
    let Some(path) = &a.out else {
        return exit::written(std::io::stdout().lock().write_all(&e.jsonl));
    };
    export::write(path, &e.jsonl, a.format)?;
    let (n, checked) = (e.nodes, e.checked);
    eprintln!(
        "exported {n} nodes ({checked} with a local verdict) to {}",
        path.display()
    );
    Ok(())
}

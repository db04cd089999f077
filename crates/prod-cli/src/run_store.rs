//! `prod run export RUN_DIR`: every node of a run store with its verdicts, as JSONL.
//!
//! The run store (`RUN_DIR/run.sqlite`) holds every node a run sampled, its local verdict, its
//! global verdict and height; `run.json` and the report only summarise them. The export gives
//! one flat JSON object per node (one type per column, so pandas or Hugging Face `datasets`
//! read it as it is) without opening SQLite by hand.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand, ValueEnum};
use prod_check::Verdict;
use prod_run::store::{name, NodeRecord, RunStore};

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
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Jsonl,
    Parquet,
}

/// The columns of an export, in [`line`]'s order, typed for Parquet.
const COLUMNS: &prod_library::parquet::Columns = {
    use prod_library::parquet::ColumnType::{Bool, Float, Int, String as Str, Strings};
    &[
        ("node", Int),
        ("round", Int),
        ("phase", Str),
        ("tree", Int),
        ("depth", Int),
        ("theorem", Int),
        ("theorem_id", Str),
        ("origin", Str),
        ("forced_t0", Str),
        ("context_key", Str),
        ("statement", Str),
        ("completion", Str),
        ("truncated", Bool),
        ("local", Str),
        ("local_step", Int),
        ("local_message", Str),
        ("local_axioms", Strings),
        ("local_seconds", Float),
        ("local_universe_constraints", Strings),
        ("global", Str),
        ("height", Int),
    ]
};

pub fn run(cmd: RunCommand) -> i32 {
    match cmd {
        RunCommand::Export(a) => export(a),
    }
}

fn open(dir: &std::path::Path) -> anyhow::Result<RunStore> {
    let path = dir.join("run.sqlite");
    if !path.is_file() {
        return Err(anyhow!(
            "{}: no run store (run.sqlite): not the --out directory of prod eval or prod rl",
            dir.display()
        ));
    }
    RunStore::open(&path).with_context(|| format!("{}: not a run store", path.display()))
}

/// One node as a flat JSON object; `cuts_known`: the store records truncation.
fn line(r: &NodeRecord, cuts_known: bool) -> serde_json::Value {
    let n = &r.node;
    let universes = match &r.local {
        Some(Verdict::Proved {
            universe_constraints,
            ..
        }) => universe_constraints.clone(),
        _ => vec![],
    };
    let (step, message, axioms, seconds) = match &r.local {
        Some(Verdict::Proved { axioms, time, .. }) => {
            (None, None, axioms.clone(), Some(time.as_secs_f64()))
        }
        Some(Verdict::Failed { step, message }) => {
            (Some(*step), Some(message.clone()), vec![], None)
        }
        Some(Verdict::TimedOut { step }) => (Some(*step), None, vec![], None),
        Some(Verdict::Rejected { reason }) => (None, Some(reason.clone()), vec![], None),
        Some(Verdict::Infra { message }) => (None, Some(message.clone()), vec![], None),
        None => (None, None, vec![], None),
    };
    serde_json::json!({
        "node": n.id,
        "round": n.round,
        "phase": name(n.phase),
        "tree": n.tree,
        "depth": n.depth,
        "theorem": n.theorem,
        "theorem_id": r.theorem_id,
        "origin": name(n.origin),
        "forced_t0": n.forced_t0.map(name),
        "context_key": n.context_key,
        "statement": n.statement,
        "completion": n.completion,
        "truncated": cuts_known.then_some(n.truncated),
        "local": r.local.as_ref().map(|v| v.kind().as_str()),
        "local_step": step,
        "local_message": message,
        "local_axioms": axioms,
        "local_seconds": seconds,
        "local_universe_constraints": universes,
        "global": r.global.map(name),
        "height": r.height,
    })
}

fn export(a: ExportArgs) -> i32 {
    if a.format == Format::Parquet && a.out.is_none() {
        return exit::bad_input(anyhow!("--format parquet writes a file: give --out FILE"));
    }
    let read = open(&a.run).and_then(|s| Ok((s.node_records()?, s.records_truncation()?)));
    let (records, cuts_known) = match read {
        Ok(r) => r,
        Err(e) => return exit::bad_input(e),
    };
    let mut text = Vec::new();
    for r in &records {
        // A JSON value of strings and numbers always serialises.
        let _ = serde_json::to_writer(&mut text, &line(r, cuts_known));
        text.push(b'\n');
    }
    let checked = records.iter().filter(|r| r.local.is_some()).count();
    match &a.out {
        None => exit::written(std::io::stdout().lock().write_all(&text)),
        Some(path) => match write(path, &text, a.format) {
            Ok(()) => {
                eprintln!(
                    "exported {} nodes ({checked} with a local verdict) to {}",
                    records.len(),
                    path.display()
                );
                0
            }
            Err(e) => exit::failure(e),
        },
    }
}

fn write(path: &std::path::Path, jsonl: &[u8], format: Format) -> anyhow::Result<()> {
    match format {
        Format::Jsonl => write_atomically(path, jsonl),
        Format::Parquet => prod_library::parquet::jsonl_to_parquet(&mut &jsonl[..], COLUMNS, path)
            .map(|_| ())
            .map_err(|e| anyhow!(e)),
    }
}

/// `path` replaced in one step ([`prod_library::output::write_atomic`]).
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    prod_library::output::write_atomic(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

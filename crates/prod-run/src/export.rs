//! A run store as a flat table: every node a run sampled with its local verdict, its global
//! verdict and height, one JSON object per node (one type per column, so pandas or Hugging Face
//! `datasets` read it as it is), or the same columns as one Parquet file — `prod run export`.

use anyhow::{anyhow, Context as _};
use prod_check::Verdict;

use crate::store::{name, NodeRecord, RunStore};

/// How an export is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ExportFormat {
    /// One JSON object per node.
    Jsonl,
    /// One zstd Parquet file.
    Parquet,
}

/// A run's nodes, exported.
pub struct Export {
    /// One JSON object per node, in the order the run stored them.
    pub jsonl: Vec<u8>,
    pub nodes: usize,
    /// Nodes with a local verdict.
    pub checked: usize,
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

/// Every node of the run store in `dir` (read only); a directory without one is the user's
/// error ([`crate::BadInput`]).
pub fn export_run(dir: &std::path::Path) -> anyhow::Result<Export> {
    let store = open(dir)?;
    let (records, cuts_known) = (store.node_records()?, store.records_truncation()?);
    let mut jsonl = Vec::new();
    for r in &records {
        // A JSON value of strings and numbers always serialises.
        let _ = serde_json::to_writer(&mut jsonl, &line(r, cuts_known));
        jsonl.push(b'\n');
    }
    Ok(Export {
        jsonl,
        nodes: records.len(),
        checked: records.iter().filter(|r| r.local.is_some()).count(),
    })
}

fn open(dir: &std::path::Path) -> anyhow::Result<RunStore> {
    let path = dir.join("run.sqlite");
    if !path.is_file() {
        return Err(crate::BadInput(format!(
            "{}: no run store (run.sqlite): not the --out directory of prod eval or prod rl",
            dir.display()
        ))
        .into());
    }
    RunStore::open(&path)
        .map_err(|e| crate::BadInput(format!("{}: not a run store: {e}", path.display())).into())
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

/// The export's JSONL written to `path` as `format`, replacing it in one step.
pub fn write(path: &std::path::Path, jsonl: &[u8], format: ExportFormat) -> anyhow::Result<()> {
    match format {
        ExportFormat::Jsonl => write_atomically(path, jsonl),
        ExportFormat::Parquet => {
            prod_library::parquet::jsonl_to_parquet(&mut &jsonl[..], COLUMNS, path)
                .map(|_| ())
                .map_err(|e| anyhow!(e))
        }
    }
}

/// `path` replaced in one step ([`prod_library::output::write_atomic`]).
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    prod_library::output::write_atomic(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

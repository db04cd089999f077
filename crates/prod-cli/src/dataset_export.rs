//! `prod dataset export`: a split of a dataset folder in the schema an RL framework reads, with
//! a reward input on every row that `prod serve` can check as it is.
//!
//! A dataset row's `context` is what a model is shown (cut to its last `--context-bytes`, from
//! a line start): sent to the checker as it is, a quarter of the stdlib's RL rows would not
//! load (definitions before the cut are missing). Each exported row's reward input therefore
//! carries the row's *full* context, rebuilt from `sources.jsonl` by byte offsets
//! ([`dataset::Example::full_context`]); it begins at the file's start, so its `Require`s are
//! in it and the reward input needs no `imports`. A context that ends inside a Section or
//! Module is checked there, as `prod dataset validate` does. The prompt is ProD's prompt
//! format (`prompt_template.json`: `{context}\n{statement}\n`) with the context's last
//! `--prompt-context-bytes`.
//!
//! Schemas (one file, `OUT/<split>.parquet` or `.jsonl`, and `OUT/export.json` with the counts):
//! * verl: `data_source`, `prompt` (chat messages: one user message holding the prompt),
//!   `ability`, `reward_model {style, ground_truth}` (the JSON text `prod_client.compute_score`
//!   reads), `extra_info {index, id, split, logical_path, line, depth}`.
//! * TRL: `prompt` (text), `statement`, `imports`, `context`, `id`: the columns TRL hands to
//!   `prod_client.make_reward_fn`'s reward as keyword lists.
//! * OpenRLHF: `prompt`, `label` (the JSON text `prod_client.openrlhf` reads), `id`.
//!
//! Rows left out, each counted by reason in `export.json`: `goal_without_name` (a `Goal`
//! block: nothing to name its lemma by), `coq_flags` (the row needs `coqc` flags such as
//! `-noinit`, which a request cannot carry) and, with `--verify`, `context_does_not_load`: the
//! real Coq refused a sentence of the row's context (a library file that only compiles inside
//! its own build, or one whose tactics behave differently once CoqHammer is loaded). Isabelle
//! datasets are refused (exit 2).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use arrow_schema::{DataType, Field, Fields, Schema};
use clap::{Args, ValueEnum};
use prod_library::dataset;
use serde_json::{json, Value};

use crate::exit;

/// The framework whose schema a file is written in.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framework {
    /// verl: Parquet with `prompt` (chat messages), `data_source`, `reward_model.ground_truth`,
    /// `extra_info`.
    Verl,
    /// TRL (GRPO): `prompt` text and the reward columns `statement`, `imports`, `context`.
    Trl,
    /// OpenRLHF: `prompt` and `label` (`--input_key prompt --label_key label`).
    Openrlhf,
}

impl Framework {
    fn name(self) -> &'static str {
        match self {
            Framework::Verl => "verl",
            Framework::Trl => "trl",
            Framework::Openrlhf => "openrlhf",
        }
    }
}

/// The file format.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Jsonl,
}

#[derive(Args)]
pub struct ExportArgs {
    /// A directory written by `prod dataset build` (a Coq library).
    pub dir: PathBuf,
    /// The framework whose schema to write.
    #[arg(long = "for", value_enum)]
    pub framework: Framework,
    /// The folder to write (`OUT/<split>.parquet` or `.jsonl`, and `OUT/export.json`).
    #[arg(long)]
    pub out: PathBuf,
    /// The split file to export: rl (the RL set, default), train, val or test.
    #[arg(long, default_value = "rl")]
    pub split: String,
    /// File format (verl reads Parquet; TRL and OpenRLHF read either).
    #[arg(long, value_enum, default_value_t = Format::Parquet)]
    pub format: Format,
    /// The prompt shows the last this many bytes of the context (cut forward to a line start;
    /// about 1,000 tokens, the paper's context, for 4,000). 0: the statement alone.
    #[arg(long, default_value_t = 4000)]
    pub prompt_context_bytes: usize,
    /// verl's `data_source` (default `prod/<library>`).
    #[arg(long)]
    pub data_source: Option<String>,
    /// Check with the real Coq that every row's context loads, and leave out the rows whose
    /// context does not (`context_does_not_load`, with Coq's reason in export.json). One
    /// check per file (its longest context), a few more per file that fails.
    #[arg(long)]
    pub verify: bool,
    /// --verify: Coq workers.
    #[arg(long, default_value_t = 2, value_parser = crate::ranges::positive_usize)]
    pub workers: usize,
    /// --verify: check as a server started with --no-hammer does (CoqHammer not loaded; it
    /// changes what some contexts' own tactics do).
    #[arg(long)]
    pub no_hammer: bool,
    #[command(flatten)]
    pub prover: crate::prover::ProverArgs,
    /// With --verify: reads `[check.coq]` (root, limits, load paths, hammer settings).
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
    /// --verify: beside the dataset's own bindings (its stats.json), which are always used.
    #[command(flatten)]
    pub load_paths: crate::prover::LoadPathArgs,
    /// Machine-readable output: export.json's object.
    #[arg(long)]
    pub json: bool,
}

/// What `export.json` records.
#[derive(serde::Serialize)]
struct Manifest {
    framework: &'static str,
    dataset: String,
    split: String,
    file: String,
    rows: usize,
    /// Rows of the split left out, by reason.
    dropped: BTreeMap<&'static str, usize>,
    /// Rows whose context ends inside a Section or Module (checked there).
    rows_in_scopes: usize,
    /// Whether every row's context was loaded by the real Coq (`--verify`).
    verified: bool,
    /// `--verify`: per file whose later rows were left out, Coq's reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    not_loaded: BTreeMap<String, String>,
    prompt_context_bytes: usize,
    data_source: String,
}

/// The last `n` bytes of `context` (trailing blanks removed), cut forward to a line start when
/// one is among them.
fn context_tail(context: &str, n: usize) -> &str {
    let c = context.trim_end();
    if n == 0 {
        return "";
    }
    if c.len() <= n {
        return c;
    }
    let mut start = c.len() - n;
    while !c.is_char_boundary(start) {
        start += 1;
    }
    if c.as_bytes()[start - 1] == b'\n' {
        return &c[start..];
    }
    match c[start..].find('\n') {
        Some(i) => &c[start + i + 1..],
        None => &c[start..],
    }
}

/// ProD's prompt (`prompt_template.json`): `{context}\n{statement}\n`, or `{statement}\n`.
fn prompt(context: &str, statement: &str) -> String {
    if context.is_empty() {
        format!("{}\n", statement.trim())
    } else {
        format!("{context}\n{}\n", statement.trim())
    }
}

/// The reward input of a row: what `prod_client` turns into a `prod check` node.
fn reward_input(id: &str, statement: &str, context: &str) -> Value {
    json!({"id": id, "statement": statement, "imports": "", "context": context})
}

fn row(
    fw: Framework,
    index: usize,
    e: &dataset::Example,
    full: &str,
    p: &str,
    data_source: &str,
) -> Value {
    let input = reward_input(&e.id, &e.statement, full);
    match fw {
        Framework::Verl => json!({
            "data_source": data_source,
            "prompt": [{"role": "user", "content": p}],
            "ability": "theorem_proving",
            "reward_model": {"style": "rule", "ground_truth": input.to_string()},
            "extra_info": {"index": index, "id": e.id, "split": e.split,
                           "logical_path": e.logical_path, "line": e.line, "depth": e.depth},
        }),
        Framework::Trl => json!({
            "prompt": p, "statement": e.statement, "imports": "", "context": full, "id": e.id,
        }),
        Framework::Openrlhf => json!({"prompt": p, "label": input.to_string(), "id": e.id}),
    }
}

fn utf8(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

fn int(name: &str) -> Field {
    Field::new(name, DataType::Int64, true)
}

/// The Parquet schema of each framework's rows.
fn schema(fw: Framework) -> Arc<Schema> {
    let fields = match fw {
        Framework::Verl => {
            let message = DataType::Struct(Fields::from(vec![utf8("role"), utf8("content")]));
            vec![
                utf8("data_source"),
                Field::new(
                    "prompt",
                    DataType::List(Arc::new(Field::new("item", message, true))),
                    true,
                ),
                utf8("ability"),
                Field::new(
                    "reward_model",
                    DataType::Struct(Fields::from(vec![utf8("style"), utf8("ground_truth")])),
                    true,
                ),
                Field::new(
                    "extra_info",
                    DataType::Struct(Fields::from(vec![
                        int("index"),
                        utf8("id"),
                        utf8("split"),
                        utf8("logical_path"),
                        int("line"),
                        int("depth"),
                    ])),
                    true,
                ),
            ]
        }
        Framework::Trl => ["prompt", "statement", "imports", "context", "id"]
            .into_iter()
            .map(utf8)
            .collect(),
        Framework::Openrlhf => ["prompt", "label", "id"].into_iter().map(utf8).collect(),
    };
    Arc::new(Schema::new(fields))
}

/// Write `bytes` to `path` through a temporary file renamed into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    prod_library::output::write_atomic(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// One row to write: the example and its full context.
struct Candidate<'a> {
    example: &'a dataset::Example,
    full: String,
}

/// The rows (JSON lines) of the export and its manifest.
fn rows(a: &ExportArgs) -> anyhow::Result<(Vec<u8>, Manifest)> {
    if !["rl", "train", "val", "test"].contains(&a.split.as_str()) {
        return Err(anyhow!(
            "--split {:?}: expected rl, train, val or test",
            a.split
        ));
    }
    prod_library::output::verify(&a.dir).map_err(|e| anyhow!(e))?;
    let stats = dataset::read_stats(&a.dir).map_err(|e| anyhow!(e))?;
    if stats.prover == "isabelle" {
        return Err(anyhow!(
            "{}: an Isabelle dataset; `prod dataset export` writes Coq datasets",
            a.dir.display()
        ));
    }
    let sources = dataset::read_sources(&a.dir).map_err(|e| anyhow!(e))?;
    let path = a.dir.join(format!("{}.jsonl", a.split));
    let examples = dataset::read_examples(&path).map_err(|e| anyhow!(e))?;
    let data_source = a
        .data_source
        .clone()
        .unwrap_or_else(|| format!("prod/{}", stats.library));
    let mut manifest = Manifest {
        framework: a.framework.name(),
        dataset: a.dir.display().to_string(),
        split: a.split.clone(),
        file: String::new(),
        rows: 0,
        dropped: BTreeMap::new(),
        rows_in_scopes: 0,
        verified: a.verify,
        not_loaded: BTreeMap::new(),
        prompt_context_bytes: a.prompt_context_bytes,
        data_source: data_source.clone(),
    };
    let mut candidates = candidates(&examples, &sources, &path, &mut manifest)?;
    if a.verify {
        keep_loading(a, &mut candidates, &mut manifest)?;
    }
    let mut out = Vec::new();
    for c in &candidates {
        let e = c.example;
        let p = prompt(context_tail(&c.full, a.prompt_context_bytes), &e.statement);
        let r = row(a.framework, manifest.rows, e, &c.full, &p, &data_source);
        serde_json::to_writer(&mut out, &r)?;
        out.push(b'\n');
        manifest.rows += 1;
        manifest.rows_in_scopes += usize::from(!e.scope.is_empty());
    }
    Ok((out, manifest))
}

/// The examples that can become rows, each with its full context; the others are counted in
/// the manifest by why they were dropped (no name, or Coq flags a framework cannot set).
fn candidates<'e>(
    examples: &'e [dataset::Example],
    sources: &std::collections::HashMap<String, dataset::SourceRecord>,
    path: &std::path::Path,
    manifest: &mut Manifest,
) -> anyhow::Result<Vec<Candidate<'e>>> {
    let mut candidates = Vec::new();
    for e in examples {
        let reason = if e.name.is_empty() {
            Some("goal_without_name")
        } else if !e.flags.is_empty() {
            Some("coq_flags")
        } else {
            None
        };
        if let Some(r) = reason {
            *manifest.dropped.entry(r).or_default() += 1;
            continue;
        }
        let full = sources
            .get(&e.logical_path)
            .and_then(|s| e.full_context(s))
            .ok_or_else(|| {
                anyhow!(
                    "{}: example {}: its file is not in sources.jsonl (or its offsets are not in it)",
                    path.display(),
                    e.id
                )
            })?;
        candidates.push(Candidate { example: e, full });
    }
    Ok(candidates)
}

/// `--verify`: only the candidates whose context loads in the prover stay; the others are
/// counted as `context_does_not_load`.
fn keep_loading(
    a: &ExportArgs,
    candidates: &mut Vec<Candidate<'_>>,
    manifest: &mut Manifest,
) -> anyhow::Result<()> {
    let loads = verify(a, candidates, &mut manifest.not_loaded)?;
    let before = candidates.len();
    let mut keep = loads.into_iter();
    candidates.retain(|_| keep.next().unwrap_or(false));
    if before > candidates.len() {
        manifest
            .dropped
            .insert("context_does_not_load", before - candidates.len());
    }
    Ok(())
}

/// The lemma `--verify` proves after a context to see that it loads.
const PROBE_STATEMENT: &str = "Lemma prod_context_probe : True.";
const PROBE_PROOF: &str = "<no_invoke> exact I.";

/// Per candidate: does its context load in the real Coq? The contexts of one file are prefixes
/// of one text (`sources.jsonl`'s `reduced`, or `source` for `w_lemmas`), so a file's longest
/// context loading means they all do; when it does not, a binary search over the file's
/// contexts (by length) finds the shortest that fails, and every longer one fails with it (it
/// holds the sentence Coq refused). Each check proves `True` after the context: only an infra
/// verdict (the context did not load) counts.
/// The Coq checker of `--verify`: `[check.coq]`, the prover root, the dataset's bindings and
/// the command's flags.
fn export_checker(a: &ExportArgs) -> anyhow::Result<prod_check_coq::CoqChecker> {
    let mut cfg = a.config.coq_config(&a.prover)?;
    a.load_paths
        .apply(&mut cfg, Some(&a.dir))
        .map_err(|e| anyhow!(e))?;
    cfg.workers = a.workers;
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    prod_check_coq::CoqChecker::new(cfg).map_err(|e| anyhow!("cannot start the Coq checker: {e}"))
}

/// The candidates of each file (by logical path, then base text), shortest context first.
fn rows_by_file<'c>(candidates: &'c [Candidate<'_>]) -> BTreeMap<(&'c str, &'c str), Vec<usize>> {
    let mut files: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        let base = if c.example.variant == "w_lemmas" {
            "source"
        } else {
            "reduced"
        };
        files
            .entry((c.example.logical_path.as_str(), base))
            .or_default()
            .push(i);
    }
    for rows in files.values_mut() {
        rows.sort_by_key(|&i| candidates[i].full.len());
    }
    files
}

/// One file's binary search for its longest loading context, over its rows sorted by
/// context length: `rows[..lo]` load, `rows[hi]` does not (`hi = len`: none known to fail).
struct ContextSearch<'f> {
    key: &'f (&'f str, &'f str),
    rows: &'f [usize],
    lo: usize,
    hi: usize,
    /// Why the last failing probe failed.
    reason: Option<String>,
}

impl<'f> ContextSearch<'f> {
    fn new(key: &'f (&'f str, &'f str), rows: &'f [usize]) -> Self {
        ContextSearch {
            key,
            rows,
            lo: 0,
            hi: rows.len(),
            reason: None,
        }
    }

    /// The row to probe next: first the longest context (most files load whole), then the
    /// middle of what is not yet known; none when the search is over.
    fn next_probe(&self, first: bool) -> Option<usize> {
        let len = self.rows.len();
        if first {
            Some(len - 1)
        } else if self.hi < len && self.lo < self.hi {
            Some((self.lo + self.hi) / 2)
        } else {
            None
        }
    }

    /// What the probe of row `p` said: only an infra verdict says the context did not load.
    fn record(&mut self, p: usize, v: &prod_check::Verdict) {
        if matches!(v, prod_check::Verdict::Infra { .. }) {
            self.hi = p;
            self.reason = Some(match crate::check_progress::context_failure(v) {
                Some(r) => r.to_string(),
                None => v.message(),
            });
        } else {
            self.lo = p + 1;
        }
    }
}

/// Which candidates' contexts load in the prover: per file, a binary search over its rows
/// sorted by context length, the probes of all files batched per round. Files whose longest
/// contexts do not load are named on stderr and in `not_loaded`.
fn verify(
    a: &ExportArgs,
    candidates: &[Candidate<'_>],
    not_loaded: &mut BTreeMap<String, String>,
) -> anyhow::Result<Vec<bool>> {
    use prod_check::{CheckRequest, Checker as _};
    let checker = export_checker(a)?;
    let files = rows_by_file(candidates);
    // The probe: a trivial lemma stated after the context, so that only the context decides
    // the verdict, never a rule about the row's own statement or proof (a context that shadows
    // `I` fails the proof, which still says the context loaded).
    let probe = prod_core::ConditionalProof::parse_with(PROBE_PROOF, &prod_coq::CoqLanguage)
        .map_err(|e| anyhow!("the probe proof: {e}"))?;
    let mut search: Vec<ContextSearch> = files
        .iter()
        .map(|(k, rows)| ContextSearch::new(k, rows))
        .collect();
    let mut first = true;
    let progress = crate::check_progress::CheckProgress::new("verify", files.len(), true);
    loop {
        let probes: Vec<(usize, usize)> = search
            .iter()
            .enumerate()
            .filter_map(|(n, s)| s.next_probe(first).map(|p| (n, p)))
            .collect();
        if probes.is_empty() {
            break;
        }
        let requests: Vec<CheckRequest> = probes
            .iter()
            .map(|&(n, p)| {
                let full = &candidates[search[n].rows[p]].full;
                CheckRequest::new("", full, PROBE_STATEMENT, probe.clone())
            })
            .collect();
        let verdicts = checker.check_batch(&requests, &|_, v| {
            if first {
                progress.record(v)
            }
        });
        for (&(n, p), v) in probes.iter().zip(&verdicts) {
            search[n].record(p, v);
        }
        if first {
            progress.finish();
        }
        first = false;
    }
    Ok(loading_rows(candidates.len(), &search, not_loaded))
}

/// Per candidate, whether its context loads, from the finished searches; each file with rows
/// that do not load is reported.
fn loading_rows(
    candidates: usize,
    search: &[ContextSearch],
    not_loaded: &mut BTreeMap<String, String>,
) -> Vec<bool> {
    let mut loads = vec![true; candidates];
    for s in search {
        for &i in &s.rows[s.hi..] {
            loads[i] = false;
        }
        if s.hi < s.rows.len() {
            let reason = s.reason.clone().unwrap_or_default();
            eprintln!(
                "context does not load ({} row(s) of {}): {reason}",
                s.rows.len() - s.hi,
                s.key.0
            );
            not_loaded.insert(s.key.0.to_string(), reason);
        }
    }
    loads
}

pub fn run(a: ExportArgs) -> i32 {
    let (jsonl, mut manifest) = match rows(&a) {
        Ok(r) => r,
        Err(e) => return exit::bad_input(e),
    };
    let written = (|| -> anyhow::Result<()> {
        std::fs::create_dir_all(&a.out)
            .with_context(|| format!("cannot create {}", a.out.display()))?;
        let ext = match a.format {
            Format::Parquet => "parquet",
            Format::Jsonl => "jsonl",
        };
        let file = a.out.join(format!("{}.{ext}", a.split));
        match a.format {
            Format::Jsonl => write_atomic(&file, &jsonl)?,
            Format::Parquet => {
                prod_library::parquet::jsonl_to_parquet_with(
                    &mut std::io::Cursor::new(&jsonl),
                    schema(a.framework),
                    &file,
                )
                .map_err(|e| anyhow!(e))?;
            }
        }
        manifest.file = file.display().to_string();
        let text = serde_json::to_string_pretty(&manifest)? + "\n";
        write_atomic(&a.out.join("export.json"), text.as_bytes())
    })();
    if let Err(e) = written {
        return exit::failure(e);
    }
    let line = if a.json {
        serde_json::to_string(&manifest).unwrap_or_default()
    } else {
        let dropped: Vec<String> = manifest
            .dropped
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        format!(
            "{} rows for {} → {} ({} inside Sections/Modules); left out: {}",
            manifest.rows,
            manifest.framework,
            manifest.file,
            manifest.rows_in_scopes,
            if dropped.is_empty() {
                "none".to_string()
            } else {
                dropped.join(", ")
            }
        )
    };
    exit::written(writeln!(std::io::stdout().lock(), "{line}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_context_is_a_tail_from_a_line_start() {
        let c = "Require Import A.\nDefinition x := 1.\nLemma é : True.\n  \n";
        assert_eq!(context_tail(c, 0), "");
        assert_eq!(context_tail(c, 1000), c.trim_end());
        assert_eq!(context_tail(c, 20), "Lemma é : True.");
        // A cut inside a multi-byte character moves forward, never panics.
        for n in 0..c.len() {
            let t = context_tail(c, n);
            assert!(c.trim_end().ends_with(t) && t.len() <= n, "{n}: {t:?}");
        }
        assert_eq!(prompt("", " Lemma a : True. "), "Lemma a : True.\n");
        assert_eq!(prompt("C.", "Lemma a : True."), "C.\nLemma a : True.\n");
    }
}

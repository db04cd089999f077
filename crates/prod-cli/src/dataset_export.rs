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
//! `-noinit`, which a request cannot carry); by the verification (on by default for the RL
//! split, `crate::export_verify`) `context_does_not_load`, `ground_truth_not_proved` and
//! `ground_truth_infra`: only rows whose reward the real checker can give are written; and
//! with `--prompt-tokens` `prompt_over_token_budget` (`crate::export_tokens`, which also
//! reports token-length percentiles for `--tokenizer`). Isabelle datasets are refused (exit 2).

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
    /// OpenRLHF: `prompt` and `label` (`--data.input_key prompt --data.label_key label`).
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
    /// Check with the real Coq that every row's context loads and that its ground truth (the
    /// library's own proof) proves it as the reward input states it; leave out the rows that
    /// fail (`context_does_not_load`, `ground_truth_not_proved`, `ground_truth_infra`, with
    /// the reasons in export.json). The default for the RL split; other splits only with it.
    #[arg(long, overrides_with = "no_verify")]
    pub verify: bool,
    /// Do not verify (export.json says so): every row is written, including those no proof
    /// can score under this checker.
    #[arg(long, overrides_with = "verify")]
    pub no_verify: bool,
    /// A tokenizer (`tokenizer.json`, or a model folder holding one): export.json reports the
    /// prompts' and ground-truth completions' lengths in its tokens (p50/p90/p95/p99/max), to
    /// set a trainer's prompt and response limits from.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Cut each prompt's context (at line starts) until the prompt has at most this many
    /// tokens of --tokenizer, so no trainer has to cut it; rows whose statement alone does not
    /// fit are left out (`prompt_over_token_budget`).
    #[arg(long, requires = "tokenizer", value_parser = crate::ranges::positive_usize)]
    pub prompt_tokens: Option<usize>,
    /// Verification: Coq workers.
    #[arg(long, default_value_t = 2, value_parser = crate::ranges::positive_usize)]
    pub workers: usize,
    /// Verification: check as a server started with --no-hammer does (CoqHammer not loaded;
    /// it changes what some contexts' own tactics do).
    #[arg(long)]
    pub no_hammer: bool,
    #[command(flatten)]
    pub prover: crate::prover::ProverArgs,
    /// Verification: reads `[check.coq]` (root, limits, load paths, hammer settings).
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
    /// Verification: beside the dataset's own bindings (its stats.json), always used.
    #[command(flatten)]
    pub load_paths: crate::prover::LoadPathArgs,
    /// Machine-readable output: export.json's object.
    #[arg(long)]
    pub json: bool,
}

impl ExportArgs {
    /// Whether the rows are verified, or why not.
    fn verification(&self) -> Result<(), String> {
        if self.no_verify {
            Err("--no-verify".into())
        } else if self.verify || self.split == "rl" {
            Ok(())
        } else {
            Err(format!(
                "the {} split is verified only with --verify",
                self.split
            ))
        }
    }
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
    /// Whether every row's context was loaded and its ground truth proved by the real Coq.
    verified: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_verified: Option<String>,
    /// Per file whose later rows were left out, Coq's reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    not_loaded: BTreeMap<String, String>,
    /// Per row left out for its ground truth, the checker's verdict.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    not_proved: BTreeMap<String, String>,
    prompt_context_bytes: usize,
    /// `--prompt-tokens`: the prompts' token budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_tokens: Option<usize>,
    /// `--tokenizer`: lengths in its tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<crate::export_tokens::TokenReport>,
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

use crate::export_verify::Candidate;

/// The Coq checker of the verification: `[check.coq]`, the prover root, the dataset's bindings
/// and the command's flags.
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
        verified: false,
        not_verified: None,
        not_loaded: BTreeMap::new(),
        not_proved: BTreeMap::new(),
        prompt_context_bytes: a.prompt_context_bytes,
        prompt_tokens: a.prompt_tokens,
        tokens: None,
        data_source: data_source.clone(),
    };
    let counter = crate::export_tokens::load(a.tokenizer.as_deref())?;
    let mut candidates = candidates(&examples, &sources, &path, &mut manifest)?;
    match a.verification() {
        Ok(()) => {
            let v = crate::export_verify::keep_verified(&export_checker(a)?, &mut candidates);
            manifest.dropped.extend(v.dropped);
            (manifest.not_loaded, manifest.not_proved) = (v.not_loaded, v.not_proved);
            manifest.verified = true;
        }
        Err(why) => manifest.not_verified = Some(why),
    }
    let mut out = Vec::new();
    let (mut prompt_counts, mut completion_counts) = (vec![], vec![]);
    for c in &candidates {
        let e = c.example;
        let Some((p, tokens)) = row_prompt(a, counter.as_ref(), c)? else {
            *manifest
                .dropped
                .entry("prompt_over_token_budget")
                .or_default() += 1;
            continue;
        };
        if let (Some(counter), Some(n)) = (&counter, tokens) {
            prompt_counts.push(n);
            completion_counts.push(counter.count(&e.conditional_proof)?);
        }
        let r = row(a.framework, manifest.rows, e, &c.full, &p, &data_source);
        serde_json::to_writer(&mut out, &r)?;
        out.push(b'\n');
        manifest.rows += 1;
        manifest.rows_in_scopes += usize::from(!e.scope.is_empty());
    }
    manifest.tokens = counter.map(|c| crate::export_tokens::TokenReport {
        tokenizer: c.path.display().to_string(),
        prompt: crate::export_tokens::percentiles(prompt_counts),
        ground_truth_completion: crate::export_tokens::percentiles(completion_counts),
    });
    Ok((out, manifest))
}

/// A row's prompt and, with a tokenizer, its token count: the context's last
/// `--prompt-context-bytes`, cut further to fit `--prompt-tokens`; `None` when the statement
/// alone does not fit.
fn row_prompt(
    a: &ExportArgs,
    counter: Option<&crate::export_tokens::TokenCounter>,
    c: &Candidate<'_>,
) -> anyhow::Result<Option<(String, Option<usize>)>> {
    let statement = &c.example.statement;
    let tail = context_tail(&c.full, a.prompt_context_bytes);
    match (counter, a.prompt_tokens) {
        (Some(counter), Some(budget)) => {
            let tails = crate::export_tokens::line_tails(&c.full, tail);
            let fit = crate::export_tokens::fit_prompt(counter, &tails, budget, |t| {
                prompt(t, statement)
            })?;
            Ok(fit.map(|(p, n)| (p, Some(n))))
        }
        (Some(counter), None) => {
            let p = prompt(tail, statement);
            let n = counter.count(&p)?;
            Ok(Some((p, Some(n))))
        }
        (None, _) => Ok(Some((prompt(tail, statement), None))),
    }
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

/// The one line `prod dataset export` prints without `--json`.
fn summary(m: &Manifest, dropped: Vec<String>) -> String {
    let mut line = format!(
        "{} rows for {} → {} ({} inside Sections/Modules); {}; left out: {}",
        m.rows,
        m.framework,
        m.file,
        m.rows_in_scopes,
        match &m.not_verified {
            None => "verified (contexts load, ground truths proved)".to_string(),
            Some(why) => format!("not verified ({why})"),
        },
        if dropped.is_empty() {
            "none".to_string()
        } else {
            dropped.join(", ")
        }
    );
    if let Some(t) = &m.tokens {
        let p = |x: &crate::export_tokens::Percentiles| {
            format!("p50 {} p90 {} p99 {} max {}", x.p50, x.p90, x.p99, x.max)
        };
        line += &format!(
            "\ntokens ({}): prompt {}; ground-truth completion {}",
            t.tokenizer,
            p(&t.prompt),
            p(&t.ground_truth_completion)
        );
    }
    line
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
        summary(&manifest, dropped)
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

//! A split of a dataset folder in the schema an RL framework reads (`prod dataset export`),
//! with a reward input on every row that `prod serve` can check as it is.
//!
//! A dataset row's `context` is what a model is shown (cut to its last `--context-bytes`, from
//! a line start): sent to the checker as it is, a quarter of the stdlib's RL rows would not
//! load (definitions before the cut are missing). Each exported row's reward input therefore
//! carries the row's *full* context, rebuilt from `sources.jsonl` by byte offsets
//! ([`dataset::Example::full_context`]); it begins at the file's start, so its `Require`s are
//! in it and the reward input needs no `imports`. A context that ends inside a Section or
//! Module is checked there, as `prod dataset validate` does. The prompt is ProD's prompt
//! format ([`prod_core::prompt::prompt_text`]: `{context}\n{statement}\n`) with the context's
//! last [`ExportSettings::prompt_context_bytes`].
//!
//! Schemas (one file, `OUT/<split>.parquet` or `.jsonl`, and `OUT/export.json` with the counts):
//! * verl: `data_source`, `prompt` (chat messages: one user message holding the prompt),
//!   `ability`, `reward_model {style, ground_truth}` (the JSON text `prod_client.compute_score`
//!   reads), `extra_info {index, id, split, logical_path, line, depth}`.
//! * TRL: `prompt` (text), `statement`, `imports`, `context`, `id`: the columns TRL hands to
//!   `prod_client.make_reward_fn`'s reward as keyword lists.
//! * OpenRLHF: `prompt`, `label` (the JSON text `prod_client.openrlhf` reads), `id`.
//!
//! The steps, in order: [`Input::read`] (the split, refused for an Isabelle dataset), the
//! [`Manifest`], [`candidates`] (rows left out for `goal_without_name`, a `Goal` block with
//! nothing to name its lemma by, and `coq_flags`, a row that needs `coqc` flags such as
//! `-noinit`, which a request cannot carry), the verification with the real checker
//! (`prod_prover::verify_ground_truths`, on by default for the RL split:
//! [`ExportSettings::verification`]), [`rows`] (with [`tokens`]: token counts and
//! `--prompt-tokens`' budget, rows over it left out as `prompt_over_token_budget`), and
//! [`write`].

pub mod tokens;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::parquet::Kind;
use serde_json::{json, Value};

use crate::dataset::{self, Example, SourceRecord};
use tokens::{TokenCounter, TokenReport};

/// The framework whose schema a file is written in (`--for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// Its name in `export.json`.
    pub fn name(self) -> &'static str {
        match self {
            Framework::Verl => "verl",
            Framework::Trl => "trl",
            Framework::Openrlhf => "openrlhf",
        }
    }
}

/// The file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    Parquet,
    Jsonl,
}

impl Format {
    fn extension(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Jsonl => "jsonl",
        }
    }
}

/// Whether to verify the rows with the real checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// The RL split is verified, the others are not.
    Default,
    /// Verify whatever the split (`--verify`).
    Yes,
    /// Do not verify (`--no-verify`).
    No,
}

/// What an export writes (the command line's choices).
/// The prompt's context bytes unless told otherwise: about 1,000 tokens, the paper's context.
pub const PROMPT_CONTEXT_BYTES: usize = 4000;

#[derive(Clone, Debug)]
pub struct ExportSettings {
    /// A directory written by `prod dataset build` (a Coq library).
    pub dir: PathBuf,
    pub framework: Framework,
    /// The split file: rl, train, val or test.
    pub split: String,
    /// The prompt shows the last this many bytes of the context (cut forward to a line start);
    /// 0: the statement alone.
    pub prompt_context_bytes: usize,
    /// verl's `data_source` (default `prod/<library>`).
    pub data_source: Option<String>,
    pub verify: Verify,
    /// Each prompt's token budget (needs a tokenizer).
    pub prompt_tokens: Option<usize>,
}

impl ExportSettings {
    /// Whether the rows are verified, or why not.
    pub fn verification(&self) -> Result<(), String> {
        match self.verify {
            Verify::No => Err("--no-verify".into()),
            Verify::Yes => Ok(()),
            Verify::Default if self.split == "rl" => Ok(()),
            Verify::Default => Err(format!(
                "the {} split is verified only with --verify",
                self.split
            )),
        }
    }
}

/// What `export.json` records.
#[derive(serde::Serialize, Debug)]
pub struct Manifest {
    pub framework: &'static str,
    pub dataset: String,
    pub split: String,
    pub file: String,
    pub rows: usize,
    /// Rows of the split left out, by reason.
    pub dropped: BTreeMap<&'static str, usize>,
    /// Rows whose context ends inside a Section or Module (checked there).
    pub rows_in_scopes: usize,
    /// Whether every row's context was loaded and its ground truth proved by the real Coq.
    pub verified: bool,
    /// Why not, when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_verified: Option<String>,
    /// Per file whose later rows were left out, Coq's reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_loaded: BTreeMap<String, String>,
    /// Per row left out for its ground truth, the checker's verdict.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub not_proved: BTreeMap<String, String>,
    pub prompt_context_bytes: usize,
    /// `--prompt-tokens`: the prompts' token budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<usize>,
    /// `--tokenizer`: lengths in its tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenReport>,
    pub data_source: String,
}

/// What the verification left out, for `export.json`.
#[derive(Default, Debug)]
pub struct Verification {
    /// Rows left out, by reason.
    pub dropped: BTreeMap<&'static str, usize>,
    /// Per file whose later rows were left out, Coq's reason.
    pub not_loaded: BTreeMap<String, String>,
    /// Per row left out for its ground truth, the checker's verdict.
    pub not_proved: BTreeMap<String, String>,
}

impl Manifest {
    /// An empty manifest for `input` (no rows yet, not verified).
    pub fn new(s: &ExportSettings, input: &Input) -> Manifest {
        Manifest {
            framework: s.framework.name(),
            dataset: s.dir.display().to_string(),
            split: s.split.clone(),
            file: String::new(),
            rows: 0,
            dropped: BTreeMap::new(),
            rows_in_scopes: 0,
            verified: false,
            not_verified: None,
            not_loaded: BTreeMap::new(),
            not_proved: BTreeMap::new(),
            prompt_context_bytes: s.prompt_context_bytes,
            prompt_tokens: s.prompt_tokens,
            tokens: None,
            data_source: input.data_source.clone(),
        }
    }

    /// The rows were verified: what it left out.
    pub fn verified(&mut self, v: Verification) {
        self.dropped.extend(v.dropped);
        (self.not_loaded, self.not_proved) = (v.not_loaded, v.not_proved);
        self.verified = true;
    }

    /// The summary `prod dataset export` prints without `--json`: rows, verification, rows
    /// left out by reason, and the token lengths when a tokenizer measured them.
    pub fn text(&self) -> String {
        let dropped: Vec<String> = self
            .dropped
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        let verified = match &self.not_verified {
            None => "verified (contexts load, ground truths proved)".to_string(),
            Some(why) => format!("not verified ({why})"),
        };
        let left_out = match dropped.is_empty() {
            true => "none".to_string(),
            false => dropped.join(", "),
        };
        let mut line = format!(
            "{} rows for {} → {} ({} inside Sections/Modules); {verified}; left out: {left_out}",
            self.rows, self.framework, self.file, self.rows_in_scopes,
        );
        if let Some(t) = &self.tokens {
            let p = |x: &tokens::Percentiles| {
                format!("p50 {} p90 {} p99 {} max {}", x.p50, x.p90, x.p99, x.max)
            };
            let (prompt, gt) = (p(&t.prompt), p(&t.ground_truth_completion));
            line += &format!(
                "\ntokens ({}): prompt {prompt}; ground-truth completion {gt}",
                t.tokenizer
            );
        }
        line
    }
}

/// The split's examples and what they need: the files' texts and the `data_source`.
pub struct Input {
    /// The split's file.
    pub path: PathBuf,
    pub examples: Vec<Example>,
    pub sources: HashMap<String, SourceRecord>,
    pub data_source: String,
}

impl Input {
    /// Reads the split of `s.dir` (verified against its `stats.json`); an unknown split and an
    /// Isabelle dataset are refused.
    pub fn read(s: &ExportSettings) -> Result<Input, String> {
        if !["rl", "train", "val", "test"].contains(&s.split.as_str()) {
            return Err(format!(
                "--split {:?}: expected rl, train, val or test",
                s.split
            ));
        }
        crate::output::verify(&s.dir)?;
        let stats = dataset::read_stats(&s.dir)?;
        if stats.prover == "isabelle" {
            return Err(format!(
                "{}: an Isabelle dataset; `prod dataset export` writes Coq datasets",
                s.dir.display()
            ));
        }
        let sources = dataset::read_sources(&s.dir)?;
        let path = s.dir.join(format!("{}.jsonl", s.split));
        let examples = dataset::read_examples(&path)?;
        let data_source = s
            .data_source
            .clone()
            .unwrap_or_else(|| format!("prod/{}", stats.library));
        Ok(Input {
            path,
            examples,
            sources,
            data_source,
        })
    }
}

/// A row that may be written: its example and its full context (what the reward input holds).
pub struct Candidate<'a> {
    pub example: &'a Example,
    pub full: String,
}

/// The examples that can become rows, each with its full context; the others are counted in
/// the manifest by why they were dropped (no name, or Coq flags a framework cannot set).
pub fn candidates<'e>(
    input: &'e Input,
    manifest: &mut Manifest,
) -> Result<Vec<Candidate<'e>>, String> {
    let mut candidates = Vec::new();
    for e in &input.examples {
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
        let full = input
            .sources
            .get(&e.logical_path)
            .and_then(|s| e.full_context(s))
            .ok_or_else(|| {
                format!(
                    "{}: example {}: its file is not in sources.jsonl (or its offsets are not in it)",
                    input.path.display(),
                    e.id
                )
            })?;
        candidates.push(Candidate { example: e, full });
    }
    Ok(candidates)
}

/// The last `n` bytes of `context` (trailing blanks removed), cut forward to a line start when
/// one is among them.
pub fn context_tail(context: &str, n: usize) -> &str {
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

/// The reward input of a row: what `prod_client` turns into a `prod check` node.
fn reward_input(id: &str, statement: &str, context: &str) -> Value {
    json!({"id": id, "statement": statement, "imports": "", "context": context})
}

/// One row in `fw`'s schema: the `index`th written, for example `e` with full context `full`
/// and prompt `p`.
fn row(fw: Framework, index: usize, e: &Example, full: &str, p: &str, data_source: &str) -> Value {
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

/// The rows (JSON lines) of the candidates left, counted in the manifest with, given a
/// tokenizer, their token lengths; rows whose prompt does not fit `--prompt-tokens` are left
/// out.
pub fn rows(
    s: &ExportSettings,
    counter: Option<&TokenCounter>,
    candidates: &[Candidate<'_>],
    manifest: &mut Manifest,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let (mut prompt_counts, mut completion_counts) = (vec![], vec![]);
    for c in candidates {
        let e = c.example;
        let Some((p, tokens)) = row_prompt(s, counter, c)? else {
            *manifest
                .dropped
                .entry("prompt_over_token_budget")
                .or_default() += 1;
            continue;
        };
        if let (Some(counter), Some(n)) = (counter, tokens) {
            prompt_counts.push(n);
            completion_counts.push(counter.count(&e.conditional_proof)?);
        }
        let r = row(
            s.framework,
            manifest.rows,
            e,
            &c.full,
            &p,
            &manifest.data_source,
        );
        serde_json::to_writer(&mut out, &r).map_err(|e| e.to_string())?;
        out.push(b'\n');
        manifest.rows += 1;
        manifest.rows_in_scopes += usize::from(!e.scope.is_empty());
    }
    manifest.tokens = counter.map(|c| TokenReport {
        tokenizer: c.path.display().to_string(),
        prompt: tokens::percentiles(prompt_counts),
        ground_truth_completion: tokens::percentiles(completion_counts),
    });
    Ok(out)
}

/// A row's prompt and, with a tokenizer, its token count: the context's last
/// `prompt_context_bytes`, cut further to fit `prompt_tokens`; `None` when the statement alone
/// does not fit.
fn row_prompt(
    s: &ExportSettings,
    counter: Option<&TokenCounter>,
    c: &Candidate<'_>,
) -> Result<Option<(String, Option<usize>)>, String> {
    let statement = &c.example.statement;
    let prompt = prod_core::prompt::prompt_text;
    let tail = context_tail(&c.full, s.prompt_context_bytes);
    match (counter, s.prompt_tokens) {
        (Some(counter), Some(budget)) => {
            let tails = tokens::line_tails(&c.full, tail);
            let fit = tokens::fit_prompt(counter, &tails, budget, |t| prompt(t, statement))?;
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

/// The Parquet columns of each framework's rows.
pub fn schema(fw: Framework) -> Vec<(&'static str, Kind)> {
    let utf8 = |names: &[&'static str]| names.iter().map(|&n| (n, Kind::Utf8)).collect();
    match fw {
        Framework::Verl => {
            let message = Kind::Struct(utf8(&["role", "content"]));
            let extra_info = Kind::Struct(vec![
                ("index", Kind::Int64),
                ("id", Kind::Utf8),
                ("split", Kind::Utf8),
                ("logical_path", Kind::Utf8),
                ("line", Kind::Int64),
                ("depth", Kind::Int64),
            ]);
            vec![
                ("data_source", Kind::Utf8),
                ("prompt", Kind::List(Box::new(message))),
                ("ability", Kind::Utf8),
                (
                    "reward_model",
                    Kind::Struct(utf8(&["style", "ground_truth"])),
                ),
                ("extra_info", extra_info),
            ]
        }
        Framework::Trl => utf8(&["prompt", "statement", "imports", "context", "id"]),
        Framework::Openrlhf => utf8(&["prompt", "label", "id"]),
    }
}

/// Writes the rows (`jsonl`) as `out/<split>.<format>` and the manifest (naming that file) as
/// `out/export.json`, each through a temporary file renamed into place.
pub fn write(
    out: &Path,
    format: Format,
    fw: Framework,
    jsonl: &[u8],
    manifest: &mut Manifest,
) -> Result<(), String> {
    let write_atomic = |path: &Path, bytes: &[u8]| {
        crate::output::write_atomic(path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let file = out.join(format!("{}.{}", manifest.split, format.extension()));
    match format {
        Format::Jsonl => write_atomic(&file, jsonl)?,
        Format::Parquet => {
            crate::parquet::jsonl_to_parquet_with(
                &mut std::io::Cursor::new(jsonl),
                &schema(fw),
                &file,
            )?;
        }
    }
    manifest.file = file.display().to_string();
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n";
    write_atomic(&out.join("export.json"), text.as_bytes())
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
    }

    #[test]
    fn the_rl_split_alone_is_verified_by_default() {
        let mut s = ExportSettings {
            dir: PathBuf::from("d"),
            framework: Framework::Trl,
            split: "rl".into(),
            prompt_context_bytes: 0,
            data_source: None,
            verify: Verify::Default,
            prompt_tokens: None,
        };
        assert_eq!(s.verification(), Ok(()));
        s.split = "train".into();
        assert!(s.verification().unwrap_err().contains("--verify"));
        s.verify = Verify::Yes;
        assert_eq!(s.verification(), Ok(()));
        s.verify = Verify::No;
        assert_eq!(s.verification(), Err("--no-verify".into()));
    }
}

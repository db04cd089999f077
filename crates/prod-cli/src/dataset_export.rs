//! `prod dataset export`: a split of a dataset folder in the schema an RL framework reads
//! (verl, TRL, OpenRLHF), with a reward input on every row that `prod serve` can check as it
//! is. The rows, prompts, token counts and `export.json` are `prod_library::export`'s; the
//! verification with the real checker (on by default for the RL split) is
//! `prod_prover::verify_ground_truths`. Here: the arguments, the checker they configure, the
//! progress on stderr and the summary line. Isabelle datasets are refused (exit 2).

use std::path::PathBuf;

use anyhow::{anyhow, Context as _};
use clap::Args;
use prod_library::export::{self, ExportSettings, Format, Framework, Manifest, Verify};
use prod_prover::{BatchProgress, VerifyReport};

use crate::check_progress::CheckProgress;
use crate::exit;

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
    #[arg(long, default_value_t = prod_library::export::PROMPT_CONTEXT_BYTES)]
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
    #[arg(long, default_value_t = prod_prover::DEFAULT_WORKERS, value_parser = crate::ranges::positive_usize)]
    pub workers: usize,
    /// Verification: check as a server started with --no-hammer does (CoqHammer not loaded;
    /// it changes what some contexts' own tactics do).
    #[arg(long)]
    pub no_hammer: bool,
    #[command(flatten)]
    pub prover: prod_prover::flags::ProverArgs,
    /// Verification: reads `[check.coq]` (root, limits, load paths, hammer settings).
    #[command(flatten)]
    pub config: prod_prover::flags::ConfigArg,
    /// Verification: beside the dataset's own bindings (its stats.json), always used.
    #[command(flatten)]
    pub load_paths: prod_prover::flags::LoadPathArgs,
    /// Machine-readable output: export.json's object.
    #[arg(long)]
    pub json: bool,
}

impl ExportArgs {
    /// The library's settings from the command line.
    fn settings(&self) -> ExportSettings {
        ExportSettings {
            dir: self.dir.clone(),
            framework: self.framework,
            split: self.split.clone(),
            prompt_context_bytes: self.prompt_context_bytes,
            data_source: self.data_source.clone(),
            verify: if self.no_verify {
                Verify::No
            } else if self.verify {
                Verify::Yes
            } else {
                Verify::Default
            },
            prompt_tokens: self.prompt_tokens,
        }
    }
}

/// The Coq checker of the verification: `[check.coq]`, the prover root, the dataset's bindings
/// and the command's flags.
fn export_checker(a: &ExportArgs) -> anyhow::Result<prod_check_coq::CoqChecker> {
    let mut cfg = a.config.coq_config(&a.prover).map_err(anyhow::Error::msg)?;
    a.load_paths
        .apply(&mut cfg, Some(&a.dir))
        .map_err(|e| anyhow!(e))?;
    cfg.workers = a.workers;
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    prod_check_coq::CoqChecker::new(cfg).map_err(|e| anyhow!("cannot start the Coq checker: {e}"))
}

/// The verification's progress and the rows it leaves out, on stderr.
struct StderrReport;

impl VerifyReport for StderrReport {
    fn batch(&self, phase: &str, total: usize) -> Box<dyn BatchProgress> {
        Box::new(CheckProgress::new(phase, total, true))
    }

    fn context_not_loaded(&self, file: &str, rows: usize, reason: &str) {
        eprintln!("context does not load ({rows} row(s) of {file}): {reason}");
    }

    fn ground_truth_infra(&self, id: &str, why: &str) {
        eprintln!("ground truth not checked (infra) for {id}: {why}");
    }
}

/// The rows (JSON lines) of the export and its manifest.
fn rows(a: &ExportArgs) -> anyhow::Result<(Vec<u8>, Manifest)> {
    let s = a.settings();
    let input = export::Input::read(&s).map_err(|e| anyhow!(e))?;
    let mut manifest = Manifest::new(&s, &input);
    let counter = a
        .tokenizer
        .as_deref()
        .map(|p| {
            export::tokens::TokenCounter::load(p)
                .map_err(|e| anyhow!(e))
                .context("--tokenizer")
        })
        .transpose()?;
    let mut candidates = export::candidates(&input, &mut manifest).map_err(|e| anyhow!(e))?;
    match s.verification() {
        Ok(()) => manifest.verified(prod_prover::verify_ground_truths(
            &export_checker(a)?,
            &mut candidates,
            &StderrReport,
        )),
        Err(why) => manifest.not_verified = Some(why),
    }
    let jsonl =
        export::rows(&s, counter.as_ref(), &candidates, &mut manifest).map_err(|e| anyhow!(e))?;
    Ok((jsonl, manifest))
}

pub fn run(a: ExportArgs) -> exit::Result {
    let (jsonl, mut manifest) = rows(&a).map_err(exit::Failure::BadInput)?;
    let fw = a.settings().framework;
    export::write(&a.out, a.format, fw, &jsonl, &mut manifest).map_err(exit::other)?;
    exit::println(match a.json {
        true => serde_json::to_string(&manifest).unwrap_or_default(),
        false => manifest.text(),
    })
}

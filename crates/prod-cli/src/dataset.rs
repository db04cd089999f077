//! `prod dataset …`: build ProD datasets from a proof library, print their stats, validate them.

use std::io::Write as _;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use prod_library::dataset;
use prod_prover::build::BuildFlags;
use prod_prover::validate::{self, Counts};

use crate::check_progress::{self, CheckProgress};
use crate::{exit, ranges};

#[derive(Subcommand)]
pub enum DatasetCommand {
    #[command(verbatim_doc_comment)]
    /// Build a dataset directory from a Coq library or the AFP (paper §2 "Dataset construction").
    ///
    /// Segments every file into blocks c1 s1 p1 … cl sl pl, peels the proof trees (T_tree), writes
    /// contexts and conditional proofs, replaces hammer-findable steps by `hammer.` (Coq) or
    /// `sledgehammer` (Isabelle), and splits: Coq by the dependency graph, the AFP by the paper's
    /// 36 holdout entries (or --split deps / after:DATE). Output: train/val/test/rl/sft(+_wl
    /// variants).jsonl, sources.jsonl, skipped.jsonl, a dataset card README.md (Hugging Face
    /// `datasets.load_dataset(DIR)` loads it: one config per variant), stats.json (schema:
    /// docs/dataset.md). Files are written as NAME.tmp and renamed into place, stats.json last:
    /// an interrupted build never leaves a folder that passes for complete.
    ///
    /// Examples:
    ///   prod dataset build --prover coq --library stdlib --out data/stdlib
    ///   prod dataset build --library all --out data/all          # every installed libcoq-* package
    ///   prod dataset build --library libcoq-hammer --out data/hammer
    ///   prod dataset build --library ./my-project --out data/mine  # uses its _CoqProject
    ///   prod dataset build --prover isabelle --library /data/afp-2022-12-06 --out data/afp
    ///   prod dataset build --prover isabelle --library afp --afp afp-2022-12-06.tar.xz --out data/afp
    ///   prod dataset build --prover isabelle --library afp --afp DIR --split after:2022-06-01 --out data/ood
    Build(BuildArgs),
    /// Print the stats of a built dataset directory, after checking it is complete.
    ///
    /// Every file stats.json lists (files_written) must be there with that many lines, and a
    /// folder left by an interrupted build (no stats.json) is refused: exit 2, naming the file.
    ///
    /// Example:
    ///   prod dataset stats data/stdlib --json
    Stats(StatsArgs),
    #[command(verbatim_doc_comment)]
    /// Write the compact Parquet form of a dataset folder, one folder per config.
    ///
    /// OUT/<config>/<split>.parquet for every config of the folder's card (default, w_lemmas,
    /// sft, rl, sources, skipped), zstd-compressed with dictionary encoding, so each file's
    /// context is stored about once instead of on every row (the stdlib's train.jsonl, 107 MB,
    /// becomes about 3 MB); a dataset card README.md, so `datasets.load_dataset(OUT)` loads it
    /// as it loads the JSONL folder; parquet.json lists each file with its rows and bytes. The
    /// folder is checked against its stats.json first; OUT is written beside itself and renamed
    /// into place, and only a folder this command wrote is ever replaced.
    ///
    /// Example:
    ///   prod dataset parquet data/stdlib --out data/stdlib-parquet
    Parquet(ParquetArgs),
    #[command(verbatim_doc_comment)]
    /// Check sampled ground-truth conditional proofs with the real Coq checker.
    ///
    /// Each sampled example is checked in its full context (from sources.jsonl) with its proposed
    /// lemmas admitted and `hammer.` steps expanded by the checker. With --trees, each sampled
    /// T_tree root is checked together with its ground-truth lemmas (recursively), the tree is
    /// assembled child-first and the complete file is compiled cold by coqc. Prints
    /// {"checked": N, "proved": P, "failed": F, "timed_out": T, "rejected": R, "infra": I};
    /// every miss is listed on stderr, except contexts that do not load: those are reported
    /// once per file with Coq's reason. When stderr is not a terminal, a progress line goes there
    /// every 30 s (PROD_PROGRESS_SECS), also while nothing ends.
    ///
    /// Examples:
    ///   prod dataset validate data/stdlib --split test --sample 500 --seed 0 --json
    ///   prod dataset validate data/stdlib --trees --sample 200 --json
    Validate(ValidateArgs),
    #[command(verbatim_doc_comment)]
    /// Write a split in an RL framework's schema (verl, TRL, OpenRLHF), every row checkable.
    ///
    /// Each row's reward input carries the row's full context, rebuilt from sources.jsonl by
    /// byte offsets (the inline `context` is cut and would not load), for prod_client's reward
    /// functions and `prod serve`; the prompt is ProD's prompt format with the context's last
    /// --prompt-context-bytes. verl: Parquet with prompt (chat messages), data_source,
    /// reward_model.ground_truth, extra_info; TRL: prompt, statement, imports, context; OpenRLHF:
    /// prompt, label. The RL split is verified by default (each row's context loads and its
    /// ground truth proves in the real Coq, or the row is left out); --tokenizer reports token
    /// lengths and --prompt-tokens caps the prompts. OUT/export.json counts the rows written and
    /// those left out, by reason (docs/serve.md "Datasets for RL frameworks").
    ///
    /// Examples:
    ///   prod dataset export data/stdlib --for verl --out data/stdlib-verl --tokenizer models/sft
    ///   prod dataset export data/stdlib --for trl --out data/stdlib-trl --format jsonl
    ///   prod dataset export data/stdlib --for openrlhf --split test --out data/stdlib-openrlhf
    Export(crate::dataset_export::ExportArgs),
}

#[derive(Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub flags: BuildFlags,
    /// Print the stats as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct StatsArgs {
    /// A directory written by `prod dataset build`.
    pub dir: PathBuf,
    /// Machine-readable output: one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ParquetArgs {
    /// A directory written by `prod dataset build`.
    pub dir: PathBuf,
    /// The Parquet folder to write (must not exist, or be one this command wrote).
    #[arg(long)]
    pub out: PathBuf,
    /// Machine-readable output: one JSON object per file.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ValidateArgs {
    /// A directory written by `prod dataset build`.
    pub dir: PathBuf,
    /// Which split file to sample from (train, val, test, rl, sft).
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Number of examples (or trees with --trees) to check.
    #[arg(long, default_value_t = prod_prover::validate::DEFAULT_SAMPLE, value_parser = ranges::positive_usize)]
    pub sample: usize,
    /// Seed of the sample.
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
    /// Assemble ground-truth proof trees and compile them cold instead of checking single proofs.
    #[arg(long)]
    pub trees: bool,
    /// Allow, by name, the constants the examples' contexts admit without proof (each example's
    /// `context_axioms`: an `Axiom`, `Parameter` or `Admitted` lemma of the file before it).
    /// Without it they excuse nothing, as in every check (docs/soundness.md); a library's own
    /// ground truth may rely on its file's axioms (the stdlib's `Uint63`, its classical reals).
    #[arg(long)]
    pub allow_context_axioms: bool,
    #[command(flatten)]
    pub prover: prod_prover::flags::ProverArgs,
    /// Beside the dataset's own bindings (its stats.json), which are always used.
    #[command(flatten)]
    pub load_paths: prod_prover::flags::LoadPathArgs,
    /// Reads `[check.coq]` (root, limits, load paths, hammer settings).
    #[command(flatten)]
    pub config: prod_prover::flags::ConfigArg,
    /// Machine-readable output: one JSON object (misses still go to stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: DatasetCommand) -> exit::Result {
    match cmd {
        DatasetCommand::Build(a) => build(a),
        DatasetCommand::Stats(a) => stats(a),
        DatasetCommand::Parquet(a) => parquet(a),
        DatasetCommand::Validate(a) => validate(a),
        DatasetCommand::Export(a) => crate::dataset_export::run(a),
    }
}

fn build(a: BuildArgs) -> exit::Result {
    let display = prod_progress::Display::for_stderr(a.json);
    let pb = prod_progress::Progress::new(display, "build", a.flags.unit(), None);
    let result = a.flags.build(&|done: usize, total: usize| {
        pb.set_total(total as u64);
        pb.set_position(done as u64);
    });
    pb.finish();
    print_stats(&result?, a.json)
}

fn print_stats(s: &dataset::Stats, json: bool) -> exit::Result {
    match json {
        true => exit::println(serde_json::to_string(s).map_err(exit::other)?),
        false => exit::print(&s.text()),
    }
}

fn parquet(a: ParquetArgs) -> exit::Result {
    let written = prod_library::parquet::write_dataset(&a.dir, &a.out).map_err(exit::input)?;
    let mut lines: Vec<String> = written
        .iter()
        .map(|w| match a.json {
            true => serde_json::to_string(w).unwrap_or_default(),
            false => w.text(),
        })
        .collect();
    if !a.json {
        lines.push(prod_library::parquet::Written::total(&written, &a.out));
    }
    let mut out = std::io::stdout().lock();
    exit::written(lines.iter().try_for_each(|l| writeln!(out, "{l}")))
}

fn stats(a: StatsArgs) -> exit::Result {
    print_stats(
        &prod_library::output::verify(&a.dir).map_err(exit::input)?,
        a.json,
    )
}

/// The counts `validate` prints (the interface the CEO's checks read).
fn validate(a: ValidateArgs) -> exit::Result {
    let cfg = a.config.coq_config(&a.prover).map_err(exit::input)?;
    let paths = &a.load_paths.load_path;
    let (examples, checker) = validate::open(&a.dir, &a.split, cfg, paths, a.allow_context_axioms)?;
    if a.trees {
        return validate_trees(&a, examples, &checker);
    }
    let chosen = validate::sample(examples, a.sample, a.seed);
    let progress = CheckProgress::new("validate", chosen.len(), a.json);
    let outcome = validate::check_sample(&chosen, &checker, &progress).map_err(exit::input)?;
    for m in &outcome.misses {
        // The misses, for analysis (stderr keeps stdout one JSON object).
        eprintln!("miss {}", m.line);
    }
    // A context that does not load: once per file and reason, not once per example.
    check_progress::report_context_failures(
        outcome
            .context_failures
            .iter()
            .map(|(f, r)| (f.as_str(), r.as_str())),
    );
    // Appendix A.3 bookkeeping, on stderr so that stdout stays the one JSON object.
    let (hammer_proved, hammer_examples) = outcome.hammer;
    eprintln!(
        "hammer: {hammer_proved} of {hammer_examples} checked examples with `hammer.` steps proved"
    );
    print_counts(&outcome.counts, a.json)
}

fn print_counts(c: &Counts, json: bool) -> exit::Result {
    exit::println(match json {
        true => serde_json::to_string(c).unwrap_or_default(),
        false => c.text(),
    })
}

/// Ground-truth proof trees checked end to end (`prod_prover::validate::check_trees`); each
/// tree that was not proved on stderr, with the node that was not locally correct.
fn validate_trees(
    a: &ValidateArgs,
    examples: Vec<dataset::Example>,
    checker: &prod_check_coq::CoqChecker,
) -> exit::Result {
    let roots = validate::tree_roots(examples, a.sample, a.seed);
    let progress = CheckProgress::new("validate --trees", roots.len(), a.json);
    let outcome = validate::check_trees(&a.dir, &roots, checker, &progress);
    for m in &outcome.misses {
        if let Some((id, v)) = &m.node {
            let v = serde_json::to_string(v).unwrap_or_default();
            eprintln!("  node {id} of tree {}: {v}", m.root);
        }
        eprintln!(
            "miss tree {} ({} nodes): {}",
            m.root,
            m.nodes,
            serde_json::to_string(&m.verdict).unwrap_or_default()
        );
    }
    print_counts(&outcome.counts, a.json)
}

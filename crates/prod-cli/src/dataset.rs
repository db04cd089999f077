//! `prod dataset …`: build ProD datasets from a proof library, print their stats, validate them.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use prod_library::dataset::{self, DatasetConfig};
use prod_library::isar::{AfpOptions, AfpSource, AfpSplit, EntrySelection};
use prod_library::LibrarySpec;
use prod_prover::validate::{self, Counts};
use prod_prover::ProverKind;

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
    /// Prover whose library is read.
    #[arg(long, value_enum, default_value_t = ProverKind::Coq)]
    pub prover: ProverKind,
    /// Coq: `stdlib`, `all`, a Debian package (`libcoq-mathcomp-ssreflect`), a user-contrib root
    /// (`Hammer`), or a directory (with or without a `_CoqProject`). Isabelle: `afp` (with
    /// --afp) or the unpacked AFP directory (the one holding `thys/`).
    #[arg(long, default_value = "stdlib")]
    pub library: String,
    /// Isabelle: the AFP, unpacked (the directory holding `thys/`) or as its release tarball
    /// (`afp-2022-12-06.tar.xz`, unpacked once into the temporary directory and reused).
    #[arg(long)]
    pub afp: Option<PathBuf>,
    /// Isabelle: the test split: `holdout` (the paper's 36 entries), `deps` (a seeded sample of
    /// the entries nothing depends on, --test-fraction), or `after:YYYY-MM-DD` (entries dated
    /// after that day; entries that depend on them are left out).
    #[arg(long, default_value = "holdout")]
    pub split: String,
    /// Isabelle: build only some entries: `N` (the first N in dependency order) or `A,B,C`.
    #[arg(long)]
    pub entries: Option<String>,
    /// Output directory (created; existing dataset files in it are replaced at the end of the
    /// build, a README.md only if a build wrote it).
    #[arg(long)]
    pub out: PathBuf,
    /// Coq installation root (`coqc -where`; default: the host's Coq, or the --coq-root's).
    #[arg(long)]
    pub coqlib: Option<PathBuf>,
    #[command(flatten)]
    pub root: prod_prover::flags::ProverArgs,
    #[command(flatten)]
    pub settings: DatasetConfig,
    /// Keep at most this many bytes of each context inline (0: whole contexts; the dataset then
    /// grows quadratically with file size). Full contexts are always in sources.jsonl.
    /// Default: 16384 for Coq, 4096 for Isabelle (the paper keeps the last 1k tokens; the AFP
    /// with 16 KiB contexts is 9.4 GB of JSONL).
    #[arg(long)]
    pub context_bytes: Option<usize>,
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

pub fn run(cmd: DatasetCommand) -> i32 {
    match cmd {
        DatasetCommand::Build(a) => build(a),
        DatasetCommand::Stats(a) => stats(a),
        DatasetCommand::Parquet(a) => parquet(a),
        DatasetCommand::Validate(a) => validate(a),
        DatasetCommand::Export(a) => crate::dataset_export::run(a),
    }
}

fn build(a: BuildArgs) -> i32 {
    let cfg = match build_config(&a) {
        Ok(c) => c,
        Err(e) => return exit::bad_input(e),
    };
    let unit = if a.prover == ProverKind::Isabelle {
        "theories"
    } else {
        "files"
    };
    let pb = prod_progress::Progress::new(
        prod_progress::Display::for_stderr(a.json),
        "build",
        unit,
        None,
    );
    let cb = |done: usize, total: usize| {
        pb.set_total(total as u64);
        pb.set_position(done as u64);
    };
    let result = if a.prover == ProverKind::Isabelle {
        let (dir, opts) = match afp_selection(&a) {
            Ok(s) => s,
            Err(e) => return exit::bad_input(e),
        };
        let started = std::time::Instant::now();
        match AfpSource::load(&dir, opts) {
            Ok(src) => dataset::build_from(&src, &a.out, &cfg, &cb, started),
            Err(e) => Err(e.into()),
        }
    } else {
        let spec = LibrarySpec::parse(&a.library);
        dataset::build(&spec, &a.out, &cfg, Some(&prod_coq::CoqLanguage), &cb)
    };
    pb.finish();
    match result {
        Ok(stats) => print_stats(&stats, a.json),
        Err(e @ dataset::BuildError::Discovery(_)) => exit::bad_input(e.into()),
        Err(e) => exit::failure(e.into()),
    }
}

/// The build's settings from the command line (bad input: the two fractions leave nothing to
/// train on, or the Coq root's `coqlib` cannot be read).
fn build_config(a: &BuildArgs) -> anyhow::Result<DatasetConfig> {
    let (test, val) = (a.settings.test_fraction, a.settings.val_fraction);
    if test + val >= 1.0 {
        return Err(anyhow!(
            "--test-fraction {test} plus --val-fraction {val} must be less than 1"
        ));
    }
    let mut cfg = DatasetConfig {
        context_bytes: a.context_bytes.unwrap_or(match a.prover {
            ProverKind::Isabelle => DatasetConfig::ISABELLE_CONTEXT_BYTES,
            ProverKind::Coq => DatasetConfig::COQ_CONTEXT_BYTES,
        }),
        ..a.settings.clone()
    };
    match (&a.coqlib, a.root.coqlib()) {
        (Some(c), _) => cfg.coqlib = c.clone(),
        (None, Ok(Some(c))) => cfg.coqlib = c,
        (None, Ok(None)) => {}
        (None, Err(e)) => return Err(anyhow!(e)),
    }
    Ok(cfg)
}

/// Isabelle: the unpacked AFP directory and which of its entries and split to read.
fn afp_selection(a: &BuildArgs) -> anyhow::Result<(PathBuf, AfpOptions)> {
    let split = AfpSplit::parse(&a.split).map_err(|e| anyhow!("--split: {e}"))?;
    let entries = a
        .entries
        .as_deref()
        .map(EntrySelection::parse)
        .unwrap_or(EntrySelection::All);
    let dir = match (&a.afp, a.library.as_str()) {
        (Some(p), _) => p.clone(),
        (None, "afp" | "stdlib") => {
            return Err(anyhow!(
                "--prover isabelle needs the AFP: --afp DIR_OR_TARBALL or --library DIR"
            ))
        }
        (None, lib) => PathBuf::from(lib),
    };
    let dir = prod_library::isar::unpacked_afp(&dir).map_err(|e| anyhow!(e))?;
    Ok((dir, AfpOptions { split, entries }))
}

fn print_stats(s: &dataset::Stats, json: bool) -> i32 {
    let o = if json {
        match serde_json::to_string(s) {
            Ok(t) => t + "\n",
            Err(e) => return exit::failure(e.into()),
        }
    } else {
        s.text()
    };
    use std::io::Write as _;
    exit::written(std::io::stdout().lock().write_all(o.as_bytes()))
}

fn parquet(a: ParquetArgs) -> i32 {
    let written = match prod_library::parquet::write_dataset(&a.dir, &a.out) {
        Ok(w) => w,
        Err(e) => return exit::bad_input(anyhow!(e)),
    };
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

fn stats(a: StatsArgs) -> i32 {
    match prod_library::output::verify(&a.dir) {
        Ok(s) => print_stats(&s, a.json),
        Err(e) => exit::bad_input(anyhow!(e)),
    }
}

/// The counts `validate` prints (the interface the CEO's checks read).
fn validate(a: ValidateArgs) -> i32 {
    let cfg = match a.config.coq_config(&a.prover) {
        Ok(c) => c,
        Err(e) => return exit::bad_input(anyhow!(e)),
    };
    let paths = &a.load_paths.load_path;
    let (examples, checker) =
        match validate::open(&a.dir, &a.split, cfg, paths, a.allow_context_axioms) {
            Ok(x) => x,
            Err(e) => return exit::setup(e),
        };
    if a.trees {
        return validate_trees(&a, examples, &checker);
    }
    let chosen = validate::sample(examples, a.sample, a.seed);
    let progress = CheckProgress::new("validate", chosen.len(), a.json);
    let outcome = match validate::check_sample(&chosen, &checker, &progress) {
        Ok(o) => o,
        Err(e) => return exit::bad_input(anyhow!(e)),
    };
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

fn print_counts(c: &Counts, json: bool) -> i32 {
    let o = match json {
        true => serde_json::to_string(c).unwrap_or_default(),
        false => c.text(),
    };
    use std::io::Write as _;
    exit::written(writeln!(std::io::stdout().lock(), "{o}"))
}

/// Ground-truth proof trees checked end to end (`prod_prover::validate::check_trees`); each
/// tree that was not proved on stderr, with the node that was not locally correct.
fn validate_trees(
    a: &ValidateArgs,
    examples: Vec<dataset::Example>,
    checker: &prod_check_coq::CoqChecker,
) -> i32 {
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

//! `prod dataset …`: build ProD datasets from a proof library, print their stats, validate them.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use prod_library::dataset::{self, DatasetConfig, SplitUnit};
use prod_library::LibrarySpec;

use crate::exit;

#[derive(Subcommand)]
pub enum DatasetCommand {
    /// Build a dataset directory from a Coq library (paper §2 "Dataset construction").
    ///
    /// Segments every file into blocks c1 s1 p1 … cl sl pl, peels the proof trees (T_tree), writes
    /// contexts and conditional proofs, replaces hammer-findable steps by `hammer.`, and splits by
    /// the dependency graph. Output: train/val/test/rl/sft(+_wl variants).jsonl, skipped.jsonl,
    /// stats.json (schema: docs/dataset.md).
    ///
    /// Examples:
    ///   prod dataset build --prover coq --library stdlib --out data/stdlib
    ///   prod dataset build --library all --out data/all          # every installed libcoq-* package
    ///   prod dataset build --library libcoq-hammer --out data/hammer
    ///   prod dataset build --library ./my-project --out data/mine  # uses its _CoqProject
    Build(BuildArgs),
    /// Print the stats of a built dataset directory.
    ///
    /// Example: prod dataset stats data/stdlib --json
    Stats(StatsArgs),
    /// Check sampled ground-truth conditional proofs with the real Coq checker.
    ///
    /// Example: prod dataset validate data/stdlib --split test --sample 500 --seed 0 --json
    Validate(ValidateArgs),
}

#[derive(Args)]
pub struct BuildArgs {
    /// Prover whose library is read (only `coq` for now).
    #[arg(long, default_value = "coq")]
    pub prover: String,
    /// `stdlib`, `all`, a Debian package (`libcoq-mathcomp-ssreflect`), a user-contrib root
    /// (`Hammer`), or a directory (with or without a `_CoqProject`).
    #[arg(long, default_value = "stdlib")]
    pub library: String,
    /// Output directory (created; existing dataset files in it are overwritten).
    #[arg(long)]
    pub out: PathBuf,
    /// Coq installation root (`coqc -where`).
    #[arg(long)]
    pub coqlib: Option<PathBuf>,
    /// Seed for the test-unit sample and the validation draw.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Share of dependency sinks held out as test units.
    #[arg(long, default_value_t = 0.1)]
    pub test_fraction: f64,
    /// Share of the remaining examples drawn for validation.
    #[arg(long, default_value_t = 0.05)]
    pub val_fraction: f64,
    /// Split unit: auto (package if the library has several, else file), package, file.
    #[arg(long, default_value = "auto")]
    pub unit: String,
    /// Keep proof steps as written (no `hammer.` replacement).
    #[arg(long)]
    pub no_hammer: bool,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Print the stats as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct StatsArgs {
    pub dir: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ValidateArgs {
    pub dir: PathBuf,
    /// Which split file to sample from (train, val, test).
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Number of examples (or trees with --trees) to check.
    #[arg(long, default_value_t = 100)]
    pub sample: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Assemble ground-truth proof trees and compile them cold instead of checking single proofs.
    #[arg(long)]
    pub trees: bool,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: DatasetCommand) -> i32 {
    match cmd {
        DatasetCommand::Build(a) => build(a),
        DatasetCommand::Stats(a) => stats(a),
        DatasetCommand::Validate(a) => validate(a),
    }
}

fn progress_bar(enabled: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} files {pos}/{len} [{bar:40}] {elapsed}") {
        pb.set_style(style);
    }
    Some(pb)
}

fn build(a: BuildArgs) -> i32 {
    if a.prover != "coq" {
        return exit::bad_input(anyhow!("--prover {:?}: only `coq` is supported (Isabelle is issue F)", a.prover));
    }
    let unit = match a.unit.as_str() {
        "auto" => SplitUnit::Auto,
        "package" => SplitUnit::Package,
        "file" => SplitUnit::File,
        other => return exit::bad_input(anyhow!("--unit {other:?}: expected auto, package or file")),
    };
    if !(0.0..=1.0).contains(&a.test_fraction) || !(0.0..=1.0).contains(&a.val_fraction) {
        return exit::bad_input(anyhow!("--test-fraction and --val-fraction must lie in [0, 1]"));
    }
    let mut cfg = DatasetConfig { seed: a.seed, test_fraction: a.test_fraction, val_fraction: a.val_fraction, unit, hammer: !a.no_hammer, threads: a.threads, ..Default::default() };
    if let Some(c) = a.coqlib {
        cfg.coqlib = c;
    }
    let pb = progress_bar(!a.json);
    let cb = |done: usize, total: usize| {
        if let Some(pb) = &pb {
            pb.set_length(total as u64);
            pb.set_position(done as u64);
        }
    };
    let spec = LibrarySpec::parse(&a.library);
    let result = dataset::build(&spec, &a.out, &cfg, None, &cb);
    if let Some(pb) = &pb {
        pb.finish_and_clear();
    }
    match result {
        Ok(stats) => print_stats(&stats, a.json),
        Err(e @ dataset::BuildError::Discovery(_)) => exit::bad_input(e.into()),
        Err(e) => exit::failure(e.into()),
    }
}

fn print_stats(s: &dataset::Stats, json: bool) -> i32 {
    if json {
        return match serde_json::to_string(s) {
            Ok(t) => {
                println!("{t}");
                0
            }
            Err(e) => exit::failure(e.into()),
        };
    }
    println!("library {}: {} files ({} with .glob references, {} unreadable), {} theorem blocks ({} Qed, {} Defined)", s.library, s.files, s.files_with_glob_refs, s.files_failed, s.blocks, s.blocks_qed, s.blocks_defined);
    println!("examples: {}", s.examples_per_split.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    println!("files written: {}", s.files_written.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    println!("peeled (T_tree): {} ({:.1}% of theorems with an example)", s.peeled, 100.0 * s.peeled_share);
    println!("depth histogram: {}", s.depth_histogram.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(" "));
    println!("hammer replacement: {} steps in {} examples", s.replaced_steps, s.examples_with_replacement);
    println!("skipped blocks: {}", s.skipped_by_reason.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    println!("split unit: {} ({} units; test: {})", s.split_unit, s.units, s.test_units.join(" "));
    for n in &s.notes {
        println!("note: {n}");
    }
    println!("built in {:.2} s", s.seconds);
    0
}

fn stats(a: StatsArgs) -> i32 {
    match dataset::read_stats(&a.dir) {
        Ok(s) => print_stats(&s, a.json),
        Err(e) => exit::bad_input(anyhow!(e)),
    }
}

fn validate(_a: ValidateArgs) -> i32 {
    exit::failure(anyhow!("`prod dataset validate` is not wired yet: it needs the Coq checker of issue B"))
}

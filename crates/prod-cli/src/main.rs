//! `prod` — Proof Decomposer: datasets, checking, proof trees, RL and reports.
//!
//! Each subcommand lives in its own module with an `Args` (clap) and a `run` that returns an
//! [`exit::Result`]; [`exit::code`] alone turns it into the process's exit code.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod bench;
mod bench_libraries;
mod bench_serve;
#[cfg(feature = "policy")]
mod ceiling;
mod check;
mod check_progress;
mod dataset;
mod dataset_export;
#[cfg(feature = "policy")]
mod demo;
mod draw;
#[cfg(feature = "policy")]
mod eval;
mod exit;
#[cfg(feature = "policy")]
mod experiment;
#[cfg(feature = "policy")]
mod merge_lora;
#[cfg(feature = "policy")]
mod model;
#[cfg(feature = "policy")]
mod prompts;
mod queue;
mod ranges;
mod report;
#[cfg(feature = "policy")]
mod rl;
#[cfg(feature = "policy")]
mod run_store;
mod serve;
mod tree;

// Training allocates and frees tensors of megabytes each step: glibc returns them to the OS and
// the kernel zeroes fresh pages on every reuse (17% of a training step in `perf`, 2.4 M page
// faults in `prod model bench`). mimalloc with purging off keeps them (7.8 k page faults).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v2's `mi_option_t` (include/mimalloc.h; the version is
/// pinned by Cargo.lock): -1 = never return freed memory to the OS.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// ProD: an LLM writes proofs that may propose lemmas, a real prover checks every piece,
/// and the pieces from all samples are combined into proof trees.
#[derive(Parser)]
#[command(name = "prod", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A command with its own `Args` struct has its help in that struct's doc comment (one place,
/// beside its flags; a doc comment on the variant here would replace it); a group of commands
/// has its one-line summary here.
#[derive(Subcommand)]
enum Command {
    /// Datasets: build from a proof library, stats, validation with the real checker.
    #[command(subcommand)]
    Dataset(dataset::DatasetCommand),
    Check(check::CheckArgs),
    Serve(serve::ServeArgs),
    /// Checking at scale: a PostgreSQL queue of nodes that `prod queue work` drains on many machines.
    ///
    /// Workers on several machines drain the queue together (claims with FOR UPDATE SKIP LOCKED;
    /// a dead worker's claims expire).
    #[command(subcommand)]
    Queue(queue::QueueCommand),
    /// Benchmarks, measured side by side in one process.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Proof trees: global correctness of checked nodes, assembly of complete proofs.
    #[command(subcommand)]
    Tree(tree::TreeCommand),
    /// The native policy: create, import a GGUF, sample, train (weighted CE), benchmark.
    #[cfg(feature = "policy")]
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Training: `sft` (the policy) and `value` (the value model V); see `prod model train`.
    #[cfg(feature = "policy")]
    #[command(subcommand)]
    Train(model::TrainCommand),
    #[cfg(feature = "policy")]
    Eval(Box<eval::EvalArgs>),
    #[cfg(feature = "policy")]
    Demo(demo::DemoArgs),
    #[cfg(feature = "policy")]
    Experiment(experiment::ExperimentArgs),
    #[cfg(feature = "policy")]
    Ceiling(ceiling::CeilingArgs),
    #[cfg(feature = "policy")]
    Rl(rl::RlArgs),
    Report(report::ReportArgs),
    /// A run's store: `export` every node with its local and global verdicts as JSONL.
    #[cfg(feature = "policy")]
    #[command(subcommand)]
    Run(run_store::RunCommand),
}

fn main() {
    // SAFETY: sets a process-wide allocator option before any thread is started.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    // Before any thread or tensor op: candle reads its thread settings once.
    #[cfg(feature = "policy")]
    prod_policy::init_cpu_threads();
    let mut cmd = ranges::negative_numbers_as_values(Cli::command());
    let cli = cmd
        .try_get_matches_from_mut(std::env::args_os())
        .and_then(|m| Cli::from_arg_matches(&m))
        .unwrap_or_else(|e| e.format(&mut cmd).exit());
    let result = match cli.command {
        Command::Dataset(cmd) => dataset::run(cmd),
        Command::Check(args) => check::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Queue(cmd) => queue::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Tree(cmd) => tree::run(cmd),
        #[cfg(feature = "policy")]
        Command::Model(cmd) => model::run(cmd),
        #[cfg(feature = "policy")]
        Command::Train(cmd) => model::run_train(cmd),
        #[cfg(feature = "policy")]
        Command::Eval(args) => eval::run(*args),
        #[cfg(feature = "policy")]
        Command::Demo(args) => demo::run(args),
        #[cfg(feature = "policy")]
        Command::Experiment(args) => experiment::run(args),
        #[cfg(feature = "policy")]
        Command::Ceiling(args) => ceiling::run(args),
        #[cfg(feature = "policy")]
        Command::Rl(args) => rl::run(args),
        Command::Report(args) => report::run(args),
        #[cfg(feature = "policy")]
        Command::Run(cmd) => run_store::run(cmd),
    };
    std::process::exit(exit::code(result));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand with its path (`prod dataset build`).
    fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, format!("{path} {}", sub.get_name()), out);
            }
        }
    }

    #[test]
    fn every_option_has_help() {
        let mut all = Vec::new();
        walk(&Cli::command(), "prod".into(), &mut all);
        let mut missing = Vec::new();
        for (path, cmd) in &all {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "options without help text:\n{}",
            missing.join("\n")
        );
    }

    /// In `--help`, each example is a line of its own (clap joins the lines of a doc-comment
    /// paragraph unless the command keeps its text verbatim).
    #[test]
    fn examples_in_help_are_on_lines_of_their_own() {
        let mut all = Vec::new();
        walk(&Cli::command(), "prod".into(), &mut all);
        let mut joined = Vec::new();
        for (path, mut cmd) in all {
            let help = cmd.render_long_help().to_string();
            let mut in_examples = false;
            for line in help.lines() {
                let t = line.trim();
                if t.starts_with("Example") {
                    in_examples = true;
                } else if t.is_empty() {
                    in_examples = false;
                }
                if in_examples && t.split_whitespace().filter(|w| *w == "prod").count() > 1 {
                    joined.push(format!("{path}: {t}"));
                }
            }
        }
        assert!(
            joined.is_empty(),
            "examples run together:\n{}",
            joined.join("\n")
        );
    }
}

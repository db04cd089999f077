//! `prod` — Proof Decomposer: datasets, checking, proof trees, RL and reports.
//!
//! Each subcommand lives in its own module with an `Args` (clap) and a `run` that returns the
//! process exit code: 0 success, 2 bad input, 1 anything else.

use clap::{Parser, Subcommand};

mod bench;
mod check;
mod config;
mod dataset;
mod exit;
#[cfg(feature = "policy")]
mod model;
mod report;
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

#[derive(Subcommand)]
enum Command {
    /// Datasets: build from a proof library, stats, validation with the real checker.
    #[command(subcommand)]
    Dataset(dataset::DatasetCommand),
    /// Check nodes with the real prover (local correctness), one JSON line per node.
    ///
    /// Input line: {"id": "n1", "imports": "From Coq Require Import Arith List Lia.", "context": "",
    /// "statement": "Lemma foo : forall n : nat, n + 0 = n.", "proof": "<no_invoke> intros n. lia."}
    /// (`proof` is a conditional proof; its `<invoke> Lemma … . </invoke>` segments are admitted).
    /// Output line, same order: {"id": "n1", "verdict": "proved|failed|timed_out|rejected|infra",
    /// "message": "...", "time_ms": N}. Exit 0 when every line was judged, 2 on unreadable input.
    ///
    /// `--prover isabelle` sends the same lines (with Isar text) to a running Isabelle server.
    ///
    /// Example: prod check --prover coq nodes.jsonl --json --workers 2 --timeout 10
    Check(check::CheckArgs),
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
    /// Write an HTML report (SVG plots) and a Markdown summary from a run file.
    ///
    /// RUN.json is what `prod eval` / `prod rl` write (schema: `prod_report::RunReport`): the run's setup, its
    /// evaluations (pass@k with bootstrap 95% CIs, the per-depth table of paper Fig. 5, the novel-lemma share) and
    /// its RL rounds (correct nodes, weights, losses, time per phase). Writes DIR/report.html (one self-contained
    /// file: inline CSS and SVG, no scripts), DIR/summary.md (tables for docs/results.md) and each figure as
    /// DIR/FIGURE.svg. Exit 2 when RUN.json is unreadable or malformed (the message names line and column).
    ///
    /// Example: prod report runs/mini/run.json --out runs/mini/report
    Report(report::ReportArgs),
}

fn main() {
    // SAFETY: sets a process-wide allocator option before any thread is started.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Dataset(cmd) => dataset::run(cmd),
        Command::Check(args) => check::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Tree(cmd) => tree::run(cmd),
        #[cfg(feature = "policy")]
        Command::Model(cmd) => model::run(cmd),
        #[cfg(feature = "policy")]
        Command::Train(cmd) => model::run_train(cmd),
        Command::Report(args) => report::run(args),
    };
    std::process::exit(code);
}

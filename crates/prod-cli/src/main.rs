//! `prod` — Proof Decomposer: datasets, checking, proof trees, RL and reports.
//!
//! Each subcommand lives in its own module with an `Args` (clap) and a `run` that returns the
//! process exit code: 0 success, 2 bad input, 1 anything else.

use clap::{Parser, Subcommand};

mod dataset;
mod exit;
mod tree;

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
    /// Proof trees: global correctness of checked nodes, assembly of complete proofs.
    #[command(subcommand)]
    Tree(tree::TreeCommand),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Dataset(cmd) => dataset::run(cmd),
        Command::Tree(cmd) => tree::run(cmd),
    };
    std::process::exit(code);
}

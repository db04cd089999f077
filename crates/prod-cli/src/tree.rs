//! `prod tree …`: global correctness and assembly over checked proof-tree nodes.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use prod_prover::solve::{self, Given, TreeInput};
use prod_prover::Forest;
use prod_prover::ProverKind;

use crate::exit;

#[derive(Subcommand)]
pub enum TreeCommand {
    #[command(verbatim_doc_comment)]
    /// Decide global correctness of every node, and optionally assemble a complete proof.
    ///
    /// Input: JSON Lines, one node per line (blank lines are ignored), in `prod check`'s schema
    /// plus the local verdict:
    ///
    ///   {"id": "n1", "imports": "", "context": "…", "statement": "Lemma foo : …", "proof": "<use_invoke> … <invoke> Lemma bar : … </invoke> …", "locally_correct": true}
    ///
    /// `id` is a string or a number, unique in the file; `imports` and `context` default to "";
    /// unknown fields are an error. The local verdicts come from `locally_correct`, or from
    /// `prod check --json`'s output with --verdicts (proved: correct, or correct alone when its
    /// proof constrains its statement's universe levels or the line does not say, as lines
    /// written before they carried `universe_constraints`; failed, timed_out, rejected:
    /// incorrect; infra or no line: unknown). A node correct alone proves its own statement
    /// only, never another node's proposal. With --verdicts the proofs are taken as their
    /// checks closed them (`hammer.` steps replaced). A node whose proof is not a conditional
    /// proof is locally incorrect (as `prod check` rejects it), unless it claims to be correct.
    ///
    /// The children of a node are the nodes, from any line, with the same imports and context and a statement equal
    /// to one of its proposed lemmas (comments, layout and the lemma's name do not matter). A node is globally correct
    /// iff it is locally correct and each proposed lemma has a globally correct node (least fixed point: cycles prove
    /// nothing). `"locally_correct": null` means "not checked / infra failure": such nodes, and nodes that depend on
    /// them, come out as `null` (undetermined), never as false.
    ///
    /// --assemble prints the root's complete file as the final check compiles it: imports,
    /// context, the root's statement admitted under a fresh name, the lemmas child-first, the
    /// root, and a definition that has the kernel compare the root with its statement.
    ///
    /// A node that states a canary (`False`, `0 = 1`, `forall n : nat, n = S n`) and comes out
    /// locally correct without a lemma or globally correct is a soundness alarm: a line on
    /// stderr and exit code 3, after the output.
    ///
    /// Examples:
    ///   prod tree solve nodes.jsonl --json
    ///   prod tree solve nodes.jsonl --assemble n1 > n1_complete.v
    ///   prod check nodes.jsonl --json > verdicts.jsonl
    ///   prod tree solve nodes.jsonl --verdicts verdicts.jsonl --json
    Solve(SolveArgs),
}

#[derive(Args)]
pub struct SolveArgs {
    /// JSONL file of nodes (`-` for standard input).
    pub file: PathBuf,
    /// Print the complete file of the node with this id (it compiles by itself) instead of the
    /// verdicts.
    #[arg(long, value_name = "ID")]
    pub assemble: Option<String>,
    /// The local verdicts: `prod check --json`'s output for these nodes, joined by id (the
    /// nodes then carry no `locally_correct`).
    #[arg(long, value_name = "FILE")]
    pub verdicts: Option<PathBuf>,
    /// Machine-readable output: one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// The nodes' proof language: how statements match proposals, how lemmas are named.
    #[arg(long, value_enum, default_value_t = ProverKind::Coq)]
    pub prover: ProverKind,
}

pub fn run(cmd: TreeCommand) -> exit::Result {
    match cmd {
        TreeCommand::Solve(args) => run_solve(args),
    }
}

fn run_solve(args: SolveArgs) -> exit::Result {
    let input =
        TreeInput::read(&args.file, args.verdicts.as_deref(), args.prover).map_err(exit::input)?;
    let lang = args.prover.language();
    let (forest, given) = input.solve(lang);
    let alarms = solve::canary_alarms(&forest, &given, lang);
    alarms.iter().for_each(|a| eprintln!("{a}"));
    let printed = match &args.assemble {
        Some(id) => print_assembly(&args, id, &forest, &given),
        None => exit::print(&match args.json {
            true => solve::verdict_lines(&forest, &given)
                .iter()
                .map(|l| format!("{l}\n"))
                .collect(),
            false => solve::table(&forest),
        }),
    };
    // An accepted canary decides the exit code whatever else happened.
    match alarms.len() {
        0 => printed,
        n => Err(exit::Failure::Alarm(anyhow::anyhow!(
            "{n} node(s) stating a canary accepted (a statement no proof may prove)"
        ))),
    }
}

/// `--assemble ID`: the complete proof of node ID, as a file or one JSON line.
fn print_assembly(args: &SolveArgs, id: &str, forest: &Forest, given: &[Given]) -> exit::Result {
    let Some(root) = forest.nodes().iter().position(|n| n.id == id) else {
        return Err(exit::input(format!("no node with id '{id}'")));
    };
    let a = forest
        .assemble(root)
        .map_err(|e| exit::other(format!("cannot assemble: {e}")))?;
    let file = solve::complete_file(args.prover, forest, &given[root], root, &a)
        .map_err(|e| exit::other(format!("cannot write the complete file: {e}")))?;
    match args.json {
        true => exit::println(solve::assembly_json(id, &a.proof, &file)),
        false => exit::print(&file),
    }
}

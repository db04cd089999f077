//! The prover level of ProD, between the checkers (prod-check-coq, prod-check-isabelle) and the
//! programs that use them (prod-run's evaluation and ProD-RL, prod-serve's HTTP service,
//! prod-cli's `check`, `queue`, `tree solve` and `dataset validate`). Nothing here
//! samples or trains, so the CLI and the service use it without the model code.
//!
//! * [`ProverKind`] — which prover: its proof language, its defaults, its name on the command
//!   line and in configuration files.
//! * [`config`] — the config file `prod.toml` and its `[check]` section ([`CheckSection`]).
//! * [`CheckerSettings`] — how a command wants its checker (prover, workers, limits, cache,
//!   prover root, load paths, dataset, Isabelle server), merged with `[check]` in one place
//!   ([`CheckerSettings::resolve`]).
//! * [`Pipeline`] — the checking pipeline of `prod check`, `prod serve` and `prod bench
//!   serve`: verdicts known from the input, cache hits, then the prover ([`Origin`] says
//!   which); [`SetupError`] is closed: bad input or failure.
//! * [`node`] — the JSON node line every command and the service read (`NodeLine`, misspelt
//!   fields refused, ids unique) and the output line they write (`echo_json`).
//! * [`Forest`] — checked nodes as the solver sees them (a proof as its check closed it, the
//!   local verdict from the checker's own verdict, `Infra` and unchecked as unknown), their
//!   global verdicts, and a correct root's assembled proof.
//! * [`start_coq`], [`start_isabelle`], [`prover_name`] — a prover's checker started from its
//!   settings, and the name its verdicts carry, for every command and job alike.
//! * [`FinalCheck`] — the cold re-check of an assembled proof from nothing but the root's
//!   context: [`CoqFinal`] compiles the file, [`IsabelleFinal`] builds the theory;
//!   [`complete_text`] is that file or theory, for a person to read or compile.
//! * [`solve`] — `prod tree solve`'s input: a node file with `locally_correct` or `prod check
//!   --json` verdict lines, read into a [`Forest`]; its canary alarms and complete files.
//! * [`judge`] — one tree judged end to end (check → solve → assembly → cold re-check →
//!   canaries), as every path that decides a root judges it; [`decided_node`] reads a node
//!   checked elsewhere from its verdict line.
//! * [`adversary`] — seeded attack scenarios and honest look-alikes, judged by [`judge`]
//!   and by the two-step command-line path, for the test suite and `prod bench adversary`.
//! * [`canary_alarm`] — whether a root that states a canary (`False`, `0 = 1`, …) was
//!   accepted: the one soundness alarm every path that decides a root raises.
//!
//! * [`verify_ground_truths`] — an export's rows kept only where the real checker loads the
//!   context and proves the ground truth (`prod dataset export`); [`context_failure`] reads
//!   a verdict that says a context does not load.
//! * [`validate`] — a dataset's ground truths checked (`prod dataset validate`, `prod bench
//!   libraries`): a sample of examples, or ground-truth trees end to end (check → solve →
//!   assembly → cold final check).
//!
//! Coq and Isabelle differ only behind [`ProverKind`] and [`FinalCheck`] (and in their crates).

pub mod adversary;
#[cfg(feature = "clap")]
pub mod build;
mod canary;
pub mod config;
mod final_check;
#[cfg(feature = "clap")]
pub mod flags;
mod forest;
mod judge;
mod kind;
pub mod node;
mod pipeline;
mod settings;
pub mod solve;
mod start;
pub mod validate;
mod verify;

pub use canary::{canary_alarm, canary_of, Accepted, Canary, CanaryAlarm, RootDecision, CANARIES};
pub use config::CheckSection;
pub use final_check::{complete_text, CoqFinal, FinalCheck, FinalProof, IsabelleFinal};
pub use forest::{local_verdict, CheckedNode, Forest, RootAssembly};
pub use judge::{decided_node, judge, judge_checked, Judgement, RootJudgement, Tree};
pub use kind::ProverKind;
pub use pipeline::{Done, Origin, Pipeline};
pub use settings::{
    add_load_paths, set_root, CheckerConfig, CheckerSettings, IsabelleServer, Overrides,
    ProverConfig, SetupError,
};
pub use start::{prover_name, start_coq, start_isabelle};

/// Checker workers of a run or benchmark unless its flags or config file say otherwise: the
/// two cores of the machine the suite and the main job are sized for.
pub const DEFAULT_WORKERS: usize = 2;
pub use verify::{context_failure, verify_ground_truths, BatchProgress, VerifyReport};

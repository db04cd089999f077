//! ProD runs: the run store, the native policy behind `prod_rl::Policy`, evaluation
//! with test-time proof trees (paper Algorithm 1, §4.3) and ProD-RL rounds (Algorithm 2, §3.2).
//!
//! * [`store`] — `RunStore` (SQLite, one file per run directory): sample log, nodes, verdicts
//!   (never `Infra`), global verdicts, final checks, examples, checkpoints, phase marks.
//! * [`policy`] — `NativePolicy` (prod-policy's Llama) and `LoggedPolicy` (answers from the
//!   sample log first, so resumed runs sample nothing twice).
//! * [`context`] — `RunContext`: the store, prover, run directory and progress every phase
//!   shares.
//! * [`prover`] — the prover of a run, chosen once: checker, language, final check, name.
//! * [`theorem`] — `Theorem` (prod-library's, re-exported): a run's theorems read from a
//!   dataset split with full contexts.
//! * [`check`] — the check phase, committing each verdict as it arrives.
//! * [`eval`] — `run_eval`: sample, check, solve per tree, cold re-check, pass@k;
//!   `run_eval_given` on trees sampled elsewhere ([`trees`]: `prod eval --trees`).
//! * `outcomes` — what the trees did, for the report: per-theorem details, nodes by verdict
//!   kind and failure message, the `<use_invoke>` share of roots, example trees.
//! * [`rl`] — `run_rl`: the rounds in order, resume and per-round evaluation;
//!   `rl_config` — `RlConfig` (`rl.toml`) and its parts, their defaults and validation;
//!   `round` — one round as typed phases (sample, check, filter, solve, weigh, train, record);
//!   `round_steps` — the round's building blocks (theorem draw, checkpoint paths, §3.2
//!   filters, training files, external commands).
//! * [`baseline`] — CoqHammer alone on an evaluation's theorems (one `hammer.` root each, the
//!   same checker), and the paired comparison of a method with it.
//! * [`leaves`] — hammer leaves: the setting (default, help, identity) and the leaves added
//!   to generated trees.
//! * [`ceiling`] — the dataset's ground-truth decomposition with hammer leaves, as an
//!   evaluation beside CoqHammer alone: the room decomposition leaves over the hammer.
//! * [`sft`] — the one SFT loop (`prod train`, `prod model train`, the demo's and the
//!   experiment's SFT stages): data lines to examples, the data statistics, the steps.
//! * [`scratch`] — a policy made from scratch (`prod model init`): a tokenizer trained on a
//!   corpus, random weights of a `ModelShape`.
//! * [`sample_bench`] — sampling timed as an evaluation asks for it (`prod model
//!   bench-sample`): one prompt at a time against the native policy's batches.
//! * [`experiment`] — `run_experiment`: the paper's Table 2 in miniature (ProD-SFT, SFT w/o
//!   lemma proposal, ProD-RL, RL w/o lemma proposal), resumable stage by stage.

pub mod baseline;
pub mod canary;
pub mod ceiling;
pub mod check;
pub mod context;
pub mod eval;
pub mod export;
#[cfg(feature = "clap")]
pub mod flags;
pub mod leaves;
pub mod lora_merge;
pub mod policy;
pub mod progress;
pub mod prompts;
pub mod prover;
mod ranges;
pub mod rl;
mod rl_config;
mod round;
mod round_steps;
pub mod sample_bench;
pub mod sample_data;
pub mod scratch;
pub mod sft;
pub mod store;
pub use prod_library::theorem;
pub mod trees;

pub use context::RunContext;
pub use eval::{load_theorems, run_eval, EvalOptions, EvalResult, Theorem};
pub use policy::{FirstToken, LoggedPolicy, NativeParams, NativePolicy, RemoteSeq, SeqPolicy};
pub use progress::Bars;
pub use prover::{CheckSetup, CoqFinal, FinalCheck, IsabelleFinal, Prover, ProverKind};
pub use store::{Phase, RunStore, StoreError};
pub mod job;
mod outcomes;
pub use job::{
    open_store, run_eval_job, run_hammer_baseline_job, start_run_checker, BadInput, CoqFlags,
    CoqJobConfig, EvalJob, HammerBaseline, ProverChoice, SharedStore,
};
pub use prod_report;
pub mod demo;
pub use demo::{run_demo, DemoJob, ModelBase};
pub mod experiment;
pub use experiment::{run_experiment, ExperimentConfig, ExperimentJob};
pub use rl::{run_rl, run_rl_job, Method, RlConfig, RlEvalConfig, ValueModel};

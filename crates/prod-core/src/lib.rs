//! ProD's pure core, in the paper's words.
//!
//! * [`ConditionalProof`] — `t0 t1 <invoke> l1 </invoke> t2 … t(k+1)` (paper §2, §3.1), parsed losslessly.
//! * [`tree`] — proof-tree nodes, *local* vs *global* correctness (least fixed point), witnesses.
//! * [`assembly`] — a complete proof from a globally correct root, child-first, lemmas deduplicated.
//! * [`pass_at_k`] — the unbiased estimator, bootstrap confidence intervals, per-depth tables.
//! * [`range`] — the ranges numbers of a command line or config file must lie in, one rule each.
//! * [`prompt`] — the prompt format `{context}\n{statement}\n`, one definition for the policy and
//!   the export to RL frameworks.
//! * [`Sampling`] — what to sample (temperature, top-p, new tokens, context tokens), one default each.
//! * [`ProofLanguage`] — everything prover-specific the core needs (where strings and comments
//!   are, statement normalisation, names, rendering), implemented by `prod-coq` and `prod-isar`.
//!
//! Architecture invariant: this crate is pure. It never spawns a process, touches the file
//! system or the network; it depends on no other ProD crate.

pub mod assembly;
pub mod conditional;
pub mod language;
pub mod pass_at_k;
pub mod prompt;
pub mod range;
pub mod sampling;
pub mod tree;

pub use assembly::{assemble, AssembledLemma, AssembledProof, AssemblyError};
pub use conditional::{ConditionalProof, ParseError, ParseErrorKind, T0};
pub use language::{collapse_whitespace, Literal, LiteralKind, ProofLanguage};
pub use pass_at_k::{
    estimate as estimate_pass_at_k, pass_at_k, DepthTable, PassAtK, TheoremOutcome,
};
pub use sampling::Sampling;
pub use tree::{solve, GlobalVerdict, GoalId, LocalVerdict, Node, Solution};

/// The sampling temperature for proofs: the paper samples at 0.7 for testing and during RL (its
/// appendix on sampling temperatures found 0.7 best). Every default in the workspace that
/// samples proofs takes it from here.
pub const PAPER_TEMPERATURE: f64 = 0.7;

/// The seed every seeded step starts from unless told otherwise (a draw of theorems, a split,
/// a shuffle, a sampler, a bootstrap): one default, so that two commands run without `--seed`
/// draw the same theorems.
pub const DEFAULT_SEED: u64 = 0;

//! ProD-RL (paper §3): generating proof trees with a policy, filtering lemma proposals, turning
//! global correctness into example weights, and the replay buffer.
//!
//! This crate holds the algorithms only and depends on `prod-core` alone: the policy is reached
//! through the [`Policy`] trait (implemented by `prod-run`'s native policy over `prod-policy` and
//! by `prod-remote`), and the checker's results arrive as `prod_core` verdicts from the caller,
//! so everything here is deterministic under a seed and testable without a model or a prover.
//!
//! Architecture invariant: no process, file or network access here; randomness is seeded.

pub mod examples;
pub mod filters;
pub mod generate;
pub mod replay;
pub mod weights;

pub use generate::{
    generate_test_trees, generate_train_trees, hammer_leaves, Completion, GeneratedNode, Origin,
    Policy, PolicyError, SampleRequest, TreeGoal,
};
pub use replay::ReplayBuffer;
pub use weights::{example_weight, Weighting, GAMMA_PAPER};

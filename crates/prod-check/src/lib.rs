//! Prover-neutral checking for ProD (paper §2 "local correctness", §4.1).
//!
//! * [`CheckRequest`] — one node to check: imports, context, statement and a conditional proof whose
//!   `<invoke>` segments are the lemmas to admit.
//! * [`Verdict`] — `Proved` / `Failed` / `TimedOut` / `Rejected` / `Infra`, kept apart because they
//!   mean different things to rewards and to pass@k: only `Proved` is a success, only `Failed` and
//!   `TimedOut` say the proof is wrong, `Rejected` says the text broke a rule, and `Infra` says
//!   nothing about the proof at all (it is retried and never cached).
//! * [`VerdictLine`] — a verdict's JSON line (`prod check --json`, `prod serve`), written and
//!   read in one place, with every fact the tree solver needs.
//! * [`Checker`] — the trait each prover backend implements (Coq in `prod-check-coq`, Isabelle later).
//! * [`RetryPolicy`] — how often an `Infra` verdict is retried.
//! * [`VerificationCache`] / [`CachedChecker`] — the SQLite verification cache.
//!
//! Architecture invariant: this crate never spawns a process; backends do.

pub mod cache;
pub mod checker;
pub mod limits;
pub mod line;
pub mod request;
pub mod retry;
pub mod verdict;

pub use cache::{cache_key, CacheError, CachedChecker, VerificationCache};
pub use checker::{Checker, HammerStats, Progress};
pub use limits::TimeLimits;
pub use line::VerdictLine;
pub use request::{check_t0, CheckRequest};
pub use retry::RetryPolicy;
pub use verdict::{
    apply_replacements, proof_as_checked, Replacement, RuleError, Verdict, VerdictKind,
    UNIVERSES_UNRECORDED,
};

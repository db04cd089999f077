//! The benchmark harnesses behind `prod bench`: the measuring code, apart from the command
//! line. Each takes a settings value and returns a typed report (with its `--json` object);
//! the CLI turns flags into settings and prints the report.
//!
//! * [`check`] (`prod bench check`): checking speed, one `coqc` per check against the
//!   persistent worker pool, on real stdlib lemmas re-checked in place.
//! * [`tree`] (`prod bench tree`): the global-correctness solver on synthetic forests.
//! * [`adversary`] (`prod bench adversary`): prod-prover's seeded attack scenarios through
//!   check, tree, assembly and final check, tallied.
//! * [`hammer`] (`prod bench hammer`): CoqHammer alone on a split's theorems under several
//!   hammer profiles side by side: proved goals, where the seconds go, the seconds curve.
//! * [`libraries`] (`prod bench libraries`): every installed Debian Coq library through the
//!   dataset build and a checked sample of its ground truth.
//!
//! `prod bench serve`'s measurement is prod-serve's (`prod_serve::bench`), `prod model bench`'s
//! prod-policy's: each lives next to what it measures.

pub mod adversary;
pub mod check;
pub mod hammer;
pub mod libraries;
pub mod tree;

/// Why a benchmark did not run to its figures: the user's input (exit 2) or anything else
/// (exit 1).
#[derive(Debug)]
pub enum BenchError {
    /// A flag or file the user gave: a prover root that is not one, a file without lemmas.
    BadInput(anyhow::Error),
    /// The benchmark itself failed (a checker that does not start, a `coqc` that fails).
    Failure(anyhow::Error),
}

impl From<anyhow::Error> for BenchError {
    fn from(e: anyhow::Error) -> Self {
        BenchError::Failure(e)
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::BadInput(e) | BenchError::Failure(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for BenchError {}

//! The run context: what every phase of an evaluation or of a ProD-RL round works with.

use std::collections::HashSet;
use std::path::Path;

use crate::progress::Bars;
use crate::prover::CheckSetup;
use crate::store::RunStore;

/// One run's store, prover, directory and progress, shared by its phases.
pub struct RunContext<'a> {
    pub store: &'a RunStore,
    /// The prover's checker, language and final check.
    pub prover: CheckSetup<'a>,
    /// The run directory (`checkpoints/round-N`, `rounds/round-N`).
    pub out: &'a Path,
    pub bars: &'a Bars,
    /// Normalised statements of the dataset: a proposed lemma outside them is novel.
    pub dataset_statements: &'a HashSet<String>,
}

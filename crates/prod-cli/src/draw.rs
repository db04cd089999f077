//! The flags that name a draw of a dataset split's theorems (`prod bench hammer`, `prod model
//! prompts`): the same theorems as `prod eval --theorems N --seed S` draws.

use std::path::PathBuf;

use clap::Args;
use prod_library::theorem::{load_named_theorems, Theorem};

use crate::ranges;

/// A split's named theorems, all of them or a seeded draw.
#[derive(Args, Debug)]
pub struct DrawArgs {
    /// Dataset directory written by `prod dataset build`.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Which split file holds the theorems.
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Only this many theorems, drawn with --seed as `prod eval --theorems` draws them
    /// (default: all of the split).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub theorems: Option<usize>,
    /// Seed of that draw (the same seed as the evaluation's picks the same theorems).
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
}

impl DrawArgs {
    /// The drawn theorems; a split without a named theorem is an error.
    #[cfg_attr(not(feature = "policy"), allow(dead_code))]
    pub fn load(&self) -> Result<Vec<Theorem>, String> {
        load_named_theorems(&self.dataset, &self.split, self.theorems, self.seed)
    }
}

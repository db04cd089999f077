//! An SFT on JSONL files as the command line asks for it (`prod train sft|value`, `prod model
//! train`): the files, the limits, the trainer's settings and the data order, declared once with
//! their flags, and the [`SftSettings`] they make.

use std::path::PathBuf;

use prod_policy::PolicyConfig;

use super::{SftSettings, SftSource, ShuffleRng, Steps, Targets};
#[cfg(feature = "clap")]
use super::{EVAL_LIMIT, NO_OVERSAMPLING, SAVE_EVERY};
use crate::BadInput;

/// What an SFT on files is given.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SftFiles {
    /// Model directory to start from (a checkpoint in --out is resumed instead).
    #[cfg_attr(feature = "clap", arg(long))]
    pub model: PathBuf,
    /// Training JSONL (a dataset's sft.jsonl, or lines with `proved` for the value model).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: PathBuf,
    /// Only the first N lines of --data.
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub limit: Option<usize>,
    /// Held-out JSONL for the eval loss (before and after training).
    #[cfg_attr(feature = "clap", arg(long))]
    pub eval: Option<PathBuf>,
    /// Only the first N eval lines.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = EVAL_LIMIT,
        value_parser = prod_core::range::parse::positive_usize))]
    pub eval_limit: usize,
    /// Checkpoint directory (created; an existing checkpoint there is resumed).
    #[cfg_attr(
        feature = "clap",
        arg(long, required_unless_present = "write_examples")
    )]
    pub out: Option<PathBuf>,
    /// Train nothing: write the training examples, exactly as this command would train on them
    /// (same shuffle, --limit, context cut, length drops and oversampling; the model's token
    /// ids; weight 1), one JSON line each ({prompt, completion, weight, prompt_ids,
    /// completion_ids}, the format of `prod rl`'s rounds/round-N/examples.jsonl), for an
    /// external trainer on a GPU. Then:
    /// python python/train_weighted.py --data FILE --model MODEL --out SFT --lr 1e-4 --macro-batch 32 --epochs 2 --warmup-steps 20 --bf16
    /// (docs/models.md: from a dataset to Table 2 with a GPU SFT)
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub write_examples: Option<PathBuf>,
    /// Optimizer steps (default: one epoch).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub steps: Option<usize>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub trainer: PolicyConfig,
    /// Save a checkpoint every N steps (and at the end).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SAVE_EVERY,
        value_parser = prod_core::range::parse::positive_usize))]
    pub save_every: usize,
    /// NOT the paper's method (off by default, 1): every policy example whose `t0` is
    /// `<use_invoke>` enters the training stream N times (the copies shuffled in with the rest),
    /// for small models that otherwise learn to propose almost nothing. The paper trains on
    /// `sft.jsonl` as it is; report runs that use this as such.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = NO_OVERSAMPLING,
        value_parser = prod_core::range::parse::positive_usize))]
    pub oversample_use_invoke: usize,
    /// Seed of the data order and of the oversampling shuffle.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = prod_core::DEFAULT_SEED))]
    pub seed: u64,
}

impl SftFiles {
    /// The run: the files' lines shuffled with `StdRng` (the command line's seeded order),
    /// resumed from a checkpoint in `out`, one epoch unless `steps`. Bad input: a micro batch
    /// larger than the macro batch.
    pub fn settings(&self, targets: Targets) -> Result<SftSettings, BadInput> {
        let t = &self.trainer;
        if t.micro_batch > t.macro_batch {
            let (micro, macro_) = (t.micro_batch, t.macro_batch);
            return Err(BadInput(format!(
                "--micro-batch {micro} must not exceed --macro-batch {macro_}"
            )));
        }
        Ok(SftSettings {
            source: SftSource::Files {
                train: self.data.clone(),
                eval: self.eval.clone(),
            },
            targets,
            trainer: self.trainer.clone(),
            seed: self.seed,
            shuffle: ShuffleRng::Std,
            limit: self.limit,
            eval_limit: self.eval_limit,
            oversample_use_invoke: self.oversample_use_invoke,
            steps: self.steps.map_or(Steps::OneEpoch, Steps::Total),
            deadline: None,
            save_every: Some(self.save_every),
            resume: true,
        })
    }
}

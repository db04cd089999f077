//! `prod model prompts`: the prompt of every theorem of a dataset split as token ids, for a
//! sampler that runs elsewhere (`python/device/prod_device.py` on a GPU) and must build exactly
//! the prompts `prod eval` would (`prod_run::prompts`).

use std::path::PathBuf;

use clap::Args;

use crate::{exit, ranges};

/// The prompt token ids of a split's theorems, for a sampler that runs elsewhere.
///
/// Write the prompt token ids of a split's theorems, one JSON line each:
/// {"theorem", "statement", "context_key", "context_ids", "statement_ids"}.
///
/// `context_ids ++ statement_ids` is the prompt `prod eval` samples from (the context's last
/// --context-tokens tokens, then the statement); `statement_ids` is the statement part alone
/// (`statement.trim() + "\n"`), so that the prompt of a lemma proposed in the same context is
/// `context_ids ++ tok(lemma.trim() + "\n")`; `context_key` is the SHA-256 of the theorem's full
/// context (lemmas are shared by theorems only within the same context, as in Algorithm 1).
///
/// Example: prod model prompts --model ~/.cache/prod/models/smollm2-135m --dataset data/stdlib --out prompts.jsonl
#[derive(Args)]
pub struct PromptsArgs {
    /// Model folder whose tokenizer builds the prompts.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub draw: crate::draw::DrawArgs,
    /// The context is cut to its last N tokens (paper: 1,000).
    #[arg(long, default_value_t = prod_core::Sampling::default().context_tokens, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// Output JSONL (written atomically).
    #[arg(long)]
    pub out: PathBuf,
}

fn write(a: &PromptsArgs) -> anyhow::Result<usize> {
    let theorems = a.draw.load().map_err(prod_run::BadInput)?;
    prod_run::prompts::write_prompts(&a.model, &theorems, a.context_tokens, &a.out)?;
    Ok(theorems.len())
}

pub fn run(a: PromptsArgs) -> exit::Result {
    let n = write(&a)?;
    eprintln!("wrote the prompts of {n} theorems to {}", a.out.display());
    Ok(())
}

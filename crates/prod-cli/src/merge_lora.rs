//! `prod model merge-lora`: a PEFT LoRA adapter (trained elsewhere, e.g. on a GPU that could
//! only send back a small file) merged into its base model folder, giving an ordinary model
//! folder that every `--model` takes. The merge itself is `prod_run::lora_merge`'s.

use std::path::PathBuf;

use clap::Args;

use crate::exit;

/// Merge a PEFT LoRA adapter (e.g. trained on the GPU machine) into its base model folder.
///
/// `W += (alpha / r) · B A` on every adapted weight and PEFT's trainable token rows put in
/// place, as `peft`'s `merge_and_unload` does.
///
/// The adapter folder holds `adapter_config.json` and `adapter_model.safetensors` (PEFT's
/// layout; `python/device/prod_device.py run` writes it). OUT must not exist; it is written
/// beside itself and renamed into place, with `lora_merge.json` recording the base, the
/// adapter and the adapter's SHA-256.
///
/// Example: prod model merge-lora --base ~/.cache/prod/models/smollm2-135m --adapter gpu/prod-sft --out models/prod-sft-gpu
#[derive(Args)]
pub struct MergeLoraArgs {
    /// The base model folder the adapter was trained on.
    #[arg(long)]
    pub base: PathBuf,
    /// The adapter folder (adapter_config.json, adapter_model.safetensors).
    #[arg(long)]
    pub adapter: PathBuf,
    /// The merged model folder (must not exist).
    #[arg(long)]
    pub out: PathBuf,
}

fn merge(a: &MergeLoraArgs) -> anyhow::Result<()> {
    let summary = prod_run::lora_merge::merge_lora(&a.base, &a.adapter, &a.out)?;
    let rows = summary.replaced_rows.values().sum::<usize>();
    let (w, r, scale) = (summary.merged_weights, summary.r, summary.scale);
    let out = a.out.display();
    eprintln!("merged {w} weights (r = {r}, scale {scale}) and {rows} token rows into {out}");
    Ok(())
}

/// An adapter or base folder that cannot be read is the user's input too.
pub fn run(a: MergeLoraArgs) -> exit::Result {
    merge(&a).map_err(|e| match e.downcast_ref::<prod_policy::PolicyError>() {
        Some(prod_policy::PolicyError::Io { .. }) => exit::Failure::BadInput(e),
        _ => e.into(),
    })
}

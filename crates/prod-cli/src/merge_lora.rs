//! `prod model merge-lora`: a PEFT LoRA adapter (trained elsewhere, e.g. on a GPU that could
//! only send back a small file) merged into its base model folder, giving an ordinary model
//! folder that every `--model` takes. The merge itself is `prod_policy::lora`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use sha2::{Digest, Sha256};

use crate::exit;

/// Merge a PEFT LoRA adapter (e.g. trained on the GPU machine) into its base model folder.
///
/// Merge a PEFT LoRA adapter into its base model: `W += (alpha / r) · B A` on every adapted
/// weight and PEFT's trainable token rows put in place, as `peft`'s `merge_and_unload` does.
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

fn file_sha256(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

fn merge(a: &MergeLoraArgs) -> anyhow::Result<()> {
    let bad = |m: String| anyhow::Error::new(prod_run::BadInput(m));
    if a.out.exists() {
        return Err(bad(format!(
            "{} exists: give a new folder",
            a.out.display()
        )));
    }
    let adapter = prod_policy::lora::LoraAdapter::read(&a.adapter)?;
    let device = prod_policy::candle_core::Device::Cpu;
    let (mut model, tok) = prod_policy::load_model_dir(&a.base, &device)
        .map_err(|e| bad(format!("base model {}: {e}", a.base.display())))?;
    let summary = adapter.merge_into(&mut model)?;
    let mut tmp = a.out.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("remove {}", tmp.display()))?;
    }
    prod_policy::save_model_dir(&tmp, &mut model, &tok)?;
    let record = serde_json::json!({
        "base": a.base.display().to_string(),
        "adapter": a.adapter.display().to_string(),
        "adapter_model_sha256": file_sha256(&a.adapter.join("adapter_model.safetensors"))?,
        "adapter_config_sha256": file_sha256(&a.adapter.join("adapter_config.json"))?,
        "merge": summary,
    });
    std::fs::write(
        tmp.join("lora_merge.json"),
        serde_json::to_string_pretty(&record)? + "\n",
    )?;
    std::fs::rename(&tmp, &a.out)
        .with_context(|| format!("rename {} to {}", tmp.display(), a.out.display()))?;
    eprintln!(
        "merged {} weights (r = {}, scale {}) and {} token rows into {}",
        summary.merged_weights,
        summary.r,
        summary.scale,
        summary.replaced_rows.values().sum::<usize>(),
        a.out.display()
    );
    Ok(())
}

pub fn run(a: MergeLoraArgs) -> i32 {
    match merge(&a) {
        Ok(()) => 0,
        Err(e) => {
            let input = e.downcast_ref::<prod_run::BadInput>().is_some()
                || matches!(
                    e.downcast_ref::<prod_policy::PolicyError>(),
                    Some(
                        prod_policy::PolicyError::BadInput(_)
                            | prod_policy::PolicyError::Config(_)
                            | prod_policy::PolicyError::Io { .. }
                    )
                );
            if input {
                exit::bad_input(e)
            } else {
                exit::failure(e)
            }
        }
    }
}

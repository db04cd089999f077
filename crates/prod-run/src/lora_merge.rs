//! A PEFT LoRA adapter (trained elsewhere, e.g. on a GPU that could only send back a small
//! file) merged into its base model folder, giving an ordinary model folder that every
//! `--model` takes (`prod model merge-lora`). The arithmetic is `prod_policy::lora`'s; here the
//! folders: the merged model written beside `out` and renamed into place, with
//! `lora_merge.json` recording the base, the adapter and the adapter's SHA-256.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};

use crate::BadInput;

/// Merge the adapter folder `adapter` into the model folder `base`, written to `out` (which must
/// not exist). A missing or unreadable base or adapter is bad input.
pub fn merge_lora(
    base: &Path,
    adapter: &Path,
    out: &Path,
) -> anyhow::Result<prod_policy::lora::MergeSummary> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    if out.exists() {
        return Err(bad(format!("{} exists: give a new folder", out.display())));
    }
    let lora = prod_policy::lora::LoraAdapter::read(adapter)?;
    let device = prod_policy::candle_core::Device::Cpu;
    let (mut model, tok) = prod_policy::load_model_dir(base, &device)
        .map_err(|e| bad(format!("base model {}: {e}", base.display())))?;
    let summary = lora.merge_into(&mut model)?;
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("remove {}", tmp.display()))?;
    }
    prod_policy::save_model_dir(&tmp, &mut model, &tok)?;
    let record = serde_json::json!({
        "base": base.display().to_string(),
        "adapter": adapter.display().to_string(),
        "adapter_model_sha256": file_sha256(&adapter.join("adapter_model.safetensors"))?,
        "adapter_config_sha256": file_sha256(&adapter.join("adapter_config.json"))?,
        "merge": summary,
    });
    let text = serde_json::to_string_pretty(&record)? + "\n";
    std::fs::write(tmp.join("lora_merge.json"), text)?;
    std::fs::rename(&tmp, out)
        .with_context(|| format!("rename {} to {}", tmp.display(), out.display()))?;
    Ok(summary)
}

fn file_sha256(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

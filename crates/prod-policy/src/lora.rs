//! PEFT LoRA adapters (`adapter_config.json` + `adapter_model.safetensors`) read and merged
//! into a model, so that a policy fine-tuned elsewhere (a GPU run that could only send back a
//! small adapter) becomes an ordinary model folder here.
//!
//! What is merged, as PEFT's `merge_and_unload` does it:
//! * every LoRA pair on a linear weight: `W += s · B A` with `s = lora_alpha / r`
//!   (`lora_alpha / √r` with `use_rslora`);
//! * PEFT's trainable tokens (`trainable_token_indices`): the listed rows of the embedding (and
//!   of an untied head, when the adapter has them) are replaced by the adapter's rows — PEFT
//!   stores the rows themselves, not a difference. A tied head follows the embedding.
//!
//! Anything else PEFT can express (DoRA, LoRA on embeddings, biases, `modules_to_save`, rank
//! or alpha patterns, `fan_in_fan_out`) is refused by name rather than merged approximately.
//! Adapter tensors of any float dtype are widened to f32 before the product.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use crate::model::Llama;
use crate::{PolicyError, Result};

/// One adapter, read and checked against its own configuration.
#[derive(Debug)]
pub struct LoraAdapter {
    pub r: usize,
    pub alpha: f64,
    /// `alpha / r`, or `alpha / √r` with rsLoRA.
    pub scale: f64,
    /// (weight name in the model, A [r, in], B [out, r]), sorted by name.
    pub pairs: Vec<(String, Tensor, Tensor)>,
    /// (weight name: the embedding or the head, token ids, their new rows [n, d]).
    pub tokens: Vec<(String, Vec<u32>, Tensor)>,
}

/// What a merge changed.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MergeSummary {
    pub r: usize,
    pub alpha: f64,
    pub scale: f64,
    /// Weights that received `s · B A`.
    pub merged_weights: usize,
    /// Rows replaced, per weight.
    pub replaced_rows: BTreeMap<String, usize>,
}

fn bad(path: &Path, m: impl std::fmt::Display) -> PolicyError {
    PolicyError::BadInput(format!("{}: {m}", path.display()))
}

/// A config value that must be absent, null, false, empty or equal to `ok`.
fn refuse_if_set(cfg: &Value, key: &str, path: &Path, why: &str) -> Result<()> {
    let set = match cfg.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::String(s)) => !(s.is_empty() || (key == "bias" && s == "none")),
        Some(_) => true,
    };
    if set {
        return Err(bad(
            path,
            format!("{key} = {} is not supported ({why})", cfg[key]),
        ));
    }
    Ok(())
}

/// The token ids of `trainable_token_indices` for the layer named `layer` (`embed_tokens`,
/// `lm_head`): PEFT's list form applies to the input embedding.
fn token_indices(cfg: &Value, layer: &str, path: &Path) -> Result<Option<Vec<u32>>> {
    let ids = |v: &Value| -> Result<Vec<u32>> {
        v.as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                    .collect::<Option<Vec<u32>>>()
            })
            .ok_or_else(|| bad(path, "trainable_token_indices must list token ids"))
    };
    match cfg.get("trainable_token_indices") {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Array(_)) => Ok((layer == "embed_tokens").then(|| ids(v)).transpose()?),
        Some(Value::Object(o)) => o
            .iter()
            .find(|(k, _)| k.as_str() == layer || k.ends_with(&format!(".{layer}")))
            .map(|(_, v)| ids(v))
            .transpose(),
        Some(other) => Err(bad(
            path,
            format!("trainable_token_indices = {other} is neither a list nor an object"),
        )),
    }
}

/// The LoRA pairs and trainable-token rows of an adapter's weights file, sorted by kind.
#[derive(Default)]
struct AdapterTensors {
    /// lora_A per module (without `.lora_A.weight`).
    a_of: HashMap<String, Tensor>,
    /// lora_B per module (without `.lora_B.weight`).
    b_of: HashMap<String, Tensor>,
    /// (weight name, token ids, their new rows), as in [`LoraAdapter::tokens`].
    tokens: Vec<(String, Vec<u32>, Tensor)>,
}

/// Reads and parses `adapter_config.json`, refusing anything but a LoRA adapter.
fn read_adapter_config(cpath: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(cpath).map_err(|e| PolicyError::io(cpath, e))?;
    let cfg: Value =
        serde_json::from_str(&text).map_err(|e| bad(cpath, format!("line {}: {e}", e.line())))?;
    match cfg.get("peft_type").and_then(Value::as_str) {
        Some("LORA") => Ok(cfg),
        other => Err(bad(
            cpath,
            format!("peft_type {other:?}: only LoRA adapters (\"LORA\") are merged"),
        )),
    }
}

/// The adapter's rank, alpha and merge scale, after refusing the options that are not merged.
fn rank_alpha_scale(cfg: &Value, cpath: &Path) -> Result<(usize, f64, f64)> {
    let r = cfg
        .get("r")
        .and_then(Value::as_u64)
        .filter(|&r| r > 0)
        .ok_or_else(|| bad(cpath, "r must be a positive integer"))? as usize;
    let alpha = cfg
        .get("lora_alpha")
        .and_then(Value::as_f64)
        .filter(|a| a.is_finite())
        .ok_or_else(|| bad(cpath, "lora_alpha must be a number"))?;
    let rslora = cfg
        .get("use_rslora")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (key, why) in [
        (
            "use_dora",
            "DoRA rescales each column; only plain LoRA is merged",
        ),
        ("bias", "adapter biases are not merged"),
        ("lora_bias", "adapter biases are not merged"),
        (
            "fan_in_fan_out",
            "only nn.Linear layout (out × in) is merged",
        ),
        ("modules_to_save", "whole-module copies are not merged"),
        ("rank_pattern", "one rank for every layer"),
        ("alpha_pattern", "one alpha for every layer"),
        ("target_parameters", "LoRA on raw parameters is not merged"),
        ("layer_replication", "replicated layers are not merged"),
    ] {
        refuse_if_set(cfg, key, cpath, why)?;
    }
    let scale = if rslora {
        alpha / (r as f64).sqrt()
    } else {
        alpha / r as f64
    };
    Ok((r, alpha, scale))
}

/// Loads `adapter_model.safetensors` onto the CPU.
fn load_adapter_weights(wpath: &Path) -> Result<HashMap<String, Tensor>> {
    if !wpath.is_file() {
        return Err(bad(
            wpath,
            "missing (PEFT writes the adapter's weights there)",
        ));
    }
    candle_core::safetensors::load(wpath, &Device::Cpu)
        .map_err(|e| bad(wpath, format!("not a safetensors file: {e}")))
}

impl AdapterTensors {
    /// Sorts every tensor (in name order, widened to f32) into its kind; unknown ones are refused.
    fn sort(
        tensors: &HashMap<String, Tensor>,
        cfg: &Value,
        cpath: &Path,
        wpath: &Path,
    ) -> Result<Self> {
        let mut sorted = AdapterTensors::default();
        let mut names: Vec<&String> = tensors.keys().collect();
        names.sort();
        for key in names {
            let t = tensors[key].to_dtype(DType::F32)?;
            let name = key.strip_prefix("base_model.model.").unwrap_or(key);
            if let Some(m) = name.strip_suffix(".lora_A.weight") {
                sorted.a_of.insert(m.to_string(), t);
            } else if let Some(m) = name.strip_suffix(".lora_B.weight") {
                sorted.b_of.insert(m.to_string(), t);
            } else if let Some(m) = name.strip_suffix(".token_adapter.trainable_tokens_delta") {
                let ids = trainable_token_ids(key, m, &t, cfg, cpath, wpath)?;
                sorted.tokens.push((format!("{m}.weight"), ids, t));
            } else if name.contains("lora_embedding_") {
                return Err(bad(
                    wpath,
                    format!("{key}: LoRA on embeddings is not supported"),
                ));
            } else {
                return Err(bad(
                    wpath,
                    format!("{key}: not a LoRA or trainable-token tensor"),
                ));
            }
        }
        Ok(sorted)
    }

    /// Matches each module's lora_A with its lora_B, checking both have rank `r`; by name.
    fn pairs(&self, r: usize, wpath: &Path) -> Result<Vec<(String, Tensor, Tensor)>> {
        let mut pairs = Vec::new();
        let mut modules: Vec<&String> = self.a_of.keys().chain(self.b_of.keys()).collect();
        modules.sort();
        modules.dedup();
        for m in modules {
            let (Some(a), Some(b)) = (self.a_of.get(m), self.b_of.get(m)) else {
                return Err(bad(
                    wpath,
                    format!("{m}: lora_A and lora_B must both be present"),
                ));
            };
            let ((ra, _), (_, rb)) = (a.dims2()?, b.dims2()?);
            if ra != r || rb != r {
                return Err(bad(
                    wpath,
                    format!(
                        "{m}: lora_A is {:?} and lora_B {:?}, but r = {r}",
                        a.dims(),
                        b.dims()
                    ),
                ));
            }
            pairs.push((format!("{m}.weight"), a.clone(), b.clone()));
        }
        Ok(pairs)
    }
}

/// The token ids whose rows the trainable-token tensor `key` (module `m`, rows `t`) replaces.
fn trainable_token_ids(
    key: &str,
    m: &str,
    t: &Tensor,
    cfg: &Value,
    cpath: &Path,
    wpath: &Path,
) -> Result<Vec<u32>> {
    let layer = m.rsplit('.').next().unwrap_or(m);
    let ids = token_indices(cfg, layer, cpath)?.ok_or_else(|| {
        bad(
            wpath,
            format!("{key}: no trainable_token_indices for {layer} in adapter_config.json"),
        )
    })?;
    if t.dims2()?.0 != ids.len() {
        return Err(bad(
            wpath,
            format!(
                "{key} has {} rows, trainable_token_indices lists {} tokens",
                t.dims2()?.0,
                ids.len()
            ),
        ));
    }
    Ok(ids)
}

impl LoraAdapter {
    /// Reads `dir/adapter_config.json` and `dir/adapter_model.safetensors`.
    pub fn read(dir: &Path) -> Result<LoraAdapter> {
        let cpath = dir.join("adapter_config.json");
        let cfg = read_adapter_config(&cpath)?;
        let (r, alpha, scale) = rank_alpha_scale(&cfg, &cpath)?;
        let wpath = dir.join("adapter_model.safetensors");
        let tensors = load_adapter_weights(&wpath)?;
        let sorted = AdapterTensors::sort(&tensors, &cfg, &cpath, &wpath)?;
        let pairs = sorted.pairs(r, &wpath)?;
        let tokens = sorted.tokens;
        if pairs.is_empty() && tokens.is_empty() {
            return Err(bad(&wpath, "no LoRA weights in the adapter"));
        }
        Ok(LoraAdapter {
            r,
            alpha,
            scale,
            pairs,
            tokens,
        })
    }

    /// Merges the adapter into `model` in place (PEFT's `merge_and_unload`).
    pub fn merge_into(&self, model: &mut Llama) -> Result<MergeSummary> {
        let vars: HashMap<String, candle_core::Var> = model
            .named_vars()
            .into_iter()
            .map(|(n, v)| (n, v.clone()))
            .collect();
        let fail =
            |m: String| PolicyError::BadInput(format!("adapter does not fit the model: {m}"));
        for (name, a, b) in &self.pairs {
            let w = vars
                .get(name)
                .ok_or_else(|| fail(format!("the model has no weight {name}")))?;
            let (out, inp) = w.dims2()?;
            if a.dims2()?.1 != inp || b.dims2()?.0 != out {
                return Err(fail(format!(
                    "{name} is {out} × {inp}, lora_B · lora_A is {} × {}",
                    b.dims2()?.0,
                    a.dims2()?.1
                )));
            }
            let delta = (b.matmul(a)? * self.scale)?;
            w.set(&(w.as_tensor() + delta)?)?;
        }
        let mut replaced = BTreeMap::new();
        for (name, ids, rows) in &self.tokens {
            if name == "lm_head.weight" && model.config().tie_word_embeddings {
                return Err(fail(
                    "trainable rows for lm_head, but the model's head is tied to the embedding"
                        .into(),
                ));
            }
            let w = vars
                .get(name)
                .ok_or_else(|| fail(format!("the model has no weight {name}")))?;
            let (n, d) = w.dims2()?;
            if rows.dims2()?.1 != d {
                return Err(fail(format!(
                    "{name} rows have {d} columns, the adapter's {}",
                    rows.dims2()?.1
                )));
            }
            let mut all = w.as_tensor().flatten_all()?.to_vec1::<f32>()?;
            let new = rows.flatten_all()?.to_vec1::<f32>()?;
            for (k, &id) in ids.iter().enumerate() {
                let id = id as usize;
                if id >= n {
                    return Err(fail(format!("token {id} is outside {name} ({n} rows)")));
                }
                all[id * d..(id + 1) * d].copy_from_slice(&new[k * d..(k + 1) * d]);
            }
            w.set(&Tensor::from_vec(all, (n, d), w.device())?)?;
            replaced.insert(name.clone(), ids.len());
        }
        model.weights_changed();
        Ok(MergeSummary {
            r: self.r,
            alpha: self.alpha,
            scale: self.scale,
            merged_weights: self.pairs.len(),
            replaced_rows: replaced,
        })
    }
}

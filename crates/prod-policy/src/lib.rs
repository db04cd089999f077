//! ProD's native policy (paper §3, §4.1): a Llama-family language model that writes
//! `t0 + conditional proof`, scores `P(<use_invoke>)` and the value `P(<true>)/(P(<true>)+P(<false>))`,
//! samples reproducibly and trains with weighted cross-entropy.
//!
//! Why our own model and not `candle-transformers`' Llama: candle's fused `rms_norm`,
//! `softmax_last_dim`, `rope*` and `sdpa` record no backward pass, so gradients would silently
//! stop (candle issue #2168); its Llama also returns only the last position and has no padding
//! mask. [`model::Llama`] is built from differentiable ops only, and a test checks that every
//! parameter receives a non-zero gradient.
//!
//! Modules:
//! - [`config`]: `config.json` ([`LlamaConfig`]) and the `prod.toml` section ([`PolicyConfig`]).
//! - [`model`]: the model, KV cache, Hugging Face layout read/write.
//! - [`tokenizer`]: ProD's special tokens as single tokens; BPE training for from-scratch models.
//! - [`prompt`]: prompts and targets exactly as the paper builds them.
//! - [`train`]: weighted cross-entropy, AdamW, warm-up schedule, accumulation, clipping.
//! - [`sample`]: seeded batched sampling (temperature, top-p, stop on the end token).

pub mod config;
pub mod gguf;
pub mod model;
pub mod prompt;
pub mod sample;
pub mod tokenizer;
pub mod train;

pub use config::{LlamaConfig, PolicyConfig};
pub use model::{KvCache, Llama};
pub use tokenizer::ProdTokenizer;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A tensor operation failed (shape mismatch, device error, …).
    #[error("tensor error: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A model directory or configuration that we cannot use (names the file and the field).
    #[error("{0}")]
    Config(String),
    /// Bad input data (names what and where).
    #[error("{0}")]
    BadInput(String),
}

pub type Result<T> = std::result::Result<T, PolicyError>;

impl PolicyError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        PolicyError::Io { path: path.display().to_string(), source }
    }
}

#[cfg(test)]
mod tests;

/// Loads a model directory (`config.json`, `model.safetensors` or shards, `tokenizer.json`).
/// ProD's special tokens are added to the tokenizer if missing, and the model's vocabulary
/// grows to match (new rows = mean embedding, see [`Llama::resize_vocab`]).
pub fn load_model_dir(dir: &std::path::Path, device: &candle_core::Device) -> Result<(Llama, ProdTokenizer)> {
    let mut model = Llama::load(dir, device)?;
    let tok = ProdTokenizer::from_file(&dir.join("tokenizer.json"), model.config().eos_id())?;
    if tok.vocab_size() > model.config().vocab_size {
        model.resize_vocab(tok.vocab_size())?;
    }
    Ok((model, tok))
}

/// Writes a complete model directory: weights, `config.json` (with the end token as
/// `eos_token_id`) and `tokenizer.json`.
pub fn save_model_dir(dir: &std::path::Path, model: &mut Llama, tok: &ProdTokenizer) -> Result<()> {
    model.set_eos_token_id(tok.end_id());
    model.save(dir)?;
    tok.save(&dir.join("tokenizer.json"))
}

/// Re-exported so that users (the CLI) name the same candle version without depending on it.
pub use candle_core;

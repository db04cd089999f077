//! ProD's native policy (paper §3, §4.1): a Llama, Qwen2 or Qwen3 language model that writes
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
//! - [`config`]: `config.json` ([`LlamaConfig`], which names the [`config::Architecture`]) and
//!   the trainer's settings ([`PolicyConfig`]).
//! - [`model`]: the model, KV cache, Hugging Face layout read/write.
//! - [`decode`]: the projections of decoding (a few rows against large weights), inference only.
//! - [`ops`]: fused CPU ops with hand-written backward passes (training speed).
//! - [`tokenizer`]: ProD's special tokens as single tokens; BPE training for from-scratch models.
//! - [`prompt`]: prompts and targets exactly as the paper builds them.
//! - [`train`]: weighted cross-entropy, AdamW, warm-up schedule, accumulation, clipping.
//! - [`lora`]: PEFT LoRA adapters merged into a model (a policy fine-tuned elsewhere).
//! - [`sample`]: seeded batched sampling (temperature, top-p, stop on the end token).

pub mod bench;
pub mod config;
pub mod decode;
pub mod gguf;
mod hf;
pub mod lora;
pub mod model;
pub mod ops;
mod packing;
mod pool;
pub mod prompt;
pub mod quant;
pub mod sample;
pub mod tokenizer;
pub mod train;
mod vexp;

pub use config::{LlamaConfig, ModelShape, PolicyConfig};
pub use model::{KvCache, Llama};
pub use quant::DecodeWeights;
pub use tokenizer::ProdTokenizer;

/// Lets candle run its element-wise CPU ops on the calling thread (`CANDLE_NUM_THREADS=1`)
/// unless the user chose a value. Matrix products keep every core (gemm uses rayon's pool, sized
/// by `RAYON_NUM_THREADS`), and so do this crate's fused ops.
///
/// Why: candle splits every element-wise op over 64 k elements with a spinning barrier pool.
/// With the training pass's heavy element-wise work in [`ops`], what remains is
/// activation-sized, and on a 2-core machine the pool's worker competes with gemm's threads:
/// the caller then spins until the worker is scheduled. Measured on the 2-core dev machine
/// under load from other builds: a SmolLM2-135M training step of 4.2 s with the pool, 2.3 s
/// without; sampling speed unchanged.
///
/// Call it at the very start of `main`, before any thread exists (it sets an environment
/// variable) and before any tensor op (candle reads the variable once).
pub fn init_cpu_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    // candle asks for the thread count before every matmul, and without this variable the
    // answer re-reads cgroup files each time: 30% of decoding at one sample.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
}

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
        PolicyError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

#[cfg(test)]
mod tests;

/// Loads a model directory (`config.json`, `model.safetensors` or shards, `tokenizer.json`).
/// ProD's special tokens are added to the tokenizer if missing, and the model's vocabulary
/// grows to match (new rows = mean embedding, see [`Llama::resize_vocab`]).
pub fn load_model_dir(
    dir: &std::path::Path,
    device: &candle_core::Device,
) -> Result<(Llama, ProdTokenizer)> {
    let mut model = Llama::load(dir, device)?;
    let tok = ProdTokenizer::from_file(&dir.join("tokenizer.json"), model.config().eos_id())?;
    if tok.vocab_size() > model.config().vocab_size {
        model.resize_vocab(tok.vocab_size())?;
    }
    Ok((model, tok))
}

/// Writes a complete model directory that `transformers` and vLLM load as it is: weights,
/// `config.json` (with the end token as `eos_token_id`), `tokenizer.json`,
/// `tokenizer_config.json` (end, padding and ProD's special tokens named) and
/// `generation_config.json` (the paper's sampling defaults).
pub fn save_model_dir(dir: &std::path::Path, model: &mut Llama, tok: &ProdTokenizer) -> Result<()> {
    model.set_eos_token_id(tok.end_id());
    model.save(dir)?;
    tok.save(&dir.join("tokenizer.json"))?;
    hf::write_configs(dir, model.config(), tok)
}

/// A training checkpoint that is also a complete model directory ([`save_model_dir`]'s files):
/// the weights once, the trainer's state and optimizer moments beside them
/// ([`train::Trainer::save_checkpoint`]), so that a run resumes from it and a loader serves it.
pub fn save_checkpoint_dir(
    dir: &std::path::Path,
    model: &mut Llama,
    tok: &ProdTokenizer,
    trainer: &train::Trainer,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
    model.set_eos_token_id(tok.end_id());
    trainer.save_checkpoint(model, dir)?;
    tok.save(&dir.join("tokenizer.json"))?;
    hf::write_configs(dir, model.config(), tok)
}

/// Re-exported so that users (the CLI) name the same candle version without depending on it.
pub use candle_core;

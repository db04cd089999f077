//! Configuration: the model's `config.json` (Hugging Face Llama layout) and ProD's policy
//! settings ([`PolicyConfig`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{PolicyError, Result};

/// The fields of a Hugging Face Llama `config.json` that the model uses. Unknown fields are kept
/// in `extra` so that a load → save round trip does not lose them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    /// Grouped-query attention: query heads share `num_attention_heads / num_key_value_heads`
    /// key/value heads. Absent in old configs, where it equals `num_attention_heads`.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default = "default_rms_norm_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    #[serde(default = "default_max_position")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    #[serde(default)]
    pub bos_token_id: Option<serde_json::Value>,
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
    /// Only `null`/absent is supported (plain RoPE); Llama-3 style scaling is rejected on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_bias: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub mlp_bias: bool,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}
fn default_rms_norm_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    10_000.0
}
fn default_max_position() -> usize {
    2048
}

impl LlamaConfig {
    /// A tiny configuration for tests and toy runs.
    pub fn tiny(vocab_size: usize) -> Self {
        let mut extra = serde_json::Map::new();
        extra.insert("model_type".into(), "llama".into());
        extra.insert(
            "architectures".into(),
            serde_json::json!(["LlamaForCausalLM"]),
        );
        LlamaConfig {
            vocab_size,
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: Some(2),
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            max_position_embeddings: 512,
            tie_word_embeddings: false,
            bos_token_id: None,
            eos_token_id: None,
            rope_scaling: None,
            attention_bias: false,
            mlp_bias: false,
            extra,
        }
    }

    /// The SmolLM2-135M shape, for benchmarks.
    pub fn smollm2_135m() -> Self {
        LlamaConfig {
            vocab_size: 49_152,
            hidden_size: 576,
            intermediate_size: 1536,
            num_hidden_layers: 30,
            num_attention_heads: 9,
            num_key_value_heads: Some(3),
            rms_norm_eps: 1e-5,
            rope_theta: 100_000.0,
            max_position_embeddings: 8192,
            tie_word_embeddings: true,
            ..LlamaConfig::tiny(49_152)
        }
    }

    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads.max(1)
    }

    /// The first end-of-sequence id (`eos_token_id` may be a number or a list).
    pub fn eos_id(&self) -> Option<u32> {
        match self.eos_token_id.as_ref()? {
            serde_json::Value::Number(n) => n.as_u64().and_then(|x| u32::try_from(x).ok()),
            serde_json::Value::Array(a) => a.first()?.as_u64().and_then(|x| u32::try_from(x).ok()),
            _ => None,
        }
    }

    /// Checks what the model supports; the message names the offending field.
    #[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` needs Rust 1.87; MSRV is 1.80.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PolicyError::Config(format!("config.json: {m}")));
        if self.vocab_size == 0 || self.hidden_size == 0 || self.num_hidden_layers == 0 {
            return bad("vocab_size, hidden_size and num_hidden_layers must be positive".into());
        }
        if self.num_attention_heads == 0 || self.hidden_size % self.num_attention_heads != 0 {
            return bad(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        let kv = self.kv_heads();
        if kv == 0 || self.num_attention_heads % kv != 0 {
            return bad(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {kv}",
                self.num_attention_heads
            ));
        }
        if self.head_dim() % 2 != 0 {
            return bad(format!(
                "head dimension {} must be even for RoPE",
                self.head_dim()
            ));
        }
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return bad("rope_scaling is not supported (plain RoPE only)".into());
        }
        if self.attention_bias || self.mlp_bias {
            return bad("attention_bias / mlp_bias are not supported".into());
        }
        self.validate_architecture().map_err(|m| {
            PolicyError::Config(format!(
                "config.json: {m}; the native model implements the Llama architecture only \
                 (model_type \"llama\", LlamaForCausalLM)"
            ))
        })
    }

    /// The fields that say which architecture the weights are for: a `config.json` written
    /// for another one (Qwen2's q/k/v biases, Qwen3's q/k norms, Gemma's scaled embeddings, a
    /// Mistral sliding window, …) would load as Llama without a word and compute something
    /// else, so anything that is not plainly Llama is refused, named.
    fn validate_architecture(&self) -> std::result::Result<(), String> {
        let field = |k: &str| self.extra.get(k).filter(|v| !v.is_null());
        if let Some(t) = field("model_type") {
            if t.as_str() != Some("llama") {
                return Err(format!("model_type {t} is not supported"));
            }
        }
        if let Some(a) = field("architectures") {
            let names: Option<Vec<&str>> = a
                .as_array()
                .map(|v| v.iter().map(|x| x.as_str()).collect::<Option<_>>())
                .unwrap_or(None);
            match names.as_deref() {
                Some([]) | Some(["LlamaForCausalLM"]) => {}
                _ => return Err(format!("architectures {a} is not supported")),
            }
        }
        if let Some(act) = field("hidden_act") {
            if act.as_str() != Some("silu") {
                return Err(format!(
                    "hidden_act {act} is not supported (the MLP is SwiGLU with silu)"
                ));
            }
        }
        if let Some(h) = field("head_dim") {
            if h.as_u64() != Some(self.head_dim() as u64) {
                return Err(format!(
                    "head_dim {h} differs from hidden_size / num_attention_heads = {}",
                    self.head_dim()
                ));
            }
        }
        for k in ["use_sliding_window", "qk_norm", "use_qk_norm"] {
            if field(k).is_some_and(|v| v.as_bool() != Some(false)) {
                return Err(format!("{k} {} is not supported", self.extra[k]));
            }
        }
        for k in ["sliding_window", "quantization_config"] {
            if let Some(v) = field(k) {
                return Err(format!("{k} {v} is not supported"));
            }
        }
        if let Some(tp) = field("pretraining_tp") {
            if tp.as_u64() != Some(1) {
                return Err(format!("pretraining_tp {tp} is not supported (only 1)"));
            }
        }
        Ok(())
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
        let cfg: LlamaConfig = serde_json::from_str(&text).map_err(|e| {
            PolicyError::Config(format!("{}: line {}: {e}", path.display(), e.line()))
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| PolicyError::Config(format!("cannot serialise config: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| PolicyError::io(path, e))
    }
}

/// The policy's settings. Defaults are the paper's (§4.1) where it gives one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyConfig {
    /// Model directory (config.json, model.safetensors, tokenizer.json).
    pub model: Option<std::path::PathBuf>,
    /// The context is truncated to its last this many tokens (paper: 1k).
    pub context_tokens: usize,
    /// Sampling temperature (paper: 0.7).
    pub temperature: f64,
    /// Nucleus sampling threshold (1.0 = off).
    pub top_p: f64,
    /// Longest generated proof, in tokens.
    pub max_new_tokens: usize,
    /// Sampling seed; every prompt derives its own stream from it.
    pub seed: u64,
    /// AdamW learning rate after warm-up (paper: 1e-5, constant).
    pub learning_rate: f64,
    pub warmup_steps: usize,
    /// Examples per optimizer step (paper: 128), reached by gradient accumulation.
    pub macro_batch: usize,
    /// Examples per forward/backward pass.
    pub micro_batch: usize,
    /// Global gradient-norm clipping (0 = off).
    pub max_grad_norm: f64,
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Longest training sequence (prompt + target), in tokens (paper: context window 2048).
    pub max_seq_len: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            model: None,
            context_tokens: 1000,
            temperature: prod_core::PAPER_TEMPERATURE,
            top_p: 1.0,
            max_new_tokens: 512,
            seed: 0,
            learning_rate: 1e-5,
            warmup_steps: 100,
            macro_batch: 128,
            micro_batch: 4,
            max_grad_norm: 1.0,
            weight_decay: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            max_seq_len: 2048,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(k: &str, v: serde_json::Value) -> LlamaConfig {
        let mut c = LlamaConfig::tiny(64);
        c.extra.insert(k.into(), v);
        c
    }

    /// A config of another architecture is refused, naming it, never loaded as Llama.
    #[test]
    fn other_architectures_are_refused_by_name() {
        assert!(LlamaConfig::tiny(64).validate().is_ok());
        let hf_llama = with("head_dim", serde_json::json!(8));
        assert!(hf_llama.validate().is_ok());
        for (k, v, named) in [
            ("model_type", serde_json::json!("qwen2"), "qwen2"),
            ("model_type", serde_json::json!("qwen3"), "qwen3"),
            ("model_type", serde_json::json!("mistral"), "mistral"),
            (
                "architectures",
                serde_json::json!(["Qwen2ForCausalLM"]),
                "Qwen2ForCausalLM",
            ),
            ("hidden_act", serde_json::json!("gelu"), "gelu"),
            ("head_dim", serde_json::json!(128), "head_dim 128"),
            ("use_sliding_window", serde_json::json!(true), "sliding"),
            ("sliding_window", serde_json::json!(4096), "sliding_window"),
            ("pretraining_tp", serde_json::json!(2), "pretraining_tp"),
        ] {
            let e = with(k, v).validate().unwrap_err().to_string();
            assert!(e.contains(named) && e.contains("Llama"), "{k}: {e}");
        }
        // A Qwen2 folder as transformers writes it: refused on load with its name.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        std::fs::write(
            &p,
            r#"{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 64,
               "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
               "use_sliding_window": false, "sliding_window": null}"#,
        )
        .unwrap();
        let e = LlamaConfig::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("\"qwen2\"") && e.contains("not supported"),
            "{e}"
        );
    }
}

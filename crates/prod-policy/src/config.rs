//! Configuration: the model's `config.json` (Hugging Face layout of Llama, Qwen2 or Qwen3:
//! [`LlamaConfig`], [`Architecture`]) and ProD's policy settings ([`PolicyConfig`]).
//!
//! Qwen2 and Qwen3 are Llama with a few more parts per layer (biases of the attention
//! projections, norms of each query and key head, a head width of its own), so one
//! configuration type describes all three: the architecture's name in `config.json` decides
//! which parts a layer has, and everything that would change what a layer computes beyond
//! those parts is refused on load, named.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{PolicyError, Result};

/// The fields of a Hugging Face Llama, Qwen2 or Qwen3 `config.json` that the model uses (the
/// architecture, `head_dim` and the window fields are read from `extra`). Unknown fields are
/// kept in `extra` so that a load → save round trip does not lose them.
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

/// The architectures the native model implements, as `config.json` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    /// Llama with biases on the q, k and v projections.
    Qwen2,
    /// Llama with an RMSNorm over each query and key head before RoPE, a `head_dim` of its
    /// own, and with `attention_bias` biases on all four attention projections.
    Qwen3,
}

impl Architecture {
    pub const ALL: [Architecture; 3] = [
        Architecture::Llama,
        Architecture::Qwen2,
        Architecture::Qwen3,
    ];

    /// `model_type` in `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
            Architecture::Qwen3 => "qwen3",
        }
    }

    /// The `transformers` class, as `architectures` names it.
    pub fn class_name(self) -> &'static str {
        match self {
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
            Architecture::Qwen3 => "Qwen3ForCausalLM",
        }
    }

    pub fn from_model_type(name: &str) -> Option<Architecture> {
        Self::ALL.into_iter().find(|a| a.model_type() == name)
    }

    pub fn from_class_name(name: &str) -> Option<Architecture> {
        Self::ALL.into_iter().find(|a| a.class_name() == name)
    }
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

    /// The width of one attention head: Qwen's `head_dim` when given, else hidden_size /
    /// num_attention_heads (Llama's must equal that: [`LlamaConfig::validate`]).
    pub fn head_dim(&self) -> usize {
        let explicit = self.extra.get("head_dim").and_then(|v| v.as_u64());
        match explicit {
            Some(h) if self.architecture() != Architecture::Llama => h as usize,
            _ => self.hidden_size / self.num_attention_heads.max(1),
        }
    }

    /// The first end-of-sequence id (`eos_token_id` may be a number or a list).
    pub fn eos_id(&self) -> Option<u32> {
        match self.eos_token_id.as_ref()? {
            serde_json::Value::Number(n) => n.as_u64().and_then(|x| u32::try_from(x).ok()),
            serde_json::Value::Array(a) => a.first()?.as_u64().and_then(|x| u32::try_from(x).ok()),
            _ => None,
        }
    }

    /// The architecture `model_type` and `architectures` name (Llama when neither is given).
    /// A name the native model does not implement also reads as Llama here:
    /// [`LlamaConfig::validate`] refuses it.
    pub fn architecture(&self) -> Architecture {
        self.named_architecture().unwrap_or(Architecture::Llama)
    }

    /// This configuration for `arch`: `model_type` and `architectures` say it.
    pub fn with_architecture(mut self, arch: Architecture) -> Self {
        self.extra
            .insert("model_type".into(), arch.model_type().into());
        self.extra.insert(
            "architectures".into(),
            serde_json::json!([arch.class_name()]),
        );
        self
    }

    /// Whether q, k and v have biases (Qwen2 always; Qwen3 with `attention_bias`).
    pub fn qkv_bias(&self) -> bool {
        match self.architecture() {
            Architecture::Llama => false,
            Architecture::Qwen2 => true,
            Architecture::Qwen3 => self.attention_bias,
        }
    }

    /// Whether the output projection has a bias (Qwen3 with `attention_bias`).
    pub fn o_bias(&self) -> bool {
        self.architecture() == Architecture::Qwen3 && self.attention_bias
    }

    /// Whether each head of the queries and keys is RMS-normalised before RoPE (Qwen3).
    pub fn qk_norm(&self) -> bool {
        self.architecture() == Architecture::Qwen3
    }

    /// Query heads × head width: the width of the attention's output (the hidden size unless
    /// a Qwen `head_dim` says otherwise).
    pub fn attention_width(&self) -> usize {
        self.num_attention_heads * self.head_dim()
    }

    /// Checks what the model supports; the message names the offending field.
    pub fn validate(&self) -> Result<()> {
        let checks = || -> std::result::Result<(), String> {
            if self.vocab_size == 0 || self.hidden_size == 0 || self.num_hidden_layers == 0 {
                return Err(
                    "vocab_size, hidden_size and num_hidden_layers must be positive".into(),
                );
            }
            let arch = self.named_architecture()?;
            self.validate_heads(arch)?;
            self.validate_rope()?;
            self.validate_layers(arch)
        };
        checks().map_err(|m| {
            PolicyError::Config(format!(
                "config.json: {m}; the native model implements Llama (model_type \"llama\", \
                 LlamaForCausalLM), Qwen2 (\"qwen2\", Qwen2ForCausalLM) and Qwen3 (\"qwen3\", \
                 Qwen3ForCausalLM) only"
            ))
        })
    }

    /// The architecture `model_type` and `architectures` name, which must agree; an error
    /// names one the native model does not implement.
    fn named_architecture(&self) -> std::result::Result<Architecture, String> {
        let field = |k: &str| self.extra.get(k).filter(|v| !v.is_null());
        let by_type = match field("model_type") {
            None => None,
            Some(t) => Some(
                t.as_str()
                    .and_then(Architecture::from_model_type)
                    .ok_or_else(|| format!("model_type {t} is not supported"))?,
            ),
        };
        let by_class = match field("architectures") {
            None => None,
            Some(a) => {
                let names: Option<Vec<&str>> = a
                    .as_array()
                    .and_then(|v| v.iter().map(|x| x.as_str()).collect());
                match names.as_deref() {
                    Some([]) => None,
                    Some([one]) => Some(
                        Architecture::from_class_name(one)
                            .ok_or_else(|| format!("architectures {a} is not supported"))?,
                    ),
                    _ => return Err(format!("architectures {a} is not supported")),
                }
            }
        };
        match (by_type, by_class) {
            (Some(t), Some(c)) if t != c => Err(format!(
                "model_type \"{}\" and architectures [\"{}\"] name different architectures",
                t.model_type(),
                c.class_name()
            )),
            (t, c) => Ok(t.or(c).unwrap_or(Architecture::Llama)),
        }
    }

    /// Heads, key/value heads and the head width (`head_dim`: Qwen's may differ from
    /// hidden_size / num_attention_heads, Llama's may not).
    #[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` needs Rust 1.87; MSRV is 1.80.
    fn validate_heads(&self, arch: Architecture) -> std::result::Result<(), String> {
        let heads = self.num_attention_heads;
        let explicit = self.extra.get("head_dim").filter(|v| !v.is_null());
        let honours_head_dim = arch != Architecture::Llama;
        if heads == 0
            || (!(honours_head_dim && explicit.is_some()) && self.hidden_size % heads != 0)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {heads}",
                self.hidden_size
            ));
        }
        let kv = self.kv_heads();
        if kv == 0 || heads % kv != 0 {
            return Err(format!(
                "num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
            ));
        }
        if let Some(h) = explicit {
            let plain = (self.hidden_size / heads) as u64;
            match h.as_u64() {
                Some(n) if n > 0 && (honours_head_dim || n == plain) => {}
                Some(_) if !honours_head_dim => {
                    return Err(format!(
                        "head_dim {h} differs from hidden_size / num_attention_heads = {plain}"
                    ))
                }
                _ => return Err(format!("head_dim {h} is not a positive integer")),
            }
        }
        if self.head_dim() % 2 != 0 {
            return Err(format!(
                "head dimension {} must be even for RoPE",
                self.head_dim()
            ));
        }
        Ok(())
    }

    /// Plain RoPE only: no `rope_scaling`, and `rope_parameters` (transformers 5's form) of
    /// the default type with the same base as `rope_theta` (see [`LlamaConfig::load`]).
    fn validate_rope(&self) -> std::result::Result<(), String> {
        if self.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return Err("rope_scaling is not supported (plain RoPE only)".into());
        }
        let Some(p) = self.extra.get("rope_parameters").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        let Some(fields) = p.as_object() else {
            return Err(format!("rope_parameters {p} is not an object"));
        };
        for (k, v) in fields {
            match k.as_str() {
                "rope_type" if v.as_str() == Some("default") => {}
                "rope_theta" if v.as_f64() == Some(self.rope_theta) => {}
                "rope_theta" => {
                    return Err(format!(
                        "rope_parameters.rope_theta {v} differs from rope_theta {}",
                        self.rope_theta
                    ))
                }
                _ => {
                    return Err(format!(
                        "rope_parameters {k} {v} is not supported (plain RoPE only)"
                    ))
                }
            }
        }
        Ok(())
    }

    /// The fields that say what a layer computes beyond the architecture's name: a
    /// `config.json` that asks for something the model does not implement (another
    /// activation, sliding-window attention, q/k norms on Llama, MLP biases, Gemma's scaled
    /// embeddings, …) would load without a word and compute something else, so it is refused,
    /// named.
    fn validate_layers(&self, arch: Architecture) -> std::result::Result<(), String> {
        let field = |k: &str| self.extra.get(k).filter(|v| !v.is_null());
        if self.mlp_bias {
            return Err("mlp_bias is not supported".into());
        }
        if self.attention_bias && arch == Architecture::Llama {
            return Err("attention_bias is not supported for Llama".into());
        }
        if let Some(act) = field("hidden_act") {
            if act.as_str() != Some("silu") {
                return Err(format!(
                    "hidden_act {act} is not supported (the MLP is SwiGLU with silu)"
                ));
            }
        }
        self.validate_window(arch)?;
        for k in ["qk_norm", "use_qk_norm"] {
            if field(k).is_some_and(|v| v.as_bool() != Some(false)) {
                return Err(format!("{k} {} is not supported", self.extra[k]));
            }
        }
        if let Some(v) = field("quantization_config") {
            return Err(format!("quantization_config {v} is not supported"));
        }
        if let Some(tp) = field("pretraining_tp") {
            if tp.as_u64() != Some(1) {
                return Err(format!("pretraining_tp {tp} is not supported (only 1)"));
            }
        }
        Ok(())
    }

    /// Full attention in every layer. Qwen's `sliding_window` applies only with
    /// `use_sliding_window` and then from layer `max_window_layers` on (transformers 4.x), or
    /// where `layer_types` says `sliding_attention` (5.x); a configuration where either reading
    /// slides some layer is refused. Llama has no window: any is refused.
    fn validate_window(&self, arch: Architecture) -> std::result::Result<(), String> {
        let field = |k: &str| self.extra.get(k).filter(|v| !v.is_null());
        let use_window = field("use_sliding_window");
        if use_window.is_some_and(|v| v.as_bool().is_none()) {
            return Err(format!(
                "use_sliding_window {} is not a boolean",
                self.extra["use_sliding_window"]
            ));
        }
        let use_window = use_window.and_then(|v| v.as_bool()) == Some(true);
        if let Some(types) = field("layer_types") {
            let full = types
                .as_array()
                .is_some_and(|a| a.iter().all(|t| t.as_str() == Some("full_attention")));
            if !full {
                return Err(format!(
                    "layer_types {types} is not supported (full_attention layers only)"
                ));
            }
        }
        let window = field("sliding_window");
        if arch == Architecture::Llama {
            if use_window {
                return Err("use_sliding_window true is not supported".into());
            }
            return match window {
                Some(v) => Err(format!("sliding_window {v} is not supported")),
                None => Ok(()),
            };
        }
        // transformers' default for Qwen2 and Qwen3.
        let from = field("max_window_layers").map_or(Some(28), |v| v.as_u64());
        if use_window && window.is_some() && from.is_none_or(|m| m < self.num_hidden_layers as u64)
        {
            return Err(format!(
                "use_sliding_window true with max_window_layers {} below num_hidden_layers {} \
                 is not supported (sliding-window attention)",
                self.extra
                    .get("max_window_layers")
                    .unwrap_or(&serde_json::json!(28)),
                self.num_hidden_layers
            ));
        }
        Ok(())
    }

    /// Reads and checks a `config.json`. The RoPE base of transformers 5's `rope_parameters`
    /// (which replaces the top-level `rope_theta` it no longer writes) becomes `rope_theta`, so
    /// the model and a saved copy use it.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
        let mut cfg: LlamaConfig = serde_json::from_str(&text).map_err(|e| {
            PolicyError::Config(format!("{}: line {}: {e}", path.display(), e.line()))
        })?;
        let theta = cfg
            .extra
            .get("rope_parameters")
            .and_then(|p| p.get("rope_theta"))
            .and_then(|t| t.as_f64());
        if let Some(theta) = theta {
            cfg.rope_theta = theta;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Writes `config.json`, naming the architecture (`model_type`, `architectures`) where the
    /// configuration did not, so that `transformers` loads the folder as the same one.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut cfg = self.clone();
        let arch = self.architecture();
        for (k, v) in [
            ("model_type", serde_json::json!(arch.model_type())),
            ("architectures", serde_json::json!([arch.class_name()])),
        ] {
            let named = cfg
                .extra
                .get(k)
                .is_some_and(|x| !x.is_null() && x.as_array().is_none_or(|a| !a.is_empty()));
            if !named {
                cfg.extra.insert(k.into(), v);
            }
        }
        let text = serde_json::to_string_pretty(&cfg)
            .map_err(|e| PolicyError::Config(format!("cannot serialise config: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| PolicyError::io(path, e))
    }
}

/// The shape of a Llama made from scratch (`prod model init`, the demo's small model): with the
/// defaults and a 2,000-token vocabulary about 1.3 M parameters, which trains on a CPU in minutes.
/// Also `prod model init`'s flags (feature `clap`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ModelShape {
    /// BPE vocabulary size (ProD's six special tokens included).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().vocab_size,
        value_parser = prod_core::range::parse::positive_usize))]
    pub vocab_size: usize,
    /// Hidden size: a multiple of --heads, with an even head dimension (hidden / heads).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().hidden,
        value_parser = prod_core::range::parse::positive_usize))]
    pub hidden: usize,
    /// Transformer layers.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().layers,
        value_parser = prod_core::range::parse::positive_usize))]
    pub layers: usize,
    /// Attention heads: a multiple of --kv-heads.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().heads,
        value_parser = prod_core::range::parse::positive_usize))]
    pub heads: usize,
    /// Key/value heads (grouped-query attention).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().kv_heads,
        value_parser = prod_core::range::parse::positive_usize))]
    pub kv_heads: usize,
    /// Hidden size of each MLP block.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = ModelShape::default().intermediate,
        value_parser = prod_core::range::parse::positive_usize))]
    pub intermediate: usize,
}

impl Default for ModelShape {
    fn default() -> Self {
        ModelShape {
            vocab_size: 2000,
            hidden: 128,
            layers: 4,
            heads: 4,
            kv_heads: 2,
            intermediate: 384,
        }
    }
}

impl ModelShape {
    /// The constraints between the sizes (each size is at least 1); the error names them as
    /// the flags of `prod model init` do.
    pub fn check(&self) -> Result<()> {
        let ModelShape {
            vocab_size,
            hidden,
            layers,
            heads,
            kv_heads,
            intermediate,
        } = *self;
        let sizes = [
            ("vocab-size", vocab_size),
            ("hidden", hidden),
            ("layers", layers),
            ("heads", heads),
            ("kv-heads", kv_heads),
            ("intermediate", intermediate),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, n)| *n == 0) {
            return Err(PolicyError::BadInput(format!(
                "--{name} must be at least 1"
            )));
        }
        if !hidden.is_multiple_of(heads) {
            return Err(PolicyError::BadInput(format!(
                "--hidden {hidden} must be a multiple of --heads {heads}"
            )));
        }
        if !heads.is_multiple_of(kv_heads) {
            return Err(PolicyError::BadInput(format!(
                "--heads {heads} must be a multiple of --kv-heads {kv_heads}"
            )));
        }
        if !(hidden / heads).is_multiple_of(2) {
            return Err(PolicyError::BadInput(format!(
                "--hidden {hidden} / --heads {heads} = {} must be even (RoPE)",
                hidden / heads
            )));
        }
        Ok(())
    }

    /// The Llama of this shape over a tokenizer of `vocab` tokens, positions up to `positions`.
    pub fn config(&self, vocab: usize, positions: usize) -> LlamaConfig {
        let mut cfg = LlamaConfig::tiny(vocab);
        cfg.hidden_size = self.hidden;
        cfg.num_hidden_layers = self.layers;
        cfg.num_attention_heads = self.heads;
        cfg.num_key_value_heads = Some(self.kv_heads);
        cfg.intermediate_size = self.intermediate;
        cfg.max_position_embeddings = positions;
        cfg
    }
}

/// The trainer's settings (optimizer, schedule, batches, sequence lengths). Defaults are the
/// paper's (§4.1) where it gives one. What to sample is [`prod_core::Sampling`]; the training
/// examples' context cut defaults to its `context_tokens`, so a policy trains on the prompts it
/// is sampled with. Also the training flags of `prod model train` and `prod train` (feature
/// `clap`; the optimizer's constants are not flags).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct PolicyConfig {
    /// Learning rate after warm-up (AdamW; paper: 1e-5, constant).
    #[cfg_attr(feature = "clap", arg(long = "lr", value_name = "LR", default_value_t = PolicyConfig::default().learning_rate,
        value_parser = prod_core::range::parse::positive_finite_f64))]
    pub learning_rate: f64,
    /// Warm-up steps (0: none).
    #[cfg_attr(feature = "clap", arg(long = "warmup", value_name = "WARMUP", default_value_t = PolicyConfig::default().warmup_steps))]
    pub warmup_steps: usize,
    /// Examples per optimizer step (paper: 128), reached by gradient accumulation.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = PolicyConfig::default().macro_batch,
        value_parser = prod_core::range::parse::positive_usize))]
    pub macro_batch: usize,
    /// Examples per forward/backward pass (at most --macro-batch).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = PolicyConfig::default().micro_batch,
        value_parser = prod_core::range::parse::positive_usize))]
    pub micro_batch: usize,
    /// Longest training sequence (prompt + target), in tokens: the context gives way first
    /// (paper: context window 2048).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = PolicyConfig::default().max_seq_len,
        value_parser = prod_core::range::parse::positive_usize))]
    pub max_seq_len: usize,
    /// The context of a training example is cut to its last N tokens (paper: 1,000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = PolicyConfig::default().context_tokens,
        value_parser = prod_core::range::parse::positive_usize))]
    pub context_tokens: usize,
    /// Global gradient-norm clipping (0 = off).
    #[cfg_attr(feature = "clap", arg(skip = PolicyConfig::default().max_grad_norm))]
    pub max_grad_norm: f64,
    #[cfg_attr(feature = "clap", arg(skip = PolicyConfig::default().weight_decay))]
    pub weight_decay: f64,
    #[cfg_attr(feature = "clap", arg(skip = PolicyConfig::default().beta1))]
    pub beta1: f64,
    #[cfg_attr(feature = "clap", arg(skip = PolicyConfig::default().beta2))]
    pub beta2: f64,
    #[cfg_attr(feature = "clap", arg(skip = PolicyConfig::default().eps))]
    pub eps: f64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            context_tokens: prod_core::Sampling::default().context_tokens,
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

    fn qwen(arch: Architecture, k: &str, v: serde_json::Value) -> LlamaConfig {
        let mut c = LlamaConfig::tiny(64).with_architecture(arch);
        c.extra.insert(k.into(), v);
        c
    }

    /// A config of an architecture the model does not implement is refused, naming it, never
    /// loaded as another one; so is any field that would change what a layer computes.
    #[test]
    fn other_architectures_are_refused_by_name() {
        assert!(LlamaConfig::tiny(64).validate().is_ok());
        let hf_llama = with("head_dim", serde_json::json!(8));
        assert!(hf_llama.validate().is_ok());
        for arch in Architecture::ALL {
            let c = LlamaConfig::tiny(64).with_architecture(arch);
            assert!(c.validate().is_ok(), "{arch:?}");
            assert_eq!(c.architecture(), arch);
        }
        for (k, v, named) in [
            ("model_type", serde_json::json!("mistral"), "mistral"),
            ("model_type", serde_json::json!("qwen2"), "name different"),
            (
                "architectures",
                serde_json::json!(["MistralForCausalLM"]),
                "MistralForCausalLM",
            ),
            ("hidden_act", serde_json::json!("gelu"), "gelu"),
            ("head_dim", serde_json::json!(128), "head_dim 128"),
            ("use_sliding_window", serde_json::json!(true), "sliding"),
            ("sliding_window", serde_json::json!(4096), "sliding_window"),
            ("pretraining_tp", serde_json::json!(2), "pretraining_tp"),
            (
                "rope_parameters",
                serde_json::json!({"rope_type": "llama3", "factor": 8.0}),
                "rope_type",
            ),
            (
                "layer_types",
                serde_json::json!(["full_attention", "sliding_attention"]),
                "layer_types",
            ),
        ] {
            let e = with(k, v).validate().unwrap_err().to_string();
            assert!(e.contains(named) && e.contains("Llama"), "{k}: {e}");
        }
        let biased = LlamaConfig {
            attention_bias: true,
            ..LlamaConfig::tiny(64)
        };
        let e = biased.validate().unwrap_err().to_string();
        assert!(e.contains("attention_bias"), "{e}");
    }

    /// Qwen's own fields: a head width of its own, a sliding window that only counts where a
    /// layer would use it, q/k/v (and with `attention_bias`, o) biases, q/k norms in Qwen3.
    #[test]
    fn qwen_fields_are_read_and_sliding_layers_refused() {
        use Architecture::{Qwen2, Qwen3};
        let wide = qwen(Qwen3, "head_dim", serde_json::json!(12));
        assert!(wide.validate().is_ok());
        assert_eq!((wide.head_dim(), wide.attention_width()), (12, 48));
        assert!(qwen(Qwen3, "head_dim", serde_json::json!(7))
            .validate()
            .is_err());
        // transformers 4.x writes a window that no layer uses.
        let mut unused = qwen(Qwen2, "sliding_window", serde_json::json!(4096));
        unused
            .extra
            .insert("use_sliding_window".into(), false.into());
        assert!(unused.validate().is_ok());
        let mut sliding = qwen(Qwen2, "sliding_window", serde_json::json!(4096));
        sliding
            .extra
            .insert("use_sliding_window".into(), true.into());
        // transformers' default max_window_layers, 28, leaves both layers without a window.
        assert!(sliding.validate().is_ok());
        sliding.extra.insert("max_window_layers".into(), 1.into());
        let e = sliding.validate().unwrap_err().to_string();
        assert!(e.contains("max_window_layers 1"), "{e}");
        sliding.extra.insert("max_window_layers".into(), 2.into());
        assert!(sliding.validate().is_ok(), "no layer slides");
        let q2 = LlamaConfig::tiny(64).with_architecture(Qwen2);
        assert!(q2.qkv_bias() && !q2.o_bias() && !q2.qk_norm());
        let q3 = LlamaConfig::tiny(64).with_architecture(Qwen3);
        assert!(!q3.qkv_bias() && !q3.o_bias() && q3.qk_norm());
        let q3b = LlamaConfig {
            attention_bias: true,
            ..q3
        };
        assert!(q3b.validate().is_ok() && q3b.qkv_bias() && q3b.o_bias());
    }

    /// Folders as transformers writes them: Qwen2 and Qwen3 load (the RoPE base from
    /// `rope_parameters`), and a save names the architecture again; Mistral is refused.
    #[test]
    fn transformers_configs_load_and_save_as_their_architecture() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        let shape = r#""vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "hidden_act": "silu", "use_sliding_window": false, "sliding_window": null,
               "max_window_layers": 28, "layer_types": ["full_attention", "full_attention"],
               "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}"#;
        for (ty, class, arch) in [
            ("qwen2", "Qwen2ForCausalLM", Architecture::Qwen2),
            ("qwen3", "Qwen3ForCausalLM", Architecture::Qwen3),
        ] {
            let text =
                format!(r#"{{"architectures": ["{class}"], "model_type": "{ty}", {shape}}}"#);
            std::fs::write(&p, text).unwrap();
            let c = LlamaConfig::load(&p).unwrap();
            assert_eq!((c.architecture(), c.rope_theta), (arch, 1e6));
            // Either name alone is enough: the save writes the other.
            for missing in ["model_type", "architectures"] {
                let mut bare = c.clone();
                bare.extra.insert(missing.into(), serde_json::Value::Null);
                assert_eq!(bare.architecture(), arch);
                bare.save(&p).unwrap();
                let back: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                assert_eq!(back["model_type"], ty);
                assert_eq!(back["architectures"], serde_json::json!([class]));
                assert_eq!(LlamaConfig::load(&p).unwrap(), c);
            }
        }
        std::fs::write(
            &p,
            format!(
                r#"{{"architectures": ["MistralForCausalLM"], "model_type": "mistral", {shape}}}"#
            ),
        )
        .unwrap();
        let e = LlamaConfig::load(&p).unwrap_err().to_string();
        assert!(
            e.contains("\"mistral\"") && e.contains("not supported"),
            "{e}"
        );
    }

    /// The shape's constraints are checked in one place, each naming its flags.
    #[test]
    fn model_shapes_are_checked() {
        assert_eq!(
            ModelShape::default().check().map_err(|e| e.to_string()),
            Ok(())
        );
        let bad = |f: fn(&mut ModelShape)| {
            let mut s = ModelShape::default();
            f(&mut s);
            s.check().unwrap_err().to_string()
        };
        assert!(bad(|s| s.hidden = 130).contains("--hidden 130 must be a multiple of --heads 4"));
        assert!(bad(|s| s.kv_heads = 3).contains("--heads 4 must be a multiple of --kv-heads 3"));
        assert!(bad(|s| s.hidden = 12).contains("= 3 must be even"));
        assert!(bad(|s| s.heads = 0).contains("--heads must be at least 1"));
        let cfg = ModelShape::default().config(100, 1024);
        assert_eq!(
            (
                cfg.hidden_size,
                cfg.num_hidden_layers,
                cfg.intermediate_size
            ),
            (128, 4, 384)
        );
        assert_eq!(
            (cfg.num_key_value_heads, cfg.max_position_embeddings),
            (Some(2), 1024)
        );
    }
}

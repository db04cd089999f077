//! The files that make a saved model directory load as it is in Hugging Face `transformers`
//! (the project's pinned 4.44 and the current 5.x) and in vLLM, next to the weights and
//! `config.json` that [`crate::model::Llama::save`] writes:
//!
//! * `tokenizer.json` with its BPE merges in the `"a b"` string form. tokenizers ≥ 0.20 writes
//!   `["a", "b"]` pairs, which the tokenizers 0.19 inside transformers 4.44 cannot read ("data
//!   did not match any variant of untagged enum ModelWrapper"); every version reads strings.
//!   Pairs are kept when a token contains a space, the one case strings cannot express.
//! * ProD's six tokens (`<use_invoke>`, …) as *plain* added tokens (`"special": false`,
//!   `"normalized": false`): still one id each and never split, but kept by every decode.
//!   Trainers decode completions with `skip_special_tokens=True` (verl's reward managers, TRL's
//!   GRPO trainer, vLLM's text output by default), which would delete them and leave the
//!   reward function a completion that is not a conditional proof.
//! * `tokenizer_config.json`: the end token (also padding), no automatic BOS/EOS (ProD's prompt
//!   adds none), the context length, the model's inputs (`input_ids`, `attention_mask`: no
//!   `token_type_ids`, which a Llama's `generate` refuses), and a chat template that passes the one user message
//!   through unchanged (ProD's prompt is plain text; frameworks that always apply a template,
//!   such as verl, then build exactly ProD's prompt).
//! * `generation_config.json`: end and padding ids, sampling at the paper's temperature.
//! * `prompt_template.json`: the prompt format ([`crate::prompt::template`]), which no
//!   `transformers` field can express (two parts tokenised separately, the context cut from the
//!   left), so that a user outside ProD builds the prompts the model was trained on.

use std::path::Path;

use serde_json::{json, Value};

use crate::config::LlamaConfig;
use crate::tokenizer::ProdTokenizer;
use crate::{PolicyError, Result};

/// The transformers version these files are written for (the project's pinned one).
const TRANSFORMERS_VERSION: &str = "4.44.2";

/// Writes `tokenizer_config.json`, `generation_config.json` and the prompt template into `dir`
/// and rewrites the merges of `dir/tokenizer.json` (already saved) in string form.
pub(crate) fn write_configs(dir: &Path, cfg: &LlamaConfig, tok: &ProdTokenizer) -> Result<()> {
    let tokenizer = dir.join("tokenizer.json");
    let mut value = read_json(&tokenizer)?;
    let merges = legacy_merges(&mut value);
    if plain_markers(&mut value) || merges {
        write_json(&tokenizer, &value)?;
    }
    let end = tok
        .inner()
        .id_to_token(tok.end_id())
        .ok_or_else(|| PolicyError::Config(format!("end id {} has no token", tok.end_id())))?;
    let tokenizer_config = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": cfg.max_position_embeddings,
        "eos_token": end,
        "pad_token": end,
        "add_bos_token": false,
        "add_eos_token": false,
        "clean_up_tokenization_spaces": false,
        "model_input_names": MODEL_INPUT_NAMES,
        "chat_template": PASS_THROUGH_CHAT_TEMPLATE,
    });
    write_json(&dir.join("tokenizer_config.json"), &tokenizer_config)?;
    let mut generation = json!({
        "eos_token_id": tok.end_id(),
        "pad_token_id": tok.end_id(),
        "do_sample": true,
        "temperature": prod_core::PAPER_TEMPERATURE,
        "transformers_version": TRANSFORMERS_VERSION,
    });
    if let Some(bos) = &cfg.bos_token_id {
        generation["bos_token_id"] = bos.clone();
    }
    write_json(&dir.join("generation_config.json"), &generation)?;
    write_json(
        &dir.join(crate::prompt::TEMPLATE_FILE),
        &crate::prompt::template(&end),
    )
}

/// What the tokenizer hands the model (`model_input_names`). Without it `transformers` 4.44's
/// `PreTrainedTokenizerFast` also returns `token_type_ids`, which a Llama's `generate` refuses
/// (`model.generate(**tok(prompt, return_tensors="pt"))` fails).
pub const MODEL_INPUT_NAMES: [&str; 2] = ["input_ids", "attention_mask"];

/// The chat template of a ProD model folder: the messages' contents as they are, so a
/// framework that applies a template to a one-message conversation gets ProD's prompt text.
pub const PASS_THROUGH_CHAT_TEMPLATE: &str =
    "{% for message in messages %}{{ message['content'] }}{% endfor %}";

/// Marks ProD's six tokens in `added_tokens` as plain tokens (`special` and `normalized`
/// false), so that decoding with `skip_special_tokens=True` keeps them; true when one changed.
fn plain_markers(tokenizer: &mut Value) -> bool {
    let Some(added) = tokenizer
        .get_mut("added_tokens")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut changed = false;
    for t in added {
        let is_marker = t
            .get("content")
            .and_then(Value::as_str)
            .is_some_and(|c| prod_core::conditional::SPECIAL_TOKENS.contains(&c));
        if !is_marker {
            continue;
        }
        for key in ["special", "normalized"] {
            if t.get(key) != Some(&Value::Bool(false)) {
                t[key] = Value::Bool(false);
                changed = true;
            }
        }
    }
    changed
}

/// Rewrites `model.merges` pairs as `"a b"` strings; false when there is nothing to rewrite or
/// a token contains a space.
fn legacy_merges(tokenizer: &mut Value) -> bool {
    let Some(merges) = tokenizer
        .pointer_mut("/model/merges")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let pairs: Option<Vec<String>> = merges
        .iter()
        .map(|m| match m.as_array().map(Vec::as_slice) {
            Some([Value::String(a), Value::String(b)]) if !a.contains(' ') && !b.contains(' ') => {
                Some(format!("{a} {b}"))
            }
            _ => None,
        })
        .collect();
    match pairs {
        Some(strings) if !strings.is_empty() => {
            *merges = strings.into_iter().map(Value::String).collect();
            true
        }
        _ => false,
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| PolicyError::Config(format!("{}: {e}", path.display())))
}

/// Written beside and renamed over: a reader never sees half a file.
fn write_json(path: &Path, value: &Value) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| PolicyError::Config(format!("{}: {e}", path.display())))?;
    std::fs::write(&tmp, text).map_err(|e| PolicyError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| PolicyError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_become_strings_unless_a_token_has_a_space() {
        let mut v = json!({"model": {"merges": [["Ġ", "t"], ["a", "b"]]}});
        assert!(legacy_merges(&mut v));
        assert_eq!(v["model"]["merges"], json!(["Ġ t", "a b"]));
        let mut spaced = json!({"model": {"merges": [["a b", "c"]]}});
        assert!(!legacy_merges(&mut spaced));
        assert_eq!(spaced["model"]["merges"], json!([["a b", "c"]]));
        let mut already = json!({"model": {"merges": ["a b"]}});
        assert!(!legacy_merges(&mut already));
    }

    #[test]
    fn prod_markers_are_written_as_plain_tokens() {
        let mut v = json!({"added_tokens": [
            {"id": 0, "content": "<|endoftext|>", "special": true, "normalized": false},
            {"id": 1, "content": "<use_invoke>", "special": true, "normalized": true},
            {"id": 2, "content": "</invoke>", "special": true},
        ]});
        assert!(plain_markers(&mut v));
        assert_eq!(
            v["added_tokens"][0]["special"], true,
            "the end token stays special"
        );
        for i in [1, 2] {
            assert_eq!(v["added_tokens"][i]["special"], false);
            assert_eq!(v["added_tokens"][i]["normalized"], false);
        }
        assert!(!plain_markers(&mut v), "already plain: nothing to rewrite");
    }
}

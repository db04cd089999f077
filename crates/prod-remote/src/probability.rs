//! `P(a) / (P(a) + P(b))` for the token after a prompt, asked the way each server can answer.

use prod_rl::PolicyError;
use serde_json::{json, Value};

use crate::{PromptFormat, RemotePolicy, ServerKind};

/// A two-token probability and whether it rests on an upper bound (a token outside the top k
/// of a server that only reports the top k).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairEstimate {
    pub p: f64,
    pub bounded: bool,
}

fn err(msg: impl Into<String>) -> PolicyError {
    PolicyError(msg.into())
}

/// `sigmoid(la - lb)`: exact even when both probabilities underflow.
fn from_logprobs(la: f64, lb: f64) -> f64 {
    1.0 / (1.0 + (lb - la).exp())
}

pub(crate) fn pair(
    policy: &RemotePolicy,
    prompt: &[u32],
    a: u32,
    b: u32,
) -> Result<PairEstimate, PolicyError> {
    match policy.cfg.server {
        ServerKind::Vllm => {
            if policy.cfg.prompt_format != PromptFormat::TokenIds {
                return Err(err("vLLM probabilities need prompt_format = \"token_ids\""));
            }
            let la = vllm_prompt_logprob(policy, prompt, a)?;
            let lb = vllm_prompt_logprob(policy, prompt, b)?;
            Ok(PairEstimate {
                p: from_logprobs(la, lb),
                bounded: false,
            })
        }
        ServerKind::Sglang => sglang(policy, prompt, a, b),
        ServerKind::LlamaCpp => top_k(policy, prompt, a, b),
    }
}

/// vLLM: append the token to the prompt and read its `prompt_logprobs` entry (the log-probability
/// of that very token given everything before it, whatever its rank).
fn vllm_prompt_logprob(
    policy: &RemotePolicy,
    prompt: &[u32],
    token: u32,
) -> Result<f64, PolicyError> {
    let mut ids = prompt.to_vec();
    ids.push(token);
    let body = json!({
        "model": policy.cfg.model, "prompt": ids, "n": 1, "max_tokens": 1, "temperature": 0.0,
        "prompt_logprobs": 0, "skip_special_tokens": false,
    });
    let v = policy.post("/v1/completions", &body)?;
    let entry = v
        .pointer("/choices/0/prompt_logprobs")
        .and_then(Value::as_array)
        .and_then(|a| a.last())
        .ok_or_else(|| err("the server's answer has no choices[0].prompt_logprobs: is it vLLM (server = \"vllm\")?"))?;
    entry
        .get(token.to_string())
        .and_then(|e| e.get("logprob"))
        .and_then(Value::as_f64)
        .ok_or_else(|| err(format!("prompt_logprobs has no entry for token {token}")))
}

/// SGLang's native `/generate` with `token_ids_logprob`: the log-probabilities of exactly the
/// two tokens at the first generated position.
fn sglang(
    policy: &RemotePolicy,
    prompt: &[u32],
    a: u32,
    b: u32,
) -> Result<PairEstimate, PolicyError> {
    let body = json!({
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
        "return_logprob": true,
        "token_ids_logprob": [a, b],
    });
    let v = policy.post("/generate", &body)?;
    let first = v
        .pointer("/meta_info/output_token_ids_logprobs/0")
        .and_then(Value::as_array)
        .ok_or_else(|| err("the server's answer has no meta_info.output_token_ids_logprobs: is it SGLang (server = \"sglang\")?"))?;
    let find = |id: u32| {
        first.iter().find_map(|e| {
            let e = e.as_array()?;
            (e.get(1)?.as_u64()? == id as u64)
                .then(|| e.first()?.as_f64())
                .flatten()
        })
    };
    match (find(a), find(b)) {
        (Some(la), Some(lb)) => Ok(PairEstimate {
            p: from_logprobs(la, lb),
            bounded: false,
        }),
        _ => Err(err(format!(
            "token_ids_logprob did not return both tokens {a} and {b}"
        ))),
    }
}

/// llama.cpp: only the top k log-probabilities exist, keyed by token text. A token outside the
/// top k has at most the k-th log-probability: that bound is used and flagged.
fn top_k(
    policy: &RemotePolicy,
    prompt: &[u32],
    a: u32,
    b: u32,
) -> Result<PairEstimate, PolicyError> {
    let body = json!({
        "model": policy.cfg.model, "prompt": policy.prompt_value(prompt)?, "n": 1, "max_tokens": 1,
        "temperature": 0.0, "logprobs": policy.cfg.top_logprobs,
    });
    let v = policy.post("/v1/completions", &body)?;
    let top = v
        .pointer("/choices/0/logprobs/top_logprobs/0")
        .and_then(Value::as_object)
        .ok_or_else(|| err("the server's answer has no choices[0].logprobs.top_logprobs[0]"))?;
    let text = |id: u32| {
        policy
            .tok
            .decode(&[id])
            .map_err(|e| err(format!("decode: {e}")))
    };
    let (ta, tb) = (text(a)?, text(b)?);
    let floor = top
        .values()
        .filter_map(Value::as_f64)
        .fold(f64::INFINITY, f64::min);
    let get = |t: &str| top.get(t).and_then(Value::as_f64);
    Ok(match (get(&ta), get(&tb)) {
        (Some(la), Some(lb)) => PairEstimate {
            p: from_logprobs(la, lb),
            bounded: false,
        },
        (Some(la), None) if floor.is_finite() => PairEstimate {
            p: from_logprobs(la, floor),
            bounded: true,
        },
        (None, Some(lb)) if floor.is_finite() => PairEstimate {
            p: from_logprobs(floor, lb),
            bounded: true,
        },
        _ => PairEstimate {
            p: 0.5,
            bounded: true,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::from_logprobs;

    #[test]
    fn pair_from_logprobs() {
        assert!((from_logprobs(0.0, 0.0) - 0.5).abs() < 1e-12);
        assert!((from_logprobs((0.3f64).ln(), (0.1f64).ln()) - 0.75).abs() < 1e-12);
        // Both underflow as probabilities; their ratio is still exact.
        assert!((from_logprobs(-2000.0, -2001.0) - 1.0 / (1.0 + (-1.0f64).exp())).abs() < 1e-12);
    }
}

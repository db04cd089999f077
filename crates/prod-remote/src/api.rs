//! Wire types of `/v1/completions` (OpenAI's completions API as vLLM, SGLang and llama.cpp
//! serve it). Vendor fields ride in the flattened `extra` maps, so one type serves every server.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize)]
pub struct CompletionRequest {
    pub model: String,
    /// Token ids or text.
    pub prompt: serde_json::Value,
    pub n: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<usize>,
    /// Vendor extensions (`skip_special_tokens`, `prompt_logprobs`, …).
    #[serde(flatten)]
    pub extra: HashMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CompletionResponse {
    pub choices: Vec<Choice>,
    #[serde(flatten)]
    pub extra: HashMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: usize,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub logprobs: Option<serde_json::Value>,
    /// Why the server stopped: `"stop"` (the end token), `"length"` (the token limit cut it).
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// vLLM: one entry per prompt token (`null` for the first), each a map from token id to
    /// `{"logprob": …}`.
    #[serde(default)]
    pub prompt_logprobs: Option<serde_json::Value>,
    #[serde(flatten)]
    pub extra: HashMap<String, serde_json::Value>,
}

//! Remote policy backends: ProD samples conditional proofs from an OpenAI-compatible inference
//! server (vLLM, SGLang, llama.cpp's server as far as it goes) through the same
//! [`prod_rl::Policy`] trait as the native model, so tree generation, RL and evaluation do not
//! care where the model runs.
//!
//! * Prompts are built exactly as the native policy builds them (`prod_policy::prompt`): the
//!   context truncated to its last N tokens, the statement, the forced `t0` token. They are sent
//!   as token ids (vLLM, SGLang) so the server sees the very tokens the model was trained on, or
//!   as text where a server only takes text.
//! * Sampling: raw `/v1/completions`, `n` samples of one prompt per request where the server
//!   allows it, temperature, top-p, the end token as stop, special tokens kept in the output.
//! * The two-token probabilities (`P(<use_invoke>)` vs `P(<no_invoke>)`, the value's `<true>` vs
//!   `<false>`) through each server's own mechanism: vLLM `prompt_logprobs`, SGLang
//!   `token_ids_logprob`, llama.cpp top-k `logprobs` (a token outside the top k gets the k-th
//!   log-probability as an upper bound, flagged in [`PairEstimate::bounded`]).
//! * Bounded concurrency, per-request timeouts, retries with exponential backoff on transport
//!   errors, 408/429/5xx; a 4xx names what the server refused. Every failure is a
//!   [`prod_rl::PolicyError`] (infrastructure), never a proof failure.

pub mod api;
pub mod probability;
#[cfg(feature = "test-server")]
pub mod testing;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use prod_core::{Sampling, T0};
use prod_policy::tokenizer::ProdTokenizer;
use prod_rl::{Completion, Policy, PolicyError, SampleRequest};
use serde::{Deserialize, Serialize};

pub use probability::PairEstimate;

/// Which server is on the other end: it decides how the two-token probabilities are asked for
/// and which vendor fields are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// vLLM's OpenAI server (`prompt_logprobs`, token-id prompts, `n` > 1).
    #[default]
    Vllm,
    /// SGLang (`/v1/completions` for samples, native `/generate` with `token_ids_logprob`).
    Sglang,
    /// llama.cpp's server or llama-cpp-python's (`/v1/completions`, one completion per request,
    /// top-k `logprobs` only).
    #[cfg_attr(feature = "clap", value(name = "llama_cpp"))]
    LlamaCpp,
}

/// How prompts are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptFormat {
    /// Token ids (exactly the training tokens).
    #[default]
    TokenIds,
    /// Text (decoded from the same token ids, special tokens kept).
    Text,
}

/// The server and how to talk to it (`[remote]` of `rl.toml`, `prod eval --remote-url …`).
/// What to sample (temperature, top-p, length, context) is not here: it is the run's one
/// [`Sampling`], given to [`RemotePolicy::new`] beside these settings, so a native and a remote
/// policy sample with the same settings from the same place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteConfig {
    /// e.g. `http://127.0.0.1:8000` (the `/v1/...` paths are added).
    pub base_url: String,
    /// The served model name (`--served-model-name` of vLLM).
    pub model: String,
    /// Name of the environment variable holding the API key, if the server wants one.
    pub api_key_env: Option<String>,
    pub server: ServerKind,
    pub prompt_format: PromptFormat,
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Per-request timeout.
    pub timeout_s: u64,
    /// Extra tries after a transport error, 408, 429 or 5xx.
    pub retries: u32,
    /// First backoff; doubled after each retry.
    pub backoff_ms: u64,
    /// Most samples of one prompt in one request (`n`); 1 for servers that allow one.
    pub max_n_per_request: usize,
    /// Top-k asked for where only top-k log-probabilities exist (llama.cpp).
    pub top_logprobs: usize,
    pub seed: Option<u64>,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            base_url: "http://127.0.0.1:8000".into(),
            model: "prod".into(),
            api_key_env: None,
            server: ServerKind::Vllm,
            prompt_format: PromptFormat::TokenIds,
            max_concurrency: 8,
            timeout_s: 300,
            retries: 4,
            backoff_ms: 500,
            max_n_per_request: 16,
            top_logprobs: 20,
            seed: None,
        }
    }
}

impl RemoteConfig {
    /// The settings a llama.cpp server can serve (one completion per request, text prompts).
    /// The settings of a `server` at `base_url` (each kind's own defaults).
    pub fn for_server(server: ServerKind, base_url: &str) -> Self {
        match server {
            ServerKind::LlamaCpp => RemoteConfig::llama_cpp(base_url),
            _ => RemoteConfig {
                base_url: base_url.into(),
                server,
                ..Default::default()
            },
        }
    }

    pub fn llama_cpp(base_url: &str) -> Self {
        RemoteConfig {
            base_url: base_url.into(),
            server: ServerKind::LlamaCpp,
            prompt_format: PromptFormat::Text,
            max_n_per_request: 1,
            max_concurrency: 1,
            ..Default::default()
        }
    }
}

fn err(msg: impl Into<String>) -> PolicyError {
    PolicyError(msg.into())
}

/// A policy served by a remote inference server.
pub struct RemotePolicy {
    cfg: RemoteConfig,
    sampling: Sampling,
    tok: ProdTokenizer,
    client: reqwest::blocking::Client,
    api_key: Option<String>,
    /// How many HTTP requests were sent (retries included), for logs and tests.
    pub requests_sent: AtomicUsize,
}

impl RemotePolicy {
    /// `tok` is the model's tokenizer (with ProD's special tokens): prompts are built with it;
    /// `sampling`: what to sample (its context length builds the prompts).
    pub fn new(
        cfg: RemoteConfig,
        sampling: Sampling,
        tok: ProdTokenizer,
    ) -> Result<Self, PolicyError> {
        sampling.validate().map_err(err)?;
        if cfg.max_concurrency == 0 || cfg.max_n_per_request == 0 {
            return Err(err(
                "max_concurrency and max_n_per_request must be at least 1",
            ));
        }
        if !(cfg.base_url.starts_with("http://") || cfg.base_url.starts_with("https://")) {
            return Err(err(format!(
                "base_url must start with http:// or https://, got {:?}",
                cfg.base_url
            )));
        }
        let api_key = match &cfg.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                err(format!(
                    "environment variable {var} (api_key_env) is not set"
                ))
            })?),
            None => None,
        };
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_s.max(1)))
            .build()
            .map_err(|e| err(format!("cannot build the HTTP client: {e}")))?;
        Ok(RemotePolicy {
            cfg,
            sampling,
            tok,
            client,
            api_key,
            requests_sent: AtomicUsize::new(0),
        })
    }

    /// The tokenizer prompts are built with.
    pub fn tokenizer(&self) -> &ProdTokenizer {
        &self.tok
    }

    pub fn config(&self) -> &RemoteConfig {
        &self.cfg
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.cfg.base_url.trim_end_matches('/'))
    }

    /// POST `body` as JSON, retrying transport errors, 408, 429 and 5xx with backoff.
    pub(crate) fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, PolicyError> {
        let url = self.url(path);
        let mut backoff = Duration::from_millis(self.cfg.backoff_ms);
        let mut last = String::new();
        for attempt in 0..=self.cfg.retries {
            if attempt > 0 {
                std::thread::sleep(backoff);
                backoff = backoff.saturating_mul(2);
            }
            self.requests_sent.fetch_add(1, Ordering::SeqCst);
            let mut req = self.client.post(&url).json(body);
            if let Some(k) = &self.api_key {
                req = req.bearer_auth(k);
            }
            match req.send() {
                Err(e) => last = format!("{url}: {e}"),
                Ok(resp) => {
                    let status = resp.status();
                    let text = resp.text().unwrap_or_default();
                    if status.is_success() {
                        return serde_json::from_str(&text).map_err(|e| {
                            err(format!(
                                "{url}: the server's answer is not JSON ({e}): {}",
                                clip(&text)
                            ))
                        });
                    }
                    let retry = status.is_server_error()
                        || status.as_u16() == 408
                        || status.as_u16() == 429;
                    last = format!("{url}: HTTP {status}: {}", clip(&text));
                    if !retry {
                        return Err(err(format!(
                            "the server refused the request ({last}); check that it supports the fields ProD sends for server = {:?}",
                            self.cfg.server
                        )));
                    }
                }
            }
        }
        Err(err(format!(
            "no answer after {} tries: {last}",
            self.cfg.retries + 1
        )))
    }

    /// The prompt ids of a request (context tail + statement + forced `t0`).
    pub fn prompt_ids(
        &self,
        context: &str,
        statement: &str,
        forced: Option<T0>,
    ) -> Result<Vec<u32>, PolicyError> {
        let ids = prod_policy::prompt::prompt_ids(
            &self.tok,
            context,
            statement,
            self.sampling.context_tokens,
        )
        .map_err(|e| err(format!("prompt: {e}")))?;
        Ok(match forced {
            Some(t0) => prod_policy::prompt::with_forced_t0(&self.tok, &ids, t0),
            None => ids,
        })
    }

    pub(crate) fn prompt_value(&self, ids: &[u32]) -> Result<serde_json::Value, PolicyError> {
        Ok(match self.cfg.prompt_format {
            PromptFormat::TokenIds => serde_json::json!(ids),
            PromptFormat::Text => serde_json::json!(self
                .tok
                .decode(ids)
                .map_err(|e| err(format!("decode: {e}")))?),
        })
    }

    /// `n` completions of one prompt, split into requests of at most `max_n_per_request`.
    fn complete(
        &self,
        ids: &[u32],
        n: usize,
        seed_offset: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        let mut out = Vec::with_capacity(n);
        let mut part = 0u64;
        let end = self
            .tok
            .decode(&[self.tok.end_id()])
            .map_err(|e| err(format!("decode: {e}")))?;
        while out.len() < n {
            let k = (n - out.len()).min(self.cfg.max_n_per_request);
            let mut body = api::CompletionRequest {
                model: self.cfg.model.clone(),
                prompt: self.prompt_value(ids)?,
                n: k,
                temperature: self.sampling.temperature,
                top_p: self.sampling.top_p,
                max_tokens: self.sampling.max_new_tokens,
                stop: vec![end.clone()],
                seed: self
                    .cfg
                    .seed
                    .map(|s| s.wrapping_add(seed_offset).wrapping_add(part)),
                logprobs: None,
                extra: HashMap::new(),
            };
            if matches!(self.cfg.server, ServerKind::Vllm | ServerKind::Sglang) {
                // The conditional proof's `<invoke>`s are special tokens: keep them in the text.
                body.extra
                    .insert("skip_special_tokens".into(), serde_json::json!(false));
                body.extra.insert(
                    "spaces_between_special_tokens".into(),
                    serde_json::json!(false),
                );
            }
            let v = self.post(
                "/v1/completions",
                &serde_json::to_value(&body).map_err(|e| err(e.to_string()))?,
            )?;
            let resp: api::CompletionResponse = serde_json::from_value(v)
                .map_err(|e| err(format!("unexpected /v1/completions answer: {e}")))?;
            if resp.choices.len() != k {
                return Err(err(format!(
                    "asked for n = {k} completions, got {} (set max_n_per_request = 1 for this server)",
                    resp.choices.len()
                )));
            }
            let mut choices = resp.choices;
            choices.sort_by_key(|c| c.index);
            // Only the server's own word marks a cut: a missing `finish_reason` is not one.
            out.extend(choices.into_iter().map(|c| Completion {
                truncated: c.finish_reason.as_deref() == Some("length"),
                text: c.text,
            }));
            part += 1;
        }
        Ok(out)
    }

    /// `P(a) / (P(a) + P(b))` for the next token after each prompt.
    pub fn pair_probabilities(
        &self,
        prompts: &[Vec<u32>],
        a: u32,
        b: u32,
    ) -> Result<Vec<PairEstimate>, PolicyError> {
        self.parallel(prompts.len(), |i| {
            probability::pair(self, &prompts[i], a, b)
        })
    }

    /// The value `V(x) = P(<true>) / (P(<true>) + P(<false>))` for each (context, statement).
    pub fn value(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        let prompts = goals
            .iter()
            .map(|(c, s)| self.prompt_ids(c, s, None))
            .collect::<Result<Vec<_>, _>>()?;
        let (t, f) = (self.tok.true_id(), self.tok.false_id());
        Ok(self
            .pair_probabilities(&prompts, t, f)?
            .into_iter()
            .map(|e| e.p)
            .collect())
    }

    /// Run `f(0..n)` on at most `max_concurrency` threads; results in order, first error wins.
    fn parallel<T: Send>(
        &self,
        n: usize,
        f: impl Fn(usize) -> Result<T, PolicyError> + Sync,
    ) -> Result<Vec<T>, PolicyError> {
        let results: Vec<Mutex<Option<Result<T, PolicyError>>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let failed = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..self.cfg.max_concurrency.min(n.max(1)) {
                s.spawn(|| loop {
                    if failed.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    let r = f(i);
                    if r.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        let mut out = Vec::with_capacity(n);
        for m in results {
            match m.into_inner().ok().flatten() {
                Some(Ok(v)) => out.push(v),
                Some(Err(e)) => return Err(e),
                None => return Err(err("a request was not run (an earlier one failed)")),
            }
        }
        Ok(out)
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.len() <= 500 {
        return s.to_string();
    }
    let mut end = 500;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl Policy for RemotePolicy {
    fn sample(&mut self, requests: &[SampleRequest<'_>]) -> Result<Vec<Completion>, PolicyError> {
        // Identical prompts share one request with `n` samples.
        let mut groups: Vec<(Vec<u32>, Vec<usize>)> = vec![];
        let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
        for (i, r) in requests.iter().enumerate() {
            let ids = self.prompt_ids(r.context, r.statement, r.forced_t0)?;
            match index.get(&ids) {
                Some(&g) => groups[g].1.push(i),
                None => {
                    index.insert(ids.clone(), groups.len());
                    groups.push((ids, vec![i]));
                }
            }
        }
        let texts = self.parallel(groups.len(), |g| {
            self.complete(&groups[g].0, groups[g].1.len(), g as u64 * 1000)
        })?;
        let mut out = vec![Completion::default(); requests.len()];
        for ((_, members), texts) in groups.iter().zip(texts) {
            for (&i, t) in members.iter().zip(texts) {
                out[i] = t;
            }
        }
        Ok(out)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        let prompts = goals
            .iter()
            .map(|(c, s)| self.prompt_ids(c, s, None))
            .collect::<Result<Vec<_>, _>>()?;
        let (a, b) = (self.tok.use_invoke_id(), self.tok.no_invoke_id());
        Ok(self
            .pair_probabilities(&prompts, a, b)?
            .into_iter()
            .map(|e| e.p)
            .collect())
    }
}

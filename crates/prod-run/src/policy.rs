//! Policies for runs: [`NativePolicy`] (prod-policy's Llama behind `prod_rl::Policy`) and
//! [`LoggedPolicy`], which answers from the run store's sample log first so that a resumed run
//! re-generates exactly the same trees without asking the model again.

use std::collections::HashMap;

use rand::SeedableRng;

use prod_core::{Sampling, T0};
use prod_policy::model::Llama;
use prod_policy::prompt;
use prod_policy::sample;
use prod_policy::{DecodeWeights, ProdTokenizer};
use prod_rl::{Completion, Policy, PolicyError, SampleRequest};

use crate::store::{hash_fields, Phase, RunStore};

/// A policy whose randomness is addressed by a request's sequence number: the answer to
/// request `seq` does not depend on what was asked before it (so a resumed run, which skips
/// the logged requests, draws exactly what an uninterrupted run would have drawn).
pub trait SeqPolicy {
    /// One completion per request; request `i` uses the random stream of `first_seq + i`.
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError>;
    /// P(<use_invoke>) normalised over the two `t0` tokens.
    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError>;
    /// Requests per `sample_at` call that let this policy batch well ([`LoggedPolicy`] commits
    /// its log in chunks of this size).
    fn requests_per_call(&self) -> usize {
        8
    }
}

/// Seeds the `t0` choices of [`FirstToken::T0`] apart from the samples' own streams.
const T0_STREAM: u64 = 0x7430_5f63_686f_6963;

/// `p = a / (a + b)` as sampling at `temperature` sees it: `a^(1/T) / (a^(1/T) + b^(1/T))`;
/// temperature 0 is the more probable side.
fn tempered(p: f64, temperature: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    if temperature <= 0.0 {
        return if p > 0.5 { 1.0 } else { 0.0 };
    }
    let (a, b) = (p.powf(1.0 / temperature), (1.0 - p).powf(1.0 / temperature));
    if a + b > 0.0 {
        a / (a + b)
    } else {
        0.5
    }
}

/// SplitMix64: seeds of independent streams from (seed, seq).
pub fn mix_seed(seed: u64, seq: u64) -> u64 {
    let mut z = seed
        ^ seq
            .wrapping_add(0x9E37_79B9_7F4A_7C15)
            .wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Sampling options of the native policy: what to sample ([`Sampling`]: the paper's
/// temperature 0.7, 1,000 context tokens) and how this sampler goes about it. Written flat in a
/// config's `[sampling]` table; unknown keys are refused ([`NativeParamsKeys`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "NativeParamsKeys")]
pub struct NativeParams {
    /// What to sample: the settings every policy shares.
    #[serde(flatten)]
    pub sampling: Sampling,
    pub seed: u64,
    /// Prompts scored together by `p_use_invoke` / `value`.
    pub score_batch: usize,
    /// The weights decoding steps read: `f32` (exact) or `q8` (block-quantised, faster).
    #[serde(skip_serializing_if = "DecodeWeights::is_f32")]
    pub decode_weights: DecodeWeights,
    /// Samples decoded together per step, whatever their prompts (speed only: a request's
    /// sample does not depend on it).
    pub batch_rows: usize,
    /// Memory for prefilled prompts kept across calls (MB; 0 = none): a prompt sampled again
    /// (the same theorem in the next proof tree) is not prefilled again.
    pub prefill_cache_mb: usize,
    /// How the first token of an unforced sample is drawn.
    pub first_token: FirstToken,
}

/// `[sampling]` as a config writes it: every key of [`NativeParams`] flat, unknown keys an
/// error naming the known ones (serde refuses no unknown key beside a flattened struct, so the
/// table is read through this and converted).
#[derive(serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct NativeParamsKeys {
    temperature: f64,
    top_p: f64,
    max_new_tokens: usize,
    context_tokens: usize,
    seed: u64,
    score_batch: usize,
    decode_weights: DecodeWeights,
    batch_rows: usize,
    prefill_cache_mb: usize,
    first_token: FirstToken,
}

impl Default for NativeParamsKeys {
    fn default() -> Self {
        let NativeParams {
            sampling:
                Sampling {
                    temperature,
                    top_p,
                    max_new_tokens,
                    context_tokens,
                },
            seed,
            score_batch,
            decode_weights,
            batch_rows,
            prefill_cache_mb,
            first_token,
        } = NativeParams::default();
        NativeParamsKeys {
            temperature,
            top_p,
            max_new_tokens,
            context_tokens,
            seed,
            score_batch,
            decode_weights,
            batch_rows,
            prefill_cache_mb,
            first_token,
        }
    }
}

impl From<NativeParamsKeys> for NativeParams {
    fn from(k: NativeParamsKeys) -> Self {
        NativeParams {
            sampling: Sampling {
                temperature: k.temperature,
                top_p: k.top_p,
                max_new_tokens: k.max_new_tokens,
                context_tokens: k.context_tokens,
            },
            seed: k.seed,
            score_batch: k.score_batch,
            decode_weights: k.decode_weights,
            batch_rows: k.batch_rows,
            prefill_cache_mb: k.prefill_cache_mb,
            first_token: k.first_token,
        }
    }
}

/// How the first token of a sample (without a forced `t0`) is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum FirstToken {
    /// From the model's whole distribution, as any other token.
    #[default]
    Free,
    /// From the model's distribution restricted to the two `t0` tokens, `π(<use_invoke>|x)`
    /// against `π(<no_invoke>|x)` at the sampling temperature (the ratio Algorithm 2 uses), then
    /// the rest given that token. Every sample then begins as a conditional proof does; a model
    /// fine-tuned briefly, which may not yet put a `t0` first, still gets its proofs checked.
    T0,
}

impl Default for NativeParams {
    fn default() -> Self {
        NativeParams {
            sampling: Sampling::default(),
            seed: prod_core::DEFAULT_SEED,
            score_batch: 8,
            decode_weights: DecodeWeights::F32,
            batch_rows: 16,
            prefill_cache_mb: 1024,
            first_token: FirstToken::Free,
        }
    }
}

impl NativeParams {
    /// Every number in its range (temperature 0 is greedy); the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        use crate::ranges::*;
        self.sampling.validate()?;
        at_least_one("score_batch", self.score_batch)?;
        at_least_one("batch_rows", self.batch_rows)
    }
}

/// prod-policy's Llama as a ProD policy. Prompts are built exactly by `prod_policy::prompt`
/// (last N context tokens + statement, forced `t0` appended). All requests of a call are
/// decoded together (`prod_policy::sample::sample_many`: up to `batch_rows` samples per step,
/// whatever their prompts; each distinct prompt prefilled once, and kept for later calls).
/// Request `seq` draws from the random stream `mix_seed(seed, seq)` alone, and its sample does
/// not depend on the other requests of its call.
pub struct NativePolicy {
    pub model: Llama,
    pub tok: ProdTokenizer,
    pub params: NativeParams,
    /// Next sequence number for calls through `prod_rl::Policy` directly.
    pub next_seq: u64,
    /// Completions generated (for throughput figures).
    pub generated_tokens: usize,
    /// Prefilled prompts kept across calls (dropped when the weights change).
    pub prefills: sample::Prefills,
}

/// Token ids of `x = c s` under `params` (see [`NativePolicy::prompt`]).
pub fn prompt_ids(
    tok: &ProdTokenizer,
    params: &NativeParams,
    context: &str,
    statement: &str,
) -> prod_policy::Result<Vec<u32>> {
    let keep = params.sampling.context_tokens.saturating_mul(16);
    let mut start = context.len().saturating_sub(keep);
    while !context.is_char_boundary(start) {
        start += 1;
    }
    let tail = &context[start..];
    // Start at a line boundary, as the dataset's inline contexts do.
    let tail = if start > 0 {
        tail.split_once('\n').map_or(tail, |(_, rest)| rest)
    } else {
        tail
    };
    prompt::prompt_ids(tok, tail, statement, params.sampling.context_tokens)
}

impl NativePolicy {
    pub fn new(model: Llama, tok: ProdTokenizer, params: NativeParams) -> Self {
        NativePolicy {
            model,
            tok,
            next_seq: 0,
            generated_tokens: 0,
            prefills: sample::Prefills::new(params.prefill_cache_mb.saturating_mul(1 << 20)),
            params,
        }
    }

    /// Load a model directory (config.json, model.safetensors, tokenizer.json), on the CPU.
    pub fn load(dir: &std::path::Path, params: NativeParams) -> prod_policy::Result<Self> {
        let (model, tok) =
            prod_policy::load_model_dir(dir, &prod_policy::candle_core::Device::Cpu)?;
        Ok(Self::new(model, tok, params))
    }

    /// Token ids of `x = c s`. Only the context's tail can matter (the prompt keeps its last
    /// `context_tokens` tokens), so at most 16 bytes per kept token are tokenised: long
    /// stdlib contexts (100+ KB) would otherwise dominate sampling time.
    pub fn prompt(&self, context: &str, statement: &str) -> prod_policy::Result<Vec<u32>> {
        prompt_ids(&self.tok, &self.params, context, statement)
    }

    fn max_positions(&self) -> usize {
        self.model.config().max_position_embeddings
    }

    /// `P(a)/(P(a)+P(b))` after each (context, statement) prompt, in batches. A prompt that
    /// cannot be built (empty statement) or is too long scores 0.
    /// With [`FirstToken::T0`], the `t0` drawn for each unforced request (its own stream,
    /// seeded by its sequence number, so the choice does not depend on the rest of the call);
    /// `None` for forced requests and with [`FirstToken::Free`].
    fn choose_t0(
        &self,
        requests: &[SampleRequest<'_>],
        first_seq: u64,
    ) -> Result<Vec<Option<T0>>, PolicyError> {
        if self.params.first_token == FirstToken::Free {
            return Ok(vec![None; requests.len()]);
        }
        let free: Vec<usize> = (0..requests.len())
            .filter(|&i| requests[i].forced_t0.is_none())
            .collect();
        let mut goals: Vec<(&str, &str)> = free
            .iter()
            .map(|&i| (requests[i].context, requests[i].statement))
            .collect();
        goals.sort();
        goals.dedup();
        let p = self.pair_scores(&goals, self.tok.use_invoke_id(), self.tok.no_invoke_id())?;
        let mut out = vec![None; requests.len()];
        for i in free {
            let g = (requests[i].context, requests[i].statement);
            let p_use = goals.binary_search(&g).map(|k| p[k]).unwrap_or(0.0);
            let u = rand::Rng::gen::<f64>(&mut rand::rngs::StdRng::seed_from_u64(mix_seed(
                self.params.seed ^ T0_STREAM,
                first_seq + i as u64,
            )));
            let use_invoke = u < tempered(p_use, self.params.sampling.temperature);
            out[i] = Some(if use_invoke {
                T0::UseInvoke
            } else {
                T0::NoInvoke
            });
        }
        Ok(out)
    }

    fn pair_scores(&self, goals: &[(&str, &str)], a: u32, b: u32) -> Result<Vec<f64>, PolicyError> {
        let mut out = vec![0.0; goals.len()];
        let mut ok: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, (c, s)) in goals.iter().enumerate() {
            if let Ok(ids) = self.prompt(c, s) {
                if ids.len() < self.max_positions() {
                    ok.push((i, ids));
                }
            }
        }
        for chunk in ok.chunks(self.params.score_batch.max(1)) {
            let seqs: Vec<&[u32]> = chunk.iter().map(|(_, ids)| ids.as_slice()).collect();
            let p = prompt::pair_probability(&self.model, &seqs, a, b)
                .map_err(|e| PolicyError(e.to_string()))?;
            for ((i, _), v) in chunk.iter().zip(p) {
                out[*i] = v;
            }
        }
        Ok(out)
    }

    /// The value `V(x) = P(<true>)/(P(<true>)+P(<false>))` for each (context, statement).
    pub fn values(&self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        self.pair_scores(goals, self.tok.true_id(), self.tok.false_id())
    }
}

impl SeqPolicy for NativePolicy {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        let mut out = vec![Completion::default(); requests.len()];
        let chosen = self.choose_t0(requests, first_seq)?;
        let requests: Vec<SampleRequest<'_>> = requests
            .iter()
            .zip(&chosen)
            .map(|(r, c)| SampleRequest {
                forced_t0: r.forced_t0.or(*c),
                ..*r
            })
            .collect();
        // One prompt per distinct request (same context, statement and forced token); `None`
        // when it cannot be built (a proposed lemma with an empty statement) or leaves no room:
        // an empty completion, which does not parse, so the node is locally incorrect.
        let mut prompts: Vec<Vec<u32>> = Vec::new();
        let mut index: HashMap<(&str, &str, Option<T0>), Option<usize>> = HashMap::new();
        let mut asked: Vec<(usize, usize)> = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            let key = (r.context, r.statement, r.forced_t0);
            let p = *index.entry(key).or_insert_with(|| {
                let mut ids = self.prompt(r.context, r.statement).ok()?;
                if let Some(t0) = r.forced_t0 {
                    ids = prompt::with_forced_t0(&self.tok, &ids, t0);
                }
                if self.max_positions().saturating_sub(ids.len() + 1) == 0 {
                    return None;
                }
                prompts.push(ids);
                Some(prompts.len() - 1)
            });
            if let Some(p) = p {
                asked.push((i, p));
            }
        }
        let reqs: Vec<sample::Request<'_>> = asked
            .iter()
            .map(|&(i, p)| {
                let room = self.max_positions().saturating_sub(prompts[p].len() + 1);
                sample::Request {
                    prompt: &prompts[p],
                    seed: mix_seed(self.params.seed, first_seq + i as u64),
                    max_new_tokens: self.params.sampling.max_new_tokens.min(room),
                }
            })
            .collect();
        let params = sample::ManyParams {
            temperature: self.params.sampling.temperature,
            top_p: self.params.sampling.top_p,
            stop: vec![self.tok.end_id()],
            decode_weights: self.params.decode_weights,
            batch_rows: self.params.batch_rows,
        };
        let samples = sample::sample_many(&self.model, &reqs, &params, &mut self.prefills)
            .map_err(|e| PolicyError(e.to_string()))?;
        for (&(i, _), s) in asked.iter().zip(samples) {
            self.generated_tokens += s.ids.len();
            let text = self
                .tok
                .decode(&s.ids)
                .map_err(|e| PolicyError(e.to_string()))?;
            // A `t0` chosen here is part of the completion (a forced one the caller puts back).
            let text = match chosen[i] {
                Some(t0) => format!("{}{text}", t0.token()),
                None => text,
            };
            out[i] = Completion {
                text,
                truncated: !s.stopped,
            };
        }
        Ok(out)
    }

    fn requests_per_call(&self) -> usize {
        // Several rows' worth, so that rows finishing early are replaced from the same call.
        self.params.batch_rows.saturating_mul(4).max(8)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        self.pair_scores(goals, self.tok.use_invoke_id(), self.tok.no_invoke_id())
    }
}

impl Policy for NativePolicy {
    fn sample(&mut self, requests: &[SampleRequest<'_>]) -> Result<Vec<Completion>, PolicyError> {
        let seq = self.next_seq;
        self.next_seq += requests.len() as u64;
        self.sample_at(requests, seq)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        SeqPolicy::p_use_invoke(self, goals)
    }
}

/// A remote inference server (vLLM, SGLang, llama.cpp) as a run's policy. Sequence numbers are
/// not passed on: a server's sampling is not reproducible bit for bit anyway, and a resumed run
/// replays its answers from the sample log.
pub struct RemoteSeq(pub prod_remote::RemotePolicy);

/// The numbers of a remote server's settings in their ranges; the error names the key.
pub fn validate_remote(cfg: &prod_remote::RemoteConfig) -> Result<(), String> {
    use crate::ranges::*;
    at_least_one("max_concurrency", cfg.max_concurrency)?;
    at_least_one("max_n_per_request", cfg.max_n_per_request)?;
    at_least_one("top_logprobs", cfg.top_logprobs)?;
    at_least_one("timeout_s", cfg.timeout_s)
}

impl RemoteSeq {
    /// The server of `cfg` sampling with `sampling`, with the tokenizer of model directory
    /// `model` (its `tokenizer.json`: prompts are the very tokens the served model was trained
    /// on).
    pub fn open(
        cfg: &prod_remote::RemoteConfig,
        sampling: &Sampling,
        model: &std::path::Path,
    ) -> Result<RemoteSeq, String> {
        let tok = ProdTokenizer::from_file(&model.join("tokenizer.json"), None)
            .map_err(|e| format!("model {}: {e}", model.display()))?;
        Ok(RemoteSeq(
            prod_remote::RemotePolicy::new(cfg.clone(), sampling.clone(), tok)
                .map_err(|e| e.to_string())?,
        ))
    }
}

impl SeqPolicy for RemoteSeq {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        Policy::sample(&mut self.0, requests)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Policy::p_use_invoke(&mut self.0, goals)
    }
}

/// Answers from the run store's sample log when it can, asks `inner` otherwise and logs the
/// answer (in chunks, each committed before the next is sampled).
pub struct LoggedPolicy<'a> {
    pub inner: &'a mut dyn SeqPolicy,
    pub store: &'a RunStore,
    pub round: u32,
    pub phase: Phase,
    /// Requests per committed chunk.
    pub chunk: usize,
    next_seq: u64,
    /// Answers replayed from the log / asked from the model.
    pub replayed: usize,
    pub fresh: usize,
    /// Called with the number of new completions after each chunk.
    pub on_progress: Option<&'a dyn Fn(usize)>,
}

impl<'a> LoggedPolicy<'a> {
    pub fn new(
        inner: &'a mut dyn SeqPolicy,
        store: &'a RunStore,
        round: u32,
        phase: Phase,
    ) -> Self {
        let chunk = inner.requests_per_call().max(1);
        LoggedPolicy {
            inner,
            store,
            round,
            phase,
            chunk,
            next_seq: 0,
            replayed: 0,
            fresh: 0,
            on_progress: None,
        }
    }

    fn err(e: crate::store::StoreError) -> PolicyError {
        PolicyError(e.to_string())
    }
}

fn request_key(r: &SampleRequest<'_>) -> String {
    hash_fields(&[
        "sample",
        r.context,
        r.statement,
        r.forced_t0.map_or("", |t| t.token()),
    ])
}

impl Policy for LoggedPolicy<'_> {
    fn sample(&mut self, requests: &[SampleRequest<'_>]) -> Result<Vec<Completion>, PolicyError> {
        let first = self.next_seq;
        self.next_seq += requests.len() as u64;
        let keys: Vec<String> = requests.iter().map(request_key).collect();
        let mut out = Vec::with_capacity(requests.len());
        for (i, key) in keys.iter().enumerate() {
            match self
                .store
                .logged_answer(self.round, self.phase, first + i as u64, key)
                .map_err(Self::err)?
            {
                Some(a) => out.push(a),
                None => break,
            }
        }
        self.replayed += out.len();
        while out.len() < requests.len() {
            let start = out.len();
            let end = (start + self.chunk.max(1)).min(requests.len());
            let answers = self
                .inner
                .sample_at(&requests[start..end], first + start as u64)?;
            if answers.len() != end - start {
                return Err(PolicyError(format!(
                    "asked for {} samples, got {}",
                    end - start,
                    answers.len()
                )));
            }
            let entries: Vec<(String, Completion)> = keys[start..end]
                .iter()
                .cloned()
                .zip(answers.iter().cloned())
                .collect();
            self.store
                .log_answers(self.round, self.phase, first + start as u64, &entries)
                .map_err(Self::err)?;
            self.fresh += answers.len();
            out.extend(answers);
            if let Some(p) = self.on_progress {
                p(end - start);
            }
        }
        Ok(out)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut fields = vec!["p_use_invoke"];
        for (c, s) in goals {
            fields.push(c);
            fields.push(s);
        }
        let key = hash_fields(&fields);
        if let Some(a) = self
            .store
            .logged_answer(self.round, self.phase, seq, &key)
            .map_err(Self::err)?
        {
            return serde_json::from_str(&a.text)
                .map_err(|e| PolicyError(format!("sample log: {e}")));
        }
        // NaN would be logged as JSON null and not read back: a score that is not a number is 0.
        let p: Vec<f64> = self
            .inner
            .p_use_invoke(goals)?
            .into_iter()
            .map(|x| if x.is_finite() { x } else { 0.0 })
            .collect();
        // Logged as an answer of its own (a JSON list; no token limit applies to it).
        let text = serde_json::to_string(&p).map_err(|e| PolicyError(e.to_string()))?;
        self.store
            .log_answers(
                self.round,
                self.phase,
                seq,
                &[(key, Completion::ended(text))],
            )
            .map_err(Self::err)?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    /// A run's stored identity holds these settings as JSON: the shared [`super::Sampling`]
    /// writes its keys flat, first, as the settings were written before it existed, so run
    /// stores made before resume; `[sampling]` reads them flat and refuses unknown keys.
    #[test]
    fn native_params_keep_their_flat_form() {
        use super::{NativeParams, Sampling};
        let json = serde_json::to_string(&NativeParams::default()).unwrap();
        assert_eq!(
            json,
            r#"{"temperature":0.7,"top_p":1.0,"max_new_tokens":256,"context_tokens":1000,"seed":0,"score_batch":8,"batch_rows":16,"prefill_cache_mb":1024,"first_token":"free"}"#
        );
        let back: NativeParams = serde_json::from_str(&json).unwrap();
        assert_eq!(back, NativeParams::default());
        let p: NativeParams =
            toml::from_str("temperature = 0.5\ncontext_tokens = 64\ndecode_weights = \"q8\"")
                .unwrap();
        assert_eq!(
            p.sampling,
            Sampling {
                temperature: 0.5,
                context_tokens: 64,
                ..Sampling::default()
            }
        );
        assert_eq!(p.decode_weights, prod_policy::DecodeWeights::Q8);
        let e = toml::from_str::<NativeParams>("max_tokens = 9").unwrap_err();
        assert!(e.to_string().contains("unknown field `max_tokens`"), "{e}");
    }

    #[test]
    fn tempered_t0_probability() {
        use super::tempered;
        assert!((tempered(0.3, 1.0) - 0.3).abs() < 1e-12);
        // A lower temperature sharpens toward the more probable token.
        assert!(tempered(0.3, 0.7) < 0.3 && tempered(0.7, 0.7) > 0.7);
        assert_eq!(tempered(0.3, 0.0), 0.0);
        assert_eq!(tempered(0.8, 0.0), 1.0);
        assert_eq!(tempered(0.0, 0.7), 0.0);
    }

    /// Logged scores are read back bit for bit (a resumed run must see what the first run
    /// saw). serde_json's default float parser is off by an ulp for some 17-digit values, such
    /// as this score from a real run; its `float_roundtrip` feature (workspace Cargo.toml) is not.
    #[test]
    fn logged_scores_read_back_exactly() {
        let p = vec![
            0.491_566_198_858_942_76_f64,
            0.1 + 0.2,
            1.0 / 3.0,
            f64::MIN_POSITIVE,
            5e-324,
        ];
        let back: Vec<f64> = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            p.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
}

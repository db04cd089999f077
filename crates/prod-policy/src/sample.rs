//! Seeded batched sampling.
//!
//! - [`sample`] / [`sample_prompts`]: `n` samples of one prompt (or of a few prompts, left
//!   padded) share one prefill and decode together; each sample draws from its own random
//!   stream derived from the seed.
//! - [`sample_many`]: requests of different prompts, each with its own seed, decoded together
//!   with continuous batching (up to `batch_rows` rows per step; a finished row's place goes to
//!   the next waiting request at once). Each distinct prompt is prefilled once ([`Prefills`]
//!   keeps prefills across calls). A request's sample depends only on its prompt, its seed and
//!   the weights — never on which requests share its steps — because each row keeps its own
//!   cache and the decoding kernels compute every row on its own (see [`crate::model::RowKv`]).

use candle_core::Tensor;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Batch, KvCache, Llama, RowKv};
use crate::{DecodeWeights, PolicyError, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    pub n: usize,
    /// 0 = greedy.
    pub temperature: f64,
    /// Nucleus threshold in (0, 1]; 1 = off.
    pub top_p: f64,
    pub max_new_tokens: usize,
    pub seed: u64,
    /// Ids that end a sample (the end token); not included in the output.
    pub stop: Vec<u32>,
    /// The weights decoding steps read (a prompt longer than one token is prefilled in f32).
    #[serde(default, skip_serializing_if = "DecodeWeights::is_f32")]
    pub decode_weights: DecodeWeights,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            n: 1,
            temperature: prod_core::Sampling::default().temperature,
            top_p: prod_core::Sampling::default().top_p,
            max_new_tokens: prod_core::Sampling::default().max_new_tokens,
            seed: prod_core::DEFAULT_SEED,
            stop: Vec::new(),
            decode_weights: DecodeWeights::F32,
        }
    }
}

/// One generated continuation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub ids: Vec<u32>,
    /// True if it ended with a stop token, false if it hit `max_new_tokens`.
    pub stopped: bool,
}

/// Draws one id from `logits` (temperature, then top-p).
pub fn draw(logits: &[f32], temperature: f64, top_p: f64, rng: &mut impl Rng) -> u32 {
    let argmax = || {
        logits
            .iter()
            .enumerate()
            .fold((0usize, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                if v > bv {
                    (i, v)
                } else {
                    (bi, bv)
                }
            })
            .0 as u32
    };
    if temperature <= 0.0 {
        return argmax();
    }
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut probs: Vec<(u32, f64)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, ((l as f64 - max) / temperature).exp()))
        .collect();
    let total: f64 = probs.iter().map(|p| p.1).sum();
    if !(total.is_finite() && total > 0.0) {
        return argmax();
    }
    let mut mass = total;
    if top_p < 1.0 {
        // Keep the smallest set of most likely tokens whose mass reaches top_p (ties by id).
        probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut cum = 0.0;
        let mut keep = probs.len();
        for (i, p) in probs.iter().enumerate() {
            cum += p.1;
            if cum >= top_p * total {
                keep = i + 1;
                break;
            }
        }
        probs.truncate(keep);
        mass = cum.min(total);
    }
    let mut u = rng.gen::<f64>() * mass;
    for (id, p) in &probs {
        if u < *p {
            return *id;
        }
        u -= p;
    }
    probs.last().map_or(0, |p| p.0)
}

/// `params.n` samples continuing `prompt`.
pub fn sample(model: &Llama, prompt: &[u32], params: &SamplingParams) -> Result<Vec<Sample>> {
    Ok(sample_prompts(model, &[prompt], params)?
        .pop()
        .unwrap_or_default())
}

/// The random stream of sample `i` of prompt `p`: prompt 0 draws exactly as [`sample`] does, and
/// a prompt's samples do not depend on which other prompts share its batch.
fn stream(seed: u64, p: usize, i: usize) -> rand::rngs::StdRng {
    let prompt_seed = seed.wrapping_add((p as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    rand::rngs::StdRng::seed_from_u64(prompt_seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// `params.n` samples for each of several prompts, decoded together: one left-padded prefill
/// for all prompts, the cache rows repeated `n` times per prompt, then one decoding step per
/// token for every running sample (padding is masked, RoPE positions ignore it). Result `[p][i]`.
pub fn sample_prompts(
    model: &Llama,
    prompts: &[&[u32]],
    params: &SamplingParams,
) -> Result<Vec<Vec<Sample>>> {
    // On a worker of the thread pool: the parallel parts of each decoding step are then forked
    // from inside the pool instead of handed over from outside (a wake-up and a wait per
    // projection), and the caller's thread does not compete with the pool's for the cores.
    rayon::scope(|_| sample_prompts_here(model, prompts, params))
}

/// Refuses what cannot be sampled: an empty prompt, a top-p outside (0, 1].
fn check_input<'a>(mut prompts: impl Iterator<Item = &'a [u32]>, top_p: f64) -> Result<()> {
    if prompts.any(|p| p.is_empty()) {
        return Err(PolicyError::BadInput(
            "cannot sample from an empty prompt".into(),
        ));
    }
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(PolicyError::BadInput(format!(
            "top_p must be in (0, 1], got {top_p}"
        )));
    }
    Ok(())
}

/// One left-padded prefill of all prompts, its cache rows repeated `n` times per prompt (row
/// `p * n + i`), with each row's next-token logits.
fn prefill_repeated(
    model: &Llama,
    prompts: &[&[u32]],
    n: usize,
    w: DecodeWeights,
) -> Result<(KvCache, Vec<Vec<f32>>)> {
    let mut cache1 = KvCache::new(model.config().num_hidden_layers);
    let first: Vec<Vec<f32>> = model
        .forward_cached_with(&Batch::left_padded(prompts), &mut cache1, w)?
        .to_vec2()?;
    let rows: Vec<usize> = (0..prompts.len() * n).map(|s| s / n).collect();
    let cache = if n == 1 {
        cache1
    } else {
        cache1.select_rows(&rows)?
    };
    let logits = rows.iter().map(|&p| first[p].clone()).collect();
    Ok((cache, logits))
}

fn sample_prompts_here(
    model: &Llama,
    prompts: &[&[u32]],
    params: &SamplingParams,
) -> Result<Vec<Vec<Sample>>> {
    check_input(prompts.iter().copied(), params.top_p)?;
    let n = params.n;
    let mut out: Vec<Vec<Sample>> = vec![
        vec![
            Sample {
                ids: Vec::new(),
                stopped: false
            };
            n
        ];
        prompts.len()
    ];
    if n == 0 || prompts.is_empty() || params.max_new_tokens == 0 {
        return Ok(out);
    }
    // Sample s = p * n + i.
    let total = prompts.len() * n;
    let mut rngs: Vec<rand::rngs::StdRng> = (0..total)
        .map(|s| stream(params.seed, s / n, s % n))
        .collect();
    let (mut cache, mut logits) = prefill_repeated(model, prompts, n, params.decode_weights)?;
    // Rows of the cache ↔ samples still running.
    let mut active: Vec<usize> = (0..total).collect();
    for step in 0..params.max_new_tokens {
        let mut next = Vec::with_capacity(active.len());
        let mut keep_rows = Vec::with_capacity(active.len());
        let mut still = Vec::with_capacity(active.len());
        for (row, &s) in active.iter().enumerate() {
            let id = draw(&logits[row], params.temperature, params.top_p, &mut rngs[s]);
            let sample = &mut out[s / n][s % n];
            if params.stop.contains(&id) {
                sample.stopped = true;
            } else {
                sample.ids.push(id);
                next.push(id);
                keep_rows.push(row);
                still.push(s);
            }
        }
        if still.is_empty() || step + 1 >= params.max_new_tokens {
            break;
        }
        if keep_rows.len() != active.len() {
            cache = cache.select_rows(&keep_rows)?;
        }
        active = still;
        let seqs: Vec<[u32; 1]> = next.iter().map(|&id| [id]).collect();
        let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        let l: Tensor = model.forward_cached_with(
            &Batch::right_padded(&refs),
            &mut cache,
            params.decode_weights,
        )?;
        logits = l.to_vec2()?;
    }
    Ok(out)
}

/// One request of [`sample_many`]: one sample continuing `prompt`, drawn from the random stream
/// of `seed`, at most `max_new_tokens` long.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub prompt: &'a [u32],
    pub seed: u64,
    pub max_new_tokens: usize,
}

/// What [`sample_many`]'s requests share.
#[derive(Clone, Debug, PartialEq)]
pub struct ManyParams {
    /// 0 = greedy.
    pub temperature: f64,
    /// Nucleus threshold in (0, 1]; 1 = off.
    pub top_p: f64,
    /// Ids that end a sample (not included in the output).
    pub stop: Vec<u32>,
    /// The weights decoding steps read (prefills of more than one token are f32).
    pub decode_weights: DecodeWeights,
    /// Rows decoded together per step (the decoding kernels are built for up to about 16).
    pub batch_rows: usize,
}

impl Default for ManyParams {
    fn default() -> Self {
        ManyParams {
            temperature: prod_core::PAPER_TEMPERATURE,
            top_p: 1.0,
            stop: Vec::new(),
            decode_weights: DecodeWeights::F32,
            batch_rows: 16,
        }
    }
}

/// A prompt's prefill: its cache and the logits of its first new token.
struct Prefilled {
    kv: RowKv,
    logits: Vec<f32>,
}

/// Prefilled prompts kept across [`sample_many`] calls (e.g. the same theorem sampled for
/// several proof trees), up to a budget of bytes. A full store keeps what it has rather than
/// evicting: the usual pattern is a cycle over the same prompts, where evicting the oldest
/// would miss every time. Entries made with other weights are dropped on the next call
/// ([`Llama::weights_version`]).
pub struct Prefills {
    map: HashMap<(DecodeWeights, Vec<u32>), Arc<Prefilled>>,
    bytes: usize,
    budget: usize,
    version: u64,
    /// Prefills computed / answered from the store.
    pub computed: usize,
    pub reused: usize,
}

impl Prefills {
    /// A store of at most `budget` bytes (0: keep nothing across calls).
    pub fn new(budget: usize) -> Prefills {
        Prefills {
            map: HashMap::new(),
            bytes: 0,
            budget,
            version: 0,
            computed: 0,
            reused: 0,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn sync(&mut self, model: &Llama) {
        if self.version != model.weights_version() {
            self.map.clear();
            self.bytes = 0;
            self.version = model.weights_version();
        }
    }

    fn get(&mut self, model: &Llama, prompt: &[u32], w: DecodeWeights) -> Result<Arc<Prefilled>> {
        let key = (w, prompt.to_vec());
        if let Some(p) = self.map.get(&key) {
            self.reused += 1;
            return Ok(p.clone());
        }
        let (kv, logits) = model.prefill_row(prompt, w)?;
        self.computed += 1;
        let p = Arc::new(Prefilled { kv, logits });
        let size = p.kv.bytes() + p.logits.len() * 4;
        if self.bytes + size <= self.budget {
            self.bytes += size;
            self.map.insert(key, p.clone());
        }
        Ok(p)
    }
}

/// One sample per request, the requests decoded together (see the module documentation).
/// Result `i` answers request `i`. Requests are admitted in order; each distinct prompt is
/// prefilled once per call (and taken from `prefills` when it is there).
pub fn sample_many(
    model: &Llama,
    requests: &[Request<'_>],
    params: &ManyParams,
    prefills: &mut Prefills,
) -> Result<Vec<Sample>> {
    // On a worker of the thread pool, as `sample_prompts`.
    rayon::scope(|_| sample_many_here(model, requests, params, prefills))
}

struct Row {
    req: usize,
    kv: RowKv,
    logits: Vec<f32>,
    rng: rand::rngs::StdRng,
}

/// This call's prefills while rows are admitted, each held until its prompt's last request is
/// admitted (so that a prompt shared by many requests is prefilled once).
struct Admission<'r> {
    left: HashMap<&'r [u32], usize>,
    held: HashMap<&'r [u32], Arc<Prefilled>>,
}

impl<'r> Admission<'r> {
    fn new(requests: &[Request<'r>]) -> Self {
        let mut left: HashMap<&[u32], usize> = HashMap::new();
        for r in requests.iter().filter(|r| r.max_new_tokens > 0) {
            *left.entry(r.prompt).or_default() += 1;
        }
        Admission {
            left,
            held: HashMap::new(),
        }
    }

    /// Request `i`'s row: its prompt's prefilled cache with room for its tokens, its logits
    /// and its random stream.
    fn admit(
        &mut self,
        model: &Llama,
        prefills: &mut Prefills,
        i: usize,
        r: &Request<'r>,
        w: DecodeWeights,
    ) -> Result<Row> {
        let p = match self.held.get(r.prompt) {
            Some(p) => p.clone(),
            None => prefills.get(model, r.prompt, w)?,
        };
        let n = self.left.get_mut(r.prompt).expect("counted in new");
        *n -= 1;
        if *n == 0 {
            self.held.remove(r.prompt);
        } else {
            self.held.insert(r.prompt, p.clone());
        }
        Ok(Row {
            req: i,
            kv: p.kv.with_room(r.max_new_tokens),
            logits: p.logits.clone(),
            rng: rand::rngs::StdRng::seed_from_u64(r.seed),
        })
    }
}

/// One token for every active row: each draws from its logits; a row that drew a stop token
/// or is full leaves; the others are decoded together. The rows still running.
fn decode_step(
    model: &Llama,
    requests: &[Request<'_>],
    params: &ManyParams,
    mut active: Vec<Row>,
    out: &mut [Sample],
) -> Result<Vec<Row>> {
    let mut next = Vec::with_capacity(active.len());
    let mut still = Vec::with_capacity(active.len());
    for mut row in active.drain(..) {
        let id = draw(&row.logits, params.temperature, params.top_p, &mut row.rng);
        let sample = &mut out[row.req];
        if params.stop.contains(&id) {
            sample.stopped = true;
            continue;
        }
        sample.ids.push(id);
        if sample.ids.len() < requests[row.req].max_new_tokens {
            next.push(id);
            still.push(row);
        }
    }
    if !still.is_empty() {
        let mut kvs: Vec<&mut RowKv> = still.iter_mut().map(|r| &mut r.kv).collect();
        let w = params.decode_weights;
        let logits: Vec<Vec<f32>> = model.decode_rows(&mut kvs, &next, w)?.to_vec2()?;
        for (row, l) in still.iter_mut().zip(logits) {
            row.logits = l;
        }
    }
    Ok(still)
}

fn sample_many_here(
    model: &Llama,
    requests: &[Request<'_>],
    params: &ManyParams,
    prefills: &mut Prefills,
) -> Result<Vec<Sample>> {
    check_input(requests.iter().map(|r| r.prompt), params.top_p)?;
    prefills.sync(model);
    let mut out = vec![
        Sample {
            ids: Vec::new(),
            stopped: false
        };
        requests.len()
    ];
    let mut admission = Admission::new(requests);
    let batch_rows = params.batch_rows.max(1);
    let mut waiting = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.max_new_tokens > 0);
    let mut active: Vec<Row> = Vec::new();
    loop {
        while active.len() < batch_rows {
            let Some((i, r)) = waiting.next() else { break };
            active.push(admission.admit(model, prefills, i, r, params.decode_weights)?);
        }
        if active.is_empty() {
            break;
        }
        active = decode_step(model, requests, params, active, &mut out)?;
    }
    Ok(out)
}

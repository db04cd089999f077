//! Sampling as an evaluation asks for it, timed (`prod model bench-sample`): `samples` proof
//! trees' root requests for each theorem (one call per tree, as `prod eval` makes them), first
//! one prompt after another (each request prefilled and decoded alone, as the native policy did
//! before it batched across prompts), then through the native policy (all requests of a call
//! decoded together, each prompt prefilled once), for each decoding weight asked for.

use std::path::Path;
use std::time::Instant;

use prod_policy::sample::{self, SamplingParams};
use prod_policy::DecodeWeights;
use prod_rl::SampleRequest;
use serde::Serialize;

use crate::policy::{mix_seed, NativeParams, NativePolicy, SeqPolicy};
use crate::progress::Bars;

/// What to time, and how the samples are drawn (also `prod model bench-sample`'s flags,
/// feature `clap`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SampleBench {
    /// Theorems (prompts) to sample for.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().prompts, value_parser = prod_core::range::parse::positive_usize))]
    pub prompts: usize,
    /// Samples per prompt (proof trees).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().samples, value_parser = prod_core::range::parse::positive_usize))]
    pub samples: usize,
    /// The context is cut to its last N tokens (synthetic prompts have this many).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().context_tokens, value_parser = prod_core::range::parse::positive_usize))]
    pub context_tokens: usize,
    /// Tokens generated per sample.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().new_tokens, value_parser = prod_core::range::parse::positive_usize))]
    pub new_tokens: usize,
    /// Rows decoded together per step by the native policy.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().batch_rows, value_parser = prod_core::range::parse::positive_usize))]
    pub batch_rows: usize,
    /// Sampling temperature (paper: 0.7).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().temperature,
        value_parser = |s: &str| prod_core::range::parse::real_in(s, prod_core::Sampling::TEMPERATURE)))]
    pub temperature: f64,
    /// Decoding weights to measure, in order.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "f32,q8")
    )]
    pub weights: Vec<DecodeWeights>,
    /// Skip the one-prompt-at-a-time path (only the batched figures).
    #[cfg_attr(feature = "clap", arg(long))]
    pub batched_only: bool,
    /// Sampling seed.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SampleBench::default().seed))]
    pub seed: u64,
}

impl Default for SampleBench {
    /// An evaluation's shape on 2 cores: 60 theorems × 4 trees, a short context, the demo's
    /// proof length and a half; the native policy's batch and the paper's temperature.
    fn default() -> Self {
        SampleBench {
            prompts: 60,
            samples: 4,
            context_tokens: 256,
            new_tokens: 192,
            batch_rows: NativeParams::default().batch_rows,
            temperature: prod_core::Sampling::default().temperature,
            weights: vec![DecodeWeights::F32, DecodeWeights::Q8],
            batched_only: false,
            seed: prod_core::DEFAULT_SEED,
        }
    }
}

impl SampleBench {
    /// The native policy's settings for this bench: its temperature, proof length, context cut,
    /// batch and seed.
    pub fn params(&self) -> NativeParams {
        NativeParams {
            sampling: prod_core::Sampling {
                temperature: self.temperature,
                max_new_tokens: self.new_tokens,
                context_tokens: self.context_tokens,
                ..prod_core::Sampling::default()
            },
            seed: self.seed,
            batch_rows: self.batch_rows,
            ..NativeParams::default()
        }
    }

    /// The whole bench on the model in `model`: the theorems of `data` (or synthetic ones),
    /// each decoding weight timed (each row also to `on_row` as it is measured); the figures as
    /// one JSON object. Fewer theorems than `prompts` is bad input.
    pub fn run(
        &self,
        model: &Path,
        data: Option<&Path>,
        bars: &Bars,
        on_row: &mut dyn FnMut(&SampleBenchRow),
    ) -> anyhow::Result<serde_json::Value> {
        let mut policy = NativePolicy::load(model, self.params())?;
        let theorems = bench_theorems(data, self)?;
        if theorems.len() < self.prompts {
            let m = format!(
                "--prompts {} but only {} theorems",
                self.prompts,
                theorems.len()
            );
            return Err(crate::BadInput(m).into());
        }
        let mut prompt_tokens = 0;
        for (c, s) in &theorems {
            prompt_tokens += policy.prompt(c, s)?.len();
        }
        let rows = run_sample_bench(&mut policy, &theorems, self, bars, on_row)?;
        Ok(serde_json::json!({
            "prompts": theorems.len(), "samples": self.samples,
            "mean_prompt_tokens": prompt_tokens as f64 / theorems.len() as f64,
            "new_tokens": self.new_tokens, "batch_rows": self.batch_rows,
            "temperature": self.temperature, "runs": rows,
        }))
    }
}

/// One decoding weight's figures, in the order (and with the names) the command prints them;
/// the one-at-a-time figures only where they were taken.
#[derive(Clone, Debug, Serialize)]
pub struct SampleBenchRow {
    pub decode_weights: String,
    pub batched_s: f64,
    pub batched_tokens: usize,
    pub batched_tok_per_s: f64,
    pub prefills: usize,
    pub prefills_reused: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_prompt_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_prompt_tokens: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_prompt_tok_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Samples whose text both paths agree on, `same/all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_text: Option<String>,
}

/// The benchmark's theorems (context, statement): the first `bench.prompts` lines of `data`, or
/// synthetic contexts of about `bench.context_tokens` tokens (fewer when `data` has fewer lines).
pub fn bench_theorems(
    data: Option<&Path>,
    bench: &SampleBench,
) -> anyhow::Result<Vec<(String, String)>> {
    let (n, context_tokens) = (bench.prompts, bench.context_tokens);
    Ok(match data {
        Some(d) => crate::sft::read_data_lines(d, Some(n))?
            .into_iter()
            .map(|l| (l.context, l.statement))
            .collect(),
        None => (0..n)
            .map(|i| {
                let ctx: String = (0..context_tokens * 2)
                    .map(|j| format!("Lemma l{i}_{j} : {j} + {i} = {i} + {j}.\n"))
                    .collect();
                (
                    ctx,
                    format!("Lemma goal{i} : forall n : nat, n + {i} = {i} + n."),
                )
            })
            .collect(),
    })
}

/// Time `policy` on `theorems` for each decoding weight of `bench` (the policy's params, with
/// the weight replaced, are the base); each row goes to `on_row` as it is measured.
pub fn run_sample_bench(
    policy: &mut NativePolicy,
    theorems: &[(String, String)],
    bench: &SampleBench,
    bars: &Bars,
    on_row: &mut dyn FnMut(&SampleBenchRow),
) -> anyhow::Result<Vec<SampleBenchRow>> {
    let base = policy.params.clone();
    let mut prompts = Vec::new();
    for (c, s) in theorems {
        prompts.push(policy.prompt(c, s)?);
    }
    let requests: Vec<SampleRequest<'_>> = theorems
        .iter()
        .map(|(c, s)| SampleRequest {
            context: c,
            statement: s,
            forced_t0: None,
        })
        .collect();
    let mut rows = Vec::new();
    for &w in &bench.weights {
        policy.params = NativeParams {
            decode_weights: w,
            ..base.clone()
        };
        if w == DecodeWeights::Q8 {
            policy.model.quantized_weights()?; // built before the clock starts
        }
        let old = if bench.batched_only {
            None
        } else {
            Some(OneAtATime::sample(policy, &prompts, bench.samples, bars)?)
        };
        let row = batched_row(policy, &requests, bench.samples, bars, old.as_ref())?;
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// One prompt after another: each request alone, prefilled and decoded by itself.
struct OneAtATime {
    secs: f64,
    tokens: usize,
    /// Each sample's token ids, tree by tree.
    ids: Vec<Vec<u32>>,
}

impl OneAtATime {
    fn sample(
        policy: &NativePolicy,
        prompts: &[Vec<u32>],
        samples: usize,
        bars: &Bars,
    ) -> anyhow::Result<Self> {
        let p = &policy.params;
        let (end, w) = (policy.tok.end_id(), p.decode_weights);
        let n = prompts.len();
        let pb = bars.bar(&format!("{w} one at a time"), "samples", Some(samples * n));
        let t = Instant::now();
        let (mut tokens, mut texts) = (0usize, Vec::new());
        for tree in 0..samples {
            for (i, ids) in prompts.iter().enumerate() {
                let sp = SamplingParams {
                    n: 1,
                    temperature: p.sampling.temperature,
                    max_new_tokens: p.sampling.max_new_tokens,
                    seed: mix_seed(p.seed, (tree * n + i) as u64),
                    stop: vec![end],
                    decode_weights: w,
                    ..SamplingParams::default()
                };
                let s = sample::sample(&policy.model, ids, &sp)?.remove(0);
                tokens += s.ids.len();
                texts.push(s.ids);
                pb.inc(1);
            }
        }
        pb.finish();
        Ok(OneAtATime {
            secs: t.elapsed().as_secs_f64(),
            tokens,
            ids: texts,
        })
    }
}

/// The native policy: one call per tree, all its requests decoded together; the row of
/// figures, beside the one-at-a-time figures `old` where they were taken.
fn batched_row(
    policy: &mut NativePolicy,
    requests: &[SampleRequest<'_>],
    samples: usize,
    bars: &Bars,
    old: Option<&OneAtATime>,
) -> anyhow::Result<SampleBenchRow> {
    let n = requests.len();
    let w = policy.params.decode_weights;
    policy.prefills = sample::Prefills::new(policy.params.prefill_cache_mb << 20);
    let before = policy.generated_tokens;
    let pb = bars.bar(&format!("{w} batched"), "samples", Some(samples * n));
    let t = Instant::now();
    let mut texts = Vec::new();
    for tree in 0..samples {
        texts.extend(policy.sample_at(requests, (tree * n) as u64)?);
        pb.inc(n as u64);
    }
    pb.finish();
    let new_s = t.elapsed().as_secs_f64();
    let new_tokens = policy.generated_tokens - before;
    let mut row = SampleBenchRow {
        decode_weights: w.to_string(),
        batched_s: new_s,
        batched_tokens: new_tokens,
        batched_tok_per_s: new_tokens as f64 / new_s,
        prefills: policy.prefills.computed,
        prefills_reused: policy.prefills.reused,
        per_prompt_s: None,
        per_prompt_tokens: None,
        per_prompt_tok_per_s: None,
        speedup: None,
        same_text: None,
    };
    if let Some(old) = old {
        let same = old
            .ids
            .iter()
            .zip(&texts)
            .filter(|(ids, c)| policy.tok.decode(ids).ok().as_deref() == Some(c.text.as_str()))
            .count();
        row.per_prompt_s = Some(old.secs);
        row.per_prompt_tokens = Some(old.tokens);
        row.per_prompt_tok_per_s = Some(old.tokens as f64 / old.secs);
        row.speedup = Some(old.secs / new_s);
        row.same_text = Some(format!("{same}/{}", texts.len()));
    }
    Ok(row)
}

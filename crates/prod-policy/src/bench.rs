//! What a model shape costs on this machine (`prod model bench`): sampling tok/s at batch 1
//! and 8 with f32 and q8 decoding weights, the prefill alone, training s/step, peak memory,
//! and two matmul-bound limits for the training step — the measured GEMM rate on the step's
//! FLOPs, and the very products the step does, timed at their own shapes.

use std::time::Instant;

use candle_core::{Device, Tensor};
use serde::Serialize;

use crate::model::Llama;
use crate::prompt::TrainExample;
use crate::sample::{self, SamplingParams};
use crate::train::Trainer;
use crate::{DecodeWeights, LlamaConfig, PolicyConfig, Result};

/// Which model is measured (also `prod model bench`'s flags, feature `clap`): a model
/// directory, or random weights of a known shape.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BenchTarget {
    /// Model shape for random weights: smollm2-135m or tiny.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_enum, default_value = "smollm2-135m")
    )]
    pub shape: BenchShape,
    /// Benchmark a model directory instead of random weights at --shape.
    #[cfg_attr(feature = "clap", arg(long))]
    pub model: Option<std::path::PathBuf>,
}

/// The shapes a benchmark can draw random weights for.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BenchShape {
    Smollm2_135m,
    Tiny,
}

impl BenchTarget {
    /// The model: loaded from `model`, or random weights (seed 0) of `shape`.
    pub fn load(&self, dev: &Device) -> Result<Llama> {
        Ok(match &self.model {
            Some(d) => crate::load_model_dir(d, dev)?.0,
            None => {
                let cfg = match self.shape {
                    BenchShape::Smollm2_135m => LlamaConfig::smollm2_135m(),
                    BenchShape::Tiny => LlamaConfig::tiny(512),
                };
                Llama::random(&cfg, 0, dev)?
            }
        })
    }
}

/// What to measure (also `prod model bench`'s flags, feature `clap`).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BenchOptions {
    /// Tokens generated per sample.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = BenchOptions::default().new_tokens,
        value_parser = prod_core::range::parse::positive_usize))]
    pub new_tokens: usize,
    /// Prompt length for sampling (ProD's prompts are about 1,000 context tokens + statement).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = BenchOptions::default().prompt_tokens,
        value_parser = prod_core::range::parse::positive_usize))]
    pub prompt_tokens: usize,
    /// Timed training steps after one warm-up step; the figure is the fastest (as the GEMM
    /// rate is the best of ten products), so that host noise inflates it less.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = BenchOptions::default().train_steps,
        value_parser = prod_core::range::parse::positive_usize))]
    pub train_steps: usize,
}

impl Default for BenchOptions {
    /// A short prompt and a few tokens: the per-token rates, not an evaluation's shape.
    fn default() -> Self {
        BenchOptions {
            prompt_tokens: 16,
            new_tokens: 32,
            train_steps: 6,
        }
    }
}

/// Tokens of the benchmark's training example.
pub const TRAIN_TOKENS: usize = 256;

/// The figures, in the order (and with the names) `prod model bench` prints them.
#[derive(Clone, Debug, Serialize)]
pub struct ModelBench {
    pub params: usize,
    pub layers: usize,
    pub hidden: usize,
    pub vocab: usize,
    pub prompt_tokens: usize,
    pub prefill_s: f64,
    pub sample_tok_per_s_batch1: f64,
    pub sample_tok_per_s_batch8: f64,
    pub sample_q8_tok_per_s_batch1: f64,
    pub sample_q8_tok_per_s_batch8: f64,
    /// Share of the q8 copies' weights held in 4 bits.
    pub q8_weights_in_4_bits: f64,
    pub q8_weights_mb: f64,
    pub train_s_per_step_256_tokens: f64,
    /// 1024³ f32 products, best of 10 on each thread pool, the higher rate (the stricter
    /// limit).
    pub gemm_gflops: f64,
    /// `6 · params · tokens` FLOPs at that rate.
    pub matmul_bound_limit_s: f64,
    pub train_over_limit: f64,
    /// A tighter limit: the GEMMs of one training step at their own skinny shapes.
    pub model_gemms_s: f64,
    pub train_over_model_gemms: f64,
    /// The process's peak resident memory (Linux), MB.
    pub peak_rss_mb: Option<f64>,
}

/// Measure `model` on `dev`.
pub fn bench_model(model: &Llama, opts: &BenchOptions, dev: &Device) -> Result<ModelBench> {
    let cfg = model.config().clone();
    let params = model.num_params();
    let gflops = crate::ops::measured_gemm_gflops(1024, 10);
    let limit_s = 6.0 * params as f64 * TRAIN_TOKENS as f64 / (gflops * 1e9);
    let model_gemm_s = model_gemm_seconds(&cfg, TRAIN_TOKENS, dev)?;
    let prompt: Vec<u32> = (0..opts.prompt_tokens)
        .map(|i| (i * 37 % cfg.vocab_size) as u32)
        .collect();
    let s = timed_sampling(model, &prompt, opts.new_tokens)?;
    let step_s = timed_training_step(model, TRAIN_TOKENS, opts.train_steps)?;
    Ok(ModelBench {
        params,
        layers: cfg.num_hidden_layers,
        hidden: cfg.hidden_size,
        vocab: cfg.vocab_size,
        prompt_tokens: prompt.len(),
        prefill_s: s.prefill_s,
        sample_tok_per_s_batch1: s.tok_s[0],
        sample_tok_per_s_batch8: s.tok_s[1],
        sample_q8_tok_per_s_batch1: s.tok_s[2],
        sample_q8_tok_per_s_batch8: s.tok_s[3],
        q8_weights_in_4_bits: s.four_bit as f64 / (s.four_bit + s.eight_bit).max(1) as f64,
        q8_weights_mb: s.quant_bytes as f64 / 1e6,
        train_s_per_step_256_tokens: step_s,
        gemm_gflops: gflops,
        matmul_bound_limit_s: limit_s,
        train_over_limit: step_s / limit_s,
        model_gemms_s: model_gemm_s,
        train_over_model_gemms: step_s / model_gemm_s,
        peak_rss_mb: peak_rss_mb(),
    })
}

/// Seconds for the matrix products of one training step on `tokens` tokens (best of 3): per
/// layer the seven projections and attention's two products, then the head on every position;
/// each forward product `[m,k]·[k,n]` also costs `[m,n]·[n,k]` and `[k,m]·[m,n]` backward.
pub fn model_gemm_seconds(cfg: &LlamaConfig, tokens: usize, dev: &Device) -> Result<f64> {
    let mut total = 0.0;
    let mut cache: std::collections::HashMap<(usize, usize, usize, usize), f64> =
        Default::default();
    for (b, m, k, n) in step_gemm_shapes(cfg, tokens) {
        if let Some(s) = cache.get(&(b, m, k, n)) {
            total += s;
            continue;
        }
        let mut secs = 0.0;
        for (mm, kk, nn) in [(m, k, n), (m, n, k), (k, m, n)] {
            let a = Tensor::randn(0f32, 1.0, (b, mm, kk), dev)?;
            let w = Tensor::randn(0f32, 1.0, (b, kk, nn), dev)?;
            let mut best = f64::MAX;
            for _ in 0..3 {
                let s = Instant::now();
                let y = a.matmul(&w)?;
                let _ = y.flatten_all()?.get(0)?.to_scalar::<f32>()?;
                best = best.min(s.elapsed().as_secs_f64());
            }
            secs += best;
        }
        cache.insert((b, m, k, n), secs);
        total += secs;
    }
    Ok(total)
}

/// The forward products `(batch, m, k, n)` of one training step on `t` tokens.
fn step_gemm_shapes(cfg: &LlamaConfig, t: usize) -> Vec<(usize, usize, usize, usize)> {
    let (d, hd) = (cfg.hidden_size, cfg.head_dim());
    let (kv, aw) = (cfg.kv_heads() * hd, cfg.attention_width());
    let inter = cfg.intermediate_size;
    let mut shapes = Vec::new();
    for _ in 0..cfg.num_hidden_layers {
        for (k, n) in [
            (d, aw),
            (d, kv),
            (d, kv),
            (aw, d),
            (d, inter),
            (d, inter),
            (inter, d),
        ] {
            shapes.push((1, t, k, n));
        }
        shapes.push((cfg.num_attention_heads, t, hd, t)); // scores
        shapes.push((cfg.num_attention_heads, t, t, hd)); // probabilities · values
    }
    shapes.push((1, t, d, cfg.vocab_size));
    shapes
}

/// The process's peak resident memory (`VmHWM`), MB; none off Linux.
pub fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// What [`timed_sampling`] measured.
pub struct SamplingTimes {
    pub prefill_s: f64,
    /// Tokens per second: f32 at batch 1 and 8, then q8 at batch 1 and 8.
    pub tok_s: Vec<f64>,
    pub four_bit: usize,
    pub eight_bit: usize,
    pub quant_bytes: usize,
}

/// Sampling `new_tokens` tokens after `prompt`, no stop: the prompt's prefill alone, then f32 and
/// q8 decoding at batch 1 and 8 (tok/s counts the prefill too; the quantised copies are built
/// before the clock starts).
pub fn timed_sampling(model: &Llama, prompt: &[u32], new_tokens: usize) -> Result<SamplingTimes> {
    let t = Instant::now();
    sample::sample(
        model,
        prompt,
        &SamplingParams {
            n: 1,
            max_new_tokens: 1,
            ..SamplingParams::default()
        },
    )?;
    let prefill_s = t.elapsed().as_secs_f64();
    let (four_bit, eight_bit, quant_bytes) = model.quantized_weights()?.summary();
    let mut tok_s = Vec::new();
    for decode_weights in [DecodeWeights::F32, DecodeWeights::Q8] {
        for batch in [1usize, 8] {
            let p = SamplingParams {
                n: batch,
                temperature: prod_core::PAPER_TEMPERATURE,
                max_new_tokens: new_tokens,
                seed: 1,
                decode_weights,
                ..SamplingParams::default()
            };
            let t = Instant::now();
            let s = sample::sample(model, prompt, &p)?;
            let total: usize = s.iter().map(|x| x.ids.len()).sum();
            tok_s.push(total as f64 / t.elapsed().as_secs_f64());
        }
    }
    Ok(SamplingTimes {
        prefill_s,
        tok_s,
        four_bit,
        eight_bit,
        quant_bytes,
    })
}

/// The fastest of `steps` training steps on one `tokens`-token example, all of it in the loss
/// (a first step before them is warm-up).
pub fn timed_training_step(model: &Llama, tokens: usize, steps: usize) -> Result<f64> {
    let vocab = model.config().vocab_size;
    let ex = TrainExample {
        ids: (0..tokens).map(|i| (i * 7919 % vocab) as u32).collect(),
        loss_from: 1,
        weight: 1.0,
    };
    let mut trainer = Trainer::new(PolicyConfig {
        micro_batch: 1,
        warmup_steps: 0,
        ..PolicyConfig::default()
    });
    trainer.step(model, std::slice::from_ref(&ex))?;
    let mut step_s = f64::MAX;
    for _ in 0..steps {
        let t = Instant::now();
        trainer.step(model, std::slice::from_ref(&ex))?;
        step_s = step_s.min(t.elapsed().as_secs_f64());
    }
    Ok(step_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per layer seven projections and two attention products, then the head.
    #[test]
    fn a_training_step_has_nine_products_per_layer_and_the_head() {
        let cfg = LlamaConfig::tiny(100);
        let shapes = step_gemm_shapes(&cfg, 16);
        assert_eq!(shapes.len(), 9 * cfg.num_hidden_layers + 1);
        assert_eq!(shapes.last(), Some(&(1, 16, cfg.hidden_size, 100)));
    }
}

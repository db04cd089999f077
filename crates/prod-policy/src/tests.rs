//! Unit tests on tiny random models (seconds in the test profile).

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use prod_core::conditional::SPECIAL_TOKENS;
use prod_core::T0;

use crate::config::{LlamaConfig, PolicyConfig};
use crate::model::{Batch, KvCache, Llama};
use crate::prompt::{self, ExampleOptions, TrainExample};
use crate::sample::{self, SamplingParams};
use crate::tokenizer::ProdTokenizer;
use crate::train::{self, Trainer};

const V: usize = 61;

fn tiny(tied: bool, kv_heads: usize) -> LlamaConfig {
    let mut c = LlamaConfig::tiny(V);
    c.tie_word_embeddings = tied;
    c.num_key_value_heads = Some(kv_heads);
    c
}

fn model(tied: bool, kv_heads: usize, seed: u64) -> Llama {
    Llama::random(&tiny(tied, kv_heads), seed, &Device::Cpu).expect("random model")
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

fn ex(ids: &[u32], loss_from: usize, weight: f32) -> TrainExample {
    TrainExample {
        ids: ids.to_vec(),
        loss_from,
        weight,
    }
}

#[test]
fn every_parameter_gets_a_nonzero_gradient() {
    for (tied, kv) in [(false, 2), (true, 1), (false, 4)] {
        let m = model(tied, kv, 1);
        // Two rows of different lengths: padding and the mask are on the path too.
        let batch = [ex(&[1, 5, 9, 2, 7, 3], 2, 1.0), ex(&[4, 8, 6], 1, 0.5)];
        let (loss, n) = train::weighted_nll_sum(&m, &batch, true).unwrap();
        assert_eq!(n, 4 + 2);
        let grads = loss.backward().unwrap();
        let vars = m.named_vars();
        assert_eq!(vars.len(), Llama::param_shapes(m.config()).len());
        for (name, var) in vars {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("no gradient for {name} (tied={tied})"));
            let s = g
                .abs()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(
                s > 0.0 && s.is_finite(),
                "{name}: gradient sum {s} (tied={tied}, kv={kv})"
            );
        }
    }
}

#[test]
fn kv_cache_logits_equal_full_sequence_logits() {
    for (tied, kv) in [(false, 2), (true, 1), (false, 4)] {
        let m = model(tied, kv, 2);
        let seq: Vec<u32> = vec![3, 14, 15, 9, 26, 5, 35, 8, 9, 7];
        let full = m
            .logits(&Batch::right_padded(&[&seq]), false)
            .unwrap()
            .squeeze(0)
            .unwrap();
        // Prefill 4 tokens, then a chunk of 3, then one at a time.
        let mut cache = KvCache::new(m.config().num_hidden_layers);
        let mut pos = 0;
        for chunk in [4usize, 3, 1, 1, 1] {
            let part = &seq[pos..pos + chunk];
            let last = m
                .forward_cached(&Batch::right_padded(&[part]), &mut cache)
                .unwrap()
                .squeeze(0)
                .unwrap();
            pos += chunk;
            let want = full.get(pos - 1).unwrap();
            let d = max_abs_diff(&last, &want);
            assert!(
                d < 1e-4,
                "position {}: cache vs full differ by {d}",
                pos - 1
            );
        }
        assert_eq!(cache.len(), seq.len());
    }
}

#[test]
fn padding_changes_no_valid_logit() {
    let m = model(false, 2, 3);
    let a: Vec<u32> = vec![1, 2, 3, 4, 5, 6, 7];
    let b: Vec<u32> = vec![9, 8, 7];
    let single_a = m
        .logits(&Batch::right_padded(&[&a]), false)
        .unwrap()
        .squeeze(0)
        .unwrap();
    let single_b = m
        .logits(&Batch::right_padded(&[&b]), false)
        .unwrap()
        .squeeze(0)
        .unwrap();
    // Right padding (training).
    let both = m.logits(&Batch::right_padded(&[&a, &b]), false).unwrap();
    assert!(max_abs_diff(&both.get(0).unwrap(), &single_a) < 1e-4);
    assert!(max_abs_diff(&both.get(1).unwrap().narrow(0, 0, 3).unwrap(), &single_b) < 1e-4);
    // Left padding through the cache (batched decoding of different prompts), then one more token.
    let mut cache = KvCache::new(m.config().num_hidden_layers);
    let last = m
        .forward_cached(&Batch::left_padded(&[&a, &b]), &mut cache)
        .unwrap();
    assert!(max_abs_diff(&last.get(0).unwrap(), &single_a.get(6).unwrap()) < 1e-4);
    assert!(max_abs_diff(&last.get(1).unwrap(), &single_b.get(2).unwrap()) < 1e-4);
    let next = m
        .forward_cached(
            &Batch::right_padded(&[&[11u32][..], &[12u32][..]]),
            &mut cache,
        )
        .unwrap();
    let a2: Vec<u32> = a.iter().copied().chain([11]).collect();
    let b2: Vec<u32> = b.iter().copied().chain([12]).collect();
    let la = m
        .logits(&Batch::right_padded(&[&a2]), false)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .get(7)
        .unwrap();
    let lb = m
        .logits(&Batch::right_padded(&[&b2]), false)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .get(3)
        .unwrap();
    assert!(max_abs_diff(&next.get(0).unwrap(), &la) < 1e-4);
    assert!(max_abs_diff(&next.get(1).unwrap(), &lb) < 1e-4);
}

#[test]
fn save_then_load_is_exact() {
    for tied in [false, true] {
        let m = model(tied, 2, 4);
        let dir = tempfile::tempdir().unwrap();
        m.save(dir.path()).unwrap();
        let back = Llama::load(dir.path(), &Device::Cpu).unwrap();
        assert_eq!(back.config(), m.config());
        let (a, b) = (m.named_vars(), back.named_vars());
        assert_eq!(a.len(), b.len());
        for ((na, va), (nb, vb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            let x: Vec<f32> = va.flatten_all().unwrap().to_vec1().unwrap();
            let y: Vec<f32> = vb.flatten_all().unwrap().to_vec1().unwrap();
            assert!(
                x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()),
                "{na} differs"
            );
        }
        let seq = [1u32, 2, 3];
        let l1 = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
        let l2 = back.logits(&Batch::right_padded(&[&seq]), false).unwrap();
        assert_eq!(max_abs_diff(&l1, &l2), 0.0);
    }
}

#[test]
fn loading_reports_missing_and_misshapen_parameters() {
    let cfg = tiny(false, 2);
    let m = model(false, 2, 5);
    let mut t: HashMap<String, Tensor> = m
        .named_vars()
        .into_iter()
        .map(|(n, v)| (n, v.as_detached_tensor()))
        .collect();
    t.remove("model.layers.1.mlp.up_proj.weight");
    let err = Llama::from_tensors(cfg.clone(), t.clone(), &Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("model.layers.1.mlp.up_proj.weight"), "{err}");
    t.insert(
        "model.layers.1.mlp.up_proj.weight".into(),
        Tensor::zeros((3, 3), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    let err = Llama::from_tensors(cfg, t, &Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("shape"), "{err}");
}

#[test]
fn out_of_vocabulary_ids_are_errors_not_panics() {
    let m = model(false, 2, 6);
    assert!(m
        .logits(&Batch::right_padded(&[&[1u32, V as u32][..]]), false)
        .is_err());
}

#[test]
fn resized_vocabulary_starts_at_the_mean_embedding() {
    let mut m = model(false, 2, 7);
    let old_embed = m.named_vars()[0].1.as_detached_tensor();
    let seq = [1u32, 2, 3];
    let before = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
    m.resize_vocab(V + 3).unwrap();
    assert_eq!(m.config().vocab_size, V + 3);
    let embed = m.named_vars()[0].1.as_detached_tensor();
    let mean = old_embed.mean_keepdim(0).unwrap().squeeze(0).unwrap();
    for r in V..V + 3 {
        assert!(max_abs_diff(&embed.get(r).unwrap(), &mean) < 1e-6);
    }
    let after = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
    assert!(
        max_abs_diff(&after.narrow(2, 0, V).unwrap(), &before) < 1e-6,
        "old logits changed"
    );
}

/// A model whose every weight is zero predicts the uniform distribution, so the weighted loss
/// is known in closed form: `Σ_i w_i n_i ln V / Σ_i n_i`.
#[test]
fn weighted_loss_equals_hand_computed_value() {
    let cfg = tiny(false, 2);
    let zeros: HashMap<String, Tensor> = Llama::param_shapes(&cfg)
        .into_iter()
        .map(|(n, s)| {
            (
                n,
                Tensor::zeros(s, candle_core::DType::F32, &Device::Cpu).unwrap(),
            )
        })
        .collect();
    let m = Llama::from_tensors(cfg, zeros, &Device::Cpu).unwrap();
    // Targets of 2 tokens (weight 1) and 3 tokens (weight 0.5).
    let batch = [ex(&[5, 6, 7, 8], 2, 1.0), ex(&[1, 2, 3, 4, 9], 2, 0.5)];
    let (sum, n) = train::weighted_nll_sum(&m, &batch, false).unwrap();
    assert_eq!(n, 5);
    let loss = sum.to_scalar::<f32>().unwrap() as f64 / n as f64;
    let want = (2.0 * 1.0 + 3.0 * 0.5) * (V as f64).ln() / 5.0;
    assert!(
        (loss - want).abs() < 1e-5,
        "loss {loss}, hand-computed {want}"
    );
}

/// On a random model the fast path (head only on target rows) matches a log-softmax done by
/// hand in f64 over the full-sequence logits.
#[test]
fn weighted_loss_matches_manual_log_softmax() {
    let m = model(true, 2, 8);
    let batch = [ex(&[5, 6, 7, 8], 1, 2.0), ex(&[1, 2, 3], 2, -0.5)];
    let (sum, n) = train::weighted_nll_sum(&m, &batch, false).unwrap();
    let mut want = 0.0;
    for e in &batch {
        let l: Vec<Vec<f32>> = m
            .logits(&Batch::right_padded(&[&e.ids]), false)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec2()
            .unwrap();
        for p in e.loss_from - 1..e.ids.len() - 1 {
            let row = &l[p];
            let mx = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let lse = mx + row.iter().map(|&x| (x as f64 - mx).exp()).sum::<f64>().ln();
            want += e.weight as f64 * (lse - row[e.ids[p + 1] as usize] as f64);
        }
    }
    assert_eq!(n, 3 + 1);
    let got = sum.to_scalar::<f32>().unwrap() as f64;
    assert!((got - want).abs() < 1e-4, "got {got}, want {want}");
}

fn train_cfg(micro: usize) -> PolicyConfig {
    PolicyConfig {
        learning_rate: 1e-2,
        warmup_steps: 0,
        micro_batch: micro,
        max_grad_norm: 1.0,
        ..PolicyConfig::default()
    }
}

#[test]
fn a_few_steps_lower_the_loss() {
    let m = model(false, 2, 9);
    let data = [
        ex(&[1, 2, 3, 4, 5, 6], 2, 1.0),
        ex(&[7, 8, 9, 10, 11], 1, 1.0),
        ex(&[12, 13, 14, 15], 2, 0.5),
    ];
    let before = train::eval_loss(&m, &data, 2).unwrap();
    let mut t = Trainer::new(train_cfg(2));
    for _ in 0..8 {
        t.step(&m, &data).unwrap();
    }
    let after = train::eval_loss(&m, &data, 2).unwrap();
    assert!(after < 0.8 * before, "loss {before} → {after}");
    assert_eq!(t.state.step, 8);
    assert_eq!(t.state.data_position, 24);
}

#[test]
fn accumulated_micro_batches_equal_one_batch() {
    let data = [
        ex(&[1, 2, 3, 4, 5, 6], 2, 1.0),
        ex(&[7, 8, 9], 1, 0.3),
        ex(&[12, 13, 14, 15], 2, 2.0),
    ];
    let m = model(false, 2, 10);
    let a = train::macro_gradients(&m, &data, 1).unwrap();
    let b = train::macro_gradients(&m, &data, 3).unwrap();
    assert_eq!(a.target_tokens, 4 + 2 + 2);
    assert!((a.loss - b.loss).abs() < 1e-6 && (a.grad_norm - b.grad_norm).abs() < 1e-6);
    assert_eq!(a.grad_sums.len(), m.named_vars().len());
    for (n, ga) in &a.grad_sums {
        // Gradient sums (not means) reach ~8 here: compare to float rounding at their size.
        let scale = ga
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
            .max(1.0);
        let d = max_abs_diff(ga, &b.grad_sums[n]);
        assert!(
            d < 1e-6 * scale,
            "{n} differs by {d} (values up to {scale})"
        );
    }
}

#[test]
fn warmup_is_linear_then_constant() {
    let t = Trainer::new(PolicyConfig {
        learning_rate: 1e-5,
        warmup_steps: 4,
        ..PolicyConfig::default()
    });
    let lrs: Vec<f64> = (0..6).map(|s| t.lr_at(s)).collect();
    let want = [2.5e-6, 5e-6, 7.5e-6, 1e-5, 1e-5, 1e-5];
    assert!(
        lrs.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
        "{lrs:?}"
    );
}

#[test]
fn resume_continues_exactly() {
    let data = [ex(&[1, 2, 3, 4, 5, 6], 2, 1.0), ex(&[7, 8, 9, 10], 1, 1.0)];
    let straight = model(false, 2, 11);
    let mut t = Trainer::new(train_cfg(2));
    t.step(&straight, &data).unwrap();
    let dir = tempfile::tempdir().unwrap();
    t.save_checkpoint(&straight, dir.path()).unwrap();
    // The moments sit apart from the weights, in a subfolder no model loader reads.
    assert!(dir.path().join(crate::train::OPTIMIZER_STATE).is_file());
    assert!(!dir.path().join("optimizer.safetensors").exists());
    // A checkpoint of the older layout (moments beside the weights) resumes the same.
    let legacy = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
        if f.path().is_file() {
            std::fs::copy(f.path(), legacy.path().join(f.file_name())).unwrap();
        }
    }
    std::fs::copy(
        dir.path().join(crate::train::OPTIMIZER_STATE),
        legacy.path().join("optimizer.safetensors"),
    )
    .unwrap();
    t.step(&straight, &data).unwrap();

    for d in [dir.path(), legacy.path()] {
        let resumed = Llama::load(d, &Device::Cpu).unwrap();
        let mut t2 = Trainer::resume(train_cfg(2), d).unwrap();
        assert_eq!(t2.state.step, 1);
        assert_eq!(t2.state.data_position, 2);
        t2.step(&resumed, &data).unwrap();
        for ((n, va), (_, vb)) in straight.named_vars().iter().zip(resumed.named_vars()) {
            assert!(max_abs_diff(va, vb) < 1e-6, "{n} differs after resume");
        }
    }
    // Without the moments the resumed step differs (the comparison above can fail).
    let bare = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(legacy.path()).unwrap().flatten() {
        if f.file_name() != "optimizer.safetensors" {
            std::fs::copy(f.path(), bare.path().join(f.file_name())).unwrap();
        }
    }
    let resumed = Llama::load(bare.path(), &Device::Cpu).unwrap();
    let mut t3 = Trainer::resume(train_cfg(2), bare.path()).unwrap();
    t3.step(&resumed, &data).unwrap();
    let worst = straight
        .named_vars()
        .iter()
        .zip(resumed.named_vars())
        .map(|((_, va), (_, vb))| max_abs_diff(va, vb))
        .fold(0.0f32, f32::max);
    assert!(worst > 1e-6, "{worst}");
}

#[test]
fn sampling_is_reproducible_under_a_seed() {
    let m = model(false, 2, 12);
    let p = SamplingParams {
        n: 4,
        temperature: 1.0,
        top_p: 0.95,
        max_new_tokens: 12,
        seed: 42,
        stop: vec![],
        ..SamplingParams::default()
    };
    let a = sample::sample(&m, &[1, 2, 3], &p).unwrap();
    let b = sample::sample(&m, &[1, 2, 3], &p).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|s| s.ids.len() == 12 && !s.stopped));
    let c = sample::sample(
        &m,
        &[1, 2, 3],
        &SamplingParams {
            seed: 43,
            ..p.clone()
        },
    )
    .unwrap();
    assert_ne!(a, c, "a different seed should give different samples");
    // The n samples are not copies of one another.
    assert!(a.iter().any(|s| s.ids != a[0].ids));
}

#[test]
fn greedy_sampling_follows_full_sequence_argmax() {
    let m = model(true, 1, 13);
    let prompt = vec![4u32, 5, 6];
    let p = SamplingParams {
        n: 2,
        temperature: 0.0,
        max_new_tokens: 6,
        ..SamplingParams::default()
    };
    let got = sample::sample(&m, &prompt, &p).unwrap();
    let mut seq = prompt.clone();
    for _ in 0..6 {
        let l: Vec<f32> = m
            .next_token_logits(&[&seq])
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec1()
            .unwrap();
        seq.push(sample::draw(&l, 0.0, 1.0, &mut rand::thread_rng()));
    }
    assert_eq!(got[0].ids, seq[3..].to_vec());
    assert_eq!(got[1].ids, got[0].ids);
}

#[test]
fn several_prompts_decode_together_like_each_alone() {
    let m = model(true, 2, 15);
    let prompts: Vec<Vec<u32>> = vec![vec![4, 5, 6], vec![7], vec![1, 2, 3, 4, 5, 6, 7]];
    let refs: Vec<&[u32]> = prompts.iter().map(|p| p.as_slice()).collect();
    // Greedy: each prompt's continuation in the padded batch is its own greedy continuation.
    let p = SamplingParams {
        n: 2,
        temperature: 0.0,
        max_new_tokens: 8,
        ..SamplingParams::default()
    };
    let together = sample::sample_prompts(&m, &refs, &p).unwrap();
    assert_eq!(together.len(), 3);
    for (prompt, got) in prompts.iter().zip(&together) {
        let alone = sample::sample(&m, prompt, &p).unwrap();
        assert_eq!(got, &alone, "prompt {prompt:?}");
    }
    // Seeded: prompt 0 of a batch draws exactly as `sample` does; the batch is reproducible.
    let p = SamplingParams {
        n: 3,
        temperature: 1.0,
        top_p: 0.9,
        max_new_tokens: 10,
        seed: 7,
        stop: vec![],
        ..SamplingParams::default()
    };
    let a = sample::sample_prompts(&m, &refs, &p).unwrap();
    assert_eq!(a, sample::sample_prompts(&m, &refs, &p).unwrap());
    assert_eq!(a[0], sample::sample(&m, &prompts[0], &p).unwrap());
    assert!(a[1] != a[2]);
    assert!(sample::sample_prompts(&m, &[&[1u32][..], &[][..]], &p).is_err());
}

/// Rows of different lengths decoded together give the logits of each sequence's full
/// forward pass (per-row caches, positions and attention).
#[test]
fn decode_rows_equal_full_sequence_logits() {
    use crate::DecodeWeights;
    for (tied, kv) in [(false, 2), (true, 1), (false, 4)] {
        let m = model(tied, kv, 21);
        let prompts: Vec<Vec<u32>> = vec![vec![3, 14, 15], vec![9], vec![2, 6, 5, 3, 5, 8, 9, 7]];
        let mut rows: Vec<_> = prompts
            .iter()
            .map(|p| m.prefill_row(p, DecodeWeights::F32).unwrap().0)
            .collect();
        let mut seqs = prompts.clone();
        for step in 0..4u32 {
            let ids: Vec<u32> = (0..3).map(|r| (step * 7 + r * 11 + 1) % V as u32).collect();
            let mut refs: Vec<&mut _> = rows.iter_mut().collect();
            let got = m.decode_rows(&mut refs, &ids, DecodeWeights::F32).unwrap();
            for (s, &id) in seqs.iter_mut().zip(&ids) {
                s.push(id);
            }
            let refs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
            let want = m.next_token_logits(&refs).unwrap();
            let err = max_abs_diff(&got, &want);
            assert!(err < 1e-4, "tied {tied} kv {kv} step {step}: {err}");
        }
        assert_eq!(
            rows.iter().map(|r| r.len()).collect::<Vec<_>>(),
            vec![7, 5, 12]
        );
    }
}

fn many_requests<'a>(
    prompts: &'a [Vec<u32>],
    seed: u64,
    max_new: &[usize],
) -> Vec<sample::Request<'a>> {
    prompts
        .iter()
        .enumerate()
        .map(|(i, p)| sample::Request {
            prompt: p,
            seed: seed + i as u64,
            max_new_tokens: max_new[i % max_new.len()],
        })
        .collect()
}

/// A request's sample does not depend on the requests decoded with it, nor on the number of
/// rows per step: greedy and seeded, f32 and q8, ragged prompts, repeated prompts, rows that
/// finish at different times (different limits, a stop token) and rows that join late.
#[test]
fn sample_many_is_independent_of_the_batch() {
    use crate::DecodeWeights;
    // Hidden 64 so that the q8 copies exist (rows of whole 32-weight blocks).
    let mut cfg = tiny(false, 2);
    cfg.hidden_size = 64;
    cfg.intermediate_size = 96;
    let m = Llama::random(&cfg, 22, &Device::Cpu).unwrap();
    let prompts: Vec<Vec<u32>> = vec![
        vec![4, 5, 6],
        vec![7],
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        vec![4, 5, 6],
        vec![30, 31],
        vec![12, 40, 41, 42],
    ];
    let max_new = [9usize, 3, 14, 6, 1, 11];
    for w in [DecodeWeights::F32, DecodeWeights::Q8] {
        if w == DecodeWeights::F32 && !crate::decode::available() {
            continue; // f32 rows are computed one by one only with the AVX-512 kernel.
        }
        for temperature in [0.0, 1.0] {
            let reqs = many_requests(&prompts, 100, &max_new);
            let params = |rows: usize, stop: Vec<u32>| sample::ManyParams {
                temperature,
                top_p: 0.95,
                stop,
                decode_weights: w,
                batch_rows: rows,
            };
            let alone: Vec<sample::Sample> = reqs
                .iter()
                .map(|r| {
                    sample::sample_many(
                        &m,
                        std::slice::from_ref(r),
                        &params(1, vec![]),
                        &mut sample::Prefills::new(0),
                    )
                    .unwrap()
                    .remove(0)
                })
                .collect();
            for (s, r) in alone.iter().zip(&reqs) {
                assert_eq!(s.ids.len(), r.max_new_tokens);
                assert!(!s.stopped);
            }
            for rows in [1, 2, 4, 16] {
                let together = sample::sample_many(
                    &m,
                    &reqs,
                    &params(rows, vec![]),
                    &mut sample::Prefills::new(0),
                )
                .unwrap();
                assert_eq!(together, alone, "{w} temperature {temperature} rows {rows}");
            }
            // Same prompt, same seed: same sample; different seeds: (here) different samples.
            if temperature > 0.0 {
                assert_ne!(alone[0], alone[3]);
            } else {
                assert_eq!(alone[0].ids[..6], alone[3].ids[..]);
            }
            // A stop token: the sample of request 2 ends where its first one appears, the
            // others are unchanged where they do not contain it.
            let stop = alone[2].ids[2];
            let stopped = sample::sample_many(
                &m,
                &reqs,
                &params(2, vec![stop]),
                &mut sample::Prefills::new(0),
            )
            .unwrap();
            for (s, a) in stopped.iter().zip(&alone) {
                match a.ids.iter().position(|&t| t == stop) {
                    Some(k) => assert_eq!((&s.ids[..], s.stopped), (&a.ids[..k], true)),
                    None => assert_eq!(s, a),
                }
            }
        }
    }
}

/// Prefills are kept across calls within the budget, reused with the same results, and dropped
/// when the weights change.
#[test]
fn prefills_are_reused_until_the_weights_change() {
    let m = model(false, 2, 23);
    let prompts: Vec<Vec<u32>> = vec![vec![4, 5, 6], vec![7, 8], vec![4, 5, 6]];
    let reqs = many_requests(&prompts, 5, &[5]);
    let p = sample::ManyParams {
        temperature: 1.0,
        batch_rows: 2,
        ..sample::ManyParams::default()
    };
    let mut store = sample::Prefills::new(1 << 20);
    let a = sample::sample_many(&m, &reqs, &p, &mut store).unwrap();
    assert_eq!(
        (store.computed, store.reused),
        (2, 0),
        "the repeated prompt is prefilled once"
    );
    let b = sample::sample_many(&m, &reqs, &p, &mut store).unwrap();
    assert_eq!(a, b);
    assert_eq!((store.computed, store.reused), (2, 2));
    m.weights_changed();
    sample::sample_many(&m, &reqs, &p, &mut store).unwrap();
    assert_eq!(store.computed, 4);
    // Without a budget nothing is kept, but a call still prefills each prompt once.
    let mut none = sample::Prefills::new(0);
    assert_eq!(sample::sample_many(&m, &reqs, &p, &mut none).unwrap(), a);
    assert_eq!((none.computed, none.bytes()), (2, 0));
    assert!(sample::sample_many(
        &m,
        &[sample::Request {
            prompt: &[],
            seed: 0,
            max_new_tokens: 3
        }],
        &p,
        &mut none
    )
    .is_err());
    let zero = sample::sample_many(
        &m,
        &[sample::Request {
            prompt: &[1],
            seed: 0,
            max_new_tokens: 0,
        }],
        &p,
        &mut none,
    )
    .unwrap();
    assert!(zero[0].ids.is_empty());
}

#[test]
fn sampling_stops_on_the_end_token() {
    let m = model(false, 2, 14);
    let all: Vec<u32> = (0..V as u32).collect();
    let p = SamplingParams {
        n: 3,
        max_new_tokens: 5,
        stop: all,
        ..SamplingParams::default()
    };
    let s = sample::sample(&m, &[1], &p).unwrap();
    assert!(s.iter().all(|x| x.stopped && x.ids.is_empty()));
    // Greedy with the greedy token as stop: stops at once; others run to the limit.
    let l: Vec<f32> = m
        .next_token_logits(&[&[1u32][..]])
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec1()
        .unwrap();
    let g = sample::draw(&l, 0.0, 1.0, &mut rand::thread_rng());
    let s = sample::sample(
        &m,
        &[1],
        &SamplingParams {
            n: 1,
            temperature: 0.0,
            max_new_tokens: 5,
            stop: vec![g],
            ..SamplingParams::default()
        },
    )
    .unwrap();
    assert!(s[0].stopped && s[0].ids.is_empty());
}

#[test]
fn tiny_top_p_keeps_only_the_most_likely_token() {
    use rand::SeedableRng;
    let logits = [0.1f32, 2.0, 1.9, -3.0];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    for _ in 0..200 {
        assert_eq!(sample::draw(&logits, 1.0, 1e-6, &mut rng), 1);
    }
    let hits = (0..2000)
        .filter(|_| sample::draw(&logits, 1.0, 1.0, &mut rng) == 2)
        .count();
    assert!(
        hits > 400,
        "token 2 should be drawn often at top_p=1, got {hits}/2000"
    );
}

const CORPUS: &[&str] = &[
    "Lemma add_0_r : forall n : nat, n + 0 = n.",
    "<no_invoke> intros n. induction n as [|n IH]; simpl; auto.",
    "<use_invoke> intros. <invoke> Lemma helper : forall a b : nat, a + b = b + a. </invoke> apply helper.",
    "Theorem app_nil_r : forall (A : Type) (l : list A), l ++ nil = l.",
    "Proof. intros A l. induction l; simpl; rewrite ?IHl; reflexivity. Qed.",
    "Definition double (n : nat) := n + n. <true> <false>",
];

fn tokenizer() -> ProdTokenizer {
    ProdTokenizer::train_bpe(CORPUS.iter().cycle().take(60), 300, 2).expect("train bpe")
}

#[test]
fn each_special_token_encodes_as_one_id() {
    let tok = tokenizer();
    let mut seen = std::collections::HashSet::new();
    for t in SPECIAL_TOKENS {
        let ids = tok.encode(t).unwrap();
        assert_eq!(ids.len(), 1, "{t} → {ids:?}");
        assert_eq!(Some(ids[0]), tok.special_id(t));
        assert!(seen.insert(ids[0]), "{t} shares an id");
        // Also inside text, glued to neighbours.
        let ids = tok.encode(&format!("x.{t}y")).unwrap();
        assert!(
            ids.contains(&tok.special_id(t).unwrap()),
            "{t} split inside text: {ids:?}"
        );
    }
    assert_eq!(
        tok.encode(crate::tokenizer::END_OF_TEXT).unwrap(),
        vec![tok.end_id()]
    );
    let text = "<use_invoke> intros. <invoke> Lemma h : 1 = 1. </invoke> exact h.";
    assert_eq!(tok.decode(&tok.encode(text).unwrap()).unwrap(), text);
    let dir = tempfile::tempdir().unwrap();
    tok.save(&dir.path().join("tokenizer.json")).unwrap();
    let back = ProdTokenizer::from_file(&dir.path().join("tokenizer.json"), None).unwrap();
    assert_eq!(back.encode(text).unwrap(), tok.encode(text).unwrap());
}

#[test]
fn special_tokens_are_added_to_a_tokenizer_without_them() {
    // A byte-level BPE trained without ProD's tokens: `new` adds them as single tokens.
    use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
    use tokenizers::normalizers::NormalizerWrapper;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::processors::PostProcessorWrapper;
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(280)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![tokenizers::AddedToken::from("</s>", true)])
        .build();
    let mut base = tokenizers::TokenizerBuilder::<
        BPE,
        NormalizerWrapper,
        ByteLevel,
        PostProcessorWrapper,
        ByteLevel,
    >::new()
    .with_model(BPE::default())
    .with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)))
    .with_decoder(Some(ByteLevel::default()))
    .build()
    .unwrap();
    base.train(&mut trainer, CORPUS.iter()).unwrap();
    let base = tokenizers::Tokenizer::from(base);
    let before = base.get_vocab_size(true);
    let tok = ProdTokenizer::new(base, None).unwrap();
    assert_eq!(tok.vocab_size(), before + SPECIAL_TOKENS.len());
    assert_eq!(tok.end_id(), tok.token_id("</s>").unwrap());
    for t in SPECIAL_TOKENS {
        assert_eq!(tok.encode(t).unwrap().len(), 1);
    }
}

#[test]
fn the_shipped_template_builds_the_prompts_the_policy_builds() {
    let tok = tokenizer();
    let end = tok.inner().id_to_token(tok.end_id()).unwrap();
    let t = prompt::template(&end);
    let fill = |key: &str, context: &str, statement: &str| {
        t[key]
            .as_str()
            .unwrap()
            .replace("{context}", context)
            .replace("{statement}", statement)
    };
    let (context, statement) = ("Require Import Arith.\n\n", "  Lemma foo : 0 = 0. ");
    let ids = prompt::prompt_ids(&tok, context, statement, 1000).unwrap();
    // The text the template gives (placeholders filled with the trimmed parts) is the prompt.
    let text = fill("prompt", context.trim_end(), statement.trim());
    assert_eq!(text, "Require Import Arith.\nLemma foo : 0 = 0.\n");
    assert_eq!(tok.decode(&ids).unwrap(), text);
    // Tokenised as the rules say: the two parts separately, ids concatenated.
    let (c, s) = text.split_at(text.find('\n').unwrap() + 1);
    let mut want = tok.encode(c).unwrap();
    want.extend(tok.encode(s).unwrap());
    assert_eq!(ids, want);
    let bare = prompt::prompt_ids(&tok, " \n", statement, 1000).unwrap();
    assert_eq!(
        tok.decode(&bare).unwrap(),
        fill("prompt_without_context", "", statement.trim())
    );
    // The completion a training example ends with.
    let opts = prompt::ExampleOptions {
        context_tokens: 1000,
        max_seq_len: 4096,
        statement_in_loss: false,
    };
    let proof = "<no_invoke> reflexivity.";
    let ex = prompt::policy_example(&tok, context, statement, proof, 1.0, &opts).unwrap();
    assert_eq!(&ex.ids[..ids.len()], &ids[..]);
    let completion = t["completion"]
        .as_str()
        .unwrap()
        .replace("{conditional_proof}", proof);
    let mut target = tok.encode(proof).unwrap();
    target.push(tok.end_id());
    assert_eq!(&ex.ids[ids.len()..], &target[..]);
    assert!(completion.ends_with(&end), "{completion}");
}

#[test]
fn prompts_truncate_the_context_and_targets_end_with_the_end_token() {
    let tok = tokenizer();
    let context = "Lemma add_0_r : forall n : nat, n + 0 = n. Theorem app_nil_r : forall (A : Type) (l : list A), l ++ nil = l.";
    let statement = "Lemma foo : forall n : nat, n + 0 = n.";
    let full_ctx = tok.encode(&format!("{context}\n")).unwrap();
    let stmt = tok.encode(&format!("{statement}\n")).unwrap();
    let p = prompt::prompt_ids(&tok, context, statement, 5).unwrap();
    assert_eq!(p.len(), 5 + stmt.len());
    assert_eq!(
        &p[..5],
        &full_ctx[full_ctx.len() - 5..],
        "keeps the LAST tokens of the context"
    );
    assert_eq!(&p[5..], &stmt[..]);
    let p_all = prompt::prompt_ids(&tok, context, statement, 1000).unwrap();
    assert_eq!(p_all.len(), full_ctx.len() + stmt.len());

    let proof = "<no_invoke> intros n. auto.";
    let opts = ExampleOptions {
        context_tokens: 5,
        max_seq_len: 2048,
        statement_in_loss: false,
    };
    let e = prompt::policy_example(&tok, context, statement, proof, 0.25, &opts).unwrap();
    assert_eq!(&e.ids[..p.len()], &p[..]);
    assert_eq!(e.loss_from, p.len());
    assert_eq!(
        e.ids[e.loss_from],
        tok.no_invoke_id(),
        "target starts with t0"
    );
    assert_eq!(*e.ids.last().unwrap(), tok.end_id());
    assert_eq!(
        tok.decode(&e.ids[e.loss_from..e.ids.len() - 1]).unwrap(),
        proof
    );
    assert_eq!(e.weight, 0.25);
    let with_stmt = prompt::policy_example(
        &tok,
        context,
        statement,
        proof,
        1.0,
        &ExampleOptions {
            statement_in_loss: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(with_stmt.loss_from, 5);
    // Malformed targets never become training data.
    for bad in [
        "intros n. auto.",
        "<use_invoke> <invoke> </invoke>",
        "<no_invoke> <true>",
    ] {
        assert!(
            prompt::policy_example(&tok, context, statement, bad, 1.0, &opts).is_err(),
            "{bad}"
        );
    }
    // Markers beside a string or comment: only the prover's language places them, so the
    // language-less check lets them through (the data was written from parsed proofs).
    for good in [
        "<use_invoke> idtac \"(*\". <invoke> Lemma a : True. </invoke> exact a.",
        "<no_invoke> idtac \"<invoke>\". exact I.",
    ] {
        assert!(
            prompt::policy_example(&tok, context, statement, good, 1.0, &opts).is_ok(),
            "{good}"
        );
    }
    assert!(prompt::policy_example(
        &tok,
        context,
        statement,
        proof,
        1.0,
        &ExampleOptions {
            max_seq_len: 4,
            ..opts
        }
    )
    .is_err());
    let forced = prompt::with_forced_t0(&tok, &p, T0::UseInvoke);
    assert_eq!(forced.last(), Some(&tok.use_invoke_id()));
    let v = prompt::value_example(&tok, &p, false, 1.0).unwrap();
    assert_eq!(
        (v.loss_from, *v.ids.last().unwrap()),
        (p.len(), tok.false_id())
    );
}

#[test]
fn the_context_gives_way_to_the_length_limit_before_an_example_is_dropped() {
    let tok = tokenizer();
    let context = "Lemma add_0_r : forall n : nat, n + 0 = n. Theorem app_nil_r : forall (A : Type) (l : list A), l ++ nil = l.";
    let statement = "Lemma foo : forall n : nat, n + 0 = n.";
    let proof = "<use_invoke> <invoke> Lemma bar : 0 = 0. </invoke> intros n. auto.";
    let full_ctx = tok.encode(&format!("{context}\n")).unwrap();
    let stmt = tok.encode(&format!("{statement}\n")).unwrap();
    let body = stmt.len() + tok.encode(proof).unwrap().len() + 1;
    assert!(full_ctx.len() > 8);
    // Room for the body and 3 context tokens: the last 3 are kept, the example is not dropped.
    let opts = ExampleOptions {
        context_tokens: 1000,
        max_seq_len: body + 3,
        statement_in_loss: false,
    };
    let b = prompt::build_policy_example(&tok, context, statement, proof, 1.0, &opts).unwrap();
    assert_eq!(b.example.ids.len(), body + 3);
    assert_eq!(
        &b.example.ids[..3],
        &full_ctx[full_ctx.len() - 3..],
        "the LAST context tokens"
    );
    assert_eq!(
        &b.example.ids[3..3 + stmt.len()],
        &stmt[..],
        "the statement whole"
    );
    assert_eq!(b.example.loss_from, 3 + stmt.len());
    assert_eq!(b.example.ids[b.example.loss_from], tok.use_invoke_id());
    assert_eq!(
        (b.context_tokens_full, b.context_tokens_kept),
        (full_ctx.len(), 3)
    );
    assert!(b.cut_for_length(&opts));
    // --context-tokens still bounds the context when the limit leaves more room.
    let roomy = ExampleOptions {
        context_tokens: 5,
        max_seq_len: 4096,
        ..opts
    };
    let b = prompt::build_policy_example(&tok, context, statement, proof, 1.0, &roomy).unwrap();
    assert_eq!(
        (b.context_tokens_kept, b.cut_for_length(&roomy)),
        (5, false)
    );
    // No context at all still fits exactly; one token less and the statement + proof alone are
    // too long: dropped, with that reason.
    let exact = ExampleOptions {
        max_seq_len: body,
        ..opts
    };
    assert_eq!(
        prompt::build_policy_example(&tok, context, statement, proof, 1.0, &exact)
            .unwrap()
            .context_tokens_kept,
        0
    );
    let short = ExampleOptions {
        max_seq_len: body - 1,
        ..opts
    };
    let d = prompt::build_policy_example(&tok, context, statement, proof, 1.0, &short).unwrap_err();
    assert_eq!(d.reason, prompt::DropReason::TooLong);
    let d =
        prompt::build_policy_example(&tok, context, statement, "intros.", 1.0, &opts).unwrap_err();
    assert_eq!(d.reason, prompt::DropReason::BadTarget);
}

#[test]
fn pair_probabilities_are_renormalised_softmax() {
    let tok = tokenizer();
    let m = Llama::random(&LlamaConfig::tiny(tok.vocab_size()), 15, &Device::Cpu).unwrap();
    let p1 = prompt::prompt_ids(&tok, "", "Lemma a : True.", 100).unwrap();
    let p2 = prompt::prompt_ids(&tok, "Lemma b : False.", "Lemma a : 1 = 1.", 100).unwrap();
    let got = prompt::p_use_invoke(&m, &tok, &[&p1, &p2]).unwrap();
    let val = prompt::value(&m, &tok, &[&p1, &p2]).unwrap();
    for (i, p) in [&p1, &p2].iter().enumerate() {
        let l: Vec<f32> = m
            .logits(&Batch::right_padded(&[p]), false)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .get(p.len() - 1)
            .unwrap()
            .to_vec1()
            .unwrap();
        let e = |id: u32| (l[id as usize] as f64).exp();
        let want = e(tok.use_invoke_id()) / (e(tok.use_invoke_id()) + e(tok.no_invoke_id()));
        assert!((got[i] - want).abs() < 1e-5, "{} vs {want}", got[i]);
        let want_v = e(tok.true_id()) / (e(tok.true_id()) + e(tok.false_id()));
        assert!((val[i] - want_v).abs() < 1e-5);
    }
}

/// Writes a tiny model as llama.cpp would (renamed tensors, Q/K permuted, tokenizer in the
/// metadata) and checks that the import gives back the same logits.
#[test]
fn gguf_import_round_trips_a_llama_cpp_layout() {
    use candle_core::quantized::gguf_file::{self, Value};
    use candle_core::quantized::{GgmlDType, QTensor};
    let mut alphabet: Vec<char> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet()
        .into_iter()
        .collect();
    alphabet.sort();
    let mut tokens: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
    tokens.push("ab".into());
    tokens.push("<|endoftext|>".into());
    let n = tokens.len();
    let mut types = vec![Value::I32(1); n];
    types[n - 1] = Value::I32(3);
    let mut cfg = tiny(true, 2);
    cfg.vocab_size = n;
    let m = Llama::random(&cfg, 16, &Device::Cpu).unwrap();
    let w: HashMap<String, Tensor> = m
        .named_vars()
        .into_iter()
        .map(|(k, v)| (k, v.as_detached_tensor()))
        .collect();
    let mut qt: Vec<(String, QTensor)> = Vec::new();
    let mut put =
        |name: String, t: Tensor| qt.push((name, QTensor::quantize(&t, GgmlDType::F32).unwrap()));
    put(
        "token_embd.weight".into(),
        w["model.embed_tokens.weight"].clone(),
    );
    put("output_norm.weight".into(), w["model.norm.weight"].clone());
    for i in 0..cfg.num_hidden_layers {
        let h = |s: &str| w[&format!("model.layers.{i}.{s}")].clone();
        put(
            format!("blk.{i}.attn_norm.weight"),
            h("input_layernorm.weight"),
        );
        put(
            format!("blk.{i}.attn_q.weight"),
            crate::gguf::permute_qk(&h("self_attn.q_proj.weight"), 4).unwrap(),
        );
        put(
            format!("blk.{i}.attn_k.weight"),
            crate::gguf::permute_qk(&h("self_attn.k_proj.weight"), 2).unwrap(),
        );
        put(
            format!("blk.{i}.attn_v.weight"),
            h("self_attn.v_proj.weight"),
        );
        put(
            format!("blk.{i}.attn_output.weight"),
            h("self_attn.o_proj.weight"),
        );
        put(
            format!("blk.{i}.ffn_norm.weight"),
            h("post_attention_layernorm.weight"),
        );
        put(
            format!("blk.{i}.ffn_gate.weight"),
            h("mlp.gate_proj.weight"),
        );
        put(format!("blk.{i}.ffn_up.weight"), h("mlp.up_proj.weight"));
        put(
            format!("blk.{i}.ffn_down.weight"),
            h("mlp.down_proj.weight"),
        );
    }
    let s = |x: &str| Value::String(x.into());
    let md: Vec<(&str, Value)> = vec![
        ("general.architecture", s("llama")),
        ("llama.block_count", Value::U32(2)),
        ("llama.embedding_length", Value::U32(32)),
        ("llama.feed_forward_length", Value::U32(64)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("llama.context_length", Value::U32(512)),
        ("tokenizer.ggml.model", s("gpt2")),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| s(t)).collect()),
        ),
        ("tokenizer.ggml.merges", Value::Array(vec![s("a b")])),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.eos_token_id", Value::U32(n as u32 - 1)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    let mut f = std::fs::File::create(&path).unwrap();
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (*k, v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = qt.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &md_refs, &t_refs).unwrap();
    drop(f);

    let (imported, tok) = crate::gguf::import_gguf(&path, &Device::Cpu).unwrap();
    assert_eq!(imported.config().vocab_size, n + SPECIAL_TOKENS.len());
    assert_eq!(tok.end_id(), n as u32 - 1);
    assert_eq!(tok.encode("ab").unwrap(), vec![n as u32 - 2]);
    for t in SPECIAL_TOKENS {
        assert_eq!(tok.encode(t).unwrap().len(), 1);
    }
    let seq = [5u32, 77, 140, n as u32 - 2];
    let a = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
    let b = imported
        .logits(&Batch::right_padded(&[&seq]), false)
        .unwrap()
        .narrow(2, 0, n)
        .unwrap();
    assert!(
        max_abs_diff(&a, &b) < 1e-5,
        "imported logits differ by {}",
        max_abs_diff(&a, &b)
    );
    assert!(crate::gguf::import_gguf(&dir.path().join("missing.gguf"), &Device::Cpu).is_err());
}

/// First AdamW step from zero state with bias correction: `p − lr·g/(|g|+eps)`, plus decoupled
/// weight decay `p·(1 − lr·wd)`; parameters without a gradient are untouched.
#[test]
fn adamw_first_step_matches_the_formula() {
    let m = model(false, 2, 17);
    let name = "model.norm.weight".to_string();
    let before: Vec<f32> = m
        .named_vars()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
        .to_vec1()
        .unwrap();
    let other_before = m.named_vars()[0].1.as_detached_tensor().copy().unwrap();
    let g: Vec<f32> = (0..before.len())
        .map(|i| if i % 2 == 0 { 0.5 } else { -2.0 })
        .collect();
    let grads = HashMap::from([(
        name.clone(),
        Tensor::from_vec(g.clone(), before.len(), &Device::Cpu).unwrap(),
    )]);
    let mut opt = train::AdamW::new(&PolicyConfig {
        weight_decay: 0.1,
        ..PolicyConfig::default()
    });
    opt.update(&m, &grads, 0.01).unwrap();
    let after: Vec<f32> = m
        .named_vars()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
        .to_vec1()
        .unwrap();
    for i in 0..before.len() {
        let want = before[i] as f64 * (1.0 - 0.01 * 0.1)
            - 0.01 * (g[i] as f64) / ((g[i] as f64).abs() + 1e-8);
        assert!(
            (after[i] as f64 - want).abs() < 1e-6,
            "{i}: {} vs {want}",
            after[i]
        );
    }
    assert_eq!(
        max_abs_diff(&m.named_vars()[0].1.as_detached_tensor(), &other_before),
        0.0
    );
}

// ---------------------------------------------------------------------------------------------
// Fused ops (crate::ops) against the composite candle ops they replace: forward values and
// gradients (through candle's autograd on the plain ops) on small random tensors.

fn randn(shape: &[usize], seed: u64) -> Tensor {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect();
    Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
}

/// Runs `fused` and `reference` on fresh `Var`s of `inputs`, compares outputs, then the
/// gradients of `Σ out ⊙ R` (R random) with respect to every input.
fn check_op(
    what: &str,
    inputs: &[Tensor],
    fused: impl Fn(&[Tensor]) -> Tensor,
    reference: impl Fn(&[Tensor]) -> Tensor,
    tol: f32,
) {
    let run = |f: &dyn Fn(&[Tensor]) -> Tensor| {
        let vars: Vec<candle_core::Var> = inputs
            .iter()
            .map(|t| candle_core::Var::from_tensor(t).unwrap())
            .collect();
        let ts: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let out = f(&ts);
        let r = randn(out.dims(), 99);
        let loss = (&out * &r).unwrap().sum_all().unwrap();
        let grads = loss.backward().unwrap();
        let gs: Vec<Tensor> = vars
            .iter()
            .map(|v| {
                grads
                    .get(v.as_tensor())
                    .cloned()
                    .unwrap_or_else(|| v.as_tensor().zeros_like().unwrap())
            })
            .collect();
        (out.detach(), gs)
    };
    let (out_f, g_f) = run(&fused);
    let (out_r, g_r) = run(&reference);
    assert_eq!(out_f.dims(), out_r.dims(), "{what}: output shape");
    let d = max_abs_diff(&out_f, &out_r);
    assert!(d < tol, "{what}: forward differs by {d}");
    for (i, (a, b)) in g_f.iter().zip(&g_r).enumerate() {
        assert_eq!(a.dims(), b.dims(), "{what}: gradient {i} shape");
        let d = max_abs_diff(a, b);
        let scale = b
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
            .max(1.0);
        assert!(
            d / scale < tol,
            "{what}: gradient of input {i} differs by {d} (scale {scale})"
        );
        // The check must not pass vacuously.
        assert!(scale > 0.0);
    }
}

#[test]
fn fused_linear_matches_matmul() {
    check_op(
        "linear",
        &[randn(&[5, 7], 1), randn(&[4, 7], 2)],
        |t| crate::ops::linear(&t[0], &t[1]).unwrap(),
        |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
        1e-5,
    );
}

#[test]
fn fused_rms_norm_matches_rms_norm_slow() {
    let w = (randn(&[8], 4).abs().unwrap() + 0.5).unwrap();
    check_op(
        "rms_norm",
        &[randn(&[6, 8], 3), w],
        |t| crate::ops::rms_norm(&t[0], &t[1], 1e-5).unwrap(),
        |t| candle_nn::ops::rms_norm_slow(&t[0], &t[1], 1e-5).unwrap(),
        1e-5,
    );
}

#[test]
fn fused_swiglu_matches_silu_times_up() {
    check_op(
        "swiglu",
        &[randn(&[4, 9], 5), randn(&[4, 9], 6)],
        |t| crate::ops::swiglu(&t[0], &t[1]).unwrap(),
        |t| (t[0].silu().unwrap() * &t[1]).unwrap(),
        1e-5,
    );
}

#[test]
fn fused_rope_transpose_matches_composite_rope() {
    let (b, tt, h, hd) = (2, 3, 4, 6);
    let cos = randn(&[b, tt, hd], 7);
    let sin = randn(&[b, tt, hd], 8);
    let cv = std::sync::Arc::new(cos.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    let sv = std::sync::Arc::new(sin.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    let (c4, s4) = (
        cos.reshape((b, 1, tt, hd)).unwrap(),
        sin.reshape((b, 1, tt, hd)).unwrap(),
    );
    check_op(
        "rope",
        &[randn(&[b, tt, h, hd], 9)],
        |t| crate::ops::rope_transpose(&t[0], cv.clone(), sv.clone()).unwrap(),
        |t| Llama::rope(&t[0].transpose(1, 2).unwrap(), &c4, &s4).unwrap(),
        1e-5,
    );
}

#[test]
fn fused_masked_softmax_matches_softmax_with_mask() {
    // b = 2 rows, kvh = 2, rep = 2, t = 3: the second row's last position is padding (its query
    // sees no key: a uniform row) and its last key is masked for everyone.
    let (b, kvh, rep, t) = (2usize, 2usize, 2usize, 3usize);
    let valid = [[true, true, true], [true, true, false]];
    let mut mask = Vec::new();
    for vr in valid {
        for i in 0..t {
            for (j, &ok) in vr.iter().enumerate() {
                mask.push(if j <= i && ok && vr[i] { 0.0 } else { -1e30f32 });
            }
        }
    }
    let scale = 0.37f32;
    let mask_t = Tensor::from_vec(mask.clone(), (b, 1, 1, t, t), &Device::Cpu).unwrap();
    let mask = std::sync::Arc::new(mask);
    check_op(
        "masked_softmax",
        &[randn(&[b, kvh, rep * t, t], 10)],
        |x| crate::ops::masked_softmax(&x[0], mask.clone(), scale, b, t, t).unwrap(),
        |x| {
            let s = (x[0].clone() * scale as f64)
                .unwrap()
                .reshape((b, kvh, rep, t, t))
                .unwrap();
            let s = s.broadcast_add(&mask_t).unwrap();
            candle_nn::ops::softmax(&s, candle_core::D::Minus1)
                .unwrap()
                .reshape((b, kvh, rep * t, t))
                .unwrap()
        },
        1e-5,
    );
}

#[test]
fn fused_weighted_cross_entropy_matches_log_softmax_gather() {
    // Weight-0 rows (whose gradient must be exactly zero) and repeated labels included.
    let labels = vec![3u32, 0, 10, 3, 7];
    let weights = vec![1.0f32, 0.0, 2.5, 0.3, 0.0];
    let (lf, wf) = (labels.clone(), weights.clone());
    check_op(
        "weighted_ce",
        &[(randn(&[5, 11], 11) * 3.0).unwrap()],
        move |t| crate::ops::weighted_cross_entropy(&t[0], lf.clone(), wf.clone()).unwrap(),
        |t| {
            let logp = candle_nn::ops::log_softmax(&t[0], candle_core::D::Minus1).unwrap();
            let l = Tensor::from_vec(labels.clone(), (5, 1), &Device::Cpu).unwrap();
            let nll = logp
                .gather(&l, 1)
                .unwrap()
                .squeeze(1)
                .unwrap()
                .neg()
                .unwrap();
            let w = Tensor::from_vec(weights.clone(), 5, &Device::Cpu).unwrap();
            (nll * w).unwrap().sum_all().unwrap()
        },
        1e-5,
    );
    // Rows of weight 0 get an exactly-zero gradient.
    let z = candle_core::Var::from_tensor(&randn(&[5, 11], 12)).unwrap();
    let loss = crate::ops::weighted_cross_entropy(
        z.as_tensor(),
        vec![3, 0, 10, 3, 7],
        vec![1.0, 0.0, 2.5, 0.3, 0.0],
    )
    .unwrap();
    let g = loss
        .backward()
        .unwrap()
        .get(z.as_tensor())
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert!(g[1].iter().chain(&g[4]).all(|&v| v == 0.0));
    assert!(g[0].iter().any(|&v| v != 0.0));
}

/// A padded batch with a weight-0 example and a statement-in-loss example.
fn mixed_batch() -> Vec<TrainExample> {
    vec![
        ex(&[1, 5, 9, 2, 7, 3, 11, 40], 3, 1.0),
        ex(&[4, 8, 6], 1, 0.5),
        ex(&[13, 21, 34, 55, 8], 2, 0.0),
        ex(&[2, 3, 5, 7, 11, 13], 4, 2.0),
    ]
}

/// The whole differentiable pass: the fused path gives the reference path's loss and gradients.
#[test]
fn fused_model_gradients_match_the_composite_model() {
    for (tied, kv) in [(false, 2), (true, 1), (false, 4), (true, 2)] {
        let mut m = model(tied, kv, 21);
        let batch = mixed_batch();
        let mut results = Vec::new();
        for fused in [true, false] {
            m.fused = fused;
            let (loss, n) = train::weighted_nll_sum(&m, &batch, true).unwrap();
            let grads = loss.backward().unwrap();
            let gs: Vec<(String, Tensor)> = m
                .named_vars()
                .into_iter()
                .map(|(name, v)| (name.clone(), grads.get(v.as_tensor()).unwrap().clone()))
                .collect();
            results.push((loss.to_scalar::<f32>().unwrap(), n, gs));
        }
        let ((lf, nf, gf), (lr, nr, gr)) = (&results[0], &results[1]);
        assert_eq!(nf, nr);
        assert!(
            (lf - lr).abs() < 1e-4 * lr.abs().max(1.0),
            "tied={tied} kv={kv}: loss {lf} vs {lr}"
        );
        for ((name, a), (_, b)) in gf.iter().zip(gr) {
            let d = max_abs_diff(a, b);
            let scale = b
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(scale > 0.0, "{name}: zero reference gradient");
            assert!(
                d <= 1e-4 * scale.max(1e-3),
                "tied={tied} kv={kv} {name}: gradient differs by {d} (max {scale})"
            );
        }
    }
}

/// One optimizer step (fused ops, in-place AdamW with the 1/tokens and clipping factors folded
/// in) leaves the same parameters as the composite ops followed by the plain AdamW formula.
#[test]
fn fused_training_step_matches_the_reference_update() {
    for (tied, clip) in [(true, 1e-3), (false, 0.0), (false, 100.0)] {
        let cfg = PolicyConfig {
            micro_batch: 2,
            warmup_steps: 0,
            learning_rate: 1e-2,
            max_grad_norm: clip,
            weight_decay: 0.1,
            ..PolicyConfig::default()
        };
        let data = mixed_batch();
        // Fused path through the trainer.
        let fast = model(tied, 2, 23);
        let mut trainer = Trainer::new(cfg.clone());
        let stats = trainer.step(&fast, &data).unwrap();
        // Reference: composite ops, gradient of L formed explicitly, clipped, plain AdamW loop.
        let mut slow = model(tied, 2, 23);
        slow.fused = false;
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let mut tokens = 0usize;
        let mut loss = 0f64;
        for chunk in data.chunks(cfg.micro_batch) {
            let (sum, n) = train::weighted_nll_sum(&slow, chunk, true).unwrap();
            tokens += n;
            loss += sum.to_scalar::<f32>().unwrap() as f64;
            let g = sum.backward().unwrap();
            for (name, v) in slow.named_vars() {
                let gi = g.get(v.as_tensor()).unwrap().detach();
                let merged = match grads.remove(&name) {
                    Some(a) => (a + gi).unwrap(),
                    None => gi,
                };
                grads.insert(name, merged);
            }
        }
        let inv = 1.0 / tokens as f64;
        let mut sq = 0f64;
        for g in grads.values_mut() {
            *g = (&*g * inv).unwrap();
            sq += g
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap() as f64;
        }
        let norm = sq.sqrt();
        assert!(
            (stats.loss - loss * inv).abs() < 1e-5 * stats.loss.abs().max(1.0),
            "loss {} vs {}",
            stats.loss,
            loss * inv
        );
        assert!(
            (stats.grad_norm - norm).abs() < 1e-4 * norm,
            "norm {} vs {norm}",
            stats.grad_norm
        );
        let c = if clip > 0.0 && norm > clip {
            clip / norm
        } else {
            1.0
        };
        let (lr, wd, b1, b2, eps) = (
            cfg.learning_rate,
            cfg.weight_decay,
            cfg.beta1,
            cfg.beta2,
            cfg.eps,
        );
        let mut max_step = 0f32;
        for ((name, vf), (_, vs)) in fast.named_vars().into_iter().zip(slow.named_vars()) {
            let p: Vec<f32> = vs
                .as_detached_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let g: Vec<f32> = grads[&name].flatten_all().unwrap().to_vec1().unwrap();
            let got: Vec<f32> = vf
                .as_detached_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            // Adam's first step is g/(|g|+eps): where a gradient is at the level of the two
            // paths' rounding (different GEMM kernels sum in different orders), the reference
            // step itself is noise of up to lr, and only such elements get that slack (exact
            // zeros stay strict: weight decay alone must move them).
            let gmax = g.iter().fold(0f64, |a, &x| a.max((x as f64 * c).abs()));
            let rounding = 1e-5 * gmax;
            for i in 0..p.len() {
                let gi = g[i] as f64 * c;
                let (m, v) = ((1.0 - b1) * gi, (1.0 - b2) * gi * gi);
                let step = (m / (1.0 - b1)) / ((v / (1.0 - b2)).sqrt() + eps);
                let want = p[i] as f64 * (1.0 - lr * wd) - lr * step;
                max_step = max_step.max((got[i] - p[i]).abs());
                let slack = if gi != 0.0 && gi.abs() <= rounding {
                    lr
                } else {
                    0.0
                };
                assert!(
                    (got[i] as f64 - want).abs() < 1e-5 + slack,
                    "tied={tied} clip={clip} {name}[{i}]: {} vs {want} (g {gi})",
                    got[i]
                );
            }
        }
        assert!(max_step > 1e-3, "the step moved nothing");
    }
}

/// `m` with every matrix replaced by `f(weights, n, k)` (norms kept; the input embedding
/// too when `keep_embedding`).
fn with_matrices(
    m: &Llama,
    keep_embedding: bool,
    f: impl Fn(&[f32], usize, usize) -> Vec<f32>,
) -> Llama {
    let mut tensors = HashMap::new();
    for (name, var) in m.named_vars() {
        let t = var.as_detached_tensor();
        let t = match t.dims2() {
            Ok(_) if keep_embedding && name == "model.embed_tokens.weight" => t,
            Ok((n, k)) => Tensor::from_vec(
                f(&t.flatten_all().unwrap().to_vec1().unwrap(), n, k),
                (n, k),
                &Device::Cpu,
            )
            .unwrap(),
            Err(_) => t,
        };
        tensors.insert(name, t);
    }
    Llama::from_tensors(m.config().clone(), tensors, &Device::Cpu).unwrap()
}

/// The weights q8 decoding multiplies with, for an untied model (the embedding lookup stays f32).
fn dequantised(m: &Llama) -> Llama {
    assert!(!m.config().tie_word_embeddings);
    with_matrices(m, true, |w, n, k| {
        crate::quant::QuantMatrix::quantize(w, n, k)
            .unwrap()
            .dequantize()
    })
}

/// Prefill of a prompt, then three single-token steps: the logits of each step. The decoding
/// steps run on `decoder` (same shape; the cache carries over).
fn decode_logits_on(m: &Llama, decoder: &Llama, weights: crate::DecodeWeights) -> Vec<Tensor> {
    let mut cache = KvCache::new(m.config().num_hidden_layers);
    let mut out = vec![m
        .forward_cached_with(
            &Batch::left_padded(&[&[3, 1, 4, 1, 5], &[9, 2]]),
            &mut cache,
            weights,
        )
        .unwrap()];
    for id in [6u32, 7, 8] {
        let batch = Batch::right_padded(&[&[id][..], &[id + 1][..]]);
        out.push(
            decoder
                .forward_cached_with(&batch, &mut cache, weights)
                .unwrap(),
        );
    }
    out
}

fn decode_logits(m: &Llama, weights: crate::DecodeWeights) -> Vec<Tensor> {
    decode_logits_on(m, m, weights)
}

/// q8 decoding computes with the quantised weights and nothing else: its prefill equals the
/// f32 model's, its decoding steps equal f32 decoding by a model holding the dequantised
/// weights (untied: a tied head's copy cannot be told apart from the embedding there), and
/// stay near the f32 model itself.
#[test]
fn q8_decoding_uses_exactly_the_quantised_weights() {
    use crate::DecodeWeights::{F32, Q8};
    for (tied, kv) in [(false, 2), (true, 1)] {
        let m = model(tied, kv, 21);
        let q = m.quantized_weights().unwrap();
        assert_eq!(
            q.len(),
            1 + 7 * m.config().num_hidden_layers,
            "head and every projection"
        );
        let got = decode_logits(&m, Q8);
        if !tied {
            for (i, (g, want)) in got
                .iter()
                .zip(decode_logits_on(&m, &dequantised(&m), F32))
                .enumerate()
            {
                assert!(
                    max_abs_diff(g, &want) < 1e-5,
                    "step {i}: {}",
                    max_abs_diff(g, &want)
                );
            }
        }
        for (i, (g, exact)) in got.iter().zip(decode_logits(&m, F32)).enumerate() {
            let scale = exact
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let d = max_abs_diff(g, &exact);
            if i == 0 {
                assert_eq!(d, 0.0, "the prefill uses f32");
            } else {
                assert!(
                    d > 0.0 && d < 0.05 * scale,
                    "step {i}: q8 vs f32 {d} (logits up to {scale}, tied {tied})"
                );
            }
        }
    }
}

/// A model already on a 16-level grid per block (as imported from a Q4 GGUF) decodes in 4 bits
/// with the very same weights: q8 equals f32.
#[test]
fn q4_grid_models_decode_losslessly() {
    let m = with_matrices(&model(false, 2, 22), false, |w, _, _| {
        w.chunks(crate::quant::BLOCK)
            .flat_map(|b| {
                let lo = b.iter().copied().fold(f32::MAX, f32::min);
                let d = (b.iter().copied().fold(f32::MIN, f32::max) - lo) / 15.0;
                b.iter()
                    .map(move |x| ((x - lo) / d).round() * d + lo)
                    .collect::<Vec<_>>()
            })
            .collect()
    });
    let (four, eight, _) = m.quantized_weights().unwrap().summary();
    let matrices: usize = m
        .named_vars()
        .iter()
        .filter(|(n, _)| n.ends_with("proj.weight") || n == "lm_head.weight")
        .map(|(_, v)| v.elem_count())
        .sum();
    assert_eq!((four, eight), (matrices, 0));
    for (got, want) in decode_logits(&m, crate::DecodeWeights::Q8)
        .iter()
        .zip(decode_logits(&m, crate::DecodeWeights::F32))
    {
        assert!(
            max_abs_diff(got, &want) < 1e-5,
            "{}",
            max_abs_diff(got, &want)
        );
    }
}

/// A training step drops the quantised copies: q8 decoding afterwards uses the new weights.
#[test]
fn training_refreshes_the_quantised_weights() {
    let m = model(false, 2, 23);
    let before = decode_logits(&m, crate::DecodeWeights::Q8);
    let mut t = Trainer::new(train_cfg(2));
    t.step(&m, &[ex(&[1, 2, 3, 4, 5, 6], 2, 1.0)]).unwrap();
    let after = decode_logits(&m, crate::DecodeWeights::Q8);
    let reference = decode_logits_on(&m, &dequantised(&m), crate::DecodeWeights::F32);
    assert!(max_abs_diff(&after[3], &before[3]) > 1e-3);
    for (got, want) in after.iter().zip(&reference) {
        assert!(
            max_abs_diff(got, want) < 1e-5,
            "{}",
            max_abs_diff(got, want)
        );
    }
    // And seeded q8 sampling is reproducible.
    let p = SamplingParams {
        n: 3,
        max_new_tokens: 8,
        seed: 5,
        decode_weights: crate::DecodeWeights::Q8,
        ..SamplingParams::default()
    };
    assert_eq!(
        sample::sample(&m, &[1, 2, 3], &p).unwrap(),
        sample::sample(&m, &[1, 2, 3], &p).unwrap()
    );
}

/// A generation longer than the cache's first capacity (prompt + 256 columns): the cache grows
/// and keeps every column; rows selected and repeated after growing keep theirs.
#[test]
fn kv_cache_grows_past_its_first_capacity() {
    let m = model(false, 2, 24);
    let seq: Vec<u32> = (0..300u32).map(|i| (i * 7 + 3) % V as u32).collect();
    let full = m
        .logits(&Batch::right_padded(&[&seq]), false)
        .unwrap()
        .squeeze(0)
        .unwrap();
    let mut cache = KvCache::new(m.config().num_hidden_layers);
    m.forward_cached(&Batch::right_padded(&[&seq[..2]]), &mut cache)
        .unwrap();
    for pos in 2..seq.len() {
        let last = m
            .forward_cached(&Batch::right_padded(&[&seq[pos..pos + 1]]), &mut cache)
            .unwrap()
            .squeeze(0)
            .unwrap();
        if pos % 37 == 0 || pos == seq.len() - 1 {
            let d = max_abs_diff(&last, &full.get(pos).unwrap());
            assert!(d < 1e-4, "position {pos}: cache vs full differ by {d}");
        }
    }
    assert_eq!(cache.len(), seq.len());
    // Rows of the grown cache: repeat to 3 rows, keep rows 2 and 0, feed one more token each.
    let mut two = cache.repeat_rows(3).unwrap().select_rows(&[2, 0]).unwrap();
    let next = m
        .forward_cached(&Batch::right_padded(&[&[5u32][..], &[5u32][..]]), &mut two)
        .unwrap();
    let seq2: Vec<u32> = seq.iter().copied().chain([5]).collect();
    let want = m
        .logits(&Batch::right_padded(&[&seq2]), false)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .get(300)
        .unwrap();
    for r in 0..2 {
        assert!(max_abs_diff(&next.get(r).unwrap(), &want) < 1e-4);
    }
}

/// Inference on the CPU (fused RoPE, masked softmax, SwiGLU forward passes) gives the logits of
/// the composite ops: full sequences with padding, and a cached prefill plus decoding steps.
#[test]
fn fused_inference_matches_the_composite_ops() {
    for (tied, kv) in [(false, 2), (true, 1)] {
        let fast = model(tied, kv, 25);
        let mut slow = model(tied, kv, 25);
        slow.fused = false;
        let seqs: [&[u32]; 2] = [&[1, 5, 9, 2, 7, 3, 8], &[4, 8, 6]];
        let d = max_abs_diff(
            &fast.logits(&Batch::right_padded(&seqs), false).unwrap(),
            &slow.logits(&Batch::right_padded(&seqs), false).unwrap(),
        );
        assert!(d < 1e-5, "full sequence: {d}");
        for (a, b) in decode_logits(&fast, crate::DecodeWeights::F32)
            .iter()
            .zip(decode_logits(&slow, crate::DecodeWeights::F32))
        {
            assert!(
                max_abs_diff(a, &b) < 1e-5,
                "cached: {}",
                max_abs_diff(a, &b)
            );
        }
    }
}

#[test]
fn sum_squares_matches_f64_at_ragged_lengths() {
    for n in [0usize, 1, 31, 32, 33, 4095, 4096, 4097, 10_007] {
        let v: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0)
            .collect();
        let want: f64 = v.iter().map(|&x| (x as f64) * (x as f64)).sum();
        let t = Tensor::from_vec(v, n, &Device::Cpu).unwrap();
        let got = crate::ops::sum_squares(&t).unwrap();
        assert!(
            (got - want).abs() <= 1e-6 * want.max(1.0),
            "n = {n}: {got} vs {want}"
        );
    }
}

/// Products big enough to be split over the spin pool (and, outside `training`, over rayon).
#[test]
fn fused_products_and_norm_match_the_composite_ops_on_both_pools() {
    for in_training in [false, true] {
        let scope = |f: &dyn Fn()| {
            if in_training {
                crate::pool::training(f)
            } else {
                f()
            }
        };
        scope(&|| {
            // Attention as one node (its products split over the pool: 72 score rows are past the
            // 32-row split) against candle's matmul → masked softmax → matmul: 2 batch rows, the
            // second padded at its start, 2 kv heads of 3 query heads each, 24 positions.
            let (b, kvh, rep, t, hd) = (2usize, 2usize, 3usize, 24usize, 8usize);
            let mut mask = Vec::new();
            for r in 0..b {
                for i in 0..t {
                    for j in 0..t {
                        let pad = r == 1 && j < 5;
                        mask.push(if j <= i && !pad { 0.0 } else { -1e30 });
                    }
                }
            }
            let mask = std::sync::Arc::new(mask);
            let scale = 0.35f32;
            check_op(
                "attention",
                &[
                    randn(&[b, kvh, rep * t, hd], 22),
                    randn(&[b, kvh, t, hd], 23),
                    randn(&[b, kvh, t, hd], 24),
                ],
                |x| {
                    crate::ops::attention(&x[0], &x[1], &x[2], mask.clone(), scale, b, t, t)
                        .unwrap()
                },
                |x| {
                    let s = x[0].matmul(&x[1].t().unwrap()).unwrap();
                    let p = crate::ops::masked_softmax(&s, mask.clone(), scale, b, t, t).unwrap();
                    p.matmul(&x[2]).unwrap()
                },
                1e-5,
            );
            // 70 rows: several backward tasks (partial weight gradients summed); 40 wide: lanes
            // and a tail.
            let w = (randn(&[40], 21).abs().unwrap() + 0.5).unwrap();
            check_op(
                "rms_norm",
                &[randn(&[70, 40], 20), w],
                |t| crate::ops::rms_norm(&t[0], &t[1], 1e-5).unwrap(),
                |t| candle_nn::ops::rms_norm_slow(&t[0], &t[1], 1e-5).unwrap(),
                1e-5,
            );
            // 130·170·96 multiply-adds: past the 2^20 at which the training pass splits a product.
            check_op(
                "linear",
                &[randn(&[130, 96], 15), randn(&[170, 96], 16)],
                |t| crate::ops::linear(&t[0], &t[1]).unwrap(),
                |t| t[0].matmul(&t[1].t().unwrap()).unwrap(),
                1e-4,
            );
        });
        // The weight gradient through a slot (as in training): dx and dw, split the same way.
        scope(&|| {
            let (x, w) = (randn(&[130, 96], 17), randn(&[170, 96], 18));
            let xv = candle_core::Var::from_tensor(&x).unwrap();
            let slot = crate::ops::GradSlot::new(170 * 96);
            let y = crate::ops::linear_sink(xv.as_tensor(), &w, Some(slot.clone())).unwrap();
            let r = randn(y.dims(), 19);
            let grads = (&y * &r).unwrap().sum_all().unwrap().backward().unwrap();
            let dx = grads.get(xv.as_tensor()).unwrap();
            let dw =
                Tensor::from_vec(slot.take().unwrap().unwrap(), (170, 96), &Device::Cpu).unwrap();
            let (dx_want, dw_want) = (r.matmul(&w).unwrap(), r.t().unwrap().matmul(&x).unwrap());
            assert!(
                max_abs_diff(dx, &dx_want) < 1e-3,
                "dx (training: {in_training})"
            );
            assert!(
                max_abs_diff(&dw, &dw_want) < 1e-3,
                "dw (training: {in_training})"
            );
        });
    }
}

/// The training pass proper (fused ops, weight gradients in slots, the attention and MLP blocks
/// as single nodes) gives the composite model's gradients.
#[test]
fn training_pass_gradients_match_the_composite_model() {
    for (tied, kv) in [(false, 2), (true, 1)] {
        let mut m = model(tied, kv, 31);
        let batch = mixed_batch();
        m.fused = true;
        let fused = train::macro_gradients(&m, &batch, 2).unwrap();
        m.fused = false;
        let (loss, tokens) = train::weighted_nll_sum(&m, &batch, true).unwrap();
        let grads = loss.backward().unwrap();
        // The norm from the sums of squares the products kept (for a tied embedding, updated by
        // the lookups over the rows they wrote) equals the norm of the reference gradients.
        let sq: f64 = m
            .named_vars()
            .iter()
            .map(|(_, v)| {
                grads
                    .get(v.as_tensor())
                    .unwrap()
                    .sqr()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap() as f64
            })
            .sum();
        let want_norm = sq.sqrt() / tokens as f64;
        assert!(
            (fused.grad_norm - want_norm).abs() <= 1e-4 * want_norm,
            "tied={tied}: norm {} vs {want_norm}",
            fused.grad_norm
        );
        for (name, v) in m.named_vars() {
            let want = grads.get(v.as_tensor()).unwrap();
            let got = &fused.grad_sums[&name];
            let scale = want
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(scale > 0.0, "{name}: zero reference gradient");
            let d = max_abs_diff(got, want);
            assert!(
                d <= 1e-4 * scale.max(1e-3),
                "tied={tied} {name}: gradient differs by {d} (max {scale})"
            );
        }
    }
}

/// The head and the loss as one node, over vocabulary chunks (three here, the last one
/// partial), against the fused linear followed by the weighted cross-entropy: loss, the hidden
/// states' gradient, the weight's gradient added to a slot that already holds one, and the
/// slot's sum of squares; on both pools.
#[test]
fn fused_head_cross_entropy_matches_linear_then_loss_over_chunks() {
    let (n, d, v) = (9usize, 24usize, 2 * 2048 + 37);
    // Labels in every chunk, at chunk edges, repeated; weight-0 rows included.
    let labels = vec![0u32, 2047, 2048, 4095, 4096, (v - 1) as u32, 17, 2047, 3000];
    let weights = vec![1.0f32, 0.5, 0.0, 2.0, 1.0, 0.3, 0.0, 1.5, 1.0];
    for in_training in [false, true] {
        let run = || {
            let h = candle_core::Var::from_tensor(&randn(&[n, d], 51)).unwrap();
            let w = (randn(&[v, d], 52) * 0.5).unwrap();
            let wv = candle_core::Var::from_tensor(&w).unwrap();
            let earlier = randn(&[v, d], 53);
            let slot = crate::ops::GradSlot::new(v * d);
            *slot.buf.lock().unwrap() =
                Some(earlier.flatten_all().unwrap().to_vec1::<f32>().unwrap());
            let loss = crate::ops::head_cross_entropy(
                h.as_tensor(),
                &w,
                slot.clone(),
                labels.clone(),
                weights.clone(),
            )
            .unwrap();
            let g = loss.backward().unwrap();
            let squares = slot
                .take_squares()
                .unwrap()
                .expect("the head keeps its gradient's sum of squares");
            let dw = Tensor::from_vec(slot.take().unwrap().unwrap(), (v, d), &Device::Cpu).unwrap();
            let z = crate::ops::linear(h.as_tensor(), wv.as_tensor()).unwrap();
            let loss2 =
                crate::ops::weighted_cross_entropy(&z, labels.clone(), weights.clone()).unwrap();
            let g2 = loss2.backward().unwrap();
            let dw2 = (g2.get(wv.as_tensor()).unwrap() + &earlier).unwrap();
            let (l1, l2) = (
                loss.to_scalar::<f32>().unwrap(),
                loss2.to_scalar::<f32>().unwrap(),
            );
            assert!(
                (l1 - l2).abs() <= 1e-5 * l2.abs(),
                "loss {l1} vs {l2} (training: {in_training})"
            );
            for (what, a, b) in [
                (
                    "h",
                    g.get(h.as_tensor()).unwrap().clone(),
                    g2.get(h.as_tensor()).unwrap().clone(),
                ),
                ("w", dw.clone(), dw2.clone()),
            ] {
                let scale = b
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert!(scale > 0.0);
                assert!(
                    max_abs_diff(&a, &b) <= 1e-5 * scale,
                    "{what} (training: {in_training})"
                );
            }
            let want: f64 = dw2
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .map(|&x| (x as f64) * (x as f64))
                .sum();
            assert!(
                (squares - want).abs() <= 1e-5 * want,
                "squares {squares} vs {want}"
            );
            // A second backward finds no saved logits and says so.
            assert!(loss.backward().is_err());
        };
        if in_training {
            crate::pool::training(run)
        } else {
            run()
        }
    }
}

/// The MLP block against its six composite ops, weight gradients included, at a size that the
/// training pool splits.
#[test]
fn fused_mlp_block_matches_the_composite_ops_on_both_pools() {
    let (n, d, inter) = (70usize, 96usize, 200usize);
    for in_training in [false, true] {
        let run = || {
            let x = candle_core::Var::from_tensor(&randn(&[n, d], 41)).unwrap();
            let nw =
                candle_core::Var::from_tensor(&(randn(&[d], 42).abs().unwrap() + 0.5).unwrap())
                    .unwrap();
            let ws = [
                randn(&[inter, d], 43),
                randn(&[inter, d], 44),
                randn(&[d, inter], 45),
            ];
            let ws = ws.map(|w| (w * 0.2).unwrap());
            let wv: Vec<candle_core::Var> = ws
                .iter()
                .map(|w| candle_core::Var::from_tensor(w).unwrap())
                .collect();
            let slots = [0, 1, 2].map(|i| crate::ops::GradSlot::new(ws[i].elem_count()));
            let r = randn(&[n, d], 46);
            // Fused: weights through slots.
            let y = crate::ops::mlp_block(
                x.as_tensor(),
                nw.as_tensor(),
                ws.clone(),
                slots.clone(),
                1e-5,
            )
            .unwrap();
            let g = (&y * &r).unwrap().sum_all().unwrap().backward().unwrap();
            let fused_w: Vec<Tensor> = (0..3)
                .map(|i| {
                    Tensor::from_vec(
                        slots[i].take().unwrap().unwrap(),
                        ws[i].shape(),
                        &Device::Cpu,
                    )
                    .unwrap()
                })
                .collect();
            // Composite.
            let h = candle_nn::ops::rms_norm_slow(x.as_tensor(), nw.as_tensor(), 1e-5).unwrap();
            let gate = h.matmul(&wv[0].as_tensor().t().unwrap()).unwrap();
            let up = h.matmul(&wv[1].as_tensor().t().unwrap()).unwrap();
            let act = (gate.silu().unwrap() * up).unwrap();
            let y2 =
                (x.as_tensor() + act.matmul(&wv[2].as_tensor().t().unwrap()).unwrap()).unwrap();
            let g2 = (&y2 * &r).unwrap().sum_all().unwrap().backward().unwrap();
            assert!(
                max_abs_diff(&y, &y2) < 1e-4,
                "forward (training: {in_training})"
            );
            let pairs = [
                (
                    "x",
                    g.get(x.as_tensor()).unwrap().clone(),
                    g2.get(x.as_tensor()).unwrap().clone(),
                ),
                (
                    "norm",
                    g.get(nw.as_tensor()).unwrap().clone(),
                    g2.get(nw.as_tensor()).unwrap().clone(),
                ),
                (
                    "gate",
                    fused_w[0].clone(),
                    g2.get(wv[0].as_tensor()).unwrap().clone(),
                ),
                (
                    "up",
                    fused_w[1].clone(),
                    g2.get(wv[1].as_tensor()).unwrap().clone(),
                ),
                (
                    "down",
                    fused_w[2].clone(),
                    g2.get(wv[2].as_tensor()).unwrap().clone(),
                ),
            ];
            for (what, a, b) in pairs {
                let scale = b
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert!(scale > 0.0);
                assert!(
                    max_abs_diff(&a, &b) <= 1e-4 * scale,
                    "{what} (training: {in_training})"
                );
            }
        };
        if in_training {
            crate::pool::training(run)
        } else {
            run()
        }
    }
}

/// The attention block against the fused ops one by one (each checked against candle's own ops
/// above), weight gradients included, with padding and grouped heads, at a size the training
/// pool splits.
#[test]
fn fused_attention_block_matches_the_ops_one_by_one_on_both_pools() {
    let (b, t, h, kvh, hd) = (2usize, 48usize, 8usize, 2usize, 16usize);
    let (d, n, rep) = (h * hd, b * t, h / kvh);
    let angles: Vec<f32> = (0..b * t * hd)
        .map(|i| ((i * 37 % 101) as f32) * 0.07)
        .collect();
    let cos = std::sync::Arc::new(angles.iter().map(|a| a.cos()).collect::<Vec<f32>>());
    let sin = std::sync::Arc::new(angles.iter().map(|a| a.sin()).collect::<Vec<f32>>());
    let mut mask = Vec::new();
    for r in 0..b {
        for i in 0..t {
            for j in 0..t {
                mask.push(if j <= i && !(r == 0 && j < 3) {
                    0.0
                } else {
                    -1e30
                });
            }
        }
    }
    let mask = std::sync::Arc::new(mask);
    let (scale, eps) = (0.25f32, 1e-5f32);
    for in_training in [false, true] {
        let run = || {
            let x = candle_core::Var::from_tensor(&randn(&[n, d], 51)).unwrap();
            let nw =
                candle_core::Var::from_tensor(&(randn(&[d], 52).abs().unwrap() + 0.5).unwrap())
                    .unwrap();
            let ws = [
                randn(&[d, d], 53),
                randn(&[kvh * hd, d], 54),
                randn(&[kvh * hd, d], 55),
                randn(&[d, d], 56),
            ]
            .map(|w| (w * 0.1).unwrap());
            let wv: Vec<candle_core::Var> = ws
                .iter()
                .map(|w| candle_core::Var::from_tensor(w).unwrap())
                .collect();
            let slots = [0, 1, 2, 3].map(|i| crate::ops::GradSlot::new(ws[i].elem_count()));
            let r = randn(&[n, d], 57);
            let parts = crate::ops::AttentionBlockParts {
                w: ws.clone(),
                sinks: slots.clone(),
                cos: cos.clone(),
                sin: sin.clone(),
                mask: mask.clone(),
                dims: [b, t, h, kvh, hd],
                scale,
                eps,
            };
            let y = crate::ops::attention_block(x.as_tensor(), nw.as_tensor(), parts).unwrap();
            let g = (&y * &r).unwrap().sum_all().unwrap().backward().unwrap();
            let fused_w: Vec<Tensor> = (0..4)
                .map(|i| {
                    Tensor::from_vec(
                        slots[i].take().unwrap().unwrap(),
                        ws[i].shape(),
                        &Device::Cpu,
                    )
                    .unwrap()
                })
                .collect();
            // One by one.
            let lin = |a: &Tensor, i: usize| crate::ops::linear(a, wv[i].as_tensor()).unwrap();
            let hn = crate::ops::rms_norm(x.as_tensor(), nw.as_tensor(), eps).unwrap();
            let q = crate::ops::rope_transpose(
                &lin(&hn, 0).reshape((b, t, h, hd)).unwrap(),
                cos.clone(),
                sin.clone(),
            )
            .unwrap();
            let k = crate::ops::rope_transpose(
                &lin(&hn, 1).reshape((b, t, kvh, hd)).unwrap(),
                cos.clone(),
                sin.clone(),
            )
            .unwrap();
            let v = lin(&hn, 2)
                .reshape((b, t, kvh, hd))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .contiguous()
                .unwrap();
            let q = q.reshape((b, kvh, rep * t, hd)).unwrap();
            let o = crate::ops::attention(&q, &k, &v, mask.clone(), scale, b, t, t).unwrap();
            let o = o
                .reshape((b, h, t, hd))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .reshape((n, d))
                .unwrap();
            let y2 = (x.as_tensor() + lin(&o, 3)).unwrap();
            let g2 = (&y2 * &r).unwrap().sum_all().unwrap().backward().unwrap();
            assert!(
                max_abs_diff(&y, &y2) < 1e-4,
                "forward (training: {in_training})"
            );
            let mut pairs = vec![
                (
                    "x",
                    g.get(x.as_tensor()).unwrap().clone(),
                    g2.get(x.as_tensor()).unwrap().clone(),
                ),
                (
                    "norm",
                    g.get(nw.as_tensor()).unwrap().clone(),
                    g2.get(nw.as_tensor()).unwrap().clone(),
                ),
            ];
            for (i, what) in ["q", "k", "v", "o"].into_iter().enumerate() {
                pairs.push((
                    what,
                    fused_w[i].clone(),
                    g2.get(wv[i].as_tensor()).unwrap().clone(),
                ));
            }
            for (what, a, b) in pairs {
                let scale = b
                    .abs()
                    .unwrap()
                    .max_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert!(scale > 0.0, "{what}: zero reference gradient");
                let diff = max_abs_diff(&a, &b);
                assert!(
                    diff <= 1e-4 * scale,
                    "{what} (training: {in_training}): differs by {diff} (max {scale})"
                );
            }
        };
        if in_training {
            crate::pool::training(run)
        } else {
            run()
        }
    }
}

mod arch;

//! The model's passes on Qwen2 and Qwen3 layers (attention biases, q/k norms, heads wider than
//! hidden size / heads): gradients, the fused training pass, the KV cache, row decoding, q8
//! decoding, training steps, save and load. Agreement with `transformers` itself is
//! `tests/transformers_qwen.rs`.

use super::*;
use crate::config::Architecture;
use crate::DecodeWeights;

/// Qwen2 (tied head), Qwen3 with heads of 12 (4 × 12 = 48 ≠ hidden 32; untied head) and
/// Qwen3 with `attention_bias` (q, k, v and o biases; one key/value head).
fn qwen_configs() -> Vec<(&'static str, LlamaConfig)> {
    let qwen2 = tiny(true, 2).with_architecture(Architecture::Qwen2);
    let mut qwen3 = tiny(false, 2).with_architecture(Architecture::Qwen3);
    qwen3.extra.insert("head_dim".into(), 12.into());
    let qwen3_bias = LlamaConfig {
        attention_bias: true,
        ..tiny(true, 1).with_architecture(Architecture::Qwen3)
    };
    vec![
        ("qwen2", qwen2),
        ("qwen3", qwen3),
        ("qwen3_bias", qwen3_bias),
    ]
}

/// A random model of `cfg` whose norm weights are away from 1 (random ones are all 1, which
/// would hide a norm weight applied wrongly).
fn qwen_model(cfg: &LlamaConfig, seed: u64) -> Llama {
    let m = Llama::random(cfg, seed, &Device::Cpu).unwrap();
    let mut tensors = HashMap::new();
    for (i, (name, var)) in m.named_vars().into_iter().enumerate() {
        let t = var.as_detached_tensor();
        let t = if name.ends_with("norm.weight") {
            let noise = randn(t.dims(), seed * 1000 + i as u64);
            (t + (noise * 0.15).unwrap()).unwrap()
        } else {
            t
        };
        tensors.insert(name, t);
    }
    Llama::from_tensors(cfg.clone(), tensors, &Device::Cpu).unwrap()
}

/// Qwen's parameters carry transformers' names and shapes, and a save → load is exact with the
/// architecture named in `config.json`.
#[test]
fn qwen_parameters_have_transformers_names_and_survive_save_and_load() {
    let has = |cfg: &LlamaConfig, name: &str| {
        Llama::param_shapes(cfg)
            .into_iter()
            .find(|(n, _)| n == &format!("model.layers.1.self_attn.{name}"))
            .map(|(_, s)| s)
    };
    let cfgs = qwen_configs();
    let (q2, q3, q3b) = (&cfgs[0].1, &cfgs[1].1, &cfgs[2].1);
    assert_eq!(has(q2, "q_proj.bias"), Some(vec![32]));
    assert_eq!(has(q2, "k_proj.bias"), Some(vec![16]));
    assert_eq!(
        (has(q2, "o_proj.bias"), has(q2, "q_norm.weight")),
        (None, None)
    );
    assert_eq!(has(q3, "q_proj.weight"), Some(vec![48, 32]));
    assert_eq!(has(q3, "o_proj.weight"), Some(vec![32, 48]));
    assert_eq!(has(q3, "k_norm.weight"), Some(vec![12]));
    assert_eq!(has(q3, "v_proj.bias"), None);
    assert_eq!(has(q3b, "o_proj.bias"), Some(vec![32]));
    for (name, cfg) in qwen_configs() {
        let m = qwen_model(&cfg, 4);
        assert_eq!(m.named_vars().len(), Llama::param_shapes(&cfg).len());
        let dir = tempfile::tempdir().unwrap();
        m.save(dir.path()).unwrap();
        let back = Llama::load(dir.path(), &Device::Cpu).unwrap();
        assert_eq!(back.config(), m.config(), "{name}");
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("config.json")).unwrap())
                .unwrap();
        let arch = cfg.architecture();
        assert_eq!(json["model_type"], arch.model_type());
        assert_eq!(json["architectures"][0], arch.class_name());
        let seq = [1u32, 2, 3, 9];
        let l1 = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
        let l2 = back.logits(&Batch::right_padded(&[&seq]), false).unwrap();
        assert_eq!(max_abs_diff(&l1, &l2), 0.0, "{name}");
    }
}

#[test]
fn every_qwen_parameter_gets_a_nonzero_gradient() {
    for (name, cfg) in qwen_configs() {
        let mut m = qwen_model(&cfg, 1);
        m.fused = false;
        let batch = [ex(&[1, 5, 9, 2, 7, 3], 2, 1.0), ex(&[4, 8, 6], 1, 0.5)];
        let (loss, _) = train::weighted_nll_sum(&m, &batch, true).unwrap();
        let grads = loss.backward().unwrap();
        for (pname, var) in m.named_vars() {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("{name}: no gradient for {pname}"));
            let s = g.abs().unwrap().sum_all().unwrap();
            let s = s.to_scalar::<f32>().unwrap();
            assert!(s > 0.0 && s.is_finite(), "{name} {pname}: {s}");
        }
    }
}

/// The largest absolute value of `t` (at least 1e-3).
fn scale_of(t: &Tensor) -> f32 {
    let m = t.abs().unwrap().max_all().unwrap();
    m.to_scalar::<f32>().unwrap().max(1e-3)
}

/// The fused training pass (the projections' gradients in slots, the Qwen parts' and the
/// norms' through autograd; and the fused ops without slots) gives the composite model's loss
/// and gradients.
#[test]
fn qwen_fused_training_gradients_match_the_composite_model() {
    for (name, cfg) in qwen_configs() {
        let mut m = qwen_model(&cfg, 31);
        let batch = mixed_batch();
        m.fused = false;
        let (loss, tokens) = train::weighted_nll_sum(&m, &batch, true).unwrap();
        let want = loss.backward().unwrap();
        m.fused = true;
        let (loss_f, _) = train::weighted_nll_sum(&m, &batch, true).unwrap();
        let (a, b) = (
            loss_f.to_scalar::<f32>().unwrap(),
            loss.to_scalar::<f32>().unwrap(),
        );
        assert!(
            (a - b).abs() < 1e-4 * b.abs().max(1.0),
            "{name}: loss {a} vs {b}"
        );
        let plain = loss_f.backward().unwrap();
        let slots = train::macro_gradients(&m, &batch, 2).unwrap();
        assert_eq!(slots.target_tokens, tokens);
        for (pname, v) in m.named_vars() {
            let w = want.get(v.as_tensor()).unwrap();
            let s = scale_of(w);
            let d1 = max_abs_diff(plain.get(v.as_tensor()).unwrap(), w);
            let d2 = max_abs_diff(&slots.grad_sums[&pname], w);
            assert!(
                d1 <= 1e-4 * s && d2 <= 1e-4 * s,
                "{name} {pname}: {d1}, {d2} (max {s})"
            );
        }
    }
}

/// A few optimizer steps move every Qwen parameter and lower the loss.
#[test]
fn qwen_training_steps_lower_the_loss() {
    for (name, cfg) in qwen_configs() {
        let m = qwen_model(&cfg, 9);
        let data = [
            ex(&[1, 2, 3, 4, 5, 6], 2, 1.0),
            ex(&[7, 8, 9, 10, 11], 1, 1.0),
        ];
        let before: Vec<Tensor> = m
            .named_vars()
            .iter()
            .map(|(_, v)| v.as_detached_tensor().copy().unwrap())
            .collect();
        let loss0 = train::eval_loss(&m, &data, 2).unwrap();
        let mut t = Trainer::new(train_cfg(2));
        for _ in 0..8 {
            t.step(&m, &data).unwrap();
        }
        let loss1 = train::eval_loss(&m, &data, 2).unwrap();
        assert!(loss1 < 0.8 * loss0, "{name}: loss {loss0} → {loss1}");
        for ((pname, v), b) in m.named_vars().into_iter().zip(&before) {
            if pname != "model.embed_tokens.weight" {
                let moved = max_abs_diff(&v.as_detached_tensor(), b);
                assert!(moved > 0.0, "{name}: {pname} did not move");
            }
        }
    }
}

/// Inference paths agree: the KV cache in chunks, row decoding, the fused inference ops and q8
/// decoding (which multiplies with exactly the quantised weights, biases and norms in f32).
#[test]
fn qwen_cache_rows_fused_and_q8_decoding_match() {
    for (name, cfg) in qwen_configs() {
        let m = qwen_model(&cfg, 2);
        let seq: Vec<u32> = vec![3, 14, 15, 9, 26, 5, 35, 8];
        let full = m.logits(&Batch::right_padded(&[&seq]), false).unwrap();
        let full = full.squeeze(0).unwrap();
        let mut cache = KvCache::new(m.config().num_hidden_layers);
        let mut pos = 0;
        for chunk in [4usize, 3, 1] {
            let part = Batch::right_padded(&[&seq[pos..pos + chunk]]);
            let last = m.forward_cached(&part, &mut cache).unwrap();
            pos += chunk;
            let d = max_abs_diff(&last.squeeze(0).unwrap(), &full.get(pos - 1).unwrap());
            assert!(d < 1e-4, "{name}: cache at {pos}: {d}");
        }
        let prompts: [&[u32]; 2] = [&seq[..5], &seq[..2]];
        let mut rows: Vec<_> = prompts
            .iter()
            .map(|p| m.prefill_row(p, DecodeWeights::F32).unwrap().0)
            .collect();
        let mut refs: Vec<&mut _> = rows.iter_mut().collect();
        let got = m
            .decode_rows(&mut refs, &[7, 11], DecodeWeights::F32)
            .unwrap();
        let want = m
            .next_token_logits(&[&[&seq[..5], &[7]].concat(), &[&seq[..2], &[11]].concat()])
            .unwrap();
        assert!(max_abs_diff(&got, &want) < 1e-4, "{name}: rows");
        let mut slow = qwen_model(&cfg, 2);
        slow.fused = false;
        let (a, b) = (
            decode_logits(&m, DecodeWeights::F32),
            decode_logits(&slow, DecodeWeights::F32),
        );
        for (x, y) in a.iter().zip(&b) {
            assert!(max_abs_diff(x, y) < 1e-5, "{name}: fused inference");
        }
        if !cfg.tie_word_embeddings {
            let q8 = decode_logits(&m, DecodeWeights::Q8);
            // Rows of 48 do not split into blocks: that matrix stays f32 (as in q8 decoding).
            let dequantised = with_matrices(&m, true, |w, n, k| {
                crate::quant::QuantMatrix::quantize(w, n, k)
                    .map_or_else(|| w.to_vec(), |q| q.dequantize())
            });
            let exact = decode_logits_on(&m, &dequantised, DecodeWeights::F32);
            for (x, y) in q8.iter().zip(&exact) {
                assert!(max_abs_diff(x, y) < 1e-5, "{name}: q8");
            }
        }
    }
}

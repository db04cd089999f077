//! Decoding rows of different sequences together: each row has its own key/value cache
//! ([`RowKv`], any length) and its own RoPE position, and one step feeds one new token per
//! row. The projections, norms and the head run on all rows at once (where batching pays: they
//! read every weight once per step, whatever the number of rows); attention runs per row over
//! that row's own cache, so rows of different lengths need no padding and no mask, and a row
//! can leave or join between steps.
//!
//! Row independence: every kernel used here computes a row's output from that row's input
//! alone, in the same order of summation whatever the other rows are (the projection kernels
//! of [`crate::decode`] and [`crate::quant`] handle each row of `x` separately; norms (Qwen3's
//! per-head q/k norms too), biases, activations and attention are per row). A row's logits are thus bit for bit the same
//! whether it is decoded alone or with others. The one exception is a CPU without AVX-512,
//! where f32 projections fall back to the general matmul, whose blocking depends on the
//! number of rows.

use candle_core::Tensor;
use rayon::prelude::*;

use super::{Batch, KvCache, Llama, PartOps};
use crate::quant::QuantizedWeights;
use crate::{DecodeWeights, PolicyError, Result};

/// One sequence's keys and values: per layer `[len, kv_heads · head_dim]`, row-major.
#[derive(Clone, Debug)]
pub struct RowKv {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
    len: usize,
    /// RoPE position of the next token.
    next_position: u32,
}

impl RowKv {
    /// Cached tokens.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of keys and values held.
    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(|x| x.len() * 4).sum()
    }

    /// A copy with room for `extra` more tokens (no reallocation while decoding them).
    pub fn with_room(&self, extra: usize) -> RowKv {
        let grow = |x: &Vec<f32>| {
            let per = x.len().checked_div(self.len).unwrap_or(0);
            let mut y = Vec::with_capacity(x.len() + per * extra);
            y.extend_from_slice(x);
            y
        };
        RowKv {
            k: self.k.iter().map(grow).collect(),
            v: self.v.iter().map(grow).collect(),
            len: self.len,
            next_position: self.next_position,
        }
    }
}

impl Llama {
    /// Prefills one prompt (one forward over all its tokens, as [`Llama::forward_cached_with`]
    /// does it) and returns its cache as a [`RowKv`] with the logits after its last token.
    pub fn prefill_row(&self, prompt: &[u32], weights: DecodeWeights) -> Result<(RowKv, Vec<f32>)> {
        if prompt.is_empty() {
            return Err(PolicyError::BadInput(
                "cannot prefill an empty prompt".into(),
            ));
        }
        let mut cache = KvCache::new(self.cfg.num_hidden_layers);
        let logits =
            self.forward_cached_with(&Batch::right_padded(&[prompt]), &mut cache, weights)?;
        let logits = logits.squeeze(0)?.to_vec1::<f32>()?;
        let flat = |x: &Tensor, len: usize| -> Result<Vec<f32>> {
            // [1, kvh, cap, hd] → [len, kvh, hd]
            Ok(x.narrow(2, 0, len)?
                .squeeze(0)?
                .transpose(0, 1)?
                .contiguous()?
                .flatten_all()?
                .to_vec1::<f32>()?)
        };
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for l in &cache.layers {
            let l = l
                .as_ref()
                .ok_or_else(|| PolicyError::BadInput("prefill left a layer uncached".into()))?;
            k.push(flat(&l.k, l.len)?);
            v.push(flat(&l.v, l.len)?);
        }
        Ok((
            RowKv {
                k,
                v,
                len: prompt.len(),
                next_position: cache.next_position[0],
            },
            logits,
        ))
    }

    /// One decoding step for rows of different sequences: `ids[r]` continues `rows[r]` (which
    /// grows by one token); returns the logits `[rows, vocab]`. `DecodeWeights::Q8` reads the
    /// quantised copies of the weights.
    pub fn decode_rows(
        &self,
        rows: &mut [&mut RowKv],
        ids: &[u32],
        weights: DecodeWeights,
    ) -> Result<Tensor> {
        let m = rows.len();
        if m == 0 || ids.len() != m {
            return Err(PolicyError::BadInput(format!(
                "{} rows but {} tokens",
                m,
                ids.len()
            )));
        }
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.cfg.vocab_size) {
            return Err(PolicyError::BadInput(format!(
                "token id {bad} is outside the vocabulary ({} tokens)",
                self.cfg.vocab_size
            )));
        }
        let layers = self.cfg.num_hidden_layers;
        if let Some(r) = rows.iter().find(|r| r.k.len() != layers) {
            return Err(PolicyError::BadInput(format!(
                "a row cache has {} layers, the model {layers}",
                r.k.len()
            )));
        }
        let quant = match weights {
            DecodeWeights::Q8 => Some(self.quantized_weights()?),
            DecodeWeights::F32 => None,
        };
        let positions: Vec<u32> = rows.iter().map(|r| r.next_position).collect();
        let (cos, sin) = self.rope_tables(&positions);
        let step = RowStep {
            quant: quant.as_deref(),
            cos: &cos,
            sin: &sin,
            eps: self.cfg.rms_norm_eps as f32,
        };
        let idt = Tensor::from_vec(ids.to_vec(), m, &self.device)?;
        let mut x = self
            .embed_tokens
            .as_detached_tensor()
            .index_select(&idt, 0)?; // [m, d]
        for li in 0..self.layers.len() {
            x = self.decode_layer(li, x, rows, &step)?;
        }
        for row in rows.iter_mut() {
            row.len += 1;
            row.next_position += 1;
        }
        let x =
            candle_nn::ops::rms_norm(&x.contiguous()?, &self.norm.as_detached_tensor(), step.eps)?;
        row_linear(
            &x,
            self.lm_head.as_ref().unwrap_or(&self.embed_tokens),
            step.quant,
        )
    }

    /// Decoder layer `li` of a [`Llama::decode_rows`] step on the residual stream `x` `[m, d]`:
    /// each row's new key and value are appended to its cache, then its queries attend to it.
    fn decode_layer(
        &self,
        li: usize,
        mut x: Tensor,
        rows: &mut [&mut RowKv],
        step: &RowStep<'_>,
    ) -> Result<Tensor> {
        let (l, quant, eps) = (&self.layers[li], step.quant, step.eps);
        let (h, kvh, hd, aw) = self.heads();
        let (m, rep, kvd) = (rows.len(), h / kvh, kvh * hd);
        let scale = (1.0 / (hd as f64).sqrt()) as f32;
        let ops = PartOps::Composite { grad: false };
        let hn = candle_nn::ops::rms_norm(
            &x.contiguous()?,
            &l.input_layernorm.as_detached_tensor(),
            eps,
        )?;
        let flat = |t: Tensor| -> Result<Vec<f32>> { Ok(t.flatten_all()?.to_vec1::<f32>()?) };
        let mut q = flat(
            l.extras
                .q(row_linear(&hn, &l.q_proj, quant)?, hd, eps, ops)?,
        )?;
        let mut k = flat(
            l.extras
                .k(row_linear(&hn, &l.k_proj, quant)?, hd, eps, ops)?,
        )?;
        let v = flat(l.extras.v(row_linear(&hn, &l.v_proj, quant)?, ops)?)?;
        rope_rows(&mut q, h, hd, step.cos, step.sin);
        rope_rows(&mut k, kvh, hd, step.cos, step.sin);
        for (r, row) in rows.iter_mut().enumerate() {
            row.k[li].extend_from_slice(&k[r * kvd..(r + 1) * kvd]);
            row.v[li].extend_from_slice(&v[r * kvd..(r + 1) * kvd]);
        }
        // Attention, per (row, key/value head): its `rep` query heads over the row's keys.
        let shared: Vec<&RowKv> = rows.iter().map(|r| &**r).collect();
        let mut o = vec![0f32; m * aw];
        o.par_chunks_mut(rep * hd)
            .enumerate()
            .for_each(|(task, out)| {
                let (r, g) = (task / kvh, task % kvh);
                let row = shared[r];
                let qg = &q[(r * h + g * rep) * hd..(r * h + (g + 1) * rep) * hd];
                let dims = Dims {
                    kvd,
                    off: g * hd,
                    hd,
                    scale,
                };
                attend(qg, &row.k[li], &row.v[li], dims, out);
            });
        let o = Tensor::from_vec(o, (m, aw), &self.device)?;
        x = (x + l.extras.o(row_linear(&o, &l.o_proj, quant)?, ops)?)?;
        let hn = candle_nn::ops::rms_norm(
            &x.contiguous()?,
            &l.post_attention_layernorm.as_detached_tensor(),
            eps,
        )?;
        let gate = row_linear(&hn, &l.gate_proj, quant)?;
        let up = row_linear(&hn, &l.up_proj, quant)?;
        Ok((x + row_linear(&crate::ops::swiglu(&gate, &up)?, &l.down_proj, quant)?)?)
    }
}

/// What every layer of one [`Llama::decode_rows`] step reads: the quantised weights (q8), the
/// rows' RoPE tables `[rows, hd]` and the norms' epsilon.
struct RowStep<'a> {
    quant: Option<&'a QuantizedWeights>,
    cos: &'a [f32],
    sin: &'a [f32],
    eps: f32,
}

/// `x · wᵀ` computed row by row (see the module documentation): the quantised copy when there
/// is one, else the small-rows kernel; the general matmul only without AVX-512.
fn row_linear(
    x: &Tensor,
    w: &candle_core::Var,
    quant: Option<&QuantizedWeights>,
) -> Result<Tensor> {
    if let Some(q) = quant.and_then(|q| q.get(w.as_tensor())) {
        return Ok(q.matmul_t(x)?);
    }
    let w = w.as_detached_tensor();
    if crate::decode::available() {
        return Ok(crate::decode::linear_small(x, &w)?);
    }
    Ok(x.matmul(&w.t()?)?)
}

/// RoPE in place on `x` = `[rows, heads, hd]` with per-row tables `[rows, hd]` (Hugging Face's
/// non-interleaved layout, as `Llama::rope`).
fn rope_rows(x: &mut [f32], heads: usize, hd: usize, cos: &[f32], sin: &[f32]) {
    let half = hd / 2;
    for (r, row) in x.chunks_exact_mut(heads * hd).enumerate() {
        let (c, s) = (&cos[r * hd..(r + 1) * hd], &sin[r * hd..(r + 1) * hd]);
        for head in row.chunks_exact_mut(hd) {
            for i in 0..half {
                let (a, b) = (head[i], head[i + half]);
                head[i] = a * c[i] - b * s[i];
                head[i + half] = b * c[i + half] + a * s[i + half];
            }
        }
    }
}

/// Where one key/value head's vectors lie in a row's cache, and the score scale.
#[derive(Clone, Copy)]
struct Dims {
    /// Floats per cached token (all key/value heads).
    kvd: usize,
    /// This head's offset within a token.
    off: usize,
    hd: usize,
    scale: f32,
}

/// Attention of the query heads `q` (`[rep, hd]`, all sharing one key/value head) over every
/// cached token of one row; `out` is `[rep, hd]`.
fn attend(q: &[f32], keys: &[f32], vals: &[f32], d: Dims, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::decode::available() {
            // SAFETY: the CPU has AVX-512F; the body is safe code.
            unsafe { attend_avx512(q, keys, vals, d, out) };
            return;
        }
    }
    attend_body(q, keys, vals, d, out)
}

/// [`attend`] compiled for AVX-512 (the same code, vectorised 16 lanes wide).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn attend_avx512(q: &[f32], keys: &[f32], vals: &[f32], d: Dims, out: &mut [f32]) {
    attend_body(q, keys, vals, d, out)
}

#[inline(always)]
fn attend_body(q: &[f32], keys: &[f32], vals: &[f32], d: Dims, out: &mut [f32]) {
    let len = keys.len() / d.kvd;
    let mut p = vec![0f32; len];
    for (qh, oh) in q.chunks_exact(d.hd).zip(out.chunks_exact_mut(d.hd)) {
        let mut max = f32::NEG_INFINITY;
        for (t, pt) in p.iter_mut().enumerate() {
            let kt = &keys[t * d.kvd + d.off..t * d.kvd + d.off + d.hd];
            *pt = dot(qh, kt) * d.scale;
            max = max.max(*pt);
        }
        let total = crate::vexp::exp_in_place(&mut p, max, 1.0);
        oh.fill(0.0);
        for (t, pt) in p.iter().enumerate() {
            let vt = &vals[t * d.kvd + d.off..t * d.kvd + d.off + d.hd];
            for (a, b) in oh.iter_mut().zip(vt) {
                *a += pt * b;
            }
        }
        let inv = 1.0 / total;
        oh.iter_mut().for_each(|a| *a *= inv);
    }
}

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Sixteen partial sums in a fixed order (one AVX-512 register when vectorised).
    let mut acc = [0f32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s = acc.iter().sum::<f32>();
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

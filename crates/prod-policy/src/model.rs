//! A Llama-family decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU, tied or untied head)
//! built only from candle ops that record a backward pass, so it can be trained. The same type
//! runs Qwen2 and Qwen3, whose layers add attention biases and per-head q/k norms
//! ([`extras`]) to Llama's.
//!
//! Parameter names and shapes are Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, …),
//! so a model directory written here loads in `transformers` and vice versa.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use rand::{Rng, SeedableRng};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::LlamaConfig;
use crate::ops::GradSlot;
use crate::quant::{DecodeWeights, QuantizedWeights};
use crate::{PolicyError, Result};

mod extras;
mod rows;
use extras::{AttnExtras, PartOps};
pub use rows::RowKv;

/// Additive attention mask for forbidden keys. Finite so that a query with no visible key
/// (a padding position) gets a uniform row instead of NaN.
const MASKED: f32 = -1e30;

/// What every layer of a pass reads: the key columns (cached and new), the additive attention
/// mask `[b, t, total]` and the RoPE tables `[b, t, head_dim]`.
struct PassInputs {
    total: usize,
    mask: Vec<f32>,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

/// How [`Llama::hidden_layers`] applies RoPE, the masked softmax and SwiGLU: the fused ops'
/// forward passes (CPU inference), or candle's composite ops (gradients, other devices) with
/// the mask and the tables as tensors.
enum Attend {
    Fused {
        mask: Arc<Vec<f32>>,
        cos: Arc<Vec<f32>>,
        sin: Arc<Vec<f32>>,
        total: usize,
    },
    Composite {
        mask: Tensor,
        cos: Tensor,
        sin: Tensor,
        total: usize,
    },
}

impl Attend {
    fn new(
        inputs: PassInputs,
        fused: bool,
        (b, t, hd): (usize, usize, usize),
        device: &Device,
    ) -> Result<Attend> {
        let total = inputs.total;
        Ok(if fused {
            Attend::Fused {
                mask: Arc::new(inputs.mask),
                cos: Arc::new(inputs.cos),
                sin: Arc::new(inputs.sin),
                total,
            }
        } else {
            Attend::Composite {
                mask: Tensor::from_slice(&inputs.mask[..], (b, 1, 1, t, total), device)?,
                cos: Tensor::from_slice(&inputs.cos[..], (b, 1, t, hd), device)?,
                sin: Tensor::from_slice(&inputs.sin[..], (b, 1, t, hd), device)?,
                total,
            }
        })
    }

    /// `x` `[b, t, heads, hd]` rotated, as `[b, heads, t, hd]`.
    fn rope(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Attend::Fused { cos, sin, .. } => {
                crate::ops::rope_transpose(x, cos.clone(), sin.clone())?
            }
            Attend::Composite { cos, sin, .. } => Llama::rope(&x.transpose(1, 2)?, cos, sin)?,
        })
    }

    /// The attention probabilities `[b, kvh, rep*t, total]` of the stacked queries `q` against
    /// the keys `k`.
    fn probs(
        &self,
        q: &Tensor,
        k: &Tensor,
        scale: f64,
        grad: bool,
        (b, kvh, rep, t): (usize, usize, usize, usize),
    ) -> Result<Tensor> {
        Ok(match self {
            Attend::Fused { mask, total, .. } => crate::ops::masked_softmax(
                &q.matmul(&k.t()?)?,
                mask.clone(),
                scale as f32,
                b,
                t,
                *total,
            )?,
            Attend::Composite { mask, total, .. } => {
                let scores = (q.matmul(&k.t()?)? * scale)?; // [b, kvh, rep*t, total]
                let scores = scores
                    .reshape((b, kvh, rep, t, *total))?
                    .broadcast_add(mask)?;
                Llama::softmax(grad, &scores)?.reshape((b, kvh, rep * t, *total))?
            }
        })
    }

    fn swiglu(&self, gate: &Tensor, up: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Attend::Fused { .. } => crate::ops::swiglu(gate, up)?,
            Attend::Composite { .. } => (gate.silu()? * up)?,
        })
    }
}

/// One pass of [`Llama::hidden_layers`]: its attention, whether gradients are wanted, the
/// quantised weights of a decoding step, and `(b, t)`.
struct LayerPass<'a> {
    attend: Attend,
    grad: bool,
    quant: Option<&'a QuantizedWeights>,
    dims: (usize, usize),
}

/// One pass of [`Llama::hidden_fused`]: the mask and RoPE tables shared by the fused ops,
/// `(b, t)`, the norm's epsilon and the attention scale.
struct FusedPass {
    mask: Arc<Vec<f32>>,
    cos: Arc<Vec<f32>>,
    sin: Arc<Vec<f32>>,
    dims: (usize, usize),
    eps: f32,
    scale: f32,
}

struct Layer {
    input_layernorm: Var,
    q_proj: Var,
    k_proj: Var,
    v_proj: Var,
    o_proj: Var,
    post_attention_layernorm: Var,
    gate_proj: Var,
    up_proj: Var,
    down_proj: Var,
    /// Qwen's attention biases and q/k norms (none in a Llama layer).
    extras: AttnExtras,
}

/// The model. All parameters are `Var`s (f32) so that any forward pass can be differentiated;
/// inference passes use detached views of the same storage (no graph is recorded).
pub struct Llama {
    cfg: LlamaConfig,
    device: Device,
    embed_tokens: Var,
    layers: Vec<Layer>,
    norm: Var,
    /// `None` when the head is tied to `embed_tokens`.
    lm_head: Option<Var>,
    /// Differentiable passes on the CPU use the fused ops of [`crate::ops`] (one graph node each,
    /// hand-written backward); `false` selects the composite candle ops they replace, which the
    /// tests use as the reference.
    pub(crate) fused: bool,
    /// Block-quantised copies of the projections for [`DecodeWeights::Q8`] decoding, built on
    /// first use and dropped by [`Llama::weights_changed`] (the optimizer calls it).
    quantized: std::sync::Mutex<Option<Arc<QuantizedWeights>>>,
    /// Names the current weights: unique over the process, renewed by
    /// [`Llama::weights_changed`] (see [`Llama::weights_version`]).
    version: AtomicU64,
}

/// Source of [`Llama::weights_version`] values.
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

fn next_version() -> u64 {
    NEXT_VERSION.fetch_add(1, Ordering::Relaxed)
}

/// Gradient slots ([`crate::ops::GradSlot`]) for every matrix parameter of a model — the
/// embedding, the head and each layer's seven projections — so a training pass accumulates
/// their gradients in place instead of through candle's autograd.
pub(crate) struct GradSinks {
    pub embed: Arc<GradSlot>,
    /// `None` when the head is tied (it then shares `embed`).
    pub lm_head: Option<Arc<GradSlot>>,
    /// q, k, v, o, gate, up, down of each layer.
    pub layers: Vec<[Arc<GradSlot>; 7]>,
}

impl GradSinks {
    pub fn new(model: &Llama) -> GradSinks {
        let slot = |v: &Var| GradSlot::new(v.elem_count());
        GradSinks {
            embed: slot(&model.embed_tokens),
            lm_head: model.lm_head.as_ref().map(slot),
            layers: model
                .layers
                .iter()
                .map(|l| {
                    [
                        &l.q_proj,
                        &l.k_proj,
                        &l.v_proj,
                        &l.o_proj,
                        &l.gate_proj,
                        &l.up_proj,
                        &l.down_proj,
                    ]
                    .map(slot)
                })
                .collect(),
        }
    }

    /// The accumulated gradients by parameter name (parameters no op wrote are absent), each
    /// with its `Σ g²` where the last write computed it.
    pub fn take(&self, model: &Llama) -> Result<Vec<(String, Tensor, Option<f64>)>> {
        let mut out = Vec::new();
        let mut put = |name: String, slot: &Arc<GradSlot>, var: &Var| -> Result<()> {
            if let Some(g) = slot.take()? {
                out.push((
                    name,
                    Tensor::from_vec(g, var.shape(), var.device())?,
                    slot.take_squares()?,
                ));
            }
            Ok(())
        };
        put(
            "model.embed_tokens.weight".into(),
            &self.embed,
            &model.embed_tokens,
        )?;
        if let (Some(s), Some(v)) = (&self.lm_head, &model.lm_head) {
            put("lm_head.weight".into(), s, v)?;
        }
        for (i, (slots, l)) in self.layers.iter().zip(&model.layers).enumerate() {
            let p = format!("model.layers.{i}");
            let names = [
                "self_attn.q_proj",
                "self_attn.k_proj",
                "self_attn.v_proj",
                "self_attn.o_proj",
                "mlp.gate_proj",
                "mlp.up_proj",
                "mlp.down_proj",
            ];
            let vars = [
                &l.q_proj,
                &l.k_proj,
                &l.v_proj,
                &l.o_proj,
                &l.gate_proj,
                &l.up_proj,
                &l.down_proj,
            ];
            for ((n, s), v) in names.iter().zip(slots).zip(vars) {
                put(format!("{p}.{n}.weight"), s, v)?;
            }
        }
        Ok(out)
    }
}

/// A batch of token sequences padded to one length `t`.
#[derive(Clone, Debug)]
pub struct Batch {
    pub b: usize,
    pub t: usize,
    /// Row-major `[b, t]`.
    pub ids: Vec<u32>,
    /// `false` at padding positions: they are never attended to.
    pub valid: Vec<bool>,
    /// RoPE positions: the number of valid tokens before this one in its row (plus the cache
    /// offset when decoding), so left padding does not shift positions.
    pub positions: Vec<u32>,
}

impl Batch {
    /// Sequences padded on the right (training, scoring).
    pub fn right_padded(seqs: &[&[u32]]) -> Batch {
        Self::padded(seqs, false)
    }

    /// Sequences padded on the left (so that all rows end at the same column, as for decoding).
    pub fn left_padded(seqs: &[&[u32]]) -> Batch {
        Self::padded(seqs, true)
    }

    fn padded(seqs: &[&[u32]], left: bool) -> Batch {
        let b = seqs.len();
        let t = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(b * t);
        let mut valid = Vec::with_capacity(b * t);
        let mut positions = Vec::with_capacity(b * t);
        for s in seqs {
            let pad = t - s.len();
            let (lead, trail) = if left { (pad, 0) } else { (0, pad) };
            ids.resize(ids.len() + lead, 0);
            valid.resize(valid.len() + lead, false);
            positions.resize(positions.len() + lead, 0);
            ids.extend_from_slice(s);
            valid.resize(valid.len() + s.len(), true);
            positions.extend(0..s.len() as u32);
            ids.resize(ids.len() + trail, 0);
            valid.resize(valid.len() + trail, false);
            positions.resize(positions.len() + trail, s.len() as u32);
        }
        Batch {
            b,
            t,
            ids,
            valid,
            positions,
        }
    }
}

/// One layer's keys and values, `[b, kv_heads, capacity, head_dim]` each, of which the first
/// `len` columns are filled: a step writes its columns in place instead of concatenating the
/// whole cache anew (at a 1,000-token prompt that copy was most of a decoding step).
#[derive(Clone)]
struct LayerKv {
    k: Tensor,
    v: Tensor,
    len: usize,
}

impl LayerKv {
    /// Room for `needed` columns in all, keeping the filled ones; grows by half at least, so
    /// the copies over a long generation stay linear in its length.
    fn reserve(&mut self, needed: usize) -> Result<()> {
        let cap = self.k.dim(2)?;
        if needed <= cap {
            return Ok(());
        }
        let new_cap = needed.max(cap + cap / 2);
        let grow = |x: &Tensor| -> Result<Tensor> {
            let (b, h, _, d) = x.dims4()?;
            let bigger = Tensor::zeros((b, h, new_cap, d), x.dtype(), x.device())?;
            bigger.slice_set(&x.narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
            Ok(bigger)
        };
        self.k = grow(&self.k)?;
        self.v = grow(&self.v)?;
        Ok(())
    }

    /// Appends `k`, `v` (`[b, kv_heads, t, head_dim]`) and returns views of all filled columns.
    fn append(slot: &mut Option<LayerKv>, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let (k, v) = (k.contiguous()?, v.contiguous()?);
        let t = k.dim(2)?;
        let l = match slot {
            Some(l) => l,
            None => {
                // Room for the prompt and a typical generation before the first growth.
                let (b, h, _, d) = k.dims4()?;
                let cap = t + 256;
                slot.insert(LayerKv {
                    k: Tensor::zeros((b, h, cap, d), k.dtype(), k.device())?,
                    v: Tensor::zeros((b, h, cap, d), v.dtype(), v.device())?,
                    len: 0,
                })
            }
        };
        l.reserve(l.len + t)?;
        l.k.slice_set(&k, 2, l.len)?;
        l.v.slice_set(&v, 2, l.len)?;
        l.len += t;
        Ok((l.k.narrow(2, 0, l.len)?, l.v.narrow(2, 0, l.len)?))
    }

    /// The same cache for other rows of the batch (`f` maps a buffer to the new rows).
    fn map_rows(&self, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<LayerKv> {
        Ok(LayerKv {
            k: f(&self.k)?,
            v: f(&self.v)?,
            len: self.len,
        })
    }
}

/// Keys and values of every layer for the tokens seen so far, for incremental decoding.
pub struct KvCache {
    layers: Vec<Option<LayerKv>>,
    /// Per row: which cached keys are real tokens (not padding).
    key_valid: Vec<Vec<bool>>,
    /// Per row: the RoPE position of the next token.
    next_position: Vec<u32>,
}

impl KvCache {
    pub fn new(num_layers: usize) -> Self {
        KvCache {
            layers: vec![None; num_layers],
            key_valid: Vec::new(),
            next_position: Vec::new(),
        }
    }

    /// Number of cached columns (including padding).
    pub fn len(&self) -> usize {
        self.key_valid.first().map_or(0, |r| r.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn batch_size(&self) -> usize {
        self.key_valid.len()
    }

    /// `batch` continues the cached rows: each row's `positions` shifted past its cached tokens,
    /// the batch's key validity and next positions recorded (an empty cache takes the batch's
    /// rows). The number of cached columns before the batch.
    fn continue_with(&mut self, batch: &Batch, positions: &mut [u32]) -> Result<usize> {
        let (b, t) = (batch.b, batch.t);
        if self.is_empty() && self.batch_size() == 0 {
            self.key_valid = vec![Vec::new(); b];
            self.next_position = vec![0; b];
        }
        if self.batch_size() != b {
            return Err(PolicyError::BadInput(format!(
                "batch has {b} rows but the cache has {}",
                self.batch_size()
            )));
        }
        let past = self.len();
        for r in 0..b {
            let off = self.next_position[r];
            for j in 0..t {
                positions[r * t + j] += off;
            }
            self.key_valid[r].extend_from_slice(&batch.valid[r * t..(r + 1) * t]);
            let new_valid = batch.valid[r * t..(r + 1) * t]
                .iter()
                .filter(|&&v| v)
                .count();
            self.next_position[r] = off + new_valid as u32;
        }
        Ok(past)
    }

    /// Repeats a one-row cache `n` times: one prefill serves `n` samples of the same prompt.
    pub fn repeat_rows(&self, n: usize) -> Result<KvCache> {
        if self.batch_size() != 1 {
            return Err(PolicyError::BadInput(format!(
                "repeat_rows needs a one-row cache, this one has {} rows",
                self.batch_size()
            )));
        }
        let rep = |x: &Tensor| -> Result<Tensor> {
            let mut dims = x.dims().to_vec();
            dims[0] = n;
            Ok(x.broadcast_as(dims)?.contiguous()?)
        };
        let layers = self
            .layers
            .iter()
            .map(|l| l.as_ref().map(|l| l.map_rows(rep)).transpose())
            .collect::<Result<_>>()?;
        Ok(KvCache {
            layers,
            key_valid: vec![self.key_valid[0].clone(); n],
            next_position: vec![self.next_position[0]; n],
        })
    }

    /// Keeps only the given rows (e.g. drop finished samples).
    pub fn select_rows(&self, rows: &[usize]) -> Result<KvCache> {
        let idx = Tensor::from_vec(
            rows.iter().map(|&r| r as u32).collect::<Vec<_>>(),
            rows.len(),
            &Device::Cpu,
        )?;
        let pick =
            |x: &Tensor| -> Result<Tensor> { Ok(x.index_select(&idx.to_device(x.device())?, 0)?) };
        let layers = self
            .layers
            .iter()
            .map(|l| l.as_ref().map(|l| l.map_rows(pick)).transpose())
            .collect::<Result<_>>()?;
        Ok(KvCache {
            layers,
            key_valid: rows.iter().map(|&r| self.key_valid[r].clone()).collect(),
            next_position: rows.iter().map(|&r| self.next_position[r]).collect(),
        })
    }
}

fn normal_vec(rng: &mut rand::rngs::StdRng, n: usize, std: f64) -> Vec<f32> {
    // Box–Muller: `rand_distr` is not a dependency and this is exact enough for initialisation.
    (0..n)
        .map(|_| {
            let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
            let u2: f64 = rng.gen();
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos() * std) as f32
        })
        .collect()
}

impl Llama {
    /// A randomly initialised model (weights and biases ~ N(0, 0.02²), norms 1), reproducible
    /// under `seed`.
    pub fn random(cfg: &LlamaConfig, seed: u64, device: &Device) -> Result<Llama> {
        cfg.validate()?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut tensors = HashMap::new();
        for (name, shape) in Self::param_shapes(cfg) {
            let n: usize = shape.iter().product();
            let t = if name.ends_with("norm.weight") {
                Tensor::ones(shape, DType::F32, device)?
            } else {
                Tensor::from_vec(normal_vec(&mut rng, n, 0.02), shape, device)?
            };
            tensors.insert(name, t);
        }
        Self::from_tensors(cfg.clone(), tensors, device)
    }

    /// Every parameter's Hugging Face name and shape, in a fixed order.
    pub fn param_shapes(cfg: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
        let (d, f, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
        let (aw, kvd) = (cfg.attention_width(), cfg.kv_heads() * cfg.head_dim());
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, d])];
        for i in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{i}");
            out.push((format!("{p}.input_layernorm.weight"), vec![d]));
            out.push((format!("{p}.self_attn.q_proj.weight"), vec![aw, d]));
            out.push((format!("{p}.self_attn.k_proj.weight"), vec![kvd, d]));
            out.push((format!("{p}.self_attn.v_proj.weight"), vec![kvd, d]));
            out.push((format!("{p}.self_attn.o_proj.weight"), vec![d, aw]));
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![d]));
            out.push((format!("{p}.mlp.gate_proj.weight"), vec![f, d]));
            out.push((format!("{p}.mlp.up_proj.weight"), vec![f, d]));
            out.push((format!("{p}.mlp.down_proj.weight"), vec![d, f]));
            for (n, shape) in AttnExtras::shapes(cfg) {
                out.push((format!("{p}.{n}"), shape));
            }
        }
        out.push(("model.norm.weight".to_string(), vec![d]));
        if !cfg.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), vec![v, d]));
        }
        out
    }

    /// Builds a model from named tensors (converted to f32). Missing or misshapen parameters are
    /// errors naming the parameter; extra tensors (e.g. `lm_head.weight` of a tied model,
    /// rotary caches) are ignored.
    pub fn from_tensors(
        cfg: LlamaConfig,
        mut tensors: HashMap<String, Tensor>,
        device: &Device,
    ) -> Result<Llama> {
        cfg.validate()?;
        let mut take = |name: &str, shape: &[usize]| -> Result<Var> {
            let t = tensors
                .remove(name)
                .ok_or_else(|| PolicyError::Config(format!("missing parameter {name}")))?;
            if t.dims() != shape {
                return Err(PolicyError::Config(format!(
                    "parameter {name} has shape {:?}, config.json implies {shape:?}",
                    t.dims()
                )));
            }
            let t = t.to_dtype(DType::F32)?.to_device(device)?;
            Ok(Var::from_tensor(&t)?)
        };
        let shapes: HashMap<String, Vec<usize>> = Self::param_shapes(&cfg).into_iter().collect();
        let mut get = |name: String| -> Result<Var> {
            let shape = shapes.get(&name).cloned().unwrap_or_default();
            take(&name, &shape)
        };
        let embed_tokens = get("model.embed_tokens.weight".into())?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("model.layers.{i}");
            layers.push(Layer {
                input_layernorm: get(format!("{p}.input_layernorm.weight"))?,
                q_proj: get(format!("{p}.self_attn.q_proj.weight"))?,
                k_proj: get(format!("{p}.self_attn.k_proj.weight"))?,
                v_proj: get(format!("{p}.self_attn.v_proj.weight"))?,
                o_proj: get(format!("{p}.self_attn.o_proj.weight"))?,
                post_attention_layernorm: get(format!("{p}.post_attention_layernorm.weight"))?,
                gate_proj: get(format!("{p}.mlp.gate_proj.weight"))?,
                up_proj: get(format!("{p}.mlp.up_proj.weight"))?,
                down_proj: get(format!("{p}.mlp.down_proj.weight"))?,
                extras: AttnExtras::load(&cfg, |n| get(format!("{p}.{n}")))?,
            });
        }
        let norm = get("model.norm.weight".into())?;
        let lm_head = if cfg.tie_word_embeddings {
            None
        } else {
            Some(get("lm_head.weight".into())?)
        };
        Ok(Llama {
            cfg,
            device: device.clone(),
            embed_tokens,
            layers,
            norm,
            lm_head,
            fused: true,
            quantized: Default::default(),
            version: AtomicU64::new(next_version()),
        })
    }

    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// Records the end token in `config.json` (`eos_token_id`).
    pub fn set_eos_token_id(&mut self, id: u32) {
        self.cfg.eos_token_id = Some(id.into());
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Every parameter with its Hugging Face name, in the order of [`Llama::param_shapes`].
    pub fn named_vars(&self) -> Vec<(String, &Var)> {
        let mut out = vec![("model.embed_tokens.weight".to_string(), &self.embed_tokens)];
        for (i, l) in self.layers.iter().enumerate() {
            let p = format!("model.layers.{i}");
            out.push((format!("{p}.input_layernorm.weight"), &l.input_layernorm));
            out.push((format!("{p}.self_attn.q_proj.weight"), &l.q_proj));
            out.push((format!("{p}.self_attn.k_proj.weight"), &l.k_proj));
            out.push((format!("{p}.self_attn.v_proj.weight"), &l.v_proj));
            out.push((format!("{p}.self_attn.o_proj.weight"), &l.o_proj));
            out.push((
                format!("{p}.post_attention_layernorm.weight"),
                &l.post_attention_layernorm,
            ));
            out.push((format!("{p}.mlp.gate_proj.weight"), &l.gate_proj));
            out.push((format!("{p}.mlp.up_proj.weight"), &l.up_proj));
            out.push((format!("{p}.mlp.down_proj.weight"), &l.down_proj));
            for (n, v) in l.extras.named() {
                out.push((format!("{p}.{n}"), v));
            }
        }
        out.push(("model.norm.weight".to_string(), &self.norm));
        if let Some(h) = &self.lm_head {
            out.push(("lm_head.weight".to_string(), h));
        }
        out
    }

    pub fn num_params(&self) -> usize {
        self.named_vars().iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// Writes `config.json` and `model.safetensors` (f32) into `dir` (created if needed). The
    /// weights file carries `{"format": "pt"}`, which `transformers` requires of a PyTorch
    /// checkpoint (without it `from_pretrained` fails on a missing metadata map).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
        self.cfg.save(&dir.join("config.json"))?;
        let tensors: HashMap<String, Tensor> = self
            .named_vars()
            .into_iter()
            .map(|(n, v)| (n, v.as_detached_tensor()))
            .collect();
        let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
        let path = dir.join("model.safetensors");
        safetensors::serialize_to_file(&tensors, Some(metadata), &path)
            .map_err(|e| PolicyError::io(&path, std::io::Error::other(e.to_string())))?;
        // The serializer creates the file readable by its owner only; a model is shared data.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                .map_err(|e| PolicyError::io(&path, e))?;
        }
        Ok(())
    }

    /// Reads a Hugging Face model directory: `config.json` and either `model.safetensors` or the
    /// shards listed in `model.safetensors.index.json`. Weights of any float dtype become f32.
    pub fn load(dir: &Path, device: &Device) -> Result<Llama> {
        let cfg = LlamaConfig::load(&dir.join("config.json"))?;
        let single = dir.join("model.safetensors");
        let index = dir.join("model.safetensors.index.json");
        let files: Vec<std::path::PathBuf> = if single.exists() {
            vec![single]
        } else if index.exists() {
            let text = std::fs::read_to_string(&index).map_err(|e| PolicyError::io(&index, e))?;
            let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                PolicyError::Config(format!("{}: line {}: {e}", index.display(), e.line()))
            })?;
            let map = json
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| {
                    PolicyError::Config(format!("{}: no \"weight_map\" object", index.display()))
                })?;
            let mut names: Vec<String> = map
                .values()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            names.sort();
            names.dedup();
            names.into_iter().map(|n| dir.join(n)).collect()
        } else {
            return Err(PolicyError::Config(format!(
                "{}: neither model.safetensors nor model.safetensors.index.json",
                dir.display()
            )));
        };
        let mut tensors = HashMap::new();
        for f in files {
            let loaded = candle_core::safetensors::load(&f, &Device::Cpu)
                .map_err(|e| PolicyError::Config(format!("{}: {e}", f.display())))?;
            tensors.extend(loaded);
        }
        Self::from_tensors(cfg, tensors, device)
    }

    /// Grows the vocabulary to `new_vocab` rows (for tokens added to a pretrained tokenizer).
    /// New embedding rows — and new head rows of an untied head — are the mean of the existing
    /// rows: the new tokens then start "average" instead of random, which keeps the pretrained
    /// distribution almost unchanged (Hewitt, 2021, "Initializing new word embeddings").
    pub fn resize_vocab(&mut self, new_vocab: usize) -> Result<()> {
        let old = self.cfg.vocab_size;
        if new_vocab < old {
            return Err(PolicyError::BadInput(format!(
                "cannot shrink the vocabulary from {old} to {new_vocab}"
            )));
        }
        if new_vocab == old {
            return Ok(());
        }
        let grow = |v: &Var| -> Result<Var> {
            let t = v.as_detached_tensor();
            let mean = t.mean_keepdim(0)?;
            let extra = mean.broadcast_as((new_vocab - old, t.dim(1)?))?;
            Ok(Var::from_tensor(&Tensor::cat(
                &[&t, &extra.contiguous()?],
                0,
            )?)?)
        };
        self.weights_changed();
        self.embed_tokens = grow(&self.embed_tokens)?;
        if let Some(h) = &self.lm_head {
            self.lm_head = Some(grow(h)?);
        }
        self.cfg.vocab_size = new_vocab;
        Ok(())
    }

    /// Drops the quantised copies of the weights: whoever changes weights in place calls this
    /// before decoding again (the optimizer does).
    pub fn weights_changed(&self) {
        *self.quantized.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.version.store(next_version(), Ordering::Relaxed);
    }

    /// A number naming this model's current weights, unique over the process: it changes with
    /// [`Llama::weights_changed`], so whoever keeps results of the weights (prefilled caches)
    /// knows when they are stale.
    pub fn weights_version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// The quantised copies of every projection and the head (built now if needed).
    pub fn quantized_weights(&self) -> Result<Arc<QuantizedWeights>> {
        let mut slot = self.quantized.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = slot.as_ref() {
            return Ok(q.clone());
        }
        let mut mats: Vec<&Var> = vec![self.lm_head.as_ref().unwrap_or(&self.embed_tokens)];
        for l in &self.layers {
            mats.extend([
                &l.q_proj,
                &l.k_proj,
                &l.v_proj,
                &l.o_proj,
                &l.gate_proj,
                &l.up_proj,
                &l.down_proj,
            ]);
        }
        let q = Arc::new(QuantizedWeights::new(
            mats.into_iter().map(|v| v.as_tensor()),
        )?);
        *slot = Some(q.clone());
        Ok(q)
    }

    fn w(v: &Var, grad: bool) -> Tensor {
        if grad {
            v.as_tensor().clone()
        } else {
            v.as_detached_tensor()
        }
    }

    /// (attention heads, key/value heads, head width, attention width = heads · head width).
    fn heads(&self) -> (usize, usize, usize, usize) {
        (
            self.cfg.num_attention_heads,
            self.cfg.kv_heads(),
            self.cfg.head_dim(),
            self.cfg.attention_width(),
        )
    }

    /// `cos`/`sin` of every position's angles, `[b, t, head_dim]` flattened.
    fn rope_tables(&self, positions: &[u32]) -> (Vec<f32>, Vec<f32>) {
        let hd = self.cfg.head_dim();
        let half = hd / 2;
        let inv: Vec<f64> = (0..half)
            .map(|i| 1.0 / self.cfg.rope_theta.powf(2.0 * i as f64 / hd as f64))
            .collect();
        let mut cos = Vec::with_capacity(positions.len() * hd);
        let mut sin = Vec::with_capacity(positions.len() * hd);
        for &p in positions {
            // Hugging Face's non-interleaved layout: the two halves share frequencies.
            for _ in 0..2 {
                for f in &inv {
                    let a = p as f64 * f;
                    cos.push(a.cos() as f32);
                    sin.push(a.sin() as f32);
                }
            }
        }
        (cos, sin)
    }

    /// Whether a pass uses the fused ops: differentiable full-sequence passes on the CPU.
    /// Inference (sampling, scoring) keeps the composite path, whose speed is measured there.
    pub(crate) fn use_fused(&self, grad: bool, cached: bool) -> bool {
        self.fused && grad && !cached && self.device.is_cpu()
    }

    pub(crate) fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let hd = x.dim(D::Minus1)?;
        let x1 = x.narrow(D::Minus1, 0, hd / 2)?;
        let x2 = x.narrow(D::Minus1, hd / 2, hd / 2)?;
        let rotated = Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)?;
        Ok((x.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?)?)
    }

    /// RMSNorm: candle's fused op when no gradient is wanted (it records no backward pass).
    fn rms_norm(grad: bool, x: &Tensor, alpha: &Tensor, eps: f32) -> Result<Tensor> {
        Ok(if grad {
            candle_nn::ops::rms_norm_slow(x, alpha, eps)?
        } else {
            candle_nn::ops::rms_norm(&x.contiguous()?, alpha, eps)?
        })
    }

    /// Softmax over the last axis: candle's fused op when no gradient is wanted.
    fn softmax(grad: bool, x: &Tensor) -> Result<Tensor> {
        Ok(if grad {
            candle_nn::ops::softmax(x, D::Minus1)?
        } else {
            candle_nn::ops::softmax_last_dim(&x.contiguous()?)?
        })
    }

    /// `x2d · wᵀ`. `quant`: the quantised weights of a decoding step.
    fn linear(
        x2d: &Tensor,
        w: &Var,
        grad: bool,
        quant: Option<&QuantizedWeights>,
    ) -> Result<Tensor> {
        let m = x2d.dim(0)?;
        if let (false, Some(q), DType::F32) =
            (grad, quant.and_then(|q| q.get(w.as_tensor())), x2d.dtype())
        {
            return Ok(q.matmul_t(x2d)?);
        }
        if !grad && m <= 16 && x2d.dtype() == DType::F32 {
            let w = w.as_detached_tensor();
            // Decoding: a few rows against a large weight matrix, where general GEMM kernels
            // use the machine poorly (see `decode`).
            if m >= 4 && w.dim(0)? <= 16_384 && crate::decode::available() {
                return Ok(crate::decode::linear_small(x2d, &w)?);
            }
            if m > 1 {
                // (W · xᵀ)ᵀ: the GEMM's long side on the weights, where it blocks well.
                return Ok(w.matmul(&x2d.t()?)?.t()?.contiguous()?);
            }
            return Ok(x2d.matmul(&w.t()?)?);
        }
        Ok(x2d.matmul(&Self::w(w, grad).t()?)?)
    }

    /// Hidden states after the final norm, `[b, t, hidden]`, of a full-sequence pass (no cache).
    pub fn hidden(&self, batch: &Batch, grad: bool) -> Result<Tensor> {
        self.hidden_full(batch, grad, None)
    }

    /// [`Llama::hidden`]: the fused path when [`Llama::use_fused`] (weight gradients to `sinks`
    /// when given), else the layers one by one.
    pub(crate) fn hidden_full(
        &self,
        batch: &Batch,
        grad: bool,
        sinks: Option<&GradSinks>,
    ) -> Result<Tensor> {
        let inputs = self.pass_inputs(batch, None)?;
        if self.use_fused(grad, false) {
            return self.hidden_fused(batch, inputs, sinks);
        }
        self.hidden_layers(batch, inputs, None, grad, None)
    }

    /// Hidden states of a decoding step, `[b, t, hidden]`: the batch continues the cached
    /// sequences (its rows must match the cache's rows); padding in `batch.valid` is remembered
    /// so later tokens never attend to it. `quant`: the quantised weights of the step.
    pub(crate) fn hidden_cached(
        &self,
        batch: &Batch,
        cache: &mut KvCache,
        quant: Option<&QuantizedWeights>,
    ) -> Result<Tensor> {
        let inputs = self.pass_inputs(batch, Some(&mut *cache))?;
        self.hidden_layers(batch, inputs, Some(cache), false, quant)
    }

    /// The batch checked, its positions (continuing the cache, which learns the batch's key
    /// validity), the attention mask and the RoPE tables.
    fn pass_inputs(&self, batch: &Batch, cache: Option<&mut KvCache>) -> Result<PassInputs> {
        let (b, t) = (batch.b, batch.t);
        if b == 0 || t == 0 {
            return Err(PolicyError::BadInput("empty batch".into()));
        }
        if let Some(&bad) = batch
            .ids
            .iter()
            .find(|&&i| i as usize >= self.cfg.vocab_size)
        {
            return Err(PolicyError::BadInput(format!(
                "token id {bad} is outside the vocabulary ({} tokens)",
                self.cfg.vocab_size
            )));
        }
        let mut positions = batch.positions.clone();
        let (past, key_valid) = match cache {
            Some(c) => (c.continue_with(batch, &mut positions)?, Some(&c.key_valid)),
            None => (0, None),
        };
        let total = past + t;
        let mut mask = Vec::with_capacity(b * t * total);
        for r in 0..b {
            for i in 0..t {
                for j in 0..total {
                    let key_ok = match key_valid {
                        Some(kv) => kv[r][j],
                        None => batch.valid[r * t + j],
                    };
                    mask.push(if j <= past + i && key_ok { 0.0 } else { MASKED });
                }
            }
        }
        let (cos, sin) = self.rope_tables(&positions);
        Ok(PassInputs {
            total,
            mask,
            cos,
            sin,
        })
    }

    /// The layers one by one (keys and values appended to `cache` when given).
    fn hidden_layers(
        &self,
        batch: &Batch,
        inputs: PassInputs,
        mut cache: Option<&mut KvCache>,
        grad: bool,
        quant: Option<&QuantizedWeights>,
    ) -> Result<Tensor> {
        let (b, t) = (batch.b, batch.t);
        // Inference on the CPU uses the fused ops' forward passes (the masked softmax skips the
        // exponentials of masked keys, which otherwise took libm's slow underflow path: a
        // quarter of a 1,000-token prefill). The composite ops stay for gradients (the fused
        // training path is tested against them) and for other devices.
        let infer = !grad && self.fused && self.device.is_cpu();
        let pass = LayerPass {
            attend: Attend::new(inputs, infer, (b, t, self.cfg.head_dim()), &self.device)?,
            grad,
            quant,
            dims: (b, t),
        };
        let ids = Tensor::from_vec(batch.ids.clone(), b * t, &self.device)?;
        let mut x = Self::w(&self.embed_tokens, grad).index_select(&ids, 0)?; // [b*t, d]
        for li in 0..self.layers.len() {
            x = self.layer(li, x, &pass, cache.as_deref_mut())?;
        }
        let x = Self::rms_norm(
            grad,
            &x,
            &Self::w(&self.norm, grad),
            self.cfg.rms_norm_eps as f32,
        )?;
        Ok(x.reshape((b, t, self.cfg.hidden_size))?)
    }

    /// Decoder layer `li` of [`Llama::hidden_layers`]: attention, then the MLP, each added to
    /// the residual stream `x` (`[b*t, d]`).
    fn layer(
        &self,
        li: usize,
        mut x: Tensor,
        pass: &LayerPass<'_>,
        cache: Option<&mut KvCache>,
    ) -> Result<Tensor> {
        let (l, grad, quant) = (&self.layers[li], pass.grad, pass.quant);
        let (b, t) = pass.dims;
        let (h, kvh, hd, aw) = self.heads();
        let rep = h / kvh;
        let hn = Self::rms_norm(
            grad,
            &x,
            &Self::w(&l.input_layernorm, grad),
            self.cfg.rms_norm_eps as f32,
        )?;
        let (q, k, v) = self.qkv(l, &hn, pass)?;
        let (q, k) = (pass.attend.rope(&q)?, pass.attend.rope(&k)?);
        let (k, v) = match cache {
            Some(c) => LayerKv::append(&mut c.layers[li], &k.detach(), &v.detach())?,
            None => (k, v),
        };
        // Grouped-query attention without copying K/V: the `rep` query heads that share a
        // key/value head are stacked along the query axis (HF orders heads kv-major).
        let q = q.contiguous()?.reshape((b, kvh, rep * t, hd))?;
        let scale = 1.0 / (hd as f64).sqrt();
        let p = pass.attend.probs(&q, &k, scale, grad, (b, kvh, rep, t))?;
        let o = p.matmul(&v)?; // [b, kvh, rep*t, hd]
        let o = o
            .reshape((b, h, t, hd))?
            .transpose(1, 2)?
            .reshape((b * t, aw))?;
        let o = Self::linear(&o, &l.o_proj, grad, quant)?;
        x = (x + l.extras.o(o, PartOps::Composite { grad })?)?;

        let hn = Self::rms_norm(
            grad,
            &x,
            &Self::w(&l.post_attention_layernorm, grad),
            self.cfg.rms_norm_eps as f32,
        )?;
        let gate = Self::linear(&hn, &l.gate_proj, grad, quant)?;
        let up = Self::linear(&hn, &l.up_proj, grad, quant)?;
        let act = pass.attend.swiglu(&gate, &up)?;
        Ok((x + Self::linear(&act, &l.down_proj, grad, quant)?)?)
    }

    /// The queries `[b, t, h, hd]` and keys `[b, t, kvh, hd]` before RoPE, and the values
    /// `[b, kvh, t, hd]`, of layer `l` for its normed input `hn` `[b*t, d]`.
    fn qkv(
        &self,
        l: &Layer,
        hn: &Tensor,
        pass: &LayerPass<'_>,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (grad, quant, (b, t)) = (pass.grad, pass.quant, pass.dims);
        let (h, kvh, hd, _) = self.heads();
        let (ops, eps) = (PartOps::Composite { grad }, self.cfg.rms_norm_eps as f32);
        let q = Self::linear(hn, &l.q_proj, grad, quant)?;
        let q = l.extras.q(q, hd, eps, ops)?.reshape((b, t, h, hd))?;
        let k = Self::linear(hn, &l.k_proj, grad, quant)?;
        let k = l.extras.k(k, hd, eps, ops)?.reshape((b, t, kvh, hd))?;
        let v = Self::linear(hn, &l.v_proj, grad, quant)?;
        let v = l
            .extras
            .v(v, ops)?
            .reshape((b, t, kvh, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        Ok((q, k, v))
    }

    /// [`Llama::hidden`] for a differentiable full-sequence pass, built from the fused ops
    /// (same mathematics; the mask is `[b, t, t]`, `cos`/`sin` are `[b, t, head_dim]`).
    fn hidden_fused(
        &self,
        batch: &Batch,
        inputs: PassInputs,
        sinks: Option<&GradSinks>,
    ) -> Result<Tensor> {
        let (b, t) = (batch.b, batch.t);
        let pass = FusedPass {
            mask: Arc::new(inputs.mask),
            cos: Arc::new(inputs.cos),
            sin: Arc::new(inputs.sin),
            dims: (b, t),
            eps: self.cfg.rms_norm_eps as f32,
            scale: (1.0 / (self.cfg.head_dim() as f64).sqrt()) as f32,
        };
        let w = |v: &Var| v.as_tensor().clone();
        let mut x = match sinks {
            Some(s) => crate::ops::embedding_sink(
                &w(&self.embed_tokens),
                batch.ids.clone(),
                s.embed.clone(),
            )?,
            None => {
                let ids = Tensor::from_vec(batch.ids.clone(), b * t, &self.device)?;
                w(&self.embed_tokens).index_select(&ids, 0)?
            }
        }; // [b*t, d]
        for li in 0..self.layers.len() {
            // With gradient slots (the training pass) a Llama layer's blocks are one graph node
            // each, its weights' gradients in the slots; a layer with Qwen's parts, or a pass
            // without slots (tests against the composite model), runs the fused ops one by one.
            x = match sinks {
                Some(s) if self.layers[li].extras.is_empty() => {
                    self.fused_layer_with_sinks(li, &x, &pass, s)?
                }
                _ => self.fused_layer(li, &x, &pass, sinks)?,
            };
        }
        let x = crate::ops::rms_norm(&x, &w(&self.norm), pass.eps)?;
        Ok(x.reshape((b, t, self.cfg.hidden_size))?)
    }

    /// Decoder layer `li` of the fused training pass: the attention block and the MLP block,
    /// each one graph node with its weights' gradients in `sinks`.
    fn fused_layer_with_sinks(
        &self,
        li: usize,
        x: &Tensor,
        pass: &FusedPass,
        sinks: &GradSinks,
    ) -> Result<Tensor> {
        use crate::ops;
        let l = &self.layers[li];
        let w = |v: &Var| v.as_tensor().clone();
        let (b, t) = pass.dims;
        let (h, kvh, hd, _) = self.heads();
        let [sq, sk, sv, so, g, u, dn] = &sinks.layers[li];
        let parts = ops::AttentionBlockParts {
            w: [w(&l.q_proj), w(&l.k_proj), w(&l.v_proj), w(&l.o_proj)],
            sinks: [sq.clone(), sk.clone(), sv.clone(), so.clone()],
            cos: pass.cos.clone(),
            sin: pass.sin.clone(),
            mask: pass.mask.clone(),
            dims: [b, t, h, kvh, hd],
            scale: pass.scale,
            eps: pass.eps,
        };
        let x = ops::attention_block(x, &w(&l.input_layernorm), parts)?;
        let weights = [w(&l.gate_proj), w(&l.up_proj), w(&l.down_proj)];
        Ok(ops::mlp_block(
            &x,
            &w(&l.post_attention_layernorm),
            weights,
            [g.clone(), u.clone(), dn.clone()],
            pass.eps,
        )?)
    }

    /// Decoder layer `li` of the fused pass, the fused ops one by one: the projections'
    /// weight gradients go to `sinks` when given, everything else's (norms, Qwen's parts)
    /// through candle's autograd.
    fn fused_layer(
        &self,
        li: usize,
        x: &Tensor,
        pass: &FusedPass,
        sinks: Option<&GradSinks>,
    ) -> Result<Tensor> {
        use crate::ops;
        let (l, parts) = (&self.layers[li], PartOps::Fused);
        let w = |v: &Var| v.as_tensor().clone();
        let slot = |i: usize| sinks.map(|s| s.layers[li][i].clone());
        let (b, t) = pass.dims;
        let (h, kvh, hd, aw) = self.heads();
        let rep = h / kvh;
        let (cos, sin, eps) = (&pass.cos, &pass.sin, pass.eps);
        let hn = ops::rms_norm(x, &w(&l.input_layernorm), eps)?;
        let proj = |i: usize, v: &Var| ops::linear_sink(&hn, &w(v), slot(i));
        let q = l.extras.q(proj(0, &l.q_proj)?, hd, eps, parts)?;
        let q = ops::rope_transpose(&q.reshape((b, t, h, hd))?, cos.clone(), sin.clone())?; // [b, h, t, hd]
        let k = l.extras.k(proj(1, &l.k_proj)?, hd, eps, parts)?;
        let k = ops::rope_transpose(&k.reshape((b, t, kvh, hd))?, cos.clone(), sin.clone())?; // [b, kvh, t, hd]
        let v = l
            .extras
            .v(proj(2, &l.v_proj)?, parts)?
            .reshape((b, t, kvh, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        // Query heads sharing a key/value head stacked along the query axis (as in `hidden`).
        let q = q.reshape((b, kvh, rep * t, hd))?;
        let o = ops::attention(&q, &k, &v, pass.mask.clone(), pass.scale, b, t, t)?; // [b, kvh, rep*t, hd]
        let o = o
            .reshape((b, h, t, hd))?
            .transpose(1, 2)?
            .reshape((b * t, aw))?;
        let o = ops::linear_sink(&o, &w(&l.o_proj), slot(3))?;
        let x = (x + l.extras.o(o, parts)?)?;
        let hn = ops::rms_norm(&x, &w(&l.post_attention_layernorm), eps)?;
        let gate = ops::linear_sink(&hn, &w(&l.gate_proj), slot(4))?;
        let up = ops::linear_sink(&hn, &w(&l.up_proj), slot(5))?;
        let act = ops::swiglu(&gate, &up)?;
        Ok((&x + ops::linear_sink(&act, &w(&l.down_proj), slot(6))?)?)
    }

    /// The head for a differentiable pass: the fused linear op when [`Llama::use_fused`].
    pub(crate) fn head_grad(&self, hidden2d: &Tensor, sinks: Option<&GradSinks>) -> Result<Tensor> {
        if self.use_fused(true, false) {
            let w = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
            // A tied head shares the embedding's slot.
            let sink = sinks.map(|s| s.lm_head.clone().unwrap_or_else(|| s.embed.clone()));
            Ok(crate::ops::linear_sink(hidden2d, w.as_tensor(), sink)?)
        } else {
            self.head(hidden2d, true)
        }
    }

    /// The head and the weighted cross-entropy of a training pass with gradient slots, as one
    /// node (`ops::head_cross_entropy`); `None` when the fused ops do not apply.
    pub(crate) fn head_loss_grad(
        &self,
        hidden2d: &Tensor,
        sinks: &GradSinks,
        labels: Vec<u32>,
        weights: Vec<f32>,
    ) -> Result<Option<Tensor>> {
        if !self.use_fused(true, false) {
            return Ok(None);
        }
        let w = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        // A tied head shares the embedding's slot.
        let sink = sinks.lm_head.clone().unwrap_or_else(|| sinks.embed.clone());
        Ok(Some(crate::ops::head_cross_entropy(
            hidden2d,
            w.as_tensor(),
            sink,
            labels,
            weights,
        )?))
    }

    /// The language-model head applied to hidden states `[n, hidden]` → logits `[n, vocab]`.
    pub fn head(&self, hidden2d: &Tensor, grad: bool) -> Result<Tensor> {
        self.head_with(hidden2d, grad, None)
    }

    fn head_with(
        &self,
        hidden2d: &Tensor,
        grad: bool,
        quant: Option<&QuantizedWeights>,
    ) -> Result<Tensor> {
        let w = self.lm_head.as_ref().unwrap_or(&self.embed_tokens);
        Self::linear(hidden2d, w, grad, quant)
    }

    /// Full-sequence logits `[b, t, vocab]` (no cache). Rows at padding positions are
    /// meaningless and must be ignored by the caller.
    pub fn logits(&self, batch: &Batch, grad: bool) -> Result<Tensor> {
        let hidden = self.hidden(batch, grad)?;
        let (b, t, d) = hidden.dims3()?;
        Ok(self
            .head(&hidden.reshape((b * t, d))?, grad)?
            .reshape((b, t, self.cfg.vocab_size))?)
    }

    /// Feeds `batch` through the cache and returns the logits of each row's last column, `[b, vocab]`.
    pub fn forward_cached(&self, batch: &Batch, cache: &mut KvCache) -> Result<Tensor> {
        self.forward_cached_with(batch, cache, DecodeWeights::F32)
    }

    /// [`Llama::forward_cached`] reading `weights`: with [`DecodeWeights::Q8`], steps of one new
    /// token per row use the quantised copies (so a one-token prompt's prefill does too); longer
    /// prefills use f32.
    pub fn forward_cached_with(
        &self,
        batch: &Batch,
        cache: &mut KvCache,
        weights: DecodeWeights,
    ) -> Result<Tensor> {
        let quant = match weights {
            DecodeWeights::Q8 if batch.t == 1 => Some(self.quantized_weights()?),
            _ => None,
        };
        let hidden = self.hidden_cached(batch, cache, quant.as_deref())?;
        let last = hidden.narrow(1, batch.t - 1, 1)?.squeeze(1)?;
        self.head_with(&last, false, quant.as_deref())
    }

    /// Logits of the next token after each (unpadded) sequence, `[n, vocab]`, in one padded batch.
    pub fn next_token_logits(&self, seqs: &[&[u32]]) -> Result<Tensor> {
        if seqs.iter().any(|s| s.is_empty()) {
            return Err(PolicyError::BadInput("cannot score an empty prompt".into()));
        }
        let batch = Batch::right_padded(seqs);
        let hidden = self.hidden(&batch, false)?;
        let d = self.cfg.hidden_size;
        let rows: Vec<u32> = seqs
            .iter()
            .enumerate()
            .map(|(i, s)| (i * batch.t + s.len() - 1) as u32)
            .collect();
        let idx = Tensor::from_vec(rows, seqs.len(), &self.device)?;
        let last = hidden
            .reshape((batch.b * batch.t, d))?
            .index_select(&idx, 0)?;
        self.head(&last, false)
    }
}

//! The parts Qwen2 and Qwen3 add to a Llama layer's attention ([`AttnExtras`]): biases of the
//! projections (Qwen2: q, k, v; Qwen3 with `attention_bias`: q, k, v and o) and an RMSNorm over
//! each query and key head before RoPE (Qwen3's `q_norm`, `k_norm`, `[head_dim]` each).
//!
//! A Llama layer has none of them. Every pass applies them here — the composite ops (with or
//! without gradients), the fused training ops, and row decoding — so that one model type runs
//! the three architectures and each pass stays the same code for all of them.

use candle_core::{Tensor, Var};

use crate::config::LlamaConfig;
use crate::{PolicyError, Result};

/// Which ops a pass computes the parts with.
#[derive(Clone, Copy)]
pub(super) enum PartOps {
    /// candle's ops: the differentiable ones when `grad`, else the fused inference kernels.
    Composite { grad: bool },
    /// The fused training pass: this crate's RMSNorm op (hand-written backward).
    Fused,
}

impl PartOps {
    fn weight(self, v: &Var) -> Tensor {
        match self {
            PartOps::Composite { grad: false } => v.as_detached_tensor(),
            _ => v.as_tensor().clone(),
        }
    }
}

/// One layer's extra attention parameters; `None` where the architecture has none.
#[derive(Default)]
pub(super) struct AttnExtras {
    pub q_bias: Option<Var>,
    pub k_bias: Option<Var>,
    pub v_bias: Option<Var>,
    pub o_bias: Option<Var>,
    pub q_norm: Option<Var>,
    pub k_norm: Option<Var>,
}

/// Hugging Face names of the parts, after `model.layers.{i}.`, in [`AttnExtras::named`] order.
const NAMES: [&str; 6] = [
    "self_attn.q_proj.bias",
    "self_attn.k_proj.bias",
    "self_attn.v_proj.bias",
    "self_attn.o_proj.bias",
    "self_attn.q_norm.weight",
    "self_attn.k_norm.weight",
];

impl AttnExtras {
    /// The parts `cfg` asks for, as (name after `model.layers.{i}.`, shape).
    pub fn shapes(cfg: &LlamaConfig) -> Vec<(&'static str, Vec<usize>)> {
        let (hd, kvd) = (cfg.head_dim(), cfg.kv_heads() * cfg.head_dim());
        let sizes = [
            cfg.qkv_bias().then_some(cfg.attention_width()),
            cfg.qkv_bias().then_some(kvd),
            cfg.qkv_bias().then_some(kvd),
            cfg.o_bias().then_some(cfg.hidden_size),
            cfg.qk_norm().then_some(hd),
            cfg.qk_norm().then_some(hd),
        ];
        NAMES
            .iter()
            .zip(sizes)
            .filter_map(|(n, s)| s.map(|s| (*n, vec![s])))
            .collect()
    }

    /// The parts `cfg` asks for, each read by `get` (called with its name after
    /// `model.layers.{i}.`).
    pub fn load(cfg: &LlamaConfig, mut get: impl FnMut(&str) -> Result<Var>) -> Result<Self> {
        let mut parts: [Option<Var>; 6] = Default::default();
        for (name, _) in Self::shapes(cfg) {
            let i = NAMES.iter().position(|n| *n == name).ok_or_else(|| {
                PolicyError::Config(format!("no slot for layer parameter {name}"))
            })?;
            parts[i] = Some(get(name)?);
        }
        let [q_bias, k_bias, v_bias, o_bias, q_norm, k_norm] = parts;
        Ok(AttnExtras {
            q_bias,
            k_bias,
            v_bias,
            o_bias,
            q_norm,
            k_norm,
        })
    }

    /// The parts present, with their names after `model.layers.{i}.` (the order of
    /// [`AttnExtras::shapes`]).
    pub fn named(&self) -> Vec<(&'static str, &Var)> {
        let parts = [
            &self.q_bias,
            &self.k_bias,
            &self.v_bias,
            &self.o_bias,
            &self.q_norm,
            &self.k_norm,
        ];
        NAMES
            .iter()
            .zip(parts)
            .filter_map(|(n, v)| v.as_ref().map(|v| (*n, v)))
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.named().is_empty()
    }

    /// The queries `[n, heads·hd]` from the q projection's output: its bias, then each head
    /// normalised.
    pub fn q(&self, x: Tensor, hd: usize, eps: f32, ops: PartOps) -> Result<Tensor> {
        head_norm(
            bias(x, self.q_bias.as_ref(), ops)?,
            self.q_norm.as_ref(),
            hd,
            eps,
            ops,
        )
    }

    /// The keys `[n, kv_heads·hd]` from the k projection's output (as [`AttnExtras::q`]).
    pub fn k(&self, x: Tensor, hd: usize, eps: f32, ops: PartOps) -> Result<Tensor> {
        head_norm(
            bias(x, self.k_bias.as_ref(), ops)?,
            self.k_norm.as_ref(),
            hd,
            eps,
            ops,
        )
    }

    /// The values from the v projection's output: its bias.
    pub fn v(&self, x: Tensor, ops: PartOps) -> Result<Tensor> {
        bias(x, self.v_bias.as_ref(), ops)
    }

    /// The attention's output from the o projection's: its bias.
    pub fn o(&self, x: Tensor, ops: PartOps) -> Result<Tensor> {
        bias(x, self.o_bias.as_ref(), ops)
    }
}

/// `x` `[n, width]` plus `b` `[width]` on every row.
fn bias(x: Tensor, b: Option<&Var>, ops: PartOps) -> Result<Tensor> {
    match b {
        None => Ok(x),
        Some(b) => Ok(x.broadcast_add(&ops.weight(b))?),
    }
}

/// Each `hd`-wide head of `x` `[n, heads·hd]` RMS-normalised and scaled by `w` `[hd]`. Every
/// row and head is normalised on its own, so decoding rows stay independent.
fn head_norm(x: Tensor, w: Option<&Var>, hd: usize, eps: f32, ops: PartOps) -> Result<Tensor> {
    let Some(w) = w else { return Ok(x) };
    let (n, width) = x.dims2()?;
    let heads = x.reshape((n * width / hd, hd))?;
    let w = ops.weight(w);
    let normed = match ops {
        PartOps::Composite { grad: true } => candle_nn::ops::rms_norm_slow(&heads, &w, eps)?,
        PartOps::Composite { grad: false } => {
            candle_nn::ops::rms_norm(&heads.contiguous()?, &w, eps)?
        }
        PartOps::Fused => crate::ops::rms_norm(&heads, &w, eps)?,
    };
    Ok(normed.reshape((n, width))?)
}

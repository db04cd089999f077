//! Training: weighted cross-entropy (paper §3.2 step 3), AdamW with linear warm-up then a
//! constant learning rate (§4.1), gradient accumulation to a macro batch, global-norm clipping,
//! checkpoint and resume.
//!
//! The loss of a macro batch `B` is
//! `L = Σ_{i∈B} w_i Σ_{t ∈ target_i} −log π(y_t | y_<t) / Σ_{i∈B} |target_i|`:
//! every target token counts once, scaled by its example's weight, and the sum is divided by the
//! number of target tokens of the whole macro batch — so accumulating micro-batches gives exactly
//! the gradient of the full batch.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Tensor, D};
use serde::{Deserialize, Serialize};

use crate::config::PolicyConfig;
use crate::model::{Batch, GradSinks, Llama};
use crate::prompt::TrainExample;
use crate::{PolicyError, Result};

/// Where a checkpoint keeps the optimizer's moments, relative to its model directory: a
/// subfolder no model loader reads (`transformers`, vLLM and [`Llama::load`] read the top level).
pub const OPTIMIZER_STATE: &str = "training_state/optimizer.safetensors";

/// Where checkpoints kept them before: beside the weights (still read on resume).
const LEGACY_OPTIMIZER_STATE: &str = "optimizer.safetensors";

/// `(Σ_i w_i Σ_t nll_t, number of target tokens)` for a micro-batch. The first value is a
/// scalar tensor that can be differentiated when `grad` is set.
pub fn weighted_nll_sum(
    model: &Llama,
    examples: &[TrainExample],
    grad: bool,
) -> Result<(Tensor, usize)> {
    nll_sum(model, examples, grad, None)
}

/// [`weighted_nll_sum`]; with `sinks` (fused path), the matrix parameters' gradients are
/// accumulated there instead of being returned by `backward`.
fn nll_sum(
    model: &Llama,
    examples: &[TrainExample],
    grad: bool,
    sinks: Option<&GradSinks>,
) -> Result<(Tensor, usize)> {
    if examples.is_empty() {
        return Err(PolicyError::BadInput("empty micro-batch".into()));
    }
    for (i, e) in examples.iter().enumerate() {
        if e.loss_from == 0 || e.loss_from > e.ids.len() {
            return Err(PolicyError::BadInput(format!(
                "example {i}: loss_from {} must be in 1..={}",
                e.loss_from,
                e.ids.len()
            )));
        }
    }
    let seqs: Vec<&[u32]> = examples.iter().map(|e| e.ids.as_slice()).collect();
    let batch = Batch::right_padded(&seqs);
    let hidden = model.hidden_full(&batch, grad, sinks)?;
    let d = model.config().hidden_size;
    let (mut rows, mut labels, mut weights) = (Vec::new(), Vec::new(), Vec::new());
    for (i, e) in examples.iter().enumerate() {
        // Position p predicts token p + 1: only positions whose next token is a target count.
        for p in e.loss_from - 1..e.ids.len() - 1 {
            rows.push((i * batch.t + p) as u32);
            labels.push(e.ids[p + 1]);
            weights.push(e.weight);
        }
    }
    let n = rows.len();
    let dev = model.device();
    if n == 0 {
        return Ok((Tensor::zeros((), DType::F32, dev)?, 0));
    }
    let rows = Tensor::from_vec(rows, n, dev)?;
    let h = hidden
        .reshape((batch.b * batch.t, d))?
        .index_select(&rows, 0)?;
    // Only target positions go through the (large) head.
    if let (true, Some(s)) = (grad, sinks) {
        // The head and the loss as one node, over vocabulary chunks.
        if let Some(loss) = model.head_loss_grad(&h, s, labels.clone(), weights.clone())? {
            return Ok((loss, n));
        }
    }
    if model.use_fused(grad, false) {
        // One op for log-softmax, gather and weighting: no [n, vocab] temporaries besides the
        // logits and, backward, their gradient.
        let logits = model.head_grad(&h, sinks)?;
        return Ok((
            crate::ops::weighted_cross_entropy(&logits, labels, weights)?,
            n,
        ));
    }
    let logits = model.head(&h, grad)?;
    let logp = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
    let labels = Tensor::from_vec(labels, (n, 1), dev)?;
    let nll = logp.gather(&labels, 1)?.squeeze(1)?.neg()?;
    let weights = Tensor::from_vec(weights, n, dev)?;
    Ok(((nll * weights)?.sum_all()?, n))
}

/// Mean weighted loss over `examples` (no gradient), in micro-batches of `micro`.
pub fn eval_loss(model: &Llama, examples: &[TrainExample], micro: usize) -> Result<f64> {
    let (mut sum, mut tokens) = (0.0, 0usize);
    for chunk in examples.chunks(micro.max(1)) {
        let (s, n) = weighted_nll_sum(model, chunk, false)?;
        sum += s.to_scalar::<f32>()? as f64;
        tokens += n;
    }
    Ok(if tokens == 0 {
        0.0
    } else {
        sum / tokens as f64
    })
}

/// AdamW (Loshchilov & Hutter), the same update as PyTorch's `AdamW`, with its state kept by
/// parameter name so it can be checkpointed.
///
/// The update is one fused loop over host memory (moments kept as `Vec<f32>`): candle's
/// tensor-op AdamW makes ~12 full passes per parameter and took about half of a CPU training
/// step. On a GPU this copies parameters to the host and back each step;
/// a device-side kernel is future work.
pub struct AdamW {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Number of updates applied so far.
    pub step: usize,
    m: HashMap<String, Vec<f32>>,
    v: HashMap<String, Vec<f32>>,
}

impl AdamW {
    pub fn new(cfg: &PolicyConfig) -> Self {
        AdamW {
            beta1: cfg.beta1,
            beta2: cfg.beta2,
            eps: cfg.eps,
            weight_decay: cfg.weight_decay,
            step: 0,
            m: HashMap::new(),
            v: HashMap::new(),
        }
    }

    /// One update of every parameter that has a gradient in `grads` (by name).
    pub fn update(
        &mut self,
        model: &Llama,
        grads: &HashMap<String, Tensor>,
        lr: f64,
    ) -> Result<()> {
        self.update_scaled(model, grads, lr, 1.0)
    }

    /// [`AdamW::update`] with every gradient multiplied by `grad_scale` first (the
    /// 1/target-tokens normalisation and the clipping factor, folded into the update's single
    /// pass instead of a pass of their own).
    pub fn update_scaled(
        &mut self,
        model: &Llama,
        grads: &HashMap<String, Tensor>,
        lr: f64,
        grad_scale: f64,
    ) -> Result<()> {
        crate::pool::training(|| self.update_scaled_here(model, grads, lr, grad_scale))
    }

    fn update_scaled_here(
        &mut self,
        model: &Llama,
        grads: &HashMap<String, Tensor>,
        lr: f64,
        grad_scale: f64,
    ) -> Result<()> {
        model.weights_changed();
        self.step += 1;
        let t = self.step as i32;
        let (b1, b2) = (self.beta1 as f32, self.beta2 as f32);
        let c1 = (1.0 - self.beta1.powi(t)) as f32;
        let c2 = (1.0 - self.beta2.powi(t)) as f32;
        let (lr32, eps) = (lr as f32, self.eps as f32);
        let decay = (1.0 - lr * self.weight_decay) as f32;
        let scale = if grad_scale == 1.0 {
            None
        } else {
            Some(grad_scale as f32)
        };
        for (name, var) in model.named_vars() {
            let Some(g) = grads.get(&name) else { continue };
            let n = var.elem_count();
            if g.elem_count() != n {
                return Err(PolicyError::BadInput(format!(
                    "gradient of {name} does not match its shape"
                )));
            }
            let m = self.m.entry(name.clone()).or_insert_with(|| vec![0.0; n]);
            let v = self.v.entry(name.clone()).or_insert_with(|| vec![0.0; n]);
            if m.len() != n || v.len() != n {
                return Err(PolicyError::BadInput(format!(
                    "optimizer state for {name} does not match its shape"
                )));
            }
            if var.device().is_cpu() && var.dtype() == DType::F32 && var.is_contiguous() {
                // In place on the parameter's own storage: one pass over p, g, m, v.
                let g = g.to_dtype(DType::F32)?;
                let op = crate::ops::AdamStep {
                    m: std::sync::Mutex::new(m.as_mut_slice()),
                    v: std::sync::Mutex::new(v.as_mut_slice()),
                    b1,
                    b2,
                    c1,
                    c2,
                    lr: lr32,
                    eps,
                    decay,
                    grad_scale: scale,
                };
                var.as_tensor().inplace_op2(&g, &op)?;
                continue;
            }
            // Other devices: through host memory.
            let mut g: Vec<f32> = g.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?;
            if let Some(s) = scale {
                g.iter_mut().for_each(|x| *x *= s);
            }
            let mut p: Vec<f32> = var.as_detached_tensor().flatten_all()?.to_vec1()?;
            for i in 0..g.len() {
                let gi = g[i];
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let step = (m[i] / c1) / ((v[i] / c2).sqrt() + eps);
                p[i] = p[i] * decay - lr32 * step;
            }
            var.set(&Tensor::from_vec(p, var.shape(), var.device())?)?;
        }
        Ok(())
    }

    /// Zeroed moments for every parameter that has none yet. Called before the first
    /// gradient pass: allocated after it, they took the memory that pass had just freed, and
    /// the second pass then had to fault in about 600 MB of fresh pages (a second step of
    /// 1.3–2.2 s instead of 0.6 s at SmolLM2-135M's shape).
    pub fn allocate_state(&mut self, model: &Llama) {
        for (name, var) in model.named_vars() {
            let n = var.elem_count();
            self.m.entry(name.clone()).or_insert_with(|| vec![0.0; n]);
            self.v.entry(name).or_insert_with(|| vec![0.0; n]);
        }
    }

    fn state_tensors(&self, model: &Llama) -> Result<HashMap<String, Tensor>> {
        let mut out = HashMap::new();
        let dev = candle_core::Device::Cpu;
        for (name, var) in model.named_vars() {
            if let (Some(m), Some(v)) = (self.m.get(&name), self.v.get(&name)) {
                out.insert(
                    format!("m.{name}"),
                    Tensor::from_slice(m, var.shape(), &dev)?,
                );
                out.insert(
                    format!("v.{name}"),
                    Tensor::from_slice(v, var.shape(), &dev)?,
                );
            }
        }
        Ok(out)
    }
}

/// What one optimizer step did.
#[derive(Clone, Debug, Serialize)]
pub struct StepStats {
    pub step: usize,
    /// Weighted loss of the macro batch before the update.
    pub loss: f64,
    pub target_tokens: usize,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub lr: f64,
}

/// Where a training run is, saved with each checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    pub step: usize,
    /// Examples consumed from the data stream (resume continues from here).
    pub data_position: usize,
}

/// Gradients of a macro batch's loss `L` (see the module comment), by parameter name.
///
/// `grad_sums` are the gradients of the unnormalised weighted sum; the gradient of `L` is
/// `grad_sums · scale` (`scale` = 1 / target tokens). Keeping the factor apart saves a full pass
/// over every gradient: the optimizer applies it in its own pass.
pub struct MacroGradients {
    pub grad_sums: HashMap<String, Tensor>,
    /// 1 / target tokens of the macro batch.
    pub scale: f64,
    pub loss: f64,
    pub target_tokens: usize,
    /// Global L2 norm of the gradient of `L` (`grad_sums · scale`).
    pub grad_norm: f64,
}

/// Forward/backward over `examples` in micro-batches of `micro`, accumulating gradients of the
/// unnormalised weighted sum, then dividing by the macro batch's target-token count.
pub fn macro_gradients(
    model: &Llama,
    examples: &[TrainExample],
    micro: usize,
) -> Result<MacroGradients> {
    // The training pass's parallel regions on the spin pool (see `pool`).
    crate::pool::training(|| macro_gradients_here(model, examples, micro))
}

/// Adds one micro batch's gradient `g` of `name` into the accumulator.
fn accumulate(acc: &mut HashMap<String, Tensor>, name: &str, g: &Tensor) -> Result<()> {
    match acc.get(name) {
        // In place: the accumulator is our own detached copy of the first gradient.
        Some(a) if a.device().is_cpu() && a.dtype() == DType::F32 && a.is_contiguous() => {
            crate::ops::add_assign(a, g)?
        }
        Some(a) => {
            let merged = (a + g.detach())?;
            acc.insert(name.to_string(), merged);
        }
        None => {
            // Detached, it owns its storage: candle's backward sums every gradient into a
            // fresh tensor, and the gradient store is dropped by the caller.
            acc.insert(name.to_string(), g.detach());
        }
    }
    Ok(())
}

/// Σ g² over every accumulated gradient (those a slot summed already taken from `squares`),
/// in name order: the same total however the map is laid out.
fn sum_of_squares(acc: &HashMap<String, Tensor>, squares: &HashMap<String, f64>) -> Result<f64> {
    let mut sq = 0.0f64;
    let mut names: Vec<&String> = acc.keys().collect();
    names.sort();
    for name in names {
        let g = &acc[name];
        sq += if let Some(&s) = squares.get(name) {
            s
        } else if g.device().is_cpu() && g.dtype() == DType::F32 {
            crate::ops::sum_squares(g)?
        } else {
            g.sqr()?
                .sum_all()?
                .to_dtype(DType::F64)?
                .to_scalar::<f64>()?
        };
    }
    Ok(sq)
}

fn macro_gradients_here(
    model: &Llama,
    examples: &[TrainExample],
    micro: usize,
) -> Result<MacroGradients> {
    let mut acc: HashMap<String, Tensor> = HashMap::new();
    let (mut loss_sum, mut tokens) = (0.0f64, 0usize);
    let vars = model.named_vars();
    let sinks = model.use_fused(true, false).then(|| GradSinks::new(model));
    for chunk in examples.chunks(micro.max(1)) {
        let (sum, n) = nll_sum(model, chunk, true, sinks.as_ref())?;
        if n == 0 {
            continue;
        }
        loss_sum += sum.to_scalar::<f32>()? as f64;
        tokens += n;
        let grads = sum.backward()?;
        for (name, var) in &vars {
            if let Some(g) = grads.get(var.as_tensor()) {
                accumulate(&mut acc, name, g)?;
            }
        }
    }
    if tokens == 0 {
        return Err(PolicyError::BadInput(
            "macro batch has no target tokens".into(),
        ));
    }
    // Σ g² of slot gradients, summed by the products that wrote them while still in cache.
    let mut squares: HashMap<String, f64> = HashMap::new();
    if let Some(s) = &sinks {
        for (name, g, sq) in s.take(model)? {
            if let Some(sq) = sq {
                squares.insert(name.clone(), sq);
            }
            if acc.insert(name.clone(), g).is_some() {
                return Err(PolicyError::BadInput(format!(
                    "{name}: gradient both in a slot and from autograd"
                )));
            }
        }
    }
    let inv = 1.0 / tokens as f64;
    let sq = sum_of_squares(&acc, &squares)?;
    Ok(MacroGradients {
        grad_sums: acc,
        scale: inv,
        loss: loss_sum * inv,
        target_tokens: tokens,
        grad_norm: sq.sqrt() * inv,
    })
}

/// Optimizer, schedule and gradient accumulator.
pub struct Trainer {
    pub cfg: PolicyConfig,
    pub opt: AdamW,
    pub state: TrainerState,
}

impl Trainer {
    pub fn new(cfg: PolicyConfig) -> Self {
        Trainer {
            opt: AdamW::new(&cfg),
            cfg,
            state: TrainerState::default(),
        }
    }

    /// Linear warm-up to `learning_rate` over `warmup_steps`, then constant (paper §4.1).
    pub fn lr_at(&self, step: usize) -> f64 {
        let w = self.cfg.warmup_steps;
        if w == 0 || step >= w {
            self.cfg.learning_rate
        } else {
            self.cfg.learning_rate * (step + 1) as f64 / w as f64
        }
    }

    /// One optimizer step on a macro batch: forward/backward in micro-batches (accumulating
    /// gradients of the unnormalised sum), divide by the macro batch's target tokens, clip,
    /// update.
    pub fn step(&mut self, model: &Llama, examples: &[TrainExample]) -> Result<StepStats> {
        self.opt.allocate_state(model);
        let MacroGradients {
            grad_sums,
            scale,
            loss,
            target_tokens: tokens,
            grad_norm,
        } = macro_gradients(model, examples, self.cfg.micro_batch)?;
        if !grad_norm.is_finite() {
            return Err(PolicyError::BadInput(format!(
                "gradient norm is {grad_norm}; update skipped"
            )));
        }
        let clip = if self.cfg.max_grad_norm > 0.0 && grad_norm > self.cfg.max_grad_norm {
            self.cfg.max_grad_norm / grad_norm
        } else {
            1.0
        };
        let lr = self.lr_at(self.state.step);
        self.opt
            .update_scaled(model, &grad_sums, lr, scale * clip)?;
        self.state.step += 1;
        self.state.data_position += examples.len();
        Ok(StepStats {
            step: self.state.step,
            loss,
            target_tokens: tokens,
            grad_norm,
            lr,
        })
    }

    /// Writes the model directory plus `trainer_state.json` and the optimizer's moments in
    /// [`OPTIMIZER_STATE`] (a subfolder: a model loader never reads it, and a model is shared
    /// or uploaded without the moments, which are twice its size).
    pub fn save_checkpoint(&self, model: &Llama, dir: &Path) -> Result<()> {
        model.save(dir)?;
        let state = self.opt.state_tensors(model)?;
        if !state.is_empty() {
            let path = dir.join(OPTIMIZER_STATE);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| PolicyError::io(parent, e))?;
            }
            candle_core::safetensors::save(&state, &path)?;
            // A checkpoint written before the moments moved: the old copy is stale now.
            let legacy = dir.join(LEGACY_OPTIMIZER_STATE);
            if legacy.exists() {
                std::fs::remove_file(&legacy).map_err(|e| PolicyError::io(&legacy, e))?;
            }
        }
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| PolicyError::Config(format!("cannot serialise trainer state: {e}")))?;
        let path = dir.join("trainer_state.json");
        std::fs::write(&path, text + "\n").map_err(|e| PolicyError::io(&path, e))
    }

    /// Restores optimizer state and position from a checkpoint written by `save_checkpoint`
    /// (the model itself is loaded with `Llama::load`).
    pub fn resume(cfg: PolicyConfig, dir: &Path) -> Result<Trainer> {
        let path = dir.join("trainer_state.json");
        let text = std::fs::read_to_string(&path).map_err(|e| PolicyError::io(&path, e))?;
        let state: TrainerState = serde_json::from_str(&text).map_err(|e| {
            PolicyError::Config(format!("{}: line {}: {e}", path.display(), e.line()))
        })?;
        let mut t = Trainer::new(cfg);
        t.opt.step = state.step;
        let opt_path = [OPTIMIZER_STATE, LEGACY_OPTIMIZER_STATE]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.exists());
        if let Some(opt_path) = opt_path {
            for (k, v) in candle_core::safetensors::load(&opt_path, &candle_core::Device::Cpu)? {
                let data: Vec<f32> = v.flatten_all()?.to_dtype(DType::F32)?.to_vec1()?;
                if let Some(name) = k.strip_prefix("m.") {
                    t.opt.m.insert(name.to_string(), data);
                } else if let Some(name) = k.strip_prefix("v.") {
                    t.opt.v.insert(name.to_string(), data);
                }
            }
        }
        t.state = state;
        Ok(t)
    }
}

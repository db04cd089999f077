//! The weighted cross-entropy.

use super::*;

// ---------------------------------------------------------------------------------------------
// Weighted cross-entropy: Σ_i w_i (logsumexp(z_i) − z_i[y_i]) over logits rows.

pub(super) struct WeightedCe {
    labels: Vec<u32>,
    weights: Vec<f32>,
    /// logsumexp of each row, saved by the forward pass for the backward pass.
    lse: Mutex<Vec<f32>>,
}

pub(super) fn row_lse(z: &[f32]) -> f32 {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    max + crate::vexp::exp_sum(z, max).ln()
}

impl CustomOp1 for WeightedCe {
    fn name(&self) -> &'static str {
        "fused-weighted-cross-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let z = f32_slice(s, l, "weighted_ce")?;
        let (n, v) = l.shape().dims2()?;
        if self.labels.len() != n || self.weights.len() != n {
            bail!("weighted_ce: {n} rows but {} labels and {} weights", self.labels.len(), self.weights.len())
        }
        if let Some(&bad) = self.labels.iter().find(|&&y| y as usize >= v) {
            bail!("weighted_ce: label {bad} is outside the vocabulary ({v})")
        }
        let mut lse = vec![0f32; n];
        let out = SharedMut(lse.as_mut_ptr());
        par_ranges(n, 8, |range| {
            // SAFETY: each range of rows is written by exactly one worker.
            let dst = unsafe { out.slice(range.clone()) };
            for (k, i) in range.enumerate() {
                dst[k] = row_lse(&z[i * v..(i + 1) * v]);
            }
        });
        let mut total = 0f32;
        for i in 0..n {
            total += self.weights[i] * (lse[i] - z[i * v + self.labels[i] as usize]);
        }
        *self.lse.lock().map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))? = lse;
        Ok((CpuStorage::F32(vec![total]), Shape::from(())))
    }

    fn bwd(&self, z: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        // dz_i = g · w_i · (softmax(z_i) − onehot(y_i))
        let gscale = g.to_scalar::<f32>()?;
        let (n, v) = z.dims2()?;
        let lse = self.lse.lock().map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))?;
        if lse.len() != n {
            bail!("weighted_ce: backward without forward")
        }
        let zc = z.contiguous()?;
        let (st, lay) = zc.storage_and_layout();
        let zs = match &*st {
            candle_core::Storage::Cpu(c) => f32_slice(c, lay, "weighted_ce")?,
            _ => bail!("weighted_ce: CPU only"),
        };
        let mut dz = vec![0f32; n * v];
        let out = SharedMut(dz.as_mut_ptr());
        par_ranges(n, 8, |range| {
            for i in range {
                // SAFETY: row i is written by exactly one worker.
                let dr = unsafe { out.slice(i * v..(i + 1) * v) };
                let c = gscale * self.weights[i];
                let zr = &zs[i * v..(i + 1) * v];
                if c == 0.0 {
                    continue; // weight-0 rows (and padding) contribute nothing
                }
                crate::vexp::exp_into(zr, dr, lse[i], c);
                dr[self.labels[i] as usize] -= c;
            }
        });
        drop(st);
        Ok(Some(Tensor::from_vec(dz, (n, v), z.device())?))
    }
}

/// `Σ_i weights_i · (−log softmax(logits_i)[labels_i])` as a scalar, for logits `[n, vocab]`.
pub fn weighted_cross_entropy(logits: &Tensor, labels: Vec<u32>, weights: Vec<f32>) -> Result<Tensor> {
    ensure_cpu_f32(logits, "weighted_ce")?;
    logits.contiguous()?.apply_op1(WeightedCe { labels, weights, lse: Mutex::new(Vec::new()) })
}

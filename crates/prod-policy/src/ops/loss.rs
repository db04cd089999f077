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
            bail!(
                "weighted_ce: {n} rows but {} labels and {} weights",
                self.labels.len(),
                self.weights.len()
            )
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
        *self
            .lse
            .lock()
            .map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))? = lse;
        Ok((CpuStorage::F32(vec![total]), Shape::from(())))
    }

    fn bwd(&self, z: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        // dz_i = g · w_i · (softmax(z_i) − onehot(y_i))
        let gscale = g.to_scalar::<f32>()?;
        let (n, v) = z.dims2()?;
        let lse = self
            .lse
            .lock()
            .map_err(|_| candle_core::Error::Msg("weighted_ce: poisoned state".into()))?;
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
pub fn weighted_cross_entropy(
    logits: &Tensor,
    labels: Vec<u32>,
    weights: Vec<f32>,
) -> Result<Tensor> {
    ensure_cpu_f32(logits, "weighted_ce")?;
    logits.contiguous()?.apply_op1(WeightedCe {
        labels,
        weights,
        lse: Mutex::new(Vec::new()),
    })
}

// ---------------------------------------------------------------------------------------------
// The head and the weighted cross-entropy as one node, over vocabulary chunks.

/// Vocabulary columns per chunk of [`HeadCe`]: a chunk's logits (`rows × 2,048` f32, 2 MB at
/// 256 rows) stay in cache from the product that writes them to the pass that reads them.
const HEAD_CHUNK: usize = 2048;

/// `Σ_i w_i (logsumexp(z_i) − z_i[y_i])` with `z = h · Wᵀ`, as one graph node: the head's
/// three products run per vocabulary chunk, each chunk a single-threaded product on one
/// core with its logits laid out contiguously (`[rows, chunk]`). Why: as one `[rows, vocab]`
/// product the logits' 196 KB row stride made the head's products run at 60–80% of the GEMM
/// rate, and the logits' gradient (50 MB at 256 rows) went through candle's autograd, which
/// zero-fills and re-sums it. Here the gradient is written over the saved logits, chunk by
/// chunk, and `W`'s gradient goes to its slot.
pub(crate) struct HeadCe {
    w: Tensor,
    sink: std::sync::Arc<GradSlot>,
    labels: Vec<u32>,
    weights: Vec<f32>,
    /// The logits, chunk after chunk (`[rows, width]` each), and each row's logsumexp.
    saved: Mutex<Option<(Vec<f32>, Vec<f32>)>>,
}

/// The chunks of a vocabulary of `v`: (first column, width).
fn head_chunks(v: usize) -> impl Iterator<Item = (usize, usize)> + Clone {
    (0..v.div_ceil(HEAD_CHUNK)).map(move |j| (j * HEAD_CHUNK, HEAD_CHUNK.min(v - j * HEAD_CHUNK)))
}

impl HeadCe {
    fn check(&self, n: usize, d: usize) -> Result<usize> {
        let (v, d2) = self.w.dims2()?;
        // Width 0 would leave the logits unwritten (a product over k = 0 writes nothing).
        if d == 0 {
            bail!("head: hidden states of width 0")
        }
        if d2 != d {
            bail!("head: hidden states are [{n}, {d}] but the head is [{v}, {d2}]")
        }
        if self.sink.len != v * d {
            bail!(
                "head: gradient slot of {} for a [{v}, {d}] weight",
                self.sink.len
            )
        }
        if self.labels.len() != n || self.weights.len() != n {
            bail!(
                "head: {n} rows but {} labels and {} weights",
                self.labels.len(),
                self.weights.len()
            )
        }
        if let Some(&bad) = self.labels.iter().find(|&&y| y as usize >= v) {
            bail!("head: label {bad} is outside the vocabulary ({v})")
        }
        Ok(v)
    }
}

impl HeadCe {
    /// The logits and log-sum-exps the forward pass saved for `[n, v]`, taken (a second
    /// backward is an error).
    fn take_saved(&self, n: usize, v: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let Some((z, lse)) = self
            .saved
            .lock()
            .map_err(|_| candle_core::Error::Msg("head: poisoned state".into()))?
            .take()
        else {
            bail!("head: backward without forward (or twice)")
        };
        if z.len() != n * v || lse.len() != n {
            bail!("head: saved logits of {} for [{n}, {v}]", z.len())
        }
        Ok((z, lse))
    }

    /// Chunk `(c0, cw)` of the logits, `[n, cw]`, turned in place into their gradient
    /// `g · w_i · (softmax(z_i) − onehot(y_i))`.
    fn logit_gradient(&self, dz: &mut [f32], (c0, cw): (usize, usize), lse: &[f32], g: f32) {
        for (i, row) in dz.chunks_exact_mut(cw).enumerate() {
            let c = g * self.weights[i];
            if c == 0.0 {
                row.fill(0.0); // weight-0 rows (and padding) contribute nothing
                continue;
            }
            crate::vexp::exp_in_place(row, lse[i], c);
            let y = self.labels[i] as usize;
            if (c0..c0 + cw).contains(&y) {
                row[y - c0] -= c;
            }
        }
    }
}

impl CustomOp1 for HeadCe {
    fn name(&self) -> &'static str {
        "fused-head-cross-entropy"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let h = f32_slice(s, l, "head")?;
        let (n, d) = l.shape().dims2()?;
        let v = self.check(n, d)?;
        let chunks: Vec<(usize, usize)> = head_chunks(v).collect();
        let mut z: Vec<f32> = Vec::with_capacity(n * v);
        // Per chunk and row: the row's largest logit in the chunk and Σ exp(z − that).
        let mut stats = vec![(0f32, 0f32); chunks.len() * n];
        let (zp, sp) = (z.as_mut_ptr() as usize, SharedMut(stats.as_mut_ptr()));
        with_slices(std::slice::from_ref(&self.w), "head", |w| {
            let w = w[0];
            par_ranges(chunks.len(), 2, |range| {
                for j in range {
                    let (c0, cw) = chunks[j];
                    let zc = (zp as *mut f32).wrapping_add(n * c0);
                    // SAFETY: chunk j's logits are rows·width elements at rows·c0 of z's
                    // capacity, written by this task only; h is [n, d], W's rows c0.. are
                    // [cw, d] (so Wᵀ has column stride d).
                    unsafe {
                        gemm_f32_on(
                            gemm::Parallelism::None,
                            n,
                            cw,
                            d,
                            zc,
                            cw as isize,
                            false,
                            h.as_ptr(),
                            1,
                            d as isize,
                            w[c0 * d..].as_ptr(),
                            d as isize,
                            1,
                        );
                        let zc = std::slice::from_raw_parts(zc, n * cw);
                        for (i, row) in zc.chunks_exact(cw).enumerate() {
                            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                            sp.write(j * n + i, (max, crate::vexp::exp_sum(row, max)));
                        }
                    }
                }
            });
            Ok(())
        })?;
        // SAFETY: the chunks cover all n·v elements, each written by its product above.
        unsafe { z.set_len(n * v) };
        let mut lse = vec![0f32; n];
        let mut total = 0f32;
        for i in 0..n {
            let max = (0..chunks.len())
                .map(|j| stats[j * n + i].0)
                .fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = (0..chunks.len())
                .map(|j| stats[j * n + i].1 * (stats[j * n + i].0 - max).exp())
                .sum();
            lse[i] = max + sum.ln();
            let y = self.labels[i] as usize;
            let (c0, cw) = chunks[y / HEAD_CHUNK];
            total += self.weights[i] * (lse[i] - z[n * c0 + i * cw + (y - c0)]);
        }
        *self
            .saved
            .lock()
            .map_err(|_| candle_core::Error::Msg("head: poisoned state".into()))? = Some((z, lse));
        Ok((CpuStorage::F32(vec![total]), Shape::from(())))
    }

    // A little over a screen: each vocabulary chunk's gradient and its two products stay in one
    // parallel task, so that the chunk's logits are used while still in cache.
    fn bwd(&self, h: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        // dz_i = g · w_i · (softmax(z_i) − onehot(y_i)); dh = dz · W; dW = dzᵀ · h.
        let gscale = g.to_scalar::<f32>()?;
        let (n, d) = h.dims2()?;
        let v = self.check(n, d)?;
        let (mut z, lse) = self.take_saved(n, v)?;
        let chunks: Vec<(usize, usize)> = head_chunks(v).collect();
        let h = h.contiguous()?;
        let mut slot = self.sink.lock()?;
        let accumulate = slot.is_some();
        let dw = slot.get_or_insert_with(|| Vec::with_capacity(v * d));
        let (zp, dwp) = (z.as_mut_ptr() as usize, dw.as_mut_ptr() as usize);
        let mut squares = vec![0f64; chunks.len()];
        let sq = SharedMut(squares.as_mut_ptr());
        // One dh per task (a few per core), summed below.
        let partials: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());
        with_slices(&[h, self.w.clone()], "head backward", |s| {
            let (h, w) = (s[0], s[1]);
            par_ranges(chunks.len(), 2, |range| {
                let mut dh: Vec<f32> = Vec::with_capacity(n * d);
                for (t, j) in range.clone().enumerate() {
                    let (c0, cw) = chunks[j];
                    // SAFETY: chunk j's logits and W-gradient rows are this task's alone;
                    // every pointer stays within the [n, cw], [cw, d] and [n, d] matrices.
                    unsafe {
                        let dz =
                            std::slice::from_raw_parts_mut((zp as *mut f32).add(n * c0), n * cw);
                        self.logit_gradient(dz, (c0, cw), &lse, gscale);
                        let dwc = (dwp as *mut f32).add(c0 * d);
                        gemm_f32_on(
                            gemm::Parallelism::None,
                            cw,
                            d,
                            n,
                            dwc,
                            d as isize,
                            accumulate,
                            dz.as_ptr(),
                            cw as isize,
                            1,
                            h.as_ptr(),
                            1,
                            d as isize,
                        );
                        let rows = std::slice::from_raw_parts(dwc, cw * d);
                        sq.write(j, rows.chunks(1 << 12).map(sum_squares_run).sum());
                        gemm_f32_on(
                            gemm::Parallelism::None,
                            n,
                            d,
                            cw,
                            dh.as_mut_ptr(),
                            d as isize,
                            t > 0,
                            dz.as_ptr(),
                            1,
                            cw as isize,
                            w[c0 * d..].as_ptr(),
                            1,
                            d as isize,
                        );
                    }
                }
                if !range.is_empty() {
                    // SAFETY: the first product above wrote all n·d elements.
                    unsafe { dh.set_len(n * d) };
                    partials.lock().unwrap_or_else(|e| e.into_inner()).push(dh);
                }
            });
            Ok(())
        })?;
        // SAFETY: the chunks cover all v·d elements (written, or added to when accumulating).
        unsafe { dw.set_len(v * d) };
        drop(slot);
        self.sink.set_squares(Some(squares.iter().sum()))?;
        let mut parts = partials.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut dh = parts.pop().unwrap_or_else(|| vec![0f32; n * d]);
        for p in &parts {
            add_into(&mut dh, p);
        }
        Ok(Some(Tensor::from_vec(dh, (n, d), g.device())?))
    }
}

/// The head `h · wᵀ` followed by [`weighted_cross_entropy`], as one node whose weight gradient
/// goes to `sink` (`h` `[n, d]`, `w` `[vocab, d]`).
pub(crate) fn head_cross_entropy(
    h: &Tensor,
    w: &Tensor,
    sink: std::sync::Arc<GradSlot>,
    labels: Vec<u32>,
    weights: Vec<f32>,
) -> Result<Tensor> {
    ensure_cpu_f32(h, "head")?;
    ensure_cpu_f32(w, "head")?;
    h.contiguous()?.apply_op1(HeadCe {
        w: w.contiguous()?,
        sink,
        labels,
        weights,
        saved: Mutex::new(None),
    })
}

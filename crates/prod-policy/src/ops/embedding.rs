//! The embedding lookup whose gradient is scattered into a slot.

use super::*;

// ---------------------------------------------------------------------------------------------
// Embedding lookup whose gradient is scattered into a gradient slot.

pub(super) struct Embedding {
    ids: Vec<u32>,
    sink: std::sync::Arc<GradSlot>,
}

impl CustomOp1 for Embedding {
    fn name(&self) -> &'static str {
        "fused-embedding"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> Result<(CpuStorage, Shape)> {
        let w = f32_slice(s, l, "embedding")?;
        let (v, d) = l.shape().dims2()?;
        let mut out = Vec::with_capacity(self.ids.len() * d);
        for &id in &self.ids {
            if id as usize >= v {
                bail!("embedding: id {id} is outside the vocabulary ({v})")
            }
            out.extend_from_slice(&w[id as usize * d..(id as usize + 1) * d]);
        }
        Ok((CpuStorage::F32(out), Shape::from((self.ids.len(), d))))
    }

    fn bwd(&self, w: &Tensor, _res: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
        let (v, d) = w.dims2()?;
        if self.sink.len != v * d {
            bail!(
                "embedding: gradient slot of {} for a [{v}, {d}] table",
                self.sink.len
            )
        }
        let g = g.contiguous()?;
        let (gs, gl) = g.storage_and_layout();
        let gv = match &*gs {
            candle_core::Storage::Cpu(c) => f32_slice(c, gl, "embedding")?,
            _ => bail!("embedding: CPU only"),
        };
        let mut slot = self.sink.lock()?;
        // The slot's kept Σ g² (the tied head's, over the whole table) stays true if the rows
        // looked up are taken out before the update and put back after: a few hundred rows
        // instead of a fresh pass over the table (113 MB at SmolLM2's shape).
        let kept = self.sink.take_squares()?;
        let mut rows: Vec<usize> = self.ids.iter().map(|&id| id as usize).collect();
        rows.sort_unstable();
        rows.dedup();
        let row_squares = |buf: &[f32]| -> f64 {
            rows.iter()
                .map(|&r| sum_squares_run(&buf[r * d..(r + 1) * d]))
                .sum()
        };
        // Only the rows looked up change: a fresh slot must start at zero (the tied head, when
        // there is one, has usually written it already).
        let buf = slot.get_or_insert_with(|| vec![0f32; v * d]);
        let before = kept.map(|_| row_squares(buf));
        for (r, &id) in self.ids.iter().enumerate() {
            let dst = &mut buf[id as usize * d..(id as usize + 1) * d];
            for (a, b) in dst.iter_mut().zip(&gv[r * d..(r + 1) * d]) {
                *a += b;
            }
        }
        if let (Some(total), Some(before)) = (kept, before) {
            self.sink
                .set_squares(Some(total - before + row_squares(buf)))?;
        }
        Ok(None)
    }
}

/// Rows `ids` of `w` `[vocab, d]`; the gradient of `w` is accumulated into `sink`.
pub(crate) fn embedding_sink(
    w: &Tensor,
    ids: Vec<u32>,
    sink: std::sync::Arc<GradSlot>,
) -> Result<Tensor> {
    ensure_cpu_f32(w, "embedding")?;
    w.contiguous()?.apply_op1(Embedding { ids, sink })
}

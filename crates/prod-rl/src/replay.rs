//! The replay buffer (paper §3.2, Step 3: "we use a replay buffer to stabilize the training").
//!
//! Fixed capacity, first in first out: each round's weighted examples are pushed, the oldest
//! leave once the buffer is full, and a round's training batch mixes the round's own examples
//! with `mix` (a fraction) of that many drawn uniformly, without replacement and seeded, from
//! the buffer's older content.

use std::collections::VecDeque;

use rand::seq::index::sample;
use rand::Rng;

#[derive(Clone, Debug)]
pub struct ReplayBuffer<T> {
    capacity: usize,
    items: VecDeque<T>,
}

impl<T: Clone> ReplayBuffer<T> {
    pub fn new(capacity: usize) -> Self {
        ReplayBuffer {
            capacity,
            items: VecDeque::with_capacity(capacity.min(1 << 16)),
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Add a round's examples; the oldest are evicted beyond capacity.
    pub fn extend(&mut self, new: impl IntoIterator<Item = T>) {
        for x in new {
            if self.capacity == 0 {
                return;
            }
            if self.items.len() == self.capacity {
                self.items.pop_front();
            }
            self.items.push_back(x);
        }
    }

    /// Up to `n` distinct items drawn uniformly at random.
    pub fn draw(&self, n: usize, rng: &mut impl Rng) -> Vec<T> {
        let n = n.min(self.items.len());
        sample(rng, self.items.len(), n)
            .into_iter()
            .map(|i| self.items[i].clone())
            .collect()
    }

    /// A round's batch: the fresh examples, plus `round(mix × fresh)` replayed ones drawn from
    /// the buffer *before* the fresh ones are added; then the fresh ones join the buffer.
    pub fn mix_round(&mut self, fresh: Vec<T>, mix: f64, rng: &mut impl Rng) -> Vec<T> {
        let want = (fresh.len() as f64 * mix.max(0.0)).round() as usize;
        let mut batch = self.draw(want, rng);
        self.extend(fresh.iter().cloned());
        batch.splice(0..0, fresh);
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn evicts_oldest_and_mixes() {
        let mut b = ReplayBuffer::new(5);
        b.extend(0..7);
        assert_eq!(b.items.iter().copied().collect::<Vec<_>>(), [2, 3, 4, 5, 6]);
        let mut rng = SmallRng::seed_from_u64(3);
        let batch = b.mix_round(vec![10, 11], 1.0, &mut rng);
        assert_eq!(&batch[..2], [10, 11]);
        assert_eq!(batch.len(), 4);
        assert!(batch[2..].iter().all(|x| (2..=6).contains(x)) && batch[2] != batch[3]);
        assert_eq!(
            b.items.iter().copied().collect::<Vec<_>>(),
            [4, 5, 6, 10, 11]
        );
        assert_eq!(b.draw(100, &mut rng).len(), 5);
        let mut empty: ReplayBuffer<u8> = ReplayBuffer::new(0);
        empty.extend([1, 2]);
        assert!(empty.is_empty());
    }
}

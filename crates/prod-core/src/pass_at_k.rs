//! pass@k (paper §4.3): the fraction of theorems proved by at least one of k independent samples,
//! estimated without bias from n ≥ k samples per theorem (Chen et al., 2021), with a 95%
//! confidence interval over theorems and a per-depth breakdown (paper Fig. 5).
//!
//! The interval is the hull of two: the bootstrap percentile interval (theorems resampled with
//! replacement) and a score interval — Wilson's for pass@k, Newcombe's hybrid score interval
//! for a paired difference. The bootstrap alone collapses to a point when every theorem scores
//! the same (0 of 50 proved gives "0–0"), which claims a certainty 50 theorems cannot give; the
//! score intervals stay open at 0 and n (0 of 50: 0–7.1%). Per-theorem pass@k scores lie in
//! [0, 1], so their variance is at most p(1 − p) and Wilson's interval with the number of
//! theorems as n is at least as wide as the normal interval of their mean.
//!
//! Infra failures are not proof failures: callers pass only samples that were *judged*; a sample
//! lost to a crash is left out of `n`, never counted as a failure. A theorem with fewer than k
//! judged samples is skipped (and counted as skipped), never scored as unproved.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Unbiased estimate of P(at least one of k samples is correct) from n samples with c correct:
/// `1 - C(n-c, k) / C(n, k)`, computed as a product so it never overflows.
/// `None` when `k == 0`, `k > n` or `c > n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let fail: f64 = ((n - c + 1)..=n)
        .map(|i| 1.0 - k as f64 / i as f64)
        .product();
    Some(1.0 - fail)
}

/// What happened to one theorem: judged samples and how many of them were globally correct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TheoremOutcome {
    pub samples: usize,
    pub correct: usize,
}

/// pass@k over a set of theorems.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassAtK {
    pub k: usize,
    /// Mean of the per-theorem unbiased estimates.
    pub estimate: f64,
    /// 95% interval: the hull of the bootstrap percentile interval (theorems resampled with
    /// replacement) and Wilson's score interval (module docs).
    pub ci_low: f64,
    pub ci_high: f64,
    /// Theorems with at least k judged samples.
    pub theorems: usize,
    /// Theorems left out because fewer than k samples were judged.
    pub skipped: usize,
}

/// How the bootstrap of a 95% interval is drawn: `resamples` rounds of theorems drawn with
/// replacement from the random stream of `seed`. The same settings give the same interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bootstrap {
    /// Rounds (0 disables the bootstrap: the interval is then the score interval alone).
    pub resamples: usize,
    pub seed: u64,
}

impl Bootstrap {
    /// Rounds unless a run says otherwise: every job's and command's default.
    pub const DEFAULT_RESAMPLES: usize = 1000;

    /// The default number of rounds from the stream of `seed`.
    pub fn seeded(seed: u64) -> Self {
        Bootstrap {
            resamples: Self::DEFAULT_RESAMPLES,
            seed,
        }
    }
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap::seeded(0)
    }
}

/// pass@k with its 95% interval: the hull of the seeded bootstrap over theorems and Wilson's
/// score interval. `None` if no theorem has k judged samples.
pub fn estimate(outcomes: &[TheoremOutcome], k: usize, boot: Bootstrap) -> Option<PassAtK> {
    let scores: Vec<f64> = outcomes
        .iter()
        .filter_map(|o| pass_at_k(o.samples, o.correct, k))
        .collect();
    if scores.is_empty() {
        return None;
    }
    let estimate = scores.iter().sum::<f64>() / scores.len() as f64;
    let (ci_low, ci_high) = bootstrap_mean(&scores, boot).unwrap_or((estimate, estimate));
    let (w_low, w_high) = wilson(estimate, scores.len());
    Some(PassAtK {
        k,
        estimate,
        ci_low: ci_low.min(w_low),
        ci_high: ci_high.max(w_high),
        theorems: scores.len(),
        skipped: outcomes.len() - scores.len(),
    })
}

/// The difference of two methods' pass@k on the same theorems (B − A), with a paired 95%
/// interval: the hull of the paired bootstrap (each resample draws theorems with replacement and
/// takes both methods' scores of the drawn theorems together, so the theorem-to-theorem spread
/// both methods share does not widen it) and Newcombe's hybrid score interval for paired rates
/// (which uses the correlation of the two methods' scores for the same pairing, and stays open
/// when no theorem differs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedDifference {
    pub k: usize,
    /// Mean over the paired theorems of `pass@k(B) − pass@k(A)`.
    pub estimate: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Theorems where both methods have at least k judged samples.
    pub theorems: usize,
    /// Theorems left out: fewer than k judged samples in either method.
    pub skipped: usize,
}

/// pass@k of `b` minus pass@k of `a`, theorem by theorem (`a[i]` and `b[i]` are the same
/// theorem), with a seeded paired bootstrap (0 rounds: Newcombe's interval alone). `None` when
/// the lengths differ or no theorem has k judged samples in both.
pub fn paired_difference(
    a: &[TheoremOutcome],
    b: &[TheoremOutcome],
    k: usize,
    boot: Bootstrap,
) -> Option<PairedDifference> {
    if a.len() != b.len() {
        return None;
    }
    // Both methods' scores of each theorem where both have k judged samples.
    let paired: Vec<(f64, f64)> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| {
            Some((
                pass_at_k(x.samples, x.correct, k)?,
                pass_at_k(y.samples, y.correct, k)?,
            ))
        })
        .collect();
    if paired.is_empty() {
        return None;
    }
    let diffs: Vec<f64> = paired.iter().map(|(x, y)| y - x).collect();
    let n = diffs.len();
    let estimate = diffs.iter().sum::<f64>() / n as f64;
    let (n_low, n_high) = newcombe_paired(&paired);
    let (ci_low, ci_high) = bootstrap_mean(&diffs, boot).unwrap_or((estimate, estimate));
    Some(PairedDifference {
        k,
        estimate,
        ci_low: ci_low.min(n_low),
        ci_high: ci_high.max(n_high),
        theorems: n,
        skipped: a.len() - n,
    })
}

/// The seeded bootstrap 95% percentile interval of the mean of `values` (resampled with
/// replacement); `None` for 0 rounds or no values.
fn bootstrap_mean(values: &[f64], boot: Bootstrap) -> Option<(f64, f64)> {
    let Bootstrap { resamples, seed } = boot;
    let n = values.len();
    if resamples == 0 || n == 0 {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| values[rng.gen_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Some((at(0.025), at(0.975)))
}

/// z of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// Wilson's 95% score interval of a rate `p` observed on `n` units (`n` = 0: the whole [0, 1]).
pub fn wilson(p: f64, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (n, z2) = (n as f64, Z95 * Z95);
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Newcombe's hybrid score 95% interval (his method 10) of `mean(b) − mean(a)` over pairs
/// `(a, b)` of scores in [0, 1]: each mean's Wilson interval, combined with the correlation of
/// the pairs (taken as 0 where either side has no spread, as Newcombe does).
fn newcombe_paired(pairs: &[(f64, f64)]) -> (f64, f64) {
    let n = pairs.len();
    let mean = |f: fn(&(f64, f64)) -> f64| pairs.iter().map(f).sum::<f64>() / n.max(1) as f64;
    let (pa, pb) = (mean(|p| p.0), mean(|p| p.1));
    let (la, ua) = wilson(pa, n);
    let (lb, ub) = wilson(pb, n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for &(x, y) in pairs {
        sab += (x - pa) * (y - pb);
        saa += (x - pa) * (x - pa);
        sbb += (y - pb) * (y - pb);
    }
    let phi = if saa > 0.0 && sbb > 0.0 {
        sab / (saa * sbb).sqrt()
    } else {
        0.0
    };
    let d = pb - pa;
    let below = ((pb - lb).powi(2) - 2.0 * phi * (pb - lb) * (ua - pa) + (ua - pa).powi(2))
        .max(0.0)
        .sqrt();
    let above = ((ub - pb).powi(2) - 2.0 * phi * (ub - pb) * (pa - la) + (pa - la).powi(2))
        .max(0.0)
        .sqrt();
    ((d - below).max(-1.0), (d + above).min(1.0))
}

/// Paper Fig. 5: theorems counted by (depth of the ground-truth tree, depth of the tree that
/// proved it); `None` in the second place means "not proved".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DepthTable {
    pub cells: BTreeMap<(Option<u32>, Option<u32>), usize>,
}

impl DepthTable {
    pub fn add(&mut self, ground_truth_depth: Option<u32>, proved_depth: Option<u32>) {
        *self
            .cells
            .entry((ground_truth_depth, proved_depth))
            .or_default() += 1;
    }
    /// Rows as (ground-truth depth, proving depth, count), for JSON and tables.
    pub fn rows(&self) -> Vec<(Option<u32>, Option<u32>, usize)> {
        self.cells.iter().map(|(&(g, p), &c)| (g, p, c)).collect()
    }
}

#[cfg(test)]
mod tests {
    fn boot(resamples: usize, seed: u64) -> Bootstrap {
        Bootstrap { resamples, seed }
    }

    use super::*;

    fn binomial(n: u64, k: u64) -> f64 {
        if k > n {
            return 0.0;
        }
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn matches_the_binomial_definition() {
        for n in 1..=20u64 {
            for c in 0..=n {
                for k in 1..=n {
                    let want = 1.0 - binomial(n - c, k) / binomial(n, k);
                    let got = pass_at_k(n as usize, c as usize, k as usize).unwrap();
                    assert!(
                        (got - want).abs() < 1e-9,
                        "n={n} c={c} k={k}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn edge_cases() {
        assert_eq!(pass_at_k(4, 0, 2), Some(0.0));
        assert_eq!(pass_at_k(4, 4, 4), Some(1.0));
        assert_eq!(pass_at_k(4, 1, 1), Some(0.25));
        assert_eq!(pass_at_k(4, 1, 5), None);
        assert_eq!(pass_at_k(4, 5, 1), None);
        assert_eq!(pass_at_k(4, 1, 0), None);
    }

    #[test]
    fn estimate_skips_short_theorems_and_brackets_the_mean() {
        let outcomes = [
            TheoremOutcome {
                samples: 16,
                correct: 0,
            },
            TheoremOutcome {
                samples: 16,
                correct: 16,
            },
            TheoremOutcome {
                samples: 16,
                correct: 4,
            },
            TheoremOutcome {
                samples: 2,
                correct: 2,
            }, // infra ate samples: skipped, not failed
        ];
        let r = estimate(&outcomes, 8, boot(2000, 7)).unwrap();
        assert_eq!((r.theorems, r.skipped), (3, 1));
        let p4 = pass_at_k(16, 4, 8).unwrap();
        assert!((r.estimate - (1.0 + p4) / 3.0).abs() < 1e-12);
        assert!(r.ci_low <= r.estimate && r.estimate <= r.ci_high);
        assert!(r.ci_low >= 0.0 && r.ci_high <= 1.0 && r.ci_low < r.ci_high);
        assert_eq!(
            estimate(&outcomes, 8, boot(2000, 7)),
            Some(r),
            "seeded bootstrap is reproducible"
        );
        assert!(estimate(&outcomes[3..], 8, boot(10, 0)).is_none());
    }

    #[test]
    fn intervals_stay_open_at_zero_and_n() {
        let none = vec![
            TheoremOutcome {
                samples: 4,
                correct: 0
            };
            50
        ];
        let all = vec![
            TheoremOutcome {
                samples: 4,
                correct: 4
            };
            50
        ];
        let z = estimate(&none, 4, boot(1000, 1)).unwrap();
        assert_eq!((z.estimate, z.ci_low), (0.0, 0.0));
        assert!((z.ci_high - 0.0713).abs() < 1e-3, "0 of 50: {z:?}");
        let f = estimate(&all, 4, boot(1000, 1)).unwrap();
        assert_eq!((f.estimate, f.ci_high), (1.0, 1.0));
        assert!((f.ci_low - 0.9287).abs() < 1e-3, "50 of 50: {f:?}");
        // Both prove nothing: no theorem differs, yet 50 theorems cannot rule out ±7%.
        let d = paired_difference(&none, &none, 1, boot(1000, 1)).unwrap();
        assert_eq!(d.estimate, 0.0);
        assert!(d.ci_low < -0.07 && d.ci_high > 0.07, "{d:?}");
        // One method proves all, the other none: the interval stays inside [-1, 1].
        let d = paired_difference(&none, &all, 1, boot(1000, 1)).unwrap();
        assert_eq!(d.ci_high, 1.0);
        assert!(d.ci_low > 0.85 && d.ci_low < 1.0, "{d:?}");
    }

    #[test]
    fn wilson_matches_published_values() {
        // Newcombe (1998), Table I: 81/263 → 0.2553–0.3662; 15/148 → 0.0624–0.1605.
        let (l, h) = wilson(81.0 / 263.0, 263);
        assert!(
            (l - 0.2553).abs() < 5e-4 && (h - 0.3662).abs() < 5e-4,
            "{l} {h}"
        );
        let (l, h) = wilson(15.0 / 148.0, 148);
        assert!(
            (l - 0.0624).abs() < 5e-4 && (h - 0.1605).abs() < 5e-4,
            "{l} {h}"
        );
        assert_eq!(wilson(0.3, 0), (0.0, 1.0));
    }

    #[test]
    fn paired_difference_of_identical_methods_contains_zero() {
        let a: Vec<TheoremOutcome> = (0..40)
            .map(|i| TheoremOutcome {
                samples: 8,
                correct: [0, 1, 3, 8][i % 4],
            })
            .collect();
        let d = paired_difference(&a, &a, 4, boot(1000, 3)).unwrap();
        assert_eq!((d.estimate, d.theorems, d.skipped), (0.0, 40, 0));
        // Perfectly correlated and equal: only the asymmetry of the score intervals is left.
        assert!(d.ci_low <= 0.0 && d.ci_high >= 0.0, "{d:?}");
        assert!(d.ci_high - d.ci_low < 0.05, "{d:?}");
        // Same rates, different theorems: no systematic difference, the interval straddles 0.
        let b: Vec<TheoremOutcome> = (0..40).map(|i| a[(i + 1) % 40]).collect();
        let d = paired_difference(&a, &b, 1, boot(2000, 3)).unwrap();
        assert!(d.ci_low < 0.0 && d.ci_high > 0.0, "{d:?}");
    }

    #[test]
    fn paired_difference_of_a_clearly_better_method_is_above_zero() {
        // B proves one more sample out of 8 on every theorem: a small gain, but on every
        // theorem, so the paired interval excludes 0 although both unpaired intervals (over
        // theorems of very different difficulty) overlap widely.
        let a: Vec<TheoremOutcome> = (0..30)
            .map(|i| TheoremOutcome {
                samples: 8,
                correct: if i % 2 == 0 { 0 } else { 6 },
            })
            .collect();
        let b: Vec<TheoremOutcome> = a
            .iter()
            .map(|o| TheoremOutcome {
                samples: 8,
                correct: o.correct + 1,
            })
            .collect();
        let d = paired_difference(&a, &b, 1, boot(2000, 5)).unwrap();
        assert!((d.estimate - 0.125).abs() < 1e-12, "{d:?}");
        assert!(d.ci_low > 0.0 && d.ci_high >= d.estimate, "{d:?}");
        let (ea, eb) = (
            estimate(&a, 1, boot(2000, 5)).unwrap(),
            estimate(&b, 1, boot(2000, 5)).unwrap(),
        );
        assert!(
            eb.ci_low < ea.ci_high,
            "the unpaired intervals overlap: {ea:?} {eb:?}"
        );
        // The reverse is below 0; theorems short of k judged samples in either are skipped.
        let mut b2 = b.clone();
        b2[0].samples = 2;
        let r = paired_difference(&b2, &a, 4, boot(500, 5)).unwrap();
        assert!(
            r.ci_high < 0.0 && r.theorems == 29 && r.skipped == 1,
            "{r:?}"
        );
        assert_eq!(paired_difference(&a, &b[1..], 1, boot(10, 0)), None);
    }

    #[test]
    fn depth_table_counts() {
        let mut t = DepthTable::default();
        t.add(Some(1), Some(0));
        t.add(Some(1), Some(0));
        t.add(Some(2), None);
        assert_eq!(t.rows(), [(Some(1), Some(0), 2), (Some(2), None, 1)]);
    }
}

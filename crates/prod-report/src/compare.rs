//! Methods compared on the same theorems: the difference of pass@k between two evaluations with
//! a paired bootstrap 95% interval (`prod_core::pass_at_k::paired_difference`: theorems are
//! resampled jointly, both methods' scores of a drawn theorem together). Two methods' own
//! intervals may overlap while every theorem moves the same way; only the paired interval of
//! the difference tells whether one is better on these theorems.

use prod_core::pass_at_k::{paired_difference, TheoremOutcome};
use serde::{Deserialize, Serialize};

use crate::model::Evaluation;

/// pass@k of `method` minus pass@k of `baseline` on the theorems both evaluated.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PassAtKDifference {
    pub method: String,
    pub baseline: String,
    pub k: usize,
    pub estimate: f64,
    /// Paired bootstrap 95% percentile interval of the difference.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Theorems in both evaluations with at least k judged trees in each.
    pub theorems: usize,
    /// Theorems of the baseline left out (missing from `method`, or fewer than k judged trees).
    pub skipped: usize,
}

/// `method − baseline` for pass@`k`, theorems matched by id (the baseline's order) from each
/// evaluation's per-theorem table. `None` when no theorem can be paired (or the evaluations have
/// no per-theorem table).
pub fn pass_at_k_difference(
    baseline: &Evaluation,
    method: &Evaluation,
    k: usize,
    resamples: usize,
    seed: u64,
) -> Option<PassAtKDifference> {
    let of_method: std::collections::HashMap<&str, TheoremOutcome> = method
        .theorems_detail
        .iter()
        .map(|t| {
            (
                t.id.as_str(),
                TheoremOutcome {
                    samples: t.trees,
                    correct: t.proved_trees,
                },
            )
        })
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in &baseline.theorems_detail {
        if let Some(o) = of_method.get(t.id.as_str()) {
            a.push(TheoremOutcome {
                samples: t.trees,
                correct: t.proved_trees,
            });
            b.push(*o);
        }
    }
    let d = paired_difference(&a, &b, k, resamples, seed)?;
    Some(PassAtKDifference {
        method: method.name.clone(),
        baseline: baseline.name.clone(),
        k,
        estimate: d.estimate,
        ci_low: d.ci_low,
        ci_high: d.ci_high,
        theorems: d.theorems,
        skipped: baseline.theorems_detail.len() - d.theorems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TheoremDetail;

    fn eval(name: &str, proved: &[(usize, usize)]) -> Evaluation {
        Evaluation {
            name: name.into(),
            theorems_detail: proved
                .iter()
                .enumerate()
                .map(|(i, &(trees, proved_trees))| TheoremDetail {
                    id: format!("t{i}"),
                    trees,
                    proved_trees,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn identical_methods_differ_by_zero_and_a_better_one_is_above_zero() {
        let base: Vec<(usize, usize)> = (0..30).map(|i| (8, i % 5)).collect();
        let a = eval("ProD-SFT", &base);
        let same = pass_at_k_difference(&a, &eval("copy", &base), 1, 1000, 0).unwrap();
        assert!(
            same.ci_low <= 0.0 && same.ci_high >= 0.0 && same.estimate == 0.0,
            "{same:?}"
        );
        let better: Vec<(usize, usize)> = base.iter().map(|&(n, c)| (n, c + 3)).collect();
        let d = pass_at_k_difference(&a, &eval("ProD-RL", &better), 1, 1000, 0).unwrap();
        assert!(d.ci_low > 0.0, "{d:?}");
        assert_eq!(
            (
                d.method.as_str(),
                d.baseline.as_str(),
                d.theorems,
                d.skipped
            ),
            ("ProD-RL", "ProD-SFT", 30, 0)
        );
        // Theorems are matched by id: a method that evaluated fewer pairs only on those.
        let fewer = eval("few", &better[..10]);
        let d = pass_at_k_difference(&a, &fewer, 1, 100, 0).unwrap();
        assert_eq!((d.theorems, d.skipped), (10, 20));
        assert_eq!(
            pass_at_k_difference(&a, &eval("none", &[]), 1, 100, 0),
            None
        );
    }
}

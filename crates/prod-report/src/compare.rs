//! Methods compared on the same theorems: the difference of pass@k between two evaluations with
//! a paired 95% interval, the hull of the paired bootstrap and Newcombe's score interval (`prod_core::pass_at_k::paired_difference`: theorems are
//! resampled jointly, both methods' scores of a drawn theorem together). Two methods' own
//! intervals may overlap while every theorem moves the same way; only the paired interval of
//! the difference tells whether one is better on these theorems.

use prod_core::pass_at_k::{paired_difference, Bootstrap, PairedDifference, TheoremOutcome};

pub use crate::model::{Comparison, ComparisonRow, PassAtKDifference, TheoremPair};
use crate::model::{Evaluation, PassAtK};

/// `d` (method − baseline) under the two evaluations' names; `of` is how many theorems the side
/// the pairing started from has (those not paired are `skipped`).
fn named(
    method: &Evaluation,
    baseline: &Evaluation,
    d: PairedDifference,
    of: usize,
) -> PassAtKDifference {
    PassAtKDifference {
        method: method.name.clone(),
        baseline: baseline.name.clone(),
        k: d.k,
        estimate: d.estimate,
        ci_low: d.ci_low,
        ci_high: d.ci_high,
        theorems: d.theorems,
        skipped: of - d.theorems,
    }
}

/// `method − baseline` for pass@`k`, theorems matched by id (the baseline's order) from each
/// evaluation's per-theorem table. `None` when no theorem can be paired (or the evaluations have
/// no per-theorem table).
pub fn pass_at_k_difference(
    baseline: &Evaluation,
    method: &Evaluation,
    k: usize,
    boot: Bootstrap,
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
    let d = paired_difference(&a, &b, k, boot)?;
    Some(named(method, baseline, d, baseline.theorems_detail.len()))
}

/// `method` against `baseline` for each of `ks`, theorems matched by id. With
/// `baseline_single_attempt`, the baseline's one judged attempt per theorem stands for k equal
/// attempts (a deterministic method: its pass@k is its pass@1); otherwise both use the unbiased
/// estimator from their own samples. pass@k of either side is taken from its evaluation where it
/// has that k; the single-attempt baseline's is its pass@1 for every k.
pub fn compare(
    method: &Evaluation,
    baseline: &Evaluation,
    ks: &[usize],
    baseline_single_attempt: bool,
    boot: Bootstrap,
) -> Comparison {
    let mut c = Comparison {
        method: method.name.clone(),
        baseline: baseline.name.clone(),
        baseline_single_attempt,
        ..Default::default()
    };
    let (a, b) = pair_theorems(method, baseline, &mut c);
    let baseline_pass = |k: usize| -> Option<PassAtK> {
        let want = if baseline_single_attempt { 1 } else { k };
        let p = baseline.pass_at_k.iter().find(|p| p.k == want)?;
        Some(PassAtK { k, ..p.clone() })
    };
    for &k in ks {
        let base = baseline_outcomes(&a, k, baseline_single_attempt);
        let difference = paired_difference(&base, &b, k, boot)
            .map(|d| named(method, baseline, d, method.theorems_detail.len()));
        c.rows.push(ComparisonRow {
            k,
            method: method.pass_at_k.iter().find(|p| p.k == k).cloned(),
            baseline: baseline_pass(k),
            difference,
        });
    }
    c
}

/// Matches the method's theorems to the baseline's by id: fills `c.theorems` and the counts of
/// who proved what, and returns the theorems both have, as the baseline's (trees, proved) and
/// the method's outcomes in the same order (the pairs the paired difference needs).
fn pair_theorems(
    method: &Evaluation,
    baseline: &Evaluation,
    c: &mut Comparison,
) -> (Vec<(usize, usize)>, Vec<TheoremOutcome>) {
    let of_baseline: std::collections::HashMap<&str, (usize, usize)> = baseline
        .theorems_detail
        .iter()
        .map(|t| (t.id.as_str(), (t.trees, t.proved_trees)))
        .collect();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in &method.theorems_detail {
        let base = of_baseline.get(t.id.as_str()).copied();
        let pair = TheoremPair {
            id: t.id.clone(),
            name: t.name.clone(),
            method_trees: t.trees,
            method_proved: t.proved_trees,
            baseline_trees: base.map(|x| x.0),
            baseline_proved: base.map(|x| x.1),
        };
        match (pair.method_proved(), pair.baseline_proved()) {
            (Some(true), Some(true)) => c.both += 1,
            (Some(true), Some(false)) => c.method_only += 1,
            (Some(false), Some(true)) => c.baseline_only += 1,
            (Some(false), Some(false)) => c.neither += 1,
            _ => c.unpaired += 1,
        }
        if let Some((trees, proved)) = base {
            a.push((trees, proved));
            b.push(TheoremOutcome {
                samples: t.trees,
                correct: t.proved_trees,
            });
        }
        c.theorems.push(pair);
    }
    (a, b)
}

/// The baseline's outcomes at `k` from its (trees, proved) per theorem: with
/// `single_attempt`, its one attempt stands for k equal ones (none when it judged none).
fn baseline_outcomes(a: &[(usize, usize)], k: usize, single_attempt: bool) -> Vec<TheoremOutcome> {
    a.iter()
        .map(|&(trees, proved)| match (single_attempt, trees) {
            (true, 0) => TheoremOutcome {
                samples: 0,
                correct: 0,
            },
            (true, _) => TheoremOutcome {
                samples: k,
                correct: if proved > 0 { k } else { 0 },
            },
            (false, _) => TheoremOutcome {
                samples: trees,
                correct: proved,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TheoremDetail;

    fn boot(resamples: usize) -> Bootstrap {
        Bootstrap { resamples, seed: 0 }
    }

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
        let same = pass_at_k_difference(&a, &eval("copy", &base), 1, boot(1000)).unwrap();
        assert!(
            same.ci_low <= 0.0 && same.ci_high >= 0.0 && same.estimate == 0.0,
            "{same:?}"
        );
        let better: Vec<(usize, usize)> = base.iter().map(|&(n, c)| (n, c + 3)).collect();
        let d = pass_at_k_difference(&a, &eval("ProD-RL", &better), 1, boot(1000)).unwrap();
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
        let d = pass_at_k_difference(&a, &fewer, 1, boot(100)).unwrap();
        assert_eq!((d.theorems, d.skipped), (10, 20));
        assert_eq!(
            pass_at_k_difference(&a, &eval("none", &[]), 1, boot(100)),
            None
        );
    }

    #[test]
    fn a_single_attempt_baseline_counts_as_k_equal_attempts() {
        // Method: 8 trees per theorem; baseline: one attempt each (proved or not).
        let mut m = eval("ProD", &[(8, 0), (8, 2), (8, 0), (8, 8), (8, 0)]);
        let mut h = eval("CoqHammer alone", &[(1, 1), (1, 0), (1, 0), (1, 1), (0, 0)]);
        m.pass_at_k = vec![PassAtK {
            k: 4,
            estimate: 0.5,
            ..Default::default()
        }];
        h.pass_at_k = vec![PassAtK {
            k: 1,
            estimate: 0.5,
            ci_low: 0.0,
            ci_high: 1.0,
            theorems_judged: 4,
            ..Default::default()
        }];
        let c = compare(&m, &h, &[1, 4], true, boot(200));
        // t0: hammer only; t1: ProD only; t2: neither; t3: both; t4: the hammer's attempt was
        // lost (no judged attempt): unpaired, left out of the difference.
        assert_eq!(
            (
                c.both,
                c.method_only,
                c.baseline_only,
                c.neither,
                c.unpaired
            ),
            (1, 1, 1, 1, 1)
        );
        let d4 = c.rows[1].difference.as_ref().unwrap();
        assert_eq!((d4.k, d4.theorems, d4.skipped), (4, 4, 1));
        // pass@4 of ProD on t0..t3: 0, 1 − C(6,4)/C(8,4), 0, 1; the hammer's: 1, 0, 0, 1.
        let p = 1.0 - 15.0 / 70.0;
        assert!((d4.estimate - (p - 1.0) / 4.0).abs() < 1e-12, "{d4:?}");
        // The baseline's pass@4 is its pass@1; the method's is its own, when it has that k.
        assert_eq!(
            c.rows[1].baseline.as_ref().map(|p| (p.k, p.estimate)),
            Some((4, 0.5))
        );
        assert_eq!(c.rows[1].method.as_ref().map(|p| p.estimate), Some(0.5));
        assert_eq!(c.rows[0].method, None);
        // All at 0: the difference is 0, still reported, with an interval that 2 theorems
        // cannot narrow (Newcombe's: no theorem differs, yet nothing is certain).
        let zero = eval("z", &[(4, 0), (4, 0)]);
        let zh = eval("h", &[(1, 0), (1, 0)]);
        let d = compare(&zero, &zh, &[1], true, boot(100)).rows[0]
            .difference
            .clone()
            .unwrap();
        assert_eq!((d.estimate, d.theorems), (0.0, 2));
        assert!(d.ci_low < -0.5 && d.ci_high > 0.5, "{d:?}");
    }
}

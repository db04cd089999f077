//! The holdout test split by the dependency graph (paper §2 and Appendix "Dataset split"):
//! among the units no other unit depends on, sample 10% (seeded) as the test set, so that no
//! training example refers to a test unit. Prover-neutral: units are indices with edges.

use rand::seq::SliceRandom;
use rand::SeedableRng;

/// `deps[u]`: the units `u` depends on. Returns the sorted test units: `ceil(fraction · sinks)`
/// of the sinks (units nobody depends on), at least one when there is a sink and `fraction > 0`.
/// Units listed in `unknown` (no dependency information) are never chosen: we cannot tell
/// whether something depends on them... and they might depend on a test unit unseen.
pub fn test_units(deps: &[Vec<usize>], fraction: f64, seed: u64, unknown: &[bool]) -> Vec<usize> {
    let n = deps.len();
    let mut has_dependant = vec![false; n];
    for (u, d) in deps.iter().enumerate() {
        for &v in d {
            if v < n && v != u {
                has_dependant[v] = true;
            }
        }
    }
    let mut sinks: Vec<usize> = (0..n).filter(|&u| !has_dependant[u] && !unknown.get(u).copied().unwrap_or(false)).collect();
    if sinks.is_empty() || fraction <= 0.0 {
        return vec![];
    }
    let k = ((sinks.len() as f64) * fraction.min(1.0)).ceil() as usize;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    sinks.shuffle(&mut rng);
    let mut chosen: Vec<usize> = sinks.into_iter().take(k.max(1)).collect();
    chosen.sort_unstable();
    chosen
}

/// Every unit that (transitively) depends on a unit in `test`. Must be empty for a valid split;
/// exposed for the invariant check in tests and `dataset stats`.
pub fn dependants_of(deps: &[Vec<usize>], test: &[usize]) -> Vec<usize> {
    let n = deps.len();
    let mut reaches = vec![false; n];
    for &t in test {
        if t < n {
            reaches[t] = true;
        }
    }
    // Fixed point (graphs are small: ≤ a few thousand files).
    let mut changed = true;
    while changed {
        changed = false;
        for u in 0..n {
            if !reaches[u] && deps[u].iter().any(|&v| v < n && reaches[v]) {
                reaches[u] = true;
                changed = true;
            }
        }
    }
    (0..n).filter(|u| reaches[*u] && !test.contains(u)).collect()
}

/// Seeded validation choice: `true` for items that go to the validation split.
pub fn validation_mask(n: usize, fraction: f64, seed: u64) -> Vec<bool> {
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0x005e_ed0f_7a1d);
    idx.shuffle(&mut rng);
    let k = ((n as f64) * fraction.clamp(0.0, 1.0)).round() as usize;
    let mut mask = vec![false; n];
    for &i in idx.iter().take(k) {
        mask[i] = true;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_sinks_are_chosen() {
        // 0 ← 1 ← 2, 0 ← 3: sinks are 2 and 3.
        let deps = vec![vec![], vec![0], vec![1], vec![0]];
        for seed in 0..20 {
            let t = test_units(&deps, 0.1, seed, &[]);
            assert_eq!(t.len(), 1);
            assert!(t[0] == 2 || t[0] == 3);
            assert!(dependants_of(&deps, &t).is_empty());
        }
        assert_eq!(test_units(&deps, 1.0, 0, &[]), vec![2, 3]);
        assert_eq!(test_units(&deps, 1.0, 0, &[false, false, true, false]), vec![3]);
        assert!(test_units(&deps, 0.0, 0, &[]).is_empty());
    }

    #[test]
    fn seeded_and_deterministic() {
        let deps: Vec<Vec<usize>> = (0..100).map(|_| vec![]).collect();
        assert_eq!(test_units(&deps, 0.1, 7, &[]), test_units(&deps, 0.1, 7, &[]));
        assert_eq!(test_units(&deps, 0.1, 7, &[]).len(), 10);
        assert_eq!(validation_mask(100, 0.05, 3).iter().filter(|b| **b).count(), 5);
    }

    proptest! {
        #[test]
        fn no_unit_depends_on_test(edges in proptest::collection::vec((0usize..30, 0usize..30), 0..80), seed in 0u64..1000) {
            // Random DAG: edges from higher to lower index.
            let mut deps = vec![Vec::new(); 30];
            for (a, b) in edges { if a > b { deps[a].push(b); } }
            let t = test_units(&deps, 0.3, seed, &[]);
            prop_assert!(dependants_of(&deps, &t).is_empty());
        }
    }
}

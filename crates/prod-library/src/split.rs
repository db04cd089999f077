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
    let mut sinks: Vec<usize> = (0..n)
        .filter(|&u| !has_dependant[u] && !unknown.get(u).copied().unwrap_or(false))
        .collect();
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

/// The least number of test theorems (T_tree examples, after the per-file cap) a dependency
/// split aims for: after the `ceil(fraction · candidates)` draw, more candidates are added
/// (same seeded order) until the test split has this many or no candidate is left.
pub const MIN_TEST_THEOREMS: usize = 300;

/// The default per-file cap: no file holds more than this share of the test theorems.
pub const TEST_FILE_CAP: f64 = 0.15;

/// What a test split aims for: at least `min_theorems` theorems, and no file holding more than
/// `file_cap` of them (`file_cap` ≥ 1 or ≤ 0: no cap).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TestTarget {
    pub min_theorems: usize,
    pub file_cap: f64,
}

impl Default for TestTarget {
    fn default() -> Self {
        TestTarget {
            min_theorems: MIN_TEST_THEOREMS,
            file_cap: TEST_FILE_CAP,
        }
    }
}

/// What each unit would contribute: all its examples, and those in T_tree (the test split keeps
/// only these).
#[derive(Clone, Debug, Default)]
pub struct UnitSizes {
    pub examples: Vec<usize>,
    pub tree: Vec<usize>,
    /// `files[u]`: the T_tree theorems of each file of unit `u` (for the per-file cap). A unit
    /// without an entry counts as one file of `tree[u]` theorems.
    pub files: Vec<Vec<usize>>,
}

impl UnitSizes {
    fn files_of(&self, u: usize) -> Vec<usize> {
        match self.files.get(u) {
            Some(f) if !f.is_empty() => f.clone(),
            _ => vec![self.tree.get(u).copied().unwrap_or(0)],
        }
    }
}

/// The per-file cap on a test split whose files have `sizes` T_tree theorems each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileCap {
    /// Most theorems one file keeps (`None`: every file keeps all of its own).
    pub cap: Option<usize>,
    /// Test theorems once capped.
    pub theorems: usize,
    /// `false` when no cap of at least one theorem per file can meet the share (fewer than
    /// `1 / share` files with theorems): then no cap is applied.
    pub met: bool,
}

/// The largest cap `c` with `c ≤ share · Σ_f min(size_f, c)`: every file keeps at most `c`
/// theorems and, as `c` is at most `share` of what all files keep, no file holds more than
/// `share` of the test split. `Σ min(size, c)` is concave in `c`, so the feasible caps are
/// `0..=c*` and a binary search finds `c*`.
pub fn file_cap(sizes: &[usize], share: f64) -> FileCap {
    let total: usize = sizes.iter().sum();
    let max = sizes.iter().copied().max().unwrap_or(0);
    let uncapped = FileCap {
        cap: None,
        theorems: total,
        met: true,
    };
    if !(share > 0.0 && share < 1.0) || total == 0 || (max as f64) <= share * total as f64 + 1e-9 {
        return uncapped;
    }
    let kept = |c: usize| -> usize { sizes.iter().map(|&t| t.min(c)).sum() };
    let fits = |c: usize| (c as f64) <= share * kept(c) as f64 + 1e-9;
    // fits(0) holds and fits(max) does not (checked above).
    let (mut lo, mut hi) = (0usize, max);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        return FileCap {
            met: false,
            ..uncapped
        };
    }
    FileCap {
        cap: Some(lo),
        theorems: kept(lo),
        met: true,
    }
}

/// Test units by the dependency graph, never empty while some unit has a T_tree theorem
/// (`fraction > 0`). Candidates are the units with T_tree theorems and dependency information
/// that no unit WITH examples (transitively) depends on: a file that only re-exports (the
/// umbrella `Coquelicot.Coquelicot`) is not a candidate and does not hide what it re-exports.
/// `ceil(fraction · candidates)` are drawn (seeded), then more until the test split, with
/// [`file_cap`] applied to its files, has `target.min_theorems` theorems and the cap can be
/// met. Without any candidate, the unit with T_tree theorems whose closure under "depended on
/// by a unit with examples" has the fewest examples is taken with that closure (all of it
/// test, so no train example depends on a test unit).
pub fn test_units_sized(
    deps: &[Vec<usize>],
    fraction: f64,
    seed: u64,
    unknown: &[bool],
    sizes: &UnitSizes,
    target: &TestTarget,
) -> Vec<usize> {
    let n = deps.len();
    let size = |v: &[usize], u: usize| v.get(u).copied().unwrap_or(0);
    if fraction <= 0.0 || (0..n).all(|u| size(&sizes.tree, u) == 0) {
        return vec![];
    }
    let closure = |u: usize| -> Vec<usize> {
        let mut c = dependants_of(deps, &[u]);
        c.retain(|&v| size(&sizes.examples, v) > 0);
        c
    };
    let known = |u: &usize| !unknown.get(*u).copied().unwrap_or(false);
    let mut candidates: Vec<usize> = (0..n)
        .filter(|&u| size(&sizes.tree, u) > 0 && known(&u) && closure(u).is_empty())
        .collect();
    if candidates.is_empty() {
        let best = (0..n)
            .filter(|&u| size(&sizes.tree, u) > 0 && known(&u))
            .map(|u| (closure(u), u))
            .min_by_key(|(c, u)| {
                (
                    c.iter().map(|&v| size(&sizes.examples, v)).sum::<usize>(),
                    *u,
                )
            });
        let mut chosen: Vec<usize> = best.map(|(c, u)| [vec![u], c].concat()).unwrap_or_default();
        chosen.sort_unstable();
        return chosen;
    }
    let k = ((candidates.len() as f64) * fraction.min(1.0)).ceil() as usize;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    candidates.shuffle(&mut rng);
    let mut chosen = Vec::new();
    let mut files: Vec<usize> = Vec::new();
    for u in candidates {
        if chosen.len() >= k.max(1) {
            let cap = file_cap(&files, target.file_cap);
            if cap.met && cap.theorems >= target.min_theorems {
                break;
            }
        }
        files.extend(sizes.files_of(u).into_iter().filter(|&t| t > 0));
        chosen.push(u);
    }
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
    (0..n)
        .filter(|u| reaches[*u] && !test.contains(u))
        .collect()
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
        assert_eq!(
            test_units(&deps, 1.0, 0, &[false, false, true, false]),
            vec![3]
        );
        assert!(test_units(&deps, 0.0, 0, &[]).is_empty());
    }

    #[test]
    fn seeded_and_deterministic() {
        let deps: Vec<Vec<usize>> = (0..100).map(|_| vec![]).collect();
        assert_eq!(
            test_units(&deps, 0.1, 7, &[]),
            test_units(&deps, 0.1, 7, &[])
        );
        assert_eq!(test_units(&deps, 0.1, 7, &[]).len(), 10);
        assert_eq!(
            validation_mask(100, 0.05, 3).iter().filter(|b| **b).count(),
            5
        );
    }

    fn sizes(examples: &[usize], tree: &[usize]) -> UnitSizes {
        UnitSizes {
            examples: examples.to_vec(),
            tree: tree.to_vec(),
            files: vec![],
        }
    }

    /// The targets these tests were written for (the minimum was 100, no cap).
    const OLD: TestTarget = TestTarget {
        min_theorems: 100,
        file_cap: 1.0,
    };

    #[test]
    fn umbrella_files_do_not_hide_what_they_reexport() {
        // 3 re-exports 0, 1 and 2 and has no theorem: 1 and 2 are the candidates.
        let deps = vec![vec![], vec![0], vec![0], vec![0, 1, 2]];
        let sz = sizes(&[5, 5, 5, 0], &[3, 3, 3, 0]);
        for seed in 0..20 {
            let t = test_units_sized(&deps, 0.1, seed, &[], &sz, &OLD);
            assert!(!t.is_empty() && !t.contains(&3) && !t.contains(&0), "{t:?}");
        }
    }

    #[test]
    fn minimum_test_theorems_and_fallback() {
        // Sinks 1..=5 with 30 T_tree theorems each: 10% is one unit, the minimum asks for four.
        let deps = vec![vec![], vec![0], vec![0], vec![0], vec![0], vec![0]];
        let sz = sizes(&[9, 36, 36, 36, 36, 36], &[9, 30, 30, 30, 30, 30]);
        assert_eq!(test_units_sized(&deps, 0.1, 1, &[], &sz, &OLD).len(), 4);
        // The only unit nothing depends on has no T_tree theorem: 1 goes with its dependant 2.
        let deps = vec![vec![], vec![0], vec![1]];
        let sz = sizes(&[4, 3, 2], &[4, 1, 0]);
        assert_eq!(test_units_sized(&deps, 0.1, 0, &[], &sz, &OLD), vec![1, 2]);
        assert!(test_units_sized(&deps, 0.0, 0, &[], &sz, &OLD).is_empty());
    }

    #[test]
    fn the_file_cap_is_the_largest_that_keeps_every_file_under_the_share() {
        // One file of 181 and ten of 5: the cap c must satisfy c ≤ 0.15 (c + 10·min(5, c)).
        let mut sizes = vec![181];
        sizes.extend([5; 10]);
        let c = file_cap(&sizes, 0.15);
        assert_eq!(
            c,
            FileCap {
                cap: Some(8),
                theorems: 58,
                met: true
            }
        );
        // 8 is within the share of 58 theorems; 9 (59 theorems) would exceed it.
        let (cap, theorems) = (c.cap.unwrap() as f64, c.theorems as f64);
        assert!(cap <= 0.15 * theorems && cap + 1.0 > 0.15 * (theorems + 1.0));
        // Nothing to cap, or no cap asked for.
        assert_eq!(
            file_cap(&[10; 10], 0.15),
            FileCap {
                cap: None,
                theorems: 100,
                met: true
            }
        );
        assert_eq!(
            file_cap(&sizes, 1.0),
            FileCap {
                cap: None,
                theorems: 231,
                met: true
            }
        );
        assert_eq!(file_cap(&sizes, 0.0).cap, None);
        // Fewer than 1 / 0.15 files: no cap of one theorem or more can meet the share.
        assert_eq!(
            file_cap(&[50, 1, 1], 0.15),
            FileCap {
                cap: None,
                theorems: 52,
                met: false
            }
        );
        assert_eq!(
            file_cap(&[], 0.15),
            FileCap {
                cap: None,
                theorems: 0,
                met: true
            }
        );
    }

    #[test]
    fn more_units_are_drawn_until_the_capped_split_has_the_minimum() {
        // Unit 1 is one huge file (181 theorems); units 2..=61 have 10 each; all are sinks.
        let n = 62;
        let mut deps = vec![vec![]; n];
        for d in deps.iter_mut().skip(1) {
            d.push(0);
        }
        let mut tree = vec![10; n];
        tree[0] = 0;
        tree[1] = 181;
        let sz = sizes(&tree, &tree);
        let target = TestTarget::default();
        for seed in 0..20 {
            let t = test_units_sized(&deps, 0.1, seed, &[], &sz, &target);
            let files: Vec<usize> = t.iter().map(|&u| tree[u]).collect();
            let cap = file_cap(&files, 0.15);
            assert!(cap.met && cap.theorems >= 300, "seed {seed}: {cap:?}");
            let max = files
                .iter()
                .map(|&f| cap.cap.map_or(f, |c| f.min(c)))
                .max()
                .unwrap();
            assert!(max as f64 <= 0.15 * cap.theorems as f64, "seed {seed}");
            assert!(dependants_of(&deps, &t).is_empty());
        }
    }

    proptest! {
        #[test]
        fn sized_split_is_never_empty_and_sound(
            edges in proptest::collection::vec((0usize..20, 0usize..20), 0..50),
            tree in proptest::collection::vec(0usize..4, 20),
            extra in proptest::collection::vec(0usize..4, 20),
            seed in 0u64..1000,
        ) {
            let mut deps = vec![Vec::new(); 20];
            for (a, b) in edges { if a > b { deps[a].push(b); } }
            let examples: Vec<usize> = tree.iter().zip(&extra).map(|(t, e)| t + e).collect();
            let sz = sizes(&examples, &tree);
            let t = test_units_sized(&deps, 0.1, seed, &[], &sz, &TestTarget::default());
            prop_assert_eq!(t.is_empty(), tree.iter().all(|&x| x == 0));
            prop_assert!(t.iter().any(|&u| tree[u] > 0) || t.is_empty());
            for u in dependants_of(&deps, &t) {
                prop_assert_eq!(examples[u], 0, "unit {} has examples and depends on a test unit", u);
            }
        }

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

//! Peeling (paper §2, "Dataset construction"): iteratively remove the pairs `(s_i, p_i)` whose
//! theorem is not referred to by the remaining file. Round 1 peels the roots of the proof trees,
//! round 2 the next level, and so on; `T_tree` is the set of peeled theorems. A theorem referred
//! to by content (`c_j`), by a statement, or from another scope is pinned and never peeled; a
//! `Defined` theorem is never peeled (it computes), so everything its proof uses stays too.
//!
//! Prover-neutral: it only looks at [`SegmentedFile::theorems`].

use serde::Serialize;

use crate::segment::SegmentedFile;

/// The outcome of peeling one file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Peeling {
    /// `round[i]`: the peeling round (1-based) in which theorem `i` was removed; `None` if it stays.
    pub round: Vec<Option<u32>>,
    /// Depth of theorem `i`'s ground-truth proof tree: 0 when its conditional proof proposes no
    /// lemma, else 1 + the largest depth among the lemmas it proposes.
    pub depth: Vec<u32>,
}

impl Peeling {
    pub fn in_tree(&self, i: usize) -> bool {
        self.round.get(i).copied().flatten().is_some()
    }
    pub fn peeled_count(&self) -> usize {
        self.round.iter().filter(|r| r.is_some()).count()
    }
}

/// The distinct earlier theorems that theorem `i`'s proof uses (self-references dropped).
pub fn proof_uses<F: SegmentedFile + ?Sized>(f: &F, i: usize) -> Vec<usize> {
    let mut u: Vec<usize> = f.theorems()[i]
        .steps
        .iter()
        .flat_map(|s| s.uses.iter().copied())
        .filter(|&j| j != i)
        .collect();
    u.sort_unstable();
    u.dedup();
    u
}

/// Peel a file.
pub fn peel<F: SegmentedFile + ?Sized>(f: &F) -> Peeling {
    let ths = f.theorems();
    let n = ths.len();
    let uses: Vec<Vec<usize>> = (0..n)
        .map(|i| proof_uses(f, i).into_iter().filter(|&j| j < n).collect())
        .collect();
    // users[j]: how many remaining theorems use j in their proof.
    let mut users = vec![0usize; n];
    for u in &uses {
        for &j in u {
            users[j] += 1;
        }
    }
    let can_peel = |i: usize| ths[i].peelable && !ths[i].pinned;
    let mut round = vec![None; n];
    let mut frontier: Vec<usize> = (0..n).filter(|&i| can_peel(i) && users[i] == 0).collect();
    let mut r = 0u32;
    while !frontier.is_empty() {
        r += 1;
        let mut next = Vec::new();
        for &i in &frontier {
            round[i] = Some(r);
        }
        for &i in &frontier {
            for &j in &uses[i] {
                users[j] -= 1;
                if users[j] == 0 && can_peel(j) && round[j].is_none() {
                    next.push(j);
                }
            }
        }
        next.sort_unstable();
        next.dedup();
        frontier = next;
    }
    // Depth in file order: a proof only uses earlier theorems, so their depth is known. (A
    // forward reference cannot happen in Coq; if a segmenter produced one, it counts as a leaf.)
    let mut depth = vec![0u32; n];
    for i in 0..n {
        depth[i] = uses[i]
            .iter()
            .filter(|&&j| j < i && round[j].is_some())
            .map(|&j| depth[j] + 1)
            .max()
            .unwrap_or(0);
    }
    Peeling { round, depth }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::segment::{ProofEnd, Segments, Step, Theorem};

    /// A synthetic theorem: `uses` per step, peelable unless `Defined`.
    pub(crate) fn th(name: &str, steps: &[&[usize]], end: ProofEnd) -> Theorem {
        Theorem {
            name: Some(name.into()),
            statement: format!("Lemma {name} : True."),
            header: Some("Proof.".into()),
            steps: steps
                .iter()
                .map(|u| Step {
                    text: " auto.".into(),
                    uses: u.to_vec(),
                })
                .collect(),
            end_text: if end == ProofEnd::Defined {
                " Defined.".into()
            } else {
                " Qed.".into()
            },
            end,
            start: 0,
            end_byte: 0,
            line: 1,
            peelable: end == ProofEnd::Qed,
            pinned: false,
            skip: None,
            scope: vec![],
            module_path: vec![],
        }
    }

    fn file(ths: Vec<Theorem>) -> Segments {
        Segments {
            theorems: ths,
            ..Default::default()
        }
    }

    #[test]
    fn chain_peels_level_by_level() {
        // a ← b ← c (c uses b, b uses a): c is the root (round 1), then b, then a.
        let f = file(vec![
            th("a", &[&[]], ProofEnd::Qed),
            th("b", &[&[0]], ProofEnd::Qed),
            th("c", &[&[1]], ProofEnd::Qed),
        ]);
        let p = peel(&f);
        assert_eq!(p.round, vec![Some(3), Some(2), Some(1)]);
        assert_eq!(p.depth, vec![0, 1, 2]);
    }

    #[test]
    fn lemma_used_by_later_content_is_not_peeled() {
        // b uses a, but a is also referred to by a later c_j (pinned): a stays, b is peeled.
        let mut a = th("a", &[&[]], ProofEnd::Qed);
        a.pinned = true;
        let f = file(vec![a, th("b", &[&[0]], ProofEnd::Qed)]);
        let p = peel(&f);
        assert_eq!(p.round, vec![None, Some(1)]);
        // b's proof proposes nothing (a is in the context): depth 0.
        assert_eq!(p.depth, vec![0, 0]);
    }

    #[test]
    fn defined_stays_and_keeps_what_it_uses() {
        // d (Defined) uses a: both stay. b uses nothing: peeled.
        let f = file(vec![
            th("a", &[&[]], ProofEnd::Qed),
            th("d", &[&[0]], ProofEnd::Defined),
            th("b", &[&[]], ProofEnd::Qed),
        ]);
        let p = peel(&f);
        assert_eq!(p.round, vec![None, None, Some(1)]);
    }

    #[test]
    fn diamond_and_shared_lemma() {
        // x used by y and z; y and z used by w. Rounds: w=1, y,z=2, x=3.
        let f = file(vec![
            th("x", &[&[]], ProofEnd::Qed),
            th("y", &[&[0]], ProofEnd::Qed),
            th("z", &[&[0], &[0]], ProofEnd::Qed),
            th("w", &[&[1], &[2]], ProofEnd::Qed),
        ]);
        let p = peel(&f);
        assert_eq!(p.round, vec![Some(3), Some(2), Some(2), Some(1)]);
        assert_eq!(p.depth, vec![0, 1, 1, 2]);
        assert_eq!(p.peeled_count(), 4);
    }

    #[test]
    fn self_reference_and_out_of_range_are_ignored() {
        let f = file(vec![th("a", &[&[0, 7]], ProofEnd::Qed)]);
        assert_eq!(peel(&f).round, vec![Some(1)]);
    }
}

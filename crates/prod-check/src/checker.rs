//! The prover-neutral checker interface.

use serde::{Deserialize, Serialize};

use crate::request::CheckRequest;
use crate::verdict::Verdict;

/// Called once per finished request with its index in the batch (from any thread).
pub type Progress<'a> = &'a (dyn Fn(usize, &Verdict) + Sync);

/// A prover backend that decides local correctness of nodes.
///
/// Contract (every implementation):
/// * `Proved` only when the prover itself closed the goal and the proof relies on nothing but
///   the proposed lemmas and the context's own axioms;
/// * untrusted text (the proof, proposed lemmas, and the statement of an inner node) that breaks
///   the backend's rules gives `Rejected`, never a run of that text;
/// * crashes, lost workers and out-of-memory give `Infra` (after the backend's retries), never
///   `Failed`;
/// * one verdict per request, in the order of the requests.
pub trait Checker: Send + Sync {
    /// The prover's short name (`coq`, `isabelle`).
    fn prover(&self) -> &'static str;

    /// Everything besides the request that can change a verdict (prover and library versions,
    /// time limits, automation lists). Part of the verification cache key.
    fn fingerprint(&self) -> String;

    /// Check many requests; the backend may reorder work internally (e.g. group by context) but
    /// returns the verdicts in request order.
    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict>;

    /// What this checker's `hammer.` steps cost since it started (`None`: it keeps no count,
    /// e.g. a backend without a hammer, or a queue that only other machines work on).
    fn hammer_stats(&self) -> Option<HammerStats> {
        None
    }

    /// Check one request.
    fn check(&self, request: &CheckRequest) -> Verdict {
        self.check_batch(std::slice::from_ref(request), &|_, _| {})
            .pop()
            .unwrap_or_else(|| Verdict::infra("checker returned no verdict"))
    }
}

/// What the `hammer.` steps of a checker's attempts did and cost (paper §4.1, Appendix A.3: the
/// fixed tactic list first, then the automated provers), counted since the checker started;
/// [`HammerStats::since`] gives one phase's share. A goal answered from the checker's per-goal
/// memory counts as a call too, in `cache_closed` or `cache_failed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HammerStats {
    /// `hammer.` steps expanded.
    pub calls: u64,
    /// Closed by a tactic of the fixed list.
    pub fixed_closed: u64,
    /// Calls of the automated provers (CoqHammer's `hammer`), and those that closed the goal.
    pub atp_calls: u64,
    pub atp_closed: u64,
    /// Goals met before: closed again by the remembered tactic (re-run by the prover in this
    /// attempt), or failed as they failed before (neither the fixed list nor the provers run).
    pub cache_closed: u64,
    pub cache_failed: u64,
    /// Remembered tactics that did not close the goal again: the step was expanded afresh.
    pub cache_stale: u64,
    /// Seconds spent in the fixed list and in the provers' calls.
    pub fixed_s: f64,
    pub atp_s: f64,
}

impl HammerStats {
    /// The counts of the work done after `earlier` (a snapshot of the same checker).
    pub fn since(&self, earlier: &HammerStats) -> HammerStats {
        HammerStats {
            calls: self.calls.saturating_sub(earlier.calls),
            fixed_closed: self.fixed_closed.saturating_sub(earlier.fixed_closed),
            atp_calls: self.atp_calls.saturating_sub(earlier.atp_calls),
            atp_closed: self.atp_closed.saturating_sub(earlier.atp_closed),
            cache_closed: self.cache_closed.saturating_sub(earlier.cache_closed),
            cache_failed: self.cache_failed.saturating_sub(earlier.cache_failed),
            cache_stale: self.cache_stale.saturating_sub(earlier.cache_stale),
            fixed_s: (self.fixed_s - earlier.fixed_s).max(0.0),
            atp_s: (self.atp_s - earlier.atp_s).max(0.0),
        }
    }

    /// Goals answered from the per-goal memory.
    pub fn cache_hits(&self) -> u64 {
        self.cache_closed + self.cache_failed
    }
}

/// A borrowed checker is a checker (so that a cache can be put in front of a run's checker).
impl<C: Checker + ?Sized> Checker for &C {
    fn prover(&self) -> &'static str {
        (**self).prover()
    }

    fn fingerprint(&self) -> String {
        (**self).fingerprint()
    }

    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
        (**self).check_batch(requests, progress)
    }

    fn hammer_stats(&self) -> Option<HammerStats> {
        (**self).hammer_stats()
    }
}

#[cfg(test)]
mod tests {
    use super::HammerStats;

    #[test]
    fn since_is_the_difference_and_never_negative() {
        let a = HammerStats {
            calls: 3,
            atp_calls: 1,
            atp_s: 10.0,
            cache_failed: 1,
            ..Default::default()
        };
        let b = HammerStats {
            calls: 7,
            atp_calls: 2,
            atp_s: 12.5,
            cache_closed: 2,
            cache_failed: 1,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!((d.calls, d.atp_calls, d.cache_hits()), (4, 1, 2));
        assert!((d.atp_s - 2.5).abs() < 1e-12);
        assert_eq!(a.since(&b), HammerStats::default());
    }
}

//! The prover-neutral checker interface.

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

    /// Check one request.
    fn check(&self, request: &CheckRequest) -> Verdict {
        self.check_batch(std::slice::from_ref(request), &|_, _| {})
            .pop()
            .unwrap_or_else(|| Verdict::infra("checker returned no verdict"))
    }
}

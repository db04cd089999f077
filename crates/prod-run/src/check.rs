//! The check phase: every node not yet judged goes to the checker; each verdict is committed
//! to the run store the moment the checker reports it, so a kill loses at most the checks in
//! flight. `Infra` verdicts are not stored: those nodes are asked again on resume and count as
//! `Unknown` (never as failures) until a real verdict arrives.

use std::collections::HashMap;

use prod_check::{CheckRequest, Checker, Verdict};

use crate::store::{Result, RunStore};

/// What one check phase did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckStats {
    /// Distinct requests sent to the checker in this call.
    pub asked: usize,
    /// Nodes that already had a stored verdict (resume).
    pub already: usize,
    pub proved: usize,
    pub infra: usize,
}

/// Check `items` (node id, request), skipping nodes with a stored verdict. `progress` is
/// called once per verdict that arrives (from any thread).
pub fn check_nodes(
    store: &RunStore,
    checker: &dyn Checker,
    items: &[(i64, CheckRequest)],
    progress: &(dyn Fn(&Verdict) + Sync),
) -> Result<CheckStats> {
    // Distinct requests once each: a model often writes the same proof in several trees, and
    // those nodes share one verdict (the verification cache would answer the later ones, but
    // not within one batch).
    let mut todo: Vec<(Vec<i64>, CheckRequest)> = Vec::new();
    let mut index: HashMap<&CheckRequest, usize> = HashMap::new();
    let mut stats = CheckStats::default();
    for (id, req) in items {
        if store.verdict(*id)?.is_some() {
            stats.already += 1;
            continue;
        }
        match index.get(req) {
            Some(&k) => todo[k].0.push(*id),
            None => {
                index.insert(req, todo.len());
                todo.push((vec![*id], req.clone()));
            }
        }
    }
    stats.asked = todo.len();
    if todo.is_empty() {
        return Ok(stats);
    }
    let requests: Vec<CheckRequest> = todo.iter().map(|t| t.1.clone()).collect();
    let commit_error = std::sync::Mutex::new(None);
    let on_verdict = |i: usize, v: &Verdict| {
        if let Some((ids, _)) = todo.get(i) {
            for id in ids {
                if let Err(e) = store.put_verdict(*id, v) {
                    let mut slot = commit_error.lock().unwrap_or_else(|e| e.into_inner());
                    slot.get_or_insert(e);
                }
                progress(v);
            }
        }
    };
    let verdicts = checker.check_batch(&requests, &on_verdict);
    if let Some(e) = commit_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    // Backends that report no progress: commit here (idempotent for those that did).
    for ((ids, _), v) in todo.iter().zip(&verdicts) {
        for id in ids {
            store.put_verdict(*id, v)?;
        }
        if v.is_proved() {
            stats.proved += 1;
        }
        if !v.is_cacheable() {
            stats.infra += 1;
        }
    }
    Ok(stats)
}

pub use prod_prover::local_verdict;

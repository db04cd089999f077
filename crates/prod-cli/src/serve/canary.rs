//! The service's canaries: a self-check at start-up (every attack family of the adversary,
//! on the `False` canary, through the service's own checker), and a watch on every route that
//! decides nodes (`/v1/check`, `/v1/tree`, `/v1/assemble`) for a node that states a canary
//! (`False`, `0 = 1`, `forall n, n = S n`) and was accepted, by prod-prover's one rule
//! ([`prod_prover::canary_alarm`]). An accepted one is a soundness alarm: `prod_canary_alarms_total` and `prod_soundness_alarm` in `/metrics`, and a
//! line on stderr.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use prod_check::{CheckRequest, Verdict};
use prod_core::tree::GlobalVerdict;
use prod_prover::RootDecision;

use super::App;

/// Run the self-check in the background (Coq only); the service answers meanwhile.
pub fn start_self_check(app: Arc<App>) {
    if app.pipeline.coq_checker().is_none() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("canary-self-check".into())
        .spawn(move || {
            let Some(checker) = app.pipeline.coq_checker() else {
                return;
            };
            for s in prod_check_coq::adversary::self_check_scenarios() {
                let out = prod_check_coq::adversary::run(checker, &s, Duration::from_secs(120));
                app.metrics.canary_checks.fetch_add(1, Ordering::Relaxed);
                if let Some(p) = out.problem(&s).filter(|p| p.starts_with("ATTACK ACCEPTED")) {
                    app.metrics.canary_alarms.fetch_add(1, Ordering::Relaxed);
                    eprintln!("SOUNDNESS ALARM (self-check): {p}");
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: cannot start the canary self-check: {e}");
    }
}

/// What a request decided about its nodes, for the canary watch: each node's check, and the
/// global verdicts (`/v1/tree`, `/v1/assemble`) and the root's cold re-check (`/v1/assemble`)
/// where the route decided them.
pub struct Decided<'a> {
    pub requests: &'a [Result<CheckRequest, Verdict>],
    pub verdicts: &'a [(Verdict, Duration)],
    /// Per node: `Some(true)` globally correct, `Some(false)` not, `None` undetermined.
    pub global: Option<&'a [Option<bool>]>,
    /// The root's index and its final check's verdict.
    pub final_check: Option<(usize, &'a Verdict)>,
}

/// Count every node of a request that states a canary and was accepted
/// ([`prod_prover::canary_alarm`], the rule every path that decides a root uses).
pub fn watch(app: &App, d: &Decided<'_>) {
    let lang = app.prover.language();
    for (i, (r, (v, _))) in d.requests.iter().zip(d.verdicts).enumerate() {
        let Ok(r) = r else { continue };
        let global = d.global.and_then(|g| g.get(i)).map(|g| match g {
            Some(true) => GlobalVerdict::Correct,
            Some(false) => GlobalVerdict::Incorrect,
            None => GlobalVerdict::Undetermined,
        });
        let decision = RootDecision {
            local: Some((v.local_verdict(), r.proof.lemma_count() > 0)),
            global,
            final_check: d.final_check.filter(|(root, _)| *root == i).map(|(_, v)| v),
        };
        if let Some(alarm) = prod_prover::canary_alarm(lang, &r.statement, &decision) {
            app.metrics.canary_alarms.fetch_add(1, Ordering::Relaxed);
            eprintln!("{alarm}: {} {}", r.statement, r.proof);
        }
    }
}

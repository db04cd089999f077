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
            for s in prod_prover::adversary::self_check_scenarios() {
                let out = prod_prover::adversary::run(checker, &s, Duration::from_secs(120));
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

/// Count the alarms a judged tree raised ([`prod_prover::judge`]: every node that states a
/// canary and was accepted, by the same rule as [`watch`]).
pub fn raise(
    app: &App,
    requests: &[Result<CheckRequest, Verdict>],
    alarms: &[(usize, prod_prover::CanaryAlarm)],
) {
    for (i, alarm) in alarms {
        app.metrics.canary_alarms.fetch_add(1, Ordering::Relaxed);
        match requests.get(*i) {
            Some(Ok(r)) => eprintln!("{alarm}: {} {}", r.statement, r.proof),
            _ => eprintln!("{alarm}: node {i}"),
        }
    }
}

/// `/v1/check`: count every node that states a canary and was accepted by its check alone
/// (locally correct without proposing a lemma), by prod-prover's one rule
/// ([`prod_prover::canary_alarm`]); the tree routes raise [`prod_prover::judge`]'s alarms.
pub fn watch(
    app: &App,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
) {
    let lang = app.prover.language();
    let mut alarms = vec![];
    for (i, (r, (v, _))) in requests.iter().zip(verdicts).enumerate() {
        let Ok(r) = r else { continue };
        let decision = RootDecision {
            local: Some((v.local_verdict(), r.proof.lemma_count() > 0)),
            ..RootDecision::default()
        };
        if let Some(alarm) = prod_prover::canary_alarm(lang, &r.statement, &decision) {
            alarms.push((i, alarm));
        }
    }
    raise(app, requests, &alarms);
}

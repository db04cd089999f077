//! The service's canaries: a self-check at start-up (every attack family of the adversary,
//! on the `False` canary, through the service's own checker), and a watch on requests whose
//! root states a canary (`False`, `0 = 1`, `forall n, n = S n`). An accepted one is a
//! soundness alarm: `prod_canary_alarms_total` and `prod_soundness_alarm` in `/metrics`, and a
//! line on stderr.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use prod_check::{CheckRequest, Verdict};

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

/// Count a request's canary nodes proved locally without proposing a lemma.
pub fn watch_local(
    app: &App,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
) {
    let global: Vec<Option<bool>> = requests
        .iter()
        .zip(verdicts)
        .map(|(r, (v, _))| {
            let alone = r.as_ref().is_ok_and(|r| r.proof.lemma_count() == 0);
            Some(alone && v.is_proved())
        })
        .collect();
    watch(app, requests, &global);
}

/// Count a request's canary roots that came out globally correct.
pub fn watch(app: &App, requests: &[Result<CheckRequest, Verdict>], global: &[Option<bool>]) {
    for (r, g) in requests.iter().zip(global) {
        let Ok(r) = r else { continue };
        if *g == Some(true) && prod_check_coq::adversary::is_canary_statement(&r.statement) {
            app.metrics.canary_alarms.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "SOUNDNESS ALARM: a request's canary root is globally correct: {} {}",
                r.statement, r.proof
            );
        }
    }
}

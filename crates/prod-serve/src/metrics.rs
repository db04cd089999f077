//! `prod serve`'s counters and gauges, written as Prometheus text (`GET /metrics`).
//!
//! Plain atomics and a fixed-bucket histogram: a handful of series does not need a metrics
//! library, and the text format is small and stable.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prod_check::{Verdict, VerdictKind};

use prod_prover::Origin;

/// Every verdict kind, in the order the metrics list them.
const KINDS: [VerdictKind; 5] = [
    VerdictKind::Proved,
    VerdictKind::Failed,
    VerdictKind::TimedOut,
    VerdictKind::Rejected,
    VerdictKind::Infra,
];

/// Upper bounds (seconds) of the check latency histogram's buckets.
const BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Default)]
pub struct Metrics {
    /// Nodes answered, by verdict kind (index into `KINDS`).
    verdicts: [AtomicU64; 5],
    cache_hits: AtomicU64,
    /// Prover checks by latency bucket (the last slot is +Inf).
    buckets: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_us: AtomicU64,
    latency_count: AtomicU64,
    /// Nodes admitted whose verdict is not known yet (what `--max-queued` bounds).
    pub queued: AtomicU64,
    /// `/v1/check` and `/v1/tree` requests being answered.
    pub in_flight: AtomicU64,
    /// Requests refused with 429 (queue full).
    pub refused: AtomicU64,
    /// Canary attacks checked by the service's self-check.
    pub canary_checks: AtomicU64,
    /// Canaries accepted: a self-check attack, or a request's canary root (`False`, `0 = 1`,
    /// …) found globally correct or proved. Any is a soundness alarm.
    pub canary_alarms: AtomicU64,
}

impl Metrics {
    /// Record one node's verdict.
    pub fn record(&self, v: &Verdict, t: Duration, origin: Origin) {
        let k = KINDS.iter().position(|&k| k == v.kind()).unwrap_or(0);
        self.verdicts[k].fetch_add(1, Ordering::Relaxed);
        match origin {
            Origin::Cache => {
                self.cache_hits.fetch_add(1, Ordering::Relaxed);
            }
            Origin::Prover => {
                let s = t.as_secs_f64();
                let b = BUCKETS
                    .iter()
                    .position(|&u| s <= u)
                    .unwrap_or(BUCKETS.len());
                self.buckets[b].fetch_add(1, Ordering::Relaxed);
                self.latency_sum_us
                    .fetch_add(t.as_micros() as u64, Ordering::Relaxed);
                self.latency_count.fetch_add(1, Ordering::Relaxed);
            }
            Origin::Input => {}
        }
    }

    /// Mean prover check time so far (None before the first check).
    pub fn mean_latency(&self) -> Option<Duration> {
        let n = self.latency_count.load(Ordering::Relaxed);
        let sum = self.latency_sum_us.load(Ordering::Relaxed);
        (n > 0).then(|| Duration::from_micros(sum / n))
    }

    /// The check wall times as a Prometheus histogram (cumulative buckets, sum and count).
    fn duration_histogram(&self, s: &mut String) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(
            s,
            "# HELP prod_check_duration_seconds Wall time of prover checks."
        );
        let _ = writeln!(s, "# TYPE prod_check_duration_seconds histogram");
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += get(b);
            let le = BUCKETS.get(i).map_or("+Inf".to_string(), |u| u.to_string());
            let _ = writeln!(
                s,
                "prod_check_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let sum = get(&self.latency_sum_us) as f64 / 1e6;
        let _ = writeln!(s, "prod_check_duration_seconds_sum {sum}");
        let _ = writeln!(
            s,
            "prod_check_duration_seconds_count {}",
            get(&self.latency_count)
        );
    }

    /// The Prometheus text exposition.
    pub fn render(&self, workers: usize) -> String {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = String::new();
        let _ = writeln!(s, "# HELP prod_checks_total Nodes answered, by verdict.");
        let _ = writeln!(s, "# TYPE prod_checks_total counter");
        for (k, c) in KINDS.iter().zip(&self.verdicts) {
            let _ = writeln!(s, "prod_checks_total{{verdict=\"{k}\"}} {}", get(c));
        }
        let _ = writeln!(
            s,
            "# HELP prod_cache_hits_total Verdicts taken from the verification cache."
        );
        let _ = writeln!(s, "# TYPE prod_cache_hits_total counter");
        let _ = writeln!(s, "prod_cache_hits_total {}", get(&self.cache_hits));
        self.duration_histogram(&mut s);
        let gauges = [
            (
                "prod_queued_nodes",
                "Nodes admitted whose verdict is not known yet.",
                get(&self.queued),
            ),
            (
                "prod_in_flight_requests",
                "Check requests being answered.",
                get(&self.in_flight),
            ),
            (
                "prod_workers",
                "Checks that run at the same time.",
                workers as u64,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let _ = writeln!(
            s,
            "# HELP prod_refused_requests_total Requests refused because the queue was full."
        );
        let _ = writeln!(s, "# TYPE prod_refused_requests_total counter");
        let _ = writeln!(s, "prod_refused_requests_total {}", get(&self.refused));
        let _ = writeln!(
            s,
            "# HELP prod_canary_checks_total Canary attacks checked by the service's self-check.\n\
             # TYPE prod_canary_checks_total counter\nprod_canary_checks_total {}",
            get(&self.canary_checks)
        );
        let alarms = get(&self.canary_alarms);
        let _ = writeln!(
            s,
            "# HELP prod_canary_alarms_total Canaries accepted (statements no proof may prove): a soundness alarm.\n\
             # TYPE prod_canary_alarms_total counter\nprod_canary_alarms_total {alarms}"
        );
        let _ = writeln!(
            s,
            "# HELP prod_soundness_alarm 1 once any canary was accepted.\n\
             # TYPE prod_soundness_alarm gauge\nprod_soundness_alarm {}",
            u64::from(alarms > 0)
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_cache_and_latency() {
        let m = Metrics::default();
        m.record(
            &Verdict::infra("x"),
            Duration::from_millis(300),
            Origin::Prover,
        );
        m.record(&Verdict::rejected("x"), Duration::ZERO, Origin::Cache);
        let text = m.render(2);
        assert!(
            text.contains("prod_checks_total{verdict=\"infra\"} 1"),
            "{text}"
        );
        assert!(text.contains("prod_checks_total{verdict=\"rejected\"} 1"));
        assert!(text.contains("prod_cache_hits_total 1"));
        assert!(text.contains("prod_check_duration_seconds_bucket{le=\"0.25\"} 0"));
        assert!(text.contains("prod_check_duration_seconds_bucket{le=\"0.5\"} 1"));
        assert!(text.contains("prod_check_duration_seconds_bucket{le=\"+Inf\"} 1"));
        assert!(text.contains("prod_workers 2"));
        assert_eq!(m.mean_latency(), Some(Duration::from_millis(300)));
    }
}

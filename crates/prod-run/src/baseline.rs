//! CoqHammer alone on an evaluation's theorems: the baseline a Coq user judges a learned prover
//! against first. Each theorem gets one root `<no_invoke> hammer.` — the fixed tactic list,
//! then CoqHammer's provers, exactly as a `hammer.` step of a policy's proof is expanded — checked
//! by the same checker with the same settings, solved and re-checked cold like any tree, so that
//! a theorem counts as proved by the hammer under the same rules as by ProD.
//!
//! It runs as an evaluation of its own ([`run_eval`] under [`Phase::HammerBaseline`], n = 1,
//! depth 0) in the run's store, so a resumed run checks nothing twice; its checks also go
//! through a verification cache that outlives the run (by default
//! `$PROD_CACHE/hammer-baseline.sqlite`, keyed like every verification cache by the checker's
//! fingerprint and the request: the theorem's context and statement), so evaluating another
//! model on the same dataset with the same checker costs the baseline nothing.
//!
//! The hammer is deterministic: k attempts are k copies of the one attempt, so its pass@k is
//! its pass@1 for every k, and [`compare`] pairs it with the method's pass@k theorem by theorem.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use prod_check::{CachedChecker, Checker, HammerStats, VerificationCache};
use prod_report::{Comparison, Evaluation, HammerUse};
use prod_rl::{Completion, PolicyError, SampleRequest};

use crate::context::RunContext;
use crate::eval::{run_eval, EvalOptions, EvalResult, Theorem};
use crate::policy::SeqPolicy;
use crate::prover::CheckSetup;
use crate::store::Phase;

/// The baseline's name in reports.
pub use prod_report::HAMMER_BASELINE;

/// The one proof the baseline writes for every theorem (a hammer leaf's proof too).
pub use crate::leaves::HAMMER_PROOF;

/// A "policy" that answers every request with [`HAMMER_PROOF`].
struct HammerOnly;

impl SeqPolicy for HammerOnly {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        Ok(vec![Completion::ended(HAMMER_PROOF); requests.len()])
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.0; goals.len()])
    }

    fn requests_per_call(&self) -> usize {
        64
    }
}

/// The default cache of the baseline's checks: `$PROD_CACHE/hammer-baseline.sqlite`
/// (`PROD_CACHE` defaults to `~/.cache/prod`).
pub fn default_cache() -> PathBuf {
    let base = std::env::var_os("PROD_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."))
                .join(".cache/prod")
        });
    base.join("hammer-baseline.sqlite")
}

/// `checker` behind the cross-run cache file `path` (its folder created).
pub(crate) fn shared_cache<'a>(
    checker: &'a dyn Checker,
    path: &Path,
) -> anyhow::Result<CachedChecker<&'a dyn Checker>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    Ok(CachedChecker::new(
        checker,
        VerificationCache::open(path)
            .with_context(|| format!("hammer baseline cache {}", path.display()))?,
    ))
}

/// The hammer work between two snapshots of a checker, for the report.
pub fn hammer_use(before: Option<HammerStats>, after: Option<HammerStats>) -> Option<HammerUse> {
    let d = after?.since(&before.unwrap_or_default());
    Some(HammerUse {
        calls: d.calls,
        fixed_closed: d.fixed_closed,
        atp_calls: d.atp_calls,
        atp_closed: d.atp_closed,
        cache_closed: d.cache_closed,
        cache_failed: d.cache_failed,
        cache_stale: d.cache_stale,
        fixed_s: d.fixed_s,
        atp_s: d.atp_s,
    })
}

/// What the baseline produced, and what it cost this invocation.
pub struct BaselineRun {
    pub result: EvalResult,
    pub seconds: f64,
}

/// CoqHammer alone on `theorems` with the run's prover (its checker behind `cache`, when given,
/// as well as the run's own cache), stored in the run's store under
/// [`Phase::HammerBaseline`]. `opts` is the method's evaluation (its split, final-check limit,
/// bootstrap and seed); the baseline's own is one tree of depth 0 per theorem.
pub fn run_hammer_baseline(
    ctx: &RunContext<'_>,
    theorems: &[Theorem],
    opts: &EvalOptions,
    cache: Option<&Path>,
) -> anyhow::Result<BaselineRun> {
    let start = Instant::now();
    let shared = match cache {
        Some(path) => Some(shared_cache(ctx.prover.checker, path)?),
        None => None,
    };
    let checker: &dyn Checker = match &shared {
        Some(c) => c,
        None => ctx.prover.checker,
    };
    let sub = RunContext {
        store: ctx.store,
        prover: CheckSetup {
            checker,
            ..ctx.prover
        },
        out: ctx.out,
        bars: ctx.bars,
        dataset_statements: ctx.dataset_statements,
    };
    let own = EvalOptions {
        name: HAMMER_BASELINE.to_string(),
        ks: vec![1],
        samples: 1,
        depth: 0,
        // Nothing is sampled: the one attempt is the same every time.
        temperature: 0.0,
        // The root is never hammered on a method's behalf, and the hammer alone proposes
        // nothing: no leaves.
        hammer_leaves: false,
        ..opts.clone()
    };
    ctx.bars.say(&format!(
        "hammer baseline: {} theorems, one `hammer.` each (fixed tactics, then the provers)",
        theorems.len()
    ));
    let before = checker.hammer_stats();
    let mut result = run_eval(
        &sub,
        &mut HammerOnly,
        theorems,
        &own,
        0,
        Phase::HammerBaseline,
    )?;
    result.evaluation.hammer = hammer_use(before, checker.hammer_stats());
    Ok(BaselineRun {
        result,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// `method` against CoqHammer alone for `ks` (paired bootstrap, widened by Newcombe's score
/// interval).
pub fn compare(
    method: &Evaluation,
    hammer: &Evaluation,
    ks: &[usize],
    boot: prod_core::pass_at_k::Bootstrap,
) -> Comparison {
    prod_report::compare(method, hammer, ks, true, boot)
}

/// A line for the report's notes and the log: proved, and who proved what.
pub fn summary_line(c: &Comparison, seconds: Option<f64>) -> String {
    let delta = c
        .rows
        .iter()
        .filter_map(|r| r.difference.as_ref())
        .map(|d| {
            format!(
                "pass@{} {:+.1} [{:+.1}, {:+.1}]",
                d.k,
                100.0 * d.estimate,
                100.0 * d.ci_low,
                100.0 * d.ci_high
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut s = format!(
        "{} vs {}: proved by both {}, only by {} {}, only by {} {}, by neither {}; Δ ({} − {}, paired 95% CI, points): {}",
        c.method,
        c.baseline,
        c.both,
        c.method,
        c.method_only,
        c.baseline,
        c.baseline_only,
        c.neither,
        c.method,
        c.baseline,
        if delta.is_empty() { "–".to_string() } else { delta }
    );
    if let Some(t) = seconds {
        s.push_str(&format!("; the baseline took {t:.0} s this invocation"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_policy_writes_hammer_for_every_goal() {
        let mut p = HammerOnly;
        let reqs = [
            SampleRequest {
                context: "c",
                statement: "Lemma a : True.",
                forced_t0: None,
            },
            SampleRequest {
                context: "c",
                statement: "Lemma b : True.",
                forced_t0: Some(prod_core::T0::NoInvoke),
            },
        ];
        let out = p.sample_at(&reqs, 7).unwrap();
        assert_eq!(out, vec![Completion::ended(HAMMER_PROOF); 2]);
        let parsed =
            prod_core::ConditionalProof::parse_with(&out[0].text, &prod_coq::CoqLanguage).unwrap();
        assert_eq!(parsed.t0(), prod_core::T0::NoInvoke);
        assert_eq!(parsed.lemma_count(), 0);
        assert_eq!(p.p_use_invoke(&[("c", "s")]).unwrap(), vec![0.0]);
        assert!(hammer_use(None, None).is_none());
        let h = hammer_use(
            None,
            Some(HammerStats {
                calls: 2,
                atp_s: 1.5,
                ..Default::default()
            }),
        )
        .unwrap();
        assert_eq!((h.calls, h.atp_s), (2, 1.5));
    }
}

//! The checking pipeline of `prod check`, `prod serve` and `prod bench serve`: verdicts known
//! from the input, verification-cache hits, then the prover for the rest (cached afterwards).
//! One code path for every command that answers nodes, whatever the prover.

use std::time::Duration;

use prod_check::{cache_key, CheckRequest, Checker, Verdict, VerificationCache};
use prod_check_coq::CoqChecker;
use prod_check_isabelle::IsabelleChecker;

use crate::settings::{CheckerConfig, CheckerSettings, ProverConfig, SetupError};
use crate::{CoqFinal, FinalCheck, IsabelleFinal};

/// Where a verdict came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Known from the input alone (not a conditional proof).
    Input,
    /// The verification cache.
    Cache,
    /// The prover, now.
    Prover,
}

/// Called once per node with its index, verdict, time and origin (from any thread).
pub type Done<'a> = &'a (dyn Fn(usize, &Verdict, Duration, Origin) + Sync);

/// The checker behind the pipeline: what follows is the same for every prover.
enum Backend {
    Coq(CoqChecker),
    Isabelle(Box<IsabelleChecker>),
}

impl Backend {
    fn start(prover: ProverConfig) -> Result<Backend, String> {
        match prover {
            ProverConfig::Coq(cfg) => crate::start_coq(cfg).map(Backend::Coq),
            ProverConfig::Isabelle(cfg) => {
                crate::start_isabelle(cfg).map(|c| Backend::Isabelle(Box::new(c)))
            }
        }
    }

    fn checker(&self) -> &dyn Checker {
        match self {
            Backend::Coq(c) => c,
            Backend::Isabelle(c) => &**c,
        }
    }

    /// Check with each request's wall time (Coq measures it per worker; otherwise the time
    /// since the batch started).
    fn check_timed(
        &self,
        requests: &[CheckRequest],
        progress: &(dyn Fn(usize, &Verdict, Duration) + Sync),
    ) -> Vec<(Verdict, Duration)> {
        match self {
            Backend::Coq(c) => c.check_batch_timed(requests, progress),
            Backend::Isabelle(c) => {
                let start = std::time::Instant::now();
                c.check_batch(requests, &|i, v| progress(i, v, start.elapsed()))
                    .into_iter()
                    .map(|v| (v, start.elapsed()))
                    .collect()
            }
        }
    }
}

/// A started checker with its verification cache.
pub struct Pipeline {
    backend: Backend,
    cache: Option<VerificationCache>,
    fingerprint: String,
    /// The verdicts' provenance: `coq 8.16.1`, `rocq 9.2`, `isabelle`.
    prover: String,
    keep_session: bool,
}

impl Pipeline {
    /// The settings over the config file ([`CheckerSettings::resolve`]), then the prover and
    /// the cache started.
    pub fn open(settings: &CheckerSettings) -> Result<Self, SetupError> {
        Self::start(settings.resolve()?)
    }

    /// The prover and the cache of a resolved config.
    pub fn start(c: CheckerConfig) -> Result<Self, SetupError> {
        let backend = Backend::start(c.prover).map_err(SetupError::Failure)?;
        let cache = match &c.cache {
            Some(p) => {
                Some(VerificationCache::open(p).map_err(|e| SetupError::Failure(e.to_string()))?)
            }
            None => None,
        };
        let fingerprint = backend.checker().fingerprint();
        let prover = crate::prover_name(c.kind, &fingerprint);
        Ok(Pipeline {
            backend,
            cache,
            fingerprint,
            prover,
            keep_session: c.keep_session,
        })
    }

    /// The Coq checker, when the backend is Coq (the service's canary self-check uses it).
    pub fn coq_checker(&self) -> Option<&CoqChecker> {
        match &self.backend {
            Backend::Coq(c) => Some(c),
            Backend::Isabelle(_) => None,
        }
    }

    /// The name the verdicts carry (`coq 8.16.1`, `rocq 9.2.0`, `isabelle`).
    pub fn prover(&self) -> &str {
        &self.prover
    }

    /// Checks that run at the same time.
    pub fn workers(&self) -> usize {
        match &self.backend {
            Backend::Coq(c) => c.workers(),
            Backend::Isabelle(c) => c.config().workers.max(1),
        }
    }

    /// Judge every node; `done` hears each verdict as soon as it is known (known ones first).
    /// Returns the verdicts in input order.
    pub fn check(
        &self,
        nodes: &[Result<CheckRequest, Verdict>],
        done: Done<'_>,
    ) -> Vec<(Verdict, Duration)> {
        let mut known: Vec<Option<(Verdict, Duration)>> = vec![None; nodes.len()];
        let mut todo = vec![];
        for (i, req) in nodes.iter().enumerate() {
            let (v, origin) = match req {
                Err(v) => (v.clone(), Origin::Input),
                Ok(r) => match self.cached(r) {
                    Some(v) => (v, Origin::Cache),
                    None => {
                        todo.push(i);
                        continue;
                    }
                },
            };
            done(i, &v, Duration::ZERO, origin);
            known[i] = Some((v, Duration::ZERO));
        }
        let requests: Vec<CheckRequest> = todo
            .iter()
            .filter_map(|&i| nodes[i].as_ref().ok().cloned())
            .collect();
        let results = self
            .backend
            .check_timed(&requests, &|j, v, t| done(todo[j], v, t, Origin::Prover));
        for (j, r) in results.into_iter().enumerate() {
            if let Some(c) = &self.cache {
                let _ = c.put(&cache_key(&self.fingerprint, &requests[j]), &r.0);
            }
            known[todo[j]] = Some(r);
        }
        known
            .into_iter()
            .map(|k| k.unwrap_or_else(|| (Verdict::infra("no verdict produced"), Duration::ZERO)))
            .collect()
    }

    fn cached(&self, r: &CheckRequest) -> Option<Verdict> {
        let c = self.cache.as_ref()?;
        c.get(&cache_key(&self.fingerprint, r)).ok().flatten()
    }

    /// The cold re-check of assembled proofs: Coq compiles the whole file in a fresh sandbox,
    /// Isabelle builds the assembled theory in a fresh session.
    pub fn final_checker(&self) -> Box<dyn FinalCheck> {
        match &self.backend {
            Backend::Coq(c) => Box::new(CoqFinal(c.config().clone())),
            Backend::Isabelle(c) => Box::new(IsabelleFinal(c.config().clone())),
        }
    }

    /// Without a cache file, keep the newest `max` verdicts in memory (the cache is keyed and
    /// filled as a file's is: never an infra verdict).
    pub fn keep_verdicts_in_memory(&mut self, max: u32) -> Result<(), prod_check::CacheError> {
        if self.cache.is_none() {
            self.cache = Some(VerificationCache::in_memory_bounded(max)?);
        }
        Ok(())
    }

    /// After the last check: stop the Isabelle session unless asked to keep it. `Err` says
    /// why it could not be stopped (a warning: every verdict is already out).
    pub fn close(&self) -> Result<(), String> {
        if let Backend::Isabelle(c) = &self.backend {
            if !self.keep_session {
                c.stop_session()
                    .map_err(|e| format!("could not stop the Isabelle session: {e}"))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_errors_say_what_went_wrong() {
        let bad = SetupError::BadInput("--coq-root: no such directory".into());
        assert_eq!(bad.to_string(), "--coq-root: no such directory");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prod.toml");
        std::fs::write(&p, "[check]\ncache = 3\n").unwrap();
        let s = CheckerSettings {
            config: Some(p),
            ..CheckerSettings::default()
        };
        match Pipeline::open(&s) {
            Err(SetupError::BadInput(e)) => assert!(e.contains("[check]"), "{e}"),
            _ => panic!("a config file that does not parse is bad input"),
        }
    }
}

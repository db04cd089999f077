//! Shared helpers for the tests that run the real Coq.
#![allow(dead_code)]

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use prod_check::CheckRequest;
use prod_check_coq::CoqCheckConfig;
use prod_core::ConditionalProof;
use serde::Deserialize;

#[derive(Deserialize)]
pub struct Case {
    pub id: String,
    pub imports: String,
    pub context: String,
    pub statement: String,
    pub proof: String,
    pub expect: String,
    pub axioms: Option<Vec<String>>,
    /// Axioms of the context the case's checker allows by name (`allowed_axioms`).
    #[serde(default)]
    pub allowed_axioms: Vec<String>,
}

pub fn load(name: &str) -> Vec<Case> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}:{}: {e}", i + 1)))
        .collect()
}

/// A case's request, its proof parsed as Coq lexes it; a text that is not a conditional proof
/// gets the verdict every checking command gives it (`Rejected`, without the checker).
pub fn request(c: &Case) -> Result<CheckRequest, prod_check::Verdict> {
    ConditionalProof::parse_with(&c.proof, &prod_coq::CoqLanguage)
        .map(|proof| CheckRequest::new(&c.imports, &c.context, &c.statement, proof))
        .map_err(|e| prod_check::Verdict::rejected(format!("not a conditional proof: {e}")))
}

/// Small limits so the suite stays quick on 2 cores.
pub fn config(workers: usize) -> CoqCheckConfig {
    let mut cfg = CoqCheckConfig {
        workers,
        step_timeout_s: 5,
        memory_limit_mb: 3000,
        ..Default::default()
    };
    cfg.hammer.atp_limit_s = 5;
    cfg.hammer.timeout_s = 40;
    cfg
}

/// [`config`] with the ProD plugin built and set, as the pool sets it: for tests that start a
/// [`prod_check_coq::session::Session`] themselves.
pub fn config_with_plugin(workers: usize) -> CoqCheckConfig {
    let mut cfg = config(workers);
    cfg.plugin = Some(prod_check_coq::plugin::for_config(&cfg).unwrap_or_else(|e| panic!("{e}")));
    cfg
}

/// Every supported prover version this machine has: Coq 8.16 (the host's), and Rocq 9.2 from
/// its Debian root (`scripts/install-rocq.sh`; `PROD_ROCQ_ROOT` or `~/.cache/prod/rocq-9.2`).
/// Under `CI=true` a missing root is a failure, not a skip ([`prod_test_support::require`]).
pub fn provers() -> Vec<(&'static str, Option<std::path::PathBuf>)> {
    let mut out = vec![("coq-8.16", None)];
    let root = std::env::var_os("PROD_ROCQ_ROOT")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache"))
                })?;
            Some(cache.join("prod/rocq-9.2"))
        });
    match root {
        Some(r) if r.join("prod-root.txt").is_file() => out.push(("rocq-9.2", Some(r))),
        // Counted as a skip (of the Rocq 9.2 half) though the test goes on with Coq 8.16.
        r => {
            prod_test_support::require(
                false,
                &format!(
                    "the Rocq 9.2 root is missing ({r:?}): run scripts/install-rocq.sh \
                     (checking on Coq 8.16 only)"
                ),
            );
        }
    }
    out
}

/// [`config`] for one prover version of [`provers`].
pub fn config_for(workers: usize, root: &Option<std::path::PathBuf>) -> CoqCheckConfig {
    CoqCheckConfig {
        root: root.clone(),
        ..config(workers)
    }
}

/// Does a verdict's axiom list match the expected one? The expected names are as Coq 8.16
/// prints them (shortest in scope); Rocq 9 reports full paths, so each reported name must be
/// the expected one or end with it at a component boundary (`Top.M.h` for `M.h`).
pub fn same_axioms(want: &[String], got: &[String]) -> bool {
    want.len() == got.len()
        && want
            .iter()
            .zip(got)
            .all(|(w, g)| g == w || g.ends_with(&format!(".{w}")))
}

/// Check `cases` on one prover version, with one checker per distinct `allowed_axioms` (each
/// case is checked with exactly the axioms it allows); verdicts in case order.
pub fn check_cases(
    version: &str,
    root: &Option<std::path::PathBuf>,
    cases: &[&Case],
) -> Vec<prod_check::Verdict> {
    use prod_check::Checker;
    let mut groups: Vec<Vec<String>> = cases.iter().map(|c| c.allowed_axioms.clone()).collect();
    groups.sort();
    groups.dedup();
    let mut verdicts: Vec<Option<prod_check::Verdict>> = vec![None; cases.len()];
    for allowed in groups {
        let mut cfg = config_for(2, root);
        cfg.allowed_axioms = allowed.clone();
        let checker = prod_check_coq::CoqChecker::new(cfg).unwrap();
        eprintln!(
            "{version}: {}; assumptions by: {}",
            checker.fingerprint(),
            checker.config().assumptions_command()
        );
        let idx: Vec<usize> = (0..cases.len())
            .filter(|&i| cases[i].allowed_axioms == allowed)
            .collect();
        let mut requests = vec![];
        let mut checked = vec![];
        for i in idx {
            match request(cases[i]) {
                Ok(r) => {
                    requests.push(r);
                    checked.push(i);
                }
                Err(v) => verdicts[i] = Some(v),
            }
        }
        for (i, v) in checked
            .into_iter()
            .zip(checker.check_batch(&requests, &|_, _| {}))
        {
            verdicts[i] = Some(v);
        }
    }
    verdicts.into_iter().map(Option::unwrap).collect()
}

/// The tests of this binary share one machine. Those that measure time limits (the corpus
/// times CoqHammer's provers, a few seconds each; the fault tests time endless tactics) take
/// the machine to themselves; every other test here shares it.
static MACHINE: RwLock<()> = RwLock::new(());

/// The machine to this test alone (no other test of this binary runs meanwhile).
pub fn whole_machine() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// The machine shared with the other tests (but never with one that holds it whole).
pub fn shared_machine() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

//! The adversary (`prod_prover::adversary`): seeded scenarios that move every attack construct
//! between proof, statement, proposal and context and vary their layout, judged by the
//! pipeline the product runs (`prod_prover::judge`: check → tree → assembly → final check →
//! canaries) and through the two-step command-line path (verdict lines), with the real Coq
//! 8.16.1 and Rocq 9.2. No canary root may ever be globally correct or pass the final check on
//! either path, no attack node may end in `infra`, and every honest look-alike is proved end
//! to end. `PROD_ADVERSARY_SEED` picks another seed; `prod bench adversary` runs longer.

use std::path::PathBuf;
use std::time::Duration;

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_prover::adversary::{base, run_all, Scenario};

/// Small limits so the suite stays quick on 2 cores.
fn config(root: Option<PathBuf>) -> CoqCheckConfig {
    let mut cfg = CoqCheckConfig {
        workers: 2,
        step_timeout_s: 5,
        memory_limit_mb: 3000,
        root,
        ..Default::default()
    };
    cfg.hammer.atp_limit_s = 5;
    cfg.hammer.timeout_s = 40;
    cfg
}

/// Every problem of `all` on `checker`, two scenarios at a time (the checker's two workers);
/// `audit_first`: a built fixpoint in its own layout must be refused by the term audit (the
/// release whose kernel accepts it at `Qed`).
fn problems(checker: &CoqChecker, all: &[Scenario], audit_first: bool) -> Vec<String> {
    let start = std::time::Instant::now();
    let outcomes = run_all(checker, all, Duration::from_secs(60), 2, &|i, out| {
        eprintln!(
            "{:48} root {:?} two-step {:?} final {:?} local {:?}",
            all[i].id,
            out.root,
            out.two_step,
            out.final_check.as_ref().map(|v| v.kind()),
            out.local.iter().map(|v| v.kind()).collect::<Vec<_>>()
        );
    });
    let mut problems = vec![];
    let honest = all.iter().filter(|s| s.honest).count();
    let attacks = all.len() - honest;
    for (s, out) in all.iter().zip(&outcomes) {
        if let Some(p) = out.problem(s) {
            problems.push(p);
        }
        // A fixpoint built at run time from words no rule refuses: the term audit is what
        // stops it (a random layout may be refused by a text rule first).
        if audit_first
            && s.id.starts_with("built/")
            && !s.id.contains('#')
            && !out.local.iter().any(|v| v.message().contains("term audit"))
        {
            problems.push(format!(
                "{}: not refused by the term audit: {:?}",
                s.id, out.local
            ));
        }
    }
    eprintln!(
        "{attacks} attacks, {honest} look-alikes in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(
        attacks >= 30 && honest >= 5,
        "{attacks} attacks, {honest} look-alikes"
    );
    problems
}

#[test]
fn no_canary_is_ever_accepted_and_look_alikes_are() {
    let seed = std::env::var("PROD_ADVERSARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_126);
    // Coq 8.16.1 is the release every attack works on without the defences: every family in
    // every placement, then random layouts.
    let all = prod_prover::adversary::scenarios(seed, 100);
    let checker = CoqChecker::new(config(None)).unwrap();
    let mut found = problems(&checker, &all, true);
    drop(checker);
    // Rocq 9.2: every family in every placement once.
    if let Some(root) = rocq_root() {
        let checker = CoqChecker::new(config(Some(root))).unwrap();
        found.extend(problems(&checker, &base(), false));
    }
    assert!(found.is_empty(), "{}", found.join("\n\n"));
}

/// The Rocq 9.2 root (`scripts/install-rocq.sh`; `PROD_ROCQ_ROOT` or `~/.cache/prod/rocq-9.2`);
/// under `CI=true` a missing root is a failure, not a skip.
fn rocq_root() -> Option<PathBuf> {
    let root = std::env::var_os("PROD_ROCQ_ROOT")
        .map(PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(cache.join("prod/rocq-9.2"))
        })
        .filter(|r| r.join("prod-root.txt").is_file());
    prod_test_support::require(
        root.is_some(),
        "the Rocq 9.2 root is missing: run scripts/install-rocq.sh (the adversary on Coq 8.16 only)",
    );
    root
}

//! The adversary (`prod_check_coq::adversary`): seeded scenarios that move every attack
//! construct between proof, statement, proposal and context and vary their layout, run through
//! check → tree → assembly → final check with the real Coq. No canary root may ever be
//! globally correct or pass the final check, no attack node may end in `infra`, and every
//! honest look-alike is proved end to end. `PROD_ADVERSARY_SEED` picks another seed;
//! `prod bench adversary` runs longer.

mod common;

use std::time::Duration;

use prod_check_coq::adversary::{run, scenarios};
use prod_check_coq::CoqChecker;

#[test]
fn no_canary_is_ever_accepted_and_look_alikes_are() {
    let seed = std::env::var("PROD_ADVERSARY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_126);
    let all = scenarios(seed, 100);
    // Coq 8.16.1 is the release every attack works on without the defences.
    let checker = CoqChecker::new(common::config(2)).unwrap();
    let start = std::time::Instant::now();
    let mut problems = vec![];
    let (mut attacks, mut honest) = (0, 0);
    for s in &all {
        let out = run(&checker, s, Duration::from_secs(60));
        if s.honest {
            honest += 1;
        } else {
            attacks += 1;
        }
        eprintln!(
            "{:48} root {:?} final {:?} local {:?}",
            s.id,
            out.root,
            out.final_check.as_ref().map(|v| v.kind()),
            out.local.iter().map(|v| v.kind()).collect::<Vec<_>>()
        );
        if let Some(p) = out.problem(s) {
            problems.push(p);
        }
        // A fixpoint built at run time from words no rule refuses: the term audit is what
        // stops it (a random layout may be refused by a text rule first).
        if s.id.starts_with("built/")
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
        "seed {seed}: {attacks} attacks, {honest} look-alikes in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(attacks >= 50 && honest >= 5);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

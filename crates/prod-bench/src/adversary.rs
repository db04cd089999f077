//! `prod bench adversary`: prod-prover's seeded attack scenarios (every attack construct moved
//! between proof, statement, proposal and context, in varied layouts) each run through check →
//! tree → assembly → final check with the real prover, and tallied: attacks accepted, honest
//! look-alikes proved, every problem found.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_prover::adversary::{run_all, scenarios};

/// The final check's time limit per scenario.
const FINAL_TIMEOUT: Duration = Duration::from_secs(120);

/// Which scenarios, and the checker that runs them (also `prod bench adversary`'s flags,
/// feature `clap`; the prover root is the command's `--coq-root`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AdversarySettings {
    /// Scenarios to run (the first ones are every family in every placement, the rest random
    /// layouts of them).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = AdversarySettings::default().scenarios,
        value_parser = prod_core::range::parse::positive_usize))]
    pub scenarios: usize,
    /// Seed of the layouts.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = AdversarySettings::default().seed))]
    pub seed: u64,
    /// Checker workers; as many scenarios are judged at a time.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = AdversarySettings::default().workers,
        value_parser = prod_core::range::parse::positive_usize))]
    pub workers: usize,
    /// A Debian root holding the prover instead of the host's Coq.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub coq_root: Option<PathBuf>,
}

impl Default for AdversarySettings {
    /// Every family in every placement, and random layouts of them up to 300.
    fn default() -> Self {
        AdversarySettings {
            scenarios: 300,
            seed: prod_core::DEFAULT_SEED,
            workers: prod_prover::DEFAULT_WORKERS,
            coq_root: None,
        }
    }
}

/// What the scenarios found.
#[derive(Debug, Default)]
pub struct AdversaryReport {
    /// The prover's name, from the checker's fingerprint.
    pub prover: String,
    pub seed: u64,
    /// Scenarios run.
    pub scenarios: usize,
    /// Attack scenarios, and how many were accepted (any is a soundness alarm).
    pub attacks: usize,
    pub attacks_accepted: usize,
    /// Honest look-alikes, and how many were proved (each should be).
    pub look_alikes: usize,
    pub look_alikes_proved: usize,
    /// Per family: (scenarios, attacks proved).
    pub by_family: BTreeMap<String, (usize, usize)>,
    /// Every problem, in scenario order (an accepted attack's starts with `ATTACK ACCEPTED`).
    pub problems: Vec<String>,
    pub seconds: f64,
}

impl AdversaryReport {
    /// `--json`'s object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "prover": self.prover,
            "seed": self.seed,
            "scenarios": self.scenarios,
            "attacks": self.attacks,
            "attacks_accepted": self.attacks_accepted,
            "look_alikes": self.look_alikes,
            "look_alikes_proved": self.look_alikes_proved,
            "problems": self.problems,
            "seconds": self.seconds,
        })
    }

    /// The figures as lines of text: the tally, the scenarios per family, every problem.
    pub fn text(&self) -> String {
        let mut t = format!(
            "{}: {} scenarios (seed {}) in {:.1} s: {} attacks, {} accepted; {} look-alikes, {} proved\n",
            self.prover, self.scenarios, self.seed, self.seconds, self.attacks, self.attacks_accepted, self.look_alikes, self.look_alikes_proved
        );
        for (f, (n, _)) in &self.by_family {
            t += &format!("  {f:10} {n:5} scenarios\n");
        }
        for p in &self.problems {
            t += &format!("{p}\n");
        }
        t
    }
}

/// Runs the scenarios, as many at a time as the checker has workers. `progress(done, total)`
/// is called once before the first (done 0) and after each. A checker that does not start is an error.
pub fn adversary(
    s: &AdversarySettings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> anyhow::Result<AdversaryReport> {
    let mut cfg = CoqCheckConfig {
        workers: s.workers,
        ..Default::default()
    };
    prod_prover::set_root(&mut cfg, s.coq_root.as_deref()).map_err(|e| anyhow!(e))?;
    let checker = CoqChecker::new(cfg).map_err(|e| anyhow!(e))?;
    let all = scenarios(s.seed, s.scenarios);
    let start = Instant::now();
    let mut r = AdversaryReport {
        prover: prod_check_coq::prover_name(&prod_check::Checker::fingerprint(&checker)),
        seed: s.seed,
        scenarios: all.len(),
        ..Default::default()
    };
    progress(0, all.len());
    let finished = AtomicUsize::new(0);
    let outcomes = run_all(&checker, &all, FINAL_TIMEOUT, s.workers, &|_, _| {
        progress(finished.fetch_add(1, Ordering::Relaxed) + 1, all.len());
    });
    for (sc, out) in all.iter().zip(&outcomes) {
        r.tally(&family(&sc.id), sc.honest, out.proved());
        if let Some(p) = out.problem(sc) {
            if p.starts_with("ATTACK ACCEPTED") {
                r.attacks_accepted += 1;
            }
            r.problems.push(p);
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    Ok(r)
}

impl AdversaryReport {
    /// One scenario's outcome in the counts.
    fn tally(&mut self, family: &str, honest: bool, proved: bool) {
        let e = self.by_family.entry(family.to_string()).or_default();
        e.0 += 1;
        if honest {
            self.look_alikes += 1;
            self.look_alikes_proved += usize::from(proved);
        } else {
            self.attacks += 1;
            e.1 += usize::from(proved);
        }
    }
}

/// A scenario's family: its id up to the first `/`.
fn family(id: &str) -> String {
    id.split('/').next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_tallied_by_family_attacks_and_look_alikes() {
        let mut r = AdversaryReport::default();
        r.tally(&family("fix/proof/0"), false, true);
        r.tally(&family("fix/context/1"), false, false);
        r.tally(&family("fix/honest"), true, true);
        r.tally(&family("sprop"), true, false);
        assert_eq!((r.attacks, r.look_alikes, r.look_alikes_proved), (2, 2, 1));
        assert_eq!(r.by_family["fix"], (3, 1));
        assert_eq!(r.by_family["sprop"], (1, 0));
    }
}

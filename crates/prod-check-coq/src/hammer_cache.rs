//! Per-goal memory of `hammer.` results, shared by the workers of one [`crate::CoqChecker`].
//!
//! A `hammer.` step tries the fixed tactic list and then CoqHammer's provers (seconds to tens of
//! seconds per goal); test-time trees and RL rounds meet the same goal in many samples (every
//! `<no_invoke> hammer.` of a theorem, every sample of a lemma the policy proposes again). The
//! first expansion of a goal is remembered, keyed by the environment it runs in (the context,
//! the admitted lemmas of the attempt) and the goal as Coq prints it with `Printing All` (every
//! implicit argument and coercion spelt out, goal numbers removed):
//!
//! * a goal that was closed is closed again by the remembered tactic, **re-run by Coq in this
//!   attempt** (the memory only proposes a tactic; when Coq refuses it, the step is expanded
//!   afresh and the new result remembered) — so a memory answer never makes a verdict `Proved`
//!   without Coq having accepted the tactic here;
//! * a goal that neither the fixed list nor the provers closed fails again at once, with the
//!   same message (a failure never proves anything; the cost of a wrong memory is a missed
//!   proof, which the key makes unlikely: equal keys are equal printed goals in equal
//!   environments).
//!
//! A worker that meets a goal another worker is expanding waits for that result instead of
//! running the provers twice. The memory lives as long as its checker (one run); across runs
//! the verification cache answers whole requests.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use prod_check::{HammerStats, Verdict};
use sha2::{Digest, Sha256};

/// A goal's key: SHA-256 of its environment's scope and its printed form.
pub type GoalKey = [u8; 32];

/// How a remembered goal ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Closed: `run` is the sentence that closed it, inside `solve [ … ]` (a fixed tactic
    /// within its time limit, or the provers' replacement tactic), so that a replay closes the
    /// goal or fails; `replacement` is the tactic recorded in the proof.
    Closed { run: String, replacement: String },
    /// Not closed: the step failed with `message`, or ran out of time.
    Failed { timed_out: bool, message: String },
}

impl Outcome {
    /// The remembered failure as the verdict of step `k`; `None` for a closed goal.
    pub fn failure(&self, k: usize) -> Option<Verdict> {
        match self {
            Outcome::Closed { .. } => None,
            Outcome::Failed {
                timed_out: true, ..
            } => Some(Verdict::TimedOut { step: k }),
            Outcome::Failed { message, .. } => Some(Verdict::Failed {
                step: k,
                message: message.clone(),
            }),
        }
    }

    /// The outcome a step's own verdict stands for: `Failed` and `TimedOut` are the hammer's
    /// answer on this goal; a rejection or an infrastructure failure says nothing about it.
    pub fn of_failure(v: &Verdict) -> Option<Outcome> {
        match v {
            Verdict::Failed { message, .. } => Some(Outcome::Failed {
                timed_out: false,
                message: message.clone(),
            }),
            Verdict::TimedOut { .. } => Some(Outcome::Failed {
                timed_out: true,
                message: String::new(),
            }),
            _ => None,
        }
    }
}

enum Slot {
    /// A worker is expanding this goal now.
    Pending,
    Done(Outcome),
}

/// The memory and the counts of [`HammerStats`].
#[derive(Default)]
pub struct HammerCache {
    slots: Mutex<HashMap<GoalKey, Slot>>,
    changed: Condvar,
    stats: Mutex<HammerStats>,
}

/// What [`HammerCache::lookup`] found.
pub enum Lookup<'a> {
    /// The goal was expanded before.
    Hit(Outcome),
    /// Not known: expand it, and hand the result to the claim (when there is one: a claim is
    /// withheld when another worker still holds the goal after the wait).
    Miss(Option<Claim<'a>>),
}

/// The right to record a goal's outcome. Dropped without [`Claim::finish`] (the worker failed),
/// it frees the goal for the next worker.
pub struct Claim<'a> {
    cache: &'a HammerCache,
    key: GoalKey,
    finished: bool,
}

impl Claim<'_> {
    /// Record the outcome and wake the workers waiting for it.
    pub fn finish(mut self, outcome: Outcome) {
        self.finished = true;
        let mut slots = self.cache.lock_slots();
        slots.insert(self.key, Slot::Done(outcome));
        drop(slots);
        self.cache.changed.notify_all();
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let mut slots = self.cache.lock_slots();
        if matches!(slots.get(&self.key), Some(Slot::Pending)) {
            slots.remove(&self.key);
        }
        drop(slots);
        self.cache.changed.notify_all();
    }
}

impl HammerCache {
    fn lock_slots(&self) -> std::sync::MutexGuard<'_, HashMap<GoalKey, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The goal's outcome when known; otherwise a claim on it. A goal another worker is
    /// expanding is waited for, at most `wait`.
    pub fn lookup(&self, key: GoalKey, wait: Duration) -> Lookup<'_> {
        let deadline = Instant::now() + wait;
        let mut slots = self.lock_slots();
        loop {
            match slots.get(&key) {
                Some(Slot::Done(o)) => return Lookup::Hit(o.clone()),
                None => {
                    slots.insert(key, Slot::Pending);
                    return Lookup::Miss(Some(Claim {
                        cache: self,
                        key,
                        finished: false,
                    }));
                }
                Some(Slot::Pending) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Lookup::Miss(None);
                    }
                    slots = self
                        .changed
                        .wait_timeout(slots, deadline - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// A claim on a goal whose remembered tactic no longer closes it: the fresh expansion
    /// replaces the old outcome (`None` when another worker holds the goal now).
    pub fn reclaim(&self, key: GoalKey) -> Option<Claim<'_>> {
        let mut slots = self.lock_slots();
        if matches!(slots.get(&key), Some(Slot::Pending)) {
            return None;
        }
        slots.insert(key, Slot::Pending);
        Some(Claim {
            cache: self,
            key,
            finished: false,
        })
    }

    /// Rewrite every remembered outcome (fault tests: a memory that proposes a wrong tactic).
    pub fn rewrite_for_test(&self, f: impl Fn(&mut Outcome)) {
        for slot in self.lock_slots().values_mut() {
            if let Slot::Done(o) = slot {
                f(o);
            }
        }
    }

    /// Goals remembered (finished expansions).
    pub fn len(&self) -> usize {
        self.lock_slots()
            .values()
            .filter(|s| matches!(s, Slot::Done(_)))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Change the counts.
    pub fn count(&self, f: impl FnOnce(&mut HammerStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The counts so far.
    pub fn stats(&self) -> HammerStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The memory as one attempt sees it: shared, with the attempt's scope (its context and
/// admitted lemmas). Carried in [`crate::CoqCheckConfig::hammer_cache`], set per attempt by
/// the pool.
#[derive(Clone)]
pub struct HammerCacheHandle {
    pub cache: Arc<HammerCache>,
    pub scope: [u8; 32],
}

impl std::fmt::Debug for HammerCacheHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HammerCacheHandle({})", hex::encode(&self.scope[..6]))
    }
}

impl PartialEq for HammerCacheHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.cache, &other.cache) && self.scope == other.scope
    }
}

impl HammerCacheHandle {
    /// The key of a goal printed as `shown` (Coq's `Show.` output) in this scope.
    pub fn key(&self, shown: &str) -> GoalKey {
        let mut h = Sha256::new();
        h.update(b"prod-hammer-goal-v1\0");
        h.update(self.scope);
        h.update(normalise_goal(shown).as_bytes());
        h.finalize().into()
    }
}

/// The scope of an attempt: its prelude (imports, the hammer plugin), its context sentences and
/// the lemmas it admits, in order (each length-prefixed, so that no two lists hash alike).
pub fn scope<'a>(
    prelude: impl IntoIterator<Item = &'a str>,
    context: impl IntoIterator<Item = &'a str>,
    lemmas: impl IntoIterator<Item = &'a str>,
) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    field("prod-hammer-scope-v1");
    for (tag, part) in [
        ("prelude", prelude.into_iter().collect::<Vec<_>>()),
        ("context", context.into_iter().collect()),
        ("lemmas", lemmas.into_iter().collect()),
    ] {
        field(tag);
        field(&part.len().to_string());
        for s in part {
            field(s);
        }
    }
    h.finalize().into()
}

/// Coq's goal display without what differs between two displays of the same goal: the goal
/// identifiers (`1 goal (ID 17)`), the trailing blanks of lines and blank lines.
pub fn normalise_goal(shown: &str) -> String {
    let mut out = String::with_capacity(shown.len());
    for line in shown.lines() {
        let mut l = line.to_string();
        while let Some(i) = l.find("(ID ") {
            let rest = &l[i + 4..];
            let digits = rest.chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && rest[digits..].starts_with(')') {
                l.replace_range(i..i + 4 + digits + 1, "");
            } else {
                break;
            }
        }
        let l = l.trim_end();
        if !l.is_empty() {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// How long a worker waits for another worker's expansion of the same goal: the longest an
/// expansion can take (every fixed tactic to its limit, then the provers), and a margin.
pub fn wait_limit(cfg: &crate::CoqCheckConfig) -> Duration {
    let h = &cfg.hammer;
    let fixed: u64 = h
        .fixed_tactics
        .iter()
        .map(|t| u64::from(t.timeout_s.max(1)) + 1)
        .sum();
    let atp = if h.use_atp {
        u64::from(h.timeout_s) + 3 * u64::from(cfg.step_timeout_s)
    } else {
        0
    };
    Duration::from_secs(fixed + atp + 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(scope: [u8; 32]) -> HammerCacheHandle {
        HammerCacheHandle {
            cache: Arc::new(HammerCache::default()),
            scope,
        }
    }

    #[test]
    fn goal_ids_and_blank_lines_do_not_change_the_key() {
        let h = handle([1; 32]);
        let a = "1 goal (ID 3)\n  \n  n : nat\n  ============================\n  @eq nat (Nat.add n O) n\n";
        let b = "1 goal (ID 41)\n\n  n : nat   \n  ============================\n  @eq nat (Nat.add n O) n";
        assert_eq!(h.key(a), h.key(b));
        let other_goal = a.replace("Nat.add n O", "Nat.add O n");
        assert_ne!(h.key(a), h.key(&other_goal));
        // The same goal in another scope (context or admitted lemmas) is another key.
        assert_ne!(h.key(a), handle([2; 32]).key(a));
        assert_eq!(normalise_goal("x (ID y) z"), "x (ID y) z\n");
    }

    #[test]
    fn scope_separates_context_and_lemmas() {
        let s = |c: &[&str], l: &[&str]| scope(["Require Import Arith."], c.to_vec(), l.to_vec());
        assert_eq!(
            s(&["Definition a := 1."], &[]),
            s(&["Definition a := 1."], &[])
        );
        assert_ne!(
            s(&["Definition a := 1."], &[]),
            s(&[], &["Definition a := 1."])
        );
        assert_ne!(
            s(&[], &["Lemma l : True."]),
            s(&[], &["Lemma l : True.", "Lemma m : True."])
        );
    }

    #[test]
    fn a_claim_is_answered_once_and_a_dropped_claim_frees_the_goal() {
        let c = HammerCache::default();
        let key = [7; 32];
        let Lookup::Miss(Some(claim)) = c.lookup(key, Duration::ZERO) else {
            panic!("a new goal is a miss with a claim");
        };
        // Held by another worker: no claim after the wait.
        assert!(matches!(
            c.lookup(key, Duration::from_millis(10)),
            Lookup::Miss(None)
        ));
        drop(claim);
        let Lookup::Miss(Some(claim)) = c.lookup(key, Duration::ZERO) else {
            panic!("a dropped claim frees the goal");
        };
        let closed = Outcome::Closed {
            run: "solve [ timeout 1 lia ].".into(),
            replacement: "lia.".into(),
        };
        claim.finish(closed.clone());
        assert!(matches!(c.lookup(key, Duration::ZERO), Lookup::Hit(o) if o == closed));
        assert_eq!(c.len(), 1);
        // A stale tactic: the fresh expansion replaces it.
        let failed = Outcome::Failed {
            timed_out: false,
            message: "hammer: no proof found".into(),
        };
        c.reclaim(key).expect("not held").finish(failed.clone());
        match c.lookup(key, Duration::ZERO) {
            Lookup::Hit(o) => {
                assert_eq!(o, failed);
                assert_eq!(
                    o.failure(3),
                    Some(Verdict::Failed {
                        step: 3,
                        message: "hammer: no proof found".into()
                    })
                );
            }
            Lookup::Miss(_) => panic!("recorded"),
        };
    }

    #[test]
    fn a_waiting_worker_gets_the_other_workers_result() {
        let c = Arc::new(HammerCache::default());
        let key = [9; 32];
        let Lookup::Miss(Some(claim)) = c.lookup(key, Duration::ZERO) else {
            panic!("miss");
        };
        let waiter = {
            let c = c.clone();
            std::thread::spawn(move || match c.lookup(key, Duration::from_secs(30)) {
                Lookup::Hit(o) => Some(o),
                Lookup::Miss(_) => None,
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let timed_out = Outcome::Failed {
            timed_out: true,
            message: String::new(),
        };
        claim.finish(timed_out.clone());
        let got = waiter.join().unwrap();
        assert_eq!(got, Some(timed_out.clone()));
        assert_eq!(
            got.and_then(|o| o.failure(2)),
            Some(Verdict::TimedOut { step: 2 })
        );
        // Only the hammer's own answers are remembered.
        assert_eq!(Outcome::of_failure(&Verdict::rejected("x")), None);
        assert_eq!(
            Outcome::of_failure(&Verdict::TimedOut { step: 4 }),
            Some(timed_out)
        );
    }
}

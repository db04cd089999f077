//! How long the prover may take: one proof step, one whole attempt, one cold re-check of an
//! assembled proof. Each limit has one default here, for both provers, every run and every
//! command; a config file or a flag may change it (`[check.coq] step_timeout_s`, `--timeout`,
//! `--final-timeout`), and each is a count of seconds, at least 1.

use std::time::Duration;

/// The three time limits, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeLimits {
    /// One proof step (and `Qed`): Coq's `Set Default Timeout`, Isabelle's per-command limit.
    pub step_s: u32,
    /// A whole attempt, all its steps: a proof of thousands of steps, each just under the step
    /// limit, is stopped here.
    pub attempt_s: u32,
    /// The cold re-check of one assembled proof in a run (many trees wait their turn).
    pub final_s: u64,
}

impl TimeLimits {
    /// Every checker's, run's and command's defaults.
    pub const DEFAULT: TimeLimits = TimeLimits {
        step_s: 10,
        attempt_s: 300,
        final_s: 120,
    };

    /// The jobs with a time budget on 2 cores (`prod demo`, `prod experiment`): half the step
    /// limit, so that a budget's evaluation fits.
    pub const BUDGET: TimeLimits = TimeLimits {
        step_s: 5,
        ..TimeLimits::DEFAULT
    };

    /// The cold re-check of one proof someone asked for (`/v1/assemble`, `prod check`'s
    /// assembled proofs, `dataset validate --trees`): a whole library file may be the context.
    pub const SINGLE_FINAL_S: u64 = 600;

    /// [`Self::SINGLE_FINAL_S`] as a `Duration`.
    pub fn single_final() -> Duration {
        Duration::from_secs(Self::SINGLE_FINAL_S)
    }
}

#[cfg(test)]
mod tests {
    use super::TimeLimits;

    #[test]
    fn the_budget_halves_only_the_step_limit() {
        let (d, b) = (TimeLimits::DEFAULT, TimeLimits::BUDGET);
        assert_eq!(b.step_s * 2, d.step_s);
        assert_eq!((b.attempt_s, b.final_s), (d.attempt_s, d.final_s));
        assert!(TimeLimits::single_final().as_secs() > d.final_s);
    }
}

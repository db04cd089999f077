//! The ranges that numbers of a command line or a config file must lie in: each rule once, with
//! its wording, for the CLI's value parsers (`--timeout 0`) and the config files' validation
//! (`[check.coq] step_timeout_s = 0`) alike. An error names the key and the range:
//! `step_timeout_s = 0: must be at least 1`.

use std::fmt::Display;
use std::time::Duration;

/// One rule for a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// A count, a size or a time limit: 1, 2, …
    AtLeastOne,
    /// A temperature; a duration where 0 means "none".
    FiniteNonNegative,
    /// A learning rate.
    FinitePositive,
    /// A duration in seconds that a `Duration` holds (`Duration::from_secs_f64` panics
    /// otherwise).
    PositiveSeconds,
    /// A time budget in minutes, likewise.
    PositiveMinutes,
    /// (0, 1]: top-p, a discount factor.
    UnitOpenClosed,
    /// [0, 1): a share of a dataset held out.
    UnitClosedOpen,
    /// [0, 1]: a share that may be all or nothing.
    UnitClosed,
}

impl Range {
    /// Does `v` lie in the range?
    pub fn contains(self, v: f64) -> bool {
        let duration = |s: f64| s > 0.0 && Duration::try_from_secs_f64(s).is_ok();
        match self {
            Range::AtLeastOne => v >= 1.0,
            Range::FiniteNonNegative => v.is_finite() && v >= 0.0,
            Range::FinitePositive => v.is_finite() && v > 0.0,
            Range::PositiveSeconds => duration(v),
            Range::PositiveMinutes => duration(v * 60.0),
            Range::UnitOpenClosed => v > 0.0 && v <= 1.0,
            Range::UnitClosedOpen => (0.0..1.0).contains(&v),
            Range::UnitClosed => (0.0..=1.0).contains(&v),
        }
    }

    /// What the range is, after "must be".
    pub fn describe(self) -> &'static str {
        match self {
            Range::AtLeastOne => "at least 1",
            Range::FiniteNonNegative => "a finite number ≥ 0",
            Range::FinitePositive => "a finite number > 0",
            Range::PositiveSeconds => "a finite number of seconds > 0",
            Range::PositiveMinutes => "a finite number of minutes > 0",
            Range::UnitOpenClosed => "in (0, 1]",
            Range::UnitClosedOpen => "in [0, 1)",
            Range::UnitClosed => "in [0, 1]",
        }
    }

    /// `Err("{key} = {shown}: must be …")` when `v` is out of the range (`shown`: the value as
    /// the user wrote it).
    pub fn check(self, key: &str, shown: impl Display, v: f64) -> Result<(), String> {
        if self.contains(v) {
            Ok(())
        } else {
            Err(format!("{key} = {shown}: must be {}", self.describe()))
        }
    }

    /// A whole number (`u32`, `u64`, `usize`) of a config file against [`Range::AtLeastOne`].
    pub fn at_least_one(key: &str, v: u64) -> Result<(), String> {
        // `as f64` rounds only above 2^53, never across 1: the comparison is exact.
        Range::AtLeastOne.check(key, v, v as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::Range;

    #[test]
    fn rules_and_their_wording() {
        assert_eq!(Range::at_least_one("rounds", 1), Ok(()));
        assert_eq!(
            Range::at_least_one("rounds", 0),
            Err("rounds = 0: must be at least 1".into())
        );
        assert!(Range::at_least_one("batch", u64::MAX).is_ok());
        assert!(Range::FiniteNonNegative.contains(0.0));
        assert!(!Range::FiniteNonNegative.contains(f64::NAN));
        assert!(!Range::FinitePositive.contains(f64::INFINITY));
        assert!(Range::PositiveSeconds.contains(0.5));
        assert!(!Range::PositiveSeconds.contains(1e300));
        assert!(Range::PositiveMinutes.contains(20.0));
        assert!(!Range::PositiveMinutes.contains(1e300));
        assert!(Range::UnitOpenClosed.contains(1.0) && !Range::UnitOpenClosed.contains(0.0));
        assert!(Range::UnitClosedOpen.contains(0.0) && !Range::UnitClosedOpen.contains(1.0));
        assert_eq!(
            Range::UnitOpenClosed.check("gamma", 1.5, 1.5),
            Err("gamma = 1.5: must be in (0, 1]".into())
        );
    }
}

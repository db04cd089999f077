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

/// Value parsers of numeric command-line options, one per range: a number outside its range is
/// bad input (`invalid value '0' for '--timeout <TIMEOUT>': must be …`, exit code 2), never a
/// panic or a silently odd run. The rules and their wording are the [`Range`]s', the same as the
/// config files'. Use as `#[arg(long, value_parser = parse::positive_u32)]`.
pub mod parse {
    use std::fmt::Display;
    use std::str::FromStr;

    /// `s` as a `T` for which `ok` holds; the error states the allowed `range`.
    fn parse_in<T>(s: &str, ok: impl Fn(&T) -> bool, range: &str) -> Result<T, String>
    where
        T: FromStr,
        T::Err: Display,
    {
        match s.parse::<T>() {
            Ok(v) if ok(&v) => Ok(v),
            Ok(_) => Err(format!("must be {range}")),
            // A negative whole number does not parse as an unsigned type.
            Err(_) if s.starts_with('-') => Err(format!("must be {range}")),
            Err(e) => Err(format!("{e}; expected {range}")),
        }
    }

    /// A whole number ≥ 1: the CLI says "whole" where a config's count says "at least 1".
    const WHOLE_POSITIVE: &str = "a whole number ≥ 1";

    /// A count or a time limit: 1, 2, …
    pub fn positive_u32(s: &str) -> Result<u32, String> {
        parse_in(
            s,
            |&v: &u32| super::Range::AtLeastOne.contains(v.into()),
            WHOLE_POSITIVE,
        )
    }

    // `as f64` is exact for the comparison with 1 (every whole number ≥ 1 maps to ≥ 1.0).

    /// A count or a time limit: 1, 2, …
    pub fn positive_u64(s: &str) -> Result<u64, String> {
        parse_in(
            s,
            |&v| super::Range::AtLeastOne.contains(v as f64),
            WHOLE_POSITIVE,
        )
    }

    /// A count or a size: 1, 2, …
    pub fn positive_usize(s: &str) -> Result<usize, String> {
        parse_in(
            s,
            |&v| super::Range::AtLeastOne.contains(v as f64),
            WHOLE_POSITIVE,
        )
    }

    /// A real number in `range` (a flag's parser: `|s: &str| real_in(s, Sampling::TOP_P)`).
    pub fn real_in(s: &str, range: super::Range) -> Result<f64, String> {
        parse_in(s, |v: &f64| range.contains(*v), range.describe())
    }

    /// A finite number ≥ 0 (a temperature, a duration where 0 means "none").
    pub fn non_negative_finite_f64(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::FiniteNonNegative)
    }

    /// A finite number > 0 (a learning rate).
    pub fn positive_finite_f64(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::FinitePositive)
    }

    /// A duration in seconds, > 0 (a claim's lease).
    pub fn positive_seconds(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::PositiveSeconds)
    }

    /// A duration in minutes, > 0 (a time budget).
    pub fn positive_minutes(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::PositiveMinutes)
    }

    /// A number in [0, 1) (a fraction of a dataset held out).
    pub fn unit_interval_closed_open(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::UnitClosedOpen)
    }

    /// A number in [0, 1] (a share that may be all or nothing).
    pub fn unit_interval_closed(s: &str) -> Result<f64, String> {
        real_in(s, super::Range::UnitClosed)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn whole_numbers_start_at_one() {
            assert_eq!(positive_u32("1"), Ok(1));
            assert_eq!(positive_u64("18446744073709551615"), Ok(u64::MAX));
            assert_eq!(positive_usize("300"), Ok(300));
            for bad in ["0", "-1", "", "1.5", "x", "99999999999"] {
                let e = positive_u32(bad).unwrap_err();
                assert!(e.contains("a whole number ≥ 1"), "{bad:?}: {e}");
            }
            assert!(positive_u64("0").is_err());
            assert!(positive_usize("0").is_err());
        }

        #[test]
        fn reals_must_be_finite_and_in_range() {
            assert_eq!(non_negative_finite_f64("0"), Ok(0.0));
            assert_eq!(non_negative_finite_f64("0.7"), Ok(0.7));
            assert_eq!(positive_finite_f64("1e-5"), Ok(1e-5));
            for bad in ["-1", "-0.0001", "nan", "inf", "-inf", "abc"] {
                assert!(non_negative_finite_f64(bad).is_err(), "{bad}");
                assert!(positive_finite_f64(bad).is_err(), "{bad}");
            }
            assert_eq!(
                positive_finite_f64("0").unwrap_err(),
                "must be a finite number > 0"
            );
            // Durations: also no larger than a `Duration` holds.
            assert_eq!(positive_seconds("0.5"), Ok(0.5));
            assert_eq!(positive_minutes("20"), Ok(20.0));
            for bad in ["0", "-1", "nan", "inf", "1e300"] {
                assert!(positive_seconds(bad).is_err(), "{bad}");
                assert!(positive_minutes(bad).is_err(), "{bad}");
            }
            assert!(positive_seconds("2e19").is_err());
            assert!(positive_minutes("1e18").is_err());
        }

        #[test]
        fn unit_intervals_have_the_right_open_end() {
            let top_p = |s| real_in(s, crate::Sampling::TOP_P);
            assert_eq!(top_p("1"), Ok(1.0));
            assert_eq!(top_p("0.95"), Ok(0.95));
            for bad in ["0", "-0.1", "1.0001", "nan", "inf"] {
                assert!(top_p(bad).is_err(), "{bad}");
            }
            assert_eq!(unit_interval_closed_open("0"), Ok(0.0));
            assert_eq!(unit_interval_closed_open("0.1"), Ok(0.1));
            for bad in ["1", "1.5", "-0.1", "nan", "inf"] {
                let e = unit_interval_closed_open(bad).unwrap_err();
                assert!(e.contains("[0, 1)"), "{bad}: {e}");
            }
        }
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

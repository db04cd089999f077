//! Range checks of configuration values: each `Err` is `key = value: must be …`, naming the
//! key (callers prefix the section, e.g. `sampling.`).

//! The rules are prod-core's [`Range`]s, shared with the CLI's value parsers.

use prod_core::range::Range;

/// A count, a size or a time limit: 1, 2, …
pub(crate) fn at_least_one(key: &str, v: impl TryInto<u64>) -> Result<(), String> {
    // Every count here is a u32, usize or u64: none is out of u64's range.
    Range::at_least_one(key, v.try_into().unwrap_or(u64::MAX))
}

pub(crate) fn finite_non_negative(key: &str, v: f64) -> Result<(), String> {
    Range::FiniteNonNegative.check(key, v, v)
}

pub(crate) fn finite_positive(key: &str, v: f64) -> Result<(), String> {
    Range::FinitePositive.check(key, v, v)
}

/// Seconds > 0 that fit a `Duration` (`Duration::from_secs_f64` panics otherwise).
pub(crate) fn positive_seconds(key: &str, v: f64) -> Result<(), String> {
    Range::PositiveSeconds.check(key, v, v)
}

/// (0, 1]: top-p, a discount factor.
pub(crate) fn open_closed_unit(key: &str, v: f64) -> Result<(), String> {
    Range::UnitOpenClosed.check(key, v, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_key_and_the_range() {
        assert_eq!(at_least_one("rounds", 1u32), Ok(()));
        assert_eq!(
            at_least_one("rounds", 0u32),
            Err("rounds = 0: must be at least 1".into())
        );
        assert!(at_least_one("batch", 0usize).is_err());
        assert_eq!(finite_non_negative("temperature", 0.0), Ok(()));
        assert!(finite_non_negative("temperature", -1.0).is_err());
        assert!(finite_non_negative("temperature", f64::NAN).is_err());
        assert!(finite_positive("learning_rate", 0.0).is_err());
        assert!(finite_positive("learning_rate", f64::INFINITY).is_err());
        assert_eq!(positive_seconds("lease_s", 0.5), Ok(()));
        assert!(positive_seconds("lease_s", 1e300).is_err());
        assert_eq!(open_closed_unit("top_p", 1.0), Ok(()));
        assert!(open_closed_unit("top_p", 0.0).is_err());
        assert!(open_closed_unit("gamma", 1.5).is_err());
    }
}

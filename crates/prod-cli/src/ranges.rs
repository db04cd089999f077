//! Value parsers for numeric options: a number outside its range is bad input (clap prints
//! `invalid value '0' for '--timeout <TIMEOUT>': must be …` and exits with code 2), never a
//! panic or a silently odd run. Use as `#[arg(long, value_parser = ranges::positive_u32)]`. The
//! rules and their wording are prod-core's [`Range`]s, the same as the config files'.

use std::fmt::Display;
use std::str::FromStr;

use clap::Command;
use prod_core::range::Range;

/// `cmd` with every option of every subcommand taking `-1` as its value, so that the option's
/// range refuses it, naming the option (else clap reports an unknown argument `-1`).
pub fn negative_numbers_as_values(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let takes_values = a.get_action().takes_values();
        a.allow_negative_numbers(takes_values)
    })
    .mut_subcommands(negative_numbers_as_values)
}

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
        |&v: &u32| Range::AtLeastOne.contains(v.into()),
        WHOLE_POSITIVE,
    )
}

// `as f64` is exact for the comparison with 1 (every whole number ≥ 1 maps to ≥ 1.0).

/// A count or a time limit: 1, 2, …
pub fn positive_u64(s: &str) -> Result<u64, String> {
    parse_in(s, |&v| Range::AtLeastOne.contains(v as f64), WHOLE_POSITIVE)
}

/// A count or a size: 1, 2, …
pub fn positive_usize(s: &str) -> Result<usize, String> {
    parse_in(s, |&v| Range::AtLeastOne.contains(v as f64), WHOLE_POSITIVE)
}

/// A real number in `range` (a flag's parser: `|s: &str| real_in(s, Sampling::TOP_P)`).
pub fn real_in(s: &str, range: Range) -> Result<f64, String> {
    parse_in(s, |v: &f64| range.contains(*v), range.describe())
}

/// A finite number ≥ 0 (a temperature, a duration where 0 means "none").
pub fn non_negative_finite_f64(s: &str) -> Result<f64, String> {
    real_in(s, Range::FiniteNonNegative)
}

/// A finite number > 0 (a learning rate).
#[cfg_attr(not(feature = "policy"), allow(dead_code))] // only `prod model`/`prod train` use it
pub fn positive_finite_f64(s: &str) -> Result<f64, String> {
    real_in(s, Range::FinitePositive)
}

/// A duration in seconds, > 0 (a claim's lease).
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    real_in(s, Range::PositiveSeconds)
}

/// A duration in minutes, > 0 (a time budget).
#[cfg_attr(not(feature = "policy"), allow(dead_code))] // only `prod demo` uses it
pub fn positive_minutes(s: &str) -> Result<f64, String> {
    real_in(s, Range::PositiveMinutes)
}

/// A number in [0, 1) (a fraction of a dataset held out).
pub fn unit_interval_closed_open(s: &str) -> Result<f64, String> {
    real_in(s, Range::UnitClosedOpen)
}

/// A number in [0, 1] (a share that may be all or nothing).
pub fn unit_interval_closed(s: &str) -> Result<f64, String> {
    real_in(s, Range::UnitClosed)
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

    /// Parse `prod ARGS` as `main` does; the error text on failure.
    fn parse(args: &[&str]) -> Result<(), String> {
        use clap::CommandFactory;
        let cmd = negative_numbers_as_values(crate::Cli::command());
        let argv = std::iter::once("prod").chain(args.iter().copied());
        cmd.try_get_matches_from(argv)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn edge_values_parse_and_out_of_range_ones_name_the_option() {
        let ok = [
            &[
                "check",
                "f",
                "--workers",
                "1",
                "--timeout",
                "1",
                "--memory-mb",
                "1",
            ][..],
            &[
                "queue",
                "work",
                "--store",
                "s",
                "--run",
                "r",
                "--idle-exit",
                "0",
            ],
            &[
                "queue", "work", "--store", "s", "--run", "r", "--lease", "0.5",
            ],
            &["dataset", "build", "--out", "d", "--test-fraction", "0"],
            &["dataset", "build", "--out", "d", "--val-fraction", "0.99"],
            &["bench", "check", "--count", "0", "--workers", "1"],
        ];
        for args in ok {
            assert_eq!(parse(args), Ok(()), "{args:?}");
        }
        let e = parse(&["check", "f", "--memory-mb", "-5"]).unwrap_err();
        assert!(e.contains("--memory-mb") && e.contains("≥ 1"), "{e}");
        let e = parse(&["dataset", "build", "--out", "d", "--val-fraction", "1"]).unwrap_err();
        assert!(e.contains("--val-fraction") && e.contains("[0, 1)"), "{e}");
    }

    #[cfg(feature = "policy")]
    #[test]
    fn sampling_edges_parse() {
        let m = ["--model", "m", "--prompt", "p"];
        for extra in [["--temperature", "0"], ["--top-p", "1"], ["--n", "1"]] {
            let args: Vec<&str> = ["model", "sample"]
                .iter()
                .chain(&m)
                .chain(&extra)
                .copied()
                .collect();
            assert_eq!(parse(&args), Ok(()), "{args:?}");
        }
        let eval = ["eval", "--model", "m", "--dataset", "d", "--out", "o"];
        let args: Vec<&str> = eval
            .iter()
            .chain(&["--depth", "0", "--k", "1"])
            .copied()
            .collect();
        assert_eq!(parse(&args), Ok(()));
        let e = parse(&["demo", "--minutes", "inf"]).unwrap_err();
        assert!(e.contains("--minutes") && e.contains("> 0"), "{e}");
    }

    #[test]
    fn every_command_still_builds() {
        use clap::CommandFactory;
        negative_numbers_as_values(crate::Cli::command()).debug_assert();
    }

    #[test]
    fn unit_intervals_have_the_right_open_end() {
        let top_p = |s| real_in(s, prod_core::Sampling::TOP_P);
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

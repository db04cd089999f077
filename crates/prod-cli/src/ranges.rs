//! Value parsers for numeric options: prod-core's [`prod_core::range::parse`] (a number outside
//! its range is bad input, named with its option, exit code 2), and the one command-wide rule
//! that lets a negative number reach them.

use clap::Command;
pub use prod_core::range::parse::*;

/// `cmd` with every option of every subcommand taking `-1` as its value, so that the option's
/// range refuses it, naming the option (else clap reports an unknown argument `-1`).
pub fn negative_numbers_as_values(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        let takes_values = a.get_action().takes_values();
        a.allow_negative_numbers(takes_values)
    })
    .mut_subcommands(negative_numbers_as_values)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

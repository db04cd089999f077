//! Transcripts of the `prod` binary's help and exit codes, as a user sees them: every command's
//! `--help` head (its first line, which `prod --help` lists too) against a snapshot, and the
//! exit code of typical calls (0 ok, 1 failure, 2 bad input). A changed help text fails here
//! until the snapshot is updated on purpose: `PROD_BLESS=1 cargo test -p prod-cli --all-features
//! --test cli cli_help::` rewrites `tests/snapshots/help_heads.txt`.

// The snapshot lists every command, those of the `policy` feature (model, eval, rl, …) too.
#![cfg(feature = "policy")]

use super::common::prod;
use std::path::Path;

/// The subcommands `prod PATH --help` lists under "Commands:" (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line starts with two spaces; a wrapped description, with more.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// Every command path with its help's first line, depth first: `prod dataset build: …`.
fn help_heads() -> Vec<String> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let (code, help, err) = prod(&args);
        assert_eq!(code, 0, "prod {}: {err}", args.join(" "));
        let head = help.lines().next().unwrap_or("").trim().to_string();
        assert!(!head.is_empty(), "prod {} has no help", path.join(" "));
        let name = std::iter::once("prod".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        out.push(format!("{name}: {head}"));
        for sub in subcommands(&help).into_iter().rev() {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
    }
    out
}

#[test]
fn every_command_has_a_help_head_and_it_matches_the_snapshot() {
    let heads = help_heads();
    assert!(heads.len() > 20, "{heads:?}");
    // A head is a summary: one sentence that fits a terminal line beside the name.
    let long: Vec<&String> = heads
        .iter()
        .filter(|h| h.split_once(": ").map_or(0, |x| x.1.chars().count()) > 110)
        .collect();
    assert!(long.is_empty(), "too long help heads:\n{long:#?}");
    let text = heads.join("\n") + "\n";
    let snap = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/help_heads.txt");
    if std::env::var("PROD_BLESS").as_deref() == Ok("1") {
        std::fs::write(&snap, &text).unwrap();
    }
    let want = std::fs::read_to_string(&snap).unwrap_or_default();
    assert!(
        want == text,
        "help heads differ from {} (PROD_BLESS=1 rewrites it):\n{}",
        snap.display(),
        diff(&want, &text)
    );
}

/// The lines of `want` and `got` that differ, marked `-` and `+`.
fn diff(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut out = String::new();
    for l in &w {
        if !g.contains(l) {
            out.push_str(&format!("- {l}\n"));
        }
    }
    for l in &g {
        if !w.contains(l) {
            out.push_str(&format!("+ {l}\n"));
        }
    }
    out
}

#[test]
fn exit_codes_of_typical_calls() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    let missing = missing.to_str().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").unwrap();
    let bad = bad.to_str().unwrap();
    // A config file every checking command reads, with a value out of its range.
    let config = dir.path().join("prod.toml");
    std::fs::write(&config, "[check.coq]\nstep_timeout_s = 0\n").unwrap();
    let config = config.to_str().unwrap();
    let cases: &[(&[&str], i32)] = &[
        (&["--help"], 0),
        (&["--version"], 0),
        (&["no-such-command"], 2),
        (&["check"], 2),
        (&["check", "--workers", "0", missing], 2),
        (&["check", missing], 2),
        (&["check", bad], 2),
        (&["tree", "solve", missing], 2),
        (&["tree", "solve", bad], 2),
        (&["tree", "solve", "--prover", "lean", bad], 2),
        (&["report", missing], 2),
        (&["dataset", "stats", missing], 2),
        (
            &["dataset", "build", "--prover", "lean", "--out", missing],
            2,
        ),
        (
            &[
                "eval",
                "--model",
                missing,
                "--dataset",
                missing,
                "--coq-root",
                missing,
            ],
            2,
        ),
        (
            &[
                "eval",
                "--model",
                missing,
                "--dataset",
                missing,
                "--remote-server",
                "x",
            ],
            2,
        ),
        (&["rl", "--config", missing, "--out", missing], 2),
        (&["check", "--config", config, bad], 2),
        (&["dataset", "validate", missing, "--config", config], 2),
        (
            &[
                "eval",
                "--model",
                missing,
                "--dataset",
                missing,
                "--config",
                config,
            ],
            2,
        ),
    ];
    let mut wrong = vec![];
    for (args, want) in cases {
        let (code, _, err) = prod(args);
        if code != *want {
            wrong.push(format!(
                "prod {}: exit {code}, want {want}: {err}",
                args.join(" ")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The help of `--timeout` names the step limit the checker falls back to, and
/// `--final-timeout`'s default is the run's final-check limit: both from `TimeLimits`.
#[test]
fn the_time_limit_flags_say_their_defaults() {
    let d = prod_check::TimeLimits::DEFAULT;
    let after = |help: &str, flag: &str| -> String {
        let at = help.find(flag).unwrap_or_else(|| panic!("no {flag}"));
        help[at..].chars().take(200).collect()
    };
    for cmd in ["check", "eval"] {
        let (code, help, _) = prod(&[cmd, "--help"]);
        assert_eq!(code, 0);
        let text = after(&help, "--timeout <TIMEOUT>");
        assert!(
            text.contains(&format!("else {})", d.step_s))
                || text.contains(&format!("else {}]", d.step_s)),
            "prod {cmd}: {text}"
        );
    }
    let (_, help, _) = prod(&["eval", "--help"]);
    let text = after(&help, "--final-timeout <FINAL_TIMEOUT>");
    assert!(
        text.contains(&format!("[default: {}]", d.final_s)),
        "{text}"
    );
}

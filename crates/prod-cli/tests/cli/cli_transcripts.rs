//! Command-line transcripts: `tests/data/transcripts/NAME/transcript.t` is a session at a shell,
//! each `$ ` line a command and the lines below it what it printed, run again by this test in a
//! fresh directory holding the folder's other files, and compared whole (refresh with
//! `UPDATE_EXPECT=1 cargo test -p prod-cli --test cli cli_transcripts::`).
//!
//! Commands: `prod ARGS` (this build), `coqc FILE`, `cat FILE`; `> FILE` after a command writes
//! its standard output to FILE instead. A command that exits with a code other than 0 shows
//! `[exit N]` and its standard error (each line after `! `). Lines starting with `#` before a
//! command are comments, kept as they are. What changes from run to run is masked: times
//! (`"time_ms":_`), the prover's version (`"prover":_`) and the final check's random tags
//! (`…_TAG`).
//!
//! Every transcript checks with the real prover (`coqc`, `prod check`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn folder(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/transcripts")
        .join(name)
}

/// One command of a transcript: its comment lines and its command line.
struct Step {
    comments: Vec<String>,
    command: String,
}

fn steps(transcript: &str) -> Vec<Step> {
    let mut out = vec![];
    let mut comments = vec![];
    for line in transcript.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Step {
                comments: std::mem::take(&mut comments),
                command: cmd.to_string(),
            });
        } else if line.starts_with('#') {
            comments.push(line.to_string());
        } else if !line.trim().is_empty() || !comments.is_empty() {
            // An output line: comments seen before it were inside an output, not before a
            // command.
            comments.clear();
        }
    }
    out
}

/// Run `command` in `dir`: (exit code, stdout, stderr).
fn run(command: &str, dir: &Path) -> (i32, String, String) {
    let (command, to_file) = match command.split_once(" > ") {
        Some((c, f)) => (c, Some(f.trim())),
        None => (command, None),
    };
    let words: Vec<&str> = command.split_whitespace().collect();
    let (code, stdout, stderr) = match words.as_slice() {
        ["prod", args @ ..] => prod_test_support::run(
            Command::new(env!("CARGO_BIN_EXE_prod"))
                .args(args)
                .current_dir(dir),
        ),
        ["coqc", file] => {
            prod_test_support::run(Command::new("coqc").args(["-q", file]).current_dir(dir))
        }
        ["cat", file] => (
            0,
            std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("cat {file}: {e}")),
            String::new(),
        ),
        _ => panic!("not a transcript command: {command}"),
    };
    match to_file {
        Some(f) => {
            std::fs::write(dir.join(f), stdout).unwrap();
            (code, String::new(), stderr)
        }
        None => (code, stdout, stderr),
    }
}

/// `text` with what changes from run to run masked.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("\"time_ms\":") {
            out.push_str("\"time_ms\":_");
            rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
        } else if let Some(r) = rest.strip_prefix("\"prover\":\"") {
            out.push_str("\"prover\":_");
            rest = r.split_once('"').map_or("", |(_, after)| after);
        } else if let Some(r) = ["prod_root_anchor_", "prod_root_same_"]
            .iter()
            .find_map(|p| rest.strip_prefix(p).map(|r| (p, r)))
        {
            let (prefix, r) = r;
            out.push_str(prefix);
            out.push_str("TAG");
            rest = r.trim_start_matches(|c: char| c.is_ascii_hexdigit());
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Run transcript `name` and compare (or rewrite) it.
fn transcript(name: &str) {
    let coqc = Command::new("coqc").arg("--version").output().is_ok();
    if !prod_test_support::require(coqc, "coqc is not installed (scripts/install-deps.sh)") {
        return;
    }
    let src = folder(name);
    let dir = tempfile::tempdir().unwrap();
    prod_test_support::copy_tree(&src, dir.path());
    let path = src.join("transcript.t");
    let want = std::fs::read_to_string(&path).unwrap();
    let mut got = String::new();
    for step in steps(&want) {
        for c in &step.comments {
            got.push_str(c);
            got.push('\n');
        }
        got.push_str(&format!("$ {}\n", step.command));
        let (code, stdout, stderr) = run(&step.command, dir.path());
        got.push_str(&mask(&stdout));
        if !stdout.is_empty() && !stdout.ends_with('\n') {
            got.push('\n');
        }
        if code != 0 {
            got.push_str(&format!("[exit {code}]\n"));
            for l in stderr.lines() {
                got.push_str(&format!("! {l}\n"));
            }
        }
        got.push('\n');
    }
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    assert_eq!(
        got,
        want,
        "{} differs (UPDATE_EXPECT=1 to refresh)",
        path.display()
    );
}

/// The two-step tree workflow (`prod check --json`, then `prod tree solve --verdicts`) on
/// Hurkens' paradox: a child proves the proposal only at some of its universe levels, in a
/// monomorphic and in a universe-polymorphic context. Neither tree of `False` is globally
/// correct; honest trees of the same shape are; a verdict file from before verdict lines
/// carried universe constraints proves no proposal.
#[test]
fn two_step_tree_workflow_on_hurkens_paradox() {
    transcript("hurkens");
}

/// `prod tree solve --assemble ID` prints a file that `coqc` compiles by itself.
#[test]
fn the_assembled_file_compiles_by_itself() {
    transcript("assemble");
}

#[test]
fn masks_and_steps() {
    assert_eq!(
        mask(r#"{"time_ms":12,"prover":"coq 8.16.1","x":1} prod_root_same_00ff1a2b3c4d5e6f :="#),
        r#"{"time_ms":_,"prover":_,"x":1} prod_root_same_TAG :="#
    );
    let s = steps("# a\n$ prod x\nout\n# not a comment\n\n# b\n$ cat f\n");
    assert_eq!(
        s.iter()
            .map(|s| (s.comments.clone(), s.command.as_str()))
            .collect::<Vec<_>>(),
        [
            (vec!["# a".to_string()], "prod x"),
            (vec!["# b".to_string()], "cat f")
        ]
    );
}

//! What the workspace's tests share: test prerequisites, a count of the tests that skipped, and
//! running a program to read its output.
//!
//! Many tests need something the repository does not hold: Coq, CoqHammer, a Python with torch,
//! the AFP tarball, recorded Isabelle replies. Where it is missing, [`require`] skips the test
//! (it says why and the test returns), so the suite still runs on a machine without it. Under
//! `CI=true` (`.ci/run` sets it) a missing prerequisite fails the test instead: `scripts/test.sh`
//! installs everything there, so a skip on CI would be a test that passed without checking
//! anything. [`skip`] is for the tests that only run where someone points them at a service CI
//! does not have (a real Isabelle server, llama.cpp); they skip under `CI=true` too.
//!
//! Every skip is counted. It prints one line `SKIPPED: <binary>::<test>: <reason>` on stderr, and
//! when `PROD_SKIP_LOG` names a file it appends the same line there: cargo keeps the stderr of a
//! passing test to itself, and a skipped test passes, so `scripts/test.sh` counts the file's lines
//! for the "skipped" of its summary line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming the file each skip appends its line to.
pub const SKIP_LOG: &str = "PROD_SKIP_LOG";

/// What a test does about a prerequisite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It is here: run the test.
    Run,
    /// It is missing: skip the test (and count the skip).
    Skip,
    /// It is missing and this is CI, where everything is installed: fail the test.
    Fail,
}

/// The decision for a prerequisite that is `here` or not, with `ci` the value of the `CI`
/// variable (`None` when unset). Only `CI=true` makes a missing prerequisite a failure.
pub fn decide(here: bool, ci: Option<&str>) -> Decision {
    match (here, ci == Some("true")) {
        (true, _) => Decision::Run,
        (false, false) => Decision::Skip,
        (false, true) => Decision::Fail,
    }
}

/// Under `CI=true`, where a missing prerequisite is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Whether a test's prerequisite is here; `missing` says what is not there and how to get it.
/// Without it the test is skipped (the skip is counted, see the module docs) and the caller
/// returns, except under `CI=true`, where this panics naming `missing`.
///
/// ```
/// # fn coqc_installed() -> bool { true }
/// if !prod_test_support::require(coqc_installed(), "coqc is not installed (scripts/install-deps.sh)") {
///     return;
/// }
/// ```
#[track_caller]
pub fn require(here: bool, missing: &str) -> bool {
    match decide(here, std::env::var("CI").ok().as_deref()) {
        Decision::Run => true,
        Decision::Skip => {
            skip(missing);
            false
        }
        Decision::Fail => panic!(
            "CI=true but {missing} (under CI a missing test prerequisite is a failure, not a \
             skip: scripts/test.sh installs them; unset CI to skip instead)"
        ),
    }
}

/// Skip the calling test, whatever `CI` says, and count the skip: for tests that run only where
/// someone points them at a service that CI does not have. The caller returns after this.
#[track_caller]
pub fn skip(reason: &str) {
    let line = skip_line(&test_name(), reason);
    eprintln!("{line}");
    if let Some(log) = std::env::var_os(SKIP_LOG).filter(|p| !p.is_empty()) {
        if let Err(e) = append_line(Path::new(&log), &line) {
            panic!(
                "cannot append the skip to {SKIP_LOG}={}: {e}",
                log.to_string_lossy()
            );
        }
    }
}

/// The line a skip prints and logs: `SKIPPED: <test>: <reason>`, on one line.
pub fn skip_line(test: &str, reason: &str) -> String {
    let reason = reason.replace(['\n', '\r'], " ");
    format!("SKIPPED: {test}: {reason}")
}

/// Append `line` and a newline to `path` with one write (tests of one binary skip in parallel,
/// and appends of one short write do not interleave).
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// `<binary>::<test>` for the running test: the test binary's name without cargo's hash, and the
/// test's name (libtest names each test's thread after it), or the caller's file and line where
/// the thread has no test's name.
#[track_caller]
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| strip_hash(&s).to_string())
        .unwrap_or_else(|| "?".into());
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.to_string(),
        _ => {
            let at = std::panic::Location::caller();
            format!("{}:{}", at.file(), at.line())
        }
    };
    format!("{binary}::{test}")
}

/// `afp-0123456789abcdef` → `afp`: cargo names a test binary after its target and a hash.
fn strip_hash(stem: &str) -> &str {
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name
        }
        _ => stem,
    }
}

/// Run `cmd` to its end (stdin closed, stdout and stderr captured) and return its exit code
/// (`-1` when a signal ended it), stdout and stderr as text. Panics when it cannot start.
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{:?} runs: {e}", cmd.get_program()));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Python of `PROD_PYTHON` when it is set and imports every one of `modules`; otherwise
/// [`require`] decides (`missing` says what to install), and `None` means the test skips.
#[track_caller]
pub fn python_with(modules: &[&str], missing: &str) -> Option<PathBuf> {
    python_of("PROD_PYTHON", modules, missing)
}

/// [`python_with`] for the Python that the environment variable `var` names (`PROD_RL_PYTHON`:
/// the RL venv, whose transformers is newer than `PROD_PYTHON`'s).
#[track_caller]
pub fn python_of(var: &str, modules: &[&str], missing: &str) -> Option<PathBuf> {
    let p = std::env::var_os(var).filter(|p| !p.is_empty());
    let here = p.as_ref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", &format!("import {}", modules.join(", "))])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    require(here, missing).then(|| PathBuf::from(p.unwrap()))
}

/// Copy a directory tree (a fixture) to `to`, creating `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set in the child runs of [`a_missing_prerequisite_skips_and_is_logged_or_fails_under_ci`].
    const CHILD: &str = "PROD_TEST_SUPPORT_CHILD";

    #[test]
    fn only_ci_true_turns_a_missing_prerequisite_into_a_failure() {
        assert_eq!(decide(true, None), Decision::Run);
        assert_eq!(decide(true, Some("true")), Decision::Run);
        assert_eq!(decide(false, None), Decision::Skip);
        assert_eq!(decide(false, Some("false")), Decision::Skip);
        assert_eq!(decide(false, Some("1")), Decision::Skip);
        assert_eq!(decide(false, Some("")), Decision::Skip);
        assert_eq!(decide(false, Some("true")), Decision::Fail);
    }

    #[test]
    fn a_skip_is_one_line_and_binaries_lose_their_hash() {
        assert_eq!(
            skip_line("afp::t", "no AFP\nhere"),
            "SKIPPED: afp::t: no AFP here"
        );
        assert_eq!(strip_hash("afp-0123456789abcdef"), "afp");
        assert_eq!(strip_hash("cli_serve_faults"), "cli_serve_faults");
        assert_eq!(strip_hash("prod-test-support"), "prod-test-support");
    }

    #[test]
    fn appended_lines_accumulate() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        append_line(&log, "SKIPPED: a::x: one").unwrap();
        append_line(&log, "SKIPPED: a::y: two").unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "SKIPPED: a::x: one\nSKIPPED: a::y: two\n");
    }

    #[test]
    fn run_returns_code_and_output() {
        let (code, out, err) =
            run(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]));
        assert_eq!((code, out.as_str(), err.as_str()), (3, "out\n", "err\n"));
    }

    /// Runs only as a child of the test below: a test whose prerequisite is missing.
    #[test]
    fn child_with_a_missing_prerequisite() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        if !require(false, "the moon is not here (ask for it)") {
            return;
        }
        unreachable!("require(false, …) let the test go on");
    }

    /// This test binary again, running only the child test above, in its own process (so the
    /// environment is set for it alone): without `CI` it passes and logs one skip naming
    /// itself; with `CI=true` it fails naming what is missing and logs nothing.
    #[test]
    fn a_missing_prerequisite_skips_and_is_logged_or_fails_under_ci() {
        let dir = tempfile::tempdir().unwrap();
        let child = |ci: Option<&str>, log: &Path| {
            let mut cmd = Command::new(std::env::current_exe().unwrap());
            cmd.args([
                "--exact",
                "tests::child_with_a_missing_prerequisite",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env(SKIP_LOG, log);
            match ci {
                Some(v) => cmd.env("CI", v),
                None => cmd.env_remove("CI"),
            };
            run(&mut cmd)
        };

        let log = dir.path().join("skips");
        let (code, out, err) = child(None, &log);
        assert_eq!(code, 0, "{out}\n{err}");
        let want = "SKIPPED: prod_test_support::tests::child_with_a_missing_prerequisite: \
                    the moon is not here (ask for it)";
        assert!(err.contains(want), "{err}");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("{want}\n"));

        let log = dir.path().join("skips-ci");
        let (code, out, err) = child(Some("true"), &log);
        assert_ne!(code, 0, "{out}\n{err}");
        // The panic message, on stderr (`--nocapture`) or in libtest's report on stdout.
        assert!(
            format!("{out}{err}").contains("CI=true but the moon is not here (ask for it)"),
            "{out}\n{err}"
        );
        assert!(!log.exists(), "a failure is not a skip");
    }
}

//! Shared by prod-library's integration tests.

/// Whether a test's prerequisite is here (`missing` says what is not). Without it the test is
/// skipped with a `SKIPPED:` line, except under `CI=true`: there `scripts/test.sh` provides
/// everything, so a missing prerequisite fails the test instead of passing it unseen.
pub fn require(here: bool, missing: &str) -> bool {
    if !here {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {missing}"
        );
        eprintln!("SKIPPED: {missing}");
    }
    here
}

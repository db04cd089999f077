//! Shared by the integration tests of `prod`.

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

/// Copy a directory tree (a fixture) to `to`.
#[allow(dead_code)] // not every test binary copies fixtures
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
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

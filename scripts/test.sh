#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks formatting (rustfmt.toml) and lints
# (clippy, warnings are errors), then runs every test of the workspace (the Coq tests run the
# real Coq 8.16). Ends with one summary line "tests: N passed, N failed, N skipped", where
# "skipped" counts the tests cargo ignored plus every skip a test logged through
# prod-test-support (a missing prerequisite outside CI, or an opt-in test not pointed at its
# service). cargo counts a test that skipped as passed (it returned early), so it is in both
# numbers; a test that skipped a part of itself (Rocq 9.2 where its root is missing) is too.
set -euo pipefail
cd "$(dirname "$0")/.."
# Where the time goes: each phase's wall seconds, printed at the end ("time: …").
phases=""
phase_start=$SECONDS
phase() {
  phases="$phases $1 $((SECONDS - phase_start))s,"
  phase_start=$SECONDS
}
scripts/install-deps.sh --with-python
# The second supported prover version (Rocq 9.2) in its own Debian root; the corpus tests run on
# both versions (once built, this takes no time).
scripts/install-rocq.sh >/dev/null
phase install
# python/train_weighted.py's test runs with this interpreter (crates/prod-run/tests/run/python_trainer.rs).
export PROD_PYTHON="${PROD_PYTHON:-${PROD_PYVENV:-$HOME/.cache/prod/pyvenv}/bin/python}"
# ProD's rewards inside TRL, verl and OpenRLHF (crates/prod-cli/tests/cli/cli_rl_frameworks.rs).
export PROD_RL_PYTHON="${PROD_RL_PYTHON:-${PROD_RLVENV:-$HOME/.cache/prod/rlvenv}/bin/python}"
# CoqHammer's helper programs (htimeout, predict) live here on Debian.
export PATH="$PATH:/usr/libexec/coq-hammer"
# One cold build, so cargo's incremental caches (about 40% of a debug target) are only disk use.
export CARGO_INCREMENTAL=0
# The suite needs about 6 GB for its build and 9 GB for the venvs and Rocq; say what the disk has,
# so that a full disk shows as a full disk and not as a compiler error.
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
free_kb=$(df -Pk "$target" | awk 'NR == 2 {print $4}')
echo "disk: $((free_kb / 1048576)) GB free for $target" >&2
if [ "$free_kb" -lt $((6 * 1048576)) ]; then
  echo "warning: under 6 GB free where the build goes; the build may fail with 'No space left on device'" >&2
fi
cargo fmt --all --check
phase lint
# Clippy lints the workspace inside the test build instead of in a check build of its own:
# its driver compiles our crates (the way `cargo clippy` runs it, with warnings as errors), so
# every dependency and every crate is compiled once, not once to check and once to test. The
# lints are `cargo clippy --workspace --all-targets --all-features -- -D warnings`' (cargo
# test builds the same targets: libraries in both modes, binaries, tests, examples).
RUSTC_WORKSPACE_WRAPPER="$(dirname "$(rustup which cargo 2>/dev/null || command -v cargo)")/clippy-driver"
export RUSTC_WORKSPACE_WRAPPER
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
log=$(mktemp)
# Each skipped test appends one line here: cargo does not show a passing test's stderr.
PROD_SKIP_LOG=$(mktemp)
export PROD_SKIP_LOG
trap 'rm -f "$log" "$PROD_SKIP_LOG"' EXIT
set +e
# --timings: where the build's time goes, per crate ($target/cargo-timings/cargo-timing.html).
cargo test --workspace --all-features --locked --no-run --timings "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
phase build
if [ "$status" -eq 0 ]; then
  cargo test --workspace --all-features --locked "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
fi
phase tests
set -e
echo "time:${phases%,} (wall seconds per phase)"
awk -v logged="$(wc -l <"$PROD_SKIP_LOG")" '/^test result:/ {p += $4; f += $6; s += $8}
     END {printf "tests: %d passed, %d failed, %d skipped\n", p, f, s + logged}' "$log"
exit "$status"

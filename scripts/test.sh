#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks formatting (rustfmt.toml) and lints
# (clippy, warnings are errors), then runs every test of the workspace (the Coq tests run the
# real Coq 8.16). Ends with one summary line "tests: N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-python
# The second supported prover version (Rocq 9.2) in its own Debian root; the corpus tests run on
# both versions (once built, this takes no time).
scripts/install-rocq.sh >/dev/null
# python/train_weighted.py's test runs with this interpreter (crates/prod-run/tests/python_trainer.rs).
export PROD_PYTHON="${PROD_PYTHON:-${PROD_PYVENV:-$HOME/.cache/prod/pyvenv}/bin/python}"
# ProD's rewards inside TRL, verl and OpenRLHF (crates/prod-cli/tests/cli_rl_frameworks.rs).
export PROD_RL_PYTHON="${PROD_RL_PYTHON:-${PROD_RLVENV:-$HOME/.cache/prod/rlvenv}/bin/python}"
# CoqHammer's helper programs (htimeout, predict) live here on Debian.
export PATH="$PATH:/usr/libexec/coq-hammer"
cargo fmt --all --check
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --all-features --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ {p += $4; f += $6; s += $8}
     END {printf "tests: %d passed, %d failed, %d skipped\n", p, f, s}' "$log"
exit "$status"

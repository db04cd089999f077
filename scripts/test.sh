#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test of the workspace
# (the Coq tests run the real Coq 8.16).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# CoqHammer's helper programs (htimeout, predict) live here on Debian.
export PATH="$PATH:/usr/libexec/coq-hammer"
cargo test --workspace --all-features --locked "$@"

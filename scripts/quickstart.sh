#!/usr/bin/env bash
# ProD quick start: installs what is missing, builds `prod`, and runs the main job on the
# embedded default — Coq 8.16 with its standard library:
#   1. build the ProD dataset from the stdlib (blocks, peeling, conditional proofs, splits);
#   2. re-check a sample of its ground-truth conditional proofs with the sandboxed Coq checker;
#   3. check example nodes (honest and cheating) and solve / assemble an example proof forest.
# Output goes to $PROD_OUT (default runs/quickstart).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$PATH:/usr/libexec/coq-hammer"
cargo build --release --locked -p prod-cli
prod="${CARGO_TARGET_DIR:-target}/release/prod"
out="${PROD_OUT:-runs/quickstart}"
mkdir -p "$out"
set -x
"$prod" dataset build --prover coq --library stdlib --out "$out/stdlib"
"$prod" dataset stats "$out/stdlib"
"$prod" dataset validate "$out/stdlib" --split test --sample 50 --seed 0
"$prod" check --prover coq examples/check.jsonl
"$prod" tree solve examples/tree.jsonl
"$prod" tree solve examples/tree.jsonl --assemble root

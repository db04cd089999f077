#!/usr/bin/env bash
# Prepares ProD's GPU run (python/device/prod_device.py): the SFT examples of a dataset's
# sft.jsonl (ProD-SFT) and train_wl.jsonl (SFT w/o lemma proposal) with the paper's context
# (last 1,000 tokens, sequences up to 2,048), the prompts of the test theorems, and the base
# model, packed into ignored folders of the repository root, one per GPU call:
#   .device-a/  first part of the weights          (call A)
#   .device-b/  the rest, the data, the model files (call B)
# Each stays under 64 MiB with the working tree; docs/models.md gives the two `run` calls.
#
# Usage: scripts/device/prepare.sh DATASET [MODEL]
#   MODEL defaults to ~/.cache/prod/models/smollm2-135m (scripts/fetch-model.sh).
# Environment: PROD (the prod binary, default the release build), PROD_PYTHON (a python3 with
# numpy; default python3), DEVICE_ROOT (where the folders go; default the repository root),
# DEVICE_THEOREMS / DEVICE_EXAMPLES (only that many test theorems / SFT lines: dry runs),
# DEVICE_FIRST_PART_MIB (MiB of weights in .device-a; default 52).
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
dataset="${1:?usage: scripts/device/prepare.sh DATASET [MODEL]}"
model="${2:-${PROD_CACHE:-$HOME/.cache/prod}/models/smollm2-135m}"
prod="${PROD:-${CARGO_TARGET_DIR:-$here/target}/release/prod}"
py="${PROD_PYTHON:-python3}"
root="${DEVICE_ROOT:-$here}"
for f in "$dataset/sft.jsonl" "$dataset/train_wl.jsonl" "$dataset/test.jsonl" "$model/config.json" "$model/model.safetensors"; do
  [ -f "$f" ] || { echo "prepare: $f is missing" >&2; exit 2; }
done
[ -x "$prod" ] || { echo "prepare: $prod is not an executable prod (set PROD)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
limit=()
[ -n "${DEVICE_EXAMPLES:-}" ] && limit=(--limit "$DEVICE_EXAMPLES")
for set in sft:sft.jsonl wl:train_wl.jsonl; do
  "$prod" train sft --model "$model" --data "$dataset/${set#*:}" "${limit[@]}" \
    --max-seq-len 2048 --context-tokens 1000 --write-examples "$work/${set%%:*}.jsonl" >&2
done
theorems=()
[ -n "${DEVICE_THEOREMS:-}" ] && theorems=(--theorems "$DEVICE_THEOREMS")
"$prod" model prompts --model "$model" --dataset "$dataset" --split test "${theorems[@]}" \
  --context-tokens 1000 --out "$work/prompts.jsonl" >&2
"$py" "$here/python/device/prod_device.py" pack --model "$model" --sft "$work/sft.jsonl" \
  --wl "$work/wl.jsonl" --prompts "$work/prompts.jsonl" \
  --first-part-mib "${DEVICE_FIRST_PART_MIB:-52}" --out "$root/.device-a" "$root/.device-b"
du -sh "$root/.device-a" "$root/.device-b" >&2

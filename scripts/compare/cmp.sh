#!/bin/bash
# Compare two builds' seeded runs made as README.md says (in DIR: eval-A/, rl-A/ and their dumps
# eval-A.dump, rl-A.dump; the same for B), leaving out what differs by design: the final files'
# random anchor tags (`prod_root_anchor_<16 hex>`) and every timing.
# Usage: scripts/compare/cmp.sh DIR A B
set -u
cd "$1" || exit 2
a=$2 b=$3
norm() {
  sed -E 's/prod_root_(anchor|same)_[0-9a-f]{16}/prod_root_\1_X/g;
          s/"(sample_s|check_s|train_s|filter_s|eval_s|seconds|tokens_per_s|fixed_s|atp_s)":[0-9.e-]+/"\1":T/g' "$1"
}
for r in eval rl; do
  if diff <(norm "$r-$a.dump") <(norm "$r-$b.dump") > /dev/null; then
    echo "$r run store: identical"
  else
    echo "$r run store: DIFFERS"; diff <(norm "$r-$a.dump") <(norm "$r-$b.dump") | head -5
  fi
done
n=0
for f in $(cd "rl-$a" && find rounds checkpoints -type f | sort); do
  n=$((n + 1))
  cmp -s "rl-$a/$f" "rl-$b/$f" || echo "rl file differs: $f"
done
echo "rl files compared byte for byte: $n"
python3 - "$a" "$b" <<'PY'
import json, sys
def evaluations(tag):
    out = json.load(open(f'eval-{tag}/run.json'))['evaluations']
    for e in out:
        e.pop('seconds', None); e.pop('phase_seconds', None)
        for s in ('atp_s', 'fixed_s'):
            (e.get('hammer') or {}).pop(s, None)
    return json.dumps(out, sort_keys=True)
same = evaluations(sys.argv[1]) == evaluations(sys.argv[2])
print('eval run.json evaluations:', 'identical' if same else 'DIFFER')
PY

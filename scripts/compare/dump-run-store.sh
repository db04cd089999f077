#!/bin/sh
# The run store's contents without times: what a before/after comparison of two builds must find
# equal. Usage: scripts/compare/dump-run-store.sh RUN_DIR/run.sqlite > dump.txt
# (the run directory's own path appears in `meta`; replace it before diffing two runs).
db=$1
for t in theorems contexts nodes sample_log globals checkpoints examples; do
  echo "== $t"; sqlite3 "$db" "SELECT * FROM $t ORDER BY 1" 2>&1
done
echo "== verdicts"; sqlite3 "$db" "SELECT node, json_remove(verdict, '$.time') FROM verdicts ORDER BY 1" 2>&1
echo "== finals"; sqlite3 "$db" "SELECT round, phase, theorem, tree, json_remove(verdict, '$.time'), file FROM finals ORDER BY 1,2,3,4" 2>&1
echo "== phases"; sqlite3 "$db" "SELECT round, phase FROM phases ORDER BY 1,2" 2>&1
echo "== meta"; sqlite3 "$db" "SELECT key, value FROM meta ORDER BY 1" 2>&1

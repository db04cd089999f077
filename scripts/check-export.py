#!/usr/bin/env python3
"""Does every row of a `prod dataset export` file load in the checker? Checks a seeded sample of
rows through the same path the reward functions take: the row's reward input (verl's
`reward_model.ground_truth`, OpenRLHF's `label`, TRL's `statement`/`imports`/`context`) becomes
a node with the row's ground-truth proof (from the dataset's split file, by id) and goes to a
running `prod serve`. Prints one JSON object: verdict counts, the rows whose context did not load (`infra`) and the
other rows whose ground truth was not proved, with the server's message.

    prod serve --workers 2 &                       # with CoqHammer: ground truths use `hammer.`
    python3 scripts/check-export.py data/stdlib-verl/rl.parquet --dataset data/stdlib \\
        --split rl --sample 200 --seed 0 --url http://127.0.0.1:8537

Needs pyarrow for Parquet files (JSONL files need nothing beyond the standard library).
"""

import argparse
import collections
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from prod_client import ProdClient  # noqa: E402
from prod_client.reward import _imports, ground_truth_info  # noqa: E402


def read_rows(path):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def reward_input(row):
    """The statement, imports and context a reward function takes from `row`."""
    if "reward_model" in row:  # verl
        return ground_truth_info(row["reward_model"]["ground_truth"], row.get("extra_info"))
    if "label" in row:  # OpenRLHF
        return ground_truth_info(row["label"])
    return {"statement": row["statement"], "imports": row.get("imports"),
            "context": row.get("context")}  # TRL


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--dataset", required=True, help="the dataset folder it was exported from")
    ap.add_argument("--split", default="rl")
    ap.add_argument("--sample", type=int, default=200, help="rows to check (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--url", default=os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537"))
    a = ap.parse_args()
    truth = {}
    with open(os.path.join(a.dataset, f"{a.split}.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            truth[e["id"]] = e["conditional_proof"]
    rows = read_rows(a.file)
    if a.sample:
        random.Random(a.seed).shuffle(rows)
        rows = rows[:a.sample]
    client = ProdClient(a.url, os.environ.get("PROD_API_KEY") or None, timeout=3600)
    counts, not_loaded, misses = collections.Counter(), [], []
    for i in range(0, len(rows), a.batch):
        nodes = []
        for row in rows[i:i + a.batch]:
            info = reward_input(row)
            nodes.append({"id": info["id"], "statement": info["statement"],
                          "imports": _imports(info.get("imports")),
                          "context": info.get("context") or "", "proof": truth[info["id"]]})
        for n, v in zip(nodes, client.check(nodes)):
            counts[v.verdict] += 1
            if v.verdict == "infra":
                not_loaded.append({"id": n["id"], "message": v.message[:300]})
            elif v.verdict != "proved":
                misses.append({"id": n["id"], "verdict": v.verdict, "message": v.message[:200]})
        print(f"{i + len(nodes)}/{len(rows)} {dict(counts)}", file=sys.stderr, flush=True)
    print(json.dumps({"checked": len(rows), "verdicts": dict(counts),
                      "not_loaded": len(not_loaded), "not_loaded_rows": not_loaded,
                      "not_proved_rows": misses}))


if __name__ == "__main__":
    main()

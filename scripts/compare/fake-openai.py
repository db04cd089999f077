#!/usr/bin/env python3
"""A deterministic OpenAI-compatible completion server for before/after comparisons of runs.

Usage: fake-openai.py PORT DATASET_DIR

Every completion is chosen by a hash of the prompt (and the request's seed): a few fixed
conditional proofs (one proposes a lemma), or, for two thirds of the prompts that end with a
test theorem's statement, that theorem's ground-truth proof. The same requests get the same
answers from every run, so two builds of `prod eval --remote-url` (or `prod rl` with
`[remote]`) must produce the same run store (scripts/compare/dump-run-store.sh).
Standard library only.
"""
import json, hashlib, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
PROOFS = [
    "<no_invoke> intros. auto.",
    "<no_invoke> intros; simpl; auto.",
    "<use_invoke> <invoke> Lemma prod_aux : forall n : nat, n = n. </invoke> intros. auto.",
    "<no_invoke> reflexivity.",
    "<no_invoke> hammer.",
    "<no_invoke> intros. lia.",
]
GT = []
for line in open(sys.argv[2] + '/test.jsonl'):
    e = json.loads(line)
    GT.append((e['statement'].strip(), e['conditional_proof']))
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')
    def do_POST(self):
        n = int(self.headers.get('content-length', 0))
        req = json.loads(self.rfile.read(n) or b'{}')
        raw = req.get('prompt', '')
        raw = raw if isinstance(raw, str) else json.dumps(raw)
        prompt = json.dumps(raw)
        k = int(req.get('n', 1) or 1)
        choices = []
        for i in range(k):
            h = int(hashlib.sha256((prompt + str(i) + str(req.get('seed'))).encode()).hexdigest(), 16)
            text = PROOFS[h % len(PROOFS)]
            for st, gt in GT:
                if raw.rstrip().endswith(st) and h % 3 != 0:
                    text = gt
            choices.append({"index": i, "text": text})
        body = json.dumps({"choices": choices, "content": choices[0]["text"]}).encode()
        self.send_response(200); self.send_header('content-type', 'application/json'); self.end_headers(); self.wfile.write(body)
HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()

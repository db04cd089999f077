"""OpenRLHF's remote reward model protocol, answered by a `prod serve` server.

OpenRLHF (`--remote_rm_url http://HOST:PORT/get_reward`) posts
`{"query": [...], "prompts": [...], "labels": [...]}` and reads `{"rewards": [...]}`: one reward
per query. Here a query is the prompt followed by the model's completion (a conditional proof);
the label (the dataset column given to OpenRLHF's `--label_key`) is the JSON text of
`{"statement": ..., "imports": ..., "context": ...}` (or the bare statement). The reward is 1.0
for a locally correct proof, else 0.0. An infra verdict is never a reward: the request is
answered 503, which OpenRLHF's client retries.

    python -m prod_client.openrlhf --port 5000 --prod-url http://127.0.0.1:8537

Standard library only.
"""

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

from .client import InfraError, ProdClient, ProdError
from .reward import _node, _score


def _label(label: Any) -> Dict[str, Any]:
    if isinstance(label, dict):
        return label
    if isinstance(label, str):
        try:
            parsed = json.loads(label)
        except ValueError:
            return {"statement": label}
        if isinstance(parsed, dict):
            return parsed
        return {"statement": label}
    raise ValueError("each label must be a statement or a JSON object with 'statement'")


def rewards(body: Dict[str, Any], client: ProdClient) -> List[float]:
    """The rewards of one OpenRLHF request (raises InfraError, ProdError or ValueError)."""
    queries = body.get("query")
    prompts = body.get("prompts") or [""] * len(queries or [])
    labels = body.get("labels")
    if not isinstance(queries, list) or not isinstance(labels, list) \
            or len(labels) != len(queries) or len(prompts) != len(queries):
        raise ValueError("expected 'query', 'prompts' and 'labels' lists of one length")
    nodes = []
    for i, (q, p, l) in enumerate(zip(queries, prompts, labels)):
        completion = q[len(p):] if isinstance(q, str) and q.startswith(p) else q
        nodes.append(_node(completion, _label(l), i))
    return [_score(v) for v in client.check(nodes)]


def handler(client: ProdClient):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: Dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            try:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n).decode("utf-8"))
                self._send(200, {"rewards": rewards(body, client)})
            except InfraError as e:
                self._send(503, {"error": str(e), "infra": True})
            except (ValueError, KeyError, TypeError) as e:
                self._send(400, {"error": str(e)})
            except ProdError as e:
                self._send(502, {"error": str(e)})

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def serve(port: int, prod_url: str, api_key: Optional[str] = None,
          host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A reward server on (host, port) over the `prod serve` at `prod_url` (not started)."""
    return ThreadingHTTPServer((host, port), handler(ProdClient(prod_url, api_key)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--prod-url", default=os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537"))
    a = ap.parse_args()
    server = serve(a.port, a.prod_url, os.environ.get("PROD_API_KEY") or None, a.host)
    print(f"OpenRLHF reward server on http://{a.host}:{a.port} over {a.prod_url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

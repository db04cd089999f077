"""OpenRLHF's remote reward model protocol, answered by a `prod serve` server.

OpenRLHF (`--remote_rm_url http://HOST:PORT/get_reward`) posts
`{"query": [...], "prompts": [...], "labels": [...]}` and reads `{"rewards": [...]}`: one reward
per query. Here a query is the prompt followed by the model's completion (a conditional proof);
the label (the dataset column given to OpenRLHF's `--label_key`) is the JSON text of
`{"statement": ..., "imports": ..., "context": ...}` (or the bare statement). The reward is 1.0
for a locally correct proof, else 0.0. An infra verdict is never a reward: the request is
answered 503, which OpenRLHF's client retries.

OpenRLHF decodes the query with `skip_special_tokens=False`, so ProD's markers arrive, and so
does the end token after the completion (`<|endoftext|>`, `</s>`, …): trailing special tokens
of the usual shapes are cut off before checking (`--end-token` names others).

    python -m prod_client.openrlhf --port 5000 --prod-url http://127.0.0.1:8537

OpenRLHF can also call a Python file instead of a server (`--remote_rm_url
/path/to/prod_client/openrlhf.py`): its `reward_func(queries, prompts, labels)` is this
protocol's answer for one request.

Standard library only.
"""

import argparse
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Sequence

if __package__:
    from .client import InfraError, ProdClient, ProdError
    from .reward import _client, score_texts
else:  # loaded by file path (OpenRLHF's `--remote_rm_url FILE.py`): no parent package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.client import InfraError, ProdClient, ProdError
    from prod_client.reward import _client, score_texts

# End, padding and turn tokens as tokenizers print them: `<|endoftext|>`, `<|im_end|>`, `</s>`,
# `<eos>`, `<pad>`, DeepSeek's `<｜end▁of▁sentence｜>`.
_END_SHAPES = r"<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<pad>|<｜[^｜\s]{1,40}｜>"


def strip_end_tokens(text: str, extra: Sequence[str] = ()) -> str:
    """`text` without the special tokens that follow the completion."""
    shapes = _END_SHAPES + "".join("|" + re.escape(t) for t in extra)
    return re.sub(r"(?:\s*(?:" + shapes + r"))+\s*$", "", text)


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


def rewards(body: Dict[str, Any], client: Any, end_tokens: Sequence[str] = ()) -> List[float]:
    """The rewards of one OpenRLHF request (raises InfraError, ProdError or ValueError).
    `client` is a `ProdClient` (anything with its `check`)."""
    queries = body.get("query")
    prompts = body.get("prompts") or [""] * len(queries or [])
    labels = body.get("labels")
    if not isinstance(queries, list) or not isinstance(labels, list) \
            or len(labels) != len(queries) or len(prompts) != len(queries):
        raise ValueError("expected 'query', 'prompts' and 'labels' lists of one length")
    completions, infos = [], []
    for q, p, l in zip(queries, prompts, labels):
        if not isinstance(q, str):
            raise ValueError("each query must be a string")
        completion = q[len(p):] if isinstance(p, str) and q.startswith(p) else q
        completions.append(strip_end_tokens(completion, end_tokens))
        infos.append(_label(l))
    return score_texts(completions, infos, client=client, where="openrlhf")


def reward_func(queries: List[str], prompts: List[str], labels: List[Any]) -> Dict[str, Any]:
    """OpenRLHF's Python-file reward (`--remote_rm_url .../prod_client/openrlhf.py`): the
    server is `PROD_SERVE_URL` (key `PROD_API_KEY`). Raises `InfraError` on an infra verdict."""
    r = rewards({"query": queries, "prompts": prompts, "labels": labels}, _client(None, None))
    return {"rewards": r, "scores": r, "extra_logs": {}}


def handler(client: ProdClient, end_tokens: Sequence[str] = ()):
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
                r = rewards(body, client, end_tokens)
                self._send(200, {"rewards": r, "scores": r})
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
          host: str = "127.0.0.1", end_tokens: Sequence[str] = ()) -> ThreadingHTTPServer:
    """A reward server on (host, port) over the `prod serve` at `prod_url` (not started)."""
    return ThreadingHTTPServer((host, port),
                               handler(ProdClient(prod_url, api_key), end_tokens))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--prod-url", default=os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537"))
    ap.add_argument("--end-token", action="append", default=[],
                    help="a special token to cut off the end of a query (repeatable)")
    a = ap.parse_args()
    server = serve(a.port, a.prod_url, os.environ.get("PROD_API_KEY") or None, a.host,
                   a.end_token)
    print(f"OpenRLHF reward server on http://{a.host}:{a.port} over {a.prod_url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

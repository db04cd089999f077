"""OpenRLHF's remote reward model protocol, answered by `prod serve`.

OpenRLHF (0.11: `--reward.remote_url http://HOST:PORT/get_reward`, several separated by commas)
posts `{"query": [...], "prompts": [...], "labels": [...]}` and reads `{"rewards": [...]}`: one
reward per query. A query is the prompt followed by the model's completion (a conditional
proof), decoded with `skip_special_tokens=False`, so ProD's markers arrive, and so does the end
token after the completion. OpenRLHF cuts a prompt longer than its budget (`--data.max_len`
less the new tokens) from the left, so the query need not begin with its prompt: the
completion is found after the end of the prompt (`reward.completion_in_query`), its end
tokens cut (`--end-token` names others), its `t0` taken from the prompt's end when the marker
was written there (`--t0-in-prompt`, default `auto`). The label (the dataset column given to
OpenRLHF's `--data.label_key`) is the JSON text of `{"statement": ..., "imports": ...,
"context": ...}` (or the bare statement). The reward is 1.0 for a locally correct proof, else
0.0. Nothing that says nothing about the proof is a reward: an infra verdict (after the
client's own retries) is answered 503, a query that does not hold its prompt's end 400 with
the reason, and each refusal is logged on stderr; OpenRLHF retries the request, then leaves the
sample without a reward (its trainer stops) rather than scoring it.

    python -m prod_client.openrlhf --port 5000 --prod-url http://127.0.0.1:8537[,http://…]

OpenRLHF can also call a Python file instead of a server (`--reward.remote_url
/path/to/prod_client/openrlhf.py`): its `reward_func(queries, prompts, labels)` is this
protocol's answer for one request (servers from `PROD_SERVE_URL`, `PROD_T0_IN_PROMPT` for the
marker option).

Standard library only.
"""

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Sequence

if __package__:
    from .client import InfraError, ProdClient, ProdError
    from .reward import (CompletionNotFound, _client, _t0_setting, completion_in_query,
                         score_texts, strip_end_tokens, t0_option)
else:  # loaded by file path (OpenRLHF's `--reward.remote_url FILE.py`): no parent package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.client import InfraError, ProdClient, ProdError
    from prod_client.reward import (CompletionNotFound, _client, _t0_setting,
                                    completion_in_query, score_texts, strip_end_tokens,
                                    t0_option)

__all__ = ["rewards", "reward_func", "serve", "strip_end_tokens", "CompletionNotFound"]


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


def rewards(body: Dict[str, Any], client: Any, end_tokens: Sequence[str] = (),
            t0_in_prompt: Any = None) -> List[float]:
    """The rewards of one OpenRLHF request (raises InfraError, ProdError, CompletionNotFound or
    ValueError). `client` is a `ProdClient` (anything with its `check`); `t0_in_prompt` as in
    `prod_client.reward` (default "auto")."""
    queries = body.get("query")
    prompts = body.get("prompts") or [""] * len(queries or [])
    labels = body.get("labels")
    if not isinstance(queries, list) or not isinstance(labels, list) \
            or len(labels) != len(queries) or len(prompts) != len(queries):
        raise ValueError("expected 'query', 'prompts' and 'labels' lists of one length")
    completions = []
    for i, (q, p) in enumerate(zip(queries, prompts)):
        if not isinstance(q, str) or not isinstance(p, str):
            raise ValueError("each query and prompt must be a string")
        try:
            completions.append(completion_in_query(q, p))
        except CompletionNotFound as e:
            raise CompletionNotFound(f"query {i}: {e}") from None
    return score_texts(completions, [_label(l) for l in labels], client=client,
                       prompts=prompts, t0_in_prompt=_t0_setting(t0_in_prompt, "auto"),
                       end_tokens=tuple(end_tokens), where="openrlhf", path="ids")


def reward_func(queries: List[str], prompts: List[str], labels: List[Any]) -> Dict[str, Any]:
    """OpenRLHF's Python-file reward (`--reward.remote_url .../prod_client/openrlhf.py`): the
    servers are `PROD_SERVE_URL` (key `PROD_API_KEY`). Raises when nothing is known."""
    r = rewards({"query": queries, "prompts": prompts, "labels": labels}, _client(None, None))
    return {"rewards": r, "scores": r, "extra_logs": {}}


def handler(client: ProdClient, end_tokens: Sequence[str] = (), t0_in_prompt: Any = None):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: Dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, status: int, e: Exception, **extra: Any) -> None:
            print(f"prod_client.openrlhf: refused ({status}): {e}", file=sys.stderr, flush=True)
            self._send(status, {"error": str(e), **extra})

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            try:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n).decode("utf-8"))
                r = rewards(body, client, end_tokens, t0_in_prompt)
                self._send(200, {"rewards": r, "scores": r})
            except InfraError as e:
                self._refuse(503, e, infra=True)
            except (ValueError, KeyError, TypeError) as e:  # CompletionNotFound included
                self._refuse(400, e)
            except ProdError as e:
                self._refuse(502, e)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def serve(port: int, prod_url: Any, api_key: Optional[str] = None,
          host: str = "127.0.0.1", end_tokens: Sequence[str] = (),
          t0_in_prompt: Any = None) -> ThreadingHTTPServer:
    """A reward server on (host, port) over the `prod serve` server(s) at `prod_url` (one URL,
    several separated by commas, or a list); not started."""
    t0_option(t0_in_prompt)  # a wrong value is refused here, not at the first request
    return ThreadingHTTPServer((host, port), handler(ProdClient(prod_url, api_key), end_tokens,
                                                     t0_in_prompt))


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m prod_client.openrlhf`."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--prod-url", default=os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537"),
                    help="prod serve's URL, or several separated by commas (spread, fail-over)")
    ap.add_argument("--end-token", action="append", default=[],
                    help="a special token to cut off the end of a query (repeatable)")
    ap.add_argument("--t0-in-prompt", default=None,
                    help="auto (default: the marker the prompt ends with, if any), <no_invoke>, "
                         "<use_invoke> (every completion's t0 was in its prompt), or off")
    return ap


def main() -> None:
    a = parser().parse_args()
    server = serve(a.port, a.prod_url, os.environ.get("PROD_API_KEY") or None, a.host,
                   a.end_token, a.t0_in_prompt)
    print(f"OpenRLHF reward server on http://{a.host}:{a.port} over {a.prod_url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

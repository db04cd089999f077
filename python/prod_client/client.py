"""`ProdClient`: POST /v1/check and GET /health of a `prod serve` server."""

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional


class ProdError(Exception):
    """The server refused the request (4xx/5xx) or could not be reached."""

    def __init__(self, message: str, status: Optional[int] = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class InfraError(ProdError):
    """A verdict was `infra`: nothing is known about the proof (retry; never score it 0)."""


@dataclass(frozen=True)
class Verdict:
    """One node's verdict, as `prod check --json` prints it."""

    id: Any
    verdict: str  # proved | failed | timed_out | rejected | infra
    message: str
    time_ms: int
    prover: Optional[str] = None

    @property
    def proved(self) -> bool:
        return self.verdict == "proved"

    @property
    def infra(self) -> bool:
        return self.verdict == "infra"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Verdict":
        return cls(
            id=d.get("id"),
            verdict=d["verdict"],
            message=d.get("message", ""),
            time_ms=int(d.get("time_ms", 0)),
            prover=d.get("prover"),
        )


class ProdClient:
    """A `prod serve` server at `url` (e.g. http://127.0.0.1:8537).

    A 429 (queue full) is retried after the server's `Retry-After`, up to `retries` times.
    """

    def __init__(self, url: str = "http://127.0.0.1:8537", api_key: Optional[str] = None,
                 timeout: float = 600.0, retries: int = 5):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url + path, data=data, headers=headers,
                                         method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return json.loads(r.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                text = e.read().decode("utf-8", "replace")
                try:
                    payload = json.loads(text)
                except ValueError:
                    payload = text
                if e.code == 429 and attempt < self.retries:
                    time.sleep(float(e.headers.get("Retry-After", "1") or 1))
                    continue
                msg = payload.get("error", text) if isinstance(payload, dict) else text
                raise ProdError(f"HTTP {e.code}: {msg}", e.code, payload) from None
            except urllib.error.URLError as e:
                raise ProdError(f"cannot reach {self.url}: {e.reason}") from None
        raise ProdError("unreachable")  # the loop always returns or raises

    def health(self) -> dict:
        return self._request("GET", "/health")

    def check(self, nodes: List[dict]) -> List[Verdict]:
        """Check nodes (`prod check` input objects: id, imports, context, statement, proof)."""
        out = self._request("POST", "/v1/check", {"nodes": list(nodes)})
        return [Verdict.from_json(r) for r in out["results"]]

    def tree(self, nodes: List[dict]) -> List[dict]:
        """Check nodes and solve their proof trees: each result has `globally_correct`."""
        return self._request("POST", "/v1/tree", {"nodes": list(nodes)})["results"]

    def assemble(self, nodes: List[dict], root: int = 0) -> dict:
        """Check nodes, solve their trees, and assemble `nodes[root]`'s complete proof, re-checked
        cold by the prover: `proved` is True, False, or None (an infra verdict decided nothing);
        `assembled` the complete proof; `results` the per-node verdicts with `globally_correct`."""
        return self._request("POST", "/v1/assemble", {"nodes": list(nodes), "root": root})

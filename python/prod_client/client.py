"""`ProdClient`: `prod serve`'s routes (POST /v1/check, /v1/tree, /v1/assemble; GET /health)
on one server or spread over several.

Several servers (a list, or one string with commas: `PROD_SERVE_URL=http://a:8537,http://b:8537`):
a batch of nodes is cut into chunks (at most `max_nodes` each, as many as there are servers
at least) sent at once, one per server in turn. What happens when a server does not answer:

* it cannot be reached, drops the connection, times out, or answers 502/503/504: it rests
  (its rest doubling with each failure in a row, with jitter) while the chunk goes to the next
  server. A check is pure, so sending a chunk again loses and duplicates nothing;
* its queue is full (429): it rests for its `Retry-After`, drawn between half and one and a
  half times that (jitter: clients refused together do not all come back together), while the
  chunk goes to another server if one is free;
* when every server rests, the client sleeps until the first one is due.

Nothing is given up before `max_wait` seconds since the request began; then
`ServersUnavailable` (an `InfraError`) is raised. Nodes whose verdict is `infra` are sent once
more (`infra_retries`, to another server where there is one) before their `infra` verdict is
returned. Other refusals (400 a malformed node, 401 a wrong key, 413 too large, 500) are the
caller's to fix: `ProdError` at once. None of these errors is ever a verdict: the reward
functions raise them, never score them 0.

`prod_client.aio.AsyncProdClient` is the same client for asyncio; both share the scheduling
below (`Servers`, `Attempts`, `classify`). Standard library only.
"""

import http.client
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

#: `prod serve`'s default `--max-nodes` (nodes per request).
MAX_NODES = 256


class ProdError(Exception):
    """The server refused the request (4xx/5xx) or could not be reached."""

    def __init__(self, message: str, status: Optional[int] = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class InfraError(ProdError):
    """Nothing is known about the proof (an `infra` verdict, or no server answered): retry;
    never score it 0."""


class ServersUnavailable(InfraError):
    """No server answered within `max_wait` seconds (each was down, or its queue full)."""


@dataclass(frozen=True)
class Verdict:
    """One node's verdict, as `prod check --json` prints it."""

    id: Any
    verdict: str  # proved | failed | timed_out | rejected | infra
    message: str
    time_ms: int
    prover: Optional[str] = None
    # Proved only: what the proof adds to its statement's universe levels ([] when nothing;
    # such a node proves its own statement, never another node's proposal). `None` when the
    # line does not say (not proved, or written by an older server).
    universe_constraints: Optional[List[str]] = None

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
            universe_constraints=d.get("universe_constraints"),
        )


def server_urls(url: Union[str, Sequence[str], None]) -> List[str]:
    """The servers named by `url`: one URL, several separated by commas, or a list."""
    if url is None:
        return []
    parts = url.split(",") if isinstance(url, str) else [str(u) for u in url]
    urls = [p.strip().rstrip("/") for p in parts if p.strip()]
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise ValueError(f"server URL {u!r}: expected http://HOST:PORT")
    return urls


# --- What an answer means -------------------------------------------------------------------

#: Statuses that say the server (or a proxy in front of it) is down or restarting.
_DOWN_STATUSES = (502, 503, 504)


@dataclass(frozen=True)
class Failure:
    """A try that decided nothing: `busy` (429, `retry_after` seconds) or `down`."""

    kind: str
    message: str
    retry_after: float = 0.0


def classify(url: str, status: int, headers: Any, body: bytes) -> Union[Any, Failure]:
    """The payload of a 200, a `Failure` to retry, or `ProdError` raised for a refusal."""
    text = body.decode("utf-8", "replace")
    try:
        payload = json.loads(text) if text else None
    except ValueError:
        payload = text
    if status == 200:
        if payload is None or isinstance(payload, str):
            return Failure("down", f"{url}: HTTP 200 with a body that is not JSON")
        return payload
    msg = payload.get("error", text) if isinstance(payload, dict) else text
    if status == 429:
        try:
            after = float(headers.get("Retry-After") or 1)
        except (TypeError, ValueError):
            after = 1.0
        return Failure("busy", f"{url}: HTTP 429: {msg}", max(after, 0.1))
    if status in _DOWN_STATUSES:
        return Failure("down", f"{url}: HTTP {status}: {msg}")
    raise ProdError(f"{url}: HTTP {status}: {msg}", status, payload)


# --- Which server next, and how long to wait ------------------------------------------------


class Servers:
    """The servers of a client: whose turn it is, and which rest after a failure until when.
    Shared by the requests of one client (thread-safe)."""

    def __init__(self, urls: Sequence[str], rng: random.Random,
                 base: float = 0.5, cap: float = 30.0):
        if not urls:
            raise ValueError("no server URL (give url=, or set PROD_SERVE_URL)")
        self.urls = list(urls)
        self._rng = rng
        self._base, self._cap = base, cap
        self._rest_until = {u: 0.0 for u in self.urls}
        self._failures = {u: 0 for u in self.urls}
        self._turn = 0
        self._lock = threading.Lock()

    def pick(self, avoid: Sequence[str] = ()) -> Tuple[str, float]:
        """The next server in turn that is not resting (one not in `avoid` if there is one),
        and 0; else the one due first and how long until it is."""
        now = time.monotonic()
        with self._lock:
            n = len(self.urls)
            order = [self.urls[(self._turn + i) % n] for i in range(n)]
            ready = [u for u in order if self._rest_until[u] <= now]
            preferred = [u for u in ready if u not in avoid] or ready
            if preferred:
                u = preferred[0]
                self._turn = (self.urls.index(u) + 1) % n
                return u, 0.0
            u = min(order, key=lambda x: self._rest_until[x])
            return u, self._rest_until[u] - now

    def answered(self, url: str) -> None:
        with self._lock:
            self._failures[url] = 0

    def failed(self, url: str, f: Failure) -> None:
        """`url` rests: for a full queue its `Retry-After`, for a down server a backoff that
        doubles with each failure in a row; both drawn with jitter."""
        with self._lock:
            if f.kind == "busy":
                rest = f.retry_after * self._rng.uniform(0.5, 1.5)
            else:
                k = self._failures[url]
                rest = min(self._cap, self._base * 2 ** k) * self._rng.uniform(0.5, 1.5)
                self._failures[url] = k + 1
            self._rest_until[url] = max(self._rest_until[url], time.monotonic() + rest)


class Attempts:
    """One request's tries: stops them once `max_wait` seconds have passed since it began
    (or after `retries` retries, when given) with `ServersUnavailable`."""

    def __init__(self, what: str, max_wait: float, retries: Optional[int]):
        self.what, self.max_wait, self.retries = what, max_wait, retries
        self.start = time.monotonic()
        self.failures: List[str] = []

    def failed(self, f: Failure) -> None:
        self.failures.append(f.message)
        spent = time.monotonic() - self.start
        if spent >= self.max_wait or (self.retries is not None
                                      and len(self.failures) > self.retries):
            raise ServersUnavailable(
                f"{self.what}: no server answered in {spent:.0f} s ({len(self.failures)} "
                f"tries; last: {f.message}); nothing is known about these proofs")

    def wait(self, seconds: float) -> float:
        """How long to sleep before the next try: `seconds`, or what is left of the budget
        (raising when none is)."""
        left = self.max_wait - (time.monotonic() - self.start)
        if left <= 0:
            raise ServersUnavailable(
                f"{self.what}: no server answered in {self.max_wait:.0f} s "
                f"({len(self.failures)} tries; last: {self.failures[-1] if self.failures else '-'})")
        return min(max(seconds, 0.0), left)


def chunks(n: int, servers: int, max_nodes: int) -> List[range]:
    """`range(n)` cut into consecutive chunks: one per server when they fit, none longer than
    `max_nodes`."""
    if n == 0:
        return [range(0)]  # one empty request still says whether the key is right
    size = max(1, min(max_nodes, -(-n // max(servers, 1))))
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def infra_indices(verdicts: Sequence[Verdict]) -> List[int]:
    return [i for i, v in enumerate(verdicts) if v.infra]


# --- The synchronous client -----------------------------------------------------------------

#: Exceptions of urllib and http.client that say the server did not answer.
_NO_ANSWER = (urllib.error.URLError, http.client.HTTPException, ConnectionError,
              socket.timeout, TimeoutError, OSError)


class ProdClient:
    """`prod serve` at `url`: one URL (e.g. http://127.0.0.1:8537), several separated by
    commas, or a list. `timeout`: seconds one HTTP request may take (a check waits in the
    server's queue). `max_wait`: seconds a request keeps trying before `ServersUnavailable`;
    `retries`: an extra bound on the number of retries (None: only `max_wait`)."""

    def __init__(self, url: Union[str, Sequence[str]] = "http://127.0.0.1:8537",
                 api_key: Optional[str] = None, timeout: float = 600.0,
                 retries: Optional[int] = None, *, max_wait: float = 900.0,
                 max_nodes: int = MAX_NODES, infra_retries: int = 1,
                 seed: Optional[int] = None):
        self.urls = server_urls(url)
        self.url = self.urls[0] if self.urls else ""
        self.api_key = api_key
        self.timeout, self.retries, self.max_wait = timeout, retries, max_wait
        self.max_nodes, self.infra_retries = max(1, max_nodes), max(0, infra_retries)
        self.servers = Servers(self.urls, random.Random(seed))

    def _headers(self) -> Dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def _try(self, url: str, method: str, path: str, data: Optional[bytes]) -> Any:
        req = urllib.request.Request(url + path, data=data, headers=self._headers(),
                                     method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return classify(url, r.status, r.headers, r.read())
        except urllib.error.HTTPError as e:
            return classify(url, e.code, e.headers, e.read())
        except _NO_ANSWER as e:
            return Failure("down", f"{url}: no answer ({getattr(e, 'reason', None) or e!r})")

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        """The payload of the first server that answers."""
        return self._send(method, path, body)[0]

    def _send(self, method: str, path: str, body: Optional[dict] = None,
              avoid: Sequence[str] = ()) -> Tuple[Any, str]:
        """The payload of the first server that answers, and that server."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        attempts = Attempts(f"{method} {path}", self.max_wait, self.retries)
        while True:
            url, wait = self.servers.pick(avoid)
            if wait > 0:
                time.sleep(attempts.wait(wait))
                continue
            out = self._try(url, method, path, data)
            if not isinstance(out, Failure):
                self.servers.answered(url)
                return out, url
            self.servers.failed(url, out)
            attempts.failed(out)

    def health(self) -> dict:
        return self._request("GET", "/health")

    def _check_chunk(self, nodes: List[dict], avoid: Sequence[str] = ()) -> Tuple[List[Verdict], str]:
        out, url = self._send("POST", "/v1/check", {"nodes": nodes}, avoid)
        verdicts = [Verdict.from_json(r) for r in out["results"]]
        if len(verdicts) != len(nodes):
            raise ProdError(f"{url}: {len(verdicts)} results for {len(nodes)} nodes")
        return verdicts, url

    def check(self, nodes: List[dict]) -> List[Verdict]:
        """Check nodes (`prod check` input objects: id, imports, context, statement, proof):
        one verdict per node, in order, the batch spread over the servers."""
        nodes = list(nodes)
        parts = chunks(len(nodes), len(self.urls), self.max_nodes)
        verdicts: List[Optional[Verdict]] = [None] * len(nodes)
        answered_by: List[str] = [""] * len(nodes)

        def run(r: range) -> None:
            vs, url = self._check_chunk([nodes[i] for i in r])
            for i, v in zip(r, vs):
                verdicts[i], answered_by[i] = v, url

        if len(parts) <= 1:
            for r in parts:
                run(r)
        else:
            with ThreadPoolExecutor(max_workers=min(len(parts), 16)) as pool:
                for f in [pool.submit(run, r) for r in parts]:
                    f.result()
        for _ in range(self.infra_retries):
            again = infra_indices(verdicts)
            if not again:
                break
            vs, url = self._check_chunk([nodes[i] for i in again],
                                        avoid=sorted({answered_by[i] for i in again}))
            for i, v in zip(again, vs):
                verdicts[i], answered_by[i] = v, url
        return verdicts  # type: ignore[return-value]

    def tree(self, nodes: List[dict]) -> List[dict]:
        """Check nodes and solve their proof trees: each result has `globally_correct`.
        One request (a tree is solved on one server)."""
        return self._request("POST", "/v1/tree", {"nodes": list(nodes)})["results"]

    def assemble(self, nodes: List[dict], root: int = 0) -> dict:
        """Check nodes, solve their trees, and assemble `nodes[root]`'s complete proof, re-checked
        cold by the prover: `proved` is True, False, or None (an infra verdict decided nothing);
        `assembled` the complete proof; `results` the per-node verdicts with `globally_correct`."""
        return self._request("POST", "/v1/assemble", {"nodes": list(nodes), "root": root})

"""`AsyncProdClient`: `ProdClient` for asyncio (verl's reward loop, TRL's async reward
functions), with the same servers, spreading, fail-over, jitter and budget
(`prod_client.client`'s `Servers`, `Attempts`, `classify`); its HTTP/1.1 requests go over
asyncio streams (one connection per request). Standard library only.
"""

import asyncio
import json
import random
import ssl
import urllib.parse
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .client import (MAX_NODES, Attempts, Failure, ProdError, Servers, Verdict, chunks, classify,
                     infra_indices, server_urls)


class _Headers(dict):
    """Response headers, looked up without regard to case."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)


async def _read_body(reader: asyncio.StreamReader, headers: _Headers) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    if headers.get("content-length") is not None:
        return await reader.readexactly(int(headers.get("content-length")))
    return await reader.read()


async def http_request(url: str, method: str, path: str, data: Optional[bytes],
                       headers: Dict[str, str]) -> Tuple[int, _Headers, bytes]:
    """One HTTP/1.1 request (`Connection: close`): status, headers, body."""
    u = urllib.parse.urlsplit(url)
    tls = u.scheme == "https"
    port = u.port or (443 if tls else 80)
    reader, writer = await asyncio.open_connection(
        u.hostname, port, ssl=ssl.create_default_context() if tls else None)
    try:
        target = (u.path.rstrip("/") + path) or "/"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {u.hostname}:{port}",
                 "Connection: close", f"Content-Length: {len(data or b'')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (data or b""))
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ConnectionError(f"not an HTTP answer: {status_line[:80]!r}")
        response_headers = _Headers()
        while True:
            line = (await reader.readline()).decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            k, _, v = line.partition(":")
            response_headers[k.strip().lower()] = v.strip()
        return int(parts[1]), response_headers, await _read_body(reader, response_headers)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, asyncio.IncompleteReadError):
            pass


class AsyncProdClient:
    """`ProdClient`'s routes and behaviour as coroutines (same arguments)."""

    def __init__(self, url: Union[str, Sequence[str]] = "http://127.0.0.1:8537",
                 api_key: Optional[str] = None, timeout: float = 600.0,
                 retries: Optional[int] = None, *, max_wait: float = 900.0,
                 max_nodes: int = MAX_NODES, infra_retries: int = 1,
                 seed: Optional[int] = None):
        self.urls = server_urls(url)
        self.api_key = api_key
        self.timeout, self.retries, self.max_wait = timeout, retries, max_wait
        self.max_nodes, self.infra_retries = max(1, max_nodes), max(0, infra_retries)
        self.servers = Servers(self.urls, random.Random(seed))

    def _headers(self) -> Dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    async def _try(self, url: str, method: str, path: str, data: Optional[bytes]) -> Any:
        try:
            status, headers, body = await asyncio.wait_for(
                http_request(url, method, path, data, self._headers()), self.timeout)
        except (OSError, ConnectionError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                ValueError) as e:
            return Failure("down", f"{url}: no answer ({e!r})")
        return classify(url, status, headers, body)

    async def _send(self, method: str, path: str, body: Optional[dict] = None,
                    avoid: Sequence[str] = ()) -> Tuple[Any, str]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        attempts = Attempts(f"{method} {path}", self.max_wait, self.retries)
        while True:
            url, wait = self.servers.pick(avoid)
            if wait > 0:
                await asyncio.sleep(attempts.wait(wait))
                continue
            out = await self._try(url, method, path, data)
            if not isinstance(out, Failure):
                self.servers.answered(url)
                return out, url
            self.servers.failed(url, out)
            attempts.failed(out)

    async def health(self) -> dict:
        return (await self._send("GET", "/health"))[0]

    async def _check_chunk(self, nodes: List[dict],
                           avoid: Sequence[str] = ()) -> Tuple[List[Verdict], str]:
        out, url = await self._send("POST", "/v1/check", {"nodes": nodes}, avoid)
        verdicts = [Verdict.from_json(r) for r in out["results"]]
        if len(verdicts) != len(nodes):
            raise ProdError(f"{url}: {len(verdicts)} results for {len(nodes)} nodes")
        return verdicts, url

    async def check(self, nodes: List[dict]) -> List[Verdict]:
        """As `ProdClient.check`: one verdict per node, in order."""
        nodes = list(nodes)
        parts = chunks(len(nodes), len(self.urls), self.max_nodes)
        answers = await asyncio.gather(*[self._check_chunk([nodes[i] for i in r])
                                         for r in parts])
        verdicts: List[Any] = [None] * len(nodes)
        answered_by = [""] * len(nodes)
        for r, (vs, url) in zip(parts, answers):
            for i, v in zip(r, vs):
                verdicts[i], answered_by[i] = v, url
        for _ in range(self.infra_retries):
            again = infra_indices(verdicts)
            if not again:
                break
            vs, url = await self._check_chunk([nodes[i] for i in again],
                                              avoid=sorted({answered_by[i] for i in again}))
            for i, v in zip(again, vs):
                verdicts[i], answered_by[i] = v, url
        return verdicts

    async def tree(self, nodes: List[dict]) -> List[dict]:
        return (await self._send("POST", "/v1/tree", {"nodes": list(nodes)}))[0]["results"]

    async def assemble(self, nodes: List[dict], root: int = 0) -> dict:
        return (await self._send("POST", "/v1/assemble",
                                 {"nodes": list(nodes), "root": root}))[0]

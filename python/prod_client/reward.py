"""Reward functions over a `prod serve` server, for verl and TRL.

A completion is a conditional proof (`<no_invoke> intros n. lia.` or `<use_invoke> …
<invoke> Lemma l : S. </invoke> …`); the statement and its context come with the sample. The
reward is 1.0 when the completion is locally correct (`proved`: proposed lemmas admitted), else
0.0. An `infra` verdict (crashed prover, lost worker) says nothing about the proof: it raises
`InfraError` rather than returning 0, so a trainer never learns from a broken checker.

Server address and key: the `PROD_SERVE_URL` and `PROD_API_KEY` environment variables (or the
`url`/`api_key` keyword arguments).
"""

import os
from typing import Any, Dict, List, Optional

from .client import InfraError, ProdClient, Verdict

_CLIENTS: Dict[tuple, ProdClient] = {}


def _client(url: Optional[str], api_key: Optional[str]) -> ProdClient:
    url = url or os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537")
    api_key = api_key or os.environ.get("PROD_API_KEY") or None
    key = (url, api_key)
    if key not in _CLIENTS:
        _CLIENTS[key] = ProdClient(url, api_key)
    return _CLIENTS[key]


def _node(completion: str, info: Dict[str, Any], i: int = 0) -> dict:
    """A `prod check` node from a completion and the sample's statement and context."""
    if not isinstance(info, dict) or "statement" not in info:
        raise ValueError("the sample must carry a dict with 'statement' "
                         "(and optionally 'imports', 'context')")
    return {"id": info.get("id", i), "imports": info.get("imports", ""),
            "context": info.get("context", ""), "statement": info["statement"],
            "proof": completion.strip()}


def _score(v: Verdict) -> float:
    if v.infra:
        raise InfraError(f"node {v.id!r}: infra verdict ({v.message}); not a proof failure")
    return 1.0 if v.proved else 0.0


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: Optional[Dict[str, Any]] = None, *, url: Optional[str] = None,
                  api_key: Optional[str] = None) -> float:
    """verl's custom reward function (`custom_reward_function.name: compute_score`).

    `ground_truth` (a dict, or its JSON text) carries `statement`, and optionally `imports` and
    `context`; keys in `extra_info` fill in what `ground_truth` lacks. Returns 1.0 (proved) or
    0.0; raises `InfraError` on an infra verdict.
    """
    info: Dict[str, Any] = {}
    if isinstance(extra_info, dict):
        info.update({k: extra_info[k] for k in ("statement", "imports", "context", "id")
                     if k in extra_info})
    if isinstance(ground_truth, str):
        import json
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            ground_truth = {"statement": ground_truth}
    if isinstance(ground_truth, dict):
        info.update(ground_truth)
    (v,) = _client(url, api_key).check([_node(solution_str, info)])
    return _score(v)


def reward_fn(prompts: List[Any], completions: List[str], *, url: Optional[str] = None,
              api_key: Optional[str] = None, **kwargs: Any) -> List[float]:
    """TRL-style reward: one float per completion, all checked in one request.

    The dataset's columns arrive as keyword lists: `statement` (required), `imports` and
    `context` (optional), one entry per completion. Raises `InfraError` on an infra verdict.
    """
    n = len(completions)

    def column(name: str) -> List[Any]:
        col = kwargs.get(name)
        return list(col) if col is not None else [""] * n

    statements = kwargs.get("statement")
    if statements is None or len(statements) != n:
        raise ValueError("reward_fn needs a 'statement' column with one entry per completion")
    imports, contexts = column("imports"), column("context")
    nodes = []
    for i, c in enumerate(completions):
        text = c if isinstance(c, str) else c[-1]["content"]  # conversational completions
        nodes.append(_node(text, {"statement": statements[i], "imports": imports[i],
                                  "context": contexts[i]}, i))
    return [_score(v) for v in _client(url, api_key).check(nodes)]

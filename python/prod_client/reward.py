"""Reward functions over a `prod serve` server, for verl, TRL and OpenRLHF.

A completion is a conditional proof (`<no_invoke> intros n. lia.` or `<use_invoke> …
<invoke> Lemma l : S. </invoke> …`); the statement and its context come with the sample. The
reward is 1.0 when the completion is locally correct (`proved`: proposed lemmas admitted), else
0.0. An `infra` verdict (crashed prover, lost worker) says nothing about the proof: it raises
`InfraError` rather than returning 0, so a trainer never learns from a broken checker.

ProD's six markers (`<use_invoke>`, `<no_invoke>`, `<invoke>`, `</invoke>`, `<true>`,
`<false>`) are single tokens. Trainers decode completions with `skip_special_tokens=True`
(verl's reward managers, TRL's GRPO trainer), which deletes them where a tokenizer marks them
special: `<use_invoke> intros. <invoke> Lemma l : True. </invoke> auto.` arrives as
` intros.  Lemma l : True.  auto.`. Three defences, in order:

* model folders written by `prod` mark the six tokens as plain (non-special) added tokens, so
  no decoding strips them;
* where the framework hands over token ids (TRL's `completion_ids`, verl's reward manager),
  `decode_completion` turns them into text with ProD's markers kept and every other special
  token (end, padding) dropped: `make_reward_fn(tokenizer)` for TRL, and
  `prod_client.verl_reward.ProdRewardManager` for verl;
* a completion that reaches a reward function without its `t0` is scored 0 (the checker rejects
  it) with a `MissingMarkerWarning`: never a silent 0.

Server address and key: the `PROD_SERVE_URL` and `PROD_API_KEY` environment variables (or the
`url`/`api_key` keyword arguments).

This file also loads by its path (verl's `custom_reward_function.path`, OpenRLHF's
`--remote_rm_url FILE.py`), outside its package: it then imports the package from the folder
above it.
"""

import json
import os
import sys
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence

if __package__:
    from .client import InfraError, ProdClient, Verdict
else:  # loaded by file path: no parent package for relative imports
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.client import InfraError, ProdClient, Verdict

#: ProD's special tokens (prod_core::conditional::SPECIAL_TOKENS), in that order.
MARKERS = ("<use_invoke>", "<no_invoke>", "<invoke>", "</invoke>", "<true>", "<false>")
T0_MARKERS = ("<use_invoke>", "<no_invoke>")


class MissingMarkerWarning(UserWarning):
    """A completion reached the reward without its `t0` (`<use_invoke>`/`<no_invoke>`): it is
    scored 0. Usually the trainer decoded with `skip_special_tokens=True` and the tokenizer marks
    ProD's markers special; see docs/serve.md ("Rewards and decoding")."""


_CLIENTS: Dict[tuple, ProdClient] = {}


def _client(url: Optional[str], api_key: Optional[str]) -> ProdClient:
    url = url or os.environ.get("PROD_SERVE_URL", "http://127.0.0.1:8537")
    api_key = api_key or os.environ.get("PROD_API_KEY") or None
    key = (url, api_key)
    if key not in _CLIENTS:
        _CLIENTS[key] = ProdClient(url, api_key)
    return _CLIENTS[key]


def decode_completion(tokenizer: Any, ids: Iterable[int]) -> str:
    """The text of a completion's token ids as the model wrote it: ProD's six markers kept,
    every other special token (end of text, padding, a chat template's markers) dropped.

    `tokenizer` is a Hugging Face tokenizer (anything with `convert_tokens_to_ids`,
    `all_special_ids` and `decode`)."""
    keep = set()
    for m in MARKERS:
        i = tokenizer.convert_tokens_to_ids(m)
        if isinstance(i, int) and i != getattr(tokenizer, "unk_token_id", None):
            keep.add(i)
    drop = set(getattr(tokenizer, "all_special_ids", []) or []) - keep
    ids = [int(i) for i in ids if int(i) not in drop]
    return tokenizer.decode(ids, skip_special_tokens=False)


def _imports(value: Any) -> str:
    """`imports` as the API takes it: the dataset's list of `Require` sentences, or a string."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    if hasattr(value, "tolist"):  # a NumPy array out of a Parquet column
        return _imports(value.tolist())
    return str(value)


def _warn_missing_t0(completions: Sequence[str], where: str) -> None:
    missing = [i for i, c in enumerate(completions) if not c.lstrip().startswith(T0_MARKERS)]
    if missing:
        sample = completions[missing[0]].strip()
        warnings.warn(
            f"{where}: {len(missing)} of {len(completions)} completion(s) have no t0 "
            f"(<no_invoke>/<use_invoke>) and score 0, e.g. {sample[:80]!r}. If the model wrote "
            "one, the trainer decoded with skip_special_tokens=True and the tokenizer marks "
            "ProD's markers special: pass token ids (prod_client.make_reward_fn(tokenizer), "
            "prod_client.verl_reward.ProdRewardManager) or use a model folder written by prod "
            "(docs/serve.md, 'Rewards and decoding').",
            MissingMarkerWarning,
            stacklevel=3,
        )


def _node(completion: str, info: Dict[str, Any], i: int = 0) -> dict:
    """A `prod check` node from a completion and the sample's statement and context."""
    if not isinstance(info, dict) or "statement" not in info:
        raise ValueError("the sample must carry a dict with 'statement' "
                         "(and optionally 'imports', 'context')")
    return {"id": info.get("id", i), "imports": _imports(info.get("imports")),
            "context": info.get("context") or "", "statement": info["statement"],
            "proof": completion.strip()}


def _score(v: Verdict) -> float:
    if v.infra:
        raise InfraError(f"node {v.id!r}: infra verdict ({v.message}); not a proof failure")
    return 1.0 if v.proved else 0.0


def ground_truth_info(ground_truth: Any, extra_info: Optional[Dict[str, Any]] = None) -> dict:
    """The statement and context of a sample from verl's `ground_truth` (a dict, or its JSON
    text, or a bare statement) and `extra_info` (fills in what `ground_truth` lacks)."""
    info: Dict[str, Any] = {}
    if isinstance(extra_info, dict):
        info.update({k: extra_info[k] for k in ("statement", "imports", "context", "id")
                     if k in extra_info})
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            ground_truth = {"statement": ground_truth}
    if isinstance(ground_truth, dict):
        info.update(ground_truth)
    return info


def score_texts(completions: Sequence[str], infos: Sequence[Dict[str, Any]], *,
                url: Optional[str] = None, api_key: Optional[str] = None,
                client: Any = None, where: str = "prod_client") -> List[float]:
    """Rewards of completions (texts with their markers) for samples `infos`, in one request
    (to `client`, else the server at `url`)."""
    _warn_missing_t0(completions, where)
    nodes = [_node(c, info, i) for i, (c, info) in enumerate(zip(completions, infos))]
    client = client if client is not None else _client(url, api_key)
    return [_score(v) for v in client.check(nodes)]


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: Optional[Dict[str, Any]] = None, *, url: Optional[str] = None,
                  api_key: Optional[str] = None, **_: Any) -> float:
    """verl's custom reward function (`reward.custom_reward_function.name=compute_score`).

    `ground_truth` (a dict, or its JSON text) carries `statement`, and optionally `imports` and
    `context`; keys in `extra_info` fill in what `ground_truth` lacks. Returns 1.0 (proved) or
    0.0; raises `InfraError` on an infra verdict. `solution_str` is the text verl decoded: with
    a tokenizer that marks ProD's markers special it has lost them (a warning says so); use
    `prod_client.verl_reward.ProdRewardManager`, which decodes the ids itself.
    """
    info = ground_truth_info(ground_truth, extra_info)
    (r,) = score_texts([solution_str], [info], url=url, api_key=api_key,
                       where="compute_score")
    return r


def _columns(n: int, kwargs: Dict[str, Any]) -> List[Dict[str, Any]]:
    statements = kwargs.get("statement")
    if statements is None or len(statements) != n:
        raise ValueError("the reward needs a 'statement' column with one entry per completion")

    def column(name: str) -> List[Any]:
        col = kwargs.get(name)
        return list(col) if col is not None else [""] * n

    imports, contexts = column("imports"), column("context")
    return [{"statement": statements[i], "imports": imports[i], "context": contexts[i]}
            for i in range(n)]


def _text(c: Any) -> str:
    return c if isinstance(c, str) else c[-1]["content"]  # conversational completions


def reward_fn(prompts: List[Any], completions: List[Any], *, url: Optional[str] = None,
              api_key: Optional[str] = None, **kwargs: Any) -> List[float]:
    """TRL-style reward on the decoded texts: one float per completion, in one request.

    The dataset's columns arrive as keyword lists: `statement` (required), `imports` and
    `context` (optional), one entry per completion. Right for tokenizers that keep ProD's
    markers in decoded text (model folders written by prod); otherwise use
    `make_reward_fn(tokenizer)`. Raises `InfraError` on an infra verdict.
    """
    texts = [_text(c) for c in completions]
    return score_texts(texts, _columns(len(texts), kwargs), url=url, api_key=api_key,
                       where="reward_fn")


def make_reward_fn(tokenizer: Any = None, *, url: Optional[str] = None,
                   api_key: Optional[str] = None):
    """A TRL reward function (`GRPOTrainer(reward_funcs=[make_reward_fn(tokenizer)])`) that
    checks each completion as the model wrote it: from TRL's `completion_ids` decoded by
    `decode_completion` when `tokenizer` is given, else from the decoded text."""

    def prod_reward(prompts: List[Any], completions: List[Any],
                    completion_ids: Optional[List[List[int]]] = None,
                    **kwargs: Any) -> List[float]:
        if tokenizer is not None and completion_ids is not None:
            texts = [decode_completion(tokenizer, ids) for ids in completion_ids]
        else:
            texts = [_text(c) for c in completions]
        return score_texts(texts, _columns(len(texts), kwargs), url=url, api_key=api_key,
                           where="prod_reward")

    return prod_reward

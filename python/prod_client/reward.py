"""Reward functions over `prod serve`, for verl, TRL and OpenRLHF.

A completion is a conditional proof (`<no_invoke> intros n. lia.` or `<use_invoke> …
<invoke> Lemma l : S. </invoke> …`); the statement and its context come with the sample. The
reward is 1.0 when the completion is locally correct (`proved`: proposed lemmas admitted), else
0.0. Nothing that says nothing about the proof is ever a reward: an `infra` verdict (crashed
prover, lost worker) or no server answering raises `InfraError`, a completion that cannot be
told apart from its prompt raises `CompletionNotFound`; a trainer never learns from a broken
checker.

What is checked, for every framework alike (`proof_text`):

1. the completion as the model wrote it: from token ids where the framework hands them over
   (`decode_completion`: ProD's markers kept, the end token and everything after it, padding
   and other special tokens dropped), else the framework's decoded text;
2. without the end, padding and turn tokens that follow it (`<|im_end|>`, `<|endoftext|>`,
   `</s>`, `<pad>`, …, and the tokenizer's own where it is known; `end_tokens` adds others);
3. with its `t0` put back where the marker was written into the prompt (`t0_in_prompt`, one
   option in every wrapper): `"auto"` (the default where the prompt is seen) takes the
   `<use_invoke>`/`<no_invoke>` the prompt ends with, if any; `"<no_invoke>"` or
   `"<use_invoke>"` names it for every completion (verl's `compute_score`, which is not given
   the prompt; a policy that never writes the markers); `None` or `"off"`: the completion
   carries its own. The completion then continues after that marker: one that begins with a
   `t0` of its own is checked as written after it (and rejected). `PROD_T0_IN_PROMPT` sets it
   where no keyword can be passed (a file loaded by path).

ProD's six markers are single tokens. Trainers decode completions with
`skip_special_tokens=True` (verl's reward managers, TRL's GRPO trainer), which deletes them
where a tokenizer marks them special. Model folders written by `prod` mark them plain, so no
decoding strips them; where the framework hands over token ids, `make_reward_fn(tokenizer)`
(TRL) and `prod_client.verl_reward.ProdRewardManager` (verl) decode them with the markers kept;
a completion that reaches the checker without its `t0` scores 0 (the checker rejects it) with
a `MissingMarkerWarning` that names the likely cause for the path it came by.

Servers and key: `url` (one URL, several separated by commas, or a list: the batch is spread
over them, see `prod_client.client`) and `api_key`, else `PROD_SERVE_URL` and `PROD_API_KEY`.
Async versions for async reward loops: `compute_score_async` (verl), `make_reward_fn(...,
asynchronous=True)` (TRL).

This file also loads by its path (verl's `custom_reward_function.path`), outside its package:
it then imports the package from the folder above it.
"""

import json
import os
import re
import sys
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

if __package__:
    from .aio import AsyncProdClient
    from .client import InfraError, ProdClient, Verdict, server_urls
else:  # loaded by file path: no parent package for relative imports
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.aio import AsyncProdClient
    from prod_client.client import InfraError, ProdClient, Verdict, server_urls

#: ProD's special tokens (prod_core::conditional::SPECIAL_TOKENS), in that order.
MARKERS = ("<use_invoke>", "<no_invoke>", "<invoke>", "</invoke>", "<true>", "<false>")
T0_MARKERS = ("<use_invoke>", "<no_invoke>")
DEFAULT_URL = "http://127.0.0.1:8537"


class MissingMarkerWarning(UserWarning):
    """A completion reached the checker without its `t0` (`<use_invoke>`/`<no_invoke>`): it
    scores 0. The message names the likely cause; see docs/serve.md ("Rewards and decoding")."""


class CompletionNotFound(ValueError):
    """The completion cannot be told apart from its prompt (OpenRLHF's query does not hold
    the prompt's end): a refusal, never a reward."""


# --- The completion's text ------------------------------------------------------------------

# End, padding and turn tokens as tokenizers print them: `<|endoftext|>`, `<|im_end|>`, `</s>`,
# `<eos>`, `<pad>`, `<|eot_id|>`, DeepSeek's `<｜end▁of▁sentence｜>`.
_END_SHAPES = r"<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<pad>|<｜[^｜\s]{1,40}｜>"


def strip_end_tokens(text: str, extra: Sequence[str] = ()) -> str:
    """`text` without the end, padding and turn tokens that follow the completion: those of
    the usual shapes and `extra` (a tokenizer's own), wherever the first of `extra` occurs
    (nothing the model wrote after its end token is part of the completion)."""
    for t in extra:
        if t and t not in MARKERS:
            i = text.find(t)
            if i >= 0:
                text = text[:i]
    return re.sub(r"(?:\s*(?:" + _END_SHAPES + r"))+\s*$", "", text)


def tokenizer_end_tokens(tokenizer: Any) -> List[str]:
    """The end and padding tokens of a Hugging Face tokenizer, as text (ProD's markers never)."""
    if tokenizer is None:
        return []
    out = []
    for name in ("eos_token", "pad_token"):
        t = getattr(tokenizer, name, None)
        if isinstance(t, str) and t and t not in MARKERS and t not in out:
            out.append(t)
    return out


def decode_completion(tokenizer: Any, ids: Iterable[int]) -> str:
    """The text of a completion's token ids as the model wrote it: ProD's six markers kept; the
    end token and everything after it, and every other special token (padding, a chat
    template's markers), dropped.

    `tokenizer` is a Hugging Face tokenizer (anything with `convert_tokens_to_ids`,
    `all_special_ids` and `decode`)."""
    keep = set()
    for m in MARKERS:
        i = tokenizer.convert_tokens_to_ids(m)
        if isinstance(i, int) and i != getattr(tokenizer, "unk_token_id", None):
            keep.add(i)
    ids = [int(i) for i in ids]
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int) and eos not in keep and eos in ids:
        ids = ids[:ids.index(eos)]
    drop = set(getattr(tokenizer, "all_special_ids", []) or []) - keep
    pad = getattr(tokenizer, "pad_token_id", None)
    if isinstance(pad, int) and pad not in keep:
        drop.add(pad)
    return tokenizer.decode([i for i in ids if i not in drop], skip_special_tokens=False)


def t0_option(value: Any) -> Optional[str]:
    """`t0_in_prompt` as one of None (the completion carries its t0), "auto" (the marker the
    prompt ends with) or a marker; `ValueError` for anything else."""
    if value is None or value is False:
        return None
    if value is True:
        return "auto"
    v = str(value).strip()
    if v.lower() in ("", "off", "none", "no", "false", "0"):
        return None
    if v.lower() == "auto":
        return "auto"
    for m in T0_MARKERS:
        if v in (m, m[1:-1]):
            return m
    raise ValueError(f"t0_in_prompt={value!r}: expected 'auto', '<no_invoke>', '<use_invoke>' "
                     "or None")


def _t0_setting(value: Any, default: Optional[str]) -> Optional[str]:
    """The option as given, else `PROD_T0_IN_PROMPT`, else the wrapper's default."""
    if value is not None:
        return t0_option(value)
    env = os.environ.get("PROD_T0_IN_PROMPT")
    return t0_option(env) if env is not None else default


def prompt_text(prompt: Any) -> str:
    """A prompt as text: a string, or a conversation's last message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)) and prompt and isinstance(prompt[-1], dict):
        return str(prompt[-1].get("content", ""))
    return "" if prompt is None else str(prompt)


def prompt_t0(prompt: str) -> Optional[str]:
    """The `t0` marker the prompt ends with, if any."""
    p = prompt.rstrip()
    return next((m for m in T0_MARKERS if p.endswith(m)), None)


def proof_text(completion: str, *, t0_in_prompt: Optional[str] = None,
               prompt: Optional[str] = None, end_tokens: Sequence[str] = ()) -> str:
    """The conditional proof a completion stands for (steps 2 and 3 of the module's list).
    `t0_in_prompt` is already normalised (`t0_option`)."""
    text = strip_end_tokens(completion, end_tokens).strip()
    marker = t0_in_prompt
    if marker == "auto":
        if prompt is None:
            raise ValueError("t0_in_prompt='auto' takes the marker from the end of the prompt, "
                             "which this reward function is not given: name the marker "
                             "(t0_in_prompt='<no_invoke>')")
        marker = prompt_t0(prompt)
    return f"{marker} {text}" if marker else text


# --- Where the completion starts in prompt + completion (OpenRLHF's query) ------------------

#: Visible characters of the prompt a query must hold for its completion to be found.
MIN_PROMPT_TAIL = 16


def _visible(text: str) -> Tuple[str, List[int]]:
    """`text` without blanks, and for each kept character its index in `text`."""
    kept = [(i, c) for i, c in enumerate(text) if not c.isspace()]
    return "".join(c for _, c in kept), [i for i, _ in kept]


def completion_in_query(query: str, prompt: str) -> str:
    """The completion in `query` = (the prompt, or a tail of it: OpenRLHF cuts long prompts
    from the left) + completion, found by where the prompt ends, not by the prompt's start.

    Compared without blanks (a tokenizer may decode spaces differently) and ignoring
    replacement characters where a cut fell inside a character: the completion starts after
    the longest start of the query that is an end of the prompt, and that start must hold at
    least `MIN_PROMPT_TAIL` visible characters (or the whole prompt) to say where the prompt
    ends. Raises `CompletionNotFound` when there is none (the query does not hold the end of
    its prompt)."""
    if not prompt or query.startswith(prompt):
        return query[len(prompt):]
    p, _ = _visible(prompt)
    q, where = _visible(query)
    if not p:
        return query
    best = None
    # Candidate ends: where the prompt's last character is, the latest first (a start of the
    # query longer than the prompt, give or take a few replacement characters, cannot be one).
    end = q.rfind(p[-1], 0, min(len(q), len(p) + 4))
    while end >= 0:
        head = q[:end + 1].lstrip("\ufffd")
        if len(head) >= min(len(p), MIN_PROMPT_TAIL) and p.endswith(head):
            best = end + 1
            break
        end = q.rfind(p[-1], 0, end)
    if best is None:
        raise CompletionNotFound(
            f"the query does not hold the end of its prompt ({prompt[-40:]!r}), so the "
            "completion cannot be told apart from it: are the request's `prompts` the prompts "
            "of its queries, and does the tokenizer decode them back to their text?")
    return query[where[best - 1] + 1:]


# --- Warnings that name the cause -----------------------------------------------------------

#: Why a completion may lack its t0, per the path it came by.
CAUSES = {
    "text": "the model wrote none, or the trainer decoded with skip_special_tokens=True and "
            "the tokenizer marks ProD's markers special (pass token ids: "
            "prod_client.make_reward_fn(tokenizer), prod_client.verl_reward.ProdRewardManager; "
            "or use a model folder written by prod)",
    "ids": "the model wrote none (its ids were decoded with the markers kept)",
}


def _warn_missing_t0(proofs: Sequence[str], where: str, path: str = "text",
                     prompts: Optional[Sequence[Optional[str]]] = None) -> None:
    missing = [i for i, c in enumerate(proofs) if not c.lstrip().startswith(T0_MARKERS)]
    if not missing:
        return
    cause = CAUSES.get(path, CAUSES["text"])
    with_marker = [i for i in missing if prompts and prompts[i] and prompt_t0(prompts[i])]
    if with_marker:
        cause = (f"the prompt ends with {prompt_t0(prompts[with_marker[0]])}, so the model did "
                 "not write it: pass t0_in_prompt='auto'")
    elif path == "ids":
        cause += ("; if the marker was in the prompt, say so: t0_in_prompt='<no_invoke>' "
                  "(or 'auto')")
    sample = proofs[missing[0]].strip()
    warnings.warn(
        f"{where}: {len(missing)} of {len(proofs)} completion(s) have no t0 "
        f"(<no_invoke>/<use_invoke>) and score 0, e.g. {sample[:80]!r}: {cause} "
        "(docs/serve.md, 'Rewards and decoding').",
        MissingMarkerWarning,
        stacklevel=3,
    )


# --- Samples to nodes, verdicts to rewards --------------------------------------------------

_CLIENTS: Dict[tuple, Any] = {}


def _server(url: Any, api_key: Optional[str]) -> Tuple[Tuple[str, ...], Optional[str]]:
    urls = tuple(server_urls(url or os.environ.get("PROD_SERVE_URL") or DEFAULT_URL))
    return urls, api_key or os.environ.get("PROD_API_KEY") or None


def _client(url: Any, api_key: Optional[str]) -> ProdClient:
    urls, key = _server(url, api_key)
    if ("sync", urls, key) not in _CLIENTS:
        _CLIENTS[("sync", urls, key)] = ProdClient(list(urls), key)
    return _CLIENTS[("sync", urls, key)]


def _async_client(url: Any, api_key: Optional[str]) -> AsyncProdClient:
    urls, key = _server(url, api_key)
    if ("async", urls, key) not in _CLIENTS:
        _CLIENTS[("async", urls, key)] = AsyncProdClient(list(urls), key)
    return _CLIENTS[("async", urls, key)]


def _imports(value: Any) -> str:
    """`imports` as the API takes it: the dataset's list of `Require` sentences, or a string."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    if hasattr(value, "tolist"):  # a NumPy array out of a Parquet column
        return _imports(value.tolist())
    return str(value)


def _node(proof: str, info: Dict[str, Any], i: int = 0) -> dict:
    """A `prod check` node from a proof and the sample's statement and context."""
    if not isinstance(info, dict) or "statement" not in info:
        raise ValueError("the sample must carry a dict with 'statement' "
                         "(and optionally 'imports', 'context')")
    return {"id": info.get("id", i), "imports": _imports(info.get("imports")),
            "context": info.get("context") or "", "statement": info["statement"],
            "proof": proof.strip()}


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


class Batch:
    """The nodes of a batch of completions (steps 2 and 3 of the module's list applied), with
    the warning for those without a t0 given."""

    def __init__(self, completions: Sequence[str], infos: Sequence[Dict[str, Any]], *,
                 prompts: Optional[Sequence[Any]] = None, t0_in_prompt: Optional[str] = None,
                 end_tokens: Sequence[str] = (), where: str = "prod_client",
                 path: str = "text"):
        if len(infos) != len(completions) or (prompts is not None
                                              and len(prompts) != len(completions)):
            raise ValueError(f"{where}: {len(completions)} completions, {len(infos)} samples"
                             + ("" if prompts is None else f", {len(prompts)} prompts"))
        texts = [None if prompts is None else prompt_text(p) for p in (prompts or completions)]
        proofs = [proof_text(c, t0_in_prompt=t0_in_prompt, prompt=t, end_tokens=end_tokens)
                  for c, t in zip(completions, texts)]
        _warn_missing_t0(proofs, where, path, texts if t0_in_prompt is None else None)
        self.nodes = [_node(p, info, i) for i, (p, info) in enumerate(zip(proofs, infos))]

    @staticmethod
    def rewards(verdicts: Sequence[Verdict]) -> List[float]:
        return [_score(v) for v in verdicts]


def score_texts(completions: Sequence[str], infos: Sequence[Dict[str, Any]], *,
                url: Any = None, api_key: Optional[str] = None, client: Any = None,
                where: str = "prod_client", **batch: Any) -> List[float]:
    """Rewards of completions for samples `infos` (keywords of `Batch`: prompts,
    t0_in_prompt, end_tokens, path), checked by `client`, else the servers at `url`."""
    b = Batch(completions, infos, where=where, **batch)
    client = client if client is not None else _client(url, api_key)
    return Batch.rewards(client.check(b.nodes))


async def score_texts_async(completions: Sequence[str], infos: Sequence[Dict[str, Any]], *,
                            url: Any = None, api_key: Optional[str] = None, client: Any = None,
                            where: str = "prod_client", **batch: Any) -> List[float]:
    """`score_texts` with the asyncio client."""
    b = Batch(completions, infos, where=where, **batch)
    client = client if client is not None else _async_client(url, api_key)
    return Batch.rewards(await client.check(b.nodes))


# --- verl -----------------------------------------------------------------------------------


def _verl_batch(solution_str: str, ground_truth: Any, extra_info: Any, t0_in_prompt: Any,
                end_tokens: Sequence[str]) -> Dict[str, Any]:
    option = _t0_setting(t0_in_prompt, None)
    if option == "auto":
        raise ValueError("compute_score is not given the prompt, so t0_in_prompt='auto' cannot "
                         "find its marker: name it (reward_kwargs.t0_in_prompt='<no_invoke>'), "
                         "or use prod_client.verl_reward.ProdRewardManager, which reads it")
    return dict(completions=[solution_str], infos=[ground_truth_info(ground_truth, extra_info)],
                t0_in_prompt=option, end_tokens=tuple(end_tokens), where="compute_score")


def compute_score(data_source: str, solution_str: str, ground_truth: Any,
                  extra_info: Optional[Dict[str, Any]] = None, *, url: Any = None,
                  api_key: Optional[str] = None, t0_in_prompt: Any = None,
                  end_tokens: Sequence[str] = (), **_: Any) -> float:
    """verl's custom reward function (`reward.custom_reward_function.name=compute_score`;
    keywords through `reward.custom_reward_function.reward_kwargs`).

    `ground_truth` (a dict, or its JSON text) carries `statement`, and optionally `imports` and
    `context`; keys in `extra_info` fill in what `ground_truth` lacks. Returns 1.0 (proved) or
    0.0; raises `InfraError` when nothing is known. `solution_str` is the text verl decoded:
    with a tokenizer that marks ProD's markers special it has lost them (a warning says so);
    use `prod_client.verl_reward.ProdRewardManager`, which decodes the ids itself.
    """
    (r,) = score_texts(**_verl_batch(solution_str, ground_truth, extra_info, t0_in_prompt,
                                     end_tokens), url=url, api_key=api_key)
    return r


async def compute_score_async(data_source: str, solution_str: str, ground_truth: Any,
                              extra_info: Optional[Dict[str, Any]] = None, *, url: Any = None,
                              api_key: Optional[str] = None, t0_in_prompt: Any = None,
                              end_tokens: Sequence[str] = (), **_: Any) -> float:
    """`compute_score` as a coroutine (`reward.custom_reward_function.name=compute_score_async`:
    verl's reward loop awaits it instead of running it in a thread)."""
    (r,) = await score_texts_async(**_verl_batch(solution_str, ground_truth, extra_info,
                                                 t0_in_prompt, end_tokens),
                                   url=url, api_key=api_key)
    return r


# --- TRL ------------------------------------------------------------------------------------


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


def reward_fn(prompts: List[Any], completions: List[Any], *, url: Any = None,
              api_key: Optional[str] = None, t0_in_prompt: Any = None,
              end_tokens: Sequence[str] = (), **kwargs: Any) -> List[float]:
    """TRL-style reward on the decoded texts: one float per completion, in one batch.

    The dataset's columns arrive as keyword lists: `statement` (required), `imports` and
    `context` (optional), one entry per completion. Right for tokenizers that keep ProD's
    markers in decoded text (model folders written by prod); otherwise use
    `make_reward_fn(tokenizer)`. `t0_in_prompt` defaults to "auto". Raises `InfraError` when
    nothing is known.
    """
    texts = [_text(c) for c in completions]
    return score_texts(texts, _columns(len(texts), kwargs), url=url, api_key=api_key,
                       prompts=prompts, t0_in_prompt=_t0_setting(t0_in_prompt, "auto"),
                       end_tokens=tuple(end_tokens), where="reward_fn")


def make_reward_fn(tokenizer: Any = None, *, url: Any = None, api_key: Optional[str] = None,
                   t0_in_prompt: Any = None, end_tokens: Sequence[str] = (),
                   asynchronous: bool = False):
    """A TRL reward function (`GRPOTrainer(reward_funcs=[make_reward_fn(tokenizer)])`) that
    checks each completion as the model wrote it: from TRL's `completion_ids` decoded by
    `decode_completion` when `tokenizer` is given, else from the decoded text (cut at the
    tokenizer's end token). `t0_in_prompt` defaults to "auto" (TRL passes the prompts);
    `asynchronous=True` gives a coroutine function (TRL runs those concurrently)."""
    option = _t0_setting(t0_in_prompt, "auto")
    ends = tuple(end_tokens) + tuple(tokenizer_end_tokens(tokenizer))

    def batch(prompts, completions, completion_ids, kwargs) -> Dict[str, Any]:
        if tokenizer is not None and completion_ids is not None:
            texts, path = [decode_completion(tokenizer, ids) for ids in completion_ids], "ids"
        else:
            texts, path = [_text(c) for c in completions], "text"
        return dict(completions=texts, infos=_columns(len(texts), kwargs), prompts=prompts,
                    t0_in_prompt=option, end_tokens=ends, where="prod_reward", path=path)

    if asynchronous:
        async def prod_reward_async(prompts: List[Any], completions: List[Any],
                                    completion_ids: Optional[List[List[int]]] = None,
                                    **kwargs: Any) -> List[float]:
            return await score_texts_async(**batch(prompts, completions, completion_ids, kwargs),
                                           url=url, api_key=api_key)
        prod_reward_async.__name__ = "prod_reward"
        return prod_reward_async

    def prod_reward(prompts: List[Any], completions: List[Any],
                    completion_ids: Optional[List[List[int]]] = None,
                    **kwargs: Any) -> List[float]:
        return score_texts(**batch(prompts, completions, completion_ids, kwargs),
                           url=url, api_key=api_key)

    return prod_reward

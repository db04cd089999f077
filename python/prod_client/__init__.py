"""Client for `prod serve` (the ProD checker as an HTTP service) and RL reward functions.

Standard library only. `ProdClient(url, api_key).check(nodes)` returns one `Verdict` per node,
in order; `url` may name several servers (a list, or commas between them): batches are spread
over them, a server that fails is rested while another answers, waits are drawn with jitter
(`prod_client.client`). `AsyncProdClient` (`prod_client.aio`) is the same for asyncio.

`compute_score` / `compute_score_async` (verl), `reward_fn` and `make_reward_fn(tokenizer)`
(TRL) turn completions (conditional proofs) into rewards: 1.0 when locally correct
(`proved`), else 0.0. Nothing that says nothing about the proof is a reward: an `infra`
verdict, or no server answering, raises `InfraError`; a completion that cannot be told apart
from its prompt raises `CompletionNotFound`. What is checked is the completion as the model
wrote it, without its end and padding tokens, with its `t0` put back where the marker was
written into the prompt (`t0_in_prompt`) — `prod_client.reward`. `prod_client.openrlhf`
answers OpenRLHF's remote reward protocol; `prod_client.verl_reward.ProdRewardManager` is
verl's reward manager (it needs verl).
"""

from .aio import AsyncProdClient
from .client import InfraError, ProdClient, ProdError, ServersUnavailable, Verdict
from .reward import (MARKERS, CompletionNotFound, MissingMarkerWarning, compute_score,
                     compute_score_async, decode_completion, make_reward_fn, proof_text,
                     reward_fn)

__version__ = "0.2.0"

__all__ = ["ProdClient", "AsyncProdClient", "Verdict", "ProdError", "InfraError",
           "ServersUnavailable", "CompletionNotFound", "compute_score", "compute_score_async",
           "reward_fn", "make_reward_fn", "decode_completion", "proof_text",
           "MissingMarkerWarning", "MARKERS"]

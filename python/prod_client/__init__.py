"""Client for `prod serve` (the ProD checker as an HTTP service) and RL reward functions.

Standard library only (urllib + json). `ProdClient(url, api_key).check(nodes)` returns one
`Verdict` per node, in order. `compute_score` (verl), `reward_fn` and `make_reward_fn(tokenizer)`
(TRL) turn completions (conditional proofs) into rewards: 1.0 when locally correct (`proved`),
else 0.0. An `infra` verdict says nothing about the proof, so it is never a 0 reward:
`InfraError` is raised (docs/serve.md). `decode_completion(tokenizer, ids)` is a completion's
text with ProD's markers kept whatever the tokenizer marks special; a completion without its
`t0` scores 0 with a `MissingMarkerWarning`. `prod_client.openrlhf` answers OpenRLHF's remote
reward protocol; `prod_client.verl_reward.ProdRewardManager` is verl's reward manager (it needs
verl).
"""

from .client import InfraError, ProdClient, ProdError, Verdict
from .reward import (MARKERS, MissingMarkerWarning, compute_score, decode_completion,
                     make_reward_fn, reward_fn)

__all__ = ["ProdClient", "Verdict", "ProdError", "InfraError", "compute_score", "reward_fn",
           "make_reward_fn", "decode_completion", "MissingMarkerWarning", "MARKERS"]

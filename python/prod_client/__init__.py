"""Client for `prod serve` (the ProD checker as an HTTP service) and RL reward functions.

Standard library only (urllib + json). `ProdClient(url, api_key).check(nodes)` returns one
`Verdict` per node, in order. `compute_score` (verl) and `reward_fn` (TRL) turn completions
(conditional proofs) into rewards: 1.0 when locally correct (`proved`), else 0.0. An `infra`
verdict says nothing about the proof, so it is never a 0 reward: `InfraError` is raised
(docs/serve.md). `prod_client.openrlhf` answers OpenRLHF's remote reward model protocol.
"""

from .client import InfraError, ProdClient, ProdError, Verdict
from .reward import compute_score, reward_fn

__all__ = ["ProdClient", "Verdict", "ProdError", "InfraError", "compute_score", "reward_fn"]

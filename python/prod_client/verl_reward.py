"""verl's reward manager for ProD: each response checked by `prod serve` as the model wrote it.

verl's own reward managers decode a response with `skip_special_tokens=True` before calling
`compute_score`, which deletes ProD's markers wherever the tokenizer marks them special (a
ProD completion then reads as "not a conditional proof" and scores 0). This manager decodes
the response's token ids itself with `prod_client.decode_completion` (ProD's markers kept,
every other special token dropped) and checks it; the sample's `reward_model.ground_truth`
(and `extra_info`) carry the statement, imports and context as for `compute_score`.

    reward.reward_manager.source=importlib
    reward.reward_manager.name=ProdRewardManager
    reward.reward_manager.module.path=pkg://prod_client.verl_reward

The server is `PROD_SERVE_URL` (key `PROD_API_KEY`). The reward is 1.0 for a locally correct
proof, else 0.0, and `reward_extra_info` carries the verdict; an infra verdict raises
`InfraError` (never a 0 reward). Needs verl (written against verl 0.9's reward loop); the rest
of `prod_client` does not.
"""

import os
import sys
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

if __package__:
    from .client import InfraError
    from .reward import _client, _node, _warn_missing_t0, decode_completion, ground_truth_info
else:  # loaded by file path: no parent package for relative imports
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.client import InfraError
    from prod_client.reward import (_client, _node, _warn_missing_t0, decode_completion,
                                    ground_truth_info)


class ProdRewardManager(RewardManagerBase):
    """A verl reward manager whose reward is the ProD checker's verdict on the response ids."""

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None,
                 reward_router_address: Any = None, reward_model_tokenizer: Any = None,
                 **_: Any) -> None:
        # `compute_score` (verl's default or a custom function) is not used: the checker is the
        # reward.
        super().__init__(config, tokenizer, compute_score)

    def _check(self, text: str, info: dict) -> dict:
        _warn_missing_t0([text], "ProdRewardManager")
        (v,) = _client(None, None).check([_node(text, info)])
        if v.infra:
            raise InfraError(f"infra verdict ({v.message}); not a proof failure")
        score = 1.0 if v.proved else 0.0
        return {"reward_score": score,
                "reward_extra_info": {"acc": score, "verdict": v.verdict}}

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1]
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1]:].sum())
        ids = response_ids[:length].tolist()
        ground_truth = item.non_tensor_batch["reward_model"]["ground_truth"]
        info = ground_truth_info(ground_truth, item.non_tensor_batch.get("extra_info", {}))
        text = decode_completion(self.tokenizer, ids)
        return await self.loop.run_in_executor(None, lambda: self._check(text, info))

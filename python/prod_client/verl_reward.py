"""verl's reward manager for ProD: each response checked by `prod serve` as the model wrote it.

verl's own reward managers decode a response with `skip_special_tokens=True` before calling
`compute_score`, which deletes ProD's markers wherever the tokenizer marks them special (a
ProD completion then reads as "not a conditional proof" and scores 0). This manager decodes
the response's token ids itself with `prod_client.decode_completion` (ProD's markers kept,
the end token, padding and every other special token dropped) and checks it; the sample's
`reward_model.ground_truth` (and `extra_info`) carry the statement, imports and context as for
`compute_score`. It sees the prompt's ids too, so `t0_in_prompt="auto"` (its default) puts
back a `<no_invoke>`/`<use_invoke>` the prompt ends with.

    reward.reward_manager.source=importlib
    reward.reward_manager.name=ProdRewardManager
    reward.reward_manager.module.path=pkg://prod_client.verl_reward

Options, as for `compute_score`: `+reward.custom_reward_function.reward_kwargs.KEY=VALUE`
with KEY `url` (servers, commas between several), `api_key`, `t0_in_prompt`; else
`PROD_SERVE_URL`, `PROD_API_KEY`, `PROD_T0_IN_PROMPT`. The reward is 1.0 for a locally correct
proof, else 0.0, and `reward_extra_info` carries the verdict; nothing that says nothing about
the proof is a reward (`InfraError` is raised). The checks are sent with the asyncio client
(`prod_client.aio`) from verl's event loop. Needs verl (written against verl 0.9's reward
loop); the rest of `prod_client` does not.
"""

import os
import sys
from typing import Any, Dict, Optional

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

if __package__:
    from .reward import (Batch, _async_client, _t0_setting, decode_completion,
                         ground_truth_info, tokenizer_end_tokens)
else:  # loaded by file path: no parent package for relative imports
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from prod_client.reward import (Batch, _async_client, _t0_setting, decode_completion,
                                    ground_truth_info, tokenizer_end_tokens)

#: Tokens of the prompt's end decoded to look for a `t0` there.
_PROMPT_TAIL_TOKENS = 8


def _reward_kwargs(config: Any) -> Dict[str, Any]:
    """`reward.custom_reward_function.reward_kwargs` of verl's config ({} when absent)."""
    try:
        fn = config.reward.get("custom_reward_function") or {}
        return dict(fn.get("reward_kwargs") or {})
    except AttributeError:
        return {}


class ProdRewardManager(RewardManagerBase):
    """A verl reward manager whose reward is the ProD checker's verdict on the response ids."""

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None,
                 reward_router_address: Any = None, reward_model_tokenizer: Any = None,
                 **_: Any) -> None:
        # `compute_score` (verl's default or a custom function) is not used: the checker is the
        # reward.
        super().__init__(config, tokenizer, compute_score)
        kw = _reward_kwargs(config)
        self.url: Optional[Any] = kw.get("url")
        self.api_key: Optional[str] = kw.get("api_key")
        self.t0_in_prompt = _t0_setting(kw.get("t0_in_prompt"), "auto")
        self.end_tokens = tuple(kw.get("end_tokens") or ()) + tuple(
            tokenizer_end_tokens(tokenizer))

    def _prompt_tail(self, item: Any) -> str:
        """The last few tokens of the sample's prompt, as text with ProD's markers kept."""
        prompt_ids = item.batch["prompts"]
        mask = item.batch["attention_mask"][:prompt_ids.shape[-1]]
        ids = prompt_ids[mask.bool()].tolist()[-_PROMPT_TAIL_TOKENS:]
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    async def run_single(self, data: DataProto) -> dict:
        item = data[-1]
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1]:].sum())
        text = decode_completion(self.tokenizer, response_ids[:length].tolist())
        ground_truth = item.non_tensor_batch["reward_model"]["ground_truth"]
        info = ground_truth_info(ground_truth, item.non_tensor_batch.get("extra_info", {}))
        prompt = self._prompt_tail(item) if self.t0_in_prompt in ("auto", None) else None
        batch = Batch([text], [info], prompts=None if prompt is None else [prompt],
                      t0_in_prompt=self.t0_in_prompt, end_tokens=self.end_tokens,
                      where="ProdRewardManager", path="ids")
        (v,) = await _async_client(self.url, self.api_key).check(batch.nodes)
        (score,) = Batch.rewards([v])  # raises InfraError: never a 0
        return {"reward_score": score,
                "reward_extra_info": {"acc": score, "verdict": v.verdict}}

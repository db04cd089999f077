"""ProD's rewards inside the real RL frameworks, against a live `prod serve` (real Coq).

Run by crates/prod-cli/tests/cli_rl_frameworks.rs with the interpreter of the RL venv
(python/requirements-rl.txt: torch, transformers, TRL, verl, OpenRLHF), which starts the server
and sets PROD_SERVE_URL / PROD_API_KEY.

* TRL: `GRPOTrainer` trains a tiny Llama for a few steps on the CPU with
  `prod_client.make_reward_fn(tokenizer)` as its reward. The tokenizer marks ProD's markers
  special, the case where TRL's own decode deletes them; the rewards TRL logs must be the
  checker's verdicts on what the model wrote (1.0 for the proofs Coq accepts, 0.0 for the
  others), and the same texts as TRL decodes them must score 0 with a `MissingMarkerWarning`.
* verl: the reward worker of verl's reward loop (`RewardLoopWorker`, the class verl's trainer
  runs as a Ray actor; here in-process) loads ProD's reward from verl's own config
  (`ppo_trainer.yaml` composed by Hydra): `custom_reward_function.path` = prod_client's
  reward.py (a file path, as documented) and, for tokenizers that mark the markers special,
  `reward_manager` = `prod_client.verl_reward.ProdRewardManager` (`pkg://`).
* OpenRLHF: its rollout executor (`SingleTurnAgentExecutor`: decode, then the remote reward
  request) against `python -m prod_client.openrlhf`, and its Python-file reward path.

The tiny model is trained here in a few seconds to write three completions (two correct, one
wrong), so that sampling produces both rewards; nothing is downloaded.
"""

import asyncio
import json
import os
import tempfile
import threading
import unittest
import warnings

URL = os.environ.get("PROD_SERVE_URL")
KEY = os.environ.get("PROD_API_KEY")
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IMPORTS = "From Coq Require Import Arith Lia."
STATEMENT = "Lemma plus_0 : forall n : nat, n + 0 = n."
PROMPT = STATEMENT + "\n"  # ProD's prompt without a context: "{statement}\n"
CORRECT = "<no_invoke> intros n. lia."
CORRECT_INVOKE = ("<use_invoke> intros n. <invoke> Lemma l0 : forall m : nat, m + 0 = m. "
                  "</invoke> apply l0.")
WRONG = "<no_invoke> reflexivity."
COMPLETIONS = [CORRECT, CORRECT_INVOKE, WRONG]
MARKERS = ["<use_invoke>", "<no_invoke>", "<invoke>", "</invoke>", "<true>", "<false>"]
END = "<|endoftext|>"


def build_tokenizer(directory, markers_special=True):
    """A byte-level BPE tokenizer like the ones prod trains, with ProD's six markers added as
    special tokens (`markers_special`, the case trainers' decoding strips) or as the plain
    tokens model folders written by prod carry."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[END], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([PROMPT + c for c in COMPLETIONS] * 4, trainer)
    tok.add_tokens([AddedToken(m, special=markers_special, normalized=False) for m in MARKERS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=END)
    if markers_special:
        fast.add_special_tokens({"additional_special_tokens": MARKERS})
    fast.chat_template = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
    fast.save_pretrained(directory)
    return fast


def train_tiny_model(tok, directory, steps=150):
    """A tiny Llama taught to answer PROMPT with each of COMPLETIONS about equally often."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, bos_token_id=None,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    prompt = tok(PROMPT, add_special_tokens=False)["input_ids"]
    rows = []
    for c in COMPLETIONS:
        completion = tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((prompt + completion, [-100] * len(prompt) + completion))
    width = max(len(r[0]) for r in rows)
    ids = torch.tensor([r[0] + [tok.pad_token_id] * (width - len(r[0])) for r in rows])
    labels = torch.tensor([r[1] + [-100] * (width - len(r[1])) for r in rows])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(directory)
    tok.save_pretrained(directory)
    return model


def verdicts(texts):
    """The checker's rewards for `texts`, asked directly (not through a framework)."""
    from prod_client import ProdClient
    vs = ProdClient(URL, api_key=KEY).check(
        [{"id": i, "imports": IMPORTS, "statement": STATEMENT, "proof": t}
         for i, t in enumerate(texts)])
    return [1.0 if v.proved else 0.0 for v in vs]


@unittest.skipUnless(URL, "PROD_SERVE_URL not set (no live server)")
class Trl(unittest.TestCase):
    def test_grpo_logs_the_checkers_rewards(self):
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        import torch
        from prod_client import MissingMarkerWarning, decode_completion, make_reward_fn
        from prod_client.reward import reward_fn

        torch.set_num_threads(1)  # a shared 2-core machine: more threads only contend

        tmp = tempfile.mkdtemp(prefix="prod-trl-")
        tok = build_tokenizer(os.path.join(tmp, "tok"))
        train_tiny_model(tok, os.path.join(tmp, "model"))
        reward = make_reward_fn(tok, url=URL, api_key=KEY)
        seen = []  # per reward call: (texts as the model wrote them, TRL's texts, rewards)

        def prod_reward(prompts, completions, completion_ids, **kwargs):
            rewards = reward(prompts, completions, completion_ids=completion_ids, **kwargs)
            texts = [decode_completion(tok, ids) for ids in completion_ids]
            seen.append((texts, list(completions), rewards))
            return rewards

        data = Dataset.from_list([{"prompt": PROMPT, "statement": STATEMENT,
                                   "imports": IMPORTS, "context": ""}] * 16)
        args = GRPOConfig(output_dir=os.path.join(tmp, "out"), per_device_train_batch_size=8,
                          num_generations=8, max_completion_length=40, max_steps=3,
                          logging_steps=1, learning_rate=1e-5, beta=0.0, temperature=1.0,
                          use_cpu=True, bf16=False, report_to="none", save_strategy="no",
                          seed=0, dataloader_num_workers=0)
        trainer = GRPOTrainer(model=os.path.join(tmp, "model"), reward_funcs=prod_reward,
                              args=args, train_dataset=data, processing_class=tok)
        trainer.train()

        logged = [h for h in trainer.state.log_history if "reward" in h]
        self.assertEqual(len(logged), 3, trainer.state.log_history)
        self.assertEqual(len(seen), 3)
        all_rewards = []
        for h, (texts, trl_texts, rewards) in zip(logged, seen):
            # The rewards are the checker's verdicts on the completions as written ...
            self.assertEqual(rewards, verdicts(texts), texts)
            for t, r in zip(texts, rewards):
                if t in (CORRECT, CORRECT_INVOKE, WRONG):
                    self.assertEqual(r, 0.0 if t == WRONG else 1.0, t)
            # ... and what TRL logs is their mean.
            self.assertAlmostEqual(h["reward"], sum(rewards) / len(rewards), places=5)
            self.assertAlmostEqual(h["rewards/prod_reward/mean"], h["reward"], places=5)
            # TRL's own decoded texts have lost the markers: scored from them, every reward is
            # 0, with a warning instead of silence.
            self.assertFalse(any(t.lstrip().startswith(("<no_invoke>", "<use_invoke>"))
                                 for t in trl_texts), trl_texts)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                stripped = reward_fn([PROMPT] * len(trl_texts), trl_texts,
                                     statement=[STATEMENT] * len(trl_texts),
                                     imports=[IMPORTS] * len(trl_texts), url=URL, api_key=KEY)
            self.assertEqual(stripped, [0.0] * len(trl_texts))
            self.assertTrue(any(issubclass(x.category, MissingMarkerWarning) for x in w))
            all_rewards += rewards
        self.assertIn(1.0, all_rewards)
        self.assertIn(0.0, all_rewards)
        self.assertTrue(any(CORRECT_INVOKE in texts for texts, _, _ in seen),
                        "no completion proposed a lemma")


def _dataproto(tok, responses, ground_truth):
    """A verl batch of one prompt and `responses` (texts), as the rollout hands it over."""
    import numpy as np
    import torch
    from verl import DataProto

    prompt = tok(PROMPT, add_special_tokens=False)["input_ids"]
    resp = [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            for r in responses]
    width = max(len(r) for r in resp) + 2  # padding after each response
    n = len(responses)
    prompts = torch.tensor([prompt] * n)
    responses_t = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in resp])
    mask = torch.tensor([[1] * len(prompt) + [1] * len(r) + [0] * (width - len(r))
                         for r in resp])
    gt = json.dumps(ground_truth)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses_t,
                 "input_ids": torch.cat([prompts, responses_t], dim=1),
                 "attention_mask": mask},
        non_tensors={"data_source": np.array(["prod/test"] * n, dtype=object),
                     "reward_model": np.array([{"ground_truth": gt, "style": "rule"}] * n,
                                              dtype=object),
                     "extra_info": np.array([{"index": i} for i in range(n)], dtype=object)})


def _verl_config(model_dir, overrides):
    """verl's own trainer config (ppo_trainer.yaml, composed by Hydra) with `overrides`."""
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={model_dir}"] + overrides)


@unittest.skipUnless(URL, "PROD_SERVE_URL not set (no live server)")
class Verl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="prod-verl-")

    def _scores(self, markers_special, overrides):
        from verl.experimental.reward_loop import RewardLoopWorker

        d = os.path.join(self.tmp, "special" if markers_special else "plain")
        tok = build_tokenizer(d, markers_special)
        worker = RewardLoopWorker(_verl_config(d, overrides))
        data = _dataproto(tok, COMPLETIONS, {"statement": STATEMENT, "imports": IMPORTS})
        # The worker's own event loop (verl's `get_event_loop`), as in its Ray actor.
        out = worker.loop.run_until_complete(worker.compute_score_batch(data))
        return [o["reward_score"] for o in out], worker

    def test_documented_file_path_with_a_prod_tokenizer(self):
        # `custom_reward_function.path` as a file path: verl loads it outside its package.
        path = os.path.join(PYTHON_DIR, "prod_client", "reward.py")
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        scores, _ = self._scores(False, [f"reward.custom_reward_function.path={path}",
                                         "reward.custom_reward_function.name=compute_score"])
        self.assertEqual(scores, verdicts(COMPLETIONS))
        self.assertEqual(scores, [1.0, 1.0, 0.0])

    def test_reward_manager_keeps_special_markers(self):
        import prod_client.reward as reward
        # verl's own manager + compute_score: the special markers are stripped by its decode:
        # every completion scores 0, and a warning says why.
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            scores, _ = self._scores(True, [
                "reward.custom_reward_function.path=pkg://prod_client.reward",
                "reward.custom_reward_function.name=compute_score"])
        self.assertEqual(scores, [0.0, 0.0, 0.0])
        self.assertTrue(any(issubclass(x.category, reward.MissingMarkerWarning) for x in w))
        # ProD's reward manager decodes the ids itself: the checker's verdicts.
        scores, worker = self._scores(True, [
            "reward.reward_manager.source=importlib",
            "reward.reward_manager.name=ProdRewardManager",
            "reward.reward_manager.module.path=pkg://prod_client.verl_reward"])
        self.assertEqual(type(worker.reward_manager).__name__, "ProdRewardManager")
        self.assertEqual(scores, verdicts(COMPLETIONS))
        self.assertEqual(scores, [1.0, 1.0, 0.0])


class _Completion:
    def __init__(self, ids):
        self.token_ids, self.finish_reason, self.logprobs = ids, "stop", None


class _Output:
    def __init__(self, ids):
        self.outputs = [_Completion(ids)]


class _FixedEngine:
    """Stands in for the vLLM engine (no GPU here): answers each prompt with fixed token ids
    (a completion and the end token), as vLLM returns them."""

    def __init__(self, ids):
        self.ids = ids

    async def generate(self, prompt_token_ids, params, multi_modal_data=None):
        return _Output(self.ids)


class _Params:
    max_tokens, logprobs = 64, None


@unittest.skipUnless(URL, "PROD_SERVE_URL not set (no live server)")
class OpenRlhf(unittest.TestCase):
    def _rewards(self, endpoint):
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        tok = build_tokenizer(tempfile.mkdtemp(prefix="prod-openrlhf-"), True)
        label = json.dumps({"statement": STATEMENT, "imports": IMPORTS})
        executor = SingleTurnAgentExecutor(endpoint)
        out = []
        for c in COMPLETIONS:
            ids = tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            r = asyncio.run(executor.execute(PROMPT, label, _Params(), 256, tok,
                                             _FixedEngine(ids)))
            out.append(r["reward"])
        return out

    def test_remote_reward_server(self):
        from prod_client import openrlhf
        server = openrlhf.serve(0, URL, KEY)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            port = server.server_address[1]
            got = self._rewards(f"http://127.0.0.1:{port}/get_reward")
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(got, [[r] for r in verdicts(COMPLETIONS)])
        self.assertEqual(got, [[1.0], [1.0], [0.0]])

    def test_python_file_reward(self):
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        got = self._rewards(os.path.join(PYTHON_DIR, "prod_client", "openrlhf.py"))
        self.assertEqual(got, [[1.0], [1.0], [0.0]])


if __name__ == "__main__":
    unittest.main()

"""ProD's rewards inside the real RL frameworks, against live `prod serve` servers (real Coq).

Run by crates/prod-cli/tests/cli/cli_rl_frameworks.rs with the interpreter of the RL venv
(python/requirements-rl.txt: torch, transformers, TRL, verl, OpenRLHF), which starts two
servers and sets PROD_SERVE_URL / PROD_API_KEY (the first) and PROD_SERVE_URL_B /
PROD_SERVE_PID_B (the second, which one test kills).

* TRL: `GRPOTrainer` trains a tiny Llama for a few steps on the CPU with
  `prod_client.make_reward_fn(tokenizer)` as its reward. The tokenizer marks ProD's markers
  special, the case where TRL's own decode deletes them; the rewards TRL logs must be the
  checker's verdicts on what the model wrote (1.0 for the proofs Coq accepts, 0.0 for the
  others), and the same texts as TRL decodes them must score 0 with a `MissingMarkerWarning`.
  A second run has the `<no_invoke>` in the prompt (the model writes only the proof) and its
  reward, async and spread over both servers, loses nothing when the second server is killed
  while it checks.
* verl: the reward worker of verl's reward loop (`RewardLoopWorker`, the class verl's trainer
  runs as a Ray actor; here in-process) loads ProD's reward from verl's own config
  (`ppo_trainer.yaml` composed by Hydra): `custom_reward_function.path` = prod_client's
  reward.py (a file path, as documented), with responses that end in a plain `<|im_end|>`,
  and `compute_score_async` with the marker in the prompt (`reward_kwargs.t0_in_prompt`); for
  tokenizers that mark the markers special, `reward_manager` =
  `prod_client.verl_reward.ProdRewardManager` (`pkg://`), which also finds a marker at the
  prompt's end itself.
* OpenRLHF: its rollout executor (`SingleTurnAgentExecutor`: tokenize, cut the prompt from the
  left to its budget, generate, decode, then the remote reward request) against
  `python -m prod_client.openrlhf` and its Python-file reward path, with whole and cut prompts,
  and with the marker in the prompt.

The tiny models are trained here in a few seconds to write three completions (two correct, one
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
IM_END = "<|im_end|>"  # a turn token some tokenizers keep as plain text
# The marker in the prompt: the model writes the proof after it.
PROMPT_T0 = PROMPT + "<no_invoke>"
AFTER_T0 = [" intros n. lia.", " intros n. rewrite <- plus_n_O. reflexivity.", " reflexivity."]
# A context long enough for OpenRLHF to cut the prompt from the left.
CONTEXT = "".join(f"Definition unused_{i} := {i}.\n" for i in range(40))
LONG_PROMPT = CONTEXT + "\n" + PROMPT


def build_tokenizer(directory, markers_special=True, texts=None):
    """A byte-level BPE tokenizer like the ones prod trains, with ProD's six markers added as
    special tokens (`markers_special`, the case trainers' decoding strips) or as the plain
    tokens model folders written by prod carry, and `<|im_end|>` as a plain added token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[END], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts or [PROMPT + c for c in COMPLETIONS] * 4, trainer)
    tok.add_tokens([AddedToken(m, special=markers_special, normalized=False) for m in MARKERS])
    tok.add_tokens([AddedToken(IM_END, special=False, normalized=False)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=END, pad_token=END)
    if markers_special:
        fast.add_special_tokens({"additional_special_tokens": MARKERS})
    fast.chat_template = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
    fast.save_pretrained(directory)
    return fast


def train_tiny_model(tok, directory, steps=150, prompt_text=PROMPT, completions=COMPLETIONS):
    """A tiny Llama taught to answer `prompt_text` with each of `completions` about equally
    often."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, bos_token_id=None,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    prompt = tok(prompt_text, add_special_tokens=False)["input_ids"]
    rows = []
    for c in completions:
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


    def test_marker_in_prompt_async_reward_over_two_servers_one_killed(self):
        # The `<no_invoke>` ends the prompt and the model writes the proof after it; the async
        # reward spreads each batch over two servers, and the second is killed (SIGKILL) while
        # the second batch is being checked: every reward is still the checker's verdict.
        import signal
        import urllib.request

        import torch
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        import prod_client.reward as reward_module
        from prod_client import decode_completion, make_reward_fn

        url_b, pid_b = os.environ.get("PROD_SERVE_URL_B"), os.environ.get("PROD_SERVE_PID_B")
        self.assertTrue(url_b and pid_b, "PROD_SERVE_URL_B / PROD_SERVE_PID_B not set")
        torch.set_num_threads(1)
        tmp = tempfile.mkdtemp(prefix="prod-trl-t0-")
        tok = build_tokenizer(os.path.join(tmp, "tok"),
                              texts=[PROMPT_T0 + c for c in AFTER_T0] * 4)
        train_tiny_model(tok, os.path.join(tmp, "model"), prompt_text=PROMPT_T0,
                         completions=AFTER_T0)
        urls = [URL, url_b]
        reward = make_reward_fn(tok, url=urls, api_key=KEY, asynchronous=True)
        seen, b_checks = [], []

        def checks_of_b():
            req = urllib.request.Request(url_b + "/metrics",
                                         headers={"Authorization": f"Bearer {KEY}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return sum(float(line.rsplit(" ", 1)[1]) for line in r.read().decode().splitlines()
                           if line.startswith("prod_checks_total"))

        async def prod_reward(prompts, completions, completion_ids, **kwargs):
            if len(seen) == 1:
                b_checks.append(checks_of_b())  # b took its share of the first batch
                threading.Timer(0.2, os.kill, (int(pid_b), signal.SIGKILL)).start()
            rewards = await reward(prompts, completions, completion_ids=completion_ids, **kwargs)
            seen.append(([decode_completion(tok, ids) for ids in completion_ids], rewards))
            return rewards

        data = Dataset.from_list([{"prompt": PROMPT_T0, "statement": STATEMENT,
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
        self.assertEqual((len(logged), len(seen)), (3, 3), trainer.state.log_history)
        self.assertGreater(b_checks[0], 0)
        all_rewards = []
        for h, (texts, rewards) in zip(logged, seen):
            # The model wrote no t0: the reward checked each proof after the prompt's marker.
            self.assertFalse(any(t.lstrip().startswith("<") for t in texts), texts)
            self.assertEqual(rewards, verdicts(["<no_invoke>" + t for t in texts]), texts)
            for t, r in zip(texts, rewards):
                if t in AFTER_T0:
                    self.assertEqual(r, 0.0 if t == AFTER_T0[2] else 1.0, t)
            self.assertAlmostEqual(h["reward"], sum(rewards) / len(rewards), places=5)
            all_rewards += rewards
        self.assertIn(1.0, all_rewards)
        self.assertIn(0.0, all_rewards)
        # The second server was down from the second batch on, and the client knew it.
        client = reward_module._async_client(urls, KEY)
        self.assertGreater(client.servers._failures[url_b], 0)
        with self.assertRaises(OSError):
            checks_of_b()


def _dataproto(tok, responses, ground_truth, prompt_text=PROMPT):
    """A verl batch of one prompt and `responses` (texts), as the rollout hands it over."""
    import numpy as np
    import torch
    from verl import DataProto

    prompt = tok(prompt_text, add_special_tokens=False)["input_ids"]
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

    def _scores(self, markers_special, overrides, prompt=PROMPT, responses=COMPLETIONS):
        from verl.experimental.reward_loop import RewardLoopWorker

        d = os.path.join(self.tmp, "special" if markers_special else "plain")
        tok = build_tokenizer(d, markers_special)
        worker = RewardLoopWorker(_verl_config(d, overrides))
        data = _dataproto(tok, responses, {"statement": STATEMENT, "imports": IMPORTS}, prompt)
        # The worker's own event loop (verl's `get_event_loop`), as in its Ray actor.
        out = worker.loop.run_until_complete(worker.compute_score_batch(data))
        return [o["reward_score"] for o in out], worker

    def test_documented_file_path_with_a_prod_tokenizer(self):
        # `custom_reward_function.path` as a file path: verl loads it outside its package.
        path = os.path.join(PYTHON_DIR, "prod_client", "reward.py")
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        overrides = [f"reward.custom_reward_function.path={path}",
                     "reward.custom_reward_function.name=compute_score"]
        scores, _ = self._scores(False, overrides)
        self.assertEqual(scores, verdicts(COMPLETIONS))
        self.assertEqual(scores, [1.0, 1.0, 0.0])
        # A turn token the tokenizer keeps as text (verl's decode leaves it at the end of the
        # response) is cut before checking: it was a 0 for every proof.
        scores, _ = self._scores(False, overrides, responses=[c + IM_END for c in COMPLETIONS])
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
        scores, worker = self._scores(True, MANAGER)
        self.assertEqual(type(worker.reward_manager).__name__, "ProdRewardManager")
        self.assertEqual(scores, verdicts(COMPLETIONS))
        self.assertEqual(scores, [1.0, 1.0, 0.0])

    def test_marker_in_the_prompt(self):
        expected = verdicts(["<no_invoke>" + c for c in AFTER_T0])
        self.assertEqual(expected, [1.0, 1.0, 0.0])
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        # compute_score is not given the prompt: the option names the marker (verl's
        # reward_kwargs), here with the async function verl's reward loop awaits.
        scores, _ = self._scores(False, [
            "reward.custom_reward_function.path=pkg://prod_client.reward",
            "reward.custom_reward_function.name=compute_score_async",
            "+reward.custom_reward_function.reward_kwargs.t0_in_prompt=no_invoke"],
            prompt=PROMPT_T0, responses=AFTER_T0)
        self.assertEqual(scores, expected)
        # Without it, a 0 for every proof: the option is what makes them count.
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            scores, _ = self._scores(False, [
                "reward.custom_reward_function.path=pkg://prod_client.reward",
                "reward.custom_reward_function.name=compute_score"],
                prompt=PROMPT_T0, responses=AFTER_T0)
        self.assertEqual(scores, [0.0, 0.0, 0.0])
        # ProD's reward manager reads the marker off the prompt's ids (its default, "auto").
        scores, _ = self._scores(True, MANAGER, prompt=PROMPT_T0, responses=AFTER_T0)
        self.assertEqual(scores, expected)


MANAGER = ["reward.reward_manager.source=importlib",
           "reward.reward_manager.name=ProdRewardManager",
           "reward.reward_manager.module.path=pkg://prod_client.verl_reward"]


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
    def _rewards(self, endpoint, prompt=PROMPT, completions=COMPLETIONS, context="",
                 max_length=256):
        """OpenRLHF's rewards of `completions` to `prompt`, and whether it cut the prompt."""
        from openrlhf.utils.agent import SingleTurnAgentExecutor

        tok = build_tokenizer(tempfile.mkdtemp(prefix="prod-openrlhf-"), True)
        label = json.dumps({"statement": STATEMENT, "imports": IMPORTS, "context": context})
        executor = SingleTurnAgentExecutor(endpoint)
        whole = len(tok(prompt, add_special_tokens=False)["input_ids"])
        out, cut = [], []
        for c in completions:
            ids = tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            r = asyncio.run(executor.execute(prompt, label, _Params(), max_length, tok,
                                             _FixedEngine(ids)))
            out.append(r["reward"])
            cut.append(len(r["observation_tokens"]) < whole + len(ids))
        return out, cut

    def _server(self):
        from prod_client import openrlhf
        server = openrlhf.serve(0, URL, KEY)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return f"http://127.0.0.1:{server.server_address[1]}/get_reward"

    def test_remote_reward_server(self):
        got, cut = self._rewards(self._server())
        self.assertEqual(got, [[r] for r in verdicts(COMPLETIONS)])
        self.assertEqual(got, [[1.0], [1.0], [0.0]])
        self.assertEqual(cut, [False] * 3)

    def test_python_file_reward(self):
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        got, _ = self._rewards(os.path.join(PYTHON_DIR, "prod_client", "openrlhf.py"))
        self.assertEqual(got, [[1.0], [1.0], [0.0]])

    def test_prompt_cut_from_the_left(self):
        # A 48-token budget for a prompt of a few hundred: OpenRLHF keeps its last 48 tokens.
        # The completion is found after the prompt's end, not by stripping the whole prompt.
        os.environ["PROD_SERVE_URL"], os.environ["PROD_API_KEY"] = URL, KEY or ""
        for endpoint in (self._server(), os.path.join(PYTHON_DIR, "prod_client", "openrlhf.py")):
            got, cut = self._rewards(endpoint, LONG_PROMPT, context=CONTEXT,
                                     max_length=_Params.max_tokens + 48)
            self.assertEqual(cut, [True] * 3)
            self.assertEqual(got, [[1.0], [1.0], [0.0]], endpoint)

    def test_marker_in_the_prompt(self):
        # The prompt ends with <no_invoke>, the model writes the proof after it; whole and cut.
        for prompt, context, max_length in ((PROMPT_T0, "", 256),
                                            (CONTEXT + "\n" + PROMPT_T0, CONTEXT,
                                             _Params.max_tokens + 48)):
            got, cut = self._rewards(self._server(), prompt, AFTER_T0, context, max_length)
            self.assertEqual(cut, [max_length < 256] * 3)
            self.assertEqual(got, [[1.0], [1.0], [0.0]], prompt[-30:])


if __name__ == "__main__":
    unittest.main()

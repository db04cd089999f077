"""The RL commands of docs/serve.md as written, against the pinned frameworks (the RL venv).

Nothing here trains (that needs GPUs); each command is checked as far as it can be without one:
verl's overrides composed by Hydra into verl's own `ppo_trainer` config (a key that does not
exist fails there) and ProD's reward function loaded from the result as verl loads it;
OpenRLHF's flags against the argument parser of the installed `openrlhf.cli.train_ppo_ray`
(read from its source: importing it needs DeepSpeed and CUDA); the TRL block's `GRPOConfig(…)`
built; `python -m prod_client.openrlhf`'s flags parsed; and, when `PROD_BIN` names the `prod`
binary, each `prod …` command's flags looked up in its `--help`. Run by
crates/prod-cli/tests/cli/cli_rl_frameworks.rs.
"""

import ast
import os
import re
import shlex
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "serve.md")


def doc():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def blocks(lang):
    """The fenced code blocks of docs/serve.md in `lang`."""
    text = doc()
    return re.findall(r"```" + lang + r"\n(.*?)```", text, flags=re.S)


def commands(marker):
    """Each command line (continuations joined) of the sh blocks that contains `marker`, as
    words after the marker."""
    out = []
    for b in blocks("sh"):
        for line in b.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].rstrip(" &")
            if marker in line:
                out.append(shlex.split(line.split(marker, 1)[1]))
    return out


def openrlhf_flags():
    """The flags `openrlhf.cli.train_ppo_ray` defines (its `add_argument` calls)."""
    import importlib.util
    spec = importlib.util.find_spec("openrlhf.cli.train_ppo_ray")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    return flags


class Docs(unittest.TestCase):
    def test_verl_command_composes_and_loads_the_reward(self):
        import verl
        from hydra import compose, initialize_config_dir
        from verl.trainer.ppo.reward import get_custom_reward_fn

        (words,) = commands("python3 -m verl.trainer.main_ppo")
        overrides = [w for w in words if "=" in w]
        self.assertTrue(any(o.startswith("data.max_prompt_length=") for o in overrides))
        config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=overrides)
        self.assertEqual(cfg.data.max_prompt_length, 1024)
        fn_cfg = cfg.reward.custom_reward_function
        self.assertEqual(list(fn_cfg.reward_kwargs.url),
                         ["http://10.0.0.1:8537", "http://10.0.0.2:8537"])
        fn = get_custom_reward_fn(cfg)
        self.assertIsNotNone(fn)
        import inspect
        self.assertTrue(inspect.iscoroutinefunction(fn))  # compute_score_async, awaited

    def test_openrlhf_command_uses_flags_that_exist(self):
        known = openrlhf_flags()
        self.assertIn("--reward.remote_url", known)  # the parser was read
        (words,) = commands("python3 -m openrlhf.cli.train_ppo_ray")
        used = [w for w in words if w.startswith("--")]
        self.assertGreater(len(used), 5)
        self.assertEqual([f for f in used if f not in known], [])
        # The prose names no flag the parser lacks either (0.11 renamed them all).
        text = doc()
        section = text.split("### OpenRLHF", 1)[1].split("\n### ", 1)[0]
        prose = set(re.findall(r"`(--[a-z_.]+)", section)) - {"--end-token", "--t0-in-prompt",
                                                              "--prod-url", "--port"}
        self.assertEqual(sorted(prose - known), [])

    def test_reward_server_command_parses(self):
        from prod_client import openrlhf
        for words in commands("python3 -m prod_client.openrlhf"):
            a = openrlhf.parser().parse_args(words)
            self.assertGreater(len(a.prod_url.split(",")), 1)

    def test_trl_block_builds_its_config(self):
        from trl import GRPOConfig
        (block,) = [b for b in blocks("python") if "GRPOConfig(" in b]
        call = next(n for n in ast.walk(ast.parse(block)) if isinstance(n, ast.Call)
                    and getattr(n.func, "id", "") == "GRPOConfig")
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        kwargs["output_dir"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), "prod-docs-grpo")
        args = GRPOConfig(use_cpu=True, bf16=False, report_to="none", **kwargs)
        self.assertEqual(args.max_completion_length, 1024)

    @unittest.skipUnless(os.environ.get("PROD_BIN"), "PROD_BIN not set")
    def test_prod_commands_use_flags_that_exist(self):
        prod = os.environ["PROD_BIN"]
        seen = 0
        for words in commands("prod dataset export"):
            flags = [w for w in words if w.startswith("--")]
            help_text = subprocess.run([prod, "dataset", "export", "--help"], check=True,
                                       capture_output=True, text=True).stdout
            self.assertEqual([f for f in flags if f not in help_text], [], words)
            seen += 1
        self.assertGreaterEqual(seen, 3)


if __name__ == "__main__":
    unittest.main()

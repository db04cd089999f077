"""prod_client against a live `prod serve` (PROD_SERVE_URL, PROD_API_KEY); run by
crates/prod-cli/tests/cli/cli_serve.rs, which starts the server with the real Coq."""

import json
import os
import unittest

from prod_client import (InfraError, MissingMarkerWarning, ProdClient, ProdError, Verdict,
                         compute_score, decode_completion, reward_fn)
from prod_client.reward import _node, _score

URL = os.environ.get("PROD_SERVE_URL")
KEY = os.environ.get("PROD_API_KEY")
IMPORTS = "From Coq Require Import Arith Lia."
STATEMENT = "Lemma plus_0 : forall n : nat, n + 0 = n."


@unittest.skipUnless(URL, "PROD_SERVE_URL not set (no live server)")
class LiveServer(unittest.TestCase):
    def test_check_honest_and_cheat(self):
        c = ProdClient(URL, api_key=KEY)
        self.assertEqual(c.health()["status"], "ok")
        vs = c.check([
            {"id": "a", "imports": IMPORTS, "statement": STATEMENT, "proof": "<no_invoke> intros n. lia."},
            {"id": "b", "imports": IMPORTS, "statement": "Lemma c : 1 = 2.", "proof": "<no_invoke> admit."},
        ])
        self.assertEqual([v.verdict for v in vs], ["proved", "failed"])
        self.assertTrue(vs[0].proved and not vs[1].proved)

    def test_errors_are_raised(self):
        with self.assertRaises(ProdError) as e:
            ProdClient(URL, api_key="wrong").check([])
        self.assertEqual(e.exception.status, 401)
        with self.assertRaises(ProdError) as e:
            ProdClient(URL, api_key=KEY).check(
                [{"id": 1, "statement": "s", "proof": "p", "contxt": ""}])
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(e.exception.body["field"], "contxt")
        self.assertIn("did you mean `context`?", e.exception.body["error"])

    def test_own_fields_pass_through(self):
        out = ProdClient(URL, api_key=KEY)._request("POST", "/v1/check", {"nodes": [
            {"id": "a", "custom_id": "k-1", "imports": [IMPORTS], "statement": STATEMENT,
             "proof": "<no_invoke> intros n. lia."}]})
        r = out["results"][0]
        self.assertEqual((r["id"], r["custom_id"], r["verdict"]), ("a", "k-1", "proved"))

    def test_rewards(self):
        gt = {"statement": STATEMENT, "imports": IMPORTS}
        self.assertEqual(compute_score("prod", "<no_invoke> intros n. lia.", gt, url=URL, api_key=KEY), 1.0)
        self.assertEqual(compute_score("prod", "<no_invoke> admit.", gt, url=URL, api_key=KEY), 0.0)
        with self.assertWarns(MissingMarkerWarning):
            self.assertEqual(compute_score("prod", "no markers", gt, url=URL, api_key=KEY), 0.0)
        r = reward_fn(["p", "p"], ["<no_invoke> intros n. lia.", "<no_invoke> reflexivity."],
                      statement=[STATEMENT] * 2, imports=[IMPORTS] * 2, url=URL, api_key=KEY)
        self.assertEqual(r, [1.0, 0.0])


    def test_assemble(self):
        c = ProdClient(URL, api_key=KEY)
        lemma = "Lemma p0 : forall n : nat, n + 0 = n."
        a = c.assemble([
            {"id": "r", "imports": IMPORTS, "statement": "Lemma r : forall n : nat, 0 + n = n + 0.",
             "proof": f"<use_invoke> <invoke> {lemma} </invoke> intros n. rewrite p0. reflexivity."},
            {"id": "p0", "imports": IMPORTS, "statement": lemma, "proof": "<no_invoke> intros n. lia."},
        ])
        self.assertIs(a["proved"], True)
        self.assertIn("Lemma r", a["assembled"])

    def test_openrlhf_endpoint(self):
        import threading
        import urllib.request
        from prod_client import openrlhf
        server = openrlhf.serve(0, URL, KEY)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            port = server.server_address[1]
            label = json.dumps({"statement": STATEMENT, "imports": IMPORTS})
            body = {"query": ["PROMPT<no_invoke> intros n. lia.", "PROMPT<no_invoke> admit."],
                    "prompts": ["PROMPT", "PROMPT"], "labels": [label, label]}
            req = urllib.request.Request(f"http://127.0.0.1:{port}/get_reward",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                self.assertEqual(json.loads(r.read())["rewards"], [1.0, 0.0])
        finally:
            server.shutdown()
            server.server_close()


class _Tok:
    """The three methods `decode_completion` uses, over a fixed vocabulary."""
    vocab = ["<|endoftext|>", "<no_invoke>", "<use_invoke>", "<invoke>", "</invoke>", " a.",
             "<pad>"]
    unk_token_id = None
    all_special_ids = [0, 1, 2, 3, 4, 6]  # the markers marked special, as trainers strip them

    def convert_tokens_to_ids(self, t):
        return self.vocab.index(t) if t in self.vocab else None

    def decode(self, ids, skip_special_tokens=False):
        assert not skip_special_tokens
        return "".join(self.vocab[i] for i in ids)


class Offline(unittest.TestCase):
    def test_decode_keeps_markers_and_drops_other_specials(self):
        self.assertEqual(decode_completion(_Tok(), [2, 5, 3, 5, 4, 5, 0, 6, 6]),
                         "<use_invoke> a.<invoke> a.</invoke> a.")

    def test_missing_t0_warns_and_imports_lists_join(self):
        from prod_client.reward import _warn_missing_t0
        with self.assertWarns(MissingMarkerWarning) as w:
            _warn_missing_t0([" intros. Lemma l : True. auto.", "<no_invoke> auto."], "t")
        self.assertIn("1 of 2", str(w.warning))
        n = _node("<no_invoke> auto.", {"statement": "s", "imports": ["R1.", "R2."]})
        self.assertEqual(n["imports"], "R1.\nR2.")

    def test_reward_files_load_by_path(self):
        # verl's custom_reward_function.path and OpenRLHF's --reward.remote_url FILE.py load a file
        # outside its package (no relative imports).
        import importlib.util
        import os
        here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "prod_client")
        for name, attr in [("reward.py", "compute_score"), ("openrlhf.py", "reward_func")]:
            spec = importlib.util.spec_from_file_location(f"custom_{name[:-3]}",
                                                          os.path.join(here, name))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.assertTrue(callable(getattr(module, attr)), name)

    def test_openrlhf_strips_end_tokens(self):
        from prod_client.openrlhf import strip_end_tokens
        self.assertEqual(strip_end_tokens("<no_invoke> auto.<|endoftext|>"), "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<no_invoke> auto.</s><pad><pad>"), "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<no_invoke> auto.<｜end▁of▁sentence｜>"),
                         "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<no_invoke> auto.[END]", ["[END]"]),
                         "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<use_invoke> <invoke> Lemma l : True. </invoke> auto."),
                         "<use_invoke> <invoke> Lemma l : True. </invoke> auto.")

    def test_openrlhf_mapping_and_infra(self):
        from prod_client import openrlhf

        class Fake:
            def __init__(self, verdict):
                self.verdict, self.nodes = verdict, None

            def check(self, nodes):
                self.nodes = nodes
                return [Verdict(id=n["id"], verdict=self.verdict, message="", time_ms=0) for n in nodes]

        f = Fake("proved")
        body = {"query": ["P: <no_invoke> auto.</s>"], "prompts": ["P: "],
                "labels": ["Lemma x : True."]}
        self.assertEqual(openrlhf.rewards(body, f), [1.0])
        self.assertEqual(f.nodes[0]["proof"], "<no_invoke> auto.")
        self.assertEqual(f.nodes[0]["statement"], "Lemma x : True.")
        with self.assertRaises(InfraError):
            openrlhf.rewards(body, Fake("infra"))
        with self.assertRaises(ValueError):
            openrlhf.rewards({"query": ["a"], "labels": []}, f)

    def test_infra_is_never_zero(self):
        with self.assertRaises(InfraError):
            _score(Verdict(id=1, verdict="infra", message="lost worker", time_ms=0))
        self.assertEqual(_score(Verdict(id=1, verdict="timed_out", message="", time_ms=0)), 0.0)


if __name__ == "__main__":
    unittest.main()

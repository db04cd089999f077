"""prod_client against a live `prod serve` (PROD_SERVE_URL, PROD_API_KEY); run by
crates/prod-cli/tests/cli_serve.rs, which starts the server with the real Coq."""

import os
import unittest

from prod_client import InfraError, ProdClient, ProdError, Verdict, compute_score, reward_fn
from prod_client.reward import _score

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
            ProdClient(URL, api_key=KEY).check([{"id": 1, "statement": "s", "proof": "p", "x": 1}])
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(e.exception.body["field"], "x")

    def test_rewards(self):
        gt = {"statement": STATEMENT, "imports": IMPORTS}
        self.assertEqual(compute_score("prod", "<no_invoke> intros n. lia.", gt, url=URL, api_key=KEY), 1.0)
        self.assertEqual(compute_score("prod", "<no_invoke> admit.", gt, url=URL, api_key=KEY), 0.0)
        self.assertEqual(compute_score("prod", "no markers", gt, url=URL, api_key=KEY), 0.0)
        r = reward_fn(["p", "p"], ["<no_invoke> intros n. lia.", "<no_invoke> reflexivity."],
                      statement=[STATEMENT] * 2, imports=[IMPORTS] * 2, url=URL, api_key=KEY)
        self.assertEqual(r, [1.0, 0.0])


class Offline(unittest.TestCase):
    def test_infra_is_never_zero(self):
        with self.assertRaises(InfraError):
            _score(Verdict(id=1, verdict="infra", message="lost worker", time_ms=0))
        self.assertEqual(_score(Verdict(id=1, verdict="timed_out", message="", time_ms=0)), 0.0)


if __name__ == "__main__":
    unittest.main()

"""prod_client without a checker: where a completion starts and what is checked of it, and the
client's scheduling over several servers against fake `prod serve` servers (stdlib HTTP
servers that answer /v1/check as told: a verdict, 429, 503, or nothing). Standard library
only; run by crates/prod-cli/tests/cli/cli_serve.rs (with tests.test_client) and on its own:
`python -m unittest tests.test_offline`."""

import asyncio
import json
import random
import threading
import time
import unittest
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prod_client import (AsyncProdClient, CompletionNotFound, InfraError, MissingMarkerWarning,
                         ProdClient, ProdError, ServersUnavailable, Verdict, proof_text)
from prod_client.client import Failure, Servers, chunks
from prod_client.reward import (Batch, completion_in_query, make_reward_fn, reward_fn,
                                strip_end_tokens, t0_option)

PROMPT = "Require Import Arith.\nDefinition d := 0.\nLemma p : forall n, n + 0 = n.\n"


class Completion(unittest.TestCase):
    def test_found_after_the_prompt_or_a_tail_of_it(self):
        c = "<no_invoke> intros n. lia.<|im_end|>"
        self.assertEqual(completion_in_query(PROMPT + c, PROMPT), c)
        # OpenRLHF cut the prompt from the left (a token boundary: anywhere).
        for cut in (1, 10, 22, len(PROMPT) - 30):
            self.assertEqual(completion_in_query(PROMPT[cut:] + c, PROMPT).strip(), c, cut)
        # A cut inside a character decodes to replacement characters.
        self.assertEqual(completion_in_query("\ufffd\ufffd" + PROMPT[30:] + c, PROMPT).strip(), c)
        # A tokenizer that decodes blanks differently.
        self.assertEqual(completion_in_query(PROMPT[5:].replace("\n", " ") + c, PROMPT).strip(), c)
        # The marker at the prompt's end stays with the prompt.
        p = PROMPT + "<no_invoke>"
        self.assertEqual(completion_in_query(p[40:] + " intros n. lia.", p), " intros n. lia.")

    def test_a_query_without_its_prompts_end_is_refused_with_the_reason(self):
        with self.assertRaises(CompletionNotFound) as e:
            completion_in_query("Sure! <no_invoke> intros n. lia.", PROMPT)
        self.assertIn("does not hold the end of its prompt", str(e.exception))
        # A start too short to say where the prompt ends ("." ends the prompt too).
        with self.assertRaises(CompletionNotFound):
            completion_in_query(".\nSure! <no_invoke> lia.", PROMPT)
        # What the model wrote before its t0 stays with the completion (which then scores 0).
        self.assertEqual(
            completion_in_query(PROMPT[20:] + "Sure! <no_invoke> lia.", PROMPT).strip(),
            "Sure! <no_invoke> lia.")

    def test_end_tokens_and_markers_in_the_prompt(self):
        self.assertEqual(strip_end_tokens("<no_invoke> auto.<|im_end|>\n<|endoftext|><pad>"),
                         "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<no_invoke> auto.[END] junk", ["[END]"]),
                         "<no_invoke> auto.")
        self.assertEqual(strip_end_tokens("<use_invoke> <invoke> Lemma l : True. </invoke> a."),
                         "<use_invoke> <invoke> Lemma l : True. </invoke> a.")
        self.assertEqual(proof_text(" intros. lia.<|im_end|>", t0_in_prompt="auto",
                                    prompt=PROMPT + "<no_invoke>\n"), "<no_invoke> intros. lia.")
        self.assertEqual(proof_text("<no_invoke> lia.", t0_in_prompt="auto", prompt=PROMPT),
                         "<no_invoke> lia.")
        self.assertEqual(proof_text("lia.", t0_in_prompt="<no_invoke>"), "<no_invoke> lia.")
        # The completion continues after the prompt's marker: its own t0 is text after it.
        self.assertEqual(proof_text("<no_invoke> lia.", t0_in_prompt="<no_invoke>"),
                         "<no_invoke> <no_invoke> lia.")
        with self.assertRaises(ValueError):
            proof_text("lia.", t0_in_prompt="auto")  # no prompt to read it from
        self.assertEqual([t0_option(v) for v in (None, "off", True, "auto", "no_invoke",
                                                 "<use_invoke>")],
                         [None, None, "auto", "auto", "<no_invoke>", "<use_invoke>"])
        with self.assertRaises(ValueError):
            t0_option("<invoke>")

    def test_missing_t0_warning_names_the_marker_in_the_prompt(self):
        info = {"statement": "Lemma p : True."}
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            Batch(["lia."], [info], prompts=[PROMPT + "<no_invoke>"], t0_in_prompt=None)
            Batch(["lia."], [info], prompts=[PROMPT], t0_in_prompt="auto", path="ids")
        self.assertEqual([x.category for x in w], [MissingMarkerWarning] * 2)
        self.assertIn("the prompt ends with <no_invoke>", str(w[0].message))
        self.assertIn("the model wrote none", str(w[1].message))


# --- Fake servers ---------------------------------------------------------------------------


class FakeServer:
    """A `prod serve` stand-in on a free port. `script` is a list of what to answer next
    ('ok', 'busy', 'down', 'infra', 'slow'), then 'ok' forever; 'ok' proves a node whose proof
    contains 'ok.' and fails the others."""

    def __init__(self, script=(), chunked=False):
        self.script, self.requests, self.nodes = list(script), 0, 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/check":
                    return self._answer(400, {"error": f"unknown route {self.path}"})
                with fake.lock:
                    fake.requests += 1
                    what = fake.script.pop(0) if fake.script else "ok"
                    if what in ("ok", "infra"):
                        fake.nodes += len(body["nodes"])
                if what == "busy":
                    return self._answer(429, {"error": "queue full"}, {"Retry-After": "1"})
                if what == "down":
                    return self._answer(503, {"error": "restarting"})
                if what == "drop":
                    self.connection.close()
                    return
                results = [{"id": n["id"], "message": "", "time_ms": 1,
                            "verdict": "infra" if what == "infra" else
                            ("proved" if "ok." in n["proof"] else "failed")}
                           for n in body["nodes"]]
                self._answer(200, {"results": results})

            def _answer(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    half = len(data) // 2
                    for part in (data[:half], data[half:]):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def dead_url():
    """A URL nothing listens on."""
    s = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{s.server_address[1]}"
    s.server_close()
    return url


def nodes(n):
    return [{"id": i, "statement": "Lemma p : True.",
             "proof": "<no_invoke> ok." if i % 3 else "<no_invoke> bad."} for i in range(n)]


def expected(n):
    return ["failed" if i % 3 == 0 else "proved" for i in range(n)]


class Scheduling(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.close()

    def fake(self, *script, chunked=False):
        s = FakeServer(script, chunked)
        self.servers.append(s)
        return s

    def test_batches_are_spread_and_a_dead_or_busy_server_loses_nothing(self):
        a, b = self.fake(), self.fake("busy", "down", "drop")
        for client in (ProdClient([a.url, b.url, dead_url()], max_nodes=4, seed=1),
                       ProdClient(",".join([b.url, a.url]), max_nodes=4, seed=2)):
            vs = client.check(nodes(20))
            self.assertEqual([v.verdict for v in vs], expected(20))
            self.assertEqual([v.id for v in vs], list(range(20)))
        self.assertGreater(a.nodes, 0)
        # Whether b answered some of those depends on timing (a may finish every batch while b
        # is resting after its refusals); nothing was lost or answered twice either way.
        self.assertEqual(a.nodes + b.nodes, 40)
        # Once its script is spent, b answers.
        vs = ProdClient(b.url, seed=3).check(nodes(4))
        self.assertEqual([v.verdict for v in vs], expected(4))
        self.assertGreater(b.nodes, 0)

    def test_a_single_busy_server_is_waited_for(self):
        s = self.fake("busy", "busy")
        t = time.monotonic()
        vs = ProdClient(s.url, seed=0).check(nodes(3))
        self.assertEqual([v.verdict for v in vs], expected(3))
        self.assertGreater(time.monotonic() - t, 0.5)  # two Retry-After: 1 rests, jittered
        self.assertEqual(s.requests, 3)

    def test_waits_have_jitter(self):
        rests = []
        for seed in range(8):
            servers = Servers(["http://x"], random.Random(seed))
            servers.failed("http://x", Failure("busy", "", 10.0))
            rests.append(servers.pick()[1])
        self.assertTrue(all(4.9 < r <= 15.0 for r in rests), rests)
        self.assertGreater(max(rests) - min(rests), 1.0, rests)

    def test_no_server_within_the_budget_raises_never_scores(self):
        url = dead_url()
        t = time.monotonic()
        with self.assertRaises(ServersUnavailable) as e:
            ProdClient(url, max_wait=1.5, seed=0).check(nodes(2))
        self.assertIsInstance(e.exception, InfraError)
        self.assertLess(time.monotonic() - t, 10)
        self.assertIn("no server answered", str(e.exception))
        # The reward functions raise it too: never a 0.
        from prod_client.reward import score_texts
        with self.assertRaises(InfraError):
            score_texts(["<no_invoke> ok."], [{"statement": "Lemma p : True."}],
                        client=ProdClient(url, max_wait=0.5))

    def test_refusals_are_the_callers_at_once(self):
        s = self.fake()
        t = time.monotonic()
        with self.assertRaises(ProdError) as e:
            ProdClient(s.url)._request("POST", "/v1/unknown", {"nodes": []})
        self.assertEqual(e.exception.status, 400)
        self.assertNotIsInstance(e.exception, InfraError)
        self.assertLess(time.monotonic() - t, 2)

    def test_infra_verdicts_are_sent_again_elsewhere(self):
        a, b = self.fake("infra"), self.fake()
        vs = ProdClient([a.url, b.url], max_nodes=100, seed=0).check(nodes(5))
        self.assertEqual([v.verdict for v in vs], expected(5))
        self.assertEqual((a.requests, b.requests), (1, 2))  # b: its chunk, then a's again
        c = self.fake("infra", "infra")
        reward = make_reward_fn(url=c.url, t0_in_prompt="<no_invoke>")
        with self.assertRaises(InfraError):
            reward(["p"], ["ok."], statement=["Lemma p : True."])

    def test_chunks(self):
        self.assertEqual(chunks(10, 2, 256), [range(0, 5), range(5, 10)])
        self.assertEqual(chunks(10, 1, 4), [range(0, 4), range(4, 8), range(8, 10)])
        self.assertEqual(chunks(0, 3, 4), [range(0)])

    def test_async_client(self):
        a, b = self.fake("drop", chunked=True), self.fake("busy")

        async def run():
            client = AsyncProdClient([dead_url(), a.url, b.url], max_nodes=3, seed=3)
            got = await asyncio.gather(client.check(nodes(7)), client.check(nodes(4)))
            with self.assertRaises(ServersUnavailable):
                await AsyncProdClient(dead_url(), max_wait=1.0).check(nodes(1))
            return got

        first, second = asyncio.run(run())
        self.assertEqual([v.verdict for v in first], expected(7))
        self.assertEqual([v.verdict for v in second], expected(4))
        self.assertTrue(isinstance(first[0], Verdict))

    def test_async_reward_function(self):
        s = self.fake()
        reward = make_reward_fn(url=s.url, asynchronous=True)
        got = asyncio.run(reward([PROMPT + "<no_invoke>", PROMPT], ["ok.", "<no_invoke> bad."],
                                 statement=["Lemma p : True."] * 2))
        self.assertEqual(got, [1.0, 0.0])


if __name__ == "__main__":
    unittest.main()

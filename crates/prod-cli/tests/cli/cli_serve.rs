//! `prod serve` end to end: the real binary with the real Coq on a free port. An honest proof
//! and a cheat (`admit`) in one batch, streaming, the API key, bad bodies (random bytes,
//! truncated JSON, huge numbers, wrong types, unknown fields) answered 4xx with the server still
//! healthy after, metrics, the Python client against the live server, SIGTERM.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

use crate::common;

const KEY: &str = "test-key";

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let mut args = vec!["--addr", "127.0.0.1:0", "--workers", "1", "--no-hammer"];
        args.extend(["--api-key", KEY]);
        args.extend(extra);
        let (child, addr) = common::start_serve(&args);
        Server { child, addr }
    }

    /// Send raw request bytes; returns (status, body).
    fn raw(&self, request: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let _ = s.write_all(request);
        let mut out = vec![];
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
        (status, body)
    }

    fn request(&self, method: &str, path: &str, headers: &[&str], body: &[u8]) -> (u16, String) {
        let mut r = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for h in headers {
            r.push_str(h);
            r.push_str("\r\n");
        }
        r.push_str("\r\n");
        let mut bytes = r.into_bytes();
        bytes.extend_from_slice(body);
        self.raw(&bytes)
    }

    fn post(&self, path: &str, body: &[u8]) -> (u16, String) {
        let auth = format!("Authorization: Bearer {KEY}");
        self.request("POST", path, &[&auth], body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node(id: &str, statement: &str, proof: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "imports": "From Coq Require Import Arith Lia.",
                       "statement": statement, "proof": proof})
}

fn batch() -> Vec<u8> {
    serde_json::json!({"nodes": [
        node("honest", "Lemma plus_0 : forall n : nat, n + 0 = n.", "<no_invoke> intros n. lia."),
        node("cheat", "Lemma cheat : 1 = 2.", "<no_invoke> admit."),
    ]})
    .to_string()
    .into_bytes()
}

/// JSON body (dechunked crudely: streamed bodies are read line by line instead).
fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[test]
fn serve_checks_streams_refuses_bad_bodies_and_stops() {
    let server = Server::start(&[]);

    let (status, body) = server.post("/v1/check", &batch());
    assert_eq!(status, 200, "{body}");
    let r = json(&body);
    assert_eq!(r["results"][0]["id"], "honest");
    assert_eq!(r["results"][0]["verdict"], "proved", "{body}");
    assert_eq!(r["results"][1]["verdict"], "failed", "{body}");

    // Streaming: one line per node, each with its index (chunked framing around them).
    let (status, body) = server.post("/v1/check?stream=1", &batch());
    assert_eq!(status, 200);
    let lines: Vec<serde_json::Value> = body
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(json)
        .collect();
    assert_eq!(lines.len(), 2, "{body}");
    for l in &lines {
        let want = if l["index"] == 0 { "proved" } else { "failed" };
        assert_eq!(l["verdict"], want, "{body}");
    }

    // The key is required; /health is open.
    let (status, body) = server.request("POST", "/v1/check", &[], &batch());
    assert_eq!(status, 401, "{body}");
    assert!(json(&body)["error"].is_string());
    let wrong = server.request("GET", "/metrics", &["Authorization: Bearer nope"], b"");
    assert_eq!(wrong.0, 401);

    // Unknown fields name the node and the field.
    let (status, body) = server.post(
        "/v1/check",
        br#"{"nodes": [{"id": 1, "statement": "s", "proof": "<no_invoke>", "contxt": ""}]}"#,
    );
    assert_eq!(status, 400);
    assert_eq!(json(&body)["index"], 0);
    assert_eq!(json(&body)["field"], "contxt");

    // Fuzz-ish bodies: all 4xx with a JSON error, never a crash.
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut bodies: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            (0..(i * 7 % 300))
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect()
        })
        .collect();
    let whole = batch();
    for cut in [1, 10, whole.len() / 2, whole.len() - 1] {
        bodies.push(whole[..cut].to_vec());
    }
    for b in [
        r#"{"nodes": [{"id": 1e999999, "statement": "s", "proof": "p"}]}"#,
        r#"{"nodes": 123456789012345678901234567890}"#,
        r#"{"nodes": [{"id": 1, "statement": 5, "proof": []}]}"#,
        r#"{"nodes": [1, "x", null]}"#,
        r#"{"nodes": {"id": 1}}"#,
        r#"{"nodes": [], "extra": true}"#,
        r#"[]"#,
        r#"null"#,
        "",
    ] {
        bodies.push(b.as_bytes().to_vec());
    }
    bodies.push(format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes());
    for b in &bodies {
        let (status, body) = server.post("/v1/check", b);
        assert!(
            (400..500).contains(&status),
            "{status} for {:?}",
            String::from_utf8_lossy(b)
        );
        assert!(json(&body)["error"].is_string(), "{body}");
    }
    // Too many nodes, too large a body, no such route, wrong method, garbage request line.
    let many = format!("{{\"nodes\": [{}]}}", ["{}"; 257].join(","));
    assert_eq!(server.post("/v1/check", many.as_bytes()).0, 413);
    let huge = vec![b' '; 9 << 20];
    assert_eq!(server.post("/v1/check", &huge).0, 413);
    assert_eq!(server.post("/nope", b"").0, 404);
    assert_eq!(server.request("GET", "/v1/check", &[], b"").0, 405);
    let (status, _) = server.raw(b"\x00\x01garbage\r\n\r\n");
    assert!(status == 0 || (400..500).contains(&status));

    // Still healthy after all that; the metrics counted the verdicts.
    let (status, body) = server.request("GET", "/health", &[], b"");
    assert_eq!(status, 200);
    let h = json(&body);
    assert_eq!(h["status"], "ok");
    assert!(
        h["prover"].as_str().unwrap().starts_with("coq")
            || h["prover"].as_str().unwrap().starts_with("rocq")
    );
    assert_eq!(h["workers"], 1);
    let auth = format!("Authorization: Bearer {KEY}");
    let (status, body) = server.request("GET", "/metrics", &[&auth], b"");
    assert_eq!(status, 200);
    assert!(
        body.contains("prod_checks_total{verdict=\"proved\"} 2"),
        "{body}"
    );
    assert!(body.contains("prod_queued_nodes 0"), "{body}");
    // The verdict cache is on by default (in memory): the streamed batch repeated the first.
    assert!(body.contains("prod_cache_hits_total 2"), "{body}");

    // The tree endpoint: a root proved through its proposed lemma.
    let tree = serde_json::json!({"nodes": [
        node("root", "Lemma r : forall n : nat, 0 + n = n + 0.",
             "<use_invoke> <invoke> Lemma p0 : forall n : nat, n + 0 = n. </invoke> intros n. rewrite p0. reflexivity."),
        node("p0", "Lemma p0 : forall n : nat, n + 0 = n.", "<no_invoke> intros n. lia."),
    ]});
    let (status, body) = server.post("/v1/tree", tree.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    let r = json(&body);
    assert_eq!(r["results"][0]["globally_correct"], true, "{body}");
    assert_eq!(r["results"][1]["globally_correct"], true, "{body}");

    // The assemble endpoint: the same tree as one complete proof, re-checked cold by Coq.
    let (status, body) = server.post("/v1/assemble", tree.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    let a = json(&body);
    assert_eq!(a["proved"], true, "{body}");
    assert_eq!(a["final"]["verdict"], "proved", "{body}");
    let text = a["assembled"].as_str().unwrap();
    let (child, root) = (text.find("p0 :").unwrap(), text.find("Lemma r").unwrap());
    assert!(child < root, "child lemma first: {text}");
    assert!(a["checked_text"]
        .as_str()
        .unwrap()
        .contains("Require Import Arith Lia"));
    // A proposed lemma that is false: the root is locally correct, not globally; no proof.
    let bad = serde_json::json!({"root": 0, "nodes": [
        node("root", "Lemma r2 : 1 = 1.",
             "<use_invoke> <invoke> Lemma f : 1 = 2. </invoke> reflexivity."),
        node("f", "Lemma f : 1 = 2.", "<no_invoke> reflexivity."),
    ]});
    let (status, body) = server.post("/v1/assemble", bad.to_string().as_bytes());
    assert_eq!(status, 200, "{body}");
    let a = json(&body);
    assert_eq!(a["proved"], false, "{body}");
    assert_eq!(a["assembled"], serde_json::Value::Null, "{body}");
    assert_eq!(a["results"][0]["globally_correct"], false, "{body}");
    let (status, body) = server.post("/v1/assemble", br#"{"nodes": [], "root": 3}"#);
    assert_eq!(status, 400, "{body}");

    python_client_against(&server);

    // SIGTERM: a clean stop.
    let mut server = server;
    // SAFETY: kill(2) on our own child.
    unsafe { libc_kill(server.child.id() as i32, 15) };
    let status = server.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// python/tests/test_client.py against the live server, and test_offline.py (completions in
/// queries, several servers against fake ones). Skipped when python3 is missing, unless CI=true
/// (then missing python3 fails the test).
fn python_client_against(server: &Server) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let python = std::env::var("PROD_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "-v",
            "tests.test_client",
            "tests.test_offline",
        ])
        .current_dir(&root)
        .env("PYTHONPATH", &root)
        .env("PROD_SERVE_URL", format!("http://{}", server.addr))
        .env("PROD_API_KEY", KEY)
        .output();
    match out {
        Err(e) => {
            prod_test_support::require(
                false,
                &format!("{python} does not run ({e}); set PROD_PYTHON (the Python client test)"),
            );
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                o.status.success(),
                "python client tests failed:\n{}\n{err}",
                String::from_utf8_lossy(&o.stdout)
            );
            // The live tests ran (none skipped for want of a server).
            for t in [
                "test_rewards",
                "test_assemble",
                "test_openrlhf_endpoint",
                "test_found_after_the_prompt_or_a_tail_of_it",
                "test_batches_are_spread_and_a_dead_or_busy_server_loses_nothing",
                "test_async_client",
            ] {
                assert!(err.contains(&format!("{t} (")), "{t} did not run:\n{err}");
            }
            assert!(!err.contains("skipped"), "{err}");
        }
    }
}

#[test]
fn serve_refuses_a_public_address_without_a_key() {
    let out = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(["serve", "--addr", "0.0.0.0:0"])
        .env_remove("PROD_API_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without an API key"), "{err}");
}

/// Every route that decides a node runs the same canary alarm (`prod_prover::canary_alarm`):
/// a context whose axiom (allowed by name) proves `0 = 1` makes a node stating that canary
/// acceptable, so each of `/v1/check`, `/v1/tree` and `/v1/assemble` must count it once in
/// `prod_canary_alarms_total`; an honest node beside it never counts.
#[test]
fn every_route_that_decides_a_node_raises_the_canary_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prod.toml");
    std::fs::write(&config, "[check.coq]\nallowed_axioms = [\"M.bad\"]\n").unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    let auth = format!("Authorization: Bearer {KEY}");
    let alarms = || {
        let (status, body) = server.request("GET", "/metrics", &[&auth], b"");
        assert_eq!(status, 200, "{body}");
        let line = body
            .lines()
            .find(|l| l.starts_with("prod_canary_alarms_total "))
            .unwrap_or_else(|| panic!("{body}"));
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let canary = |id: &str| {
        serde_json::json!({"id": id, "context": "Module M. Axiom bad : 0 = 1. End M.",
                           "statement": "Lemma c : 0 = 1.", "proof": "<no_invoke> exact M.bad."})
    };
    let honest = node("h", "Lemma h : 1 = 1.", "<no_invoke> reflexivity.");
    assert_eq!(alarms(), 0);
    let mut want = 0;
    for (route, body) in [
        (
            "/v1/check",
            serde_json::json!({"nodes": [canary("a"), honest.clone()]}),
        ),
        (
            "/v1/check?stream=1",
            serde_json::json!({"nodes": [canary("s"), honest.clone()]}),
        ),
        (
            "/v1/tree",
            serde_json::json!({"nodes": [canary("b"), honest.clone()]}),
        ),
        (
            "/v1/assemble",
            serde_json::json!({"root": 0, "nodes": [canary("c"), honest.clone()]}),
        ),
        (
            "/v1/assemble",
            serde_json::json!({"root": 1, "nodes": [honest.clone(), canary("d")]}),
        ),
    ] {
        let (status, text) = server.post(route, body.to_string().as_bytes());
        assert_eq!(status, 200, "{route}: {text}");
        if route.ends_with("stream=1") {
            assert!(
                text.contains(r#""id":"s""#) && text.contains(r#""verdict":"proved""#),
                "{text}"
            );
        } else {
            assert_eq!(json(&text)["results"][0]["verdict"], "proved", "{text}");
        }
        want += 1;
        assert_eq!(alarms(), want, "{route} counts its accepted canary: {text}");
    }
}

/// Hurkens' paradox as a tree (a child proves `h` only where `A ≤ B`, the root uses `h` where
/// `B < A`), in a monomorphic and in a universe-polymorphic context: every node is locally
/// proved, no tree of `False` is globally correct on `/v1/tree` or assembled on
/// `/v1/assemble`, and the child's result line says why (`universe_constraints`).
#[test]
fn hurkens_trees_are_not_globally_correct_on_any_route() {
    let server = Server::start(&[]);
    let h = "Lemma h : forall A : Type, {B : Type & A = B}.";
    for context in ["", "Set Universe Polymorphism."] {
        let node = |id: &str, statement: &str, proof: &str| {
            serde_json::json!({"id": id, "context": context, "statement": statement, "proof": proof,
                               "imports": "From Coq Require Import List. Require Coq.Logic.Hurkens."})
        };
        let nodes = serde_json::json!([
            node("root", "Lemma root : False.", &format!("<use_invoke> <invoke> {h} </invoke> destruct (h Type) as [B HB]. exact (Hurkens.TypeNeqSmallType.paradox B HB).")),
            node("h", h, "<no_invoke> intros A. exists A. reflexivity."),
        ]);
        let (status, body) = server.post(
            "/v1/tree",
            serde_json::json!({ "nodes": nodes }).to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let r = json(&body);
        for i in 0..2 {
            assert_eq!(r["results"][i]["verdict"], "proved", "{context}: {body}");
        }
        assert_eq!(
            r["results"][0]["globally_correct"], false,
            "{context}: {body}"
        );
        assert!(
            !r["results"][1]["universe_constraints"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{context}: {body}"
        );
        let (status, body) = server.post(
            "/v1/assemble",
            serde_json::json!({"root": 0, "nodes": nodes})
                .to_string()
                .as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let a = json(&body);
        assert_eq!(a["proved"], false, "{context}: {body}");
        assert_eq!(a["assembled"], serde_json::Value::Null, "{context}: {body}");
    }
}

//! `prod serve` under faults, end to end (the real binary, the real Coq): a worker SIGKILLed
//! while a batch runs, a check that never ends, a client that goes away mid-stream, a flood of
//! oversized bodies; and `prod bench serve` at a tiny size (table and JSON shape).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common;

use serde_json::{json, Value};

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let mut args = vec!["--addr", "127.0.0.1:0", "--no-hammer"];
        args.extend(extra);
        let (child, addr) = common::start_serve(&args);
        Server { child, addr }
    }

    /// (status, body) of one request on its own connection.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
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

    fn check(&self, nodes: &[Value]) -> Vec<Value> {
        let (status, body) = self.request(
            "POST",
            "/v1/check",
            json!({ "nodes": nodes }).to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
        v["results"].as_array().unwrap().clone()
    }

    /// Streamed check: the NDJSON lines (chunk framing skipped).
    fn check_stream(&self, nodes: &[Value]) -> Vec<Value> {
        let (status, body) = self.request(
            "POST",
            "/v1/check?stream=1",
            json!({ "nodes": nodes }).to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{body}");
        body.lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn healthy(&self) -> bool {
        let (status, body) = self.request("GET", "/health", b"");
        status == 200 && body.contains("\"ok\"")
    }

    fn metric(&self, name: &str) -> u64 {
        let (status, body) = self.request("GET", "/metrics", b"");
        assert_eq!(status, 200);
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    }

    /// Coq processes below the server (through bwrap): pids of `coqtop`/`rocq*` descendants.
    fn coq_pids(&self) -> Vec<i32> {
        let mut parent = HashMap::new();
        let mut comm = HashMap::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid …
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let ppid = stat[close + 1..]
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent.insert(pid, ppid);
                comm.insert(pid, stat[open + 1..close].to_string());
            }
        }
        let root = self.child.id() as i32;
        let below = |mut p: i32| {
            for _ in 0..64 {
                match parent.get(&p) {
                    Some(&q) if q == root => return true,
                    Some(&q) if q > 1 => p = q,
                    _ => return false,
                }
            }
            false
        };
        let mut pids: Vec<i32> = comm
            .iter()
            .filter(|(_, c)| c.starts_with("coqtop") || c.starts_with("rocq"))
            .map(|(&p, _)| p)
            .filter(|&p| below(p))
            .collect();
        pids.sort();
        pids
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

const IMPORTS: &str = "From Coq Require Import Arith Lia.";

fn honest(id: &str, k: usize) -> Value {
    json!({"id": id, "imports": IMPORTS,
           "statement": format!("Lemma {id} : forall n m : nat, n + m + {k} = {k} + m + n."),
           "proof": "<no_invoke> intros n m. lia."})
}

fn hung(id: &str) -> Value {
    json!({"id": id, "imports": IMPORTS,
           "statement": format!("Lemma {id} : forall n : nat, n = n."),
           "proof": "<no_invoke> intros n. repeat (pose proof I). reflexivity."})
}

/// Poll until `f` holds (or panic after `secs`).
fn eventually(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (a) SIGKILL a coqtop while a batch runs: every node answered exactly once, an honest proof
/// is `proved` or `infra` (never `failed`), the cheat never `proved`, and the server goes on.
#[test]
fn worker_killed_mid_batch_every_node_answered_once_infra_stays_infra() {
    let server = Server::start(&["--workers", "2"]);
    // Warm: both workers up with the context loaded.
    let warm: Vec<Value> = (0..4).map(|i| honest(&format!("w{i}"), i)).collect();
    assert!(server.check(&warm).iter().all(|r| r["verdict"] == "proved"));
    assert!(
        !server.coq_pids().is_empty(),
        "coqtop workers below the server"
    );

    let mut nodes: Vec<Value> = (0..24).map(|i| honest(&format!("a{i}"), i)).collect();
    nodes.insert(
        7,
        json!({"id": "cheat", "imports": IMPORTS, "statement": "Lemma cheat : 1 = 2.",
               "proof": "<no_invoke> admit."}),
    );
    let n = nodes.len();
    let lines = std::thread::scope(|s| {
        let batch = s.spawn(|| server.check_stream(&nodes));
        // Kill a worker three times while the batch runs (each time whichever is alive).
        let mut killed = 0;
        let t = Instant::now();
        while killed < 3 && !batch.is_finished() && t.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(250));
            if let Some(&pid) = server.coq_pids().first() {
                // SAFETY: kill(2) on a descendant of our own child.
                unsafe { libc_kill(pid, 9) };
                killed += 1;
            }
        }
        assert!(killed > 0, "no coqtop found to kill");
        batch.join().unwrap()
    });
    // Exactly one answer per node, each with its own id.
    let mut seen = vec![0; n];
    for l in &lines {
        let i = l["index"].as_u64().unwrap() as usize;
        seen[i] += 1;
        assert_eq!(l["id"], nodes[i]["id"], "{l}");
        let v = l["verdict"].as_str().unwrap();
        if nodes[i]["id"] == "cheat" {
            assert!(v == "failed" || v == "infra", "{l}");
        } else {
            assert!(
                v == "proved" || v == "infra",
                "an honest proof judged {v}: {l}"
            );
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "answers per node: {seen:?}");
    // The server goes on: healthy, checks again, nothing left queued.
    assert!(server.healthy());
    assert_eq!(server.check(&[honest("after", 1)])[0]["verdict"], "proved");
    eventually(30, "queue empty", || {
        server.metric("prod_queued_nodes") == 0
    });
    // Infra answers were counted as infra, not failures: one `failed` at most (the cheat).
    assert!(server.metric("prod_checks_total{verdict=\"failed\"}") <= 1);
}

/// (b) A proof step that never ends: `timed_out` within the step limit; the other nodes of the
/// same request and a concurrent request are judged as usual.
#[test]
fn hung_check_times_out_others_unaffected() {
    let server = Server::start(&["--workers", "2", "--timeout", "6"]);
    let mine = vec![
        honest("b0", 0),
        hung("hang"),
        honest("b1", 1),
        honest("b2", 2),
    ];
    let other: Vec<Value> = (0..3).map(|i| honest(&format!("o{i}"), i)).collect();
    let t = Instant::now();
    let (mine, other) = std::thread::scope(|s| {
        let a = s.spawn(|| server.check(&mine));
        let b = s.spawn(|| server.check(&other));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(t.elapsed() < Duration::from_secs(120));
    assert_eq!(mine[1]["id"], "hang");
    assert_eq!(mine[1]["verdict"], "timed_out", "{}", mine[1]);
    for r in [&mine[0], &mine[2], &mine[3]].into_iter().chain(&other) {
        assert_eq!(r["verdict"], "proved", "{r}");
    }
    assert!(server.healthy());
    assert_eq!(server.metric("prod_queued_nodes"), 0);
}

/// (c) A client that reads the first streamed line and disconnects: the server keeps serving
/// other requests, and the queue gauge returns to 0 once the abandoned checks finish.
#[test]
fn client_gone_mid_stream_queue_returns_to_zero() {
    let server = Server::start(&["--workers", "1", "--timeout", "5"]);
    let mut nodes = vec![honest("c0", 0)];
    nodes.extend((0..3).map(|i| hung(&format!("h{i}"))));
    nodes.push(honest("c1", 1));
    let body = json!({ "nodes": nodes }).to_string();
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "POST /v1/check?stream=1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read until the first verdict line has arrived, then hang up.
    let mut got = vec![];
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"verdict\"") {
        let k = s.read(&mut buf).unwrap();
        assert!(k > 0, "stream closed early");
        got.extend_from_slice(&buf[..k]);
    }
    assert!(
        server.metric("prod_queued_nodes") > 0,
        "abandoned checks still queued"
    );
    drop(s);
    // Others are served meanwhile (behind the abandoned ones on the single worker).
    assert!(server.healthy());
    assert_eq!(server.check(&[honest("next", 3)])[0]["verdict"], "proved");
    eventually(120, "queue gauge back to 0", || {
        server.metric("prod_queued_nodes") == 0 && server.metric("prod_in_flight_requests") == 0
    });
    assert!(server.metric("prod_checks_total{verdict=\"timed_out\"}") >= 3);
    assert!(server.healthy());
}

/// (d) 50 parallel 9 MiB bodies while an accepted batch runs: every one 413, /health answers
/// during the flood, the accepted batch is answered in full.
#[test]
fn oversized_flood_refused_accepted_checks_kept() {
    let server = Server::start(&["--workers", "2"]);
    let nodes: Vec<Value> = (0..8).map(|i| honest(&format!("d{i}"), i)).collect();
    let huge = vec![b' '; 9 << 20];
    std::thread::scope(|s| {
        let batch = s.spawn(|| server.check(&nodes));
        std::thread::sleep(Duration::from_millis(200));
        let flood: Vec<_> = (0..50)
            .map(|_| s.spawn(|| server.request("POST", "/v1/check", &huge).0))
            .collect();
        assert!(server.healthy(), "/health during the flood");
        let statuses: Vec<u16> = flood.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(statuses.iter().all(|&c| c == 413), "{statuses:?}");
        let results = batch.join().unwrap();
        assert_eq!(results.len(), nodes.len());
        for (r, n) in results.iter().zip(&nodes) {
            assert_eq!(r["id"], n["id"]);
            assert_eq!(r["verdict"], "proved", "{r}");
        }
    });
    assert!(server.healthy());
    assert_eq!(server.metric("prod_queued_nodes"), 0);
}

/// `prod bench serve` at a tiny size: the Markdown table and the JSON shape.
#[test]
fn bench_serve_tiny_table_and_json() {
    let run = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_prod"));
        cmd.args([
            "bench",
            "serve",
            "--count",
            "6",
            "--concurrency",
            "1,2",
            "--workers",
            "2",
            "--no-hammer",
        ]);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(false);
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(rows.len(), 4, "{table}"); // header, rule, one row per level
    assert!(rows[0].contains("HTTP overhead p50 ms"), "{table}");
    assert!(rows[0].contains("direct p99 ms"), "{table}");
    assert!(
        rows[2].starts_with("| 1 |") && rows[3].starts_with("| 2 |"),
        "{table}"
    );
    for r in &rows[2..] {
        assert_eq!(r.matches('|').count(), 11, "{r}");
    }

    let v: Value = serde_json::from_str(run(true).trim()).unwrap();
    assert_eq!(v["checks_per_level"], 6);
    assert_eq!(v["workers"], 2);
    assert_eq!(v["all_proved"], true);
    assert!(v["http_floor"]["p50_ms"].as_f64().unwrap() > 0.0, "{v}");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, c) in levels.iter().zip([1, 2]) {
        assert_eq!(l["concurrency"], c);
        assert!(l["overhead_p50_ms"].is_number());
        for side in ["direct", "http"] {
            assert_eq!(l[side]["checks"], 6);
            assert_eq!(l[side]["proved"], 6);
            for k in ["checks_per_s", "p50_ms", "p95_ms", "p99_ms"] {
                assert!(l[side][k].as_f64().unwrap() > 0.0, "{side}.{k}: {l}");
            }
        }
    }
}

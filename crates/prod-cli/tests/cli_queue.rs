//! `prod queue` against a real PostgreSQL server (a throw-away cluster started here from the
//! Debian package's binaries): one run's nodes, a worker killed right after it claimed its first
//! batch, two more workers draining the queue at once — every node checked by the real Coq and
//! recorded exactly once, the dead worker's claims retried after their lease expired.
//! Skips (with a message) where PostgreSQL is not installed.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use prod_queue::testing::Pg;
use std::time::{Duration, Instant};

fn prod(args: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_prod"));
    c.args(args).current_dir(dir);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{path}:/usr/libexec/coq-hammer"));
    c
}

fn status(url: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(["queue", "status", "--store", url, "--run", "r1", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

trait WaitChecked {
    fn wait_with_output_checked(self) -> serde_json::Value;
}

impl WaitChecked for Child {
    fn wait_with_output_checked(self) -> serde_json::Value {
        let out = self.wait_with_output().unwrap();
        assert!(out.status.success(), "worker failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

#[test]
fn workers_share_one_queue_and_a_dead_workers_claims_are_retried() {
    let Some(pg) = Pg::start() else { return };
    let url = pg.url();
    let work = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..12 {
        let (statement, proof) = if i % 4 == 3 {
            (format!("Lemma q{i} : forall n : nat, n + {i} = n."), "<no_invoke> intros n. lia.".to_string())
        } else {
            (format!("Lemma q{i} : forall n : nat, n + {i} = {i} + n."), "<no_invoke> intros n. lia.".to_string())
        };
        let node = serde_json::json!({"id": format!("n{i}"), "imports": "From Coq Require Import Lia.", "context": "", "statement": statement, "proof": proof});
        lines.push_str(&format!("{node}\n"));
    }
    std::fs::write(work.path().join("nodes.jsonl"), lines).unwrap();
    let out = prod(&["queue", "submit", "--store", &url, "--run", "r1", "nodes.jsonl", "--json"], work.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sub: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((sub["added"].as_i64(), sub["todo"].as_i64()), (Some(12), Some(12)));
    // Submitting again adds nothing.
    let again = prod(&["queue", "submit", "--store", &url, "--run", "r1", "nodes.jsonl", "--json"], work.path()).output().unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&again.stdout).unwrap()["added"], 0);

    // Worker A claims 6 and is killed before it records them.
    let worker = |name: &str, batch: &str| {
        prod(&["queue", "work", "--store", &url, "--run", "r1", "--batch", batch, "--lease", "3", "--workers", "1", "--timeout", "5", "--name", name, "--json"], work.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut a = worker("A", "6");
    let t = Instant::now();
    while status(&url)["claimed"].as_i64() != Some(6) {
        assert!(t.elapsed() < Duration::from_secs(30), "worker A never claimed");
        std::thread::sleep(Duration::from_millis(10));
    }
    a.kill().unwrap();
    let _ = a.wait();
    let after_kill = status(&url);

    // B and C drain the rest together; A's claims come back after the 3 s lease.
    let b = worker("B", "2");
    let c = worker("C", "2");
    let (sb, sc) = (b.wait_with_output_checked(), c.wait_with_output_checked());
    let recorded = sb["recorded"].as_i64().unwrap() + sc["recorded"].as_i64().unwrap();
    assert_eq!(recorded + after_kill["done"].as_i64().unwrap(), 12, "B {sb} C {sc} after kill {after_kill}");
    assert!(sb["recorded"].as_i64().unwrap() > 0 && sc["recorded"].as_i64().unwrap() > 0, "both workers took part: {sb} {sc}");

    let out = prod(&["queue", "results", "--store", &url, "--run", "r1", "--json"], work.path()).output().unwrap();
    let results: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(results.len(), 12);
    let mut retried = 0;
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["id"], format!("n{i}"), "submission order");
        assert_eq!(r["recordings"], 1, "recorded exactly once: {r}");
        let want = if i % 4 == 3 { "failed" } else { "proved" };
        assert_eq!(r["verdict"], want, "{r}");
        if r["claims"].as_i64().unwrap() >= 2 {
            retried += 1;
        }
    }
    let dead_claims = 6 - after_kill["done"].as_i64().unwrap();
    assert!(retried as i64 >= dead_claims, "the dead worker's {dead_claims} claims were claimed again ({retried})");
    assert_eq!(status(&url), serde_json::json!({"todo": 0, "claimed": 0, "done": 12}));
}

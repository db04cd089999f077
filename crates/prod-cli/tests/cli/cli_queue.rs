//! `prod queue` against a real PostgreSQL server (a throw-away cluster started here from the
//! Debian package's binaries): one run's nodes, a worker killed right after it claimed its first
//! batch, two more workers draining the queue at once — every node checked by the real Coq and
//! recorded exactly once, the dead worker's claims retried after their lease expired.
//! Skips (with a message) where PostgreSQL is not installed; fails there under `CI=true`.

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

/// `cmd` started with its stdout and stderr captured.
fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

trait WaitChecked {
    fn wait_with_output_checked(self) -> serde_json::Value;
}

impl WaitChecked for Child {
    fn wait_with_output_checked(self) -> serde_json::Value {
        let out = self.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "worker failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
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
            (
                format!("Lemma q{i} : forall n : nat, n + {i} = n."),
                "<no_invoke> intros n. lia.".to_string(),
            )
        } else {
            (
                format!("Lemma q{i} : forall n : nat, n + {i} = {i} + n."),
                "<no_invoke> intros n. lia.".to_string(),
            )
        };
        let node = serde_json::json!({"id": format!("n{i}"), "imports": "From Coq Require Import Lia.", "context": "", "statement": statement, "proof": proof});
        lines.push_str(&format!("{node}\n"));
    }
    std::fs::write(work.path().join("nodes.jsonl"), lines).unwrap();
    let out = prod(
        &[
            "queue",
            "submit",
            "--store",
            &url,
            "--run",
            "r1",
            "nodes.jsonl",
            "--json",
        ],
        work.path(),
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sub: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (sub["added"].as_i64(), sub["todo"].as_i64()),
        (Some(12), Some(12))
    );
    // Submitting again adds nothing.
    let again = prod(
        &[
            "queue",
            "submit",
            "--store",
            &url,
            "--run",
            "r1",
            "nodes.jsonl",
            "--json",
        ],
        work.path(),
    )
    .output()
    .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&again.stdout).unwrap()["added"],
        0
    );

    // Worker A claims 6 and is killed before it records them.
    let worker = |name: &str, batch: &str| {
        spawn_piped(&mut prod(
            &[
                "queue",
                "work",
                "--store",
                &url,
                "--run",
                "r1",
                "--batch",
                batch,
                "--lease",
                "3",
                "--workers",
                "1",
                "--timeout",
                "5",
                "--name",
                name,
                "--json",
            ],
            work.path(),
        ))
    };
    let mut a = worker("A", "6");
    let t = Instant::now();
    while status(&url)["claimed"].as_i64() != Some(6) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "worker A never claimed"
        );
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
    assert_eq!(
        recorded + after_kill["done"].as_i64().unwrap(),
        12,
        "B {sb} C {sc} after kill {after_kill}"
    );
    // Both claimed from the one queue. (Under load a worker's lease can run out before it
    // records, and the other then records the claim: that is the queue working, not a failure.)
    assert!(
        sb["claimed"].as_i64().unwrap() > 0 && sc["claimed"].as_i64().unwrap() > 0,
        "both workers took part: {sb} {sc}"
    );

    let out = prod(
        &["queue", "results", "--store", &url, "--run", "r1", "--json"],
        work.path(),
    )
    .output()
    .unwrap();
    let results: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
    assert!(
        retried as i64 >= dead_claims,
        "the dead worker's {dead_claims} claims were claimed again ({retried})"
    );
    assert_eq!(
        status(&url),
        serde_json::json!({"todo": 0, "claimed": 0, "done": 12})
    );
}

/// `prod eval --store … --no-check-here`: the run store in PostgreSQL, every check done by a
/// separate `prod queue work` process started with nothing but the store and the run name (it
/// takes the checker settings the coordinator recorded, so its fingerprint matches). Samples
/// come from a fake server (every completion `intros n. lia.`), so the pass@k is known: the same
/// as the embedded (SQLite, local Coq) evaluation.
#[cfg(feature = "policy")]
#[test]
fn eval_with_a_postgres_store_is_checked_by_a_queue_worker() {
    let Some(pg) = Pg::start() else { return };
    let url = pg.url();
    let d = tempfile::tempdir().unwrap();
    let source = "From Coq Require Import Arith Lia.\n";
    let mut lines = String::new();
    let mut corpus = String::new();
    for (i, statement) in [
        "forall n : nat, n + 0 = n",
        "forall n : nat, n = n + 1",
        "forall n : nat, n * 1 = n",
    ]
    .iter()
    .enumerate()
    {
        let name = format!("t{i}");
        let e = serde_json::json!({
            "id": format!("Fix:{name}"), "library": "fixture", "package": "fixture", "file": "Fix.v",
            "logical_path": "Fix", "line": 2, "position": i, "scope": [], "qualified_name": name, "name": name,
            "imports": [], "flags": [], "context": source, "context_start": 0, "context_end": source.len(),
            "context_extra": "", "statement": format!("Lemma {name} : {statement}."),
            "conditional_proof": "<no_invoke> intros n. lia.", "conditional_proof_original": "<no_invoke> intros n. lia.",
            "proposed_lemmas": [], "proposed_names": [], "depth": 0, "in_tree": true, "proof_end": "qed",
            "replaced_steps": 0, "split": "test", "variant": "wo_lemmas"
        });
        lines.push_str(&format!("{e}\n"));
        corpus.push_str(&format!(
            "{source}Lemma {name} : {statement}. intros n. lia.\n"
        ));
    }
    std::fs::create_dir_all(d.path().join("data")).unwrap();
    std::fs::write(d.path().join("data/test.jsonl"), lines).unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": source, "reduced": source});
    std::fs::write(d.path().join("data/sources.jsonl"), format!("{src}\n")).unwrap();
    std::fs::write(d.path().join("corpus.txt"), corpus).unwrap();
    let out = prod(
        &[
            "model",
            "init",
            "--corpus",
            "corpus.txt",
            "--vocab-size",
            "300",
            "--out",
            "m",
        ],
        d.path(),
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fake = prod_remote::testing::serve(std::sync::Arc::new(
        |_: &str, body: &serde_json::Value, _| {
            let n = body["n"].as_u64().unwrap_or(1);
            let choices: Vec<serde_json::Value> = (0..n).map(|i| serde_json::json!({"index": i, "text": " intros n. lia.", "finish_reason": "stop"})).collect();
            (200, serde_json::json!({"choices": choices}).to_string())
        },
    ));
    let eval = |out_dir: &str, store: &[&str]| {
        let mut args = vec![
            "eval",
            "--model",
            "m",
            "--dataset",
            "data",
            "--samples",
            "2",
            "--k",
            "1,2",
            "--depth",
            "0",
            "--no-hammer",
            "--workers",
            "1",
            "--remote-url",
            &fake.url,
            "--out",
            out_dir,
            "--json",
        ];
        args.extend_from_slice(store);
        spawn_piped(&mut prod(&args, d.path()))
    };
    let embedded = eval("local", &[]).wait_with_output_checked();

    let mut coordinator = eval(
        "shared",
        &["--store", &url, "--run", "e1", "--no-check-here"],
    );
    // Checking machines drain the queue, each stopping once it is empty (`--idle-exit 0`);
    // another starts whenever the coordinator has queued more (its evaluation's checks, then
    // its canaries'), until the coordinator is done.
    let t = Instant::now();
    let mut recorded = 0;
    while coordinator.try_wait().unwrap().is_none() {
        // A status that does not read as JSON yet counts as nothing to do.
        let s = Command::new(env!("CARGO_BIN_EXE_prod"))
            .args(["queue", "status", "--store", &url, "--run", "e1", "--json"])
            .output()
            .unwrap();
        let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap_or_default();
        if s["todo"].as_i64().unwrap_or(0) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(300),
                "the coordinator neither queued checks nor finished"
            );
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let worker = spawn_piped(&mut prod(
            &[
                "queue",
                "work",
                "--store",
                &url,
                "--run",
                "e1",
                "--workers",
                "1",
                "--idle-exit",
                "0",
                "--json",
            ],
            d.path(),
        ))
        .wait_with_output_checked();
        recorded += worker["recorded"].as_i64().unwrap();
    }
    assert!(recorded >= 3, "{recorded} checks recorded by the workers");
    let shared = coordinator.wait_with_output_checked();
    let pass = |v: &serde_json::Value| v["evaluations"][0]["pass_at_k"].clone();
    assert_eq!(
        pass(&shared),
        pass(&embedded),
        "shared {shared} embedded {embedded}"
    );
    assert!(
        (pass(&shared)[0]["estimate"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{shared}"
    );
    assert_eq!(shared["evaluations"][0]["infra_nodes"], 0);
    assert!(
        !d.path().join("shared/run.sqlite").exists(),
        "the run store is in PostgreSQL"
    );
}

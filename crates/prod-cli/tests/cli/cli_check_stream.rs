//! `prod check -` answers nodes as they arrive on stdin: the verdict of the first node comes
//! back while the caller still holds the pipe open, before it writes the second; a bad line
//! ends the run with exit 2 after every earlier node is answered. Real Coq.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn node(id: &str, statement: &str, proof: &str) -> String {
    serde_json::json!({"id": id, "imports": "From Coq Require Import Arith Lia.",
                       "statement": statement, "proof": proof})
    .to_string()
}

fn start() -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_prod"))
        .args(["check", "-", "--json", "--workers", "1", "--no-hammer"])
        .env_remove("PROD_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("prod runs")
}

/// Lines of the child's stdout, as they come.
fn lines(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

#[test]
fn verdicts_stream_back_while_stdin_is_open() {
    let mut child = start();
    let rx = lines(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let first = node(
        "a",
        "Lemma a : forall n : nat, n + 0 = n.",
        "<no_invoke> intros n. lia.",
    );
    writeln!(stdin, "{first}").unwrap();
    stdin.flush().unwrap();
    // The pipe is still open: the first verdict must arrive anyway (Coq starts in seconds).
    let line = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the first verdict before stdin is closed");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["id"].as_str(), v["verdict"].as_str()),
        (Some("a"), Some("proved"))
    );
    let second = node("b", "Lemma b : 1 = 2.", "<no_invoke> reflexivity.");
    writeln!(stdin, "{second}").unwrap();
    drop(stdin);
    let line = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the second verdict");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["id"].as_str(), v["verdict"].as_str()),
        (Some("b"), Some("failed"))
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_bad_line_ends_the_stream_after_the_earlier_nodes() {
    let mut child = start();
    let rx = lines(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let good = node(
        "a",
        "Lemma a : forall n : nat, n + 0 = n.",
        "<no_invoke> intros n. lia.",
    );
    writeln!(
        stdin,
        "{good}\n{{\"id\": 2, \"statment\": \"x\", \"proof\": \"p\"}}"
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    // All of stdout (the reader ends at its end of file).
    let got: Vec<String> = rx.iter().collect();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("statment"), "{err}");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains("\"proved\""), "{got:?}");
}

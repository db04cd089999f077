//! The protocol client against a fake server over TCP loopback: every recorded reply of a real
//! Isabelle server byte for byte (also delivered one byte per write), interleaved NOTEs of two
//! tasks, a wrong password, cancel on timeout.

use crate::common;

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use prod_check_isabelle::{ClientError, Connection, TaskOutcome};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(10);

/// What the independent splitter finds in a recorded file: the sync reply, the task's notes, the
/// task's end.
struct Expected {
    sync: (String, Value),
    notes_of_task: usize,
    end: Option<(String, Value)>,
}

fn expected(file: &str) -> Expected {
    let msgs = split_stream(&recorded(file));
    let parsed: Vec<(String, Value)> = msgs
        .iter()
        .map(|(_, m)| {
            let (n, a) = name_arg(m);
            (n, serde_json::from_str(&a).unwrap_or(Value::Null))
        })
        .collect();
    let sync = parsed[0].clone();
    let task = sync.1.get("task").cloned();
    let notes_of_task = parsed
        .iter()
        .filter(|(n, v)| n == "NOTE" && task.is_some() && v.get("task") == task.as_ref())
        .count();
    let end = parsed
        .iter()
        .find(|(n, _)| n == "FINISHED" || n == "FAILED")
        .cloned();
    Expected {
        sync,
        notes_of_task,
        end,
    }
}

fn replay_server(trickle: bool) -> String {
    // Commands are answered with the recorded file of their name; use_theories with the three
    // recorded variants in turn.
    raw_server(move |r, w| {
        let mut uses = [
            "use_theories",
            "use_theories.Fail",
            "use_theories.Sledgehammer",
        ]
        .into_iter();
        while let Some((name, _)) = read_command(r) {
            let file = match name.as_str() {
                "use_theories" => uses.next().unwrap_or("use_theories").to_string(),
                "help" | "cancel" | "purge_theories" | "session_build" | "session_start"
                | "session_stop" | "shutdown" => name.clone(),
                _ => "unknown".into(),
            };
            let bytes = recorded(&file);
            if trickle {
                for b in &bytes {
                    if w.write_all(std::slice::from_ref(b)).is_err() {
                        return;
                    }
                    let _ = w.flush();
                }
            } else if w.write_all(&bytes).is_err() {
                return;
            }
            if name == "shutdown" {
                return;
            }
        }
    })
}

fn every_recorded_reply(trickle: bool) {
    if replies_dir().is_none() {
        return;
    }
    let addr = replay_server(trickle);
    let mut c = Connection::connect_tcp(&addr, PASSWORD, T).unwrap();
    assert_eq!(c.server_info["isabelle_name"], "Isabelle2022");

    // Synchronous replies.
    let help = c.call("help", None, T).unwrap();
    assert_eq!(help, expected("help").sync.1);
    assert_eq!(help.as_array().map(Vec::len), Some(9));

    // Asynchronous tasks: the task id, every NOTE of the task, the FINISHED result.
    for file in [
        "session_build",
        "session_start",
        "use_theories",
        "use_theories.Fail",
        "use_theories.Sledgehammer",
        "session_stop",
    ] {
        let name = file.split('.').next().unwrap();
        let exp = expected(file);
        let task = c.start(name, &json!({"session": "HOL"}), T).unwrap();
        assert_eq!(Some(&json!(task)), exp.sync.1.get("task"), "{file}");
        let end = c
            .wait(&task, Instant::now() + T)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let (end_name, end_value) = exp.end.unwrap();
        match end {
            TaskOutcome::Finished(v) => {
                assert_eq!(end_name, "FINISHED", "{file}");
                assert_eq!(v, end_value, "{file}");
            }
            TaskOutcome::Failed(v) => {
                assert_eq!(end_name, "FAILED", "{file}");
                assert_eq!(v, end_value, "{file}");
            }
        }
        assert_eq!(c.take_notes(&task).len(), exp.notes_of_task, "{file}");
    }

    let purge = c
        .call(
            "purge_theories",
            Some(&json!({"session_id": "x", "theories": ["Mock"]})),
            T,
        )
        .unwrap();
    assert_eq!(purge, expected("purge_theories").sync.1);
    assert_eq!(purge["purged"][0]["theory_name"], "Draft.Mock");
    c.cancel("some-task", T).unwrap();
    match c.call("unknown", None, T) {
        Err(ClientError::Error(v)) => assert_eq!(v, json!("Bad command 'unknown'")),
        other => panic!("expected ERROR, got {other:?}"),
    }
    c.call("shutdown", None, T).unwrap();
    // The server closed the connection after shutdown: the next command is an infra error.
    std::thread::sleep(Duration::from_millis(100));
    assert!(c.call("help", None, Duration::from_secs(2)).is_err());
}

#[test]
fn every_recorded_reply_parses() {
    every_recorded_reply(false);
}

#[test]
fn every_recorded_reply_parses_from_split_reads() {
    every_recorded_reply(true);
}

#[test]
fn notes_of_two_tasks_interleave() {
    let long_note = format!(r#"NOTE {{"task":"A","message":"{}"}}"#, "x".repeat(150));
    let addr = raw_server(move |r, w| {
        let _ = read_command(r); // first command
        w.write_all(&frame(r#"OK {"task":"A"}"#)).unwrap();
        let _ = read_command(r); // second command: a NOTE of A comes before its OK
        w.write_all(&frame(&long_note)).unwrap();
        w.write_all(&frame(r#"OK {"task":"B"}"#)).unwrap();
        w.write_all(&frame(r#"NOTE {"task":"B","message":"b1"}"#))
            .unwrap();
        w.write_all(&frame(r#"NOTE {"kind":"nodes_status","nodes_status":[]}"#))
            .unwrap();
        w.write_all(&frame(r#"FINISHED {"task":"B","ok":true}"#))
            .unwrap();
        w.write_all(&frame(r#"NOTE {"task":"A","message":"a2"}"#))
            .unwrap();
        // A long message without its terminator inside the count, then the terminator.
        let fin = r#"FINISHED {"task":"A","ok":true,"pad":"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"}"#;
        w.write_all(format!("{}\n{}\n", fin.len(), fin).as_bytes())
            .unwrap();
        w.flush().unwrap();
    });
    let mut c = Connection::connect_tcp(&addr, PASSWORD, T).unwrap();
    let a = c.start("session_build", &json!({}), T).unwrap();
    let b = c.start("session_start", &json!({}), T).unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("A", "B"));
    match c.wait(&a, Instant::now() + T).unwrap() {
        TaskOutcome::Finished(v) => {
            assert!(v["pad"].as_str().is_some_and(|p| p.starts_with("yyy")))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.take_notes(&a).len(), 2);
    // B ended while we waited for A: its end and note were kept for it.
    assert!(matches!(
        c.wait(&b, Instant::now() + T).unwrap(),
        TaskOutcome::Finished(_)
    ));
    let notes_b = c.take_notes(&b);
    assert_eq!(notes_b.len(), 1);
    assert_eq!(notes_b[0]["message"], "b1");
}

#[test]
fn wrong_password_is_a_handshake_error() {
    if replies_dir().is_none() {
        return;
    }
    let fake = Fake::start(false);
    match Connection::connect_tcp(&fake.addr, "wrong", T) {
        Err(ClientError::Handshake) => {}
        Err(e) => panic!("expected a handshake error, got {e}"),
        Ok(_) => panic!("expected a handshake error, got a connection"),
    }
    // Nothing at all listening: a connect error (also infra).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    assert!(matches!(
        Connection::connect_tcp(&port.to_string(), PASSWORD, T),
        Err(ClientError::Connect { .. })
    ));
}

#[test]
fn timeout_cancels_the_task() {
    let (tx, rx) = mpsc::channel();
    let addr = raw_server(move |r, w| {
        let (name, _) = read_command(r).unwrap();
        assert_eq!(name, "use_theories");
        w.write_all(&frame(r#"OK {"task":"slow"}"#)).unwrap();
        w.write_all(&frame(
            r#"NOTE {"task":"slow","message":"theory Draft.X 10%"}"#,
        ))
        .unwrap();
        let cmd = read_command(r).unwrap();
        tx.send(cmd).unwrap();
        w.write_all(b"OK\n").unwrap();
        w.write_all(&frame(
            r#"FAILED {"task":"slow","kind":"error","message":"Interrupt"}"#,
        ))
        .unwrap();
        // The connection stays usable afterwards.
        let (name, _) = read_command(r).unwrap();
        assert_eq!(name, "help");
        w.write_all(&frame(r#"OK ["help"]"#)).unwrap();
    });
    let mut c = Connection::connect_tcp(&addr, PASSWORD, T).unwrap();
    let t0 = Instant::now();
    let r = c.run_task(
        "use_theories",
        &json!({}),
        Instant::now() + Duration::from_millis(300),
        T,
    );
    assert!(matches!(r, Err(ClientError::Timeout(_))), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let (name, arg) = rx.recv_timeout(T).unwrap();
    assert_eq!(name, "cancel");
    assert_eq!(arg, json!({"task": "slow"}));
    assert_eq!(c.call("help", None, T).unwrap(), json!(["help"]));
}

#[test]
fn server_closing_mid_task_is_a_lost_connection() {
    let addr = raw_server(move |r, w| {
        let _ = read_command(r);
        w.write_all(&frame(r#"OK {"task":"t"}"#)).unwrap();
        w.write_all(&frame(
            r#"NOTE {"task":"t","message":"theory Draft.X 42%"}"#,
        ))
        .unwrap();
        // Half a length-prefixed message, then the connection closes.
        w.write_all(b"500\nFINISHED {\"task\":").unwrap();
        let _ = w.shutdown(std::net::Shutdown::Both);
    });
    let mut c = Connection::connect_tcp(&addr, PASSWORD, T).unwrap();
    let r = c.run_task("use_theories", &json!({}), Instant::now() + T, T);
    assert!(matches!(r, Err(ClientError::Lost(_))), "{r:?}");
    assert!(c.is_closed());
    assert!(matches!(c.call("help", None, T), Err(ClientError::Lost(_))));
}

//! The server commands the checker uses, with typed arguments and results
//! (`session_start`, `use_theories`, `purge_theories`, `session_stop`, `shutdown`).

use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::client::{ClientError, Connection, TaskOutcome};

/// A started logic session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: String,
    /// The server's temporary directory for this session (on the server's file system).
    pub tmp_dir: String,
}

/// `session_start {session, dirs, options}` → `FINISHED {session_id, tmp_dir}`.
pub fn session_start(
    c: &mut Connection,
    session: &str,
    dirs: &[String],
    options: &[String],
    deadline: Instant,
    grace: Duration,
) -> Result<SessionInfo, ClientError> {
    let mut arg = json!({ "session": session });
    if !dirs.is_empty() {
        arg["dirs"] = json!(dirs);
    }
    if !options.is_empty() {
        arg["options"] = json!(options);
    }
    match c.run_task("session_start", &arg, deadline, grace)? {
        TaskOutcome::Finished(v) => {
            let id = v.get("session_id").and_then(Value::as_str);
            let tmp = v.get("tmp_dir").and_then(Value::as_str).unwrap_or("");
            match id {
                Some(id) => Ok(SessionInfo {
                    session_id: id.to_string(),
                    tmp_dir: tmp.to_string(),
                }),
                None => Err(ClientError::Protocol(format!(
                    "session_start finished without a session_id: {v}"
                ))),
            }
        }
        TaskOutcome::Failed(v) => Err(ClientError::TaskFailed(v)),
    }
}

/// `session_stop {session_id}` (asynchronous).
pub fn session_stop(
    c: &mut Connection,
    session_id: &str,
    deadline: Instant,
    grace: Duration,
) -> Result<(), ClientError> {
    match c.run_task(
        "session_stop",
        &json!({ "session_id": session_id }),
        deadline,
        grace,
    )? {
        TaskOutcome::Finished(_) => Ok(()),
        TaskOutcome::Failed(v) => Err(ClientError::TaskFailed(v)),
    }
}

/// `shutdown`: stops every session and the server.
pub fn shutdown(c: &mut Connection, timeout: Duration) -> Result<(), ClientError> {
    c.call("shutdown", None, timeout).map(|_| ())
}

/// `purge_theories {session_id, theories, master_dir}` (synchronous).
pub fn purge_theories(
    c: &mut Connection,
    session_id: &str,
    theories: &[String],
    master_dir: &str,
    timeout: Duration,
) -> Result<PurgeResult, ClientError> {
    let v = c.call(
        "purge_theories",
        Some(&json!({ "session_id": session_id, "theories": theories, "master_dir": master_dir })),
        timeout,
    )?;
    serde_json::from_value(v.clone())
        .map_err(|e| ClientError::Protocol(format!("purge_theories result ({e}): {v}")))
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PurgeResult {
    pub purged: Vec<NodeName>,
    pub retained: Vec<NodeName>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct NodeName {
    pub node_name: String,
    pub theory_name: String,
}

/// Arguments of one `use_theories` pass.
#[derive(Clone, Debug)]
pub struct UseTheories<'a> {
    pub session_id: &'a str,
    pub theories: &'a [String],
    pub master_dir: &'a str,
    /// Seconds without any command progress after which the server gives up (per-step limit).
    pub watchdog_timeout_s: u32,
}

/// `use_theories` → its result, or `Err(Timeout)` after our own deadline (the task is cancelled),
/// or `Err(TaskFailed)` (e.g. the server interrupted it).
pub fn use_theories(
    c: &mut Connection,
    args: &UseTheories<'_>,
    deadline: Instant,
    grace: Duration,
) -> Result<UseTheoriesResult, ClientError> {
    let arg = json!({
        "session_id": args.session_id,
        "theories": args.theories,
        "master_dir": args.master_dir,
        "watchdog_timeout": args.watchdog_timeout_s,
        "unicode_symbols": false,
    });
    match c.run_task("use_theories", &arg, deadline, grace)? {
        TaskOutcome::Finished(v) => serde_json::from_value(v.clone()).map_err(|e| {
            ClientError::Protocol(format!(
                "use_theories result ({e}): {}",
                crate::client::truncate(&v.to_string(), 300)
            ))
        }),
        TaskOutcome::Failed(v) => Err(ClientError::TaskFailed(v)),
    }
}

/// `use_theories_results` (system manual).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UseTheoriesResult {
    pub ok: bool,
    /// All errors, those of imported theories included.
    pub errors: Vec<ServerMessage>,
    pub nodes: Vec<NodeResult>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NodeResult {
    pub node_name: String,
    pub theory_name: String,
    pub status: NodeStatus,
    pub messages: Vec<ServerMessage>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    pub ok: bool,
    pub total: u64,
    pub unprocessed: u64,
    pub running: u64,
    pub warned: u64,
    pub failed: u64,
    pub finished: u64,
    pub canceled: bool,
    pub consolidated: bool,
    pub percentage: u64,
}

impl NodeStatus {
    /// Every command ran to its end and none failed (the node is complete).
    pub fn complete(&self) -> bool {
        self.ok
            && self.consolidated
            && !self.canceled
            && self.failed == 0
            && self.unprocessed == 0
            && self.running == 0
            && self.finished == self.total
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ServerMessage {
    pub kind: String,
    pub message: String,
    pub pos: Option<Position>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Position {
    pub line: Option<usize>,
    /// 1-based, in Isabelle symbols.
    pub offset: Option<usize>,
    pub end_offset: Option<usize>,
    pub file: Option<String>,
}

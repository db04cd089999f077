//! A client of the Isabelle system server over any byte stream (TCP in production).
//!
//! One reader thread turns the incoming bytes into [`Message`]s and hands them over a channel, so
//! that every wait has a deadline whatever the stream is. Replies are demultiplexed here:
//! `OK`/`ERROR` answer the last command (commands and their results strictly alternate), while
//! `NOTE`/`FINISHED`/`FAILED` carry a `task` and are queued per task until someone waits for it.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::framing::{self, Message};

/// Why a server exchange did not produce a result. Every variant is an infrastructure problem
/// (the proof is never blamed for it) except that `Error` carries the server's own `ERROR` reply.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the Isabelle server at {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("the Isabelle server refused the password (it closed the connection)")]
    Handshake,
    #[error("connection to the Isabelle server lost: {0}")]
    Lost(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("no reply from the Isabelle server within {0:?}")]
    Timeout(Duration),
    /// The server answered `ERROR …` to a command.
    #[error("the Isabelle server answered ERROR: {0}")]
    Error(Value),
    /// An asynchronous task ended with `FAILED …`.
    #[error("the Isabelle server task failed: {0}")]
    TaskFailed(Value),
}

/// The end of an asynchronous task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskOutcome {
    Finished(Value),
    Failed(Value),
}

/// One incoming event from the reader thread.
enum Incoming {
    Message(Message),
    /// The stream ended or broke; nothing more will come.
    Closed(String),
}

/// A connection to one Isabelle server, after the password handshake.
pub struct Connection {
    writer: Box<dyn Write + Send>,
    incoming: Receiver<Incoming>,
    /// `OK`/`ERROR` replies not yet taken (at most one in a correct exchange).
    sync_replies: VecDeque<Message>,
    /// `NOTE`s per task, in arrival order.
    notes: HashMap<String, Vec<Value>>,
    /// Ends of tasks that nobody has waited for yet.
    finished: HashMap<String, TaskOutcome>,
    closed: Option<String>,
    /// The server's `OK` to the password (Isabelle version information).
    pub server_info: Value,
    /// Commands sent so far.
    pub commands_sent: usize,
    /// The socket, to shut down on drop so that the reader thread ends.
    socket: Option<TcpStream>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(s) = &self.socket {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Connection {
    /// Connect over TCP and shake hands (`addr` is `HOST:PORT`).
    pub fn connect_tcp(addr: &str, password: &str, timeout: Duration) -> Result<Self, ClientError> {
        let connect_err = |source| ClientError::Connect {
            addr: addr.to_string(),
            source,
        };
        let sock = addr
            .to_socket_addrs()
            .map_err(connect_err)?
            .next()
            .ok_or_else(|| {
                connect_err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no address",
                ))
            })?;
        let stream = TcpStream::connect_timeout(&sock, timeout).map_err(connect_err)?;
        let _ = stream.set_nodelay(true);
        let reader = stream.try_clone().map_err(connect_err)?;
        let socket = stream.try_clone().map_err(connect_err)?;
        let mut c = Self::handshake(reader, stream, password, timeout)?;
        c.socket = Some(socket);
        Ok(c)
    }

    /// Shake hands over any stream: send the password as a short line, expect `OK …`. The server
    /// answers a wrong password by closing the connection silently.
    pub fn handshake(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        password: &str,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("isabelle-reader".into())
            .spawn(move || {
                let mut r = BufReader::with_capacity(1 << 16, reader);
                loop {
                    match framing::read_message(&mut r) {
                        Ok(Some(bytes)) => {
                            if tx.send(Incoming::Message(Message::parse(&bytes))).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {
                            let _ = tx.send(Incoming::Closed("end of stream".into()));
                            return;
                        }
                        Err(e) => {
                            let _ = tx.send(Incoming::Closed(e.to_string()));
                            return;
                        }
                    }
                }
            })
            .map_err(|e| ClientError::Lost(format!("cannot start the reader thread: {e}")))?;
        let mut c = Connection {
            writer: Box::new(writer),
            incoming: rx,
            sync_replies: VecDeque::new(),
            notes: HashMap::new(),
            finished: HashMap::new(),
            closed: None,
            server_info: Value::Null,
            commands_sent: 0,
            socket: None,
        };
        framing::write_line(&mut c.writer, password)
            .map_err(|e| ClientError::Lost(e.to_string()))?;
        let deadline = Instant::now() + timeout;
        match c.next_sync(deadline) {
            Ok(m) if m.name == "OK" => {
                c.server_info = m.json().unwrap_or(Value::Null);
                Ok(c)
            }
            Ok(m) => Err(ClientError::Protocol(format!(
                "unexpected answer to the password: {} {}",
                m.name,
                truncate(&m.argument, 200)
            ))),
            Err(ClientError::Lost(_)) => Err(ClientError::Handshake),
            Err(e) => Err(e),
        }
    }

    /// Is the connection known to be dead?
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// Take one event from the reader (with a deadline) and file it.
    fn pump(&mut self, deadline: Instant) -> Result<(), ClientError> {
        if let Some(why) = &self.closed {
            return Err(ClientError::Lost(why.clone()));
        }
        let now = Instant::now();
        let wait = deadline.saturating_duration_since(now);
        match self.incoming.recv_timeout(wait) {
            Ok(Incoming::Message(m)) => {
                self.file(m);
                Ok(())
            }
            Ok(Incoming::Closed(why)) => {
                self.closed = Some(why.clone());
                Err(ClientError::Lost(why))
            }
            Err(RecvTimeoutError::Timeout) => Err(ClientError::Timeout(wait)),
            Err(RecvTimeoutError::Disconnected) => {
                self.closed = Some("reader stopped".into());
                Err(ClientError::Lost("reader stopped".into()))
            }
        }
    }

    fn file(&mut self, m: Message) {
        match m.name.as_str() {
            "OK" | "ERROR" => self.sync_replies.push_back(m),
            "NOTE" | "FINISHED" | "FAILED" => {
                let v = m
                    .json()
                    .unwrap_or_else(|_| json!({ "unparsed": m.argument }));
                let task = v.get("task").and_then(Value::as_str).map(str::to_string);
                match (m.name.as_str(), task) {
                    ("NOTE", Some(t)) => self.notes.entry(t).or_default().push(v),
                    ("FINISHED", Some(t)) => {
                        self.finished.insert(t, TaskOutcome::Finished(v));
                    }
                    ("FAILED", Some(t)) => {
                        self.finished.insert(t, TaskOutcome::Failed(v));
                    }
                    // A note without a task (e.g. `nodes_status` in session_build's stream) is
                    // filed under the empty task and never consulted (only the latest kept).
                    (_, None) => {
                        let bucket = self.notes.entry(String::new()).or_default();
                        if bucket.len() >= 1000 {
                            bucket.clear();
                        }
                        bucket.push(v)
                    }
                    _ => {}
                }
            }
            _ => {
                // Unknown replies are kept as notes of no task rather than breaking the stream.
                self.notes
                    .entry(String::new())
                    .or_default()
                    .push(json!({ "unknown_reply": m.name, "argument": m.argument }));
            }
        }
    }

    fn next_sync(&mut self, deadline: Instant) -> Result<Message, ClientError> {
        loop {
            if let Some(m) = self.sync_replies.pop_front() {
                return Ok(m);
            }
            self.pump(deadline)?;
        }
    }

    pub(crate) fn send(&mut self, name: &str, argument: Option<&Value>) -> Result<(), ClientError> {
        if let Some(why) = &self.closed {
            return Err(ClientError::Lost(why.clone()));
        }
        let text = framing::command_text(name, argument);
        self.commands_sent += 1;
        framing::write_message(&mut self.writer, text.as_bytes()).map_err(|e| {
            self.closed = Some(e.to_string());
            ClientError::Lost(e.to_string())
        })
    }

    /// A synchronous command: `OK result` → `Ok(result)`, `ERROR result` → `Err(Error(result))`.
    pub fn call(
        &mut self,
        name: &str,
        argument: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        // Strict alternation: a reply left over from an abandoned call is not this call's.
        self.sync_replies.clear();
        self.send(name, argument)?;
        let m = match self.next_sync(Instant::now() + timeout) {
            Ok(m) => m,
            Err(e) => {
                // A reply that comes later would be taken for the next command's: this
                // connection can no longer be trusted to keep results and commands paired.
                if self.closed.is_none() {
                    self.closed = Some(format!("no reply to `{name}`"));
                }
                return Err(e);
            }
        };
        let v = m.json().map_err(|e| {
            ClientError::Protocol(format!(
                "{} reply is not JSON ({e}): {}",
                m.name,
                truncate(&m.argument, 200)
            ))
        })?;
        if m.name == "OK" {
            Ok(v)
        } else {
            Err(ClientError::Error(v))
        }
    }

    /// Start an asynchronous command; returns its task id.
    pub fn start(
        &mut self,
        name: &str,
        argument: &Value,
        timeout: Duration,
    ) -> Result<String, ClientError> {
        let v = self.call(name, Some(argument), timeout)?;
        v.get("task")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ClientError::Protocol(format!("{name}: OK without a task: {v}")))
    }

    /// Wait until `task` is `FINISHED` or `FAILED` (its notes stay available in
    /// [`Connection::take_notes`]). On `Timeout` the task is still running.
    pub fn wait(&mut self, task: &str, deadline: Instant) -> Result<TaskOutcome, ClientError> {
        loop {
            if let Some(o) = self.finished.remove(task) {
                return Ok(o);
            }
            self.pump(deadline)?;
        }
    }

    /// The notes received so far for `task` (removed from the connection).
    pub fn take_notes(&mut self, task: &str) -> Vec<Value> {
        self.notes.remove(task).unwrap_or_default()
    }

    /// `cancel {"task": …}` (synchronous; only a hint to the server).
    pub fn cancel(&mut self, task: &str, timeout: Duration) -> Result<(), ClientError> {
        self.call("cancel", Some(&json!({ "task": task })), timeout)
            .map(|_| ())
    }

    /// Run an asynchronous command to its end. When `deadline` passes, the task is cancelled and
    /// `Err(Timeout)` returned after the server confirmed the end (or `grace` passed).
    pub fn run_task(
        &mut self,
        name: &str,
        argument: &Value,
        deadline: Instant,
        grace: Duration,
    ) -> Result<TaskOutcome, ClientError> {
        let task = self.start(name, argument, grace)?;
        let r = self.run_started(&task, deadline, grace);
        // Nobody reads a finished task's progress notes: do not keep them for the connection's life.
        self.notes.remove(&task);
        r
    }

    fn run_started(
        &mut self,
        task: &str,
        deadline: Instant,
        grace: Duration,
    ) -> Result<TaskOutcome, ClientError> {
        let task = task.to_string();
        match self.wait(&task, deadline) {
            Err(ClientError::Timeout(_)) => {
                let limit = deadline.saturating_duration_since(Instant::now());
                self.cancel(&task, grace)?;
                // Drain the task's end so that it does not linger on this connection.
                match self.wait(&task, Instant::now() + grace) {
                    Ok(_) | Err(ClientError::Timeout(_)) => Err(ClientError::Timeout(limit)),
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
    }
}

pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Parse the first line `isabelle server` prints:
/// `server "NAME" = 127.0.0.1:PORT (password "UUID")` → (`127.0.0.1:PORT`, `UUID`).
pub fn parse_server_banner(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    let rest = line.strip_prefix("server ")?;
    let eq = rest.find(" = ")?;
    let rest = &rest[eq + 3..];
    let sp = rest.find(' ')?;
    let addr = rest[..sp].to_string();
    let pw = rest[sp..]
        .trim()
        .strip_prefix("(password \"")?
        .strip_suffix("\")")?;
    if addr.is_empty() || pw.is_empty() || !addr.contains(':') {
        return None;
    }
    Some((addr, pw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banner() {
        assert_eq!(
            parse_server_banner("server \"test\" = 127.0.0.1:4711 (password \"XYZ\")\n"),
            Some(("127.0.0.1:4711".into(), "XYZ".into()))
        );
        assert_eq!(parse_server_banner("garbage"), None);
        assert_eq!(
            parse_server_banner("server \"x\" = 127.0.0.1:1 (password \"\")"),
            None
        );
    }
}

//! One persistent, sandboxed `coqtop -emacs -quiet` and the protocol to drive it.
//!
//! The worker sends one sentence at a time, each followed by a sentinel query with a fresh
//! unguessable nonce (see [`crate::protocol`]), and judges every sentence by Coq's own record:
//! the state number in the prompt (a failed sentence leaves it unchanged) and the open-proof
//! list. A watchdog outside Coq sends SIGINT when a sentence overruns its limit and kills the
//! process when that does not help.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::config::CoqCheckConfig;
use crate::protocol::{Prompt, RawReply, ReplyScanner, Scan};
use crate::sandbox;

/// After the limit, wait this long for Coq's own timeout before sending SIGINT…
const SIGINT_AFTER: Duration = Duration::from_millis(400);
/// …and this long after SIGINT before killing the process.
const KILL_AFTER: Duration = Duration::from_millis(1200);

/// Why a sentence got no answer. The worker is unusable afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The process ended (killed from outside, crashed, out of memory at the OS level).
    Lost(String),
    /// Neither Coq's timeout nor SIGINT stopped the sentence; the process was killed.
    Unresponsive,
    /// Coq answered something the protocol does not allow.
    Protocol(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Lost(m) => write!(f, "coq worker lost: {m}"),
            Fault::Unresponsive => write!(f, "coq worker did not answer SIGINT and was killed"),
            Fault::Protocol(m) => write!(f, "coq protocol error: {m}"),
        }
    }
}

/// A sentence's answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub output: String,
    /// The sentence's own prompt.
    pub prompt: Prompt,
    /// The prompt after the sentinel.
    pub after: Prompt,
    /// The state before the sentence.
    pub before: u64,
    pub elapsed: Duration,
    /// Our SIGINT stopped it.
    pub interrupted: bool,
    /// Prompts Coq printed before the sentinel: one per sentence it read (see
    /// [`crate::protocol::RawReply::prompts`]).
    pub prompts: usize,
    /// coqtop's address space just before the sentence was sent (unknown for the sentences of
    /// a pipelined batch, which Coq reads ahead).
    pub memory_before: Memory,
}

/// coqtop's address space in MiB, from `/proc`: `VmSize` now and `VmPeak` so far (what
/// `prlimit --as` bounds). What the checker itself knows about memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub size_mb: Option<u64>,
    pub peak_mb: Option<u64>,
}

impl Memory {
    /// The most address space one sentence can be shown to have held, from the snapshots
    /// before and after it: the size at either end, and the peak after it when the sentence
    /// raised the peak. A peak an earlier sentence (or an earlier attempt in the same process)
    /// reached says nothing about this one; a snapshot not taken before counts its peak.
    pub fn sentence_peak_mb(before: Memory, after: Memory) -> Option<u64> {
        let raised = match (before.peak_mb, after.peak_mb) {
            (Some(b), Some(a)) if a > b => Some(a),
            (None, a) => a,
            _ => None,
        };
        [before.size_mb, after.size_mb, raised]
            .into_iter()
            .flatten()
            .max()
    }
}

impl Reply {
    /// Coq accepted the sentence (its state advanced).
    pub fn ok(&self) -> bool {
        self.prompt.state > self.before
    }
}

/// A running coqtop.
pub struct Worker {
    child: Child,
    to_coq: Sender<Vec<u8>>,
    from_coq: Receiver<Vec<u8>>,
    pending: Vec<u8>,
    nonce: String,
    counter: u64,
    coq_pid: Option<i32>,
    /// The state after the last sentinel: where the next sentence starts.
    pub state: u64,
    /// The prompt after the last sentinel.
    pub prompt: Prompt,
    /// The state right after start-up (an empty environment).
    pub initial_state: u64,
    /// Attempts run since start.
    pub attempts: u64,
    /// The prompt's name outside any proof (`Coq` for Coq 8, `Rocq` for Rocq 9), as the first
    /// prompt said.
    pub top_name: String,
    /// The prover has the `Printing Fully Qualified` flag (Rocq 9): `Print Assumptions` can then
    /// name every assumption by its full path.
    pub fully_qualified: bool,
    /// Set when the worker must not be used again.
    pub broken: bool,
    /// A SIGINT was sent since start. Coq may take it while running a later sentence (the
    /// sentinel, the next step, the assumptions walk with its memo table), so nothing that
    /// follows in this process is trusted: the attempt cannot be `Proved` and the worker is
    /// replaced.
    pub signalled: bool,
}

/// The channels to and from a coqtop's pipes.
type Io = (Sender<Vec<u8>>, Receiver<Vec<u8>>);

fn spawn_io(child: &mut Child) -> Result<Io, String> {
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let (to_tx, to_rx) = channel::<Vec<u8>>();
    let (from_tx, from_rx) = channel::<Vec<u8>>();
    // Writer thread: the caller never blocks on a full pipe, so the watchdog always runs.
    std::thread::Builder::new()
        .name("coq-writer".into())
        .spawn(move || {
            for chunk in to_rx {
                if stdin.write_all(&chunk).and_then(|_| stdin.flush()).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    // Reader thread: drains Coq's output so Coq never blocks on a full pipe either.
    std::thread::Builder::new()
        .name("coq-reader".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if from_tx.send(buf[..n].to_vec()).is_err() {
                            break;
                        }
                    }
                }
            }
        })
        .map_err(|e| e.to_string())?;
    Ok((to_tx, from_rx))
}

/// `VmPeak` of process `pid`, in MiB.
pub(crate) fn vm_peak_mb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmPeak:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// Did a process with this peak really run out of the address space `prlimit --as` gives it?
/// The allocation that fails can be as large as the heap's next increment (OCaml grows its
/// heap by a share of its size), so a process that used at least half its limit counts.
pub(crate) fn near_memory_limit(peak_mb: Option<u64>, limit_mb: u64) -> bool {
    peak_mb.is_some_and(|p| p.saturating_mul(2) >= limit_mb)
}

/// All processes below `root` (pids), by scanning `/proc`.
pub(crate) fn descendants(root: i32) -> Vec<(i32, String)> {
    let mut parent_of = vec![];
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may contain spaces, so split at the last ')'.
            let Some(close) = stat.rfind(')') else {
                continue;
            };
            let comm = stat
                .get(stat.find('(').map_or(0, |i| i + 1)..close)
                .unwrap_or("")
                .to_string();
            let ppid = stat[close + 1..]
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid, comm));
            }
        }
    }
    let mut out = vec![];
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (pid, ppid, comm) in &parent_of {
            if *ppid == p {
                out.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    out
}

/// `PROD_CHECK_TRACE=1` prints every sentence with its time (debugging and profiling).
fn trace_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("PROD_CHECK_TRACE").is_some_and(|v| v != "0"))
}

/// The process that runs the sentences: `coqtop` (Coq 8), `rocqworker` (Rocq 9, which the
/// `coqtop` shim hands over to in the same process).
fn is_prover_process(comm: &str) -> bool {
    comm.starts_with("coqtop") || comm.starts_with("rocqworker") || comm.starts_with("rocq")
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects; a stale pid at worst signals nothing.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The sandboxed `coqtop -emacs -quiet` command, with the prover flags, the plugin's and the
/// load paths' arguments.
fn coqtop_command(cfg: &CoqCheckConfig) -> std::process::Command {
    let coqtop = cfg.coqtop.to_string_lossy().into_owned();
    // coqtop prints prompts and errors on stderr and messages on stdout; one pipe keeps
    // them in the order Coq wrote them.
    let plugin_args = cfg
        .plugin
        .as_ref()
        .map(|p| p.coqtop_args())
        .unwrap_or_default();
    let mut args: Vec<&str> = vec!["-c", "exec \"$0\" -emacs -quiet \"$@\" 2>&1", &coqtop];
    args.extend_from_slice(crate::config::PROVER_FLAGS);
    args.extend(plugin_args.iter().map(String::as_str));
    let load_paths = sandbox::load_path_args(cfg);
    args.extend(load_paths.iter().map(String::as_str));
    let mut cmd = sandbox::command(cfg, &PathBuf::from("/bin/sh"), &args, None);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

/// Start the sandboxed coqtop with its pipe threads; the process is killed again when the
/// threads cannot start.
fn spawn_coqtop(cfg: &CoqCheckConfig) -> Result<(Child, Io), String> {
    let mut child = sandbox::spawn_persistent(coqtop_command(cfg))
        .map_err(|e| format!("cannot start coqtop: {e}"))?;
    match spawn_io(&mut child) {
        Ok(io) => Ok((child, io)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

impl Worker {
    /// Start a sandboxed coqtop and wait for its first prompt.
    pub fn start(cfg: &CoqCheckConfig) -> Result<Worker, String> {
        let (child, (to_coq, from_coq)) = spawn_coqtop(cfg)?;
        let mut w = Worker::fresh(child, to_coq, from_coq);
        // The first sentinel gives the initial state (its answer is the only prompt we trust).
        match w.sentinel_only(Duration::from_secs(60)) {
            Ok(p) => {
                w.settle(&p, cfg)?;
                Ok(w)
            }
            Err(f) => {
                w.kill();
                Err(format!("coqtop did not start: {f}"))
            }
        }
    }

    /// A worker around a just-started coqtop, with a fresh nonce; its state is unknown until
    /// the first sentinel answers.
    fn fresh(child: Child, to_coq: Sender<Vec<u8>>, from_coq: Receiver<Vec<u8>>) -> Worker {
        let nonce = format!("{:016x}", rand::thread_rng().gen::<u64>());
        let blank = Prompt {
            name: "Coq".into(),
            state: 0,
            open_proofs: vec![],
            depth: 0,
        };
        Worker {
            child,
            to_coq,
            from_coq,
            pending: vec![],
            nonce,
            counter: 0,
            coq_pid: None,
            state: 0,
            prompt: blank,
            initial_state: 0,
            attempts: 0,
            top_name: String::new(),
            fully_qualified: false,
            broken: false,
            signalled: false,
        }
    }

    /// From the first prompt `p`, record the blank state every context starts from: the
    /// prompt's name, whether the prover has `Printing Fully Qualified`, the loaded plugin.
    fn settle(&mut self, p: &Prompt, cfg: &CoqCheckConfig) -> Result<(), String> {
        self.initial_state = p.state;
        if !p.open_proofs.is_empty() {
            self.kill();
            return Err("coqtop started inside a proof".into());
        }
        self.top_name = p.name.clone();
        self.probe_fully_qualified()?;
        self.initial_state = self.state;
        self.declare_plugin(cfg)
    }

    /// Ask whether the prover has the `Printing Fully Qualified` flag (so `Print Assumptions`
    /// can name every assumption by its full path).
    fn probe_fully_qualified(&mut self) -> Result<(), String> {
        // Coq 8.16 does not know the flag (a warning, no state change worth trusting).
        match self.run("Test Printing Fully Qualified.", Duration::from_secs(60)) {
            Ok(r) => {
                self.fully_qualified = r.ok() && r.output.contains("Printing Fully Qualified is")
            }
            Err(f) => return Err(format!("coqtop did not answer: {f}")),
        }
        Ok(())
    }

    /// Load the ProD plugin, when configured, and move the initial state past it.
    fn declare_plugin(&mut self, cfg: &CoqCheckConfig) -> Result<(), String> {
        // The plugin is part of the blank state every context starts from.
        if let Some(plugin) = &cfg.plugin {
            match self.run(plugin.declare_sentence, Duration::from_secs(60)) {
                Ok(r) if r.ok() => self.initial_state = r.after.state,
                Ok(r) => {
                    self.kill();
                    return Err(format!(
                        "coqtop cannot load the ProD plugin: {}",
                        crate::protocol::error_message(&r.output)
                    ));
                }
                Err(f) => return Err(format!("coqtop cannot load the ProD plugin: {f}")),
            }
        }
        Ok(())
    }

    fn next_sentinel(&mut self) -> String {
        self.counter += 1;
        // Short enough that Coq never breaks the answer line.
        format!("S{}n{}", self.nonce, self.counter)
    }

    fn send(&mut self, text: &str) -> Result<(), Fault> {
        self.to_coq
            .send(text.as_bytes().to_vec())
            .map_err(|_| Fault::Lost("stdin closed".into()))
    }

    /// The pid of coqtop itself (below prlimit/bwrap/sh), found lazily.
    fn coq_pid(&mut self) -> Option<i32> {
        if self.coq_pid.is_none() {
            let root = self.child.id() as i32;
            let found = descendants(root)
                .into_iter()
                .find(|(_, comm)| is_prover_process(comm))
                .map(|(p, _)| p);
            self.coq_pid = found.or_else(|| {
                // Not sandboxed and exec'd in place: the child itself is coqtop.
                std::fs::read_to_string(format!("/proc/{root}/comm"))
                    .ok()
                    .filter(|c| is_prover_process(c))
                    .map(|_| root)
            });
        }
        self.coq_pid
    }

    /// Resident memory of coqtop, in MiB.
    pub fn rss_mb(&mut self) -> Option<u64> {
        let pid = self.coq_pid()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024)
    }

    /// coqtop's address space now ([`Memory`]); unknown fields when `/proc` cannot tell.
    pub fn memory(&mut self) -> Memory {
        let Some(pid) = self.coq_pid() else {
            return Memory::default();
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return Memory::default();
        };
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb / 1024)
        };
        Memory {
            size_mb: field("VmSize:"),
            peak_mb: field("VmPeak:"),
        }
    }

    /// Kill the whole process tree (the worker is unusable afterwards).
    pub fn kill(&mut self) {
        self.broken = true;
        if let Some(pid) = self.coq_pid() {
            signal(pid, libc::SIGKILL);
        }
        for (pid, _) in descendants(self.child.id() as i32) {
            signal(pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send SIGKILL to coqtop only, as an outside crash would (for fault tests).
    pub fn kill_coq_for_test(&mut self) -> bool {
        match self.coq_pid() {
            Some(pid) => {
                signal(pid, libc::SIGKILL);
                true
            }
            None => false,
        }
    }

    /// A handle that can kill this worker's coqtop from another thread (fault tests).
    pub fn coq_pid_for_test(&mut self) -> Option<i32> {
        self.coq_pid()
    }

    fn sentinel_only(&mut self, limit: Duration) -> Result<Prompt, Fault> {
        let s = self.next_sentinel();
        self.send(&format!("Locate {s}.\n"))?;
        // Start-up output (banner, messages) comes before the sentinel's answer; only the
        // answer and the prompt after it matter.
        let marker = format!("No object of basename {s}\n");
        let deadline = Instant::now() + limit;
        let mut buf = std::mem::take(&mut self.pending);
        loop {
            if let Some(pos) = buf
                .windows(marker.len())
                .position(|w| w == marker.as_bytes())
            {
                let rest = &buf[pos + marker.len()..];
                if let (Some(o), Some(c)) = (
                    rest.windows(8).position(|w| w == b"<prompt>"),
                    rest.windows(9).position(|w| w == b"</prompt>"),
                ) {
                    if o < c {
                        let p = crate::protocol::parse_prompt(&String::from_utf8_lossy(
                            &rest[o + 8..c],
                        ))
                        .ok_or_else(|| Fault::Protocol("bad prompt".into()))?;
                        self.pending = rest[c + 9..].to_vec();
                        self.state = p.state;
                        self.prompt = p.clone();
                        return Ok(p);
                    }
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Fault::Unresponsive);
            }
            match self.from_coq.recv_timeout(deadline - now) {
                Ok(chunk) => buf.extend_from_slice(&chunk),
                Err(RecvTimeoutError::Timeout) => return Err(Fault::Unresponsive),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Fault::Lost(
                        String::from_utf8_lossy(&buf).chars().take(500).collect(),
                    ))
                }
            }
        }
    }

    /// Run one sentence (`text` must be exactly one complete sentence) with a wall-clock
    /// `limit`. On `Err` the worker has been killed.
    pub fn run(&mut self, text: &str, limit: Duration) -> Result<Reply, Fault> {
        let r = self.run_inner(text, limit);
        if trace_enabled() {
            match &r {
                Ok(rep) => eprintln!(
                    "[coq {:>7.2} ms] {} -> {} {:?}",
                    rep.elapsed.as_secs_f64() * 1000.0,
                    text.chars().take(60).collect::<String>(),
                    rep.prompt.state,
                    rep.prompt.open_proofs
                ),
                Err(f) => eprintln!(
                    "[coq fault] {} -> {f}",
                    text.chars().take(60).collect::<String>()
                ),
            }
        }
        if r.is_err() {
            self.kill();
        }
        r
    }

    fn run_inner(&mut self, text: &str, limit: Duration) -> Result<Reply, Fault> {
        if self.broken {
            return Err(Fault::Lost("worker already broken".into()));
        }
        let before = self.state;
        let memory_before = self.memory();
        let s = self.next_sentinel();
        // The sentence on its own line(s), then the sentinel query on its own line.
        self.send(&format!("{text}\nLocate {s}.\n"))?;
        let start = Instant::now();
        let mut scanner = ReplyScanner::new(&s);
        let mut interrupted = false;
        let mut deadline = start + limit + SIGINT_AFTER;
        let mut chunk = std::mem::take(&mut self.pending);
        loop {
            if !chunk.is_empty() {
                if let Scan::Done(result, rest) = scanner.push(&chunk) {
                    self.pending = rest;
                    let RawReply {
                        output,
                        prompt,
                        after,
                        prompts,
                    } = result.map_err(Fault::Protocol)?;
                    self.state = after.state;
                    self.prompt = after.clone();
                    return Ok(Reply {
                        output,
                        prompt,
                        after,
                        before,
                        elapsed: start.elapsed(),
                        interrupted,
                        prompts,
                        memory_before,
                    });
                }
            }
            let now = Instant::now();
            if now >= deadline {
                if interrupted {
                    return Err(Fault::Unresponsive);
                }
                interrupted = true;
                self.signalled = true;
                if let Some(pid) = self.coq_pid() {
                    signal(pid, libc::SIGINT);
                }
                deadline = now + KILL_AFTER;
                chunk = vec![];
                continue;
            }
            chunk = match self.from_coq.recv_timeout(deadline - now) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => vec![],
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.try_wait().ok().flatten();
                    return Err(Fault::Lost(match status {
                        Some(s) => format!("coqtop exited ({s})"),
                        None => "coqtop output closed".into(),
                    }));
                }
            };
        }
    }

    /// Send many trusted sentences at once (a context) and collect their replies in order.
    /// Stops at the first fault; replies of failed sentences are returned like the others.
    pub fn run_many(&mut self, texts: &[&str], limit: Duration) -> Result<Vec<Reply>, Fault> {
        self.run_batch(texts, limit, false)
    }

    /// [`Worker::run_many`] for sentences that must all succeed (a context): the replies end
    /// at the first sentence Coq refuses, and the worker is killed. After a refusal the rest
    /// of a pipelined batch is not read as sent: Coq's error recovery skips to the next `.`
    /// and blank, which can swallow the next sentinel (`2 : {` outside a proof eats the
    /// `Locate` after it), and waiting for that sentinel would stall until the deadline.
    pub fn run_until_refused(
        &mut self,
        texts: &[&str],
        limit: Duration,
    ) -> Result<Vec<Reply>, Fault> {
        self.run_batch(texts, limit, true)
    }

    fn run_batch(
        &mut self,
        texts: &[&str],
        limit: Duration,
        stop_at_refusal: bool,
    ) -> Result<Vec<Reply>, Fault> {
        // Pipelined: Coq reads ahead while we parse; the writer thread absorbs back-pressure.
        let sentinels: Vec<String> = texts.iter().map(|_| self.next_sentinel()).collect();
        let mut batch = String::new();
        for (t, s) in texts.iter().zip(&sentinels) {
            batch.push_str(t);
            batch.push_str("\nLocate ");
            batch.push_str(s);
            batch.push_str(".\n");
        }
        self.send(&batch)?;
        let deadline = Instant::now() + limit;
        let mut replies = Vec::with_capacity(texts.len());
        let mut chunk = std::mem::take(&mut self.pending);
        for s in &sentinels {
            let before = self.state;
            let start = Instant::now();
            let mut scanner = ReplyScanner::new(s);
            loop {
                if !chunk.is_empty() {
                    if let Scan::Done(result, rest) = scanner.push(&chunk) {
                        chunk = rest;
                        let RawReply {
                            output,
                            prompt,
                            after,
                            prompts,
                        } = match result {
                            Ok(r) => r,
                            Err(e) => {
                                self.kill();
                                return Err(Fault::Protocol(e));
                            }
                        };
                        self.state = after.state;
                        self.prompt = after.clone();
                        replies.push(Reply {
                            output,
                            prompt,
                            after,
                            before,
                            elapsed: start.elapsed(),
                            interrupted: false,
                            prompts,
                            memory_before: Memory::default(),
                        });
                        if stop_at_refusal && replies.last().is_some_and(|r| !r.ok()) {
                            self.kill();
                            return Ok(replies);
                        }
                        break;
                    }
                }
                let now = Instant::now();
                if now >= deadline {
                    self.kill();
                    return Err(Fault::Unresponsive);
                }
                chunk = match self.from_coq.recv_timeout(deadline - now) {
                    Ok(c) => c,
                    Err(RecvTimeoutError::Timeout) => vec![],
                    Err(RecvTimeoutError::Disconnected) => {
                        self.kill();
                        return Err(Fault::Lost("coqtop output closed while loading".into()));
                    }
                };
            }
        }
        self.pending = chunk;
        Ok(replies)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::Memory;

    fn m(size: u64, peak: u64) -> Memory {
        Memory {
            size_mb: Some(size),
            peak_mb: Some(peak),
        }
    }

    /// A peak left by an earlier sentence says nothing about this one; what the sentence held
    /// at either end, or a peak it raised, does.
    #[test]
    fn a_sentence_is_charged_only_what_it_held() {
        // An earlier sentence peaked at 2,900 MiB and gave the memory back.
        assert_eq!(
            Memory::sentence_peak_mb(m(400, 2900), m(420, 2900)),
            Some(420)
        );
        // This sentence raised the peak.
        assert_eq!(
            Memory::sentence_peak_mb(m(400, 2900), m(450, 3000)),
            Some(3000)
        );
        // It failed to grow a heap that was already large.
        assert_eq!(
            Memory::sentence_peak_mb(m(2800, 2900), m(2800, 2900)),
            Some(2800)
        );
        // Before unknown (a pipelined sentence): the peak after it counts.
        assert_eq!(
            Memory::sentence_peak_mb(Memory::default(), m(400, 2900)),
            Some(2900)
        );
        assert_eq!(
            Memory::sentence_peak_mb(Memory::default(), Memory::default()),
            None
        );
    }
}

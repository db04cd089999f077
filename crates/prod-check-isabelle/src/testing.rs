//! A fake Isabelle server over TCP loopback that replays the recorded replies of a real server
//! (`shared/isabelle/server-replies`, read at test time and never copied into the repository).
//!
//! It frames and splits messages with its own code (not the crate's), logs every command it
//! receives, and answers `use_theories` from a script. Replies about a theory are the recorded
//! ones with their positions moved onto a chosen text of the theory the client wrote (the
//! recorded positions point into isabelle-client's `Example.thy`); the checker's audit line, which
//! only a real Isabelle would print, is synthesised by the test and says so.
//!
//! Behind the `test-server` feature: the checker's own tests and the run pipeline's end-to-end
//! tests (`prod eval`/`prod rl` on Isabelle) use it. [`Fake::decide`] answers `use_theories`
//! from the theory text when no scripted action is queued.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub const PASSWORD: &str = "c4f0e1d2-fake-pass";

/// The recorded replies, or `None` (see [`prod_test_support::require`]) when `../shared` is not
/// there.
pub fn replies_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("PROD_ISABELLE_REPLIES")
        .map(PathBuf::from)
        // The project's shared data lives beside the repository (`../shared`).
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/isabelle/server-replies"
            ))
        });
    let here = dir.join("use_theories").is_file();
    let missing = format!(
        "recorded Isabelle server replies not found at {} (set PROD_ISABELLE_REPLIES)",
        dir.display()
    );
    prod_test_support::require(here, &missing).then_some(dir)
}

/// A recorded reply as the server sent it. `use_theories.Sledgehammer` lost its final byte when
/// it was saved: its last message announces 2057 bytes, its text has 2056 and no final LF, while
/// every other length-prefixed message of every recording counts (and ends with) its LF. The LF is
/// put back; nothing else is touched.
pub fn recorded(name: &str) -> Vec<u8> {
    let dir = replies_dir().expect("replies dir");
    let mut b = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"));
    if b.last() != Some(&b'\n') {
        b.push(b'\n');
    }
    b
}

/// Split a recorded byte stream into (raw bytes, message text) — independent of the crate.
pub fn split_stream(b: &[u8]) -> Vec<(Vec<u8>, String)> {
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let nl = b[i..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |p| i + p);
        let line = String::from_utf8_lossy(&b[i..nl])
            .trim_end_matches('\r')
            .to_string();
        let after = (nl + 1).min(b.len());
        if line.is_empty() {
            i = after;
            continue;
        }
        if line.chars().all(|c| c.is_ascii_digit()) {
            let n: usize = line.parse().unwrap();
            let end = (after + n).min(b.len());
            let msg = String::from_utf8_lossy(&b[after..end])
                .trim_end_matches('\n')
                .to_string();
            out.push((b[i..end].to_vec(), msg));
            i = end;
        } else {
            out.push((b[i..after].to_vec(), line));
            i = after;
        }
    }
    out
}

/// `name argument` of a message (independent of the crate).
pub fn name_arg(msg: &str) -> (String, String) {
    let end = msg
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(msg.len());
    (msg[..end].to_string(), msg[end..].trim_start().to_string())
}

/// Isabelle's writer: one line up to 100 bytes, else `N+1` and the text.
pub fn frame(msg: &str) -> Vec<u8> {
    let mut out = vec![];
    if msg.len() > 100 || msg.contains('\n') {
        out.extend_from_slice(format!("{}\n", msg.len() + 1).as_bytes());
    }
    out.extend_from_slice(msg.as_bytes());
    out.push(b'\n');
    out
}

/// Where to put the recorded messages' positions in the client's theory.
#[derive(Clone, Debug)]
pub enum At {
    /// The first occurrence of this text after the renamed statement.
    AfterGoal(String),
    /// The first occurrence of this text anywhere in the file.
    Text(String),
}

/// What the fake does on `use_theories`.
#[derive(Clone, Debug)]
pub enum UseAction {
    /// A successful check: the recorded `use_theories` reply plus the audit line.
    Proved,
    /// As `Proved`, with this audit line content after the tag (`theorems=1 oracles=… axioms=…`).
    Audit(String),
    /// The audit line printed at another position (what a forged line would look like).
    AuditAt(At),
    /// Replay a recorded reply, moving every message onto `At`; no audit line.
    Replay(&'static str, At),
    /// An error at the context theory file.
    ContextError,
    /// `OK {"task"}` and then nothing until `cancel`, then `FAILED … Interrupt`.
    Hang,
    /// `OK {"task"}`, one NOTE, then the connection is closed.
    DieAfterNote,
    /// `ERROR …` instead of a task.
    Refuse,
}

/// Chooses the answer to a `use_theories` from the text of the theory it loads.
pub type Decide = Arc<dyn Fn(&str) -> UseAction + Send + Sync>;

#[derive(Default)]
pub struct Shared {
    pub log: Vec<(String, Value)>,
    pub script: VecDeque<UseAction>,
    /// Used when `script` is empty (default: [`UseAction::Proved`]).
    pub decide: Option<Decide>,
    /// Theory texts seen by `use_theories`.
    pub theories: Vec<String>,
    /// Context files that existed when a check theory was used.
    pub context_files_seen: Vec<PathBuf>,
}

/// A fake whose checks fail where the theory contains `marker` (the recorded failure, moved
/// there) and pass everywhere else, except that, like the real Isabelle, it proves no canary
/// (a goal `"False"`, `"(0::nat) = 1"`, …); `None` without the recorded replies.
pub fn fails_where(marker: &'static str) -> Option<Fake> {
    replies_dir()?;
    let fake = Fake::start(false);
    fake.decide(move |text| {
        if text.contains(marker) {
            UseAction::Replay("use_theories.Fail", At::Text(marker.into()))
        } else if let Some(goal) = CANARY_GOALS
            .iter()
            .map(|g| format!(": \"{g}\""))
            .find(|g| text.contains(g.as_str()))
        {
            UseAction::Replay("use_theories.Fail", At::Text(goal))
        } else {
            UseAction::Proved
        }
    });
    Some(fake)
}

/// The statements of a run's canaries (prod-run's `canary` module), as a theory states them.
const CANARY_GOALS: [&str; 3] = ["False", "(0::nat) = 1", "\\<forall>n::nat. n = Suc n"];

pub struct Fake {
    pub addr: String,
    pub accepts: Arc<AtomicUsize>,
    pub shared: Arc<Mutex<Shared>>,
    /// Write replies one byte at a time (split reads on the client side).
    pub trickle: bool,
}

impl Fake {
    pub fn start(trickle: bool) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepts = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (a, s) = (accepts.clone(), shared.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, s, trickle);
                });
            }
        });
        Fake {
            addr,
            accepts,
            shared,
            trickle,
        }
    }

    /// Answer every unscripted `use_theories` with `f(theory text)`.
    pub fn decide(&self, f: impl Fn(&str) -> UseAction + Send + Sync + 'static) {
        self.shared.lock().unwrap().decide = Some(Arc::new(f));
    }

    pub fn push(&self, a: UseAction) {
        self.shared.lock().unwrap().script.push_back(a);
    }

    pub fn commands(&self) -> Vec<String> {
        self.shared
            .lock()
            .unwrap()
            .log
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn log(&self) -> Vec<(String, Value)> {
        self.shared.lock().unwrap().log.clone()
    }
}

fn send(w: &mut TcpStream, bytes: &[u8], trickle: bool) -> std::io::Result<()> {
    if trickle {
        for b in bytes {
            w.write_all(std::slice::from_ref(b))?;
            w.flush()?;
        }
        Ok(())
    } else {
        w.write_all(bytes)?;
        w.flush()
    }
}

fn read_msg(r: &mut impl BufRead) -> Option<String> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches(['\n', '\r']).to_string();
        if line.is_empty() {
            continue;
        }
        if line.chars().all(|c| c.is_ascii_digit()) {
            let n: usize = line.parse().ok()?;
            let mut buf = vec![0; n];
            r.read_exact(&mut buf).ok()?;
            return Some(
                String::from_utf8_lossy(&buf)
                    .trim_end_matches('\n')
                    .to_string(),
            );
        }
        return Some(line);
    }
}

/// Isabelle symbol offset (1-based) of byte `i` — the fake's own count.
pub fn symbol_offset(text: &str, i: usize) -> usize {
    let mut n = 0;
    let mut j = 0;
    let b = text.as_bytes();
    while j < i {
        if text[j..].starts_with("\\<") {
            if let Some(e) = text[j..].find('>') {
                let name = &text[j + 2..j + e];
                let name = name.strip_prefix('^').unwrap_or(name);
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    j += e + 1;
                    n += 1;
                    continue;
                }
            }
        }
        j += text[j..].chars().next().map_or(1, char::len_utf8);
        let _ = b;
        n += 1;
    }
    n + 1
}

fn pos_json(text: &str, i: usize, len: usize, file: &str) -> Value {
    let line = text[..i].matches('\n').count() + 1;
    let off = symbol_offset(text, i);
    json!({ "line": line, "offset": off, "end_offset": off + len, "file": file })
}

fn locate(text: &str, at: &At) -> Option<usize> {
    match at {
        At::Text(t) => text.find(t.as_str()),
        At::AfterGoal(t) => {
            let g = text.find("PRODCHK_goal_")?;
            text[g..].find(t.as_str()).map(|p| g + p)
        }
    }
}

fn nonce_of(theory: &str) -> String {
    theory.trim_start_matches("PRODCHK_Check_").to_string()
}

fn serve(mut stream: TcpStream, shared: Arc<Mutex<Shared>>, trickle: bool) -> std::io::Result<()> {
    let mut r = BufReader::new(stream.try_clone()?);
    let mut pw = String::new();
    r.read_line(&mut pw)?;
    if pw.trim_end_matches(['\n', '\r']) != PASSWORD {
        // The real server disconnects silently.
        return Ok(());
    }
    send(
        &mut stream,
        &frame(r#"OK {"isabelle_id":"fake","isabelle_name":"Isabelle2022"}"#),
        trickle,
    )?;
    let mut hanging: Option<String> = None;
    let mut tasks = 0;
    while let Some(msg) = read_msg(&mut r) {
        let (name, arg) = name_arg(&msg);
        let argv: Value = serde_json::from_str(&arg).unwrap_or(Value::Null);
        shared
            .lock()
            .unwrap()
            .log
            .push((name.clone(), argv.clone()));
        match name.as_str() {
            "use_theories" => {
                let action = next_action(&shared, &argv);
                tasks += 1;
                if let Some(t) = use_theories(&mut stream, &argv, action, &shared, trickle, tasks)?
                {
                    hanging = Some(t);
                }
            }
            "cancel" => {
                send(&mut stream, &recorded("cancel"), trickle)?;
                if let Some(t) = hanging.take() {
                    let failed = json!({ "task": t, "kind": "error", "message": "Interrupt" });
                    send(&mut stream, &frame(&format!("FAILED {failed}")), trickle)?;
                }
            }
            "shutdown" => {
                send(&mut stream, &recorded("shutdown"), trickle)?;
                return Ok(());
            }
            "session_start" | "session_stop" | "purge_theories" | "help" | "session_build" => {
                send(&mut stream, &recorded(&name), trickle)?;
            }
            _ => send(&mut stream, &recorded("unknown"), trickle)?,
        }
    }
    Ok(())
}

/// The scripted action, else the decision on the theory's text, else `Proved`.
fn next_action(shared: &Arc<Mutex<Shared>>, argv: &Value) -> UseAction {
    let (scripted, decide) = {
        let mut s = shared.lock().unwrap();
        (s.script.pop_front(), s.decide.clone())
    };
    if let Some(a) = scripted {
        return a;
    }
    let Some(decide) = decide else {
        return UseAction::Proved;
    };
    let theory = argv["theories"][0].as_str().unwrap_or("");
    let master = argv["master_dir"].as_str().unwrap_or("");
    let path = PathBuf::from(master).join(format!("{theory}.thy"));
    decide(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Answer one `use_theories`. Returns the task id when it hangs until `cancel`.
fn use_theories(
    stream: &mut TcpStream,
    argv: &Value,
    action: UseAction,
    shared: &Arc<Mutex<Shared>>,
    trickle: bool,
    n: usize,
) -> std::io::Result<Option<String>> {
    let loaded = load_theory(argv, shared);
    let task = format!("fake-task-{n}");
    let nonce = nonce_of(&loaded.theory);
    let Some((base, at, audit)) = replay_plan(&action) else {
        return answer_without_replay(stream, &action, task, trickle);
    };
    let rec = recorded(base);
    let msgs = split_stream(&rec);
    for (raw, m) in &msgs {
        let (name, arg) = name_arg(m);
        let mut v: Value = serde_json::from_str(&arg).unwrap_or(Value::Null);
        if v.get("task").is_some() {
            v["task"] = json!(task);
        }
        match name.as_str() {
            "OK" | "NOTE" => {
                let _ = raw;
                send(stream, &frame(&format!("{name} {v}")), trickle)?;
            }
            "FINISHED" => {
                finished_reply(
                    &mut v,
                    &loaded,
                    &action,
                    at.as_ref(),
                    audit.as_ref(),
                    &nonce,
                );
                send(stream, &frame(&format!("FINISHED {v}")), trickle)?;
            }
            _ => {}
        }
    }
    Ok(None)
}

/// The theory a `use_theories` loads, as the client wrote it.
struct Loaded {
    /// The theory's name.
    theory: String,
    /// `<theory>.thy`.
    file_name: String,
    /// The file in the master directory.
    path: PathBuf,
    /// Its text (empty when it cannot be read).
    text: String,
}

/// Read the theory `use_theories` names and note in `shared` its text and the context theory it
/// imports by absolute path, if that exists (tests check what the client wrote).
fn load_theory(argv: &Value, shared: &Arc<Mutex<Shared>>) -> Loaded {
    let theory = argv["theories"][0].as_str().unwrap_or("").to_string();
    let master = argv["master_dir"].as_str().unwrap_or("").to_string();
    let file_name = format!("{theory}.thy");
    let path = PathBuf::from(&master).join(&file_name);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    {
        let mut s = shared.lock().unwrap();
        s.theories.push(text.clone());
        // A context theory imported by absolute path: note that it exists.
        if let Some(i) = text.find("imports \"") {
            let rest = &text[i + 9..];
            if let Some(e) = rest.find('"') {
                let p = PathBuf::from(format!("{}.thy", &rest[..e]));
                if p.is_file() {
                    s.context_files_seen.push(p);
                }
            }
        }
    }
    Loaded {
        theory,
        file_name,
        path,
        text,
    }
}

/// A replayed answer: the recorded reply, where to move its messages (`None`: leave them), and
/// the audit line to add with its place.
type ReplayPlan = (&'static str, Option<At>, Option<(String, At)>);

/// How an action replays a recording; `None` for the actions that answer without one.
fn replay_plan(action: &UseAction) -> Option<ReplayPlan> {
    Some(match action {
        UseAction::Hang | UseAction::DieAfterNote | UseAction::Refuse => return None,
        UseAction::Proved => (
            "use_theories",
            Some(At::AfterGoal(String::new())),
            Some((
                "theorems=1 oracles= axioms=".into(),
                At::Text("ML \\<open>\nlet".into()),
            )),
        ),
        UseAction::Audit(line) => (
            "use_theories",
            Some(At::AfterGoal(String::new())),
            Some((line.clone(), At::Text("ML \\<open>\nlet".into()))),
        ),
        UseAction::AuditAt(at) => (
            "use_theories",
            Some(At::AfterGoal(String::new())),
            Some(("theorems=1 oracles= axioms=".into(), at.clone())),
        ),
        UseAction::Replay(file, at) => (file, Some(at.clone()), None),
        UseAction::ContextError => ("use_theories.Fail", None, None),
    })
}

/// Answer the actions without a recording: hang until `cancel` (returns the task id), die after
/// one NOTE, or refuse the command.
fn answer_without_replay(
    stream: &mut TcpStream,
    action: &UseAction,
    task: String,
    trickle: bool,
) -> std::io::Result<Option<String>> {
    match action {
        UseAction::Hang => {
            send(
                stream,
                &frame(&format!("OK {}", json!({ "task": task }))),
                trickle,
            )?;
            Ok(Some(task))
        }
        UseAction::DieAfterNote => {
            send(
                stream,
                &frame(&format!("OK {}", json!({ "task": task }))),
                trickle,
            )?;
            let note = json!({"kind":"writeln","message":"theory 42%","task":task});
            send(stream, &frame(&format!("NOTE {note}")), trickle)?;
            let _ = stream.shutdown(std::net::Shutdown::Both);
            Ok(None)
        }
        UseAction::Refuse => {
            send(stream, &frame(r#"ERROR "Bad session_id""#), trickle)?;
            Ok(None)
        }
        _ => unreachable!("{action:?} replays a recording"),
    }
}

/// The recorded `FINISHED` reply made about the client's theory: its node's names, the messages
/// moved onto `at`, then the context error or the synthesised audit line the action asks for.
fn finished_reply(
    v: &mut Value,
    loaded: &Loaded,
    action: &UseAction,
    at: Option<&At>,
    audit: Option<&(String, At)>,
    nonce: &str,
) {
    let node = &mut v["nodes"][0];
    node["theory_name"] = json!(format!("Draft.{}", loaded.theory));
    node["node_name"] = json!(loaded.path.display().to_string());
    if let Some(at) = at {
        let at = match at {
            At::AfterGoal(t) if t.is_empty() => At::Text("PRODCHK_goal_".into()),
            other => other.clone(),
        };
        if let Some(ms) = v["nodes"][0]["messages"].as_array_mut() {
            for m in ms {
                place(m, &at, loaded);
            }
        }
        if let Some(es) = v["errors"].as_array_mut() {
            for e in es {
                place(e, &at, loaded);
            }
        }
    }
    if let UseAction::ContextError = action {
        context_error(v, &loaded.text);
    }
    if let Some((line, at)) = audit {
        // Synthesised: what the checker's own ML would print on a real Isabelle.
        let mut m = json!({"kind":"writeln","message":format!("PRODCHK_audit_{nonce} {line}")});
        place(&mut m, at, loaded);
        v["nodes"][0]["messages"].as_array_mut().unwrap().push(m);
    }
}

/// Move a message's position onto `at` in the client's theory (left alone where `at` is not
/// found).
fn place(val: &mut Value, at: &At, loaded: &Loaded) {
    if let Some(i) = locate(&loaded.text, at) {
        val["pos"] = pos_json(&loaded.text, i, 2, &loaded.file_name);
    }
}

/// Make a `FINISHED` reply fail in the imported context theory, not in ours: one error there,
/// no messages, our node neither consolidated nor ok.
fn context_error(v: &mut Value, text: &str) {
    let ctx = text
        .find("imports \"")
        .and_then(|i| text[i + 9..].split('"').next().map(|s| format!("{s}.thy")))
        .unwrap_or_else(|| "Ctx.thy".into());
    let e = json!({"kind":"error","message":"Undefined constant: \"g\"",
        "pos":{"line":5,"offset":40,"end_offset":41,"file":ctx}});
    v["errors"] = json!([e]);
    v["ok"] = json!(false);
    v["nodes"][0]["messages"] = json!([]);
    v["nodes"][0]["status"]["consolidated"] = json!(false);
    v["nodes"][0]["status"]["ok"] = json!(false);
}

/// A scripted raw server: after the handshake, `script` gets the stream (for protocol tests).
pub fn raw_server(
    script: impl FnOnce(&mut BufReader<TcpStream>, &mut TcpStream) + Send + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut pw = String::new();
            let _ = r.read_line(&mut pw);
            let _ = s.write_all(b"OK {\"isabelle_name\":\"Isabelle2022\"}\n");
            script(&mut r, &mut s);
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    addr
}

pub fn read_command(r: &mut BufReader<TcpStream>) -> Option<(String, Value)> {
    let m = read_msg(r)?;
    let (n, a) = name_arg(&m);
    Some((n, serde_json::from_str(&a).unwrap_or(Value::Null)))
}

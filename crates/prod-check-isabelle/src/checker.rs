//! [`IsabelleChecker`]: the [`Checker`] for Isabelle, over the Isabelle system server.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prod_check::{CheckRequest, Checker, Progress, Replacement, RetryPolicy, Verdict};
use rand::Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::client::{ClientError, Connection};
use crate::config::IsabelleCheckConfig;
use crate::outcome::{self, PassOutcome};
use crate::rules::{RuleError, Rules, Statement, Step};
use crate::server::{self, SessionInfo, UseTheories};
use crate::theory::{self, Region, Theory, TheorySpec};

/// A request checked against the rules: what one attempt runs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The names after `imports` (validated).
    pub imports: String,
    pub context: String,
    /// `begin` minus `end` commands in the context (blocks it leaves open).
    pub open_blocks: usize,
    /// Final check only: the assembled lemmas below the root with their proofs (validated).
    pub proved: Vec<String>,
    pub lemmas: Vec<Statement>,
    pub statement: Statement,
    pub steps: Vec<Step>,
}

/// Check a request against the standard rules; `Err` is its final verdict (nothing was sent
/// anywhere).
pub fn plan(req: &CheckRequest) -> Result<Plan, Verdict> {
    plan_with(Rules::standard(), req)
}

/// [`plan`] with a given keyword table.
pub fn plan_with(rules: &Rules, req: &CheckRequest) -> Result<Plan, Verdict> {
    prod_check::check_t0(&req.proof).map_err(RuleError::into_verdict)?;
    let mut lemmas: Vec<Statement> = vec![];
    for (i, l) in req.proof.lemmas().enumerate() {
        let s = rules
            .check_statement(l)
            .map_err(|e| e.for_proposed_lemma(i))?;
        let Some(name) = s.name.clone() else {
            return Err(Verdict::rejected(format!(
                "proposed lemma {} has no name (write `lemma name: \"…\"`)",
                i + 1
            )));
        };
        if lemmas
            .iter()
            .any(|m| m.name.as_deref() == Some(name.as_str()))
        {
            return Err(Verdict::rejected(format!(
                "proposed lemma {} reuses the name `{name}`",
                i + 1
            )));
        }
        lemmas.push(s);
    }
    let statement = rules
        .check_statement(&req.statement)
        .map_err(RuleError::into_verdict)?;
    if let Some(n) = &statement.name {
        if let Some(i) = lemmas.iter().position(|l| l.name.as_ref() == Some(n)) {
            return Err(Verdict::rejected(format!(
                "proposed lemma {} reuses the statement's name `{n}`",
                i + 1
            )));
        }
    }
    let steps = rules
        .check_proof(&req.proof.proof_text())
        .map_err(RuleError::into_verdict)?;
    let (imports, context) = split_header(&req.imports, &req.context);
    let imports =
        validate_imports(&imports).map_err(|m| Verdict::infra(format!("imports: {m}")))?;
    let open_blocks = open_blocks(&context).map_err(|m| Verdict::infra(format!("context: {m}")))?;
    Ok(Plan {
        imports,
        context,
        open_blocks,
        proved: vec![],
        lemmas,
        statement,
        steps,
    })
}

/// A request without imports whose context is a theory file's prefix (header included, as a
/// dataset's full context and a run's theorems are): the imports are the header's (everything
/// between `imports` and `begin`, `keywords` included), the context what follows `begin`.
/// Anything else is returned as it is.
pub fn split_header(imports: &str, context: &str) -> (String, String) {
    let as_is = || (imports.to_string(), context.to_string());
    if !imports.trim().is_empty() {
        return as_is();
    }
    let Ok(h) = prod_isar::header::parse_header(context) else {
        return as_is();
    };
    let header = &context[h.range.clone()];
    let (tokens, _) = prod_isar::lex(header);
    let word = |w: &str| {
        tokens
            .iter()
            .filter(|t| t.kind == prod_isar::TokenKind::Ident && t.text(header) == w)
            .map(|t| t.range.clone())
            .collect::<Vec<_>>()
    };
    let (Some(imp), Some(begin)) = (word("imports").first().cloned(), word("begin").pop()) else {
        return as_is();
    };
    if imp.end > begin.start {
        return as_is();
    }
    (
        header[imp.end..begin.start].trim().to_string(),
        context[h.range.end..].to_string(),
    )
}

/// The imports (trusted) as they go after `imports`: theory names and strings, optionally a
/// `keywords` clause; an empty list means `Main`.
fn validate_imports(text: &str) -> Result<String, String> {
    let t = text.trim();
    let t = t.strip_prefix("imports").map_or(t, str::trim_start);
    if t.is_empty() {
        return Ok("Main".into());
    }
    let (tokens, errors) = prod_isar::lex(t);
    if let Some(e) = errors.first() {
        return Err(e.to_string());
    }
    if tokens
        .iter()
        .any(|tok| matches!(tok.text(t), "begin" | "theory" | "end"))
    {
        return Err("may only name theories (no `theory`, `begin` or `end`)".into());
    }
    Ok(t.to_string())
}

fn open_blocks(context: &str) -> Result<usize, String> {
    let (tokens, errors) = prod_isar::lex(context);
    if let Some(e) = errors.first() {
        return Err(e.to_string());
    }
    let mut depth: i64 = 0;
    for t in tokens
        .iter()
        .filter(|t| t.kind == prod_isar::TokenKind::Ident)
    {
        match t.text(context) {
            "begin" => depth += 1,
            "end" => depth -= 1,
            _ => {}
        }
    }
    usize::try_from(depth).map_err(|_| "more `end` than `begin`".to_string())
}

fn fresh_nonce() -> String {
    let mut rng = rand::thread_rng();
    format!("{:016x}", rng.gen::<u64>())
}

/// The logic session all workers share, and the checker's directory next to it.
struct SessionState {
    info: SessionInfo,
    /// Removed when the state is dropped.
    root: tempfile::TempDir,
    /// Context theories already written (by file stem).
    contexts: HashSet<String>,
}

/// Isabelle's local checker: connections to one `isabelle server`, one logic session shared by
/// all workers, one temporary theory per check (see [`crate::theory`] for its shape and why).
pub struct IsabelleChecker {
    cfg: Arc<IsabelleCheckConfig>,
    rules: Rules,
    fingerprint: String,
    session: Mutex<Option<SessionState>>,
    slots: Vec<Mutex<Option<Connection>>>,
    /// Contexts that do not load (deterministic; never retried).
    broken_contexts: Mutex<HashMap<String, String>>,
    connections: AtomicUsize,
    /// The server process we started (`server_command`), if any.
    launched: Mutex<Option<Launched>>,
}

struct Launched {
    child: std::process::Child,
    addr: String,
    password: String,
}

impl Drop for IsabelleChecker {
    fn drop(&mut self) {
        if let Ok(mut g) = self.launched.lock() {
            if let Some(mut l) = g.take() {
                let _ = l.child.kill();
                let _ = l.child.wait();
            }
        }
    }
}

impl IsabelleChecker {
    /// Connect once to learn the server's Isabelle version (part of the fingerprint).
    pub fn connect(cfg: IsabelleCheckConfig) -> Result<Self, String> {
        let timeout = Duration::from_secs(cfg.command_timeout_s.max(1) as u64);
        let c = Connection::connect_tcp(&cfg.server, &cfg.password, timeout)
            .map_err(|e| e.to_string())?;
        let version = version_of(&c.server_info);
        let checker = Self::with_version(cfg, &version);
        checker.connections.fetch_add(1, Ordering::SeqCst);
        if let Some(slot) = checker.slots.first() {
            if let Ok(mut s) = slot.lock() {
                *s = Some(c);
            }
        }
        Ok(checker)
    }

    /// A checker that trusts `version` (e.g. `Isabelle2022`) for its fingerprint and opens no
    /// connection until the first request that passes the rules. Keyword declarations in
    /// `cfg.extra_keywords` that do not parse are reported on stderr and ignored.
    pub fn with_version(cfg: IsabelleCheckConfig, version: &str) -> Self {
        let rules = Rules::with_keywords(&cfg.extra_keywords).unwrap_or_else(|e| {
            eprintln!("warning: [check.isabelle] extra_keywords: {e}");
            Rules::standard().clone()
        });
        let h = &cfg.hammer;
        let fingerprint = format!(
            "isabelle: {version}; session {} dirs {:?} options {:?}; step {}s attempt {}s; \
             hammer {} {:?} atp {} {}s; oracles {:?}; keywords {:?}",
            cfg.session,
            cfg.dirs,
            cfg.options,
            cfg.step_timeout_s,
            cfg.attempt_timeout_s,
            h.enabled,
            h.fixed_methods,
            h.use_atp,
            h.timeout_s,
            cfg.allowed_oracles,
            cfg.extra_keywords
        );
        let slots = (0..cfg.workers.max(1)).map(|_| Mutex::new(None)).collect();
        IsabelleChecker {
            cfg: Arc::new(cfg),
            rules,
            fingerprint,
            session: Mutex::new(None),
            slots,
            broken_contexts: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
            launched: Mutex::new(None),
        }
    }

    pub fn config(&self) -> &IsabelleCheckConfig {
        &self.cfg
    }

    /// Connections opened so far (tests: rejected text must open none).
    pub fn connections_opened(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn grace(&self) -> Duration {
        Duration::from_secs(self.cfg.command_timeout_s.max(1) as u64)
    }

    fn ensure_connection<'a>(
        &self,
        conn: &'a mut Option<Connection>,
    ) -> Result<&'a mut Connection, ClientError> {
        if conn.as_ref().is_some_and(Connection::is_closed) {
            *conn = None;
        }
        if conn.is_none() {
            let (addr, password) = self.endpoint();
            self.connections.fetch_add(1, Ordering::SeqCst);
            match Connection::connect_tcp(&addr, &password, self.grace()) {
                Ok(c) => *conn = Some(c),
                Err(ClientError::Connect { .. }) if !self.cfg.server_command.is_empty() => {
                    // Nobody listens: (re)start the server ourselves; its sessions are gone.
                    let (addr, password) = self.launch_server()?;
                    self.drop_session();
                    self.connections.fetch_add(1, Ordering::SeqCst);
                    *conn = Some(Connection::connect_tcp(&addr, &password, self.grace())?);
                }
                Err(e) => return Err(e),
            }
        }
        conn.as_mut()
            .ok_or_else(|| ClientError::Lost("no connection".into()))
    }

    /// The shared session (started on first use, through `c`).
    fn ensure_session(&self, c: &mut Connection) -> Result<(SessionInfo, PathBuf), Verdict> {
        let mut guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = guard.as_ref() {
            return Ok((s.info.clone(), s.root.path().to_path_buf()));
        }
        let deadline =
            Instant::now() + Duration::from_secs(self.cfg.session_start_timeout_s as u64);
        let info = server::session_start(
            c,
            &self.cfg.session,
            &self.cfg.dirs,
            &self.cfg.options,
            deadline,
            self.grace(),
        )
        .map_err(|e| Verdict::infra(format!("session_start {}: {e}", self.cfg.session)))?;
        let base = match &self.cfg.work_dir {
            Some(d) => d.clone(),
            None => PathBuf::from(&info.tmp_dir),
        };
        let root = tempfile::Builder::new()
            .prefix("prodchk-")
            .tempdir_in(&base)
            .map_err(|e| {
                Verdict::infra(format!(
                    "cannot create a work directory in {}: {e}",
                    base.display()
                ))
            })?;
        let path = root.path().to_path_buf();
        if path.to_str().is_none_or(|p| p.contains(['"', '\\', '\n'])) {
            return Err(Verdict::infra(format!(
                "work directory {} cannot be named in a theory header",
                path.display()
            )));
        }
        *guard = Some(SessionState {
            info: info.clone(),
            root,
            contexts: HashSet::new(),
        });
        Ok((info, path))
    }

    /// Where the server is: as configured, or as the server we launched announced.
    fn endpoint(&self) -> (String, String) {
        match self.launched.lock() {
            Ok(l) => match l.as_ref() {
                Some(l) => (l.addr.clone(), l.password.clone()),
                None => (self.cfg.server.clone(), self.cfg.password.clone()),
            },
            Err(_) => (self.cfg.server.clone(), self.cfg.password.clone()),
        }
    }

    /// Run `server_command` (e.g. `isabelle server -n prod`) and read its first output line,
    /// `server "NAME" = HOST:PORT (password "UUID")`.
    fn launch_server(&self) -> Result<(String, String), ClientError> {
        let mut guard = self.launched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mut old) = guard.take() {
            // Only the process we started ourselves, by its own handle.
            let _ = old.child.kill();
            let _ = old.child.wait();
        }
        let err = |m: String| ClientError::Connect {
            addr: self.cfg.server_command.join(" "),
            source: std::io::Error::other(m),
        };
        let (prog, args) = self
            .cfg
            .server_command
            .split_first()
            .ok_or_else(|| err("empty server_command".into()))?;
        let mut child = std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| err(format!("cannot start: {e}")))?;
        let stdout = child.stdout.take().ok_or_else(|| err("no stdout".into()))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(stdout);
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut r, &mut line);
            let _ = tx.send(line);
            // Keep draining so that the server never blocks on a full pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        });
        let limit = Duration::from_secs(self.cfg.session_start_timeout_s.max(1) as u64);
        let line = match rx.recv_timeout(limit) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(err("no banner line from the server".into()));
            }
        };
        let Some((addr, password)) = crate::client::parse_server_banner(&line) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(err(format!("unexpected first line {:?}", line.trim())));
        };
        *guard = Some(Launched {
            child,
            addr: addr.clone(),
            password: password.clone(),
        });
        Ok((addr, password))
    }

    fn drop_session(&self) {
        if let Ok(mut g) = self.session.lock() {
            *g = None;
        }
    }

    /// The context in a theory of its own, so that the server keeps it loaded across checks.
    /// Returns what the check theory imports and the context text to inline (if it cannot be
    /// separated because it leaves a block open).
    fn context_import(
        &self,
        plan: &Plan,
        root: &Path,
    ) -> Result<(String, String, String), Verdict> {
        if plan.context.trim().is_empty() {
            return Ok((plan.imports.clone(), String::new(), String::new()));
        }
        if plan.open_blocks > 0 {
            return Ok((plan.imports.clone(), plan.context.clone(), String::new()));
        }
        let mut h = Sha256::new();
        for part in [&plan.imports, &plan.context] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let stem = format!("PRODCHK_Ctx_{}", &hex::encode(h.finalize())[..16]);
        let dir = root.join("contexts");
        let file = dir.join(format!("{stem}.thy"));
        let mut guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let known = guard.as_ref().is_some_and(|s| s.contexts.contains(&stem));
        if !known {
            let text = format!(
                "theory {stem}\n  imports {}\nbegin\n\n{}\n\nend\n",
                plan.imports, plan.context
            );
            let tmp = dir.join(format!(".{stem}.tmp"));
            std::fs::create_dir_all(&dir)
                .and_then(|_| std::fs::write(&tmp, text))
                .and_then(|_| std::fs::rename(&tmp, &file))
                .map_err(|e| Verdict::infra(format!("cannot write {}: {e}", file.display())))?;
            if let Some(s) = guard.as_mut() {
                s.contexts.insert(stem.clone());
            }
        }
        let path = dir.join(&stem);
        Ok((format!("\"{}\"", path.display()), String::new(), stem))
    }

    /// One attempt on one connection slot.
    fn attempt(&self, slot: &mut Option<Connection>, plan: &Plan) -> Verdict {
        let start = Instant::now();
        let conn = match self.ensure_connection(slot) {
            Ok(c) => c,
            Err(e) => return Verdict::infra(e.to_string()),
        };
        let (info, root) = match self.ensure_session(conn) {
            Ok(x) => x,
            Err(v) => {
                if conn.is_closed() {
                    *slot = None;
                }
                return v;
            }
        };
        let (imports, inline_context, ctx_stem) = match self.context_import(plan, &root) {
            Ok(x) => x,
            Err(v) => return v,
        };
        if let Some(msg) = self
            .broken_contexts
            .lock()
            .ok()
            .and_then(|m| m.get(&ctx_stem).cloned())
            .filter(|_| !ctx_stem.is_empty())
        {
            return Verdict::infra(format!("context does not load: {msg}"));
        }
        let conn = match slot.as_mut() {
            Some(c) => c,
            None => return Verdict::infra("connection lost"),
        };
        let mut run = Run {
            checker: self,
            conn,
            info: &info,
            root: &root,
            plan,
            imports: &imports,
            inline_context: &inline_context,
        };
        let v = run.passes(start);
        let lost = slot.as_ref().is_some_and(Connection::is_closed);
        if lost {
            *slot = None;
        }
        if let Verdict::Infra { message } = &v {
            if message.starts_with("context does not load") && !ctx_stem.is_empty() {
                if let Ok(mut m) = self.broken_contexts.lock() {
                    m.insert(ctx_stem, message.clone());
                }
            }
        }
        v
    }

    /// Run a planned check (with this checker's retries) on the first connection slot.
    pub(crate) fn run_plan(&self, plan: &Plan) -> Verdict {
        let Some(slot) = self.slots.first() else {
            return Verdict::infra("no slot");
        };
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        RetryPolicy::new(self.cfg.max_attempts).run(|_| self.attempt(&mut guard, plan))
    }

    /// Run an already planned check **without the rules** (its text must not come from a model).
    /// Exists so that the audit can be tested on a real Isabelle with text the rules would
    /// reject (e.g. a `sorry` proof must come back `Rejected` from the audit alone).
    #[doc(hidden)]
    pub fn run_plan_without_rules(&self, plan: &Plan) -> Verdict {
        let slot = match self.slots.first() {
            Some(s) => s,
            None => return Verdict::infra("no slot"),
        };
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        self.attempt(&mut guard, plan)
    }

    /// Stop the shared session (if any) and forget it.
    pub fn stop_session(&self) -> Result<(), String> {
        let info = match self.session.lock() {
            Ok(mut g) => g.take().map(|s| s.info),
            Err(_) => None,
        };
        let Some(info) = info else { return Ok(()) };
        let slot = self.slots.first().ok_or("no slot")?;
        let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
        let c = self
            .ensure_connection(&mut guard)
            .map_err(|e| e.to_string())?;
        server::session_stop(
            c,
            &info.session_id,
            Instant::now() + Duration::from_secs(self.cfg.session_start_timeout_s as u64),
            self.grace(),
        )
        .map_err(|e| e.to_string())
    }
}

fn version_of(info: &Value) -> String {
    let name = info
        .get("isabelle_name")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let id = info
        .get("isabelle_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    if id.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({id})")
    }
}

/// Where a `sledgehammer` step stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HammerPhase {
    /// Trying the `i`-th method of the fixed list.
    Fixed(usize),
    /// Running Sledgehammer itself to read its suggestion.
    Atp,
    /// Sledgehammer's suggestion, being replayed.
    Found(String),
}

struct Run<'a> {
    checker: &'a IsabelleChecker,
    conn: &'a mut Connection,
    info: &'a SessionInfo,
    root: &'a Path,
    plan: &'a Plan,
    imports: &'a str,
    inline_context: &'a str,
}

enum PassResult {
    Done(Verdict),
    Outcome(
        Box<Theory>,
        String,
        PassOutcome,
        Option<crate::server::NodeResult>,
    ),
}

/// The step a pass's error is at (0 before the proof, `n + 1` after its `n` steps), if it
/// ended in an error.
fn error_step(outcome: &PassOutcome, n: usize) -> Option<usize> {
    match outcome {
        PassOutcome::Error {
            region: Region::Step(k),
            ..
        } => Some(*k),
        PassOutcome::Error { region, .. } => match region {
            Region::CloseCheck | Region::Audit | Region::End => Some(n + 1),
            _ => Some(0),
        },
        _ => None,
    }
}

/// Write the theory into `dir` (created if needed); `Err` is the verdict when that fails.
fn write_theory(dir: &Path, thy: &Theory) -> Result<(), Verdict> {
    let file = dir.join(format!("{}.thy", thy.name));
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&file, &thy.text)) {
        return Err(Verdict::infra(format!(
            "cannot write {}: {e}",
            file.display()
        )));
    }
    Ok(())
}

impl Run<'_> {
    fn cfg(&self) -> &IsabelleCheckConfig {
        &self.checker.cfg
    }

    /// What a sledgehammer step tries after the `j`-th fixed method failed: the next fixed
    /// method, then Sledgehammer itself if enabled; `None` when nothing is left.
    fn after_fixed(&self, j: usize) -> Option<HammerPhase> {
        let h = &self.cfg().hammer;
        if j + 1 < h.fixed_methods.len() {
            Some(HammerPhase::Fixed(j + 1))
        } else if h.use_atp {
            Some(HammerPhase::Atp)
        } else {
            None
        }
    }

    /// The proof steps' texts with every `sledgehammer` replaced as `phases` says.
    fn step_texts(&self, phases: &HashMap<usize, HammerPhase>) -> Vec<String> {
        let h = &self.cfg().hammer;
        self.plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| match phases.get(&(i + 1)) {
                Some(HammerPhase::Fixed(j)) => h.fixed_methods[*j].clone(),
                Some(HammerPhase::Atp) => {
                    format!("sledgehammer [timeout = {}]", h.timeout_s.max(1))
                }
                Some(HammerPhase::Found(t)) => t.clone(),
                None => s.text.clone(),
            })
            .collect()
    }

    /// Write and run one theory; purge it afterwards.
    fn pass(&mut self, texts: &[String], atp: bool) -> PassResult {
        let nonce = fresh_nonce();
        let thy = self.pass_theory(&nonce, texts);
        let dir = self.root.join(format!("check-{nonce}"));
        if let Err(v) = write_theory(&dir, &thy) {
            return PassResult::Done(v);
        }
        let master_dir = dir.display().to_string();
        let theories = vec![thy.name.clone()];
        let result = self.use_theory(&theories, &master_dir, atp);
        self.purge(&theories, &master_dir);
        let _ = std::fs::remove_dir_all(&dir);
        match result {
            Ok(r) => {
                let o = outcome::interpret(&thy, &nonce, &r);
                let node = outcome::our_node(&thy, &r).cloned();
                PassResult::Outcome(Box::new(thy), nonce, o, node)
            }
            Err(e) => PassResult::Done(self.failed_use_verdict(e)),
        }
    }

    /// The theory of one pass: the plan with the statement renamed for `nonce` and `texts` as
    /// its proof steps (the context inline only when it cannot live in a theory of its own).
    fn pass_theory(&self, nonce: &str, texts: &[String]) -> Theory {
        let lemma_texts: Vec<String> = self.plan.lemmas.iter().map(|l| l.text.clone()).collect();
        let statement = self.plan.statement.renamed(&theory::goal_name(nonce));
        Theory::build(&TheorySpec {
            nonce,
            imports: self.imports,
            inline_context: self.inline_context,
            open_blocks: if self.inline_context.is_empty() {
                0
            } else {
                self.plan.open_blocks
            },
            proved: &self.plan.proved,
            lemmas: &lemma_texts,
            statement: &statement,
            steps: texts,
            allowed_oracles: &self.cfg().allowed_oracles,
        })
    }

    /// Run `use_theories` on the written theory, under the attempt's deadline and a watchdog
    /// long enough for Sledgehammer when `atp`.
    fn use_theory(
        &mut self,
        theories: &[String],
        master_dir: &str,
        atp: bool,
    ) -> Result<server::UseTheoriesResult, ClientError> {
        let cfg = self.cfg();
        let watchdog = if atp {
            cfg.step_timeout_s.max(cfg.hammer.timeout_s + 10)
        } else {
            cfg.step_timeout_s
        };
        let grace = self.checker.grace();
        let deadline = Instant::now() + Duration::from_secs(cfg.attempt_timeout_s.max(1) as u64);
        server::use_theories(
            self.conn,
            &UseTheories {
                session_id: &self.info.session_id,
                theories,
                master_dir,
                watchdog_timeout_s: watchdog.max(1),
            },
            deadline,
            grace,
        )
    }

    /// Purge the theory whatever happened (the server keeps loaded theories until purged),
    /// unless the connection is gone.
    fn purge(&mut self, theories: &[String], master_dir: &str) {
        if !self.conn.is_closed() {
            let _ = server::purge_theories(
                self.conn,
                &self.info.session_id,
                theories,
                master_dir,
                self.checker.grace(),
            );
        }
    }

    /// The verdict when `use_theories` gave no result: a timeout of the next step, else an
    /// infrastructure failure (dropping the session where the session itself is in doubt).
    fn failed_use_verdict(&self, e: ClientError) -> Verdict {
        match e {
            ClientError::Timeout(_) => Verdict::TimedOut {
                step: self.plan.steps.len() + 1,
            },
            ClientError::TaskFailed(v) => {
                // Not our cancel (that is a timeout): the session itself is in doubt.
                self.checker.drop_session();
                let msg = v.get("message").and_then(Value::as_str).unwrap_or("");
                Verdict::infra(format!(
                    "use_theories FAILED: {}",
                    if msg.is_empty() {
                        v.to_string()
                    } else {
                        msg.to_string()
                    }
                ))
            }
            ClientError::Error(v) => {
                // The server refused the command itself (e.g. an unknown session after a
                // server restart): start a new session next time.
                self.checker.drop_session();
                Verdict::infra(format!("use_theories refused: {v}"))
            }
            e => Verdict::infra(e.to_string()),
        }
    }

    /// Passes until a verdict: each `sledgehammer` step tries the fixed list, then Sledgehammer.
    fn passes(&mut self, start: Instant) -> Verdict {
        let mut phases = match self.first_phases() {
            Ok(phases) => phases,
            Err(v) => return v,
        };
        let max_passes = 1 + phases.len() * (self.cfg().hammer.fixed_methods.len() + 2);
        for _ in 0..max_passes {
            let texts = self.step_texts(&phases);
            let atp = phases.values().any(|p| *p == HammerPhase::Atp);
            let (thy, _nonce, outcome, node) = match self.pass(&texts, atp) {
                PassResult::Done(v) => return v,
                PassResult::Outcome(t, nonce, o, node) => (t, nonce, o, node),
            };
            let next = match self.sledgehammer_decides(&mut phases, &thy, &outcome, node.as_ref()) {
                Some(next) => next,
                None => self.after_outcome(outcome, &mut phases, start),
            };
            if let ControlFlow::Break(v) = next {
                return v;
            }
        }
        Verdict::infra("too many sledgehammer passes")
    }

    /// Each `sledgehammer` step's first phase, by step number: the first fixed method, or
    /// Sledgehammer itself. With the hammer off, a `sledgehammer` step fails the proof.
    fn first_phases(&self) -> Result<HashMap<usize, HammerPhase>, Verdict> {
        let h = &self.cfg().hammer;
        let hammer_on = h.enabled && (!h.fixed_methods.is_empty() || h.use_atp);
        let mut phases: HashMap<usize, HammerPhase> = HashMap::new();
        if !hammer_on {
            if let Some(i) = self.plan.steps.iter().position(Step::is_hammer) {
                return Err(Verdict::Failed {
                    step: i + 1,
                    message: "sledgehammer steps are disabled in this checker".into(),
                });
            }
        } else {
            for (i, s) in self.plan.steps.iter().enumerate() {
                if s.is_hammer() {
                    let first = if self.cfg().hammer.fixed_methods.is_empty() {
                        HammerPhase::Atp
                    } else {
                        HammerPhase::Fixed(0)
                    };
                    phases.insert(i + 1, first);
                }
            }
        }
        Ok(phases)
    }

    /// The step Sledgehammer is running at, if any, unless an error comes before it: its output
    /// decides, not later errors (the goal it leaves open makes every later command fail). Its
    /// suggestion is replayed in the next pass (`Continue`), or the verdict is `Break`. `None`:
    /// the pass's outcome decides.
    fn sledgehammer_decides(
        &self,
        phases: &mut HashMap<usize, HammerPhase>,
        thy: &Theory,
        outcome: &PassOutcome,
        node: Option<&crate::server::NodeResult>,
    ) -> Option<ControlFlow<Verdict>> {
        let atp_step = phases
            .iter()
            .filter(|(_, p)| **p == HammerPhase::Atp)
            .map(|(k, _)| *k)
            .min();
        let error_step = error_step(outcome, self.plan.steps.len());
        let k = atp_step?;
        let before = error_step.is_some_and(|e| e < k);
        if before {
            return None;
        }
        let suggestion = node.and_then(|nd| {
            outcome::messages_in(thy, nd, &Region::Step(k))
                .into_iter()
                .filter_map(crate::rules::try_this)
                .find_map(|t| self.checker.rules.check_replacement(&t).ok())
        });
        match suggestion {
            Some(t) => {
                phases.insert(k, HammerPhase::Found(t));
                Some(ControlFlow::Continue(()))
            }
            None => {
                if let PassOutcome::Elsewhere(m) = outcome {
                    return Some(ControlFlow::Break(Verdict::infra(format!(
                        "context does not load: {m}"
                    ))));
                }
                Some(ControlFlow::Break(Verdict::Failed {
                    step: k,
                    message: "sledgehammer: no proof found".into(),
                }))
            }
        }
    }

    /// The pass's outcome: the verdict (`Break`), or the next phase of a `sledgehammer` step
    /// whose fixed method failed or looped (`Continue`: another pass).
    fn after_outcome(
        &self,
        outcome: PassOutcome,
        phases: &mut HashMap<usize, HammerPhase>,
        start: Instant,
    ) -> ControlFlow<Verdict> {
        match outcome {
            PassOutcome::Clean(audit) => ControlFlow::Break(self.audited(audit, phases, start)),
            PassOutcome::Error { region, message } => self.after_error(region, message, phases),
            PassOutcome::Elsewhere(m) => {
                ControlFlow::Break(Verdict::infra(format!("context does not load: {m}")))
            }
            PassOutcome::Incomplete { .. } => self.after_watchdog(phases),
            PassOutcome::NoAudit(m) => ControlFlow::Break(Verdict::infra(format!(
                "no audit record from Isabelle: {m}"
            ))),
        }
    }

    /// An error in `region`: the verdict, or at a `sledgehammer` step on the fixed list, its
    /// next phase.
    fn after_error(
        &self,
        region: Region,
        message: String,
        phases: &mut HashMap<usize, HammerPhase>,
    ) -> ControlFlow<Verdict> {
        let n = self.plan.steps.len();
        ControlFlow::Break(match region {
            Region::Header | Region::Prelude | Region::Context => {
                Verdict::infra(format!("context does not load: {message}"))
            }
            Region::Lemma(i) => Verdict::Failed {
                step: 0,
                message: format!("proposed lemma {}: {message}", i + 1),
            },
            Region::Proved(i) => Verdict::Failed {
                step: 0,
                message: format!("assembled lemma {}: {message}", i + 1),
            },
            Region::Admit(i) => Verdict::infra(format!(
                "admitting proposed lemma {} failed: {message}",
                i + 1
            )),
            Region::Statement => Verdict::Failed {
                step: 0,
                message: format!("statement: {message}"),
            },
            Region::Step(k) => match phases.get(&k).cloned() {
                Some(HammerPhase::Fixed(j)) => match self.after_fixed(j) {
                    Some(next) => {
                        phases.insert(k, next);
                        return ControlFlow::Continue(());
                    }
                    None => Verdict::Failed {
                        step: k,
                        message: "sledgehammer: no method of the fixed list closes the goal".into(),
                    },
                },
                Some(HammerPhase::Found(t)) => Verdict::Failed {
                    step: k,
                    message: format!("sledgehammer's proof `{t}` fails: {message}"),
                },
                _ => Verdict::Failed { step: k, message },
            },
            Region::CloseCheck => Verdict::Failed {
                step: n + 1,
                message: format!("the proof does not finish its goal: {message}"),
            },
            Region::Audit | Region::End => {
                Verdict::infra(format!("the checker's audit failed: {message}"))
            }
        })
    }

    /// The watchdog ended the pass. A fixed method that loops is a method that fails: move the
    /// first sledgehammer step still on the fixed list along.
    fn after_watchdog(&self, phases: &mut HashMap<usize, HammerPhase>) -> ControlFlow<Verdict> {
        let n = self.plan.steps.len();
        let first_fixed = phases
            .iter()
            .filter(|(_, p)| matches!(p, HammerPhase::Fixed(_)))
            .map(|(k, _)| *k)
            .min();
        match first_fixed.and_then(|k| phases.get(&k).cloned().map(|p| (k, p))) {
            Some((k, HammerPhase::Fixed(j))) => match self.after_fixed(j) {
                Some(next) => {
                    phases.insert(k, next);
                    ControlFlow::Continue(())
                }
                None => ControlFlow::Break(Verdict::TimedOut { step: k }),
            },
            _ => ControlFlow::Break(Verdict::TimedOut { step: n + 1 }),
        }
    }

    fn audited(
        &self,
        audit: outcome::Audit,
        phases: &HashMap<usize, HammerPhase>,
        start: Instant,
    ) -> Verdict {
        let n = self.plan.steps.len();
        if audit.theorems == 0 {
            return Verdict::infra("the audit found no theorem for the statement");
        }
        if !audit.axioms.is_empty() {
            return Verdict::rejected(format!(
                "the proof added axioms: {}",
                audit.axioms.join(", ")
            ));
        }
        if let Some(o) = audit.oracles.iter().find(|o| o.ends_with("skip_proof")) {
            return Verdict::rejected(format!("the proof relies on `{o}` (sorry)"));
        }
        if !audit.oracles.is_empty() {
            return Verdict::Failed {
                step: n + 1,
                message: format!("the proof relies on oracles: {}", audit.oracles.join(", ")),
            };
        }
        let mut replacements: Vec<Replacement> = phases
            .iter()
            .filter_map(|(k, p)| {
                let tactic = match p {
                    HammerPhase::Fixed(j) => self.cfg().hammer.fixed_methods[*j].clone(),
                    HammerPhase::Found(t) => t.clone(),
                    HammerPhase::Atp => return None,
                };
                let step = self.plan.steps.get(k - 1)?;
                Some(Replacement {
                    step: *k,
                    range: step.range.clone(),
                    tactic,
                })
            })
            .collect();
        if replacements.len() != phases.len() {
            return Verdict::infra("a sledgehammer step was left without a replacement");
        }
        replacements.sort_by_key(|r| r.step);
        Verdict::Proved {
            axioms: vec![],
            replacements,
            time: start.elapsed(),
            universe_constraints: vec![],
        }
    }
}

impl Checker for IsabelleChecker {
    fn prover(&self) -> &'static str {
        "isabelle"
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
        let results: Vec<Mutex<Option<Verdict>>> =
            requests.iter().map(|_| Mutex::new(None)).collect();
        let finish = |i: usize, v: Verdict| {
            progress(i, &v);
            if let Ok(mut r) = results[i].lock() {
                *r = Some(v);
            }
        };
        // Rules first: rejected text never reaches the server.
        let mut jobs: Vec<(usize, Plan)> = vec![];
        for (i, req) in requests.iter().enumerate() {
            match plan_with(&self.rules, req) {
                Ok(p) => jobs.push((i, p)),
                Err(v) => finish(i, v),
            }
        }
        // Same context together: its theory is loaded once and kept by the server.
        jobs.sort_by(|a, b| {
            (&a.1.imports, &a.1.context, a.0).cmp(&(&b.1.imports, &b.1.context, b.0))
        });
        let next = AtomicUsize::new(0);
        let jobs = &jobs;
        let policy = RetryPolicy::new(self.cfg.max_attempts);
        std::thread::scope(|scope| {
            for slot in &self.slots {
                let next = &next;
                let finish = &finish;
                let policy = &policy;
                scope.spawn(move || {
                    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        let j = next.fetch_add(1, Ordering::SeqCst);
                        let Some((i, p)) = jobs.get(j) else { break };
                        let v = policy.run(|_| self.attempt(&mut guard, p));
                        finish(*i, v);
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| Verdict::infra("no verdict produced"))
            })
            .collect()
    }
}

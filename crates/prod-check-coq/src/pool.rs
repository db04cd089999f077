//! The pool of persistent Coq workers: the [`Checker`] implementation for Coq.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prod_check::{CheckRequest, Checker, Progress, RetryPolicy, Verdict};
use sha2::{Digest, Sha256};

use crate::bugs::ProverRelease;
use crate::config::CoqCheckConfig;
use crate::hammer_cache::{HammerCache, HammerCacheHandle};
use crate::rules::{self, RuleError, RuleSet};
use crate::session::{ContextSpec, Plan, PreparedContext, Session};

/// Coq's local checker: one persistent sandboxed coqtop per worker slot, work grouped and
/// ordered by context so that each worker loads a context once (or extends the one it holds).
pub struct CoqChecker {
    cfg: Arc<CoqCheckConfig>,
    slots: Vec<Mutex<Option<Session>>>,
    fingerprint: String,
    /// The token rules of this prover release ([`crate::bugs`]).
    rules: RuleSet,
    /// Contexts that do not load (deterministic; never retried).
    broken_contexts: Mutex<HashMap<ContextSpec, String>>,
    /// coqtop pid of each slot (for fault tests; read without taking the slot lock).
    pids: Mutex<Vec<Option<i32>>>,
    /// Every `hammer.` goal's result, shared by the workers (see [`crate::hammer_cache`]).
    hammer_cache: Arc<HammerCache>,
}

/// What a worker does with a planned request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The real check.
    Check,
    /// The benchmark baseline (trusted text).
    Replay,
}

/// The checked, runnable form of a request, or its final verdict: every piece of untrusted
/// text through the one rule set, `t0` against the blocks, names unique. Whether a statement
/// means the same next to its proposals is the kernel's to say (the session's anchors).
fn plan(req: &CheckRequest, rules: &RuleSet) -> Result<Plan, Verdict> {
    rules::check_t0(&req.proof).map_err(RuleError::into_verdict)?;
    let mut lemmas = vec![];
    for (i, l) in req.proof.lemmas().enumerate() {
        lemmas.push(rules::check_proposed_lemma(rules, l).map_err(|e| e.for_proposed_lemma(i))?);
    }
    let statement =
        rules::check_statement(rules, &req.statement).map_err(RuleError::into_verdict)?;
    for (i, l) in lemmas.iter().enumerate() {
        if l.name == statement.name || lemmas[..i].iter().any(|m| m.name == l.name) {
            return Err(Verdict::rejected(format!(
                "proposed lemma {} reuses the name `{}`",
                i + 1,
                l.name
            )));
        }
    }
    let steps =
        rules::check_proof(rules, &req.proof.proof_text()).map_err(RuleError::into_verdict)?;
    Ok(Plan {
        lemmas,
        statement,
        steps,
        rules: rules.clone(),
    })
}

/// Coq's version and the installed libraries (names and modification times), hashed: part of
/// the cache key, so that a library upgrade invalidates old verdicts.
/// What this checker accepts beyond its settings (the statement and proof rules, the sentences
/// written around a node). Part of the fingerprint, so that a verification cache never answers
/// with a verdict reached under other rules: raise it whenever a rule or those sentences change.
pub const RULES_REVISION: u32 = 7;

fn coq_fingerprint(cfg: &CoqCheckConfig) -> Result<String, String> {
    // Run as the checker runs Coq (sandboxed, from the prover root if there is one), so the
    // version and libraries are those that decide the verdicts.
    let version = crate::sandbox::tool_output(cfg, &cfg.coqc, &["--version"])?;
    let mut h = Sha256::new();
    if let Ok(lib) = crate::sandbox::coqlib(cfg) {
        let lib = lib.display();
        for dir in [format!("{lib}/user-contrib"), format!("{lib}/theories")] {
            let mut entries: Vec<String> = std::fs::read_dir(&dir)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| {
                            let mtime = e
                                .metadata()
                                .and_then(|m| m.modified())
                                .ok()
                                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                                .map_or(0, |d| d.as_secs());
                            format!("{}@{mtime}", e.file_name().to_string_lossy())
                        })
                        .collect()
                })
                .unwrap_or_default();
            entries.sort();
            h.update(entries.join("\n").as_bytes());
        }
    }
    let libs = hex::encode(&h.finalize()[..8]);
    let version_line = version.lines().next().unwrap_or("").to_string();
    let flags = crate::config::PROVER_FLAGS.join(" ");
    Ok(format!("{version_line}; flags {flags}; libs {libs}"))
}

/// Build the ProD plugin for `cfg`'s prover (once per machine) and make sure a sandboxed Coq
/// loads it. Without it the term audit cannot run, and no verdict could be `Proved`.
fn load_plugin(cfg: &CoqCheckConfig) -> Result<crate::plugin::PluginPaths, String> {
    let p = crate::plugin::for_config(cfg)?;
    let trial = CoqCheckConfig {
        plugin: Some(p.clone()),
        ..cfg.clone()
    };
    crate::worker::Worker::start(&trial)?;
    Ok(p)
}

/// Is the CoqHammer library installed for this Coq?
fn hammer_installed(cfg: &CoqCheckConfig) -> bool {
    crate::sandbox::coqlib(cfg)
        .map(|lib| lib.join("user-contrib/Hammer").is_dir())
        .unwrap_or(false)
}

/// Check the load-path bindings of `cfg` against the prover's library directory and make
/// their directories canonical; the fingerprint of their compiled files (`Root@hash …`, empty
/// without bindings). A root that shadows the prover's own or an installed library is refused:
/// the checker would otherwise load a project's file where the context names the installed one.
pub fn check_load_paths(cfg: &mut CoqCheckConfig) -> Result<String, String> {
    if cfg.load_paths.is_empty() {
        return Ok(String::new());
    }
    let coqlib = crate::sandbox::coqlib(cfg).ok();
    let mut parts = vec![];
    for lp in &mut cfg.load_paths {
        lp.validate()?;
        let first = lp.logical.split('.').next().unwrap_or_default();
        if let Some(lib) = &coqlib {
            if lib.join("user-contrib").join(first).exists() {
                return Err(format!(
                    "load path {}={}: {first} is installed ({}); binding it would shadow that library",
                    lp.dir.display(),
                    lp.logical,
                    lib.join("user-contrib").join(first).display()
                ));
            }
        }
        lp.dir = lp
            .dir
            .canonicalize()
            .map_err(|e| format!("load path {}: {e}", lp.dir.display()))?;
        parts.push(format!("{}@{}", lp.logical, compiled_hash(&lp.dir)?));
    }
    Ok(parts.join(" "))
}

/// Is `root` (a logical root's first component) the prover's own library or one installed
/// under its `coqc -where` (run as the checker runs Coq)? Such a root is never bound.
pub fn installed_root(cfg: &CoqCheckConfig) -> impl Fn(&str) -> bool {
    let coqlib = crate::sandbox::coqlib(cfg).ok();
    move |root: &str| {
        let first = root.split('.').next().unwrap_or(root);
        crate::config::PROVER_ROOTS.contains(&first)
            || coqlib
                .as_ref()
                .is_some_and(|lib| lib.join("user-contrib").join(first).exists())
    }
}

/// A hash of the `.vo` files below `dir` (relative names and contents): verdicts cached with
/// one build of a library are not reused with another.
fn compiled_hash(dir: &std::path::Path) -> Result<String, String> {
    let mut files = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "vo") => files.push(p),
                _ => {}
            }
        }
    }
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        let bytes = std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?;
        h.update(
            f.strip_prefix(dir)
                .unwrap_or(f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.update([0]);
        h.update(Sha256::digest(&bytes));
    }
    Ok(format!(
        "{}:{}",
        files.len(),
        hex::encode(&h.finalize()[..8])
    ))
}

impl CoqChecker {
    /// A pool with `cfg.worker_count()` slots; workers start lazily on first use.
    pub fn new(mut cfg: CoqCheckConfig) -> Result<Self, String> {
        let version = coq_fingerprint(&cfg)?;
        let libraries = check_load_paths(&mut cfg)?;
        if cfg.hammer.enabled && !hammer_installed(&cfg) {
            // Loading a missing plugin would make every context fail; `hammer.` steps then
            // fail like any unknown tactic instead.
            eprintln!("warning: CoqHammer is not installed (no Hammer in coqc -where/user-contrib); hammer steps are disabled");
            cfg.hammer.enabled = false;
        }
        if cfg.plugin.is_none() {
            cfg.plugin = Some(load_plugin(&cfg)?);
        }
        cfg.hammer.unset_provers = if cfg.hammer.only_installed_provers {
            crate::config::HAMMER_PROVERS
                .iter()
                .filter(|(_, program)| !crate::sandbox::can_run(&cfg, program))
                .map(|(option, _)| *option)
                .collect()
        } else {
            Vec::new()
        };
        let rules = RuleSet::for_release(ProverRelease::from_fingerprint(&version));
        let h = &cfg.hammer;
        let options = format!(
            "rules {RULES_REVISION} refusing {}; step {}s; attempt {}s; hammer {} {:?} atp {} {}s {}s gs {} sauto {}s reconstr {}s unset {:?}; allowed {:?}",
            rules.describe(),
            cfg.step_timeout_s,
            cfg.attempt_timeout_s,
            h.enabled,
            h.fixed_tactics
                .iter()
                .map(|t| format!("{}@{}", t.tactic, t.timeout_s))
                .collect::<Vec<_>>(),
            h.use_atp,
            h.atp_limit_s,
            h.timeout_s,
            h.gs_mode,
            h.sauto_limit_s,
            h.reconstr_limit_s,
            h.unset_provers,
            cfg.allowed_axioms
        );
        let slots: Vec<_> = (0..cfg.worker_count()).map(|_| Mutex::new(None)).collect();
        let pids = Mutex::new(vec![None; slots.len()]);
        let fingerprint = if libraries.is_empty() {
            format!("coq: {version}; {options}")
        } else {
            format!("coq: {version}; {options}; load paths {libraries}")
        };
        Ok(CoqChecker {
            fingerprint,
            rules,
            cfg: Arc::new(cfg),
            slots,
            broken_contexts: Mutex::new(HashMap::new()),
            pids,
            hammer_cache: Arc::new(HammerCache::default()),
        })
    }

    /// The token rules this checker applies to untrusted text (its prover release's).
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    pub fn config(&self) -> &CoqCheckConfig {
        &self.cfg
    }

    /// The per-goal memory of `hammer.` results (goals remembered: `len()`).
    pub fn hammer_cache(&self) -> &HammerCache {
        &self.hammer_cache
    }

    /// The configuration an attempt of `plan` in `ctx` runs with: with a `hammer.` step, the
    /// per-goal memory scoped to the context and the lemmas the attempt admits.
    fn attempt_config(&self, ctx: &PreparedContext, plan: &Plan) -> Option<CoqCheckConfig> {
        if !ctx.spec.hammer || !plan.steps.iter().any(|s| s.hammer) {
            return None;
        }
        let scope = crate::hammer_cache::scope(
            ctx.prelude.iter().map(String::as_str),
            ctx.sentences.iter().map(String::as_str),
            plan.lemmas.iter().map(|l| l.text.as_str()),
        );
        Some(CoqCheckConfig {
            hammer_cache: Some(HammerCacheHandle {
                cache: self.hammer_cache.clone(),
                scope,
            }),
            ..(*self.cfg).clone()
        })
    }

    /// Number of worker slots.
    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Kill the coqtop of slot `i` as an outside crash would (fault tests). Returns whether a
    /// live worker was there.
    pub fn kill_worker_for_test(&self, i: usize) -> bool {
        // Only the pid is needed; never wait for the slot lock (a check may hold it).
        let pid = self
            .pids
            .lock()
            .ok()
            .and_then(|p| p.get(i).copied().flatten());
        match pid {
            Some(pid) => {
                // SAFETY: kill(2) has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                true
            }
            None => false,
        }
    }

    fn run_one(
        &self,
        slot: usize,
        session: &mut Option<Session>,
        ctx: &PreparedContext,
        plan: &Plan,
        mode: Mode,
    ) -> Verdict {
        let broken = || {
            self.broken_contexts
                .lock()
                .ok()
                .and_then(|m| m.get(&ctx.spec).cloned())
        };
        let policy = RetryPolicy::new(self.cfg.max_attempts);
        policy.run(|attempt| {
            // Checked on every attempt: a context found broken is never loaded again.
            if let Some(msg) = broken() {
                return Verdict::infra(format!("context does not load: {msg}"));
            }
            // A fresh worker for every retry, and whenever the old one is unusable or old.
            let stale = match session.as_mut() {
                None => true,
                Some(s) => {
                    attempt > 0
                        || s.worker.broken
                        || s.worker.attempts >= self.cfg.recycle_after
                        || (s.worker.attempts % 50 == 49
                            && s.worker.rss_mb().unwrap_or(0) > self.cfg.recycle_rss_mb)
                }
            };
            if stale {
                *session = None;
                match Session::start(&self.cfg) {
                    Ok(mut s) => {
                        if let Ok(mut p) = self.pids.lock() {
                            if let Some(x) = p.get_mut(slot) {
                                *x = s.worker.coq_pid_for_test();
                            }
                        }
                        *session = Some(s)
                    }
                    Err(e) => return Verdict::infra(e),
                }
            }
            let Some(s) = session.as_mut() else {
                return Verdict::infra("no worker");
            };
            match s.ensure(ctx, &self.cfg) {
                Ok(()) => {}
                Err(Ok(msg)) => {
                    if let Ok(mut m) = self.broken_contexts.lock() {
                        m.insert(ctx.spec.clone(), msg.clone());
                    }
                    // Not retried: the same context fails the same way.
                    return Verdict::infra(format!("context does not load: {msg}"));
                }
                Err(Err(fault)) => return Verdict::infra(fault.to_string()),
            }
            let v = match mode {
                Mode::Check => match self.attempt_config(ctx, plan) {
                    Some(cfg) => s.attempt(plan, &cfg),
                    None => s.attempt(plan, &self.cfg),
                },
                Mode::Replay => s.replay(plan, &self.cfg),
            };
            if matches!(v, Verdict::Infra { .. }) {
                s.worker.kill();
            }
            v
        })
    }
}

impl Checker for CoqChecker {
    fn prover(&self) -> &'static str {
        "coq"
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn hammer_stats(&self) -> Option<prod_check::HammerStats> {
        Some(self.hammer_cache.stats())
    }

    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
        self.check_batch_timed(requests, &|i, v, _| progress(i, v))
            .into_iter()
            .map(|(v, _)| v)
            .collect()
    }
}

impl CoqChecker {
    /// [`Checker::check_batch`] that also reports each request's wall time (context loading
    /// included when the request triggered it).
    pub fn check_batch_timed(
        &self,
        requests: &[CheckRequest],
        progress: &(dyn Fn(usize, &Verdict, Duration) + Sync),
    ) -> Vec<(Verdict, Duration)> {
        self.batch_timed(requests, progress, Mode::Check)
    }

    /// Benchmarks only, for trusted text: each request's sentences run in its context with one
    /// sentinel after `Qed.` (see `Session::replay`); `Proved { time }` is Coq's own time for
    /// them in a worker of this pool. Never use it to judge untrusted text.
    pub fn replay_batch_timed(&self, requests: &[CheckRequest]) -> Vec<(Verdict, Duration)> {
        self.batch_timed(requests, &|_, _, _| {}, Mode::Replay)
    }

    fn batch_timed(
        &self,
        requests: &[CheckRequest],
        progress: &(dyn Fn(usize, &Verdict, Duration) + Sync),
        mode: Mode,
    ) -> Vec<(Verdict, Duration)> {
        let results: Vec<Mutex<Option<(Verdict, Duration)>>> =
            requests.iter().map(|_| Mutex::new(None)).collect();
        let finish = |i: usize, v: Verdict, t: Duration| {
            progress(i, &v, t);
            if let Ok(mut r) = results[i].lock() {
                *r = Some((v, t));
            }
        };
        let mut jobs = self.planned_jobs(requests, &finish);
        sort_by_context(&mut jobs);
        self.run_jobs(&jobs, &finish, mode);
        results
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| (Verdict::infra("no verdict produced"), Duration::ZERO))
            })
            .collect()
    }

    /// Rules first, so rejected text never reaches a worker; the jobs whose context loads.
    fn planned_jobs(
        &self,
        requests: &[CheckRequest],
        finish: &dyn Fn(usize, Verdict, Duration),
    ) -> Vec<Job> {
        let mut contexts: HashMap<ContextSpec, Result<Arc<PreparedContext>, String>> =
            HashMap::new();
        let mut jobs: Vec<Job> = vec![];
        for (i, req) in requests.iter().enumerate() {
            let p = match plan(req, &self.rules) {
                Ok(p) => p,
                Err(v) => {
                    finish(i, v, Duration::ZERO);
                    continue;
                }
            };
            let spec = ContextSpec {
                imports: req.imports.clone(),
                hammer: self.cfg.hammer.enabled && needs_hammer(&p),
                context: req.context.clone(),
            };
            let ctx = contexts
                .entry(spec.clone())
                .or_insert_with(|| PreparedContext::new(spec).map(Arc::new));
            match ctx {
                Ok(c) => jobs.push((c.clone(), p, i)),
                Err(e) => finish(
                    i,
                    Verdict::infra(format!("context does not load: {e}")),
                    Duration::ZERO,
                ),
            }
        }
        jobs
    }

    /// Each slot's worker takes the next job in order until none is left, timing each one.
    fn run_jobs(
        &self,
        jobs: &[Job],
        finish: &(dyn Fn(usize, Verdict, Duration) + Sync),
        mode: Mode,
    ) {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for (slot_index, slot) in self.slots.iter().enumerate() {
                let next = &next;
                scope.spawn(move || {
                    let mut guard = slot.lock().unwrap_or_else(|e| e.into_inner());
                    loop {
                        let j = next.fetch_add(1, Ordering::SeqCst);
                        let Some((ctx, plan, i)) = jobs.get(j) else {
                            break;
                        };
                        let t = Instant::now();
                        let v = self.run_one(slot_index, &mut guard, ctx, plan, mode);
                        finish(*i, v, t.elapsed());
                    }
                });
            }
        });
    }
}

/// A worker's job: the prepared context, the planned request, and the request's index.
type Job = (Arc<PreparedContext>, Plan, usize);

/// Group by context (each loaded once); a context that extends another comes right after it.
fn sort_by_context(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| {
        (&a.0.spec.imports, a.0.spec.hammer, &a.0.spec.context, a.2).cmp(&(
            &b.0.spec.imports,
            b.0.spec.hammer,
            &b.0.spec.context,
            b.2,
        ))
    });
}

/// Does this attempt need CoqHammer? Only then is its plugin imported after the imports: it adds
/// hints (to `auto with *`, for one) that change how an unrelated context replays, so a context
/// that compiles with `coqc` could fail to load ("No such goal").
fn needs_hammer(plan: &crate::session::Plan) -> bool {
    plan.steps.iter().any(|s| {
        s.hammer
            || prod_coq::identifiers(&s.text)
                .into_iter()
                .any(|r| prod_coq::COQHAMMER_TACTICS.contains(&&s.text[r]))
    })
}

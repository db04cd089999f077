//! `prod check`: local correctness of nodes with the real prover (a stable interface: JSON in,
//! JSON out).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::check_progress::CheckProgress;
use crate::node::{with_extra, Echo, NodeLine, SeenIds};
use anyhow::{anyhow, Context as _};
use clap::Args;
use prod_check::{cache_key, CheckRequest, Checker, Verdict, VerdictLine, VerificationCache};
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_check_isabelle::{IsabelleCheckConfig, IsabelleChecker};
use prod_core::{ConditionalProof, ProofLanguage};
use prod_prover::{CoqFinal, FinalCheck, IsabelleFinal, ProverKind};
use serde::Deserialize;

use crate::{exit, ranges};

/// Check nodes with the real prover, one JSON object per line in, one verdict per line out.
///
/// Input (`FILE.jsonl`, one node per line):
///   {"id": "n1", "imports": "From Coq Require Import Arith List Lia.", "context": "",
///    "statement": "Lemma foo : forall n : nat, n + 0 = n.", "proof": "<no_invoke> intros n. lia."}
/// `proof` is a conditional proof: its `<invoke> Lemma … . </invoke>` segments are admitted first.
/// `imports` may also be a list of sentences. Other fields are copied to the output line; one
/// that looks like a misspelt node field (`contxt`) is an error ("did you mean `context`?").
///
/// Output, same order: {"id": "n1", "verdict": "proved|failed|timed_out|rejected|infra",
/// "message": "...", "time_ms": N, "prover": "coq 8.16.1", …the node's other fields}; a proved
/// line also carries "axioms", "replacements" (the tactics its `hammer.` steps became) and
/// "universe_constraints" (what the proof adds to its statement's universe levels: such a node
/// proves only its own statement), which `prod tree solve --verdicts` reads. Exit 0 when every
/// line was judged, 2 on unreadable input.
///
/// Isabelle (`--prover isabelle`) needs a running Isabelle2022 server (`isabelle server -n prod`
/// prints `server "prod" = 127.0.0.1:PORT (password "PW")`) with heaps for the session; node
/// lines are the same with Isar text: {"imports": "Main", "statement": "lemma add_0: \"(n::nat) +
/// 0 = n\"", "proof": "<no_invoke> by simp"}; `sledgehammer` steps are expanded (the paper's
/// method list, then Sledgehammer). See crates/prod-check-isabelle/README.md.
///
/// Example: prod check --prover coq nodes.jsonl --json --workers 2 --timeout 10
/// Example: prod check --prover isabelle nodes.jsonl --server 127.0.0.1:4711 --password PW
///          --session HOL --dirs /opt/afp-2022-12-06/thys --json
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct CheckArgs {
    /// JSONL file of nodes (`-`: stdin, each batch answered as it arrives).
    pub file: PathBuf,
    /// One JSON object per output line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub checker: CheckerArgs,
}

/// How the checker is set up: the options `prod check` and `prod serve` share.
#[derive(Args, Debug)]
pub struct CheckerArgs {
    /// The prover: `coq` (runs here) or `isabelle` (a running Isabelle server).
    #[arg(long, value_enum, default_value_t = ProverKind::Coq)]
    pub prover: ProverKind,
    /// Persistent workers (default: `[check.coq] workers`, else one per core).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit per proof step, seconds (default: `[check.coq] step_timeout_s`, else 10).
    #[arg(long, value_parser = ranges::positive_u32)]
    pub timeout: Option<u32>,
    /// Address-space limit per Coq process, MiB (default 4096).
    #[arg(long, value_parser = ranges::positive_u64)]
    pub memory_mb: Option<u64>,
    /// SQLite verification cache file (default: `[check] cache`, else none).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Do not load CoqHammer; `hammer.` steps then fail like any unknown tactic.
    #[arg(long)]
    pub no_hammer: bool,
    #[command(flatten)]
    pub prover_root: crate::prover::ProverArgs,
    #[command(flatten)]
    pub load_paths: crate::prover::LoadPathArgs,
    /// Coq: a dataset directory whose library the nodes import (its stats.json bindings: a
    /// user's project compiled into DIR/lib/).
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
    #[command(flatten)]
    pub isabelle: crate::prover::IsabelleArgs,
    /// Isabelle: leave the logic session running afterwards (faster next time).
    #[arg(long, help_heading = "Isabelle")]
    pub keep_session: bool,
}

/// The `[check]` section of `prod.toml`.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct CheckSection {
    /// Verification cache file.
    pub cache: Option<PathBuf>,
    pub coq: CoqCheckConfig,
    pub isabelle: IsabelleCheckConfig,
}

impl CheckSection {
    /// Every number of `[check.coq]` and `[check.isabelle]` in its range.
    pub fn validate(&self) -> Result<(), String> {
        self.coq
            .validate()
            .map_err(|e| format!("[check.coq] {e}"))?;
        self.isabelle
            .validate()
            .map_err(|e| format!("[check.isabelle] {e}"))
    }
}

/// The checker behind `prod check`: the pipeline below is the same for every prover.
enum Backend {
    Coq(CoqChecker),
    Isabelle(Box<IsabelleChecker>),
}

impl Backend {
    fn checker(&self) -> &dyn Checker {
        match self {
            Backend::Coq(c) => c,
            Backend::Isabelle(c) => &**c,
        }
    }

    /// Check with each request's wall time (Coq measures it per worker; otherwise the time
    /// since the batch started).
    fn check_timed(
        &self,
        requests: &[CheckRequest],
        progress: &(dyn Fn(usize, &Verdict, Duration) + Sync),
    ) -> Vec<(Verdict, Duration)> {
        match self {
            Backend::Coq(c) => c.check_batch_timed(requests, progress),
            Backend::Isabelle(c) => {
                let start = std::time::Instant::now();
                c.check_batch(requests, &|i, v| progress(i, v, start.elapsed()))
                    .into_iter()
                    .map(|v| (v, start.elapsed()))
                    .collect()
            }
        }
    }
}

fn coq_backend(a: &CheckerArgs, mut cfg: CoqCheckConfig) -> Result<Backend, String> {
    if let Some(w) = a.workers {
        cfg.workers = w;
    }
    if let Some(t) = a.timeout {
        cfg.step_timeout_s = t;
    }
    if let Some(m) = a.memory_mb {
        cfg.memory_limit_mb = m;
    }
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    prod_prover::start_coq(cfg).map(Backend::Coq)
}

fn isabelle_backend(a: &CheckerArgs, mut cfg: IsabelleCheckConfig) -> Result<Backend, String> {
    a.isabelle.apply(&mut cfg);
    if let Some(w) = a.workers {
        cfg.workers = w;
    }
    if let Some(t) = a.timeout {
        cfg.step_timeout_s = t;
    }
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    prod_prover::start_isabelle(cfg).map(|c| Backend::Isabelle(Box::new(c)))
}

/// Printing in input order: the next line to print, the verdicts so far, the first write error.
type PrintState = (usize, Vec<Option<(Verdict, Duration)>>, std::io::Result<()>);

/// A node read from the input: its id and own fields (repeated in its output line) and its
/// request, or the verdict it already has (a proof that is not a conditional proof is the
/// model's fault, not unreadable input).
pub(crate) type InputNode = (Echo, Result<CheckRequest, Verdict>);

/// A node as `check` takes it (its `locally_correct`, if any, is `tree solve`'s to read), its
/// proof parsed in the prover's language `lang` (markers only outside its strings and comments).
pub(crate) fn node_input(n: NodeLine, lang: &dyn ProofLanguage) -> InputNode {
    input_from(ConditionalProof::parse_with(&n.proof, lang), n)
}

fn input_from(parsed: Result<ConditionalProof, prod_core::ParseError>, n: NodeLine) -> InputNode {
    let req = parsed
        .map(|p| CheckRequest::new(&n.imports, &n.context, &n.statement, p))
        .map_err(|e| Verdict::rejected(format!("not a conditional proof: {e}")));
    (
        Echo {
            id: n.id,
            extra: n.extra,
        },
        req,
    )
}

pub(crate) fn load_section(explicit: Option<&Path>) -> anyhow::Result<CheckSection> {
    let file = crate::config::ConfigFile::load(explicit)?;
    let section: CheckSection = file.section("check")?;
    section.validate().map_err(|e| file.error(e))?;
    Ok(section)
}

/// Parse the input; `Err` names the line.
pub(crate) fn read_nodes(file: &Path, lang: &dyn ProofLanguage) -> anyhow::Result<Vec<InputNode>> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        ))
    };
    let (mut out, mut seen) = (vec![], SeenIds::default());
    for (i, line) in reader.split(b'\n').enumerate() {
        let bytes =
            line.with_context(|| format!("{}: cannot read line {}", file.display(), i + 1))?;
        if let Some(node) = parse_line((file, i + 1), bytes, &mut seen, lang)? {
            out.push(node);
        }
    }
    Ok(out)
}

/// Line `n` of `file` as a node (`None` for a blank line); the error names the line.
fn parse_line(
    (file, n): (&Path, usize),
    bytes: Vec<u8>,
    seen: &mut SeenIds,
    lang: &dyn ProofLanguage,
) -> anyhow::Result<Option<InputNode>> {
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("{}: line {n} is not UTF-8", file.display()))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let node: NodeLine = serde_json::from_str(&text)
        .with_context(|| format!("{}: line {n} is not a node", file.display()))?;
    seen.admit(&node.id)
        .map_err(|e| anyhow!("{}: line {n}: {e}", file.display()))?;
    Ok(Some(node_input(node, lang)))
}

/// Where a verdict came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Known from the input alone (not a conditional proof).
    Input,
    /// The verification cache.
    Cache,
    /// The prover, now.
    Prover,
}

/// Called once per node with its index, verdict, time and origin (from any thread).
pub(crate) type Done<'a> = &'a (dyn Fn(usize, &Verdict, Duration, Origin) + Sync);

/// Why the checker could not be set up: bad input (exit 2) or anything else (exit 1).
pub(crate) enum SetupError {
    BadInput(anyhow::Error),
    Failure(anyhow::Error),
}

impl SetupError {
    pub(crate) fn exit(self) -> i32 {
        match self {
            SetupError::BadInput(e) => exit::bad_input(e),
            SetupError::Failure(e) => exit::failure(e),
        }
    }
}

/// The checking pipeline of `prod check` and `prod serve`: verdicts known from the input, cache
/// hits, then the prover for the rest (cached afterwards). One code path for both commands.
pub(crate) struct Pipeline {
    backend: Backend,
    cache: Option<VerificationCache>,
    fingerprint: String,
    /// The verdicts' provenance: `coq 8.16.1`, `rocq 9.2`, `isabelle`.
    prover: String,
    keep_session: bool,
}

impl Pipeline {
    /// The Coq checker, when the backend is Coq (the service's canary self-check uses it).
    pub(crate) fn coq_checker(&self) -> Option<&CoqChecker> {
        match &self.backend {
            Backend::Coq(c) => Some(c),
            Backend::Isabelle(_) => None,
        }
    }

    /// The config file, the prover root and load paths, the backend and the cache.
    pub(crate) fn open(a: &CheckerArgs) -> Result<Self, SetupError> {
        use SetupError::{BadInput, Failure};
        let section = a.config.check_section().map_err(BadInput)?;
        let mut coq = section.coq;
        a.prover_root
            .apply(&mut coq)
            .map_err(|e| BadInput(anyhow!(e)))?;
        if a.prover == ProverKind::Coq {
            a.load_paths
                .apply(&mut coq, a.dataset.as_deref())
                .map_err(|e| BadInput(anyhow!(e)))?;
        }
        let backend = match a.prover {
            ProverKind::Isabelle => isabelle_backend(a, section.isabelle),
            ProverKind::Coq => coq_backend(a, coq),
        }
        .map_err(|e| Failure(anyhow!(e)))?;
        let cache = match a.cache.as_ref().or(section.cache.as_ref()) {
            Some(p) => Some(VerificationCache::open(p).map_err(|e| Failure(e.into()))?),
            None => None,
        };
        let fingerprint = backend.checker().fingerprint();
        let prover = prod_prover::prover_name(a.prover, &fingerprint);
        Ok(Pipeline {
            backend,
            cache,
            fingerprint,
            prover,
            keep_session: a.keep_session,
        })
    }

    pub(crate) fn prover(&self) -> &str {
        &self.prover
    }

    /// Checks that run at the same time.
    pub(crate) fn workers(&self) -> usize {
        match &self.backend {
            Backend::Coq(c) => c.workers(),
            Backend::Isabelle(c) => c.config().workers.max(1),
        }
    }

    /// Judge every node; `done` hears each verdict as soon as it is known (known ones first).
    /// Returns the verdicts in input order.
    pub(crate) fn check(
        &self,
        nodes: &[Result<CheckRequest, Verdict>],
        done: Done<'_>,
    ) -> Vec<(Verdict, Duration)> {
        let mut known: Vec<Option<(Verdict, Duration)>> = vec![None; nodes.len()];
        let mut todo = vec![];
        for (i, req) in nodes.iter().enumerate() {
            let (v, origin) = match req {
                Err(v) => (v.clone(), Origin::Input),
                Ok(r) => match self.cached(r) {
                    Some(v) => (v, Origin::Cache),
                    None => {
                        todo.push(i);
                        continue;
                    }
                },
            };
            done(i, &v, Duration::ZERO, origin);
            known[i] = Some((v, Duration::ZERO));
        }
        let requests: Vec<CheckRequest> = todo
            .iter()
            .filter_map(|&i| nodes[i].as_ref().ok().cloned())
            .collect();
        let results = self
            .backend
            .check_timed(&requests, &|j, v, t| done(todo[j], v, t, Origin::Prover));
        for (j, r) in results.into_iter().enumerate() {
            if let Some(c) = &self.cache {
                let _ = c.put(&cache_key(&self.fingerprint, &requests[j]), &r.0);
            }
            known[todo[j]] = Some(r);
        }
        known
            .into_iter()
            .map(|k| k.unwrap_or_else(|| (Verdict::infra("no verdict produced"), Duration::ZERO)))
            .collect()
    }

    fn cached(&self, r: &CheckRequest) -> Option<Verdict> {
        let c = self.cache.as_ref()?;
        c.get(&cache_key(&self.fingerprint, r)).ok().flatten()
    }

    /// The cold re-check of assembled proofs: Coq compiles the whole file in a fresh sandbox,
    /// Isabelle builds the assembled theory in a fresh session.
    pub(crate) fn final_checker(&self) -> Box<dyn FinalCheck> {
        match &self.backend {
            Backend::Coq(c) => Box::new(CoqFinal(c.config().clone())),
            Backend::Isabelle(c) => Box::new(IsabelleFinal(c.config().clone())),
        }
    }

    /// Without a cache file, keep the newest `max` verdicts in memory (the cache is keyed and
    /// filled as a file's is: never an infra verdict).
    pub(crate) fn keep_verdicts_in_memory(
        &mut self,
        max: u32,
    ) -> Result<(), prod_check::CacheError> {
        if self.cache.is_none() {
            self.cache = Some(VerificationCache::in_memory_bounded(max)?);
        }
        Ok(())
    }

    /// After the last check: stop the Isabelle session unless asked to keep it.
    pub(crate) fn close(&self) {
        if let Backend::Isabelle(c) = &self.backend {
            if !self.keep_session {
                if let Err(e) = c.stop_session() {
                    eprintln!("warning: could not stop the Isabelle session: {e}");
                }
            }
        }
    }
}

pub fn run(a: CheckArgs) -> i32 {
    if a.file == Path::new("-") {
        return run_stream(a);
    }
    let nodes = match read_nodes(&a.file, a.checker.prover.language()) {
        Ok(n) => n,
        Err(e) => return exit::bad_input(e),
    };
    if nodes.is_empty() {
        // Not an error (a filter upstream may leave nothing), but never silent.
        eprintln!("{}: no nodes, nothing to check", a.file.display());
        return 0;
    }
    let pipeline = match Pipeline::open(&a.checker) {
        Ok(p) => p,
        Err(e) => return e.exit(),
    };
    let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
    let progress = CheckProgress::new("check", ids.len(), a.json);
    let written = check_printing(&pipeline, &ids, &requests, a.json, Some(&progress));
    progress.finish();
    pipeline.close();
    exit::written(written)
}

/// `prod check -`: nodes are checked as they arrive on stdin (whatever has arrived while the
/// previous batch was checked forms the next batch) and answered in input order, so a caller
/// can feed a pipe and read verdicts before it has written everything. A line that is not a node
/// ends the run with exit 2 after every earlier node is answered.
fn run_stream(a: CheckArgs) -> i32 {
    let pipeline = match Pipeline::open(&a.checker) {
        Ok(p) => p,
        Err(e) => return e.exit(),
    };
    let (tx, rx) = std::sync::mpsc::channel::<anyhow::Result<InputNode>>();
    let lang = a.checker.prover.language();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        let mut seen = SeenIds::default();
        for (i, line) in stdin.lock().split(b'\n').enumerate() {
            let node = line
                .map_err(anyhow::Error::from)
                .and_then(|b| parse_line((Path::new("-"), i + 1), b, &mut seen, lang));
            let stop = node.is_err();
            match node {
                Ok(None) => continue,
                Ok(Some(n)) => {
                    if tx.send(Ok(n)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
            if stop {
                return;
            }
        }
    });
    let batch_cap = pipeline.workers().max(1) * 8;
    let mut written = Ok(());
    let mut bad = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < batch_cap {
            match rx.try_recv() {
                Ok(x) => batch.push(x),
                Err(_) => break,
            }
        }
        let mut nodes = vec![];
        for item in batch {
            match item {
                Ok(n) => nodes.push(n),
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
        if written.is_ok() {
            written = check_printing(&pipeline, &ids, &requests, a.json, None);
        }
        if bad.is_some() {
            break;
        }
    }
    pipeline.close();
    match bad {
        Some(e) => exit::bad_input(e),
        None => exit::written(written),
    }
}

/// Check `requests` and print one line per node in input order, each as soon as every earlier
/// one is done. Returns the first write error (a closed stdout), if any.
fn check_printing(
    pipeline: &Pipeline,
    ids: &[Echo],
    requests: &[Result<CheckRequest, Verdict>],
    json: bool,
    progress: Option<&CheckProgress>,
) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let state = Mutex::new((0usize, vec![None; ids.len()], Ok::<(), std::io::Error>(())));
    let flush = |st: &mut PrintState| {
        let mut out = stdout.lock();
        while st.0 < ids.len() {
            let Some((v, t)) = st.1[st.0].as_ref() else {
                break;
            };
            let line = render(&ids[st.0], v, *t, Some(pipeline.prover()), json);
            if st.2.is_ok() {
                st.2 = writeln!(out, "{line}").and_then(|_| out.flush());
            }
            st.0 += 1;
        }
    };
    pipeline.check(requests, &|i, v, t, _| {
        if let Some(p) = progress {
            p.record(v);
        }
        if let Ok(mut st) = state.lock() {
            st.1[i] = Some((v.clone(), t));
            flush(&mut st);
        }
    });
    match state.into_inner() {
        Ok(s) => s.2,
        Err(e) => e.into_inner().2,
    }
}

/// A node's output object: [`verdict_json`] followed by the node's own fields.
pub(crate) fn echo_json(
    e: &Echo,
    v: &Verdict,
    t: Duration,
    prover: Option<&str>,
) -> serde_json::Value {
    with_extra(verdict_json(&e.id, v, t, prover), &e.extra)
}

/// One output object (`prod check --json`'s line, `prod serve`'s result): the verdict's
/// [`VerdictLine`], the one JSON form `prod tree solve --verdicts` reads back. `prover` (`coq
/// 8.16.1`, `rocq 9.2`, `isabelle`) is the verdict's provenance, where it is known.
pub(crate) fn verdict_json(
    id: &serde_json::Value,
    v: &Verdict,
    t: Duration,
    prover: Option<&str>,
) -> serde_json::Value {
    VerdictLine::new(id.clone(), v, t, prover).to_json()
}

/// One output line (with `json`, the node's own fields after the verdict's).
pub(crate) fn render(
    echo: &Echo,
    v: &Verdict,
    t: Duration,
    prover: Option<&str>,
    json: bool,
) -> String {
    if json {
        return echo_json(echo, v, t, prover).to_string();
    }
    let id = match &echo.id {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let line = VerdictLine::new(echo.id.clone(), v, t, prover);
    format!(
        "{id}\t{}\t{} ms\t{}",
        line.verdict, line.time_ms, line.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    const COQ: &dyn ProofLanguage = &prod_coq::CoqLanguage;

    #[test]
    fn input_errors_name_the_line_and_bad_proofs_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.jsonl");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"Lemma a : True.\",\"proof\":\"<no_invoke> exact I.\"}\n\n\
             {\"id\":\"b\",\"statement\":\"Lemma b : True.\",\"proof\":\"exact I.\"}\n",
        )
        .unwrap();
        let nodes = read_nodes(&p, COQ).unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(nodes[0].1.is_ok());
        assert_eq!(nodes[1].1.as_ref().unwrap_err().kind().as_str(), "rejected");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"x\",\"proof\":\"<no_invoke>\"}\n{\"id\":\"b\"}\n",
        )
        .unwrap();
        let e = format!("{:#}", read_nodes(&p, COQ).unwrap_err());
        assert!(e.contains("line 2"), "{e}");
        // A misspelt field is an error, never a silently empty context.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"contxt\":\"x\",\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let e = format!("{:#}", read_nodes(&p, COQ).unwrap_err());
        assert!(
            e.contains("line 1") && e.contains("unknown field `contxt`, did you mean `context`?"),
            "{e}"
        );
        // Other fields are the caller's: kept, and repeated in the output line.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"custom_id\":\"k-7\",\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let nodes = read_nodes(&p, COQ).unwrap();
        let line = render(
            &nodes[0].0,
            &Verdict::infra("x"),
            Duration::ZERO,
            None,
            true,
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (&j["id"], &j["custom_id"], &j["verdict"]),
            (
                &serde_json::json!("a"),
                &serde_json::json!("k-7"),
                &serde_json::json!("infra")
            )
        );
        assert!(read_nodes(&dir.path().join("missing.jsonl"), COQ).is_err());
        // Output lines and `tree solve --verdicts` are keyed by id: one id, one node.
        std::fs::write(
            &p,
            "{\"id\":1,\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n\
             {\"id\":\"1\",\"statement\":\"t\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let e = format!("{:#}", read_nodes(&p, COQ).unwrap_err());
        assert!(e.contains("line 2: duplicate node id '1'"), "{e}");
        // `tree solve`'s lines (with `locally_correct`) are `check`'s input as they are.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"s\",\"proof\":\"<no_invoke>\",\"locally_correct\":true}\n",
        )
        .unwrap();
        assert_eq!(read_nodes(&p, COQ).unwrap().len(), 1);
    }

    #[test]
    fn output_has_exactly_the_interface_keys() {
        let v = Verdict::Failed {
            step: 2,
            message: "no".into(),
        };
        let line = render(
            &Echo {
                id: serde_json::json!("n1"),
                ..Echo::default()
            },
            &v,
            Duration::from_millis(7),
            Some("coq 8.16.1"),
            true,
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["id", "message", "prover", "time_ms", "verdict"]);
        assert_eq!(j["verdict"], "failed");
        assert_eq!(j["time_ms"], 7);
    }
}

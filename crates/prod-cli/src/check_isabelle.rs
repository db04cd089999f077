//! `prod check-isabelle`: local correctness of nodes with a real Isabelle server (issue F,
//! deliverable 5). Same input and output lines as `prod check`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context as _};
use clap::Args;
use prod_check::{cache_key, CheckRequest, Checker, Verdict, VerificationCache};
use prod_check_isabelle::{IsabelleCheckConfig, IsabelleChecker};
use prod_core::ConditionalProof;
use serde::Deserialize;

use crate::exit;

/// Check nodes with a running Isabelle server, one JSON object per line in, one verdict per line out.
///
/// Input (`FILE.jsonl`, one node per line):
///   {"id": "n1", "imports": "Main", "context": "",
///    "statement": "lemma add_0: \"(n::nat) + 0 = n\"", "proof": "<no_invoke> by simp"}
/// `proof` is a conditional proof: its `<invoke> lemma name: "…" </invoke>` segments are admitted
/// first; `sledgehammer` steps are replaced by the paper's method list, then Sledgehammer.
///
/// Output, same order: {"id": "n1", "verdict": "proved|failed|timed_out|rejected|infra",
/// "message": "...", "time_ms": N}. Exit 0 when every line was judged, 2 on unreadable input.
///
/// The server: `isabelle server -n prod` prints `server "prod" = 127.0.0.1:PORT (password "PW")`.
/// Needs Isabelle2022 and heaps for the session (see crates/prod-check-isabelle/README.md).
///
/// Example: prod check-isabelle nodes.jsonl --server 127.0.0.1:4711 --password PW --session HOL
///          --dirs /opt/afp-2022-12-06/thys --json
#[derive(Args, Debug)]
pub struct CheckIsabelleArgs {
    /// JSONL file of nodes (`-` for stdin).
    pub file: PathBuf,
    /// One JSON object per output line.
    #[arg(long)]
    pub json: bool,
    /// `HOST:PORT` of the Isabelle server (default: `[check.isabelle] server`).
    #[arg(long)]
    pub server: Option<String>,
    /// The server's password (default: `[check.isabelle] password`, else $PROD_ISABELLE_PASSWORD).
    #[arg(long, env = "PROD_ISABELLE_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Logic session, e.g. HOL or an AFP session (default: `[check.isabelle] session`, else HOL).
    #[arg(long)]
    pub session: Option<String>,
    /// Directory with ROOT/ROOTS files, e.g. the AFP's `thys` (repeatable).
    #[arg(long)]
    pub dirs: Vec<String>,
    /// Start the server with this command when nobody listens, e.g. "isabelle server -n prod".
    #[arg(long)]
    pub server_command: Option<String>,
    /// Parallel checks (connections to the one session).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Seconds without progress before a pass is stopped (the per-step limit; default 10).
    #[arg(long)]
    pub timeout: Option<u32>,
    /// SQLite verification cache file (default: `[check] cache`, else none).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// `sledgehammer` steps fail instead of being expanded.
    #[arg(long)]
    pub no_hammer: bool,
    /// Leave the logic session running on the server afterwards (faster next time).
    #[arg(long)]
    pub keep_session: bool,
    /// Config file (default: $PROD_CONFIG, else ./prod.toml if present); reads `[check]` and
    /// `[check.isabelle]`.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

#[derive(Deserialize, Default, Debug)]
#[serde(default)]
struct CheckSection {
    cache: Option<PathBuf>,
    isabelle: IsabelleCheckConfig,
}

#[derive(Deserialize)]
struct NodeLine {
    id: serde_json::Value,
    #[serde(default)]
    imports: String,
    #[serde(default)]
    context: String,
    statement: String,
    proof: String,
}

type Node = (serde_json::Value, Result<CheckRequest, Verdict>);

fn read_nodes(file: &Path) -> anyhow::Result<Vec<Node>> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        ))
    };
    let mut out = vec![];
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let bytes = line.with_context(|| format!("{}: cannot read line {n}", file.display()))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow!("{}: line {n} is not UTF-8", file.display()))?;
        if text.trim().is_empty() {
            continue;
        }
        let node: NodeLine = serde_json::from_str(&text)
            .with_context(|| format!("{}: line {n} is not a node", file.display()))?;
        let req = ConditionalProof::parse(&node.proof)
            .map(|p| CheckRequest::new(&node.imports, &node.context, &node.statement, p))
            .map_err(|e| Verdict::rejected(format!("not a conditional proof: {e}")));
        out.push((node.id, req));
    }
    Ok(out)
}

fn render(id: &serde_json::Value, v: &Verdict, ms: u64, json: bool) -> String {
    let ms = match v {
        Verdict::Proved { time, .. } => time.as_millis() as u64,
        _ => ms,
    };
    if json {
        serde_json::json!({"id": id, "verdict": v.kind().as_str(), "message": v.message(), "time_ms": ms})
            .to_string()
    } else {
        let id = match id {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        format!("{id}\t{}\t{ms} ms\t{}", v.kind(), v.message())
    }
}

pub fn run(a: CheckIsabelleArgs) -> i32 {
    let section: CheckSection = match crate::config::ConfigFile::load(a.config.as_deref())
        .and_then(|c| c.section("check"))
    {
        Ok(s) => s,
        Err(e) => return exit::bad_input(e),
    };
    let nodes = match read_nodes(&a.file) {
        Ok(n) => n,
        Err(e) => return exit::bad_input(e),
    };
    let mut cfg = section.isabelle;
    if let Some(s) = a.server {
        cfg.server = s;
    }
    if let Some(p) = a.password {
        cfg.password = p;
    }
    if let Some(s) = a.session {
        cfg.session = s;
    }
    if !a.dirs.is_empty() {
        cfg.dirs = a.dirs;
    }
    if let Some(c) = a.server_command {
        cfg.server_command = c.split_whitespace().map(String::from).collect();
    }
    if let Some(w) = a.workers {
        cfg.workers = w;
    }
    if let Some(t) = a.timeout {
        cfg.step_timeout_s = t;
    }
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    let checker = if cfg.server_command.is_empty() {
        match IsabelleChecker::connect(cfg) {
            Ok(c) => c,
            Err(e) => return exit::failure(anyhow!(e)),
        }
    } else {
        // The server may not be up yet: the first check starts it.
        IsabelleChecker::with_version(cfg, "started by prod")
    };
    let cache = match a.cache.or(section.cache) {
        Some(p) => match VerificationCache::open(&p) {
            Ok(c) => Some(c),
            Err(e) => return exit::failure(e.into()),
        },
        None => None,
    };
    let fp = checker.fingerprint();
    let mut verdicts: Vec<Option<(Verdict, u64)>> = vec![None; nodes.len()];
    let mut todo = vec![];
    for (i, (_, req)) in nodes.iter().enumerate() {
        match req {
            Err(v) => verdicts[i] = Some((v.clone(), 0)),
            Ok(r) => match cache
                .as_ref()
                .and_then(|c| c.get(&cache_key(&fp, r)).ok().flatten())
            {
                Some(v) => verdicts[i] = Some((v, 0)),
                None => todo.push(i),
            },
        }
    }
    let requests: Vec<CheckRequest> = todo
        .iter()
        .filter_map(|&i| nodes[i].1.as_ref().ok().cloned())
        .collect();
    let t0 = Instant::now();
    let results = checker.check_batch(&requests, &|_, _| {});
    let ms = if requests.is_empty() {
        0
    } else {
        (t0.elapsed().as_millis() as u64) / requests.len() as u64
    };
    for (j, v) in results.into_iter().enumerate() {
        if let Some(c) = &cache {
            let _ = c.put(&cache_key(&fp, &requests[j]), &v);
        }
        verdicts[todo[j]] = Some((v, ms));
    }
    if !a.keep_session {
        if let Err(e) = checker.stop_session() {
            eprintln!("warning: could not stop the Isabelle session: {e}");
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut r = Ok(());
    for (i, v) in verdicts.iter().enumerate() {
        let (v, ms) = v.clone().unwrap_or((Verdict::infra("no verdict"), 0));
        if r.is_ok() {
            r = writeln!(out, "{}", render(&nodes[i].0, &v, ms, a.json));
        }
    }
    exit::written(r.and_then(|_| out.flush()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_in_and_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.jsonl");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"lemma a: \\\"x = x\\\"\",\"proof\":\"<no_invoke> by simp\"}\n\n\
             {\"id\":\"b\",\"statement\":\"lemma b: \\\"x\\\"\",\"proof\":\"by simp\"}\n",
        )
        .unwrap();
        let nodes = read_nodes(&p).unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(nodes[0].1.is_ok());
        assert_eq!(nodes[1].1.as_ref().unwrap_err().kind().as_str(), "rejected");
        std::fs::write(&p, "{\"id\":\"a\"}\n").unwrap();
        let e = format!("{:#}", read_nodes(&p).unwrap_err());
        assert!(e.contains("line 1"), "{e}");
        let line = render(
            &serde_json::json!("n1"),
            &Verdict::TimedOut { step: 3 },
            7,
            true,
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(j["verdict"], "timed_out");
        assert_eq!(j["time_ms"], 7);
    }
}

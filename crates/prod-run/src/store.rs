//! The run store: everything a run produces, in one SQLite file per run directory
//! (`RUN_DIR/run.sqlite`), so that a killed run resumes where it stopped.
//!
//! What is stored, and why it makes resume exact:
//! * the **sample log** — every policy answer (completion or P(<use_invoke>) batch) by
//!   (round, phase, sequence number), with a hash of the request. Tree generation is
//!   deterministic given the policy's answers, so replaying the log rebuilds the same nodes, and
//!   only requests past the end of the log reach the model (nothing is sampled twice);
//! * **nodes** (round, phase, theorem, depth, tree, forced `t0`, completion) and their
//!   **verdicts**, committed one by one as the checker reports them. `Infra` verdicts are never
//!   stored: such nodes stay unchecked, are retried on resume and count as `Unknown` (never as
//!   failures) if they still fail;
//! * global verdicts, final (cold `coqc`) checks, example weights, checkpoints, and phase marks.
//!
//! The store is a struct with a small method surface so that another backend (PostgreSQL,
//! issue G) can implement the same operations later.

use std::path::Path;
use std::sync::Mutex;

use prod_check::Verdict;
use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("run store: bad stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The stored log does not match what the run asks now (config changed between runs).
    #[error("run store: {0}")]
    Mismatch(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// SHA-256 (hex) of length-prefixed fields.
pub fn hash_fields(fields: &[&str]) -> String {
    let mut h = Sha256::new();
    for f in fields {
        h.update((f.len() as u64).to_le_bytes());
        h.update(f.as_bytes());
    }
    hex::encode(h.finalize())
}

/// A node as stored (the policy's output, before checking).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredNode {
    pub id: i64,
    pub round: u32,
    pub phase: String,
    /// Index of the root theorem in the run's theorem list (`None` for lemma nodes when unknown).
    pub theorem: Option<i64>,
    pub depth: u32,
    pub tree: u32,
    /// `use_invoke`, `no_invoke` or `None`.
    pub forced_t0: Option<String>,
    /// `sampled` or `ground_truth`.
    pub origin: String,
    pub context_key: String,
    pub statement: String,
    pub completion: String,
}

/// A stored training example (a round's weighted example).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredExample {
    pub context: String,
    pub statement: String,
    pub target: String,
    pub weight: f64,
    pub kind: String,
}

/// The run store (SQLite, embedded). Safe to share between threads (one connection behind a
/// mutex: the checker's progress callback commits verdicts from worker threads).
pub struct RunStore {
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (key TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS theorems (
    idx INTEGER PRIMARY KEY, id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sample_log (
    round INTEGER NOT NULL, phase TEXT NOT NULL, seq INTEGER NOT NULL,
    request TEXT NOT NULL, answer TEXT NOT NULL,
    PRIMARY KEY (round, phase, seq));
CREATE TABLE IF NOT EXISTS nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    round INTEGER NOT NULL, phase TEXT NOT NULL, ord INTEGER NOT NULL,
    theorem INTEGER, depth INTEGER NOT NULL, tree INTEGER NOT NULL,
    forced_t0 TEXT, origin TEXT NOT NULL,
    context_key TEXT NOT NULL, statement TEXT NOT NULL, completion TEXT NOT NULL,
    UNIQUE (round, phase, ord));
CREATE TABLE IF NOT EXISTS verdicts (
    node INTEGER PRIMARY KEY, kind TEXT NOT NULL, verdict TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS globals (
    node INTEGER PRIMARY KEY, global TEXT NOT NULL, height INTEGER);
CREATE TABLE IF NOT EXISTS finals (
    round INTEGER NOT NULL, phase TEXT NOT NULL, theorem INTEGER NOT NULL, tree INTEGER NOT NULL,
    kind TEXT NOT NULL, verdict TEXT NOT NULL, file TEXT NOT NULL,
    PRIMARY KEY (round, phase, theorem, tree));
CREATE TABLE IF NOT EXISTS examples (
    round INTEGER NOT NULL, ord INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (round, ord));
CREATE TABLE IF NOT EXISTS checkpoints (round INTEGER PRIMARY KEY, path TEXT NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phases (
    round INTEGER NOT NULL, phase TEXT NOT NULL, done_at INTEGER NOT NULL DEFAULT (strftime('%s','now')),
    seconds REAL NOT NULL DEFAULT 0, PRIMARY KEY (round, phase));
";

impl RunStore {
    /// Open (creating if needed) `RUN_DIR/run.sqlite`.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Mismatch(format!("cannot create run directory {}: {e}", dir.display()))
        })?;
        Self::open(&dir.join("run.sqlite"))
    }

    pub fn open(path: &Path) -> Result<Self> {
        Self::init(Connection::open(path)?)
    }

    pub fn in_memory() -> Result<Self> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self> {
        let _ = conn.pragma_update(None, "journal_mode", "WAL");
        // Each verdict is its own transaction; NORMAL keeps a commit cheap and WAL keeps the
        // file consistent after a kill (at worst the last commits are lost and redone).
        let _ = conn.pragma_update(None, "synchronous", "NORMAL");
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(SCHEMA)?;
        Ok(RunStore { conn: Mutex::new(conn) })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    // --- meta / config -------------------------------------------------------------------

    pub fn get_meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self.conn().query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0)).optional()?)
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn().execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![key, value])?;
        Ok(())
    }

    /// Records `value` under `key` the first time; later opens must present the same value
    /// (a run resumed with a different configuration would mix two experiments).
    pub fn ensure_meta(&self, key: &str, value: &str) -> Result<()> {
        match self.get_meta(key)? {
            None => self.set_meta(key, value),
            Some(v) if v == value => Ok(()),
            Some(v) => Err(StoreError::Mismatch(format!(
                "this run directory was started with a different {key}:\n  stored: {}\n  now:    {}\nuse a new --out directory",
                clip(&v),
                clip(value)
            ))),
        }
    }

    // --- contexts and theorems ----------------------------------------------------------

    /// Stores a context text once; returns its key.
    pub fn put_context(&self, text: &str) -> Result<String> {
        let key = hash_fields(&[text]);
        self.conn().execute("INSERT OR IGNORE INTO contexts (key, text) VALUES (?1, ?2)", params![key, text])?;
        Ok(key)
    }

    pub fn context(&self, key: &str) -> Result<Option<String>> {
        Ok(self.conn().query_row("SELECT text FROM contexts WHERE key = ?1", params![key], |r| r.get(0)).optional()?)
    }

    /// Theorems of the run, by index: `(id, data JSON)`. Stored once; a resume must list the
    /// same ids in the same order.
    pub fn ensure_theorems(&self, theorems: &[(String, String)]) -> Result<()> {
        let mut conn = self.conn();
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM theorems", [], |r| r.get(0))?;
        if n == 0 {
            let tx = conn.transaction()?;
            for (i, (id, data)) in theorems.iter().enumerate() {
                tx.execute("INSERT INTO theorems (idx, id, data) VALUES (?1, ?2, ?3)", params![i as i64, id, data])?;
            }
            tx.commit()?;
            return Ok(());
        }
        let mut stmt = conn.prepare("SELECT id FROM theorems ORDER BY idx")?;
        let ids: Vec<String> = stmt.query_map([], |r| r.get(0))?.collect::<std::result::Result<_, _>>()?;
        let want: Vec<&String> = theorems.iter().map(|t| &t.0).collect();
        if ids.iter().collect::<Vec<_>>() != want {
            return Err(StoreError::Mismatch("the theorem list differs from the one this run started with".into()));
        }
        Ok(())
    }

    // --- sample log ----------------------------------------------------------------------

    /// The logged answer to request `seq` of (round, phase), checking the request hash.
    pub fn logged_answer(&self, round: u32, phase: &str, seq: u64, request: &str) -> Result<Option<String>> {
        let row: Option<(String, String)> = self
            .conn()
            .query_row(
                "SELECT request, answer FROM sample_log WHERE round = ?1 AND phase = ?2 AND seq = ?3",
                params![round, phase, seq as i64],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        match row {
            None => Ok(None),
            Some((req, ans)) if req == request => Ok(Some(ans)),
            Some(_) => Err(StoreError::Mismatch(format!(
                "sample log of round {round} phase {phase} differs at request {seq} (model or config changed?)"
            ))),
        }
    }

    /// Logs answers `first_seq..` in one transaction.
    pub fn log_answers(&self, round: u32, phase: &str, first_seq: u64, entries: &[(String, String)]) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for (i, (req, ans)) in entries.iter().enumerate() {
            tx.execute(
                "INSERT OR REPLACE INTO sample_log (round, phase, seq, request, answer) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![round, phase, (first_seq + i as u64) as i64, req, ans],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn log_len(&self, round: u32, phase: &str) -> Result<u64> {
        let n: i64 = self.conn().query_row(
            "SELECT COUNT(*) FROM sample_log WHERE round = ?1 AND phase = ?2",
            params![round, phase],
            |r| r.get(0),
        )?;
        Ok(n as u64)
    }

    // --- nodes ---------------------------------------------------------------------------

    /// Stores a phase's nodes once (in order). If they are already there (resume), checks that
    /// they are the same and returns the stored ids.
    pub fn put_nodes(&self, round: u32, phase: &str, nodes: &[StoredNode]) -> Result<Vec<i64>> {
        let existing = self.nodes(round, phase)?;
        if !existing.is_empty() {
            let same = existing.len() == nodes.len()
                && existing.iter().zip(nodes).all(|(a, b)| {
                    a.statement == b.statement && a.completion == b.completion && a.context_key == b.context_key
                });
            if !same {
                return Err(StoreError::Mismatch(format!(
                    "round {round} phase {phase}: regenerated nodes differ from the stored ones"
                )));
            }
            return Ok(existing.iter().map(|n| n.id).collect());
        }
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut ids = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            tx.execute(
                "INSERT INTO nodes (round, phase, ord, theorem, depth, tree, forced_t0, origin, context_key, statement, completion)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![round, phase, i as i64, n.theorem, n.depth, n.tree, n.forced_t0, n.origin, n.context_key, n.statement, n.completion],
            )?;
            ids.push(tx.last_insert_rowid());
        }
        tx.commit()?;
        Ok(ids)
    }

    pub fn nodes(&self, round: u32, phase: &str) -> Result<Vec<StoredNode>> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT id, round, phase, theorem, depth, tree, forced_t0, origin, context_key, statement, completion
             FROM nodes WHERE round = ?1 AND phase = ?2 ORDER BY ord",
        )?;
        let rows = stmt.query_map(params![round, phase], |r| {
            Ok(StoredNode {
                id: r.get(0)?,
                round: r.get(1)?,
                phase: r.get(2)?,
                theorem: r.get(3)?,
                depth: r.get(4)?,
                tree: r.get(5)?,
                forced_t0: r.get(6)?,
                origin: r.get(7)?,
                context_key: r.get(8)?,
                statement: r.get(9)?,
                completion: r.get(10)?,
            })
        })?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    // --- verdicts ------------------------------------------------------------------------

    /// Stores a node's verdict; returns false (and stores nothing) for `Infra`.
    pub fn put_verdict(&self, node: i64, verdict: &Verdict) -> Result<bool> {
        if !verdict.is_cacheable() {
            return Ok(false);
        }
        let text = serde_json::to_string(verdict)?;
        self.conn().execute(
            "INSERT OR REPLACE INTO verdicts (node, kind, verdict) VALUES (?1, ?2, ?3)",
            params![node, verdict.kind().as_str(), text],
        )?;
        Ok(true)
    }

    pub fn verdict(&self, node: i64) -> Result<Option<Verdict>> {
        let t: Option<String> =
            self.conn().query_row("SELECT verdict FROM verdicts WHERE node = ?1", params![node], |r| r.get(0)).optional()?;
        Ok(match t {
            Some(t) => Some(serde_json::from_str(&t)?),
            None => None,
        })
    }

    pub fn verdict_count(&self) -> Result<usize> {
        let n: i64 = self.conn().query_row("SELECT COUNT(*) FROM verdicts", [], |r| r.get(0))?;
        Ok(n as usize)
    }

    // --- globals and finals --------------------------------------------------------------

    pub fn put_global(&self, node: i64, global: &str, height: Option<u32>) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO globals (node, global, height) VALUES (?1, ?2, ?3)",
            params![node, global, height],
        )?;
        Ok(())
    }

    pub fn global(&self, node: i64) -> Result<Option<(String, Option<u32>)>> {
        Ok(self
            .conn()
            .query_row("SELECT global, height FROM globals WHERE node = ?1", params![node], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    /// The cold re-check of one assembled tree; `Infra` is not stored (retried on resume).
    pub fn put_final(&self, round: u32, phase: &str, theorem: i64, tree: u32, verdict: &Verdict, file: &str) -> Result<bool> {
        if !verdict.is_cacheable() {
            return Ok(false);
        }
        self.conn().execute(
            "INSERT OR REPLACE INTO finals (round, phase, theorem, tree, kind, verdict, file) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![round, phase, theorem, tree, verdict.kind().as_str(), serde_json::to_string(verdict)?, file],
        )?;
        Ok(true)
    }

    pub fn final_verdict(&self, round: u32, phase: &str, theorem: i64, tree: u32) -> Result<Option<Verdict>> {
        let t: Option<String> = self
            .conn()
            .query_row(
                "SELECT verdict FROM finals WHERE round = ?1 AND phase = ?2 AND theorem = ?3 AND tree = ?4",
                params![round, phase, theorem, tree],
                |r| r.get(0),
            )
            .optional()?;
        Ok(match t {
            Some(t) => Some(serde_json::from_str(&t)?),
            None => None,
        })
    }

    // --- examples, checkpoints, phases ----------------------------------------------------

    pub fn put_examples(&self, round: u32, examples: &[StoredExample]) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM examples WHERE round = ?1", params![round])?;
        for (i, e) in examples.iter().enumerate() {
            tx.execute(
                "INSERT INTO examples (round, ord, data) VALUES (?1, ?2, ?3)",
                params![round, i as i64, serde_json::to_string(e)?],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn examples(&self, round: u32) -> Result<Vec<StoredExample>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT data FROM examples WHERE round = ?1 ORDER BY ord")?;
        let texts: Vec<String> = stmt.query_map(params![round], |r| r.get(0))?.collect::<std::result::Result<_, _>>()?;
        texts.iter().map(|t| Ok(serde_json::from_str(t)?)).collect()
    }

    pub fn put_checkpoint(&self, round: u32, path: &str, metrics_json: &str) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO checkpoints (round, path, metrics) VALUES (?1, ?2, ?3)",
            params![round, path, metrics_json],
        )?;
        Ok(())
    }

    /// `(round, path, metrics JSON)` in round order.
    pub fn checkpoints(&self) -> Result<Vec<(u32, String, String)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare("SELECT round, path, metrics FROM checkpoints ORDER BY round")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<std::result::Result<_, _>>()?)
    }

    pub fn mark_done(&self, round: u32, phase: &str, seconds: f64) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO phases (round, phase, seconds) VALUES (?1, ?2, ?3)",
            params![round, phase, seconds],
        )?;
        Ok(())
    }

    pub fn is_done(&self, round: u32, phase: &str) -> Result<bool> {
        Ok(self.phase_seconds(round, phase)?.is_some())
    }

    pub fn phase_seconds(&self, round: u32, phase: &str) -> Result<Option<f64>> {
        Ok(self
            .conn()
            .query_row("SELECT seconds FROM phases WHERE round = ?1 AND phase = ?2", params![round, phase], |r| r.get(0))
            .optional()?)
    }
}

fn clip(s: &str) -> String {
    if s.len() <= 300 {
        s.to_string()
    } else {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infra_is_never_stored_and_meta_must_match() {
        let s = RunStore::in_memory().unwrap();
        assert!(!s.put_verdict(1, &Verdict::infra("worker lost")).unwrap());
        assert_eq!(s.verdict(1).unwrap(), None);
        assert!(s.put_verdict(2, &Verdict::Failed { step: 1, message: "no".into() }).unwrap());
        assert_eq!(s.verdict_count().unwrap(), 1);
        assert!(!s.put_final(0, "eval", 0, 0, &Verdict::infra("coqc died"), "file").unwrap());
        assert_eq!(s.final_verdict(0, "eval", 0, 0).unwrap(), None);
        s.ensure_meta("cfg", "a").unwrap();
        s.ensure_meta("cfg", "a").unwrap();
        assert!(matches!(s.ensure_meta("cfg", "b"), Err(StoreError::Mismatch(_))));
    }

    #[test]
    fn nodes_are_stored_once_and_log_checks_requests() {
        let s = RunStore::in_memory().unwrap();
        let key = s.put_context("Require Import Arith.").unwrap();
        let n = StoredNode {
            id: 0,
            round: 1,
            phase: "rl".into(),
            theorem: Some(0),
            depth: 0,
            tree: 0,
            forced_t0: Some("no_invoke".into()),
            origin: "sampled".into(),
            context_key: key.clone(),
            statement: "Lemma a : True.".into(),
            completion: "<no_invoke> exact I.".into(),
        };
        let ids = s.put_nodes(1, "rl", std::slice::from_ref(&n)).unwrap();
        assert_eq!(s.put_nodes(1, "rl", std::slice::from_ref(&n)).unwrap(), ids, "a resumed phase gets the stored ids");
        let other = StoredNode { completion: "<no_invoke> auto.".into(), ..n };
        assert!(s.put_nodes(1, "rl", &[other]).is_err());
        assert_eq!(s.context(&key).unwrap().as_deref(), Some("Require Import Arith."));
        s.log_answers(1, "rl", 0, &[("h0".into(), "x".into()), ("h1".into(), "y".into())]).unwrap();
        assert_eq!(s.logged_answer(1, "rl", 1, "h1").unwrap().as_deref(), Some("y"));
        assert_eq!(s.logged_answer(1, "rl", 2, "h2").unwrap(), None);
        assert!(s.logged_answer(1, "rl", 0, "other").is_err(), "a changed request is an error, not a wrong replay");
        assert_eq!(s.log_len(1, "rl").unwrap(), 2);
    }
}

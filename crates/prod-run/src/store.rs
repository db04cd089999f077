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
//! * global verdicts, final (cold `coqc`) checks, example weights, checkpoints, and phase marks;
//! * which logged samples and nodes the token limit cut (`cut_samples`, `cut_nodes`: a row per
//!   cut one, so stores made before these tables open unchanged). A store records cuts from its
//!   first sample on (`meta.records_truncation`); an older one says it does not.
//!
//! Two backends behind the same methods, with one SQL text per operation: SQLite (embedded,
//! the default) and PostgreSQL (one database that a coordinator on one machine and
//! check workers on others share; each run gets its own schema, `prod_run_<name>`). The SQL
//! is written in the dialect both accept (`$n` parameters, `ON CONFLICT … DO`, `RETURNING`).

use std::path::Path;
use std::sync::Mutex;

use prod_check::{Verdict, VerdictKind};
use prod_core::{GlobalVerdict, T0};
use prod_rl::examples::{ExampleKind, WeightedExample};
use prod_rl::{Completion, Origin};
use rusqlite::Connection;
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("run store (PostgreSQL): {0}")]
    Postgres(#[from] postgres::Error),
    #[error("run store: bad stored JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A TEXT column holds a value no enum of this build has (a typo, or a newer ProD's store).
    #[error("run store: table `{table}`, column `{column}`: unknown value {value:?}")]
    Unknown {
        table: &'static str,
        column: &'static str,
        value: String,
    },
    /// A JSON column holds a record this build cannot read.
    #[error("run store: table `{table}`, column `{column}`: bad stored JSON: {source}")]
    BadJson {
        table: &'static str,
        column: &'static str,
        source: serde_json::Error,
    },
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

/// Which job a record belongs to (column `phase` of `sample_log`, `nodes` and `finals`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// `prod eval`'s test-time trees (Algorithm 1).
    #[serde(rename = "eval")]
    Eval,
    /// An RL round's training trees (Algorithm 2).
    #[serde(rename = "rl")]
    Rl,
    /// An RL round's evaluation of its checkpoint on the fixed subset (Algorithm 1).
    #[serde(rename = "rl-eval")]
    RlEval,
    /// The canaries of an evaluation or an RL round (never counted: `crate::canary`).
    #[serde(rename = "canary")]
    Canary,
    /// CoqHammer alone on the evaluation's theorems: one `<no_invoke> hammer.` root each.
    #[serde(rename = "hammer-baseline")]
    HammerBaseline,
    /// The ceiling (`crate::ceiling`): the dataset's ground-truth decomposition with hammer
    /// leaves; round 0 the ground truth at the root, round 1 the ground-truth tree to depth d.
    #[serde(rename = "ceiling")]
    Ceiling,
}

/// A finished step of a phase; the `phases` table holds `<phase>/<step>` (`eval/sample`,
/// `rl/round`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// All trees sampled and their nodes stored.
    Sample,
    /// An RL round done (sampled, checked, filtered, trained).
    Round,
}

/// The enums stored as TEXT: unit variants only, each stored as its serde name (the strings
/// this store has always written). [`name`] writes them, [`parse`] reads them back.
pub trait Named: Serialize + DeserializeOwned + Copy {}
impl Named for Phase {}
impl Named for Step {}
impl Named for T0 {}
impl Named for Origin {}
impl Named for GlobalVerdict {}
impl Named for VerdictKind {}
impl Named for ExampleKind {}

/// The stored name of `v` (its serde name: `use_invoke`, `ground_truth`, `rl-eval`, …).
pub fn name<T: Named>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        // `Named` is implemented for unit-variant enums only (see the test `names_round_trip`).
        other => unreachable!("a `Named` value is a unit variant, not {other:?}"),
    }
}

/// Reads a stored name back; an unknown one is an error naming `table`, `column` and the value.
fn parse_name<T: Named>(table: &'static str, column: &'static str, value: String) -> Result<T> {
    let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        value.as_str().into_deserializer();
    T::deserialize(de).map_err(|_| StoreError::Unknown {
        table,
        column,
        value,
    })
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&name(*self))
            }
        }
    )*};
}
display_by_name!(Phase, Step);

/// A node as stored (the policy's output, before checking).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredNode {
    pub id: i64,
    pub round: u32,
    pub phase: Phase,
    /// Index of the root theorem in the run's theorem list (`None` for lemma nodes when unknown).
    pub theorem: Option<i64>,
    pub depth: u32,
    pub tree: u32,
    /// The `t0` token forced in front of the completion, if any.
    pub forced_t0: Option<T0>,
    pub origin: Origin,
    pub context_key: String,
    pub statement: String,
    pub completion: String,
    /// The token limit cut the completion ([`Completion::truncated`]).
    pub truncated: bool,
}

/// A stored training example: a round's weighted example (fresh or replayed), kept as JSON in
/// `examples.data`.
pub type StoredExample = WeightedExample;

/// The run store. Safe to share between threads (one connection behind a mutex: the checker's
/// progress callback commits verdicts from worker threads).
pub struct RunStore {
    db: Db,
}

enum Db {
    Sqlite(Mutex<Connection>),
    // Boxed: a client is several hundred bytes, a SQLite connection a pointer.
    Postgres(Box<Mutex<postgres::Client>>),
}

const SCHEMA_SQLITE: &str = "
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
CREATE TABLE IF NOT EXISTS cut_samples (
    round INTEGER NOT NULL, phase TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (round, phase, seq));
CREATE TABLE IF NOT EXISTS cut_nodes (node INTEGER PRIMARY KEY);
";

/// The same tables in PostgreSQL's types (every integer a BIGINT: one Rust type to read).
const SCHEMA_POSTGRES: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (key TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS theorems (
    idx BIGINT PRIMARY KEY, id TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sample_log (
    round BIGINT NOT NULL, phase TEXT NOT NULL, seq BIGINT NOT NULL,
    request TEXT NOT NULL, answer TEXT NOT NULL,
    PRIMARY KEY (round, phase, seq));
CREATE TABLE IF NOT EXISTS nodes (
    id BIGSERIAL PRIMARY KEY,
    round BIGINT NOT NULL, phase TEXT NOT NULL, ord BIGINT NOT NULL,
    theorem BIGINT, depth BIGINT NOT NULL, tree BIGINT NOT NULL,
    forced_t0 TEXT, origin TEXT NOT NULL,
    context_key TEXT NOT NULL, statement TEXT NOT NULL, completion TEXT NOT NULL,
    UNIQUE (round, phase, ord));
CREATE TABLE IF NOT EXISTS verdicts (
    node BIGINT PRIMARY KEY, kind TEXT NOT NULL, verdict TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS globals (
    node BIGINT PRIMARY KEY, global TEXT NOT NULL, height BIGINT);
CREATE TABLE IF NOT EXISTS finals (
    round BIGINT NOT NULL, phase TEXT NOT NULL, theorem BIGINT NOT NULL, tree BIGINT NOT NULL,
    kind TEXT NOT NULL, verdict TEXT NOT NULL, file TEXT NOT NULL,
    PRIMARY KEY (round, phase, theorem, tree));
CREATE TABLE IF NOT EXISTS examples (
    round BIGINT NOT NULL, ord BIGINT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (round, ord));
CREATE TABLE IF NOT EXISTS checkpoints (round BIGINT PRIMARY KEY, path TEXT NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phases (
    round BIGINT NOT NULL, phase TEXT NOT NULL,
    done_at BIGINT NOT NULL DEFAULT (extract(epoch from now())::bigint),
    seconds DOUBLE PRECISION NOT NULL DEFAULT 0, PRIMARY KEY (round, phase));
CREATE TABLE IF NOT EXISTS cut_samples (
    round BIGINT NOT NULL, phase TEXT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (round, phase, seq));
CREATE TABLE IF NOT EXISTS cut_nodes (node BIGINT PRIMARY KEY);
";

/// Marks a store that has not sampled anything yet as one that records truncation (run after
/// the schema, on both backends; a store with samples or nodes from before keeps no mark).
const MARK_TRUNCATION: &str = "
INSERT INTO meta (key, value) SELECT 'records_truncation', '1'
WHERE NOT EXISTS (SELECT 1 FROM sample_log) AND NOT EXISTS (SELECT 1 FROM nodes)
ON CONFLICT (key) DO NOTHING;
";

/// A statement parameter.
#[derive(Clone, Copy, Debug)]
enum P<'a> {
    I(i64),
    OI(Option<i64>),
    F(f64),
    T(&'a str),
    OT(Option<&'a str>),
}

/// A column value as read back.
#[derive(Clone, Debug)]
enum V {
    Null,
    I(i64),
    F(f64),
    T(String),
}

impl V {
    fn oi(&self) -> Result<Option<i64>> {
        match self {
            V::Null => Ok(None),
            V::I(i) => Ok(Some(*i)),
            other => Err(StoreError::Mismatch(format!(
                "expected an integer column, found {other:?}"
            ))),
        }
    }
    fn i(&self) -> Result<i64> {
        self.oi()?
            .ok_or_else(|| StoreError::Mismatch("unexpected NULL integer".into()))
    }
    fn u32(&self) -> Result<u32> {
        u32::try_from(self.i()?)
            .map_err(|_| StoreError::Mismatch(format!("integer out of range: {self:?}")))
    }
    fn ou32(&self) -> Result<Option<u32>> {
        self.oi()?
            .map(|i| {
                u32::try_from(i)
                    .map_err(|_| StoreError::Mismatch(format!("integer out of range: {i}")))
            })
            .transpose()
    }
    fn f(&self) -> Result<f64> {
        match self {
            V::F(f) => Ok(*f),
            V::I(i) => Ok(*i as f64),
            other => Err(StoreError::Mismatch(format!(
                "expected a number column, found {other:?}"
            ))),
        }
    }
    fn ot(&self) -> Result<Option<String>> {
        match self {
            V::Null => Ok(None),
            V::T(t) => Ok(Some(t.clone())),
            other => Err(StoreError::Mismatch(format!(
                "expected a text column, found {other:?}"
            ))),
        }
    }
    fn t(&self) -> Result<String> {
        self.ot()?
            .ok_or_else(|| StoreError::Mismatch("unexpected NULL text".into()))
    }
    /// A [`Named`] enum from column `column` of table `table`.
    fn named<T: Named>(&self, table: &'static str, column: &'static str) -> Result<T> {
        parse_name(table, column, self.t()?)
    }
    fn onamed<T: Named>(&self, table: &'static str, column: &'static str) -> Result<Option<T>> {
        self.ot()?.map(|v| parse_name(table, column, v)).transpose()
    }
    /// A JSON record from column `column` of table `table`.
    fn json<T: DeserializeOwned>(&self, table: &'static str, column: &'static str) -> Result<T> {
        serde_json::from_str(&self.t()?).map_err(|source| StoreError::BadJson {
            table,
            column,
            source,
        })
    }
}

/// One connection or transaction of either backend.
trait Sql {
    fn exec(&mut self, sql: &str, params: &[P<'_>]) -> Result<u64>;
    fn rows(&mut self, sql: &str, params: &[P<'_>]) -> Result<Vec<Vec<V>>>;
}

struct Lite<'c>(&'c Connection);

fn lite_param(p: &P<'_>) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match *p {
        P::I(i) | P::OI(Some(i)) => Value::Integer(i),
        P::F(f) => Value::Real(f),
        P::T(t) | P::OT(Some(t)) => Value::Text(t.to_string()),
        P::OI(None) | P::OT(None) => Value::Null,
    }
}

/// `$n` → `?n` (SQLite's numbered parameters; no statement here has a `$` elsewhere).
fn lite_sql(sql: &str) -> String {
    sql.replace('$', "?")
}

impl Sql for Lite<'_> {
    fn exec(&mut self, sql: &str, params: &[P<'_>]) -> Result<u64> {
        let mut stmt = self.0.prepare_cached(&lite_sql(sql))?;
        Ok(stmt.execute(rusqlite::params_from_iter(params.iter().map(lite_param)))? as u64)
    }

    fn rows(&mut self, sql: &str, params: &[P<'_>]) -> Result<Vec<Vec<V>>> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.0.prepare_cached(&lite_sql(sql))?;
        let n = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(lite_param)))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(match r.get_ref(i)? {
                    ValueRef::Null => V::Null,
                    ValueRef::Integer(i) => V::I(i),
                    ValueRef::Real(f) => V::F(f),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        V::T(String::from_utf8_lossy(t).into_owned())
                    }
                });
            }
            out.push(row);
        }
        Ok(out)
    }
}

struct Pg<'c, C: postgres::GenericClient>(&'c mut C);

fn pg_params<'a>(params: &'a [P<'a>]) -> Vec<Box<dyn postgres::types::ToSql + Sync + 'a>> {
    params
        .iter()
        .map(|p| -> Box<dyn postgres::types::ToSql + Sync + 'a> {
            match *p {
                P::I(i) => Box::new(i),
                P::OI(i) => Box::new(i),
                P::F(f) => Box::new(f),
                P::T(t) => Box::new(t),
                P::OT(t) => Box::new(t),
            }
        })
        .collect()
}

impl<C: postgres::GenericClient> Sql for Pg<'_, C> {
    fn exec(&mut self, sql: &str, params: &[P<'_>]) -> Result<u64> {
        let boxed = pg_params(params);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            boxed.iter().map(|b| b.as_ref()).collect();
        Ok(self.0.execute(sql, &refs)?)
    }

    fn rows(&mut self, sql: &str, params: &[P<'_>]) -> Result<Vec<Vec<V>>> {
        use postgres::types::Type;
        let boxed = pg_params(params);
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            boxed.iter().map(|b| b.as_ref()).collect();
        let mut out = Vec::new();
        for r in self.0.query(sql, &refs)? {
            let mut row = Vec::with_capacity(r.len());
            for (i, col) in r.columns().iter().enumerate() {
                let t = col.type_();
                let v = if *t == Type::INT8 {
                    r.try_get::<_, Option<i64>>(i)?.map_or(V::Null, V::I)
                } else if *t == Type::INT4 {
                    r.try_get::<_, Option<i32>>(i)?
                        .map_or(V::Null, |x| V::I(x.into()))
                } else if *t == Type::FLOAT8 {
                    r.try_get::<_, Option<f64>>(i)?.map_or(V::Null, V::F)
                } else {
                    r.try_get::<_, Option<String>>(i)?.map_or(V::Null, V::T)
                };
                row.push(v);
            }
            out.push(row);
        }
        Ok(out)
    }
}

/// The PostgreSQL schema of run `run`: `[A-Za-z0-9_-]`, at most 40 characters.
pub fn postgres_schema(run: &str) -> std::result::Result<String, String> {
    if run.is_empty()
        || run.len() > 40
        || !run
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "run name {run:?}: use 1 to 40 letters, digits, `_` or `-`"
        ));
    }
    Ok(format!(
        "prod_run_{}",
        run.to_ascii_lowercase().replace('-', "_")
    ))
}

impl RunStore {
    /// Open (creating if needed) `RUN_DIR/run.sqlite`.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Mismatch(format!(
                "cannot create run directory {}: {e}",
                dir.display()
            ))
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
        conn.execute_batch(SCHEMA_SQLITE)?;
        conn.execute_batch(MARK_TRUNCATION)?;
        Ok(RunStore {
            db: Db::Sqlite(Mutex::new(conn)),
        })
    }

    /// Open (creating if needed) run `run` in a PostgreSQL database (`url`: a `postgres://`
    /// URL or a libpq string). Its tables live in the schema [`postgres_schema`]`(run)`.
    pub fn open_postgres(url: &str, run: &str) -> Result<Self> {
        let schema = postgres_schema(run).map_err(StoreError::Mismatch)?;
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        // One process at a time sets up tables (concurrent `CREATE … IF NOT EXISTS` can collide).
        let mut tx = client.transaction()?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({});",
            prod_queue::SCHEMA_LOCK
        ))?;
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\";"))?;
        tx.batch_execute(&format!("SET LOCAL search_path TO \"{schema}\";"))?;
        tx.batch_execute(SCHEMA_POSTGRES)?;
        tx.batch_execute(MARK_TRUNCATION)?;
        tx.commit()?;
        client.batch_execute(&format!("SET search_path TO \"{schema}\";"))?;
        Ok(RunStore {
            db: Db::Postgres(Box::new(Mutex::new(client))),
        })
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        match self.db {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    /// Run `f` on the connection (each statement commits on its own).
    fn with<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match &self.db {
            Db::Sqlite(c) => f(&mut Lite(&c.lock().unwrap_or_else(|e| e.into_inner()))),
            Db::Postgres(c) => f(&mut Pg(&mut *c.lock().unwrap_or_else(|e| e.into_inner()))),
        }
    }

    /// Run `f` in one transaction (all or nothing).
    fn tx<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match &self.db {
            Db::Sqlite(c) => {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                let tx = c.transaction()?;
                let r = f(&mut Lite(&tx))?;
                tx.commit()?;
                Ok(r)
            }
            Db::Postgres(c) => {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                let mut tx = c.transaction()?;
                let r = f(&mut Pg(&mut tx))?;
                tx.commit()?;
                Ok(r)
            }
        }
    }

    fn exec(&self, sql: &str, params: &[P<'_>]) -> Result<u64> {
        self.with(|c| c.exec(sql, params))
    }

    fn rows(&self, sql: &str, params: &[P<'_>]) -> Result<Vec<Vec<V>>> {
        self.with(|c| c.rows(sql, params))
    }

    /// The first column of the first row, if any.
    fn one(&self, sql: &str, params: &[P<'_>]) -> Result<Option<V>> {
        Ok(self
            .rows(sql, params)?
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next()))
    }

    fn count(&self, sql: &str, params: &[P<'_>]) -> Result<i64> {
        self.one(sql, params)?.map_or(Ok(0), |v| v.i())
    }

    // --- meta / config -------------------------------------------------------------------

    pub fn get_meta(&self, key: &str) -> Result<Option<String>> {
        self.one("SELECT value FROM meta WHERE key = $1", &[P::T(key)])?
            .map(|v| v.t())
            .transpose()
    }

    /// Whether every sample and node of this store has its truncation recorded (see the
    /// module doc); false for a store from before, or one whose samples came from a trees file
    /// without `stop` ([`Self::disown_truncation`]).
    pub fn records_truncation(&self) -> Result<bool> {
        Ok(self.get_meta("records_truncation")?.as_deref() == Some("1"))
    }

    /// Says that this store's nodes do not all know whether they were cut.
    pub fn disown_truncation(&self) -> Result<()> {
        self.set_meta("records_truncation", "0")
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.exec(
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[P::T(key), P::T(value)],
        )?;
        Ok(())
    }

    /// Records `value` under `key` the first time; later opens must present the same value
    /// (a run resumed with a different configuration would mix two experiments).
    pub fn ensure_meta(&self, key: &str, value: &str) -> Result<()> {
        match self.get_meta(key)? {
            None => self.set_meta(key, value),
            Some(v) if v == value => Ok(()),
            Some(v) => {
                // JSON settings: name each field that differs, not two clipped blobs.
                let fields = match (
                    serde_json::from_str::<serde_json::Value>(&v),
                    serde_json::from_str::<serde_json::Value>(value),
                ) {
                    (Ok(a), Ok(b)) => {
                        let mut d = Vec::new();
                        json_differences(&a, &b, "", &mut d);
                        d
                    }
                    _ => Vec::new(),
                };
                let detail = if fields.is_empty() {
                    format!("\n  stored: {}\n  now:    {}", clip(&v), clip(value))
                } else {
                    fields.iter().map(|f| format!("\n  {f}")).collect()
                };
                Err(StoreError::Mismatch(format!(
                    "this run directory was started with a different {key}:{detail}\nuse a new --out directory, or rerun with the settings it was started with"
                )))
            }
        }
    }

    // --- contexts and theorems ----------------------------------------------------------

    /// Stores a context text once; returns its key.
    pub fn put_context(&self, text: &str) -> Result<String> {
        let key = hash_fields(&[text]);
        self.exec(
            "INSERT INTO contexts (key, text) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            &[P::T(&key), P::T(text)],
        )?;
        Ok(key)
    }

    pub fn context(&self, key: &str) -> Result<Option<String>> {
        self.one("SELECT text FROM contexts WHERE key = $1", &[P::T(key)])?
            .map(|v| v.t())
            .transpose()
    }

    /// Theorems of the run, by index: `(id, data JSON)`. Stored once; a resume must list the
    /// same ids in the same order.
    pub fn ensure_theorems(&self, theorems: &[(String, String)]) -> Result<()> {
        let ids = self.tx(|c| {
            let ids = c.rows("SELECT id FROM theorems ORDER BY idx", &[])?;
            if ids.is_empty() {
                for (i, (id, data)) in theorems.iter().enumerate() {
                    c.exec(
                        "INSERT INTO theorems (idx, id, data) VALUES ($1, $2, $3)",
                        &[P::I(i as i64), P::T(id), P::T(data)],
                    )?;
                }
            }
            ids.iter()
                .map(|r| r[0].t())
                .collect::<Result<Vec<String>>>()
        })?;
        if !ids.is_empty() && ids.iter().ne(theorems.iter().map(|t| &t.0)) {
            return Err(StoreError::Mismatch(
                "the theorem list differs from the one this run started with".into(),
            ));
        }
        Ok(())
    }

    // --- sample log ----------------------------------------------------------------------

    /// The logged answer to request `seq` of (round, phase), checking the request hash.
    pub fn logged_answer(
        &self,
        round: u32,
        phase: Phase,
        seq: u64,
        request: &str,
    ) -> Result<Option<Completion>> {
        let row = self
            .rows(
                "SELECT l.request, l.answer,
                        (SELECT COUNT(*) FROM cut_samples c
                         WHERE c.round = l.round AND c.phase = l.phase AND c.seq = l.seq)
                 FROM sample_log l WHERE l.round = $1 AND l.phase = $2 AND l.seq = $3",
                &[P::I(round.into()), P::T(&name(phase)), P::I(seq as i64)],
            )?
            .into_iter()
            .next();
        match row {
            None => Ok(None),
            Some(r) if r[0].t()? == request => Ok(Some(Completion {
                text: r[1].t()?,
                truncated: r[2].i()? > 0,
            })),
            Some(_) => Err(StoreError::Mismatch(format!(
                "sample log of round {round} phase {phase} differs at request {seq} (model or config changed?)"
            ))),
        }
    }

    /// Logs answers `first_seq..` in one transaction.
    pub fn log_answers(
        &self,
        round: u32,
        phase: Phase,
        first_seq: u64,
        entries: &[(String, Completion)],
    ) -> Result<()> {
        let phase = name(phase);
        self.tx(|c| {
            for (i, (req, ans)) in entries.iter().enumerate() {
                let seq = P::I((first_seq + i as u64) as i64);
                c.exec(
                    "INSERT INTO sample_log (round, phase, seq, request, answer) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (round, phase, seq) DO UPDATE SET request = excluded.request, answer = excluded.answer",
                    &[P::I(round.into()), P::T(&phase), seq, P::T(req), P::T(&ans.text)],
                )?;
                let cut = if ans.truncated {
                    "INSERT INTO cut_samples (round, phase, seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
                } else {
                    "DELETE FROM cut_samples WHERE round = $1 AND phase = $2 AND seq = $3"
                };
                c.exec(cut, &[P::I(round.into()), P::T(&phase), seq])?;
            }
            Ok(())
        })
    }

    pub fn log_len(&self, round: u32, phase: Phase) -> Result<u64> {
        let n = self.count(
            "SELECT COUNT(*) FROM sample_log WHERE round = $1 AND phase = $2",
            &[P::I(round.into()), P::T(&name(phase))],
        )?;
        Ok(n as u64)
    }

    // --- nodes ---------------------------------------------------------------------------

    /// Stores a phase's nodes once (in order). If they are already there (resume), checks that
    /// they are the same and returns the stored ids.
    pub fn put_nodes(&self, round: u32, phase: Phase, nodes: &[StoredNode]) -> Result<Vec<i64>> {
        let existing = self.nodes(round, phase)?;
        if !existing.is_empty() {
            let same = existing.len() == nodes.len()
                && existing.iter().zip(nodes).all(|(a, b)| {
                    a.statement == b.statement
                        && a.completion == b.completion
                        && a.context_key == b.context_key
                });
            if !same {
                return Err(StoreError::Mismatch(format!(
                    "round {round} phase {phase}: regenerated nodes differ from the stored ones"
                )));
            }
            return Ok(existing.iter().map(|n| n.id).collect());
        }
        let phase_name = name(phase);
        self.tx(|c| {
            let mut ids = Vec::with_capacity(nodes.len());
            for (i, n) in nodes.iter().enumerate() {
                let forced_t0 = n.forced_t0.map(name);
                let origin = name(n.origin);
                let row = c.rows(
                    "INSERT INTO nodes (round, phase, ord, theorem, depth, tree, forced_t0, origin, context_key, statement, completion)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
                    &[
                        P::I(round.into()),
                        P::T(&phase_name),
                        P::I(i as i64),
                        P::OI(n.theorem),
                        P::I(n.depth.into()),
                        P::I(n.tree.into()),
                        P::OT(forced_t0.as_deref()),
                        P::T(&origin),
                        P::T(&n.context_key),
                        P::T(&n.statement),
                        P::T(&n.completion),
                    ],
                )?;
                let id = row.first().and_then(|r| r.first()).ok_or_else(|| StoreError::Mismatch("INSERT returned no id".into()))?.i()?;
                if n.truncated {
                    c.exec("INSERT INTO cut_nodes (node) VALUES ($1) ON CONFLICT DO NOTHING", &[P::I(id)])?;
                }
                ids.push(id);
            }
            Ok(ids)
        })
    }

    pub fn nodes(&self, round: u32, phase: Phase) -> Result<Vec<StoredNode>> {
        let rows = self.rows(
            "SELECT id, round, phase, theorem, depth, tree, forced_t0, origin, context_key, statement, completion,
                    (SELECT COUNT(*) FROM cut_nodes c WHERE c.node = nodes.id)
             FROM nodes WHERE round = $1 AND phase = $2 ORDER BY ord",
            &[P::I(round.into()), P::T(&name(phase))],
        )?;
        rows.iter().map(|r| stored_node(r)).collect()
    }

    // --- verdicts ------------------------------------------------------------------------

    /// Stores a node's verdict; returns false (and stores nothing) for `Infra`.
    pub fn put_verdict(&self, node: i64, verdict: &Verdict) -> Result<bool> {
        if !verdict.is_cacheable() {
            return Ok(false);
        }
        let text = serde_json::to_string(verdict)?;
        self.exec(
            "INSERT INTO verdicts (node, kind, verdict) VALUES ($1, $2, $3)
             ON CONFLICT (node) DO UPDATE SET kind = excluded.kind, verdict = excluded.verdict",
            &[P::I(node), P::T(&name(verdict.kind())), P::T(&text)],
        )?;
        Ok(true)
    }

    pub fn verdict(&self, node: i64) -> Result<Option<Verdict>> {
        self.one(
            "SELECT verdict FROM verdicts WHERE node = $1",
            &[P::I(node)],
        )?
        .map(|v| v.json("verdicts", "verdict"))
        .transpose()
    }

    /// Whether the run holds nothing but its settings: no logged sample, node, verdict,
    /// example, checkpoint or finished phase (a start that failed before any work).
    pub fn is_unused(&self) -> Result<bool> {
        for table in [
            "sample_log",
            "nodes",
            "verdicts",
            "finals",
            "examples",
            "checkpoints",
            "phases",
        ] {
            if self.count(&format!("SELECT COUNT(*) FROM {table}"), &[])? > 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    pub fn verdict_count(&self) -> Result<usize> {
        Ok(self.count("SELECT COUNT(*) FROM verdicts", &[])? as usize)
    }

    // --- globals and finals --------------------------------------------------------------

    pub fn put_global(&self, node: i64, global: GlobalVerdict, height: Option<u32>) -> Result<()> {
        self.exec(
            "INSERT INTO globals (node, global, height) VALUES ($1, $2, $3)
             ON CONFLICT (node) DO UPDATE SET global = excluded.global, height = excluded.height",
            &[
                P::I(node),
                P::T(&name(global)),
                P::OI(height.map(i64::from)),
            ],
        )?;
        Ok(())
    }

    pub fn global(&self, node: i64) -> Result<Option<(GlobalVerdict, Option<u32>)>> {
        self.rows(
            "SELECT global, height FROM globals WHERE node = $1",
            &[P::I(node)],
        )?
        .first()
        .map(|r| Ok((r[0].named("globals", "global")?, r[1].ou32()?)))
        .transpose()
    }

    /// The cold re-check of one assembled tree; `Infra` is not stored (retried on resume).
    pub fn put_final(
        &self,
        round: u32,
        phase: Phase,
        theorem: i64,
        tree: u32,
        verdict: &Verdict,
        file: &str,
    ) -> Result<bool> {
        if !verdict.is_cacheable() {
            return Ok(false);
        }
        let text = serde_json::to_string(verdict)?;
        self.exec(
            "INSERT INTO finals (round, phase, theorem, tree, kind, verdict, file) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (round, phase, theorem, tree) DO UPDATE SET kind = excluded.kind, verdict = excluded.verdict, file = excluded.file",
            &[P::I(round.into()), P::T(&name(phase)), P::I(theorem), P::I(tree.into()), P::T(&name(verdict.kind())), P::T(&text), P::T(file)],
        )?;
        Ok(true)
    }

    pub fn final_verdict(
        &self,
        round: u32,
        phase: Phase,
        theorem: i64,
        tree: u32,
    ) -> Result<Option<Verdict>> {
        self.one(
            "SELECT verdict FROM finals WHERE round = $1 AND phase = $2 AND theorem = $3 AND tree = $4",
            &[P::I(round.into()), P::T(&name(phase)), P::I(theorem), P::I(tree.into())],
        )?
        .map(|v| v.json("finals", "verdict"))
        .transpose()
    }

    // --- examples, checkpoints, phases ----------------------------------------------------

    pub fn put_examples(&self, round: u32, examples: &[StoredExample]) -> Result<()> {
        let texts = examples
            .iter()
            .map(serde_json::to_string)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.tx(|c| {
            c.exec(
                "DELETE FROM examples WHERE round = $1",
                &[P::I(round.into())],
            )?;
            for (i, t) in texts.iter().enumerate() {
                c.exec(
                    "INSERT INTO examples (round, ord, data) VALUES ($1, $2, $3)",
                    &[P::I(round.into()), P::I(i as i64), P::T(t)],
                )?;
            }
            Ok(())
        })
    }

    pub fn examples(&self, round: u32) -> Result<Vec<StoredExample>> {
        self.rows(
            "SELECT data FROM examples WHERE round = $1 ORDER BY ord",
            &[P::I(round.into())],
        )?
        .iter()
        .map(|r| r[0].json("examples", "data"))
        .collect()
    }

    pub fn put_checkpoint(&self, round: u32, path: &str, metrics_json: &str) -> Result<()> {
        self.exec(
            "INSERT INTO checkpoints (round, path, metrics) VALUES ($1, $2, $3)
             ON CONFLICT (round) DO UPDATE SET path = excluded.path, metrics = excluded.metrics",
            &[P::I(round.into()), P::T(path), P::T(metrics_json)],
        )?;
        Ok(())
    }

    /// `(round, path, metrics JSON)` in round order.
    pub fn checkpoints(&self) -> Result<Vec<(u32, String, String)>> {
        self.rows(
            "SELECT round, path, metrics FROM checkpoints ORDER BY round",
            &[],
        )?
        .iter()
        .map(|r| Ok((r[0].u32()?, r[1].t()?, r[2].t()?)))
        .collect()
    }

    pub fn mark_done(&self, round: u32, phase: Phase, step: Step, seconds: f64) -> Result<()> {
        self.exec(
            "INSERT INTO phases (round, phase, seconds) VALUES ($1, $2, $3)
             ON CONFLICT (round, phase) DO UPDATE SET seconds = excluded.seconds",
            &[P::I(round.into()), P::T(&mark(phase, step)), P::F(seconds)],
        )?;
        Ok(())
    }

    pub fn is_done(&self, round: u32, phase: Phase, step: Step) -> Result<bool> {
        Ok(self.phase_seconds(round, phase, step)?.is_some())
    }

    pub fn phase_seconds(&self, round: u32, phase: Phase, step: Step) -> Result<Option<f64>> {
        self.one(
            "SELECT seconds FROM phases WHERE round = $1 AND phase = $2",
            &[P::I(round.into()), P::T(&mark(phase, step))],
        )?
        .map(|v| v.f())
        .transpose()
    }
}

/// A node with what the run knows of it: its theorem's id, its local verdict (none while
/// unchecked, or after an `Infra` verdict, which is never stored), its global verdict and
/// height (`prod run export`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRecord {
    pub node: StoredNode,
    /// The id of the tree's root theorem (the run's theorem list), when the node has one.
    pub theorem_id: Option<String>,
    pub local: Option<Verdict>,
    pub global: Option<GlobalVerdict>,
    pub height: Option<u32>,
}

impl RunStore {
    /// Every node of the run, in the order it was stored, with its verdicts.
    pub fn node_records(&self) -> Result<Vec<NodeRecord>> {
        let rows = self.rows(
            "SELECT n.id, n.round, n.phase, n.theorem, n.depth, n.tree, n.forced_t0, n.origin,
                    n.context_key, n.statement, n.completion,
                    (SELECT COUNT(*) FROM cut_nodes c WHERE c.node = n.id),
                    t.id, v.verdict, g.global, g.height
             FROM nodes n
             LEFT JOIN theorems t ON t.idx = n.theorem
             LEFT JOIN verdicts v ON v.node = n.id
             LEFT JOIN globals g ON g.node = n.id
             ORDER BY n.id",
            &[],
        )?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    node: stored_node(r)?,
                    theorem_id: r[12].ot()?,
                    local: match &r[13] {
                        V::Null => None,
                        v => Some(v.json("verdicts", "verdict")?),
                    },
                    global: r[14].onamed("globals", "global")?,
                    height: r[15].ou32()?,
                })
            })
            .collect()
    }
}

/// A node from the first twelve columns of a row: `id, round, phase, theorem, depth, tree,
/// forced_t0, origin, context_key, statement, completion` of `nodes`, then the count of its
/// `cut_nodes` rows.
fn stored_node(r: &[V]) -> Result<StoredNode> {
    Ok(StoredNode {
        id: r[0].i()?,
        round: r[1].u32()?,
        phase: r[2].named("nodes", "phase")?,
        theorem: r[3].oi()?,
        depth: r[4].u32()?,
        tree: r[5].u32()?,
        forced_t0: r[6].onamed("nodes", "forced_t0")?,
        origin: r[7].named("nodes", "origin")?,
        context_key: r[8].t()?,
        statement: r[9].t()?,
        completion: r[10].t()?,
        truncated: r[11].i()? > 0,
    })
}

/// The `phases` table's key of a finished step: `<phase>/<step>`.
fn mark(phase: Phase, step: Step) -> String {
    format!("{phase}/{step}")
}

/// The fields where `a` (stored) and `b` (now) differ, as `path: stored A, now B` (values
/// clipped), objects compared key by key.
fn json_differences(
    a: &serde_json::Value,
    b: &serde_json::Value,
    path: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => json_differences(u, v, &p, out),
                    (Some(u), None) => {
                        out.push(format!("{p}: stored {}, now absent", clip(&u.to_string())))
                    }
                    (None, Some(v)) => {
                        out.push(format!("{p}: not stored, now {}", clip(&v.to_string())))
                    }
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!(
            "{}: stored {}, now {}",
            if path.is_empty() { "(value)" } else { path },
            clip(&a.to_string()),
            clip(&b.to_string())
        )),
        _ => {}
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

    /// The embedded store, and the PostgreSQL one where the server is installed (CI has it).
    fn stores(run: &str) -> (Option<prod_queue::testing::Pg>, Vec<RunStore>) {
        let mut v = vec![RunStore::in_memory().unwrap()];
        let pg = prod_queue::testing::Pg::start();
        if let Some(pg) = &pg {
            v.push(RunStore::open_postgres(&pg.url(), run).unwrap());
        }
        (pg, v)
    }

    #[test]
    fn a_different_configuration_names_the_fields_that_differ() {
        let s = RunStore::in_memory().unwrap();
        let long = "x".repeat(400);
        let stored =
            serde_json::json!({"model": "m", "long": long, "options": {"split": "test", "k": [1]}});
        s.ensure_meta("job", &stored.to_string()).unwrap();
        s.ensure_meta("job", &stored.to_string()).unwrap();
        let now = serde_json::json!({"model": "m", "long": long, "options": {"split": "val", "k": [1]}, "new": 1});
        let e = s
            .ensure_meta("job", &now.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("options.split: stored \"test\", now \"val\""),
            "{e}"
        );
        assert!(e.contains("new: not stored, now 1"), "{e}");
        assert!(!e.contains("model") && !e.contains("long"), "{e}");
        let e = s.ensure_meta("job", "not json").unwrap_err().to_string();
        assert!(e.contains("stored: {"), "{e}");
    }

    #[test]
    fn node_records_join_theorems_and_verdicts() {
        let (_pg, stores) = stores("records");
        for s in stores {
            s.ensure_theorems(&[("A".into(), "{}".into()), ("B".into(), "{}".into())])
                .unwrap();
            s.ensure_meta("job", "{}").unwrap();
            assert!(s.is_unused().unwrap(), "settings and theorems are no work");
            let node = |theorem: Option<i64>, depth: u32, completion: &str| StoredNode {
                id: 0,
                round: 0,
                phase: Phase::Eval,
                theorem,
                depth,
                tree: 1,
                forced_t0: None,
                origin: Origin::Sampled,
                context_key: "k".into(),
                statement: "Lemma a : True.".into(),
                completion: completion.into(),
                truncated: false,
            };
            let ids = s
                .put_nodes(
                    0,
                    Phase::Eval,
                    &[node(Some(1), 0, "<no_invoke> x."), node(None, 1, "y")],
                )
                .unwrap();
            let failed = Verdict::Failed {
                step: 2,
                message: "no".into(),
            };
            s.put_verdict(ids[0], &failed).unwrap();
            s.put_global(ids[0], GlobalVerdict::Incorrect, None)
                .unwrap();
            let infra = Verdict::Infra {
                message: "lost".into(),
            };
            s.put_verdict(ids[1], &infra).unwrap();
            assert!(!s.is_unused().unwrap());
            let r = s.node_records().unwrap();
            assert_eq!(r.len(), 2);
            assert_eq!(r[0].node.id, ids[0]);
            assert_eq!(r[0].theorem_id.as_deref(), Some("B"));
            assert_eq!(r[0].local, Some(failed));
            assert_eq!(r[0].global, Some(GlobalVerdict::Incorrect));
            assert_eq!(r[0].height, None);
            assert_eq!(r[1].node.completion, "y");
            assert_eq!(
                (r[1].theorem_id.as_deref(), r[1].local.as_ref()),
                (None, None)
            );
            assert_eq!(r[1].global, None);
        }
    }

    #[test]
    fn infra_is_never_stored_and_meta_must_match() {
        let (_pg, stores) = stores("meta");
        for s in &stores {
            assert!(!s.put_verdict(1, &Verdict::infra("worker lost")).unwrap());
            assert_eq!(s.verdict(1).unwrap(), None);
            assert!(s
                .put_verdict(
                    2,
                    &Verdict::Failed {
                        step: 1,
                        message: "no".into()
                    }
                )
                .unwrap());
            assert_eq!(s.verdict_count().unwrap(), 1);
            assert!(!s
                .put_final(0, Phase::Eval, 0, 0, &Verdict::infra("coqc died"), "file")
                .unwrap());
            assert_eq!(s.final_verdict(0, Phase::Eval, 0, 0).unwrap(), None);
            s.ensure_meta("cfg", "a").unwrap();
            s.ensure_meta("cfg", "a").unwrap();
            assert!(
                matches!(s.ensure_meta("cfg", "b"), Err(StoreError::Mismatch(_))),
                "{}",
                s.backend()
            );
        }
    }

    #[test]
    fn nodes_are_stored_once_and_log_checks_requests() {
        let (_pg, stores) = stores("nodes");
        for s in &stores {
            let key = s.put_context("Require Import Arith.").unwrap();
            assert_eq!(s.put_context("Require Import Arith.").unwrap(), key);
            let n = StoredNode {
                id: 0,
                round: 1,
                phase: Phase::Rl,
                theorem: Some(0),
                depth: 0,
                tree: 0,
                forced_t0: Some(T0::NoInvoke),
                origin: Origin::Sampled,
                context_key: key.clone(),
                statement: "Lemma a : True.".into(),
                completion: "<no_invoke> exact I.".into(),
                truncated: false,
            };
            let lemma = StoredNode {
                theorem: None,
                depth: 1,
                forced_t0: None,
                statement: "Lemma b : True.".into(),
                truncated: true,
                ..n.clone()
            };
            assert!(s.records_truncation().unwrap(), "a new store records cuts");
            let ids = s
                .put_nodes(1, Phase::Rl, &[n.clone(), lemma.clone()])
                .unwrap();
            assert_eq!(
                s.put_nodes(1, Phase::Rl, &[n.clone(), lemma.clone()])
                    .unwrap(),
                ids,
                "a resumed phase gets the stored ids"
            );
            let got = s.nodes(1, Phase::Rl).unwrap();
            assert_eq!(
                got,
                vec![
                    StoredNode {
                        id: ids[0],
                        ..n.clone()
                    },
                    StoredNode {
                        id: ids[1],
                        ..lemma
                    }
                ],
                "{}",
                s.backend()
            );
            let other = StoredNode {
                completion: "<no_invoke> auto.".into(),
                ..n
            };
            assert!(s.put_nodes(1, Phase::Rl, &[other]).is_err());
            assert_eq!(
                s.context(&key).unwrap().as_deref(),
                Some("Require Import Arith.")
            );
            s.log_answers(
                1,
                Phase::Rl,
                0,
                &[
                    ("h0".into(), Completion::ended("x")),
                    ("h1".into(), Completion::cut("y")),
                ],
            )
            .unwrap();
            assert_eq!(
                s.logged_answer(1, Phase::Rl, 1, "h1").unwrap(),
                Some(Completion::cut("y"))
            );
            assert_eq!(
                s.logged_answer(1, Phase::Rl, 0, "h0").unwrap(),
                Some(Completion::ended("x"))
            );
            // Logged again (a resumed chunk), the cut mark follows the new answer.
            s.log_answers(1, Phase::Rl, 1, &[("h1".into(), Completion::ended("y"))])
                .unwrap();
            assert_eq!(
                s.logged_answer(1, Phase::Rl, 1, "h1").unwrap(),
                Some(Completion::ended("y"))
            );
            assert_eq!(s.logged_answer(1, Phase::Rl, 2, "h2").unwrap(), None);
            assert!(
                s.logged_answer(1, Phase::Rl, 0, "other").is_err(),
                "a changed request is an error, not a wrong replay"
            );
            assert_eq!(s.log_len(1, Phase::Rl).unwrap(), 2);
        }
    }

    #[test]
    fn every_record_round_trips_on_both_backends() {
        let (pg, stores) = stores("records");
        for s in &stores {
            s.ensure_theorems(&[("A".into(), "{}".into()), ("B".into(), "{}".into())])
                .unwrap();
            s.ensure_theorems(&[("A".into(), "{}".into()), ("B".into(), "{}".into())])
                .unwrap();
            assert!(s.ensure_theorems(&[("B".into(), "{}".into())]).is_err());
            let proved = Verdict::Proved {
                axioms: vec!["ax".into()],
                replacements: vec![],
                time: std::time::Duration::from_millis(3),
                universe_constraints: vec![],
            };
            assert!(s.put_verdict(7, &proved).unwrap());
            assert_eq!(s.verdict(7).unwrap(), Some(proved.clone()));
            s.put_global(7, GlobalVerdict::Correct, Some(2)).unwrap();
            s.put_global(8, GlobalVerdict::Incorrect, None).unwrap();
            assert_eq!(
                s.global(7).unwrap(),
                Some((GlobalVerdict::Correct, Some(2)))
            );
            assert_eq!(s.global(8).unwrap(), Some((GlobalVerdict::Incorrect, None)));
            assert_eq!(s.global(9).unwrap(), None);
            assert!(s.put_final(1, Phase::Eval, 3, 2, &proved, "T.v").unwrap());
            assert_eq!(
                s.final_verdict(1, Phase::Eval, 3, 2).unwrap(),
                Some(proved.clone())
            );
            let e = StoredExample {
                context: "c".into(),
                statement: "s".into(),
                target: "t".into(),
                weight: 0.25,
                kind: ExampleKind::Generated,
            };
            s.put_examples(2, &[e.clone(), e.clone()]).unwrap();
            s.put_examples(2, std::slice::from_ref(&e)).unwrap();
            assert_eq!(
                s.examples(2).unwrap(),
                vec![e],
                "a round's examples are replaced, not appended"
            );
            s.put_checkpoint(2, "ck/2", "{\"m\":1}").unwrap();
            s.put_checkpoint(1, "ck/1", "{}").unwrap();
            assert_eq!(
                s.checkpoints().unwrap(),
                vec![
                    (1, "ck/1".into(), "{}".into()),
                    (2, "ck/2".into(), "{\"m\":1}".into())
                ]
            );
            assert!(!s.is_done(1, Phase::Rl, Step::Sample).unwrap());
            s.mark_done(1, Phase::Rl, Step::Sample, 1.5).unwrap();
            s.mark_done(1, Phase::Rl, Step::Sample, 2.5).unwrap();
            assert_eq!(
                s.phase_seconds(1, Phase::Rl, Step::Sample).unwrap(),
                Some(2.5)
            );
        }
        if let Some(pg) = &pg {
            // Runs in one database do not see each other.
            let other = RunStore::open_postgres(&pg.url(), "records-2").unwrap();
            assert_eq!(other.verdict(7).unwrap(), None);
            assert!(other.checkpoints().unwrap().is_empty());
            assert!(RunStore::open_postgres(&pg.url(), "bad name;").is_err());
        }
    }

    /// Every stored name, pinned: these are the TEXT values run stores hold on disk.
    #[test]
    fn names_round_trip() {
        fn check<T: Named + PartialEq + std::fmt::Debug>(all: &[(T, &str)]) {
            for &(v, text) in all {
                assert_eq!(name(v), text);
                assert_eq!(parse_name::<T>("t", "c", text.into()).unwrap(), v);
            }
        }
        check(&[
            (Phase::Eval, "eval"),
            (Phase::Rl, "rl"),
            (Phase::RlEval, "rl-eval"),
            (Phase::HammerBaseline, "hammer-baseline"),
            (Phase::Ceiling, "ceiling"),
        ]);
        check(&[(Step::Sample, "sample"), (Step::Round, "round")]);
        assert_eq!(mark(Phase::RlEval, Step::Sample), "rl-eval/sample");
        check(&[(T0::UseInvoke, "use_invoke"), (T0::NoInvoke, "no_invoke")]);
        check(&[
            (Origin::Sampled, "sampled"),
            (Origin::GroundTruth, "ground_truth"),
            (Origin::HammerLeaf, "hammer_leaf"),
        ]);
        check(&[
            (GlobalVerdict::Correct, "correct"),
            (GlobalVerdict::Incorrect, "incorrect"),
            (GlobalVerdict::Undetermined, "undetermined"),
        ]);
        let kinds = [
            (VerdictKind::Proved, "proved"),
            (VerdictKind::Failed, "failed"),
            (VerdictKind::TimedOut, "timed_out"),
            (VerdictKind::Rejected, "rejected"),
            (VerdictKind::Infra, "infra"),
        ];
        check(&kinds);
        for (k, text) in kinds {
            assert_eq!(k.as_str(), text);
        }
        check(&[
            (ExampleKind::Generated, "generated"),
            (ExampleKind::Augmented, "augmented"),
            (ExampleKind::GroundTruth, "ground_truth"),
            (ExampleKind::Replayed, "replayed"),
        ]);
    }

    /// The tables and rows of a run store as the string-typed code wrote them (raw SQL).
    const OLD_STRINGS_STORE: &str = "
CREATE TABLE contexts (key TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE sample_log (
    round INTEGER NOT NULL, phase TEXT NOT NULL, seq INTEGER NOT NULL,
    request TEXT NOT NULL, answer TEXT NOT NULL, PRIMARY KEY (round, phase, seq));
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    round INTEGER NOT NULL, phase TEXT NOT NULL, ord INTEGER NOT NULL,
    theorem INTEGER, depth INTEGER NOT NULL, tree INTEGER NOT NULL,
    forced_t0 TEXT, origin TEXT NOT NULL,
    context_key TEXT NOT NULL, statement TEXT NOT NULL, completion TEXT NOT NULL,
    UNIQUE (round, phase, ord));
CREATE TABLE verdicts (node INTEGER PRIMARY KEY, kind TEXT NOT NULL, verdict TEXT NOT NULL);
CREATE TABLE globals (node INTEGER PRIMARY KEY, global TEXT NOT NULL, height INTEGER);
CREATE TABLE finals (
    round INTEGER NOT NULL, phase TEXT NOT NULL, theorem INTEGER NOT NULL, tree INTEGER NOT NULL,
    kind TEXT NOT NULL, verdict TEXT NOT NULL, file TEXT NOT NULL,
    PRIMARY KEY (round, phase, theorem, tree));
CREATE TABLE examples (
    round INTEGER NOT NULL, ord INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (round, ord));
CREATE TABLE phases (
    round INTEGER NOT NULL, phase TEXT NOT NULL,
    done_at INTEGER NOT NULL DEFAULT (strftime('%s','now')),
    seconds REAL NOT NULL DEFAULT 0, PRIMARY KEY (round, phase));
INSERT INTO contexts VALUES ('k', 'Require Import Arith.');
INSERT INTO sample_log VALUES (0, 'eval', 0, 'h0', 'a0'), (1, 'rl-eval', 0, 'h1', 'a1');
INSERT INTO nodes VALUES
    (1, 0, 'eval', 0, 0, 0, 0, NULL, 'sampled', 'k', 'Lemma a : True.', '<no_invoke> exact I.'),
    (2, 1, 'rl', 0, 0, 0, 0, 'use_invoke', 'sampled', 'k', 'Lemma a : True.', '<use_invoke> x.'),
    (3, 1, 'rl', 1, 0, 0, 0, 'no_invoke', 'ground_truth', 'k', 'Lemma a : True.', 'exact I.'),
    (4, 1, 'rl-eval', 0, NULL, 0, 1, NULL, 'sampled', 'k', 'Lemma b : True.', 'y.');
INSERT INTO verdicts VALUES (1, 'failed', '{\"verdict\":\"failed\",\"step\":1,\"message\":\"no\"}');
INSERT INTO globals VALUES (1, 'incorrect', NULL), (2, 'correct', 1), (4, 'undetermined', NULL);
INSERT INTO finals VALUES
    (0, 'eval', 0, 0, 'timed_out', '{\"verdict\":\"timed_out\",\"step\":2}', 'T.v');
INSERT INTO examples VALUES
    (1, 0, '{\"context\":\"c\",\"statement\":\"s\",\"target\":\"t\",\"weight\":0.5,\"kind\":\"generated\"}'),
    (1, 1, '{\"context\":\"c\",\"statement\":\"s\",\"target\":\"t\",\"weight\":1.0,\"kind\":\"ground_truth\"}'),
    (1, 2, '{\"context\":\"c\",\"statement\":\"s\",\"target\":\"t\",\"weight\":0.0,\"kind\":\"augmented\"}'),
    (1, 3, '{\"context\":\"c\",\"statement\":\"s\",\"target\":\"t\",\"weight\":0.5,\"kind\":\"replayed\"}');
INSERT INTO phases (round, phase, seconds) VALUES
    (0, 'eval/sample', 1.5), (1, 'rl/sample', 2.0), (1, 'rl/round', 9.0);
";

    /// A run store file written by the string-typed code, in `dir`.
    fn old_strings_store(dir: &tempfile::TempDir) -> std::path::PathBuf {
        let path = dir.path().join("run.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch(OLD_STRINGS_STORE)
            .unwrap();
        path
    }

    /// A stored node of the old store's shape (context `k`, depth 0, tree 1 for lemmas).
    #[allow(clippy::too_many_arguments)]
    fn old_node(
        id: i64,
        round: u32,
        phase: Phase,
        theorem: Option<i64>,
        forced_t0: Option<T0>,
        origin: Origin,
        statement: &str,
        completion: &str,
    ) -> StoredNode {
        StoredNode {
            id,
            round,
            phase,
            theorem,
            depth: 0,
            tree: u32::from(theorem.is_none()),
            forced_t0,
            origin,
            context_key: "k".into(),
            statement: statement.into(),
            completion: completion.into(),
            truncated: false,
        }
    }

    /// A store as the string-typed code wrote it opens, reads back into the enums and resumes.
    // One scenario over every table of the old store; the expected records are data.
    #[test]
    fn opens_a_store_written_with_the_old_strings() {
        let dir = tempfile::tempdir().unwrap();
        let path = old_strings_store(&dir);
        let s = RunStore::open(&path).unwrap();
        assert!(
            !s.records_truncation().unwrap(),
            "a store with samples from before the cut tables does not claim to know its cuts"
        );
        let eval = vec![old_node(
            1,
            0,
            Phase::Eval,
            Some(0),
            None,
            Origin::Sampled,
            "Lemma a : True.",
            "<no_invoke> exact I.",
        )];
        let rl = vec![
            old_node(
                2,
                1,
                Phase::Rl,
                Some(0),
                Some(T0::UseInvoke),
                Origin::Sampled,
                "Lemma a : True.",
                "<use_invoke> x.",
            ),
            old_node(
                3,
                1,
                Phase::Rl,
                Some(0),
                Some(T0::NoInvoke),
                Origin::GroundTruth,
                "Lemma a : True.",
                "exact I.",
            ),
        ];
        let rl_eval = vec![old_node(
            4,
            1,
            Phase::RlEval,
            None,
            None,
            Origin::Sampled,
            "Lemma b : True.",
            "y.",
        )];
        assert_eq!(s.nodes(0, Phase::Eval).unwrap(), eval);
        assert_eq!(s.nodes(1, Phase::Rl).unwrap(), rl);
        assert_eq!(s.nodes(1, Phase::RlEval).unwrap(), rl_eval);
        assert_eq!(
            s.put_nodes(1, Phase::Rl, &rl).unwrap(),
            [2, 3],
            "a resume finds the old nodes"
        );
        assert_eq!(
            s.verdict(1).unwrap(),
            Some(Verdict::Failed {
                step: 1,
                message: "no".into()
            })
        );
        assert_eq!(s.global(1).unwrap(), Some((GlobalVerdict::Incorrect, None)));
        assert_eq!(
            s.global(2).unwrap(),
            Some((GlobalVerdict::Correct, Some(1)))
        );
        assert_eq!(
            s.global(4).unwrap(),
            Some((GlobalVerdict::Undetermined, None))
        );
        assert_eq!(
            s.final_verdict(0, Phase::Eval, 0, 0).unwrap(),
            Some(Verdict::TimedOut { step: 2 })
        );
        let kinds: Vec<ExampleKind> = s.examples(1).unwrap().iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                ExampleKind::Generated,
                ExampleKind::GroundTruth,
                ExampleKind::Augmented,
                ExampleKind::Replayed
            ]
        );
        assert_eq!(
            s.phase_seconds(0, Phase::Eval, Step::Sample).unwrap(),
            Some(1.5)
        );
        assert!(s.is_done(1, Phase::Rl, Step::Sample).unwrap());
        assert!(s.is_done(1, Phase::Rl, Step::Round).unwrap());
        assert!(!s.is_done(1, Phase::RlEval, Step::Sample).unwrap());
        assert_eq!(s.log_len(0, Phase::Eval).unwrap(), 1);
        assert_eq!(
            s.logged_answer(1, Phase::RlEval, 0, "h1").unwrap(),
            Some(Completion::ended("a1"))
        );
    }

    /// New rows in a store written by the string-typed code get the strings it wrote.
    #[test]
    fn writes_the_old_strings() {
        let dir = tempfile::tempdir().unwrap();
        let path = old_strings_store(&dir);
        let s = RunStore::open(&path).unwrap();
        let lemma = old_node(
            0,
            2,
            Phase::RlEval,
            None,
            Some(T0::NoInvoke),
            Origin::GroundTruth,
            "Lemma c : True.",
            "z.",
        );
        let id = s.put_nodes(2, Phase::RlEval, &[lemma]).unwrap()[0];
        s.put_global(id, GlobalVerdict::Undetermined, None).unwrap();
        s.put_verdict(id, &Verdict::TimedOut { step: 0 }).unwrap();
        s.put_final(2, Phase::RlEval, 0, 1, &Verdict::rejected("r"), "U.v")
            .unwrap();
        s.mark_done(2, Phase::RlEval, Step::Sample, 0.5).unwrap();
        s.log_answers(2, Phase::RlEval, 0, &[("h".into(), Completion::ended("a"))])
            .unwrap();
        drop(s);
        let c = Connection::open(&path).unwrap();
        let text = |sql: &str| -> Vec<String> {
            c.prepare(sql)
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect()
        };
        assert_eq!(
            text(&format!(
                "SELECT phase || ' ' || forced_t0 || ' ' || origin FROM nodes WHERE id = {id}"
            )),
            ["rl-eval no_invoke ground_truth"]
        );
        assert_eq!(
            text(&format!("SELECT global FROM globals WHERE node = {id}")),
            ["undetermined"]
        );
        assert_eq!(
            text(&format!("SELECT kind FROM verdicts WHERE node = {id}")),
            ["timed_out"]
        );
        assert_eq!(
            text("SELECT phase || ' ' || kind FROM finals WHERE round = 2"),
            ["rl-eval rejected"]
        );
        assert_eq!(
            text("SELECT phase FROM phases WHERE round = 2"),
            ["rl-eval/sample"]
        );
        assert_eq!(
            text("SELECT phase FROM sample_log WHERE round = 2"),
            ["rl-eval"]
        );
    }

    /// A value no enum has is an error that names the table, the column and the value.
    #[test]
    fn unknown_stored_values_are_errors() {
        let s = RunStore::in_memory().unwrap();
        let c = match &s.db {
            Db::Sqlite(c) => c,
            Db::Postgres(_) => unreachable!(),
        };
        c.lock()
            .unwrap()
            .execute_batch(
                "
INSERT INTO nodes (round, phase, ord, theorem, depth, tree, forced_t0, origin, context_key, statement, completion)
VALUES (0, 'eval', 0, 0, 0, 0, NULL, 'sampeld', 'k', 's', 'c'),
       (1, 'eval', 0, 0, 0, 0, 'use-invoke', 'sampled', 'k', 's', 'c');
INSERT INTO globals VALUES (1, 'corect', NULL);
INSERT INTO examples VALUES
    (1, 0, '{\"context\":\"c\",\"statement\":\"s\",\"target\":\"t\",\"weight\":0.5,\"kind\":\"replayd\"}');
",
            )
            .unwrap();
        let unknown = |e: StoreError, t: &str, col: &str, v: &str| {
            let text = e.to_string();
            assert!(
                matches!(&e, StoreError::Unknown { table, column, value } if *table == t && *column == col && value == v),
                "{text}"
            );
            assert!(
                text.contains(t) && text.contains(col) && text.contains(v),
                "{text}"
            );
        };
        unknown(
            s.nodes(0, Phase::Eval).unwrap_err(),
            "nodes",
            "origin",
            "sampeld",
        );
        unknown(
            s.nodes(1, Phase::Eval).unwrap_err(),
            "nodes",
            "forced_t0",
            "use-invoke",
        );
        unknown(s.global(1).unwrap_err(), "globals", "global", "corect");
        let e = s.examples(1).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(
                e,
                StoreError::BadJson {
                    table: "examples",
                    column: "data",
                    ..
                }
            ) && text.contains("replayd"),
            "{text}"
        );
    }
}

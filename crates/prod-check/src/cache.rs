//! The verification cache (SQLite, embedded).
//!
//! Key: SHA-256 of (checker fingerprint — prover and library versions and options —, imports,
//! context, statement, proof, admitted lemmas). Value: the verdict as JSON (its serde form,
//! universe constraints included). `Infra` verdicts are never stored: they say nothing about the
//! proof. A `Proved` entry from before the universe constraints were stored is a miss.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::checker::{Checker, Progress};
use crate::request::CheckRequest;
use crate::verdict::Verdict;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("verification cache: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("verification cache: bad stored verdict: {0}")]
    Json(#[from] serde_json::Error),
}

/// The cache key of `request` under a checker with `fingerprint`.
pub fn cache_key(fingerprint: &str, request: &CheckRequest) -> String {
    let mut h = Sha256::new();
    let proof = request.proof.to_string();
    let lemmas = request.lemmas();
    let mut field = |s: &str| {
        // Length-prefixed, so that no two different field lists hash the same bytes.
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    field("prod-check-v1");
    field(fingerprint);
    field(&request.imports);
    field(&request.context);
    field(&request.statement);
    field(&proof);
    field(&lemmas.len().to_string());
    for l in lemmas {
        field(l);
    }
    hex::encode(h.finalize())
}

/// A persistent map from cache keys to verdicts.
pub struct VerificationCache {
    conn: Mutex<Connection>,
    /// Keep at most this many entries, the newest (`None`: unbounded).
    max_entries: Option<u32>,
}

impl VerificationCache {
    /// Open (creating if needed) the cache file at `path`.
    pub fn open(path: &Path) -> Result<Self, CacheError> {
        Self::init(Connection::open(path)?)
    }

    /// A cache that lives only as long as this value (tests, one-off runs).
    pub fn in_memory() -> Result<Self, CacheError> {
        Self::init(Connection::open_in_memory()?)
    }

    /// [`VerificationCache::in_memory`] that keeps only the `max_entries` newest verdicts, so a
    /// long-running service's memory stays bounded (a verdict stored again counts as new).
    pub fn in_memory_bounded(max_entries: u32) -> Result<Self, CacheError> {
        Ok(VerificationCache {
            max_entries: Some(max_entries),
            ..Self::in_memory()?
        })
    }

    fn init(conn: Connection) -> Result<Self, CacheError> {
        // WAL lets several `prod` processes share one cache file.
        let _ = conn.pragma_update(None, "journal_mode", "WAL");
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS verdicts (
                key TEXT PRIMARY KEY,
                verdict TEXT NOT NULL,
                created_at INTEGER NOT NULL DEFAULT (strftime('%s','now'))
            );",
        )?;
        Ok(VerificationCache {
            conn: Mutex::new(conn),
            max_entries: None,
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent; keep going.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, key: &str) -> Result<Option<Verdict>, CacheError> {
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT verdict FROM verdicts WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()?;
        let Some(t) = text else { return Ok(None) };
        let v: Verdict = serde_json::from_str(&t)?;
        // An entry stored before verdicts kept their universe constraints cannot say whether
        // its proof constrains its statement's levels: a miss, so the proof is checked again
        // (and the entry replaced) rather than trusted or demoted.
        Ok(v.universes_recorded().then_some(v))
    }

    /// Store `verdict` under `key`; returns whether it was stored (`Infra` never is).
    pub fn put(&self, key: &str, verdict: &Verdict) -> Result<bool, CacheError> {
        if !verdict.is_cacheable() {
            return Ok(false);
        }
        let text = serde_json::to_string(verdict)?;
        let conn = self.conn();
        conn.execute(
            "INSERT OR REPLACE INTO verdicts (key, verdict) VALUES (?1, ?2)",
            params![key, text],
        )?;
        if let Some(max) = self.max_entries {
            // Rows get increasing row ids (a replaced key is a new row), so the newest `max`
            // are those within `max` of the last one.
            conn.execute(
                "DELETE FROM verdicts WHERE rowid <= last_insert_rowid() - ?1",
                params![max],
            )?;
        }
        Ok(true)
    }

    pub fn len(&self) -> Result<usize, CacheError> {
        let n: i64 = self
            .conn()
            .query_row("SELECT COUNT(*) FROM verdicts", [], |r| r.get(0))?;
        Ok(n as usize)
    }

    pub fn is_empty(&self) -> Result<bool, CacheError> {
        Ok(self.len()? == 0)
    }
}

/// A checker that answers from the cache when it can and remembers what the inner checker says.
/// Cache errors are never fatal: a failed lookup is a miss, a failed store is forgotten.
pub struct CachedChecker<C> {
    pub inner: C,
    pub cache: VerificationCache,
}

impl<C: Checker> CachedChecker<C> {
    pub fn new(inner: C, cache: VerificationCache) -> Self {
        CachedChecker { inner, cache }
    }
}

impl<C: Checker> Checker for CachedChecker<C> {
    fn prover(&self) -> &'static str {
        self.inner.prover()
    }

    fn fingerprint(&self) -> String {
        self.inner.fingerprint()
    }

    fn hammer_stats(&self) -> Option<crate::HammerStats> {
        self.inner.hammer_stats()
    }

    fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
        let fp = self.inner.fingerprint();
        let keys: Vec<String> = requests.iter().map(|r| cache_key(&fp, r)).collect();
        let mut out: Vec<Option<Verdict>> = keys
            .iter()
            .map(|k| self.cache.get(k).ok().flatten())
            .collect();
        for (i, v) in out.iter().enumerate() {
            if let Some(v) = v {
                progress(i, v);
            }
        }
        let missing: Vec<usize> = (0..requests.len()).filter(|&i| out[i].is_none()).collect();
        if !missing.is_empty() {
            let todo: Vec<CheckRequest> = missing.iter().map(|&i| requests[i].clone()).collect();
            // Each verdict is cached as it arrives, before the caller commits it: a run killed
            // mid-batch must not hold a verdict that the cache would be asked for again.
            let cached = std::sync::Mutex::new(vec![false; missing.len()]);
            let inner_progress = |j: usize, v: &Verdict| {
                if let Some(&i) = missing.get(j) {
                    let _ = self.cache.put(&keys[i], v);
                    if let Some(c) = cached.lock().unwrap_or_else(|e| e.into_inner()).get_mut(j) {
                        *c = true;
                    }
                    progress(i, v)
                }
            };
            let verdicts = self.inner.check_batch(&todo, &inner_progress);
            let cached = cached.into_inner().unwrap_or_else(|e| e.into_inner());
            for (j, v) in verdicts.into_iter().enumerate() {
                if let Some(&i) = missing.get(j) {
                    if !cached.get(j).copied().unwrap_or(false) {
                        let _ = self.cache.put(&keys[i], &v);
                    }
                    out[i] = Some(v);
                }
            }
        }
        out.into_iter()
            .map(|v| v.unwrap_or_else(|| Verdict::infra("checker returned too few verdicts")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use prod_core::{ConditionalProof, T0};

    use super::*;

    /// Judges by a rule on the proof text, counting how often it is really asked.
    struct Scripted {
        calls: AtomicUsize,
    }

    impl Checker for Scripted {
        fn prover(&self) -> &'static str {
            "scripted"
        }
        fn fingerprint(&self) -> String {
            "scripted-1".into()
        }
        fn check_batch(&self, requests: &[CheckRequest], progress: Progress<'_>) -> Vec<Verdict> {
            requests
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    self.calls.fetch_add(1, Ordering::SeqCst);
                    let text = r.proof.proof_text();
                    let v = if text.contains("crash") {
                        Verdict::infra("worker lost")
                    } else if text.contains("ok") {
                        Verdict::Proved {
                            axioms: vec![],
                            replacements: vec![],
                            time: Duration::from_millis(3),
                            universe_constraints: vec![],
                        }
                    } else {
                        Verdict::Failed {
                            step: 1,
                            message: "nope".into(),
                        }
                    };
                    progress(i, &v);
                    v
                })
                .collect()
        }
    }

    fn req(proof: &str) -> CheckRequest {
        CheckRequest::new(
            "",
            "",
            "Lemma a : True.",
            ConditionalProof::plain(T0::NoInvoke, proof),
        )
    }

    #[test]
    fn keys_separate_every_field() {
        let base = req(" ok.");
        let k = cache_key("fp", &base);
        assert_eq!(k, cache_key("fp", &base.clone()));
        assert_ne!(k, cache_key("fp2", &base));
        let mut r = base.clone();
        r.imports = "Require Import Arith.".into();
        assert_ne!(k, cache_key("fp", &r));
        let mut r = base.clone();
        r.context = "Definition x := 1.".into();
        assert_ne!(k, cache_key("fp", &r));
        let mut r = base.clone();
        r.statement = "Lemma a : False.".into();
        assert_ne!(k, cache_key("fp", &r));
        let r = CheckRequest {
            proof: ConditionalProof::parse_with(
                "<use_invoke> ok. <invoke>Lemma b : True.</invoke>",
                &prod_core::language::tests_support::ToyLanguage,
            )
            .unwrap(),
            ..base.clone()
        };
        assert_ne!(k, cache_key("fp", &r));
        // Moving text between fields must change the key (length prefixes).
        let a = CheckRequest::new("ab", "", "s", ConditionalProof::plain(T0::NoInvoke, ""));
        let b = CheckRequest::new("a", "b", "s", ConditionalProof::plain(T0::NoInvoke, ""));
        assert_ne!(cache_key("", &a), cache_key("", &b));
    }

    #[test]
    fn a_bounded_cache_keeps_the_newest_verdicts() {
        let c = VerificationCache::in_memory_bounded(3).unwrap();
        let failed = Verdict::Failed {
            step: 1,
            message: "no".into(),
        };
        for k in ["a", "b", "c", "d"] {
            assert!(c.put(k, &failed).unwrap());
        }
        assert_eq!(c.len().unwrap(), 3);
        assert!(c.get("a").unwrap().is_none());
        assert!(c.get("d").unwrap().is_some());
        // A key stored again is new: the oldest other one goes.
        c.put("b", &failed).unwrap();
        c.put("e", &failed).unwrap();
        assert!(c.get("c").unwrap().is_none());
        assert!(c.get("b").unwrap().is_some());
        assert_eq!(c.len().unwrap(), 3);
        assert!(!c.put("f", &Verdict::infra("lost")).unwrap());
    }

    #[test]
    fn cached_checker_remembers_all_but_infra() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.sqlite");
        let reqs = vec![req(" ok."), req(" bad."), req(" crash.")];
        let checker = CachedChecker::new(
            Scripted {
                calls: AtomicUsize::new(0),
            },
            VerificationCache::open(&path).unwrap(),
        );
        let first = checker.check_batch(&reqs, &|_, _| {});
        assert_eq!(
            first.iter().map(|v| v.kind().as_str()).collect::<Vec<_>>(),
            ["proved", "failed", "infra"]
        );
        assert_eq!(checker.inner.calls.load(Ordering::SeqCst), 3);
        let seen = AtomicUsize::new(0);
        let second = checker.check_batch(&reqs, &|_, _| {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(second, first);
        // Only the infra verdict was asked again; progress still reports all three.
        assert_eq!(checker.inner.calls.load(Ordering::SeqCst), 4);
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        assert_eq!(checker.cache.len().unwrap(), 2);
        drop(checker);
        // The file persists.
        let again = VerificationCache::open(&path).unwrap();
        assert_eq!(again.len().unwrap(), 2);
        assert!(!again.put("k", &Verdict::infra("x")).unwrap());
    }

    #[test]
    fn universe_constraints_are_stored_and_an_entry_without_them_is_a_miss() {
        let cache = VerificationCache::in_memory().unwrap();
        let constrained = Verdict::Proved {
            axioms: vec![],
            replacements: vec![],
            time: Duration::from_millis(3),
            universe_constraints: vec!["u0 = u1".into()],
        };
        cache.put("a", &constrained).unwrap();
        let back = cache.get("a").unwrap().unwrap();
        assert_eq!(back, constrained);
        assert_eq!(
            back.local_verdict(),
            prod_core::tree::LocalVerdict::CorrectAlone
        );
        // An entry written before the field existed: never answered from the cache.
        cache
            .conn()
            .execute(
                "INSERT INTO verdicts (key, verdict) VALUES ('old', ?1)",
                params![r#"{"verdict":"proved","axioms":[],"replacements":[],"time":{"secs":0,"nanos":0}}"#],
            )
            .unwrap();
        assert_eq!(cache.get("old").unwrap(), None);
        // Other verdicts never had the field, and read back as they are.
        let failed = Verdict::Failed {
            step: 1,
            message: "no".into(),
        };
        cache.put("f", &failed).unwrap();
        assert_eq!(cache.get("f").unwrap(), Some(failed));
    }
}

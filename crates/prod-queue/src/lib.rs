//! Checking at scale: one round's checks in a PostgreSQL table that any number of workers, on
//! any number of machines, drain together. SQLite stays the embedded default for a
//! single machine; this is the shared store for many.
//!
//! * A worker claims a few jobs at a time with `SELECT … FOR UPDATE SKIP LOCKED`: two workers
//!   never claim the same job, and nobody waits for anybody's locks.
//! * A claim is a lease: a worker that dies leaves its jobs claimed until the lease expires, then
//!   any worker may claim them again (`attempts` counts the claims).
//! * A verdict is recorded only by the worker that holds the claim (`completions` counts the
//!   recordings: exactly one per job), so a worker that comes back after its lease expired and
//!   the job was re-claimed cannot record it a second time.
//! * `Infra` verdicts are never recorded: the job goes back to the queue (up to `max_attempts`
//!   claims, after which the infrastructure failure is recorded as such — never as a proof
//!   failure).

use std::time::Duration;

#[cfg(feature = "test-cluster")]
pub mod testing;

use postgres::{Client, NoTls};
use prod_check::{CheckRequest, Checker, Verdict};

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("PostgreSQL: {0}")]
    Db(#[from] postgres::Error),
    #[error("{0}")]
    Data(String),
}

pub type Result<T> = std::result::Result<T, QueueError>;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS prod_check_jobs (
    id          BIGSERIAL PRIMARY KEY,
    run         TEXT NOT NULL,
    item        TEXT NOT NULL,
    position    BIGINT NOT NULL,
    request     JSONB NOT NULL,
    state       TEXT NOT NULL DEFAULT 'todo' CHECK (state IN ('todo', 'claimed', 'done')),
    claimed_by  TEXT,
    claimed_at  TIMESTAMPTZ,
    attempts    INT NOT NULL DEFAULT 0,
    completions INT NOT NULL DEFAULT 0,
    verdict     JSONB,
    done_by     TEXT,
    UNIQUE (run, item)
);
CREATE INDEX IF NOT EXISTS prod_check_jobs_todo ON prod_check_jobs (run, state, id);
-- `want`: the checker fingerprint a job must be checked with (NULL: any worker);
-- `fingerprint`: the one it was checked with.
ALTER TABLE prod_check_jobs ADD COLUMN IF NOT EXISTS want TEXT;
ALTER TABLE prod_check_jobs ADD COLUMN IF NOT EXISTS fingerprint TEXT;
-- Until when a claim holds: set by the claimant from its own lease (a worker with long checks
-- takes long leases; a short-lease claim of a dead worker comes back soon).
ALTER TABLE prod_check_jobs ADD COLUMN IF NOT EXISTS lease_until TIMESTAMPTZ;
-- The checker configuration a run's coordinator checks with: workers start from it, so their
-- fingerprints match without repeating every setting on every machine.
CREATE TABLE IF NOT EXISTS prod_check_runs (run TEXT PRIMARY KEY, checker JSONB NOT NULL);
";

/// The advisory lock key under which prod sets up its tables ("prod" in ASCII).
pub const SCHEMA_LOCK: i64 = 0x7072_6f64;

/// A claimed job.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: i64,
    pub item: String,
    pub request: CheckRequest,
    /// Claims of this job so far, this one included.
    pub attempts: i32,
}

/// One job's outcome: item, verdict if recorded, claims, recordings.
pub type JobResult = (String, Option<Verdict>, i32, i32);

/// Counts of one run's jobs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub todo: i64,
    pub claimed: i64,
    pub done: i64,
}

impl Status {
    /// `prod queue status --json`'s object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"todo": self.todo, "claimed": self.claimed, "done": self.done})
    }

    /// `prod queue status`'s line.
    pub fn text(&self) -> String {
        format!(
            "todo {}, claimed {}, done {}",
            self.todo, self.claimed, self.done
        )
    }
}

/// One run's jobs in a PostgreSQL database.
pub struct Queue {
    client: Client,
    run: String,
}

impl Queue {
    /// `url`: a libpq connection string or `postgres://` URL. Creates the table if needed.
    pub fn connect(url: &str, run: &str) -> Result<Queue> {
        let mut client = Client::connect(url, NoTls)?;
        // Workers start together: concurrent `CREATE … IF NOT EXISTS` can still collide in
        // PostgreSQL's catalogs, so the schema is set up under one advisory lock.
        let mut tx = client.transaction()?;
        tx.batch_execute(&format!("SELECT pg_advisory_xact_lock({SCHEMA_LOCK});"))?;
        tx.batch_execute(SCHEMA)?;
        tx.commit()?;
        Ok(Queue {
            client,
            run: run.to_string(),
        })
    }

    /// Add jobs (`item` names a job within the run; a job already there is left as it is, so
    /// submitting twice is harmless). Returns how many were new.
    pub fn submit(&mut self, jobs: &[(String, CheckRequest)]) -> Result<u64> {
        self.submit_for(jobs, None)
    }

    /// [`Queue::submit`] for workers whose checker fingerprint is `want` only (`None`: any
    /// worker). A job that ended in an infrastructure failure is opened again (a resumed run
    /// asks once more; the failure was never a verdict about the proof).
    pub fn submit_for(
        &mut self,
        jobs: &[(String, CheckRequest)],
        want: Option<&str>,
    ) -> Result<u64> {
        let mut tx = self.client.transaction()?;
        let stmt = tx.prepare(
            "INSERT INTO prod_check_jobs (run, item, position, request, want) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (run, item) DO UPDATE SET state = 'todo', claimed_by = NULL, claimed_at = NULL,
                    attempts = 0, completions = 0, verdict = NULL, done_by = NULL, fingerprint = NULL
             WHERE prod_check_jobs.state = 'done' AND prod_check_jobs.verdict->>'verdict' = 'infra'",
        )?;
        let mut added = 0;
        let base: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM prod_check_jobs WHERE run = $1",
                &[&self.run],
            )?
            .get(0);
        for (i, (item, req)) in jobs.iter().enumerate() {
            let v = serde_json::to_value(req).map_err(|e| QueueError::Data(e.to_string()))?;
            added += tx.execute(&stmt, &[&self.run, item, &(base + i as i64), &v, &want])?;
        }
        tx.commit()?;
        Ok(added)
    }

    /// Claim up to `n` jobs for `lease`: waiting ones, and claimed ones whose lease expired,
    /// among those a checker with `fingerprint` may check.
    pub fn claim(
        &mut self,
        worker: &str,
        fingerprint: &str,
        n: usize,
        lease: Duration,
    ) -> Result<Vec<Job>> {
        let rows = self.client.query(
            "UPDATE prod_check_jobs SET state = 'claimed', claimed_by = $1, claimed_at = now(),
                    lease_until = now() + make_interval(secs => $3), attempts = attempts + 1
             WHERE id IN (
                 SELECT id FROM prod_check_jobs
                 WHERE run = $2 AND (state = 'todo'
                       OR (state = 'claimed' AND COALESCE(lease_until, claimed_at) < now()))
                   AND (want IS NULL OR want = $5)
                 ORDER BY id LIMIT $4
                 FOR UPDATE SKIP LOCKED)
             RETURNING id, item, request, attempts",
            &[
                &worker,
                &self.run,
                &lease.as_secs_f64(),
                &(n as i64),
                &fingerprint,
            ],
        )?;
        let mut jobs = Vec::with_capacity(rows.len());
        for r in rows {
            let v: serde_json::Value = r.get(2);
            let request = serde_json::from_value(v)
                .map_err(|e| QueueError::Data(format!("job {}: {e}", r.get::<_, i64>(0))))?;
            jobs.push(Job {
                id: r.get(0),
                item: r.get(1),
                request,
                attempts: r.get(3),
            });
        }
        Ok(jobs)
    }

    /// Record a verdict reached by a checker with `fingerprint`; `false` when `worker` no
    /// longer holds the claim (nothing recorded).
    pub fn complete(
        &mut self,
        job: i64,
        worker: &str,
        fingerprint: &str,
        verdict: &Verdict,
    ) -> Result<bool> {
        let v = serde_json::to_value(verdict).map_err(|e| QueueError::Data(e.to_string()))?;
        let n = self.client.execute(
            "UPDATE prod_check_jobs SET state = 'done', verdict = $3, done_by = $2,
                    completions = completions + 1, fingerprint = $4
             WHERE id = $1 AND state = 'claimed' AND claimed_by = $2",
            &[&job, &worker, &v, &fingerprint],
        )?;
        Ok(n == 1)
    }

    /// Give a claimed job back (an infrastructure failure: another worker retries it).
    pub fn release(&mut self, job: i64, worker: &str) -> Result<bool> {
        let n = self.client.execute(
            "UPDATE prod_check_jobs SET state = 'todo', claimed_by = NULL, claimed_at = NULL
             WHERE id = $1 AND state = 'claimed' AND claimed_by = $2",
            &[&job, &worker],
        )?;
        Ok(n == 1)
    }

    /// Record the checker configuration of this run (the coordinator's; workers read it).
    pub fn set_checker_config(&mut self, config: &serde_json::Value) -> Result<()> {
        self.client.execute(
            "INSERT INTO prod_check_runs (run, checker) VALUES ($1, $2)
             ON CONFLICT (run) DO UPDATE SET checker = excluded.checker",
            &[&self.run, config],
        )?;
        Ok(())
    }

    /// The recorded checker configuration of this run, if any.
    pub fn checker_config(&mut self) -> Result<Option<serde_json::Value>> {
        Ok(self
            .client
            .query_opt(
                "SELECT checker FROM prod_check_runs WHERE run = $1",
                &[&self.run],
            )?
            .map(|r| r.get(0)))
    }

    /// Waiting jobs by the fingerprint they want (`None`: any worker), most first.
    pub fn waiting_by_fingerprint(&mut self) -> Result<Vec<(Option<String>, i64)>> {
        let rows = self.client.query(
            "SELECT want, count(*) FROM prod_check_jobs WHERE run = $1 AND state = 'todo'
             GROUP BY want ORDER BY count(*) DESC",
            &[&self.run],
        )?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub fn status(&mut self) -> Result<Status> {
        let mut s = Status::default();
        for r in self.client.query(
            "SELECT state, count(*) FROM prod_check_jobs WHERE run = $1 GROUP BY state",
            &[&self.run],
        )? {
            let (state, n): (String, i64) = (r.get(0), r.get(1));
            match state.as_str() {
                "todo" => s.todo = n,
                "claimed" => s.claimed = n,
                _ => s.done = n,
            }
        }
        Ok(s)
    }

    /// The recorded verdicts among `items`: (item, verdict, fingerprint it was checked with).
    pub fn verdicts_of(
        &mut self,
        items: &[String],
    ) -> Result<Vec<(String, Verdict, Option<String>)>> {
        let rows = self.client.query(
            "SELECT item, verdict, fingerprint FROM prod_check_jobs
             WHERE run = $1 AND state = 'done' AND item = ANY($2)",
            &[&self.run, &items],
        )?;
        rows.into_iter()
            .map(|r| {
                let v: serde_json::Value = r.get(1);
                let verdict =
                    serde_json::from_value(v).map_err(|e| QueueError::Data(e.to_string()))?;
                Ok((r.get(0), verdict, r.get(2)))
            })
            .collect()
    }

    /// Every job in submission order: (item, verdict if recorded, claims, recordings).
    pub fn results(&mut self) -> Result<Vec<JobResult>> {
        let rows = self.client.query(
            "SELECT item, verdict, attempts, completions FROM prod_check_jobs WHERE run = $1 ORDER BY position, id",
            &[&self.run],
        )?;
        rows.into_iter()
            .map(|r| {
                let v: Option<serde_json::Value> = r.get(1);
                let verdict = v
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|e| QueueError::Data(e.to_string()))?;
                Ok((r.get(0), verdict, r.get(2), r.get(3)))
            })
            .collect()
    }
}

/// This process's default worker name, `host:pid` (claims and recordings carry it).
pub fn process_worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}:{}", host.trim(), std::process::id())
}

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkStats {
    pub claimed: usize,
    pub recorded: usize,
    /// Verdicts not recorded because the claim had expired and moved on.
    pub lost_claims: usize,
    pub released_infra: usize,
}

impl WorkStats {
    /// `prod queue work --json`'s object for the worker `name`.
    pub fn json(&self, name: &str) -> serde_json::Value {
        serde_json::json!({"worker": name, "claimed": self.claimed, "recorded": self.recorded,
            "lost_claims": self.lost_claims, "released_infra": self.released_infra})
    }

    /// `prod queue work`'s line for the worker `name`.
    pub fn text(&self, name: &str) -> String {
        let (c, r, l, i) = (
            self.claimed,
            self.recorded,
            self.lost_claims,
            self.released_infra,
        );
        format!("{name}: claimed {c}, recorded {r}, lost claims {l}, infra released {i}")
    }
}

/// Options of [`work`].
#[derive(Clone, Debug)]
pub struct WorkOptions {
    /// Jobs claimed at a time.
    pub batch: usize,
    /// How long a claim holds (longer than the longest check: a check's time limit × steps).
    pub lease: Duration,
    /// Claims of one job after which an `Infra` verdict is recorded instead of retried.
    pub max_attempts: i32,
    /// Return when no job is waiting or claimed; otherwise also when none is waiting.
    pub until_empty: bool,
    /// Pause between polls when every remaining job is claimed by others.
    pub poll: Duration,
    /// [`work_until_idle`]: keep polling until no job has come for this long (a coordinator
    /// queues its checks in phases); zero stops once the queue is empty.
    pub idle_exit: Duration,
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions {
            batch: 8,
            lease: Duration::from_secs(900),
            max_attempts: 3,
            until_empty: true,
            poll: Duration::from_millis(500),
            idle_exit: Duration::ZERO,
        }
    }
}

/// Drain the queue with `checker`.
pub fn work(
    queue: &mut Queue,
    checker: &dyn Checker,
    worker: &str,
    opts: &WorkOptions,
) -> Result<WorkStats> {
    let mut stats = WorkStats::default();
    let fingerprint = checker.fingerprint();
    let mut warned = false;
    loop {
        if work_once(queue, checker, &fingerprint, worker, opts, &mut stats)? {
            continue;
        }
        let s = queue.status()?;
        if s.todo == 0 && (s.claimed == 0 || !opts.until_empty) {
            return Ok(stats);
        }
        if s.todo > 0 && !warned {
            // Waiting jobs this worker may not take: say why once (a silent worker that never
            // claims anything looks like a hang).
            let waiting = queue.waiting_by_fingerprint()?;
            if !waiting
                .iter()
                .any(|(want, _)| want.as_deref().is_none_or(|w| w == fingerprint))
            {
                let (want, n) = &waiting[0];
                eprintln!(
                    "{worker}: {n} waiting checks want a checker with fingerprint\n  {}\nbut this worker's is\n  {fingerprint}\n(another Coq installation or other settings); not taking them",
                    want.as_deref().unwrap_or("")
                );
                warned = true;
            }
        }
        // Others hold the rest (or it is for other checkers): wait for them to finish or for
        // their leases to expire.
        std::thread::sleep(opts.poll);
    }
}

/// [`work`], then polling every `opts.poll` for more until none has come for
/// `opts.idle_exit`; the stats of every pass together.
pub fn work_until_idle(
    queue: &mut Queue,
    checker: &dyn Checker,
    worker: &str,
    opts: &WorkOptions,
) -> Result<WorkStats> {
    let mut stats = work(queue, checker, worker, opts)?;
    let mut idle_since = std::time::Instant::now();
    while idle_since.elapsed() < opts.idle_exit {
        std::thread::sleep(opts.poll);
        let more = work(queue, checker, worker, opts)?;
        if more.claimed > 0 {
            idle_since = std::time::Instant::now();
        }
        stats.claimed += more.claimed;
        stats.recorded += more.recorded;
        stats.lost_claims += more.lost_claims;
        stats.released_infra += more.released_infra;
    }
    Ok(stats)
}

/// Claim one batch, check it, record it; `false` when there was nothing to claim.
fn work_once(
    queue: &mut Queue,
    checker: &dyn Checker,
    fingerprint: &str,
    worker: &str,
    opts: &WorkOptions,
    stats: &mut WorkStats,
) -> Result<bool> {
    let jobs = queue.claim(worker, fingerprint, opts.batch.max(1), opts.lease)?;
    if jobs.is_empty() {
        return Ok(false);
    }
    stats.claimed += jobs.len();
    let requests: Vec<CheckRequest> = jobs.iter().map(|j| j.request.clone()).collect();
    let verdicts = checker.check_batch(&requests, &|_, _| {});
    for (job, v) in jobs.iter().zip(verdicts) {
        if matches!(v, Verdict::Infra { .. }) && job.attempts < opts.max_attempts {
            queue.release(job.id, worker)?;
            stats.released_infra += 1;
            continue;
        }
        if queue.complete(job.id, worker, fingerprint, &v)? {
            stats.recorded += 1;
        } else {
            stats.lost_claims += 1;
        }
    }
    Ok(true)
}

/// A [`Checker`] whose checks go through a run's queue: `check_batch` submits the requests
/// (each keyed by its verification-cache key, so a request is one job however often it is
/// asked), then waits until workers — this process's own `local` checker, if any, and
/// `prod queue work` processes anywhere — have recorded a verdict for each.
///
/// Jobs are marked for workers whose checker fingerprint equals this checker's: a worker with
/// other time limits or another Coq never judges them. A lost database connection gives
/// `Infra` verdicts (asked again on resume), never proof failures.
pub struct QueueChecker<C: Checker> {
    queue: std::sync::Mutex<Queue>,
    local: Option<C>,
    fingerprint: String,
    prover: &'static str,
    worker: String,
    opts: WorkOptions,
}

impl<C: Checker> QueueChecker<C> {
    /// `checker` fixes the fingerprint; it also checks here when `check_here` (otherwise only
    /// other workers do).
    pub fn new(
        queue: Queue,
        checker: C,
        check_here: bool,
        worker: &str,
        opts: WorkOptions,
    ) -> Self {
        QueueChecker {
            fingerprint: checker.fingerprint(),
            prover: checker.prover(),
            queue: std::sync::Mutex::new(queue),
            local: check_here.then_some(checker),
            worker: worker.to_string(),
            opts,
        }
    }

    fn run(
        &self,
        requests: &[CheckRequest],
        progress: prod_check::Progress<'_>,
        out: &mut [Option<Verdict>],
    ) -> Result<()> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let items: Vec<String> = requests
            .iter()
            .map(|r| prod_check::cache_key(&self.fingerprint, r))
            .collect();
        let mut index: std::collections::HashMap<&str, Vec<usize>> =
            std::collections::HashMap::new();
        let mut jobs = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let slot = index.entry(item.as_str()).or_default();
            if slot.is_empty() {
                jobs.push((item.clone(), requests[i].clone()));
            }
            slot.push(i);
        }
        q.submit_for(&jobs, Some(&self.fingerprint))?;
        let mut open: Vec<String> = jobs.into_iter().map(|(item, _)| item).collect();
        let mut stats = WorkStats::default();
        while !open.is_empty() {
            for (item, verdict, fingerprint) in q.verdicts_of(&open)? {
                // Only claims made for this fingerprint can be recorded, but a row is the
                // database's word: judge nothing from a verdict of another checker.
                let verdict = if fingerprint.as_deref() == Some(self.fingerprint.as_str()) {
                    verdict
                } else {
                    Verdict::infra(format!(
                        "queue job {item} was checked with another checker configuration"
                    ))
                };
                for &i in index.get(item.as_str()).into_iter().flatten() {
                    progress(i, &verdict);
                    out[i] = Some(verdict.clone());
                }
            }
            open.retain(|item| {
                index
                    .get(item.as_str())
                    .and_then(|v| v.first())
                    .is_some_and(|&i| out[i].is_none())
            });
            if open.is_empty() {
                break;
            }
            let worked = match &self.local {
                Some(c) => work_once(
                    &mut q,
                    c,
                    &self.fingerprint,
                    &self.worker,
                    &self.opts,
                    &mut stats,
                )?,
                None => false,
            };
            if !worked {
                std::thread::sleep(self.opts.poll);
            }
        }
        Ok(())
    }
}

impl<C: Checker> Checker for QueueChecker<C> {
    fn prover(&self) -> &'static str {
        self.prover
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    /// The hammer work this process did itself (other machines' workers count their own).
    fn hammer_stats(&self) -> Option<prod_check::HammerStats> {
        self.local.as_ref().and_then(|c| c.hammer_stats())
    }

    fn check_batch(
        &self,
        requests: &[CheckRequest],
        progress: prod_check::Progress<'_>,
    ) -> Vec<Verdict> {
        let mut out: Vec<Option<Verdict>> = vec![None; requests.len()];
        let err = self.run(requests, progress, &mut out).err();
        out.into_iter()
            .map(|v| {
                v.unwrap_or_else(|| {
                    Verdict::infra(format!(
                        "check queue: {}",
                        err.as_ref().map_or("no verdict".into(), |e| e.to_string())
                    ))
                })
            })
            .collect()
    }
}

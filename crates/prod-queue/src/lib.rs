//! Checking at scale: one round's checks in a PostgreSQL table that any number of workers, on
//! any number of machines, drain together (issue G). SQLite stays the embedded default for a
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
";

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

/// One run's jobs in a PostgreSQL database.
pub struct Queue {
    client: Client,
    run: String,
}

impl Queue {
    /// `url`: a libpq connection string or `postgres://` URL. Creates the table if needed.
    pub fn connect(url: &str, run: &str) -> Result<Queue> {
        let mut client = Client::connect(url, NoTls)?;
        client.batch_execute(SCHEMA)?;
        Ok(Queue { client, run: run.to_string() })
    }

    /// Add jobs (`item` names a job within the run; a job already there is left as it is, so
    /// submitting twice is harmless). Returns how many were new.
    pub fn submit(&mut self, jobs: &[(String, CheckRequest)]) -> Result<u64> {
        let mut tx = self.client.transaction()?;
        let stmt = tx.prepare(
            "INSERT INTO prod_check_jobs (run, item, position, request) VALUES ($1, $2, $3, $4)
             ON CONFLICT (run, item) DO NOTHING",
        )?;
        let mut added = 0;
        for (i, (item, req)) in jobs.iter().enumerate() {
            let v = serde_json::to_value(req).map_err(|e| QueueError::Data(e.to_string()))?;
            added += tx.execute(&stmt, &[&self.run, item, &(i as i64), &v])?;
        }
        tx.commit()?;
        Ok(added)
    }

    /// Claim up to `n` jobs: waiting ones, and claimed ones whose lease expired.
    pub fn claim(&mut self, worker: &str, n: usize, lease: Duration) -> Result<Vec<Job>> {
        let rows = self.client.query(
            "UPDATE prod_check_jobs SET state = 'claimed', claimed_by = $1, claimed_at = now(),
                    attempts = attempts + 1
             WHERE id IN (
                 SELECT id FROM prod_check_jobs
                 WHERE run = $2 AND (state = 'todo'
                       OR (state = 'claimed' AND claimed_at < now() - make_interval(secs => $3)))
                 ORDER BY id LIMIT $4
                 FOR UPDATE SKIP LOCKED)
             RETURNING id, item, request, attempts",
            &[&worker, &self.run, &lease.as_secs_f64(), &(n as i64)],
        )?;
        let mut jobs = Vec::with_capacity(rows.len());
        for r in rows {
            let v: serde_json::Value = r.get(2);
            let request = serde_json::from_value(v).map_err(|e| QueueError::Data(format!("job {}: {e}", r.get::<_, i64>(0))))?;
            jobs.push(Job { id: r.get(0), item: r.get(1), request, attempts: r.get(3) });
        }
        Ok(jobs)
    }

    /// Record a verdict; `false` when `worker` no longer holds the claim (nothing recorded).
    pub fn complete(&mut self, job: i64, worker: &str, verdict: &Verdict) -> Result<bool> {
        let v = serde_json::to_value(verdict).map_err(|e| QueueError::Data(e.to_string()))?;
        let n = self.client.execute(
            "UPDATE prod_check_jobs SET state = 'done', verdict = $3, done_by = $2,
                    completions = completions + 1
             WHERE id = $1 AND state = 'claimed' AND claimed_by = $2",
            &[&job, &worker, &v],
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

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkStats {
    pub claimed: usize,
    pub recorded: usize,
    /// Verdicts not recorded because the claim had expired and moved on.
    pub lost_claims: usize,
    pub released_infra: usize,
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
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions { batch: 8, lease: Duration::from_secs(900), max_attempts: 3, until_empty: true, poll: Duration::from_millis(500) }
    }
}

/// Drain the queue with `checker`.
pub fn work(queue: &mut Queue, checker: &dyn Checker, worker: &str, opts: &WorkOptions) -> Result<WorkStats> {
    let mut stats = WorkStats::default();
    loop {
        let jobs = queue.claim(worker, opts.batch.max(1), opts.lease)?;
        if jobs.is_empty() {
            let s = queue.status()?;
            if s.todo == 0 && (s.claimed == 0 || !opts.until_empty) {
                return Ok(stats);
            }
            // Others hold the rest: wait for them to finish or for their leases to expire.
            std::thread::sleep(opts.poll);
            continue;
        }
        stats.claimed += jobs.len();
        let requests: Vec<CheckRequest> = jobs.iter().map(|j| j.request.clone()).collect();
        let verdicts = checker.check_batch(&requests, &|_, _| {});
        for (job, v) in jobs.iter().zip(verdicts) {
            if matches!(v, Verdict::Infra { .. }) {
                if job.attempts < opts.max_attempts {
                    queue.release(job.id, worker)?;
                    stats.released_infra += 1;
                    continue;
                }
            }
            if queue.complete(job.id, worker, &v)? {
                stats.recorded += 1;
            } else {
                stats.lost_claims += 1;
            }
        }
    }
}

//! The load benchmark of `prod bench serve`: a bounded load test of `prod serve` on loopback, side by side with the
//! same kind of checks sent to the pool directly (no HTTP), in the same run.
//!
//! The server runs **in this process** (on `127.0.0.1:0`), on the very [`Pipeline`] (same warm
//! workers, same loaded context) that the direct path calls. Both paths therefore judge with the
//! same pool, and the difference between them is exactly what `prod serve` adds: the TCP round
//! trip, HTTP/1.1 framing, the JSON body both ways, admission and the hand-off to a blocking
//! thread. A child `prod serve` would have a pool of its own (twice the Coq processes on the same
//! cores, each pool warmed separately), so a difference in latency could come from either pool.
//! The client is hyper's HTTP/1.1 connection (one keep-alive connection per concurrent client,
//! as a trainer's connection pool would hold), on a tokio runtime of its own; the server keeps
//! its runtime, as in `prod serve`.
//!
//! Each check is one node per request (the latency a reward function sees per completion): a
//! cheap honest lemma (`lia`) in one shared context, so the pool's context reuse works. Names
//! carry a per-run nonce, so a verification cache configured in `prod.toml` never answers.
//! At each concurrency level: `count` checks directly (that many threads calling the
//! pipeline), then `--count` over HTTP (that many clients); checks per second, p50/p95/p99
//! latency, and the HTTP overhead at p50 (HTTP p50 − direct p50; target ≤ 1 ms).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use prod_check::{CheckRequest, Verdict};
use prod_core::{ConditionalProof, T0};
use serde_json::{json, Value};

use crate::{App, Limits, Metrics};
use prod_prover::{CheckerSettings, Pipeline, ProverKind, SetupError};

/// The HTTP overhead at p50 that `prod serve` aims to stay under, ms.
pub const TARGET_OVERHEAD_MS: f64 = 1.0;

/// Checks per concurrency level and path unless told otherwise.
pub const COUNT: usize = 200;
/// Concurrency levels unless told otherwise: one client, a few, and more than the workers.
pub const CONCURRENCY: [usize; 3] = [1, 8, 64];

/// What to measure (`prod bench serve`'s flags).
#[derive(Clone, Debug)]
pub struct BenchSettings {
    /// Checks per concurrency level and path (the same number directly and over HTTP).
    pub count: usize,
    /// Concurrency levels: clients (threads directly, connections over HTTP) sending at once.
    pub concurrency: Vec<usize>,
    /// The checker (Coq only: the checks are Coq lemmas).
    pub checker: CheckerSettings,
}

/// What one path measured at one concurrency level.
#[derive(Debug, Clone)]
pub struct Side {
    /// Checks answered.
    pub checks: usize,
    /// Of them, answered as expected (`proved`; `rejected` for the HTTP floor).
    pub proved: usize,
    /// Other answers (kind: message), a few.
    pub other: Vec<String>,
    /// Wall time of the whole level.
    pub wall: Duration,
    /// Per-check latency, sorted.
    latencies: Vec<Duration>,
}

/// One concurrency level: the same number of checks directly and over HTTP.
#[derive(Debug, Clone)]
pub struct Level {
    pub concurrency: usize,
    pub direct: Side,
    pub http: Side,
}

impl Level {
    /// What `prod serve` adds at p50: HTTP p50 − direct p50, ms.
    pub fn overhead_p50_ms(&self) -> f64 {
        self.http.pct_ms(50.0) - self.direct.pct_ms(50.0)
    }
}

/// The figures of one run.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Checks per level and path.
    pub count: usize,
    /// The pool's workers.
    pub workers: usize,
    /// The verdicts' prover name.
    pub prover: String,
    /// The HTTP layer alone (nodes answered without the pool).
    pub floor: Side,
    /// One row per concurrency level.
    pub levels: Vec<Level>,
}

impl BenchReport {
    /// Every check of every level proved, on both paths.
    pub fn all_proved(&self) -> bool {
        self.levels
            .iter()
            .all(|l| l.direct.proved == l.direct.checks && l.http.proved == l.http.checks)
    }

    /// The figures as one JSON object.
    pub fn json(&self) -> Value {
        let levels: Vec<Value> = self
            .levels
            .iter()
            .map(|l| {
                json!({"concurrency": l.concurrency, "direct": l.direct.json(),
                       "http": l.http.json(), "overhead_p50_ms": l.overhead_p50_ms()})
            })
            .collect();
        let floor = &self.floor;
        json!({"checks_per_level": self.count, "workers": self.workers, "prover": self.prover,
               "http_floor": {"requests": floor.checks, "p50_ms": floor.pct_ms(50.0),
                              "p95_ms": floor.pct_ms(95.0), "p99_ms": floor.pct_ms(99.0)},
               "target_overhead_p50_ms": TARGET_OVERHEAD_MS, "all_proved": self.all_proved(),
               "levels": levels})
    }

    /// The figures as a Markdown table, one row per concurrency level, and the HTTP floor.
    pub fn text(&self) -> String {
        let mut t = format!(
            "{} checks per level and path, one node per request, {} workers, {}\n\n",
            self.count, self.workers, self.prover
        );
        t += "| concurrency | direct checks/s | HTTP checks/s | direct p50 ms | HTTP p50 ms | direct p95 ms | HTTP p95 ms | direct p99 ms | HTTP p99 ms | HTTP overhead p50 ms |\n";
        t += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for l in &self.levels {
            let (d, h) = (&l.direct, &l.http);
            let pct = |p| (d.pct_ms(p), h.pct_ms(p));
            let ((d50, h50), (d95, h95), (d99, h99)) = (pct(50.0), pct(95.0), pct(99.0));
            t += &format!(
                "| {} | {:.1} | {:.1} | {d50:.1} | {h50:.1} | {d95:.1} | {h95:.1} | {d99:.1} | {h99:.1} | {:+.2} |\n",
                l.concurrency,
                d.per_s(),
                h.per_s(),
                l.overhead_p50_ms()
            );
        }
        let f = &self.floor;
        t + &format!(
            "\nHTTP floor (the HTTP layer alone: {} requests, one at a time, each node answered \
             without the pool): p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms; target for the HTTP \
             overhead at p50: <= {TARGET_OVERHEAD_MS} ms\n",
            f.checks,
            f.pct_ms(50.0),
            f.pct_ms(95.0),
            f.pct_ms(99.0)
        )
    }
}

impl Side {
    fn new(results: Vec<(Duration, Result<(), String>)>, wall: Duration) -> Side {
        let mut latencies: Vec<Duration> = results.iter().map(|r| r.0).collect();
        latencies.sort();
        let proved = results.iter().filter(|r| r.1.is_ok()).count();
        let other = results
            .into_iter()
            .filter_map(|r| r.1.err())
            .take(3)
            .collect();
        Side {
            checks: latencies.len(),
            proved,
            other,
            wall,
            latencies,
        }
    }

    /// Checks per second over the level's wall time.
    pub fn per_s(&self) -> f64 {
        self.checks as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Nearest-rank percentile, ms.
    pub fn pct_ms(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * self.latencies.len() as f64).ceil() as usize;
        let i = rank.clamp(1, self.latencies.len()) - 1;
        self.latencies[i].as_secs_f64() * 1000.0
    }

    fn json(&self) -> Value {
        json!({
            "checks": self.checks, "proved": self.proved, "wall_s": self.wall.as_secs_f64(),
            "checks_per_s": self.per_s(), "p50_ms": self.pct_ms(50.0),
            "p95_ms": self.pct_ms(95.0), "p99_ms": self.pct_ms(99.0),
        })
    }
}

/// The checks of one path at one level: distinct lemma names, one shared context.
fn nodes(nonce: &str, tag: &str, n: usize) -> Vec<(String, CheckRequest)> {
    (0..n)
        .map(|i| {
            let name = format!("prod_bench_{nonce}_{tag}_{i}");
            let k = i % 97;
            let statement = format!("Lemma {name} : forall n m : nat, n + m + {k} = {k} + m + n.");
            let proof = ConditionalProof::plain(T0::NoInvoke, " intros n m. lia.");
            let req = CheckRequest::new(IMPORTS, "", &statement, proof);
            (name, req)
        })
        .collect()
}

const IMPORTS: &str = "From Coq Require Import Arith Lia.";

fn verdict_ok(v: &Verdict) -> Result<(), String> {
    if v.is_proved() {
        Ok(())
    } else {
        Err(format!("{}: {}", v.kind(), v.message()))
    }
}

/// `c` threads calling the pipeline, one node per call.
fn direct(pipeline: &Pipeline, reqs: &[(String, CheckRequest)], c: usize) -> Side {
    let next = AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![]);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..c {
            s.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::SeqCst);
                let Some((_, req)) = reqs.get(j) else { break };
                let t = Instant::now();
                let out = pipeline.check(&[Ok(req.clone())], &|_, _, _, _| {});
                let el = t.elapsed();
                let r = out
                    .first()
                    .map_or(Err("no verdict".to_string()), |(v, _)| verdict_ok(v));
                if let Ok(mut v) = results.lock() {
                    v.push((el, r));
                }
            });
        }
    });
    let wall = t.elapsed();
    Side::new(results.into_inner().unwrap_or_default(), wall)
}

/// One request body per node, as a trainer's reward function would send it.
fn bodies(reqs: &[(String, CheckRequest)]) -> Vec<Bytes> {
    reqs.iter()
        .map(|(name, r)| {
            let node = json!({"id": name, "imports": r.imports, "context": r.context,
                              "statement": r.statement, "proof": r.proof.to_string()});
            Bytes::from(json!({ "nodes": [node] }).to_string())
        })
        .collect()
}

/// One client: a keep-alive connection sending the next body until none is left.
async fn client(
    addr: SocketAddr,
    bodies: Arc<Vec<Bytes>>,
    next: Arc<AtomicUsize>,
    want: &str,
) -> anyhow::Result<Vec<(Duration, Result<(), String>)>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp)).await?;
    tokio::spawn(conn);
    let host = addr.to_string();
    let mut out = vec![];
    loop {
        let j = next.fetch_add(1, Ordering::SeqCst);
        let Some(body) = bodies.get(j) else { break };
        let req = hyper::Request::post("/v1/check")
            .header(hyper::header::HOST, &host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(body.clone()))?;
        let t = Instant::now();
        sender.ready().await?;
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        let el = t.elapsed();
        let r = if status.is_success() {
            let v: Value = serde_json::from_slice(&bytes)?;
            match v["results"][0]["verdict"].as_str() {
                Some(k) if k == want => Ok(()),
                Some(k) => Err(format!("{k}: {}", v["results"][0]["message"])),
                None => Err(format!("no verdict: {v}")),
            }
        } else {
            Err(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
            ))
        };
        out.push((el, r));
    }
    Ok(out)
}

fn over_http(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    reqs: &[(String, CheckRequest)],
    c: usize,
) -> anyhow::Result<Side> {
    let bodies = Arc::new(bodies(reqs));
    let next = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let t = Instant::now();
        let tasks: Vec<_> = (0..c)
            .map(|_| tokio::spawn(client(addr, bodies.clone(), next.clone(), "proved")))
            .collect();
        let mut all = vec![];
        for task in tasks {
            all.extend(task.await??);
        }
        Ok::<_, anyhow::Error>(Side::new(all, t.elapsed()))
    })
}

/// Measure: the pipeline started from `s.checker`, `prod serve` on it in this process, then
/// each concurrency level directly and over HTTP. `note` hears progress lines. `Err`: a
/// prover other than Coq or a bad setting is bad input; anything else a failure.
pub fn bench(s: &BenchSettings, note: &dyn Fn(&str)) -> Result<BenchReport, SetupError> {
    if s.checker.prover != ProverKind::Coq {
        return Err(SetupError::BadInput(
            "prod bench serve checks Coq lemmas: --prover coq".into(),
        ));
    }
    let pipeline = Pipeline::open(&s.checker)?;
    measure(s, pipeline, note).map_err(|e| SetupError::Failure(format!("{e:#}")))
}

fn measure(
    s: &BenchSettings,
    pipeline: Pipeline,
    note: &dyn Fn(&str),
) -> anyhow::Result<BenchReport> {
    let workers = pipeline.workers();
    let prover = pipeline.prover().to_string();
    let nonce = run_nonce();
    note(&format!(
        "bench serve: {} checks per level and path, concurrency {:?}, {workers} workers ({prover})",
        s.count, s.concurrency
    ));
    let app = bench_app(pipeline, s.count);
    let server_rt = runtime("server")?;
    let client_rt = runtime("client")?;
    let (addr, stop_tx, server) = start_server(&server_rt, app.clone())?;
    warm_up(&app.pipeline, &nonce, workers)?;
    let floor = http_floor(&client_rt, addr, s.count)?;
    let levels = concurrency_levels(&app.pipeline, &client_rt, addr, &nonce, s, note)?;
    let _ = stop_tx.send(());
    server_rt
        .block_on(server)
        .map_err(|e| anyhow!("server task: {e}"))??;
    Ok(BenchReport {
        count: s.count,
        workers,
        prover,
        floor,
        levels,
    })
}

/// This run's nonce (time and process id), in every lemma name so that no cache answers.
fn run_nonce() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()) << 32
    )
}

/// The server's state: `prod serve`'s, on the pipeline the direct path calls too, admitting
/// a whole level's requests at once.
fn bench_app(pipeline: Pipeline, count: usize) -> Arc<App> {
    Arc::new(App {
        pipeline,
        prover: ProverKind::Coq,
        limits: Limits {
            max_body_bytes: 8 << 20,
            max_nodes: 256,
            max_queued: count.max(1024),
        },
        api_key: None,
        metrics: Metrics::default(),
    })
}

/// A multi-threaded tokio runtime (`what`: the server's or the client's).
fn runtime(what: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context(format!("cannot start the {what} runtime"))
}

type ServerTask = tokio::task::JoinHandle<anyhow::Result<()>>;

/// `prod serve` on `127.0.0.1:0` in `rt`: its address, the sender that stops it, its task.
fn start_server(
    rt: &tokio::runtime::Runtime,
    app: Arc<App>,
) -> anyhow::Result<(SocketAddr, tokio::sync::oneshot::Sender<()>, ServerTask)> {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .context("cannot listen on 127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(crate::serve_on(app, listener, async {
        let _ = stop_rx.await;
    }));
    Ok((addr, stop_tx, server))
}

/// Warm-up: every worker started with the context loaded (not counted).
fn warm_up(pipeline: &Pipeline, nonce: &str, workers: usize) -> anyhow::Result<()> {
    let warm = nodes(nonce, "warm", 2 * workers);
    let warm: Vec<_> = warm.into_iter().map(|(_, r)| Ok(r)).collect();
    let w = pipeline.check(&warm, &|_, _, _, _| {});
    if let Some((v, _)) = w.iter().find(|(v, _)| !v.is_proved()) {
        return Err(anyhow!(
            "warm-up check not proved: {}: {}",
            v.kind(),
            v.message()
        ));
    }
    Ok(())
}

/// The HTTP layer alone: one client sending nodes answered without the pool (a proof that is
/// not a conditional proof: `rejected` from the input), so the round trip is all HTTP.
fn http_floor(
    client_rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    count: usize,
) -> anyhow::Result<Side> {
    let floor_bodies: Vec<Bytes> = (0..count)
        .map(|i| {
            Bytes::from(
                json!({"nodes": [{"id": i, "statement": "Lemma x : True.", "proof": "not a proof"}]})
                    .to_string(),
            )
        })
        .collect();
    let floor = client_rt.block_on(async {
        let t = Instant::now();
        let r = client(
            addr,
            Arc::new(floor_bodies),
            Arc::new(AtomicUsize::new(0)),
            "rejected",
        )
        .await?;
        Ok::<_, anyhow::Error>(Side::new(r, t.elapsed()))
    })?;
    if floor.proved != floor.checks {
        return Err(anyhow!("HTTP floor: unexpected answers: {:?}", floor.other));
    }
    Ok(floor)
}

/// Each concurrency level: `count` checks directly, then `count` over HTTP.
fn concurrency_levels(
    pipeline: &Pipeline,
    client_rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    nonce: &str,
    s: &BenchSettings,
    note: &dyn Fn(&str),
) -> anyhow::Result<Vec<Level>> {
    let mut rows = vec![];
    for &c in &s.concurrency {
        let d = direct(pipeline, &nodes(nonce, &format!("d{c}"), s.count), c);
        let h = over_http(client_rt, addr, &nodes(nonce, &format!("h{c}"), s.count), c)?;
        note(&format!(
            "concurrency {c}: direct {:.1}/s p50 {:.1} ms, HTTP {:.1}/s p50 {:.1} ms",
            d.per_s(),
            d.pct_ms(50.0),
            h.per_s(),
            h.pct_ms(50.0)
        ));
        rows.push(Level {
            concurrency: c,
            direct: d,
            http: h,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(ms: &[u64], proved: usize) -> Side {
        let results = ms
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let r = if i < proved {
                    Ok(())
                } else {
                    Err(format!("failed: {i}"))
                };
                (Duration::from_millis(m), r)
            })
            .collect();
        Side::new(results, Duration::from_secs(2))
    }

    #[test]
    fn percentiles_are_nearest_rank_and_the_report_says_what_failed() {
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let s = side(&[40, 10, 30, 20], 4);
        assert!(near(s.pct_ms(50.0), 20.0) && near(s.pct_ms(99.0), 40.0));
        assert!(near(s.per_s(), 2.0));
        assert!(side(&[], 0).pct_ms(50.0).is_nan());
        let report = BenchReport {
            count: 4,
            workers: 1,
            prover: "coq 8.16.1".into(),
            floor: side(&[1, 1], 2),
            levels: vec![Level {
                concurrency: 1,
                direct: s.clone(),
                http: side(&[41, 11, 31, 21], 3),
            }],
        };
        assert!(!report.all_proved());
        assert_eq!(report.levels[0].http.other, ["failed: 3"]);
        let j = report.json();
        assert!(near(
            j["levels"][0]["overhead_p50_ms"].as_f64().unwrap(),
            1.0
        ));
        assert_eq!(j["all_proved"], false);
        assert_eq!(j["http_floor"]["requests"], 2);
    }

    #[test]
    fn a_prover_other_than_coq_is_bad_input() {
        let s = BenchSettings {
            count: 1,
            concurrency: vec![1],
            checker: CheckerSettings {
                prover: ProverKind::Isabelle,
                ..CheckerSettings::default()
            },
        };
        assert!(matches!(bench(&s, &|_| {}), Err(SetupError::BadInput(_))));
    }
}

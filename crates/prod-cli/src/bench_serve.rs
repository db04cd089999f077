//! `prod bench serve`: a bounded load test of `prod serve` on loopback, side by side with the
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
//! At each concurrency level: `--count` checks directly (that many threads calling the
//! pipeline), then `--count` over HTTP (that many clients); checks per second, p50/p95/p99
//! latency, and the HTTP overhead at p50 (HTTP p50 − direct p50; target ≤ 1 ms).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::Args;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use prod_check::{CheckRequest, Verdict};
use prod_core::{ConditionalProof, T0};
use serde_json::{json, Value};

use crate::check::{CheckerArgs, Pipeline};
use crate::serve::{App, Limits, Metrics};
use crate::{exit, ranges};
use prod_prover::ProverKind;

/// The HTTP overhead at p50 that `prod serve` aims to stay under, ms.
const TARGET_OVERHEAD_MS: f64 = 1.0;

#[derive(Args, Debug)]
pub struct BenchServeArgs {
    /// Checks per concurrency level and path (the same number directly and over HTTP).
    #[arg(long, default_value_t = 200, value_parser = ranges::positive_usize)]
    pub count: usize,
    /// Concurrency levels: clients (threads directly, connections over HTTP) sending at once.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64], value_parser = ranges::positive_usize)]
    pub concurrency: Vec<usize>,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub checker: CheckerArgs,
}

/// What one path measured at one concurrency level.
#[derive(Debug, Clone)]
struct Side {
    checks: usize,
    proved: usize,
    /// Non-`proved` answers (kind: message), a few.
    other: Vec<String>,
    wall: Duration,
    /// Per-check latency, sorted.
    latencies: Vec<Duration>,
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

    fn per_s(&self) -> f64 {
        self.checks as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// Nearest-rank percentile, ms.
    fn pct_ms(&self, p: f64) -> f64 {
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

pub fn run(a: BenchServeArgs) -> i32 {
    match bench(a) {
        Ok(code) => code,
        Err(e) => exit::failure(e),
    }
}

fn bench(a: BenchServeArgs) -> anyhow::Result<i32> {
    if a.checker.prover != ProverKind::Coq {
        return Ok(exit::bad_input(anyhow!(
            "prod bench serve checks Coq lemmas: --prover coq"
        )));
    }
    let pipeline = match Pipeline::open(&a.checker) {
        Ok(p) => p,
        Err(e) => return Ok(e.exit()),
    };
    let workers = pipeline.workers();
    let prover = pipeline.prover().to_string();
    let nonce = run_nonce();
    eprintln!(
        "bench serve: {} checks per level and path, concurrency {:?}, {workers} workers ({prover})",
        a.count, a.concurrency
    );
    let app = bench_app(pipeline, a.count);
    let server_rt = runtime("server")?;
    let client_rt = runtime("client")?;
    let (addr, stop_tx, server) = start_server(&server_rt, app.clone())?;
    warm_up(&app.pipeline, &nonce, workers)?;
    let floor = http_floor(&client_rt, addr, a.count)?;
    let rows = concurrency_levels(&app.pipeline, &client_rt, addr, &nonce, &a)?;
    let _ = stop_tx.send(());
    server_rt
        .block_on(server)
        .map_err(|e| anyhow!("server task: {e}"))??;

    let all_proved = rows
        .iter()
        .all(|(_, d, h)| d.proved == d.checks && h.proved == h.checks);
    if a.json {
        print_json(&a, workers, &prover, &floor, all_proved, &rows);
    } else {
        print_table(&a, workers, &prover, &floor, &rows);
    }
    for (c, d, h) in &rows {
        for (path, s) in [("direct", d), ("HTTP", h)] {
            for o in &s.other {
                eprintln!("concurrency {c}, {path}: not proved: {o}");
            }
        }
    }
    Ok(if all_proved { 0 } else { 1 })
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
    let server = rt.spawn(crate::serve::serve_on(app, listener, async {
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

/// Each concurrency level: `--count` checks directly, then `--count` over HTTP.
fn concurrency_levels(
    pipeline: &Pipeline,
    client_rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    nonce: &str,
    a: &BenchServeArgs,
) -> anyhow::Result<Vec<(usize, Side, Side)>> {
    let mut rows = vec![];
    for &c in &a.concurrency {
        let d = direct(pipeline, &nodes(nonce, &format!("d{c}"), a.count), c);
        let h = over_http(client_rt, addr, &nodes(nonce, &format!("h{c}"), a.count), c)?;
        eprintln!(
            "concurrency {c}: direct {:.1}/s p50 {:.1} ms, HTTP {:.1}/s p50 {:.1} ms",
            d.per_s(),
            d.pct_ms(50.0),
            h.per_s(),
            h.pct_ms(50.0)
        );
        rows.push((c, d, h));
    }
    Ok(rows)
}

/// The figures as one JSON object.
fn print_json(
    a: &BenchServeArgs,
    workers: usize,
    prover: &str,
    floor: &Side,
    all_proved: bool,
    rows: &[(usize, Side, Side)],
) {
    let levels: Vec<Value> = rows
        .iter()
        .map(|(c, d, h)| {
            json!({"concurrency": c, "direct": d.json(), "http": h.json(),
                   "overhead_p50_ms": h.pct_ms(50.0) - d.pct_ms(50.0)})
        })
        .collect();
    println!(
        "{}",
        json!({"checks_per_level": a.count, "workers": workers, "prover": prover,
               "http_floor": {"requests": floor.checks, "p50_ms": floor.pct_ms(50.0),
                              "p95_ms": floor.pct_ms(95.0), "p99_ms": floor.pct_ms(99.0)},
               "target_overhead_p50_ms": TARGET_OVERHEAD_MS, "all_proved": all_proved,
               "levels": levels})
    );
}

/// The figures as a Markdown table, one row per concurrency level, and the HTTP floor.
fn print_table(
    a: &BenchServeArgs,
    workers: usize,
    prover: &str,
    floor: &Side,
    rows: &[(usize, Side, Side)],
) {
    println!(
        "{} checks per level and path, one node per request, {workers} workers, {prover}\n",
        a.count
    );
    println!("| concurrency | direct checks/s | HTTP checks/s | direct p50 ms | HTTP p50 ms | direct p95 ms | HTTP p95 ms | direct p99 ms | HTTP p99 ms | HTTP overhead p50 ms |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, d, h) in rows {
        println!(
            "| {c} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.2} |",
            d.per_s(),
            h.per_s(),
            d.pct_ms(50.0),
            h.pct_ms(50.0),
            d.pct_ms(95.0),
            h.pct_ms(95.0),
            d.pct_ms(99.0),
            h.pct_ms(99.0),
            h.pct_ms(50.0) - d.pct_ms(50.0)
        );
    }
    println!(
        "\nHTTP floor (the HTTP layer alone: {} requests, one at a time, each node answered \
         without the pool): p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms; target for the HTTP \
         overhead at p50: <= {TARGET_OVERHEAD_MS} ms",
        floor.checks,
        floor.pct_ms(50.0),
        floor.pct_ms(95.0),
        floor.pct_ms(99.0)
    );
}

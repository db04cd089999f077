//! `prod serve`: the checker as an HTTP service, for RL trainers (verl, OpenRLHF, TRL) whose
//! reward is an HTTP endpoint or a Python function calling one.
//!
//! The service is a thin shell around `prod check`'s [`Pipeline`] (same node schema, same rules,
//! same cache, same verdict JSON): `POST /v1/check` and `POST /v1/tree` (nodes → verdicts, or
//! global verdicts through the tree solver), `POST /v1/assemble` (a root's complete proof,
//! re-checked cold), `GET /health`, `GET /metrics` (Prometheus text).
//! Bounds: body size, nodes per request, nodes queued (429 with `Retry-After` when full); the
//! worker pool bounds the checks that run at once. Security defaults: loopback only unless an
//! API key is set (`Authorization: Bearer KEY` on every route but `/health`). SIGINT/SIGTERM stop
//! accepting and finish the accepted checks. Endpoints and examples: docs/serve.md.

mod canary;
mod http;
mod metrics;
mod tree;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;

use crate::check::{CheckerArgs, Pipeline};
use crate::{exit, ranges};
use prod_prover::ProverKind;

pub use metrics::Metrics;

/// Serve the checker over HTTP (reward endpoint for RL trainers): /v1/check, /v1/tree, /v1/assemble.
///
/// Routes: POST /v1/check, POST /v1/tree, POST /v1/assemble, GET /health, GET /metrics.
///
/// `POST /v1/check` takes {"nodes": [NODE, …]} where NODE is a line of `prod check`'s input
/// and answers {"results": [VERDICT, …]} in the same order (`prod check --json`'s lines, with
/// the node's own extra fields); with `Accept: application/x-ndjson` or `?stream=1` one line
/// per node as it finishes, with its "index". `POST /v1/tree` adds "globally_correct" (the
/// tree solver); `POST /v1/assemble` {"nodes": […], "root": INDEX} adds the root's complete
/// proof and its cold re-check ("proved"). Only loopback addresses without an API key.
/// Details: docs/serve.md.
///
/// Example: prod serve --workers 4 --cache verdicts.sqlite
/// Example: PROD_API_KEY=secret prod serve --addr 0.0.0.0:8537
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Address to listen on (port 0: any free port; the bound address is printed on stderr).
    #[arg(long, default_value = "127.0.0.1:8537")]
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer KEY` (all routes but /health). Needed for an address
    /// that is not loopback.
    #[arg(long, env = "PROD_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Largest request body, MiB.
    #[arg(long, default_value_t = 8, value_parser = ranges::positive_usize)]
    pub max_body_mb: usize,
    /// Most nodes in one request.
    #[arg(long, default_value_t = 256, value_parser = ranges::positive_usize)]
    pub max_nodes: usize,
    /// Most nodes admitted and not yet judged, over all requests; beyond it: 429.
    #[arg(long, default_value_t = 1024, value_parser = ranges::positive_usize)]
    pub max_queued: usize,
    /// Keep no verdicts. Without --cache (or `[check] cache`) the service keeps the newest
    /// 100,000 verdicts in memory and answers a node it checked before from them (an RL
    /// trainer samples the same completion many times); infra verdicts are never kept.
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
    #[command(flatten)]
    pub checker: CheckerArgs,
}

/// How many verdicts the service keeps in memory when no cache file is given: about 50 MB.
pub const MEMORY_CACHE_ENTRIES: u32 = 100_000;

/// The request bounds.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_nodes: usize,
    pub max_queued: usize,
}

/// What every handler shares.
pub struct App {
    pub pipeline: Pipeline,
    pub prover: ProverKind,
    pub limits: Limits,
    pub api_key: Option<String>,
    pub metrics: Metrics,
}

/// The settings, checked before any prover starts: `Err` is bad input (exit 2).
fn settings(a: &ServeArgs) -> anyhow::Result<(Option<String>, Limits)> {
    let key = a.api_key.clone();
    if key.as_deref().is_some_and(|k| k.trim().is_empty()) {
        return Err(anyhow!("--api-key (or PROD_API_KEY) is empty"));
    }
    if key.is_none() && !a.addr.ip().is_loopback() {
        return Err(anyhow!(
            "refusing to listen on {} (not a loopback address) without an API key: pass \
             --api-key KEY or set PROD_API_KEY",
            a.addr
        ));
    }
    if a.max_nodes > a.max_queued {
        return Err(anyhow!(
            "--max-nodes ({}) is larger than --max-queued ({}): such a request could never be admitted",
            a.max_nodes,
            a.max_queued
        ));
    }
    let max_body_bytes = a
        .max_body_mb
        .checked_mul(1 << 20)
        .ok_or_else(|| anyhow!("--max-body-mb {} is too large", a.max_body_mb))?;
    let limits = Limits {
        max_body_bytes,
        max_nodes: a.max_nodes,
        max_queued: a.max_queued,
    };
    Ok((key, limits))
}

pub fn run(a: ServeArgs) -> i32 {
    let (api_key, limits) = match settings(&a) {
        Ok(s) => s,
        Err(e) => return exit::bad_input(e),
    };
    let mut pipeline = match Pipeline::open(&a.checker) {
        Ok(p) => p,
        Err(e) => return e.exit(),
    };
    if !a.no_cache {
        if let Err(e) = pipeline.keep_verdicts_in_memory(MEMORY_CACHE_ENTRIES) {
            return exit::failure(anyhow!(e));
        }
    }
    let app = Arc::new(App {
        pipeline,
        prover: a.checker.prover,
        limits,
        api_key,
        metrics: Metrics::default(),
    });
    canary::start_self_check(app.clone());
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::failure(anyhow!("cannot start the runtime: {e}")),
    };
    let served = rt.block_on(serve(app.clone(), a.addr));
    // Dropping the runtime waits for the checks still running (a streamed request's client
    // may have gone; its verdicts still reach the cache).
    drop(rt);
    app.pipeline.close();
    match served {
        Ok(()) => 0,
        Err(e) => exit::failure(e),
    }
}

async fn serve(app: Arc<App>, addr: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    eprintln!(
        "prod serve: listening on http://{bound} ({}, {} workers{})",
        app.pipeline.prover(),
        app.pipeline.workers(),
        if app.api_key.is_some() {
            ", API key required"
        } else {
            ""
        }
    );
    serve_on(app, listener, shutdown_signal()).await?;
    eprintln!("prod serve: stopped");
    Ok(())
}

/// Serve on a bound listener until `stop` resolves (then answer the accepted requests).
/// `prod serve` stops on a signal, `prod bench serve` when its load is done.
pub(crate) async fn serve_on(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use axum::serve::ListenerExt as _;
    // Without TCP_NODELAY a response written in two segments can wait for the client's
    // delayed ACK (tens of ms on Linux); one small JSON answer per check must not.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, http::router(app))
        .with_graceful_shutdown(stop)
        .await
        .map_err(|e| anyhow!("server: {e}"))
}

/// SIGINT or SIGTERM: stop accepting; accepted requests are answered.
async fn shutdown_signal() {
    let int = tokio::signal::ctrl_c();
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = int => {},
        _ = term => {},
    }
    eprintln!("prod serve: shutting down; finishing accepted checks");
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> ServeArgs {
        let mut v = vec!["t"];
        v.extend(args);
        Cli::try_parse_from(v).unwrap().serve
    }

    #[test]
    fn public_address_needs_a_key_and_limits_are_consistent() {
        let a = parse(&[]);
        assert_eq!(a.addr.to_string(), "127.0.0.1:8537");
        let (key, limits) = settings(&a).unwrap();
        assert!(key.is_none() || std::env::var_os("PROD_API_KEY").is_some());
        assert_eq!(limits.max_body_bytes, 8 << 20);
        let e = settings(&parse(&["--addr", "0.0.0.0:8537"]));
        if std::env::var_os("PROD_API_KEY").is_none() {
            assert!(format!("{:#}", e.unwrap_err()).contains("API key"));
        }
        assert!(settings(&parse(&["--addr", "0.0.0.0:1", "--api-key", "k"])).is_ok());
        assert!(settings(&parse(&["--api-key", " "])).is_err());
        assert!(settings(&parse(&["--max-nodes", "10", "--max-queued", "5"])).is_err());
    }
}

//! The checker as an HTTP service (`prod serve`), for RL trainers (verl, OpenRLHF, TRL) whose
//! reward is an HTTP endpoint or a Python function calling one, and its load benchmark
//! ([`bench`], `prod bench serve`).
//!
//! The service is a thin shell around prod-prover's [`Pipeline`], the one `prod check` runs
//! (same node schema, same rules, same cache, same verdict JSON): `POST /v1/check` and `POST /v1/tree` (nodes → verdicts, or
//! global verdicts through the tree solver), `POST /v1/assemble` (a root's complete proof,
//! re-checked cold), `GET /health`, `GET /metrics` (Prometheus text).
//! Bounds: body size, nodes per request, nodes queued (429 with `Retry-After` when full); the
//! worker pool bounds the checks that run at once. Security defaults: loopback only unless an
//! API key is set (`Authorization: Bearer KEY` on every route but `/health`). SIGINT/SIGTERM stop
//! accepting and finish the accepted checks. Endpoints and examples: docs/serve.md.

pub mod bench;
mod canary;
mod http;
mod metrics;
mod tree;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::anyhow;
use prod_prover::{CheckerSettings, Pipeline, ProverKind, SetupError};

pub use metrics::Metrics;

/// How the service runs (`prod serve`'s flags): where it listens, who may call it, its bounds,
/// and the checker behind it.
#[derive(Clone, Debug)]
pub struct ServeSettings {
    /// Address to listen on (port 0: any free port; the bound address is printed on stderr).
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer KEY` (all routes but /health); needed for an address
    /// that is not loopback.
    pub api_key: Option<String>,
    /// Largest request body, MiB.
    pub max_body_mb: usize,
    /// Most nodes in one request.
    pub max_nodes: usize,
    /// Most nodes admitted and not yet judged, over all requests; beyond it: 429.
    pub max_queued: usize,
    /// Keep no verdicts (else, without a cache file, the newest [`MEMORY_CACHE_ENTRIES`] in
    /// memory).
    pub no_cache: bool,
    /// The checker.
    pub checker: CheckerSettings,
}

/// The address the service listens on unless told otherwise.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8537";
/// The default of [`ServeSettings::max_body_mb`].
pub const DEFAULT_MAX_BODY_MB: usize = 8;
/// The default of [`ServeSettings::max_nodes`].
pub const DEFAULT_MAX_NODES: usize = 256;
/// The default of [`ServeSettings::max_queued`].
pub const DEFAULT_MAX_QUEUED: usize = 1024;

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            addr: SocketAddr::from(([127, 0, 0, 1], 8537)),
            api_key: None,
            max_body_mb: DEFAULT_MAX_BODY_MB,
            max_nodes: DEFAULT_MAX_NODES,
            max_queued: DEFAULT_MAX_QUEUED,
            no_cache: false,
            checker: CheckerSettings::default(),
        }
    }
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

/// The settings, checked before any prover starts: `Err` is bad input.
fn settings(a: &ServeSettings) -> anyhow::Result<(Option<String>, Limits)> {
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

/// Serve until SIGINT or SIGTERM, then answer the accepted requests and stop. `Err`: the
/// settings are bad input, or the checker, the runtime or the listener would not start.
pub fn run(a: ServeSettings) -> Result<(), SetupError> {
    let (api_key, limits) = settings(&a).map_err(|e| SetupError::BadInput(format!("{e:#}")))?;
    let mut pipeline = Pipeline::open(&a.checker)?;
    if !a.no_cache {
        pipeline
            .keep_verdicts_in_memory(MEMORY_CACHE_ENTRIES)
            .map_err(|e| SetupError::Failure(e.to_string()))?;
    }
    let app = Arc::new(App {
        pipeline,
        prover: a.checker.prover,
        limits,
        api_key,
        metrics: Metrics::default(),
    });
    canary::start_self_check(app.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| SetupError::Failure(format!("cannot start the runtime: {e}")))?;
    let served = rt.block_on(serve(app.clone(), a.addr));
    // Dropping the runtime waits for the checks still running (a streamed request's client
    // may have gone; its verdicts still reach the cache).
    drop(rt);
    if let Err(e) = app.pipeline.close() {
        eprintln!("warning: {e}");
    }
    served.map_err(|e| SetupError::Failure(format!("{e:#}")))
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
pub async fn serve_on(
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

    fn with(f: impl FnOnce(&mut ServeSettings)) -> ServeSettings {
        let mut s = ServeSettings::default();
        f(&mut s);
        s
    }

    #[test]
    fn public_address_needs_a_key_and_limits_are_consistent() {
        let a = ServeSettings::default();
        assert_eq!(a.addr.to_string(), DEFAULT_ADDR);
        let (key, limits) = settings(&a).unwrap();
        assert!(key.is_none());
        assert_eq!(limits.max_body_bytes, 8 << 20);
        let public = with(|s| s.addr = "0.0.0.0:8537".parse().unwrap());
        assert!(format!("{:#}", settings(&public).unwrap_err()).contains("API key"));
        let keyed = with(|s| {
            s.addr = "0.0.0.0:1".parse().unwrap();
            s.api_key = Some("k".into());
        });
        assert!(settings(&keyed).is_ok());
        assert!(settings(&with(|s| s.api_key = Some(" ".into()))).is_err());
        let cramped = with(|s| {
            s.max_nodes = 10;
            s.max_queued = 5;
        });
        assert!(settings(&cramped).is_err());
        assert!(settings(&with(|s| s.max_body_mb = usize::MAX)).is_err());
    }

    #[test]
    fn bad_settings_are_bad_input_before_any_prover_starts() {
        let public = with(|s| s.addr = "0.0.0.0:8537".parse().unwrap());
        assert!(matches!(run(public), Err(SetupError::BadInput(_))));
    }
}

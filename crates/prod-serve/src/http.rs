//! The service's routes: request parsing and bounds, admission to the queue, JSON errors.
//!
//! Every refused request gets a 4xx status and a JSON body `{"error": "...", ...}`; nothing a
//! client sends can panic a handler (bodies are parsed into `serde_json::Value` first, each
//! node then on its own so the error names its index).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use prod_check::{CheckRequest, Verdict};
use prod_core::ProofLanguage;
use serde::Deserialize;
use serde_json::{json, Value};

use super::App;
use prod_prover::node::{echo_json, node_input, verdict_json, Echo, InputNode, NodeLine};

pub fn router(app: Arc<App>) -> Router {
    let protected = Router::new()
        .route("/v1/check", post(check))
        .route("/v1/tree", post(tree))
        .route("/v1/assemble", post(assemble))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(app.clone(), require_key));
    Router::new()
        .route("/health", get(health))
        .merge(protected)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed on this route",
            )
        })
        .layer(DefaultBodyLimit::max(app.limits.max_body_bytes))
        .with_state(app)
}

/// A refused request: status, JSON body, and `Retry-After` for 429.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: Value,
    retry_after_s: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: json!({"error": message.into()}),
            retry_after_s: None,
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(self.body)).into_response();
        if let Some(s) = self.retry_after_s {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

async fn require_key(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    if let Some(key) = &app.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same_secret(given.trim().as_bytes(), key.as_bytes()) {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong API key (Authorization: Bearer KEY)",
            )
            .into_response();
        }
    }
    next.run(req).await
}

/// Comparison whose time does not depend on where the strings differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

async fn health(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "prover": app.pipeline.prover(),
        "workers": app.pipeline.workers(),
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(app.pipeline.workers()),
    )
}

/// `?stream=1`.
#[derive(Deserialize)]
pub struct CheckQuery {
    stream: Option<String>,
}

/// The request body of `/v1/check` and `/v1/tree`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body_ {
    nodes: Vec<Value>,
}

/// The request body of `/v1/assemble`: the nodes and which of them is the root.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AssembleBody {
    nodes: Vec<Value>,
    /// Index of the root in `nodes` (default 0).
    #[serde(default)]
    root: usize,
}

/// The body's bytes; one over `--max-body-mb` is 413 with a message naming the limit.
fn read_body(body: Result<Bytes, BytesRejection>, app: &App) -> Result<Bytes, ApiError> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            let mb = app.limits.max_body_bytes >> 20;
            ApiError::new(
                e.status(),
                format!(
                    "the body is larger than {mb} MiB ({} bytes, --max-body-mb {mb})",
                    app.limits.max_body_bytes
                ),
            )
        } else {
            ApiError::new(e.status(), e.body_text())
        }
    })
}

/// The nodes of a body, each parsed on its own: an error names the node's index (and the
/// unknown field, if that is what is wrong).
fn parse_nodes(
    bytes: Bytes,
    max: usize,
    lang: &dyn ProofLanguage,
) -> Result<Vec<InputNode>, ApiError> {
    let body: Body_ = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad(format!("the body is not {{\"nodes\": [...]}}: {e}")))?;
    node_values(body.nodes, max, lang)
}

/// Each node's proof is parsed in the prover's language `lang` (markers only outside its
/// strings and comments).
fn node_values(
    nodes: Vec<Value>,
    max: usize,
    lang: &dyn ProofLanguage,
) -> Result<Vec<InputNode>, ApiError> {
    let body = Body_ { nodes };
    if body.nodes.len() > max {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} nodes in one request; at most {max} (--max-nodes)",
                body.nodes.len()
            ),
        ));
    }
    body.nodes
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<NodeLine>(v)
                .map(|n| node_input(n, lang))
                .map_err(|e| node_error(i, &e))
        })
        .collect()
}

fn node_error(index: usize, e: &serde_json::Error) -> ApiError {
    let msg = e.to_string();
    let mut body = json!({"error": format!("node {index}: {msg}"), "index": index});
    if let Some(field) = msg
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        body["field"] = json!(field);
    }
    ApiError {
        status: StatusCode::BAD_REQUEST,
        body,
        retry_after_s: None,
    }
}

/// Nodes admitted to the queue; what is not yet judged leaves the count when dropped.
struct Admission {
    app: Arc<App>,
    remaining: AtomicU64,
}

impl Admission {
    fn new(app: &Arc<App>, n: usize) -> Result<Self, ApiError> {
        let m = &app.metrics;
        let n = n as u64;
        let max = app.limits.max_queued as u64;
        let admitted = m
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| {
                (q + n <= max).then_some(q + n)
            });
        if let Err(queued) = admitted {
            m.refused.fetch_add(1, Ordering::Relaxed);
            let mut e = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("the queue is full ({queued} of {max} nodes queued); retry later"),
            );
            e.retry_after_s = Some(retry_after_s(queued, app));
            return Err(e);
        }
        m.in_flight.fetch_add(1, Ordering::SeqCst);
        Ok(Admission {
            app: app.clone(),
            remaining: AtomicU64::new(n),
        })
    }

    /// One node judged.
    fn one_done(&self) {
        let took = self
            .remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| r.checked_sub(1));
        if took.is_ok() {
            self.app.metrics.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let m = &self.app.metrics;
        m.queued
            .fetch_sub(self.remaining.swap(0, Ordering::SeqCst), Ordering::SeqCst);
        m.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Seconds until the queue has room, estimated from the mean check time (1 s before any).
fn retry_after_s(queued: u64, app: &App) -> u64 {
    let mean = app.metrics.mean_latency().unwrap_or(Duration::from_secs(1));
    let workers = app.pipeline.workers().max(1) as f64;
    (queued as f64 * mean.as_secs_f64() / workers)
        .ceil()
        .clamp(1.0, 300.0) as u64
}

/// Judge the admitted nodes on a blocking thread (the pool blocks); `each` hears every verdict.
fn judge(
    adm: Admission,
    requests: Vec<Result<CheckRequest, Verdict>>,
    each: impl Fn(usize, &Verdict, Duration) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<Vec<(Verdict, Duration)>> {
    tokio::task::spawn_blocking(move || {
        let app = adm.app.clone();
        app.pipeline.check(&requests, &|i, v, t, origin| {
            app.metrics.record(v, t, origin);
            adm.one_done();
            each(i, v, t);
        })
    })
}

fn wants_stream(headers: &HeaderMap, query: &Result<Query<CheckQuery>, QueryRejection>) -> bool {
    let by_query =
        matches!(query, Ok(Query(CheckQuery { stream: Some(s) })) if s == "1" || s == "true");
    let by_accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    by_query || by_accept
}

/// A node request's body read, parsed and admitted: its nodes' echoes and check requests, and
/// the prover's name the answers carry (`/v1/check`, `/v1/tree`).
struct Admitted {
    adm: Admission,
    ids: Vec<Echo>,
    requests: Vec<Result<CheckRequest, Verdict>>,
    prover: String,
}

fn admitted(app: &Arc<App>, body: Result<Bytes, BytesRejection>) -> Result<Admitted, ApiError> {
    let nodes = parse_nodes(
        read_body(body, app)?,
        app.limits.max_nodes,
        app.prover.language(),
    )?;
    let adm = Admission::new(app, nodes.len())?;
    let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
    let prover = app.pipeline.prover().to_string();
    Ok(Admitted {
        adm,
        ids,
        requests,
        prover,
    })
}

async fn check(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    query: Result<Query<CheckQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    if let Err(e) = &query {
        return Err(ApiError::bad(format!(
            "bad query string: {}",
            e.body_text()
        )));
    }
    let Admitted {
        adm,
        ids,
        requests,
        prover,
    } = admitted(&app, body)?;
    if wants_stream(&headers, &query) {
        return Ok(stream(adm, ids, requests, prover));
    }
    let results = judged(adm, requests.clone()).await?;
    super::canary::watch(&app, &requests, &results);
    let results: Vec<Value> = ids
        .iter()
        .zip(&results)
        .map(|(id, (v, t))| echo_json(id, v, *t, Some(&prover)))
        .collect();
    Ok(Json(json!({"results": results})).into_response())
}

/// One JSON line per node as it finishes, with its `index`.
fn stream(
    adm: Admission,
    ids: Vec<Echo>,
    requests: Vec<Result<CheckRequest, Verdict>>,
    prover: String,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let sender = tx.clone();
    let (app, watched) = (adm.app.clone(), requests.clone());
    let task = judge(adm, requests, move |i, v, t| {
        let mut line = echo_json(&ids[i], v, t, Some(&prover));
        line["index"] = json!(i);
        let _ = sender.send(line);
    });
    tokio::spawn(async move {
        match task.await {
            Ok(verdicts) => super::canary::watch(&app, &watched, &verdicts),
            Err(e) => {
                let _ = tx.send(json!({"error": format!("check failed: {e}")}));
            }
        }
    });
    let lines = futures_util::stream::unfold(rx, |mut rx| async move {
        let v = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(format!("{v}\n"))), rx))
    });
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response()
}

/// Every verdict of the admitted nodes, in order.
async fn judged(
    adm: Admission,
    requests: Vec<Result<CheckRequest, Verdict>>,
) -> Result<Vec<(Verdict, Duration)>, ApiError> {
    judge(adm, requests, |_, _, _| {}).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("check failed: {e}"),
        )
    })
}

/// Per node: its verdict line with `globally_correct`.
fn tree_results(
    ids: &[Echo],
    verdicts: &[(Verdict, Duration)],
    global: &[Option<bool>],
    prover: &str,
) -> Vec<Value> {
    ids.iter()
        .zip(verdicts)
        .zip(global)
        .map(|((id, (v, t)), g)| {
            let mut r = echo_json(id, v, *t, Some(prover));
            r["globally_correct"] = json!(g);
            r
        })
        .collect()
}

/// `POST /v1/tree`: every node checked as by `/v1/check`, then global correctness by the tree
/// solver (least fixed point). Children are matched within the same imports and context.
async fn tree(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let Admitted {
        adm,
        ids,
        requests,
        prover,
    } = admitted(&app, body)?;
    let verdicts = judged(adm, requests.clone()).await?;
    let fin = app.pipeline.final_checker();
    let j = super::tree::judge_request(app.prover, fin.as_ref(), &requests, &verdicts, None);
    super::canary::raise(&app, &requests, &j.alarms);
    let global = j.global_bools();
    let results = tree_results(&ids, &verdicts, &global, &prover);
    Ok(Json(json!({"results": results})).into_response())
}

/// `POST /v1/assemble`: as `/v1/tree`, then the root's complete proof (child lemmas first) and
/// its cold re-check by the prover (`coqc` + `coqchk` in a fresh sandbox, or a fresh Isabelle
/// session). `"proved": true` only when that re-check says so; an infra re-check is `null`.
async fn assemble(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = read_body(body, &app)?;
    let body: AssembleBody = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad(format!(
            "the body is not {{\"nodes\": [...], \"root\": INDEX}}: {e}"
        ))
    })?;
    let root = body.root;
    let nodes = node_values(body.nodes, app.limits.max_nodes, app.prover.language())?;
    if root >= nodes.len() {
        return Err(ApiError::bad(format!(
            "root {root}: there are {} nodes",
            nodes.len()
        )));
    }
    let adm = Admission::new(&app, nodes.len())?;
    let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
    let prover = app.pipeline.prover().to_string();
    let verdicts = judged(adm, requests.clone()).await?;
    let app2 = app.clone();
    let (verdicts, j) = tokio::task::spawn_blocking(move || {
        let fin = app2.pipeline.final_checker();
        let j =
            super::tree::judge_request(app2.prover, fin.as_ref(), &requests, &verdicts, Some(root));
        super::canary::raise(&app2, &requests, &j.alarms);
        (verdicts, j)
    })
    .await
    .map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("assembly failed: {e}"),
        )
    })?;
    let global = j.global_bools();
    let (assembled, final_check, why_not) = match j.root {
        Some(r) => match r.assembled {
            Ok(text) => (Some(text), r.final_check, None),
            Err(why) => (None, None, Some(why)),
        },
        None => (None, None, None),
    };
    let results = tree_results(&ids, &verdicts, &global, &prover);
    let (final_json, proved, file) = match &final_check {
        Some((v, file)) => (
            verdict_json(&ids[root].id, v, Duration::ZERO, Some(&prover)),
            match v {
                Verdict::Infra { .. } => Value::Null,
                v => json!(v.is_proved()),
            },
            json!(file),
        ),
        // An undetermined root (an infra verdict below it) is not a failed proof.
        None => (
            Value::Null,
            global[root].map_or(Value::Null, |_| json!(false)),
            Value::Null,
        ),
    };
    Ok(Json(json!({
        "results": results,
        "root": root,
        "assembled": assembled,
        "checked_text": file,
        "final": final_json,
        "proved": proved,
        "why_not": why_not,
    }))
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    const COQ: &dyn ProofLanguage = &prod_coq::CoqLanguage;

    #[test]
    fn node_errors_name_index_and_field() {
        let body = Bytes::from(
            r#"{"nodes": [{"id": 1, "statement": "s", "proof": "<no_invoke>"},
                          {"id": 2, "statement": "s", "proof": "p", "contxt": ""}]}"#,
        );
        let e = parse_nodes(body, 10, COQ).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.body["index"], 1);
        assert_eq!(e.body["field"], "contxt");
        assert!(
            e.body["error"]
                .as_str()
                .unwrap()
                .contains("did you mean `context`?"),
            "{}",
            e.body
        );
        // The caller's own fields are kept for the results.
        let body = Bytes::from(
            r#"{"nodes": [{"id": 1, "statement": "s", "proof": "<no_invoke>", "custom_id": "c"}]}"#,
        );
        let nodes = parse_nodes(body, 10, COQ).unwrap();
        assert_eq!(nodes[0].0.extra["custom_id"], "c");
        for bad in [
            &b"\xff\x00"[..],
            b"{\"nodes\": [",
            b"[]",
            b"{\"nodes\": 1e999}",
            b"{\"nodes\": [{\"id\": 1, \"statement\": 5, \"proof\": \"\"}]}",
            b"{\"nodes\": [], \"x\": 1}",
        ] {
            let e = parse_nodes(Bytes::from_static(bad), 10, COQ).unwrap_err();
            assert_eq!(
                e.status,
                StatusCode::BAD_REQUEST,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let many = format!("{{\"nodes\": [{}]}}", ["{}"; 11].join(","));
        let e = parse_nodes(Bytes::from(many), 10, COQ).unwrap_err();
        assert_eq!(e.status, StatusCode::PAYLOAD_TOO_LARGE);
    }

    proptest::proptest! {
        /// Any body, bytes or JSON of any shape: a node list or a 4xx, never a panic.
        #[test]
        fn fuzzed_bodies_get_a_client_error(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            shape in proptest::sample::select(vec![
                "{\"nodes\": [X]}", "{\"nodes\": X}", "X", "{\"nodes\": [{\"id\": X, \"statement\": X, \"proof\": X}]}",
                "{\"nodes\": [{\"id\": 1, \"statement\": \"s\", \"proof\": X, \"imports\": X}]}",
            ]),
        ) {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            for body in [bytes.clone(), shape.replace('X', &text).into_bytes(),
                         shape.replace('X', &serde_json::to_string(&text).unwrap()).into_bytes()] {
                match parse_nodes(Bytes::from(body), 4, COQ) {
                    Ok(nodes) => proptest::prop_assert!(nodes.len() <= 4),
                    Err(e) => proptest::prop_assert!(e.status.is_client_error()),
                }
            }
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"ab", b"abc"));
    }
}

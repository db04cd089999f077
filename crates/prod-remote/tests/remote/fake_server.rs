//! The remote policy against a fake OpenAI-compatible server on a loopback socket: the requests
//! ProD sends (token-id prompts, forced `t0`, `n`, vendor fields), the answers it reads (vLLM
//! `prompt_logprobs`, SGLang `token_ids_logprob`, llama.cpp top-k), retries, refusals,
//! timeouts and the concurrency bound. A real server is in `tests/remote/llama_cpp.rs` (extended).

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prod_core::{Sampling, T0};
use prod_policy::tokenizer::ProdTokenizer;
use prod_remote::testing::serve;
use prod_remote::{PromptFormat, RemoteConfig, RemotePolicy, ServerKind};
use prod_rl::{Completion, Policy, SampleRequest};
use serde_json::{json, Value};

fn tokenizer() -> ProdTokenizer {
    let texts = [
        "Lemma foo : forall n : nat, n + 0 = n.",
        "intros n. lia.",
        "Proof. auto. Qed.",
    ];
    ProdTokenizer::train_bpe(texts.iter().map(|s| s.to_string()), 300, 1).unwrap()
}

fn config(url: &str, server: ServerKind) -> RemoteConfig {
    RemoteConfig {
        base_url: url.into(),
        server,
        backoff_ms: 1,
        timeout_s: 5,
        ..Default::default()
    }
}

/// A `/v1/completions` answer with `n` choices; a text ending in `…` is one the server cut
/// (`finish_reason: "length"`).
fn completion(n: usize, texts: impl Fn(usize) -> String) -> String {
    let choices: Vec<Value> = (0..n)
        .map(|i| {
            let t = texts(i);
            let why = if t.ends_with('…') { "length" } else { "stop" };
            json!({"index": i, "text": t, "finish_reason": why})
        })
        .collect();
    json!({"id": "x", "object": "text_completion", "choices": choices}).to_string()
}

#[test]
fn samples_send_training_tokens_and_group_identical_prompts() {
    let fake = serve(Arc::new(|path: &str, body: &Value, _| {
        assert_eq!(path, "/v1/completions");
        let n = body["n"].as_u64().unwrap() as usize;
        (
            200,
            completion(n, |i| match i {
                1 => " intros n. lia. (* 1 …".to_string(),
                _ => format!(" intros n. lia. (* {i} *)"),
            }),
        )
    }));
    let tok = tokenizer();
    let mut p = RemotePolicy::new(
        config(&fake.url, ServerKind::Vllm),
        Sampling::default(),
        tok.clone(),
    )
    .unwrap();
    let reqs = vec![
        SampleRequest {
            context: "",
            statement: "Lemma foo : True.",
            forced_t0: None,
        },
        SampleRequest {
            context: "",
            statement: "Lemma foo : True.",
            forced_t0: None,
        },
        SampleRequest {
            context: "Definition x := 1.",
            statement: "Lemma bar : x = 1.",
            forced_t0: Some(T0::NoInvoke),
        },
    ];
    let out = p.sample(&reqs).unwrap();
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|c| c.text.starts_with(" intros n. lia.")));
    assert_ne!(
        out[0], out[1],
        "two samples of one prompt come from one n = 2 request"
    );
    let cut: Vec<bool> = out.iter().map(|c| c.truncated).collect();
    assert_eq!(
        cut,
        [false, true, false],
        "finish_reason \"length\" marks a cut sample"
    );
    let log = fake.log.lock().unwrap();
    assert_eq!(log.len(), 2);
    let forced = log.iter().find(|(_, b)| b["n"] == 1).unwrap();
    let ids: Vec<u32> = forced.1["prompt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect();
    let want = p
        .prompt_ids(
            "Definition x := 1.",
            "Lemma bar : x = 1.",
            Some(T0::NoInvoke),
        )
        .unwrap();
    assert_eq!(ids, want);
    assert_eq!(
        *ids.last().unwrap(),
        tok.no_invoke_id(),
        "the forced t0 ends the prompt"
    );
    assert_eq!(forced.1["skip_special_tokens"], false);
    assert_eq!(forced.1["temperature"], 0.7);
}

#[test]
fn transient_failures_are_retried_and_refusals_name_the_reason() {
    let fake = serve(Arc::new(|_: &str, body: &Value, n| match n {
        0 => (503, "{\"error\": \"loading\"}".into()),
        1 => (429, "{\"error\": \"busy\"}".into()),
        _ if body["n"] == 1 => (200, completion(1, |_| " auto.".into())),
        _ => (400, "{\"error\": \"n > 1 is not supported\"}".into()),
    }));
    let mut p = RemotePolicy::new(
        config(&fake.url, ServerKind::LlamaCpp),
        Sampling::default(),
        tokenizer(),
    )
    .unwrap();
    let one = [SampleRequest {
        context: "",
        statement: "Lemma a : True.",
        forced_t0: None,
    }];
    assert_eq!(p.sample(&one).unwrap(), vec![Completion::ended(" auto.")]);
    assert_eq!(p.requests_sent.load(Ordering::SeqCst), 3);
    let two = [one[0], one[0]];
    let e = p.sample(&two).unwrap_err();
    assert!(
        e.0.contains("n > 1 is not supported") && e.0.contains("400"),
        "{e}"
    );
    // With one completion per request, the same two samples work.
    let mut cfg = config(&fake.url, ServerKind::LlamaCpp);
    cfg.max_n_per_request = 1;
    let mut p = RemotePolicy::new(cfg, Sampling::default(), tokenizer()).unwrap();
    assert_eq!(p.sample(&two).unwrap().len(), 2);
}

#[test]
fn a_dead_or_silent_server_is_an_infrastructure_error() {
    // Nothing listens on this port (bound, then dropped).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = config(&format!("http://127.0.0.1:{port}"), ServerKind::Vllm);
    cfg.retries = 2;
    let mut p = RemotePolicy::new(cfg, Sampling::default(), tokenizer()).unwrap();
    let e = p
        .sample(&[SampleRequest {
            context: "",
            statement: "Lemma a : True.",
            forced_t0: None,
        }])
        .unwrap_err();
    assert!(e.0.contains("no answer after 3 tries"), "{e}");
    // A server slower than the timeout.
    let fake = serve(Arc::new(|_: &str, _: &Value, _| {
        std::thread::sleep(Duration::from_millis(2500));
        (200, completion(1, |_| "late".into()))
    }));
    let mut cfg = config(&fake.url, ServerKind::Vllm);
    cfg.timeout_s = 1;
    cfg.retries = 0;
    let mut p = RemotePolicy::new(cfg, Sampling::default(), tokenizer()).unwrap();
    assert!(p
        .sample(&[SampleRequest {
            context: "",
            statement: "Lemma a : True.",
            forced_t0: None
        }])
        .is_err());
}

#[test]
fn concurrency_is_bounded() {
    let fake = serve(Arc::new(|_: &str, _: &Value, _| {
        std::thread::sleep(Duration::from_millis(50));
        (200, completion(1, |_| " auto.".into()))
    }));
    let mut cfg = config(&fake.url, ServerKind::Vllm);
    cfg.max_concurrency = 3;
    let mut p = RemotePolicy::new(cfg, Sampling::default(), tokenizer()).unwrap();
    let statements: Vec<String> = (0..12).map(|i| format!("Lemma a{i} : True.")).collect();
    let reqs: Vec<SampleRequest> = statements
        .iter()
        .map(|s| SampleRequest {
            context: "",
            statement: s,
            forced_t0: None,
        })
        .collect();
    assert_eq!(p.sample(&reqs).unwrap().len(), 12);
    let peak = fake.peak.load(Ordering::SeqCst);
    assert!((2..=3).contains(&peak), "peak in flight {peak}");
}

#[test]
fn vllm_probabilities_come_from_prompt_logprobs() {
    let tok = tokenizer();
    let (use_id, no_id) = (tok.use_invoke_id(), tok.no_invoke_id());
    let fake = serve(Arc::new(move |path: &str, body: &Value, _| {
        assert_eq!(path, "/v1/completions");
        assert_eq!(body["prompt_logprobs"], 0);
        let ids = body["prompt"].as_array().unwrap();
        let last = ids.last().unwrap().as_u64().unwrap() as u32;
        let lp = if last == use_id {
            (0.3f64).ln()
        } else {
            (0.1f64).ln()
        };
        let mut entries: Vec<Value> = vec![Value::Null; ids.len() - 1];
        entries.push(json!({ last.to_string(): {"logprob": lp, "rank": 5, "decoded_token": "x"} }));
        (
            200,
            json!({"choices": [{"index": 0, "text": "", "prompt_logprobs": entries}]}).to_string(),
        )
    }));
    let mut p = RemotePolicy::new(
        config(&fake.url, ServerKind::Vllm),
        Sampling::default(),
        tok,
    )
    .unwrap();
    let v = p
        .p_use_invoke(&[("", "Lemma a : True."), ("ctx.", "Lemma b : True.")])
        .unwrap();
    assert_eq!(v.len(), 2);
    assert!(v.iter().all(|x| (x - 0.75).abs() < 1e-9), "{v:?}");
    let log = fake.log.lock().unwrap();
    assert_eq!(log.len(), 4);
    assert!(log
        .iter()
        .any(|(_, b)| b["prompt"].as_array().unwrap().last().unwrap() == no_id));
}

#[test]
fn sglang_probabilities_come_from_token_ids_logprob() {
    let tok = tokenizer();
    let (t, f) = (tok.true_id(), tok.false_id());
    let fake = serve(Arc::new(move |path: &str, body: &Value, _| {
        assert_eq!(path, "/generate");
        assert_eq!(body["token_ids_logprob"], json!([t, f]));
        let meta = json!({"output_token_ids_logprobs": [[[(0.2f64).ln(), t, null], [(0.6f64).ln(), f, null]]]});
        (200, json!({"text": "x", "meta_info": meta}).to_string())
    }));
    let mut p = RemotePolicy::new(
        config(&fake.url, ServerKind::Sglang),
        Sampling::default(),
        tok,
    )
    .unwrap();
    let v = p.value(&[("", "Lemma a : True.")]).unwrap();
    assert!((v[0] - 0.25).abs() < 1e-9, "{v:?}");
}

#[test]
fn llama_cpp_top_k_bounds_a_missing_token() {
    let tok = tokenizer();
    let use_text = tok.decode(&[tok.use_invoke_id()]).unwrap();
    let no_text = tok.decode(&[tok.no_invoke_id()]).unwrap();
    let both = Arc::new(Mutex::new(true));
    let b2 = both.clone();
    let fake = serve(Arc::new(move |_: &str, body: &Value, _| {
        assert!(body["prompt"].is_string(), "llama.cpp gets text prompts");
        assert_eq!(body["logprobs"], 20);
        let mut top = serde_json::Map::new();
        top.insert(use_text.clone(), json!((0.5f64).ln()));
        top.insert("Proof".into(), json!((0.2f64).ln()));
        if *b2.lock().unwrap() {
            top.insert(no_text.clone(), json!((0.25f64).ln()));
        }
        (
            200,
            json!({"choices": [{"index": 0, "text": "", "logprobs": {"top_logprobs": [top]}}]})
                .to_string(),
        )
    }));
    let cfg = RemoteConfig {
        backoff_ms: 1,
        ..RemoteConfig::llama_cpp(&fake.url)
    };
    assert_eq!(cfg.prompt_format, PromptFormat::Text);
    let p = RemotePolicy::new(cfg, Sampling::default(), tok.clone()).unwrap();
    let ids = p.prompt_ids("", "Lemma a : True.", None).unwrap();
    let e = p
        .pair_probabilities(
            std::slice::from_ref(&ids),
            tok.use_invoke_id(),
            tok.no_invoke_id(),
        )
        .unwrap();
    assert!((e[0].p - 2.0 / 3.0).abs() < 1e-9 && !e[0].bounded, "{e:?}");
    *both.lock().unwrap() = false;
    let e = p
        .pair_probabilities(&[ids], tok.use_invoke_id(), tok.no_invoke_id())
        .unwrap();
    // `<no_invoke>` is outside the top k: at most the smallest top-k probability (0.2).
    assert!((e[0].p - 0.5 / 0.7).abs() < 1e-9 && e[0].bounded, "{e:?}");
}

#[test]
fn bad_configurations_are_refused_up_front() {
    let tok = tokenizer();
    assert!(RemotePolicy::new(
        RemoteConfig {
            base_url: "localhost:8000".into(),
            ..Default::default()
        },
        Sampling::default(),
        tok.clone()
    )
    .is_err());
    assert!(RemotePolicy::new(
        RemoteConfig {
            max_concurrency: 0,
            ..Default::default()
        },
        Sampling::default(),
        tok.clone()
    )
    .is_err());
    let e = RemotePolicy::new(
        RemoteConfig {
            api_key_env: Some("PROD_TEST_SURELY_UNSET_KEY".into()),
            ..Default::default()
        },
        Sampling::default(),
        tok,
    )
    .err()
    .unwrap();
    assert!(e.0.contains("PROD_TEST_SURELY_UNSET_KEY"));
    let parsed: RemoteConfig = toml_like();
    assert_eq!(parsed.server, ServerKind::Sglang);
}

fn toml_like() -> RemoteConfig {
    serde_json::from_value(
        json!({"base_url": "http://h:1", "server": "sglang", "max_concurrency": 4}),
    )
    .unwrap()
}

//! Extended test against a REAL server: llama.cpp (llama-cpp-python's OpenAI server) serving the
//! SmolLM2 GGUF. Runs only when both are given, else prints SKIPPED:
//!
//!   scripts/llama-cpp.sh test      # builds llama-cpp-python in a venv, serves the GGUF, runs this
//!   PROD_LLAMA_URL=http://127.0.0.1:8765 PROD_LLAMA_GGUF=/path/SmolLM2-135M-Instruct.Q4_1.gguf \
//!     cargo test -p prod-remote --test remote llama_cpp:: -- --nocapture
//!
//! What it shows: text prompts, one completion per request (the server silently returns one
//! choice for `n` > 1: refused with a clear message), top-k log-probabilities keyed by token text
//! turned into the two-token probability ProD needs.

use prod_core::Sampling;
use prod_remote::{RemoteConfig, RemotePolicy};
use prod_rl::{Policy, SampleRequest};

fn setup() -> Option<(RemotePolicy, prod_policy::ProdTokenizer)> {
    let (Ok(url), Ok(gguf)) = (
        std::env::var("PROD_LLAMA_URL"),
        std::env::var("PROD_LLAMA_GGUF"),
    ) else {
        prod_test_support::skip(
            "set PROD_LLAMA_URL and PROD_LLAMA_GGUF (see the file header) to run against llama.cpp",
        );
        return None;
    };
    let (_, tok) = prod_policy::gguf::import_gguf(
        std::path::Path::new(&gguf),
        &prod_policy::candle_core::Device::Cpu,
    )
    .expect("import the GGUF's tokenizer");
    let cfg = RemoteConfig {
        timeout_s: 120,
        ..RemoteConfig::llama_cpp(&url)
    };
    Some((RemotePolicy::new(cfg, short(), tok.clone()).unwrap(), tok))
}

/// Sixteen new tokens: the test asks for samples, not proofs.
fn short() -> Sampling {
    Sampling {
        max_new_tokens: 16,
        ..Sampling::default()
    }
}

#[test]
fn samples_and_two_token_probabilities_from_llama_cpp() {
    let Some((mut p, tok)) = setup() else { return };
    let reqs = [
        SampleRequest {
            context: "",
            statement: "The capital of France is",
            forced_t0: None,
        },
        SampleRequest {
            context: "",
            statement: "The capital of France is",
            forced_t0: None,
        },
        SampleRequest {
            context: "Paris is a city.",
            statement: "Lemma x : True.",
            forced_t0: None,
        },
    ];
    let out = p.sample(&reqs).unwrap();
    eprintln!("samples: {out:?}");
    assert_eq!(out.len(), 3);
    assert!(out.iter().any(|c| !c.text.trim().is_empty()));
    // `n` > 1 in one request: the server answers with one choice; ProD says what to change.
    let mut cfg = p.config().clone();
    cfg.max_n_per_request = 2;
    let mut p2 = RemotePolicy::new(cfg, short(), tok.clone()).unwrap();
    let e = p2.sample(&reqs[..2]).unwrap_err();
    assert!(e.0.contains("max_n_per_request = 1"), "{e}");
    // " Paris" vs " London" after the prompt: both in the top 20, Paris far more likely.
    let prompt = p.prompt_ids("", "The capital of France is", None).unwrap();
    let paris = tok.encode(" Paris").unwrap();
    let london = tok.encode(" London").unwrap();
    assert_eq!((paris.len(), london.len()), (1, 1), "single tokens");
    // The statement is followed by a newline in ProD's prompt layout; ask about the raw text
    // continuation instead: drop that newline token.
    let raw = tok.encode("The capital of France is").unwrap();
    let est = p
        .pair_probabilities(&[raw, prompt], paris[0], london[0])
        .unwrap();
    eprintln!(
        "P(Paris | raw) = {:.4} (bounded: {}), after ProD's layout = {:.4}",
        est[0].p, est[0].bounded, est[1].p
    );
    assert!(!est[0].bounded && est[0].p > 0.9, "{est:?}");
}

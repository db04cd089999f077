//! A model directory saved by `prod_policy::save_model_dir` loads as it is with Hugging Face
//! `transformers` (`AutoTokenizer`, `AutoModelForCausalLM`, `GenerationConfig`), tokenises a
//! prompt to the same ids as the native tokenizer, gives the same next-token logits as the
//! native model, and builds the native prompt from the shipped `prompt_template.json` alone.
//!
//! Needs a Python with torch and transformers: `PROD_PYTHON` (scripts/test.sh sets it to the
//! project's virtual environment); without it the test prints `SKIPPED` (fails under `CI=true`).

use std::path::PathBuf;
use std::process::Command;

use prod_policy::candle_core::Device;
use prod_policy::model::Llama;
use prod_policy::{LlamaConfig, ProdTokenizer};

const TEXTS: [&str; 3] = [
    "From Coq Require Import Arith Lia.\nDefinition double (n : nat) := n + n.\n",
    "Lemma t_add : forall n : nat, n + 0 = n.\n<no_invoke> intros n. lia.",
    "Lemma t_double : forall n : nat, double n = 2 * n.\n<use_invoke> <invoke> Lemma dbl : forall n : nat, double n = n + n. </invoke> intros n. rewrite dbl. lia.",
];

const LOAD: &str = r#"
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
d, text = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(d)
model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).eval()
gen = GenerationConfig.from_pretrained(d)
ids = tok(text, add_special_tokens=False)["input_ids"]
with torch.no_grad():
    logits = model(torch.tensor([ids])).logits[0, -1].tolist()
# The prompt from the shipped template alone: its two parts tokenised separately.
t = json.load(open(f"{d}/prompt_template.json"))
context, statement = sys.argv[3], sys.argv[4]
head, tail = t["prompt"].split("{statement}")
part = lambda s: tok(s, add_special_tokens=False)["input_ids"]
prompt = (part(head.replace("{context}", context.rstrip()))[-t["default_context_tokens"]:]
          + part(statement.strip() + tail))
# ProD's markers: one id each, and kept by the decode trainers use (skip_special_tokens=True).
markers = ["<use_invoke>", "<no_invoke>", "<invoke>", "</invoke>", "<true>", "<false>"]
single = all(len(tok(m, add_special_tokens=False)["input_ids"]) == 1 for m in markers)
decoded = tok.decode(ids + [gen.eos_token_id], skip_special_tokens=True)
chat = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                               add_generation_prompt=True)
# The tokenizer's output goes to generate as it is (no token_type_ids a Llama refuses).
enc = tok(text, return_tensors="pt")
with torch.no_grad():
    generated = (model.generate(**enc, max_new_tokens=2, do_sample=False).shape[1]
                 - enc["input_ids"].shape[1])
print(json.dumps({"ids": ids, "logits": logits, "eos": gen.eos_token_id,
                  "single": single, "decoded": decoded, "chat": chat, "prompt": prompt,
                  "inputs": sorted(enc.keys()), "generated": generated}))
"#;

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("PROD_PYTHON").filter(|p| !p.is_empty());
    let missing = "hf_load: set PROD_PYTHON to a Python with torch + transformers";
    prod_test_support::require(p.is_some(), missing).then(|| PathBuf::from(p.unwrap()))
}

#[test]
fn a_saved_model_loads_in_transformers_with_the_same_ids_and_logits() {
    let Some(py) = python() else { return };
    let tok = ProdTokenizer::train_bpe(TEXTS.iter(), 300, 1).unwrap();
    let mut cfg = LlamaConfig::tiny(tok.vocab_size());
    cfg.tie_word_embeddings = false;
    let mut model = Llama::random(&cfg, 7, &Device::Cpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    prod_policy::save_model_dir(dir.path(), &mut model, &tok).unwrap();
    for f in ["tokenizer_config.json", "generation_config.json"] {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }

    let text = "Lemma t : forall n : nat, n + 0 = n.\n<no_invoke> intros n.";
    let (context, statement) = (TEXTS[0], "Lemma t_add : forall n : nat, n + 0 = n.");
    let out = Command::new(&py)
        .args(["-c", LOAD])
        .arg(dir.path())
        .arg(text)
        .args([context, statement])
        .output()
        .expect("run PROD_PYTHON");
    assert!(
        out.status.success(),
        "transformers could not load the model:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let ids = tok.encode(text).unwrap();
    let hf_ids: Vec<u32> = serde_json::from_value(got["ids"].clone()).unwrap();
    assert_eq!(hf_ids, ids, "the two tokenizers disagree");
    assert_eq!(got["eos"], tok.end_id());
    assert_eq!(got["single"], true, "a ProD marker is not one token");
    assert_eq!(
        got["decoded"], text,
        "skip_special_tokens=True must keep ProD's markers and drop the end token"
    );
    assert_eq!(
        got["chat"], text,
        "the chat template passes the prompt through"
    );
    assert_eq!(
        got["inputs"],
        serde_json::json!(["attention_mask", "input_ids"])
    );
    assert_eq!(got["generated"], 2, "generate(**tok(text)) did not run");
    let prompt: Vec<u32> = serde_json::from_value(got["prompt"].clone()).unwrap();
    assert_eq!(
        prompt,
        prod_policy::prompt::prompt_ids(&tok, context, statement, 1000).unwrap(),
        "prompt_template.json does not give the native prompt"
    );

    let native: Vec<f32> = model
        .next_token_logits(&[&ids])
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let hf: Vec<f32> = serde_json::from_value(got["logits"].clone()).unwrap();
    assert_eq!(hf.len(), native.len());
    let worst = native
        .iter()
        .zip(&hf)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-3, "logits differ by up to {worst}");
}

//! `prod model merge-lora` against peft's own merge: a LoRA adapter made and saved by peft
//! (every projection, an untied head, ProD's special-token rows as trainable tokens, plain and
//! rsLoRA scaling) on tiny random models, merged by prod, gives the logits of peft's
//! `merge_and_unload` (needs `PROD_PYTHON` with torch, transformers and peft:
//! python/requirements-ci*.txt). Bad adapters are refused with exit code 2 and a message
//! naming what is wrong (no Python needed).
#![cfg(feature = "policy")]

use std::path::{Path, PathBuf};
use std::process::Command;

use prod_policy::candle_core::{DType, Device, Tensor};
use prod_policy::model::{Batch, Llama};
use prod_policy::{LlamaConfig, ProdTokenizer};

const PROD: &str = env!("CARGO_BIN_EXE_prod");
const IDS: [u32; 8] = [3, 17, 5, 40, 9, 2, 11, 30];

fn python() -> Option<PathBuf> {
    prod_test_support::python_with(
        &["torch", "transformers", "peft"],
        "set PROD_PYTHON to a Python with torch, transformers and peft (python/requirements-ci*.txt)",
    )
}

/// A tiny random model folder; the special tokens are the tokenizer's last ids.
fn base(dir: &Path, tied: bool, seed: u64) -> (ProdTokenizer, Vec<u32>) {
    let texts = ["Lemma a : forall n : nat, n + 0 = n. Proof. intros. lia. Qed."];
    let tok = ProdTokenizer::train_bpe(texts.iter(), 300, 1).unwrap();
    let cfg = LlamaConfig {
        tie_word_embeddings: tied,
        ..LlamaConfig::tiny(tok.vocab_size())
    };
    let mut m = Llama::random(&cfg, seed, &Device::Cpu).unwrap();
    prod_policy::save_model_dir(dir, &mut m, &tok).unwrap();
    let special = prod_core::conditional::SPECIAL_TOKENS
        .iter()
        .map(|t| tok.special_id(t).unwrap())
        .collect();
    (tok, special)
}

fn logits(dir: &Path) -> Vec<Vec<f32>> {
    let (m, _) = prod_policy::load_model_dir(dir, &Device::Cpu).unwrap();
    m.logits(&Batch::right_padded(&[&IDS]), false)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec2()
        .unwrap()
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!((a.len(), a[0].len()), (b.len(), b[0].len()));
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(0.0, f32::max)
}

fn merge(base: &Path, adapter: &Path, out: &Path) -> std::process::Output {
    Command::new(PROD)
        .args(["model", "merge-lora", "--base"])
        .arg(base)
        .arg("--adapter")
        .arg(adapter)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn merge_gives_the_logits_of_peft_merge_and_unload() {
    let Some(py) = python() else { return };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lora/peft_reference.py");
    for (tied, rslora) in [(true, false), (false, false), (true, true)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (_, special) = base(&d.join("base"), tied, 5);
        let mut cmd = Command::new(&py);
        cmd.arg(&script)
            .arg(d.join("base"))
            .arg(d.join("adapter"))
            .arg(serde_json::to_string(&IDS).unwrap())
            .arg(serde_json::to_string(&special).unwrap());
        if rslora {
            cmd.arg("--rslora");
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "peft_reference.py: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(line.lines().last().unwrap()).expect("one JSON line");
        let want: Vec<Vec<f32>> = serde_json::from_value(v["logits"].clone()).unwrap();
        let keys = v["keys"].to_string();
        assert!(keys.contains("trainable_tokens_delta") && keys.contains("q_proj.lora_A"));
        assert_eq!(keys.contains("lm_head.lora_A"), !tied);
        let st = merge(&d.join("base"), &d.join("adapter"), &d.join("merged"));
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let got = logits(&d.join("merged"));
        let before = logits(&d.join("base"));
        let diff = max_diff(&got, &want);
        assert!(
            diff < 1e-4,
            "tied {tied}, rslora {rslora}: prod's merge differs from peft's by {diff}"
        );
        assert!(
            max_diff(&before, &want) > 1e-2,
            "the adapter must change the model for this test to mean anything"
        );
        let rec: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.join("merged/lora_merge.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(rec["merge"]["r"], 4);
        let scale = if rslora { 12.0 / 2.0 } else { 12.0 / 4.0 };
        assert_eq!(rec["merge"]["scale"], scale);
        assert_eq!(
            rec["merge"]["replaced_rows"]["model.embed_tokens.weight"],
            6
        );
        assert_eq!(rec["adapter_model_sha256"].as_str().map(str::len), Some(64));
    }
}

/// An adapter written by hand: `pairs` (module, A, B) and a config.
fn adapter(dir: &Path, config: serde_json::Value, tensors: &[(&str, Tensor)]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("adapter_config.json"), config.to_string()).unwrap();
    let map: std::collections::HashMap<String, Tensor> = tensors
        .iter()
        .map(|(k, t)| (k.to_string(), t.clone()))
        .collect();
    prod_policy::candle_core::safetensors::save(&map, dir.join("adapter_model.safetensors"))
        .unwrap();
}

#[test]
fn bad_adapters_are_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    base(&d.join("base"), true, 1);
    let z = |r: usize, c: usize| Tensor::zeros((r, c), DType::F32, &Device::Cpu).unwrap();
    let cfg = |extra: serde_json::Value| {
        let mut c = serde_json::json!({"peft_type": "LORA", "r": 2, "lora_alpha": 4});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    };
    let q = "base_model.model.model.layers.0.self_attn.q_proj";
    let a = format!("{q}.lora_A.weight");
    let b = format!("{q}.lora_B.weight");
    /// (adapter_config.json, adapter tensors, what the error must say)
    type Case<'a> = (serde_json::Value, Vec<(&'a str, Tensor)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            serde_json::json!({"peft_type": "IA3", "r": 2}),
            vec![],
            "only LoRA adapters",
        ),
        (
            cfg(serde_json::json!({"use_dora": true})),
            vec![(&a, z(2, 32)), (&b, z(32, 2))],
            "use_dora = true is not supported",
        ),
        (
            cfg(serde_json::json!({"modules_to_save": ["lm_head"]})),
            vec![(&a, z(2, 32)), (&b, z(32, 2))],
            "modules_to_save",
        ),
        (
            cfg(serde_json::json!({})),
            vec![(&a, z(2, 32))],
            "lora_A and lora_B must both be present",
        ),
        (
            cfg(serde_json::json!({})),
            vec![(&a, z(3, 32)), (&b, z(32, 3))],
            "but r = 2",
        ),
        (
            cfg(serde_json::json!({})),
            vec![(&a, z(2, 16)), (&b, z(32, 2))],
            "adapter does not fit the model: model.layers.0.self_attn.q_proj.weight is 32 × 32",
        ),
        (
            cfg(serde_json::json!({})),
            vec![
                (
                    "base_model.model.model.layers.9.self_attn.q_proj.lora_A.weight",
                    z(2, 32),
                ),
                (
                    "base_model.model.model.layers.9.self_attn.q_proj.lora_B.weight",
                    z(32, 2),
                ),
            ],
            "the model has no weight model.layers.9.self_attn.q_proj.weight",
        ),
        (
            cfg(serde_json::json!({})),
            vec![(
                "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta",
                z(2, 32),
            )],
            "no trainable_token_indices for embed_tokens",
        ),
        (
            cfg(serde_json::json!({"trainable_token_indices": [1, 2, 3]})),
            vec![(
                "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta",
                z(2, 32),
            )],
            "has 2 rows, trainable_token_indices lists 3 tokens",
        ),
        (
            cfg(serde_json::json!({"trainable_token_indices": [1, 99999]})),
            vec![(
                "base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta",
                z(2, 32),
            )],
            "token 99999 is outside model.embed_tokens.weight",
        ),
        (
            cfg(serde_json::json!({})),
            vec![(
                "base_model.model.model.embed_tokens.lora_embedding_A",
                z(2, 32),
            )],
            "LoRA on embeddings is not supported",
        ),
    ];
    for (i, (config, tensors, want)) in cases.into_iter().enumerate() {
        let ad = d.join(format!("ad{i}"));
        adapter(&ad, config, &tensors);
        let out = merge(&d.join("base"), &ad, &d.join(format!("out{i}")));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains(want), "case {i}: want {want:?} in {err}");
        assert!(
            !d.join(format!("out{i}")).exists(),
            "case {i}: nothing written"
        );
    }
    // A missing adapter file, and an output folder that exists.
    std::fs::create_dir_all(d.join("empty")).unwrap();
    let out = merge(&d.join("base"), &d.join("empty"), &d.join("o"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("adapter_config.json"));
    let out = merge(&d.join("base"), &d.join("ad3"), &d.join("base"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists: give a new folder"));
}

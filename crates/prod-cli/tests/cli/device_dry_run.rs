//! The GPU run's whole path on the CPU, with a tiny model: a Q4_1/Q8_0 GGUF imported by
//! `prod model import-gguf` (as SmolLM2 is), `scripts/device/prepare.sh` (SFT examples,
//! prompts, the packed weights split over two pack folders), the two device calls of
//! docs/models.md run here (`prod_device.py stage`, then `run`: the base rebuilt bit for bit,
//! LoRA ProD-SFT and SFT w/o lemma, Algorithm 1's trees), `prod model merge-lora` reproducing
//! the trained model's logits, and `prod eval --trees` checking every node with the real Coq.
//! Also: the device script's lemma extraction agrees with `prod_core::ConditionalProof`.
//!
//! Needs `PROD_PYTHON` with torch, numpy, safetensors and tokenizers (scripts/test.sh sets it);
//! without it the tests print `SKIPPED` and pass, and fail under `CI=true`.
#![cfg(feature = "policy")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{line, SOURCE};

use prod_policy::candle_core::quantized::gguf_file::{self, Value};
use prod_policy::candle_core::quantized::{GgmlDType, QTensor};
use prod_policy::candle_core::{Device, Tensor};
use prod_policy::model::{Batch, Llama};
use prod_policy::LlamaConfig;

const PROD: &str = env!("CARGO_BIN_EXE_prod");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<PathBuf> {
    prod_test_support::python_with(
        &["torch", "numpy", "safetensors", "tokenizers"],
        "set PROD_PYTHON to a Python with torch, numpy, safetensors and tokenizers (python/requirements-ci.txt)",
    )
}

fn ok(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A one-file dataset: SFT lines with and without lemma proposals, three test theorems.
fn dataset(dir: &Path) {
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    let add = line(
        "t_add",
        "Lemma t_add : forall n : nat, n + 0 = n.",
        "<no_invoke> intros n. lia.",
        &[],
        "wo_lemmas",
    );
    let with = line(
        "t_double",
        "Lemma t_double : forall n : nat, double n = 2 * n.",
        &format!("<use_invoke> <invoke> {dbl} </invoke> intros n. rewrite dbl. lia."),
        &[dbl],
        "wo_lemmas",
    );
    let wl = line(
        "t_double",
        "Lemma t_double : forall n : nat, double n = 2 * n.",
        "<no_invoke> intros n. unfold double. lia.",
        &[],
        "w_lemmas",
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("sft.jsonl"), format!("{add}{with}{wl}{add}{with}")).unwrap();
    std::fs::write(dir.join("train_wl.jsonl"), format!("{add}{wl}{add}")).unwrap();
    let test: String = [
        ("h_zero", "Lemma h_zero : forall n : nat, 0 + n = n."),
        ("h_one", "Lemma h_one : forall n : nat, 1 * n = n."),
        ("h_dbl", "Lemma h_dbl : forall n : nat, double n = n * 2."),
    ]
    .iter()
    .map(|(n, s)| line(n, s, "<no_invoke> intros n. lia.", &[], "wo_lemmas"))
    .collect();
    std::fs::write(dir.join("test.jsonl"), test).unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": SOURCE, "reduced": SOURCE});
    std::fs::write(dir.join("sources.jsonl"), src.to_string() + "\n").unwrap();
}

/// A tiny tied Llama written as llama.cpp writes SmolLM2-135M's GGUF (projections Q4_1, the
/// embedding Q8_0, norms f32, Q/K rows permuted, a byte-level vocabulary), imported by prod.
fn base_model(dir: &Path) -> PathBuf {
    let mut tokens = byte_level_alphabet();
    tokens.push("ab".into());
    tokens.push("<|endoftext|>".into());
    let n = tokens.len();
    let mut types = vec![Value::I32(1); n];
    types[n - 1] = Value::I32(3);
    let cfg = LlamaConfig {
        tie_word_embeddings: true,
        ..LlamaConfig::tiny(n)
    };
    let m = Llama::random(&cfg, 11, &Device::Cpu).unwrap();
    let w: std::collections::HashMap<String, Tensor> = m
        .named_vars()
        .into_iter()
        .map(|(k, v)| (k, v.as_detached_tensor()))
        .collect();
    let mut qt: Vec<(String, QTensor)> = Vec::new();
    let mut put = |name: String, t: Tensor, ty: GgmlDType| {
        qt.push((name, QTensor::quantize(&t, ty).unwrap()))
    };
    // Embedding rows of a pretrained model's size (norm ≈ 3, not 0.1): with the final norm
    // frozen, LoRA can then move the logits far enough to learn the fixture.
    let emb = (w["model.embed_tokens.weight"].clone() * 25.0).unwrap();
    put("token_embd.weight".into(), emb, GgmlDType::Q8_0);
    put(
        "output_norm.weight".into(),
        w["model.norm.weight"].clone(),
        GgmlDType::F32,
    );
    let perm = |t: &Tensor, h: usize| prod_policy::gguf::permute_qk(t, h).unwrap();
    for i in 0..cfg.num_hidden_layers {
        let h = |s: &str| w[&format!("model.layers.{i}.{s}")].clone();
        let q4 = GgmlDType::Q4_1;
        put(
            format!("blk.{i}.attn_norm.weight"),
            h("input_layernorm.weight"),
            GgmlDType::F32,
        );
        put(
            format!("blk.{i}.attn_q.weight"),
            perm(&h("self_attn.q_proj.weight"), 4),
            q4,
        );
        put(
            format!("blk.{i}.attn_k.weight"),
            perm(&h("self_attn.k_proj.weight"), 2),
            q4,
        );
        put(
            format!("blk.{i}.attn_v.weight"),
            h("self_attn.v_proj.weight"),
            q4,
        );
        put(
            format!("blk.{i}.attn_output.weight"),
            h("self_attn.o_proj.weight"),
            q4,
        );
        put(
            format!("blk.{i}.ffn_norm.weight"),
            h("post_attention_layernorm.weight"),
            GgmlDType::F32,
        );
        put(
            format!("blk.{i}.ffn_gate.weight"),
            h("mlp.gate_proj.weight"),
            q4,
        );
        put(
            format!("blk.{i}.ffn_up.weight"),
            h("mlp.up_proj.weight"),
            q4,
        );
        put(
            format!("blk.{i}.ffn_down.weight"),
            h("mlp.down_proj.weight"),
            q4,
        );
    }
    let s = |x: &str| Value::String(x.into());
    let md: Vec<(&str, Value)> = vec![
        ("general.architecture", s("llama")),
        ("llama.block_count", Value::U32(2)),
        ("llama.embedding_length", Value::U32(32)),
        ("llama.feed_forward_length", Value::U32(64)),
        ("llama.attention.head_count", Value::U32(4)),
        ("llama.attention.head_count_kv", Value::U32(2)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10_000.0)),
        ("llama.context_length", Value::U32(512)),
        ("tokenizer.ggml.model", s("gpt2")),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.iter().map(|t| s(t)).collect()),
        ),
        ("tokenizer.ggml.merges", Value::Array(vec![s("a b")])),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.eos_token_id", Value::U32(n as u32 - 1)),
    ];
    let gguf = dir.join("tiny.gguf");
    let mut f = std::fs::File::create(&gguf).unwrap();
    let md_refs: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (*k, v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = qt.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &md_refs, &t_refs).unwrap();
    drop(f);
    let out = dir.join("base");
    ok(
        "import-gguf",
        Command::new(PROD)
            .args(["model", "import-gguf"])
            .arg(&gguf)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap(),
    );
    out
}

/// GPT-2's byte-level alphabet: the character each byte is written as.
fn byte_level_alphabet() -> Vec<String> {
    let direct =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut extra = 0;
    (0..256u32)
        .map(|b| {
            let c = if direct(b) {
                b
            } else {
                extra += 1;
                255 + extra
            };
            char::from_u32(c).unwrap().to_string()
        })
        .collect()
}

#[test]
fn device_run_dry_run_trains_samples_merges_and_checks_with_coq() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    dataset(&d.join("data"));
    let base = base_model(d);
    // Here: the inputs of the two calls.
    let prep = ok(
        "scripts/device/prepare.sh",
        Command::new(repo().join("scripts/device/prepare.sh"))
            .arg(d.join("data"))
            .arg(&base)
            .env("PROD", PROD)
            .env("PROD_PYTHON", &py)
            .env("DEVICE_ROOT", d)
            .env("DEVICE_FIRST_PART_MIB", "0.02")
            .output()
            .unwrap(),
    );
    let log =
        String::from_utf8_lossy(&prep.stdout).to_string() + &String::from_utf8_lossy(&prep.stderr);
    assert!(
        log.contains("Q4_1 blocks") && log.contains("Q8_0 blocks"),
        "{log}"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join(".device-b/pack.json")).unwrap())
            .unwrap();
    let parts = manifest["weights"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "the weights are split over the two calls");
    assert!(
        d.join(".device-a/weights.part0").is_file() && !d.join(".device-a/data.bin.xz").exists()
    );
    let blocks = |k: &str| -> u64 {
        manifest["weights"]["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[k].as_u64().unwrap())
            .sum()
    };
    // Projections travel as Q4_1 and the embedding as Q8_0 blocks; only ProD's six mean rows
    // (one block each at width 32) are raw.
    assert_eq!(blocks("raw_blocks"), 6);
    assert!(blocks("q4_blocks") > 0 && blocks("q8_blocks") > 0);
    assert_eq!(manifest["data"]["theorems"].as_array().unwrap().len(), 3);
    assert_eq!(manifest["data"]["sets"]["sft"]["examples"], 5);
    assert_eq!(manifest["data"]["sets"]["wl"]["examples"], 3);

    // "Call A", then "call B", as docs/models.md runs them on the GPU machine.
    let script = repo().join("python/device/prod_device.py");
    ok(
        "stage",
        Command::new(&py)
            .arg(&script)
            .args(["stage", "--parts", ".device-a", "--folder", "0"])
            .current_dir(d)
            .output()
            .unwrap(),
    );
    let out = d.join("OUT");
    let run = ok(
        "run",
        Command::new(&py)
            .arg(&script)
            .args([
                "run",
                "--parts",
                ".device-a",
                ".device-b",
                "--out",
                "OUT",
                "--state",
                ".device-state",
                "--device",
                "cpu",
                "--budget-s",
                "300",
                "--epochs",
                "40",
                "--macro-batch",
                "2",
                "--micro-tokens",
                "4096",
                "--lr",
                "3e-2",
                "--warmup",
                "0",
                "--samples",
                "2",
                "--depth",
                "2",
                "--max-new-tokens",
                "24",
                "--first-token",
                "t0",
                "--rows",
                "4",
                "--tree-group",
                "2",
                "--rank",
                "16",
                "--alpha",
                "16",
                "--adapter-dtype",
                "f32",
            ])
            .current_dir(d)
            // One thread: the machine's cores are often shared, and idle OpenMP threads spin.
            .env("OMP_NUM_THREADS", "1")
            .output()
            .unwrap(),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let files: Vec<PathBuf> = walk(&out);
    assert!(files.len() <= 8, "at most 8 files come back: {files:?}");
    for name in ["prod-sft", "sft-wl"] {
        for f in [
            "adapter_config.json",
            "adapter_model.safetensors",
            "trees.jsonl",
        ] {
            assert!(
                out.join(name).join(f).is_file(),
                "{name}/{f} missing:\n{stdout}"
            );
        }
        assert!(d
            .join(".device-state")
            .join(name)
            .join("adapter_model.safetensors")
            .is_file());
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let sft = &summary["models"]["prod-sft"];
    assert_eq!(
        sft["train"]["steps"], 120,
        "40 epochs of 5 examples, 2 a step: {sft}"
    );
    let losses: Vec<f64> = serde_json::from_value(sft["train"]["losses"].clone()).unwrap();
    assert!(
        losses.last().unwrap() < losses.first().unwrap(),
        "the loss falls: {losses:?}"
    );
    assert_eq!(sft["trees"], 2);
    assert_eq!(summary["models"]["sft-wl"]["train"]["steps"], 80);

    // A further call on the warm machine samples again with the kept adapter: the same trees.
    let from_state = |out: &str, trees: &[&str]| {
        Command::new(&py)
            .arg(&script)
            .args(["run", "--parts", ".device-a", ".device-b", "--out", out])
            .args([
                "--from-state",
                ".device-state",
                "--models",
                "sft-wl",
                "--device",
                "cpu",
            ])
            .args(trees)
            .args([
                "--depth",
                "2",
                "--max-new-tokens",
                "24",
                "--first-token",
                "t0",
            ])
            .args(["--rows", "4", "--tree-group", "2"])
            .current_dir(d)
            .env("OMP_NUM_THREADS", "1")
            .output()
            .unwrap()
    };
    ok("run --from-state", from_state("OUT2", &["--samples", "2"]));
    let nodes = |p: PathBuf| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .skip(1)
            .map(String::from)
            .collect()
    };
    assert_eq!(
        nodes(d.join("OUT2/sft-wl/trees.jsonl")),
        nodes(out.join("sft-wl/trees.jsonl"))
    );

    // Trees 2..3 sampled by a later call (`--first-tree`) are new draws; `merge` joins both
    // files into trees 0..3 and refuses them out of order.
    ok(
        "run --first-tree",
        from_state("OUT3", &["--samples", "4", "--first-tree", "2"]),
    );
    let later = nodes(d.join("OUT3/sft-wl/trees.jsonl"));
    let node = |l: &String| serde_json::from_str::<serde_json::Value>(l).unwrap();
    assert!(later
        .iter()
        .all(|l| (2..4).contains(&node(l)["tree"].as_u64().unwrap())));
    let roots = |ls: &[String]| -> Vec<String> {
        ls.iter()
            .map(node)
            .filter(|n| n["depth"] == 0)
            .map(|n| n["completion"].to_string())
            .collect()
    };
    assert_ne!(
        roots(&later),
        roots(&nodes(out.join("sft-wl/trees.jsonl"))),
        "later trees are new draws"
    );
    let merge = |files: [&str; 2]| {
        Command::new(&py)
            .arg(&script)
            .arg("merge")
            .args(files)
            .args(["--out", "merged.jsonl"])
            .current_dir(d)
            .output()
            .unwrap()
    };
    let wrong = merge(["OUT3/sft-wl/trees.jsonl", "OUT/sft-wl/trees.jsonl"]);
    assert_eq!(
        wrong.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    // A later file whose seed makes it draw the first file's random stream again is refused.
    let later_file = std::fs::read_to_string(d.join("OUT3/sft-wl/trees.jsonl")).unwrap();
    let (head, rest) = later_file.split_once('\n').unwrap();
    let mut head: serde_json::Value = serde_json::from_str(head).unwrap();
    head["seed"] = serde_json::json!(-2 * 7919);
    std::fs::write(d.join("repeat.jsonl"), format!("{head}\n{rest}")).unwrap();
    let repeat = merge(["OUT/sft-wl/trees.jsonl", "repeat.jsonl"]);
    assert_eq!(
        repeat.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&repeat.stderr)
    );
    // The script logs on stdout.
    assert!(String::from_utf8_lossy(&repeat.stdout).contains("repeats the random stream"));
    ok(
        "merge",
        merge(["OUT/sft-wl/trees.jsonl", "OUT3/sft-wl/trees.jsonl"]),
    );
    let joined = std::fs::read_to_string(d.join("merged.jsonl")).unwrap();
    let mut lines = joined.lines();
    let head: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(head["samples"], 4);
    let body: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        body.len(),
        nodes(out.join("sft-wl/trees.jsonl")).len() + later.len()
    );
    for (i, n) in body.iter().enumerate() {
        assert_eq!(n["node"], i);
        if let Some(p) = n["parent"].as_u64() {
            assert_eq!(
                body[p as usize]["tree"], n["tree"],
                "a parent stays in its tree"
            );
        }
    }

    // Back here: the adapter merged by prod gives the trained model's logits.
    let merged = d.join("merged");
    ok(
        "merge-lora",
        Command::new(PROD)
            .args(["model", "merge-lora", "--base"])
            .arg(&base)
            .arg("--adapter")
            .arg(out.join("prod-sft"))
            .arg("--out")
            .arg(&merged)
            .output()
            .unwrap(),
    );
    let probe_ids: Vec<u32> = serde_json::from_value(sft["probe"]["ids"].clone()).unwrap();
    let want: Vec<f32> = serde_json::from_value(sft["probe"]["last"].clone()).unwrap();
    let last = |dir: &Path| -> Vec<f32> {
        let (m, _) = prod_policy::load_model_dir(dir, &Device::Cpu).unwrap();
        let l = m
            .logits(&Batch::right_padded(&[&probe_ids]), false)
            .unwrap();
        let t = l.dims3().unwrap().1;
        l.get(0).unwrap().get(t - 1).unwrap().to_vec1().unwrap()
    };
    let diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    };
    let got = last(&merged);
    assert_eq!(got.len(), want.len());
    assert!(
        diff(&got, &want) < 1e-3,
        "merged logits differ by {}",
        diff(&got, &want)
    );
    assert!(
        diff(&last(&base), &want) > 1e-2,
        "training changed the model"
    );

    // The trees, every node checked by Coq, scored as `prod eval` scores.
    let trees_file = out.join("prod-sft/trees.jsonl");
    let nodes_in_file = std::fs::read_to_string(&trees_file)
        .unwrap()
        .lines()
        .count()
        - 1;
    let ev = ok(
        "eval --trees",
        Command::new(PROD)
            .args(["eval", "--trees"])
            .arg(&trees_file)
            .arg("--dataset")
            .arg(d.join("data"))
            .args([
                "--k",
                "1,2",
                "--workers",
                "1",
                "--no-hammer",
                "--json",
                "--out",
            ])
            .arg(d.join("run"))
            .output()
            .unwrap(),
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&ev.stdout).trim()).unwrap();
    let e = &v["evaluations"][0];
    assert_eq!(
        (
            e["name"].as_str(),
            e["theorems"].as_u64(),
            e["samples"].as_u64()
        ),
        (Some("ProD-SFT"), Some(3), Some(2))
    );
    let o = &e["node_outcomes"];
    let n = o["nodes"].as_u64().unwrap();
    assert!(n >= 6 && n as usize <= nodes_in_file, "{o}");
    assert_eq!(e["infra_nodes"], 0);
    assert_eq!(
        e["checked_nodes"].as_u64(),
        Some(n),
        "every node has a verdict"
    );
    eprintln!(
        "dry run: {o}; losses {:?} … {:?}",
        losses.first(),
        losses.last()
    );
    // Every node in one class; the device sampler says why each sample stopped, so the cut
    // ones (not proved) are their own class, as many as the file's `"stop": "length"` lines
    // that were not proved.
    let sum: u64 = ["proved", "failed", "rejected", "truncated", "timed_out"]
        .iter()
        .map(|k| o[k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, n);
    let trees_text = std::fs::read_to_string(&trees_file).unwrap();
    let cut_lines = trees_text
        .lines()
        .filter(|l| l.contains("\"stop\": \"length\"") || l.contains("\"stop\":\"length\""))
        .count() as u64;
    assert!(o["truncated"].as_u64().unwrap() <= cut_lines, "{o}");
    // Some node reached Coq: its verdict is the checker's (export keeps the verdict kind of a
    // cut node too).
    let exported = ok(
        "run export",
        Command::new(PROD)
            .args(["run", "export"])
            .arg(d.join("run"))
            .output()
            .unwrap(),
    );
    let coq_verdicts = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["phase"] == "eval" && (l["local"] == "proved" || l["local"] == "failed"))
        .count();
    assert!(coq_verdicts > 0, "some node reached Coq: {o}\n{trees_text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("run/run.json")).unwrap()).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("trees read from") && notes.contains("prod_device.py"),
        "{notes}"
    );
    assert_eq!(report["model"]["name"], "ProD-SFT");
}

/// Algorithm 1 as the device script runs it (`trees.generate`, `trees.write`), with a scripted
/// sampler in place of the model: a theorem proved through a lemma that itself proposes a lemma
/// (height 2, `<no_invoke>` forced at the limit), a lemma proposed twice under two names (the
/// script samples both, prod keeps one), a theorem proved directly and one not proved; then
/// `prod eval --trees` checks every node with the real Coq.
#[test]
fn device_algorithm1_trees_are_checked_by_prod_eval() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    dataset(&d.join("data"));
    let dbl = "Lemma dbl : forall n : nat, double n = n + n.";
    let dbl2 = "Lemma dbl2 : forall n : nat, double n = n + n.";
    let u = "Lemma u : forall n : nat, n + n = n + n.";
    let answers = serde_json::json!({
        "Lemma h_zero : forall n : nat, 0 + n = n.": "<no_invoke> intros n. lia.",
        "Lemma h_one : forall n : nat, 1 * n = n.": "<no_invoke> intros n. reflexivity.",
        "Lemma h_dbl : forall n : nat, double n = n * 2.": format!("<use_invoke> <invoke> {dbl} </invoke> <invoke> {dbl2} </invoke> intros n. rewrite dbl. lia."),
        dbl: format!("<use_invoke> <invoke> {u} </invoke> intros n. unfold double. apply u."),
        dbl2: "<no_invoke> intros n. unfold double. reflexivity.",
        u: "<no_invoke> intros n. reflexivity.",
    });
    let thms: Vec<serde_json::Value> = std::fs::read_to_string(d.join("data/test.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            serde_json::json!({"theorem": e["id"], "statement": e["statement"], "context_key": "k"})
        })
        .collect();
    std::fs::write(d.join("thms.json"), serde_json::to_string(&thms).unwrap()).unwrap();
    std::fs::write(d.join("answers.json"), answers.to_string()).unwrap();
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import trees
thms = json.load(open(sys.argv[2]))
answers = json.load(open(sys.argv[3]))
NO_INVOKE, USE_INVOKE = 0x10FFFE, 0x10FFFD
enc = lambda s: [ord(c) for c in s]
dec = lambda ids: "".join(map(chr, ids))
def sampler(prompts, forced):
    out = []
    for p in prompts:
        if forced:
            assert p[-1] == NO_INVOKE
            p = p[:-1]
        text = answers[dec(p).strip()]
        if forced:
            assert text.startswith("<no_invoke>")
            text = text[len("<no_invoke>"):]
        out.append((enc(text), "end"))
    return out
nodes, done = trees.generate(thms, [[] for _ in thms], enc, dec, sampler, samples=2, depth=2, group=1,
                             ids={"use_invoke": USE_INVOKE, "no_invoke": NO_INVOKE}, log=lambda m: None)
trees.write(sys.argv[4], {"model": "scripted", "theorems": len(thms), "samples": done, "depth": 2,
                          "temperature": 0.7, "split": "test", "sampler": "a script"}, nodes)
"#;
    ok(
        "trees.generate",
        Command::new(&py)
            .arg("-c")
            .arg(script)
            .arg(repo().join("python/device"))
            .arg(d.join("thms.json"))
            .arg(d.join("answers.json"))
            .arg(d.join("trees.jsonl"))
            .output()
            .unwrap(),
    );
    let text = std::fs::read_to_string(d.join("trees.jsonl")).unwrap();
    // Per tree: 3 roots, dbl and dbl2 at depth 1, u at depth 2 (forced).
    assert_eq!(text.lines().count(), 1 + 2 * 6, "{text}");
    assert!(text.contains(r#""forced_t0": "no_invoke""#));
    let ev = ok(
        "eval --trees",
        Command::new(PROD)
            .args(["eval", "--trees"])
            .arg(d.join("trees.jsonl"))
            .arg("--dataset")
            .arg(d.join("data"))
            .args(["--workers", "1", "--no-hammer", "--json", "--out"])
            .arg(d.join("run"))
            .output()
            .unwrap(),
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&ev.stdout).trim()).unwrap();
    let e = &v["evaluations"][0];
    assert_eq!(
        (e["name"].as_str(), e["samples"].as_u64()),
        (Some("scripted"), Some(2))
    );
    let p1 = &e["pass_at_k"][0];
    assert_eq!(
        (p1["k"].as_u64(), p1["estimate"].as_f64()),
        (Some(1), Some(2.0 / 3.0)),
        "{e}"
    );
    let o = &e["node_outcomes"];
    // dbl2 is dbl under another name: Algorithm 1 samples it once per tree.
    assert_eq!(o["nodes"], 10, "{o}");
    assert_eq!(o["proved"], 8, "{o}");
    assert_eq!(o["failed"], 2, "{o}");
    assert_eq!(e["sampled_trees_height_ge1"], 2, "{e}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("run/run.json")).unwrap()).unwrap();
    let depth = report["evaluations"][0]["depth_table"].to_string();
    assert!(
        report["notes"].to_string().contains("2 left out"),
        "{}",
        report["notes"]
    );
    assert!(!depth.is_empty());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn device_lemma_extraction_agrees_with_prods_parser() {
    let Some(py) = python() else { return };
    let texts = [
        "<use_invoke> <invoke> Lemma a : 1 = 1. </invoke> auto.",
        "  \n<no_invoke> auto.",
        "<use_invoke> <invoke>Lemma a : 1 = 1.</invoke><invoke>\u{a0}Lemma b : 2 = 2.\u{2003}</invoke> x",
        "<use_invoke> <invoke> Lemma a : 1 = 1. auto.",
        "<use_invoke> </invoke> auto.",
        "<use_invoke> <invoke> <invoke> Lemma a : 1 = 1. </invoke>",
        "<use_invoke> <invoke>   </invoke>",
        "<use_invoke> auto. <no_invoke>",
        "<no_invoke> <true> auto.",
        "auto.",
        "\u{1c}<no_invoke> auto.",
        "<use_invoke> a < b <invoke> Lemma l : x <inv y. </invoke> <invokes",
        "",
        // Markers inside Coq's strings and comments are text; one that never closes is an error.
        "<no_invoke> idtac \"(*\". exact I.",
        "<no_invoke> idtac \"<invoke>\". (* </invoke> *) exact I.",
        "<use_invoke> idtac \"a\"\"<invoke>\". <invoke> Lemma a : \"</invoke>\" = \"\". </invoke> auto.",
        "<use_invoke> (* \"*)\" <invoke> *) <invoke> Lemma a : 1 = 1. </invoke> (* (* *) *) auto.",
        "<use_invoke> <invoke> Lemma a : \"x. </invoke> auto.",
        "<no_invoke> (* \" *) auto.",
        "<no_invoke> ∀ é (* ü <true> *) ok.",
    ];
    let input: String = texts
        .iter()
        .map(|t| serde_json::to_string(t).unwrap() + "\n")
        .collect();
    let mut child = Command::new(&py)
        .arg(repo().join("python/device/prod_device.py"))
        .arg("lemmas")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = ok("lemmas", child.wait_with_output().unwrap());
    let got: Vec<Option<Vec<String>>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want: Vec<Option<Vec<String>>> = texts
        .iter()
        .map(|t| {
            prod_core::ConditionalProof::parse_with(t, &prod_coq::CoqLanguage)
                .ok()
                .map(|p| p.lemmas().map(String::from).collect())
        })
        .collect();
    assert_eq!(got, want);
    assert!(want.iter().filter(|w| w.is_some()).count() >= 4);
}

/// A malformed trees file is the user's error: exit code 2, the line named, nothing left in
/// the run directory (no Python needed).
#[test]
fn eval_trees_refuses_a_malformed_file_with_exit_code_2() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    dataset(&d.join("data"));
    let header = r#"{"format": "prod-trees", "version": 1, "model": "m", "samples": 1, "depth": 0, "temperature": 0.7, "theorems": 1}"#;
    let root = r#"{"node": 0, "tree": 0, "depth": 0, "parent": null, "theorem": "Fix:h_zero", "statement": "Lemma h_zero : forall n : nat, 0 + n = n.", "forced_t0": "no_invoke", "t0": "no_invoke", "completion": "<no_invoke> lia."}"#;
    for (body, want) in [
        (
            format!("{header}\n{{\"node\": 0}}\n"),
            "trees.jsonl:2: not a node line",
        ),
        (
            format!("{header}\n{}\n", root.replace("Fix:h_zero", "Fix:nope")),
            "trees.jsonl:2: theorem \"Fix:nope\" is not in the dataset's test split",
        ),
        (format!("{header}\n{root}\n"), "--split is \"val\""),
    ] {
        std::fs::write(d.join("trees.jsonl"), body).unwrap();
        let split = if want.contains("val") { "val" } else { "test" };
        if split == "val" {
            std::fs::copy(d.join("data/test.jsonl"), d.join("data/val.jsonl")).unwrap();
        }
        let out = Command::new(PROD)
            .args(["eval", "--trees"])
            .arg(d.join("trees.jsonl"))
            .arg("--dataset")
            .arg(d.join("data"))
            .args(["--split", split, "--out"])
            .arg(d.join("run"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "want {want:?} in {err}");
        assert!(!d.join("run").exists(), "nothing left behind");
    }
    // --trees and --model exclude each other.
    let out = Command::new(PROD)
        .args([
            "eval",
            "--trees",
            "t.jsonl",
            "--model",
            "m",
            "--dataset",
            "data",
            "--out",
            "r",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

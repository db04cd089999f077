//! The reference external trainer `python/train_weighted.py` (PyTorch + transformers), run for
//! real against prod's native trainer on tiny random Llama models:
//! * its `--eval-only` loss equals `prod_policy::train::eval_loss` on the same examples (tied and
//!   untied heads, a vocabulary grown for missing ids) — the two optimise the same objective;
//! * its training steps report the native trainer's step losses (same AdamW, clipping, warm-up,
//!   macro/micro batching), the loss falls, and the checkpoint it writes loads with prod's loader
//!   with changed weights;
//! * one `prod rl` round with `external_trainer` = the real script.
//!
//! Needs a Python with torch and transformers: set `PROD_PYTHON` to its interpreter (CI does, see
//! python/README.md); without it the tests print `SKIPPED` and pass (fail under `CI=true`).

use std::ffi::OsStr;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

use prod_check::VerificationCache;
use prod_policy::candle_core::Device;
use prod_policy::model::Llama;
use prod_policy::prompt::TrainExample;
use prod_policy::train::{eval_loss, Trainer};
use prod_policy::{LlamaConfig, PolicyConfig, ProdTokenizer};

const TEXTS: [&str; 4] = [
    "From Coq Require Import Arith Lia.\nDefinition double (n : nat) := n + n.\n",
    "Lemma t_add : forall n : nat, n + 0 = n.\n<no_invoke> intros n. lia.",
    "Lemma t_double : forall n : nat, double n = 2 * n.\n<use_invoke> <invoke> Lemma dbl : forall n : nat, double n = n + n. </invoke> intros n. rewrite dbl. lia.",
    "Lemma t_mul : forall n : nat, n * 1 = n.\n<no_invoke> intros n. induction n; simpl; auto.",
];

/// The interpreter from `PROD_PYTHON`, or `None` (the caller skips) when it is not set.
fn python(test: &str) -> Option<PathBuf> {
    let p = std::env::var_os("PROD_PYTHON").filter(|p| !p.is_empty());
    let missing = format!(
        "{test}: set PROD_PYTHON to a Python with torch + transformers (see python/README.md)"
    );
    prod_test_support::require(p.is_some(), &missing).then(|| PathBuf::from(p.unwrap()))
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/train_weighted.py")
}

/// Runs the script; returns the JSON objects it printed on stdout (one per line).
fn run_script<S: AsRef<OsStr> + Debug>(py: &Path, args: &[S]) -> Vec<serde_json::Value> {
    let out = Command::new(py)
        .arg(script())
        .args(args)
        .output()
        .expect("run PROD_PYTHON");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "train_weighted.py {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    json_lines(&stdout)
}

fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// Runs the script as `procs` data-parallel processes (torch.distributed on CPU with gloo, the
/// environment `torchrun` would set); returns what rank 0 printed. Killed after two minutes (a
/// collective that never completes would otherwise hang the test).
fn run_script_ddp<S: AsRef<OsStr>>(
    py: &Path,
    procs: usize,
    dir: &Path,
    args: &[S],
) -> Vec<serde_json::Value> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut children = Vec::new();
    for rank in 0..procs {
        let log = |k: &str| std::fs::File::create(dir.join(format!("rank{rank}.{k}"))).unwrap();
        let child = Command::new(py)
            .arg(script())
            .args(args)
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("WORLD_SIZE", procs.to_string())
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("LOCAL_WORLD_SIZE", procs.to_string())
            .env("OMP_NUM_THREADS", "1")
            .stdout(log("out"))
            .stderr(log("err"))
            .spawn()
            .expect("run PROD_PYTHON");
        children.push(child);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut status = vec![None; procs];
    while status.iter().any(Option::is_none) {
        for (c, s) in children.iter_mut().zip(status.iter_mut()) {
            if s.is_none() {
                *s = c.try_wait().unwrap();
            }
        }
        if std::time::Instant::now() > deadline {
            for c in &mut children {
                let _ = c.kill();
            }
            panic!("{procs} processes still running after 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for (rank, s) in status.iter().enumerate() {
        let read = |k: &str| {
            std::fs::read_to_string(dir.join(format!("rank{rank}.{k}"))).unwrap_or_default()
        };
        assert!(
            s.unwrap().success(),
            "rank {rank} failed ({s:?}):\n{}\n{}",
            read("out"),
            read("err")
        );
    }
    json_lines(&std::fs::read_to_string(dir.join("rank0.out")).unwrap())
}

fn tokenizer() -> ProdTokenizer {
    ProdTokenizer::train_bpe(TEXTS.iter(), 300, 1).unwrap()
}

/// A model directory as prod writes it: a tiny random Llama, first trained `steps` native steps
/// on the examples so that its loss is far from uniform (different weights then give clearly
/// different losses). With `missing_ids`, the saved vocabulary lacks the tokenizer's last rows:
/// prod's loader (and the script) grow it back with mean rows.
fn model_dir(
    dir: &Path,
    tok: &ProdTokenizer,
    tied: bool,
    missing_ids: usize,
    seed: u64,
    steps: usize,
) {
    let cfg = LlamaConfig {
        tie_word_embeddings: tied,
        ..LlamaConfig::tiny(tok.vocab_size())
    };
    let model = Llama::random(&cfg, seed, &Device::Cpu).unwrap();
    let ex = examples(tok);
    let mut trainer = Trainer::new(PolicyConfig {
        learning_rate: 1e-2,
        warmup_steps: 0,
        ..PolicyConfig::default()
    });
    for _ in 0..steps {
        trainer.step(&model, &ex).unwrap();
    }
    let small = cfg.vocab_size - missing_ids;
    let tensors = model
        .named_vars()
        .into_iter()
        .map(|(name, v)| {
            let t = v.as_detached_tensor();
            let t = if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
                t.narrow(0, 0, small).unwrap()
            } else {
                t
            };
            (name, t)
        })
        .collect();
    let mut model = Llama::from_tensors(
        LlamaConfig {
            vocab_size: small,
            ..cfg
        },
        tensors,
        &Device::Cpu,
    )
    .unwrap();
    prod_policy::save_model_dir(dir, &mut model, tok).unwrap();
    let saved = LlamaConfig::load(&dir.join("config.json")).unwrap();
    assert_eq!((saved.vocab_size, saved.tie_word_embeddings), (small, tied));
}

/// Policy-style and value-style examples with different weights (one of weight 0: it counts in
/// the denominator but not in the sum, as natively).
fn examples(tok: &ProdTokenizer) -> Vec<TrainExample> {
    let mut out = Vec::new();
    let weights = [1.0f32, 0.5, 2.0, 0.0, 0.25];
    for (i, t) in TEXTS[1..].iter().enumerate() {
        let (statement, proof) = t.split_once('\n').unwrap();
        let prompt = tok.encode(&format!("{}{statement}\n", TEXTS[0])).unwrap();
        let mut ids = prompt.clone();
        ids.extend(tok.encode(proof).unwrap());
        ids.push(tok.end_id());
        out.push(TrainExample {
            loss_from: prompt.len(),
            ids,
            weight: weights[i],
        });
    }
    for (i, (statement, proved)) in [
        ("Lemma t_add : forall n : nat, n + 0 = n.", true),
        ("Lemma f : 0 = 1.", false),
    ]
    .iter()
    .enumerate()
    {
        let mut ids = tok.encode(&format!("{}{statement}\n", TEXTS[0])).unwrap();
        let loss_from = ids.len();
        ids.push(if *proved {
            tok.true_id()
        } else {
            tok.false_id()
        });
        out.push(TrainExample {
            loss_from,
            ids,
            weight: weights[3 + i],
        });
    }
    out
}

/// `examples.jsonl` exactly as `prod rl` writes it (crates/prod-run/src/rl.rs `write_examples`).
fn write_examples(path: &Path, examples: &[TrainExample], tok: &ProdTokenizer) {
    let mut text = String::new();
    for e in examples {
        let (p, c) = e.ids.split_at(e.loss_from);
        let line = serde_json::json!({
            "prompt": tok.decode(p).unwrap(), "completion": tok.decode(c).unwrap(), "weight": e.weight,
            "prompt_ids": p, "completion_ids": c,
        });
        text += &format!("{line}\n");
    }
    std::fs::write(path, text).unwrap();
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-12)
}

fn python_eval(py: &Path, model: &Path, data: &Path) -> f64 {
    let out = run_script(
        py,
        &[
            "--eval-only",
            "--model",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--micro-batch",
            "2",
        ],
    );
    assert_eq!(out.len(), 1, "{out:?}");
    out[0]["loss"].as_f64().unwrap()
}

#[test]
fn python_eval_loss_equals_the_native_eval_loss() {
    let Some(py) = python("python_eval_loss_equals_the_native_eval_loss") else {
        return;
    };
    let tok = tokenizer();
    let ex = examples(&tok);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("examples.jsonl");
    write_examples(&data, &ex, &tok);
    let max_id = ex.iter().flat_map(|e| e.ids.iter().copied()).max().unwrap() as usize;
    for (name, tied, missing) in [
        ("untied", false, 0),
        ("tied", true, 0),
        ("tied-grown", true, 5),
        ("untied-grown", false, 5),
    ] {
        let m = dir.path().join(name);
        model_dir(&m, &tok, tied, missing, 11, 15);
        let (model, _) = prod_policy::load_model_dir(&m, &Device::Cpu).unwrap();
        assert_eq!(model.config().vocab_size, tok.vocab_size());
        if missing > 0 {
            assert!(
                max_id >= tok.vocab_size() - missing,
                "the examples use a grown row ({max_id})"
            );
        }
        let native = eval_loss(&model, &ex, 3).unwrap();
        let python = python_eval(&py, &m, &data);
        eprintln!("{name}: native {native:.6} python {python:.6}");
        // Trained, far from uniform (ln |V| ≈ 5.7): the weights decide the loss.
        assert!(native > 0.05 && native < 4.0, "{native}");
        assert!(
            rel(native, python) < 1e-4,
            "{name}: native eval_loss {native} vs train_weighted.py {python}"
        );
    }
    // Weights matter: a different model gives a different loss (the comparison can fail).
    let other = dir.path().join("other");
    model_dir(&other, &tok, false, 0, 12, 15);
    let (m0, _) = prod_policy::load_model_dir(&dir.path().join("untied"), &Device::Cpu).unwrap();
    assert!(
        rel(
            eval_loss(&m0, &ex, 3).unwrap(),
            python_eval(&py, &other, &data)
        ) > 1e-2
    );
}

#[test]
fn python_training_follows_the_native_trainer_and_writes_a_checkpoint_prod_loads() {
    let Some(py) =
        python("python_training_follows_the_native_trainer_and_writes_a_checkpoint_prod_loads")
    else {
        return;
    };
    let tok = tokenizer();
    let ex = examples(&tok);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("examples.jsonl");
    write_examples(&data, &ex, &tok);
    let start = dir.path().join("start");
    // Tied head and a grown vocabulary: the hardest case for the hand-over.
    model_dir(&start, &tok, true, 3, 5, 5);
    let out = dir.path().join("out");
    let (lr, macro_batch, micro, warmup, epochs) = (3e-3, 3, 2, 2, 4);
    let out2 = dir.path().join("out-2-processes");
    let args = |out: &Path| -> Vec<String> {
        [
            "--data",
            data.to_str().unwrap(),
            "--model",
            start.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--lr",
            &lr.to_string(),
            "--macro-batch",
            &macro_batch.to_string(),
            "--micro-batch",
            &micro.to_string(),
            "--warmup-steps",
            &warmup.to_string(),
            "--epochs",
            &epochs.to_string(),
        ]
        .map(String::from)
        .to_vec()
    };
    let steps = run_script(&py, &args(&out));
    let py_losses: Vec<f64> = steps.iter().map(|s| s["loss"].as_f64().unwrap()).collect();
    assert_eq!(
        py_losses.len(),
        epochs * ex.len().div_ceil(macro_batch),
        "{steps:?}"
    );
    // Data-parallel: 2 processes (each a share of the micro-batches, one a zero-weight dummy in the
    // second macro batch) must take the same steps as one.
    let steps2 = run_script_ddp(&py, 2, dir.path(), &args(&out2));
    let py2_losses: Vec<f64> = steps2.iter().map(|s| s["loss"].as_f64().unwrap()).collect();
    assert_eq!(py2_losses.len(), py_losses.len(), "{steps2:?}");

    // The native trainer on the same examples, in the same order, with the same settings.
    let (mut model, _) = prod_policy::load_model_dir(&start, &Device::Cpu).unwrap();
    let before: Vec<Vec<f32>> = params(&model);
    let cfg = PolicyConfig {
        learning_rate: lr,
        warmup_steps: warmup,
        macro_batch,
        micro_batch: micro,
        ..PolicyConfig::default()
    };
    let mut trainer = Trainer::new(cfg);
    let mut native_losses = Vec::new();
    for _ in 0..epochs {
        for chunk in ex.chunks(macro_batch) {
            native_losses.push(trainer.step(&model, chunk).unwrap().loss);
        }
    }
    eprintln!("native {native_losses:?}\npython {py_losses:?}\npython, 2 processes {py2_losses:?}");
    for (i, ((n, p), p2)) in native_losses
        .iter()
        .zip(&py_losses)
        .zip(&py2_losses)
        .enumerate()
    {
        // Same model, data, optimizer and schedule: only float rounding differs (~1e-6 here).
        assert!(
            rel(*n, *p) < 1e-4,
            "step {}: native loss {n} vs python {p}",
            i + 1
        );
        assert!(
            rel(*n, *p2) < 1e-4,
            "step {}: native loss {n} vs python on 2 processes {p2}",
            i + 1
        );
    }
    // It learns: each macro batch's loss is lower in the last epoch than in the first.
    let per_epoch = ex.len().div_ceil(macro_batch);
    for k in 0..per_epoch {
        let (first, last) = (py_losses[k], py_losses[(epochs - 1) * per_epoch + k]);
        assert!(
            last < first * 0.95,
            "macro batch {k}: loss {first} -> {last}"
        );
    }

    // The checkpoint: prod's loader reads it (weights, config, tokenizer), its weights moved, and
    // it is (up to float drift) the native trainer's result.
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(out.join(f).is_file(), "{f} missing from the checkpoint");
    }
    let policy = prod_run::NativePolicy::load(&out, prod_run::NativeParams::default()).unwrap();
    assert_eq!(policy.model.config().vocab_size, tok.vocab_size());
    assert!(policy.model.config().tie_word_embeddings);
    assert_eq!(policy.tok.vocab_size(), tok.vocab_size());
    let after = params(&policy.model);
    assert_eq!(after.len(), before.len());
    let moved = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.iter().zip(a.iter()).any(|(x, y)| x != y))
        .count();
    assert_eq!(moved, before.len(), "every parameter tensor was updated");
    let trained_py = eval_loss(&policy.model, &ex, 3).unwrap();
    let trained_native = eval_loss(&model, &ex, 3).unwrap();
    let initial = {
        let (m0, _) = prod_policy::load_model_dir(&start, &Device::Cpu).unwrap();
        eval_loss(&m0, &ex, 3).unwrap()
    };
    eprintln!("eval loss: initial {initial:.5}, python-trained {trained_py:.5}, native-trained {trained_native:.5}");
    assert!(trained_py < initial * 0.9, "{initial} -> {trained_py}");
    assert!(
        rel(trained_py, trained_native) < 1e-4,
        "python-trained {trained_py} vs native-trained {trained_native}"
    );
    assert!(rel(trained_py, python_eval(&py, &out, &data)) < 1e-4);
    let (m2, _) = prod_policy::load_model_dir(&out2, &Device::Cpu).unwrap();
    let trained_py2 = eval_loss(&m2, &ex, 3).unwrap();
    assert!(
        rel(trained_py2, trained_native) < 1e-4,
        "2 processes: {trained_py2} vs native-trained {trained_native}"
    );
    // The native trainer really moved too (the comparison above is not between two copies of the start).
    model = prod_policy::load_model_dir(&start, &Device::Cpu).unwrap().0;
    assert!(rel(eval_loss(&model, &ex, 3).unwrap(), trained_native) > 0.05);
}

fn params(model: &Llama) -> Vec<Vec<f32>> {
    model
        .named_vars()
        .into_iter()
        .map(|(_, v)| {
            v.as_detached_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        })
        .collect()
}

// ---- one `prod rl` round with the real script as external trainer ------------------------------

use crate::common;

#[test]
fn a_prod_rl_round_trains_with_the_real_python_trainer() {
    let Some(py) = python("a_prod_rl_round_trains_with_the_real_python_trainer") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    common::write_fixture(
        dir.path(),
        &[
            common::example(
                "t_add",
                "Lemma t_add : forall n : nat, n + 0 = n.",
                "<no_invoke> intros n. lia.",
                &[],
            ),
            common::example(
                "t_mul",
                "Lemma t_mul : forall n : nat, n * 1 = n.",
                "<no_invoke> intros n. lia.",
                &[],
            ),
        ],
    );
    let coq = common::coq();
    let mut cfg = common::rl_config(dir.path(), 1);
    // The value head shared with the policy: one checkpoint holds both losses measured here.
    cfg.value_model = prod_run::ValueModel::Shared;
    cfg.external_trainer = vec![
        py.display().to_string(),
        script().display().to_string(),
        "--data".into(),
        "{examples}".into(),
        "--model".into(),
        "{model}".into(),
        "--out".into(),
        "{out}".into(),
        "--lr".into(),
        "1e-3".into(),
        "--epochs".into(),
        "3".into(),
    ];
    let run_dir = tempfile::tempdir().unwrap();
    let theorems = prod_run::load_theorems(dir.path(), "rl", None, 0).unwrap();
    let store = prod_run::RunStore::open_dir(run_dir.path()).unwrap();
    let cache = VerificationCache::open(&run_dir.path().join("cache.sqlite")).unwrap();
    let checker = prod_check::CachedChecker::new(coq, cache);
    let lang = prod_coq::CoqLanguage;
    let final_check = prod_run::CoqFinal(Default::default());
    let statements = Default::default();
    let env = prod_run::RunContext {
        store: &store,
        prover: prod_run::CheckSetup {
            checker: &checker,
            lang: &lang,
            final_check: &final_check,
        },
        out: run_dir.path(),
        bars: &prod_run::Bars::hidden(),
        dataset_statements: &statements,
    };
    let records = prod_run::run_rl(&cfg, &theorems, &env, &|_| Ok(())).unwrap();
    assert_eq!(records.len(), 1);
    let m = &records[0].metrics;
    assert!(
        m.locally_correct >= 2,
        "ground-truth proofs are locally correct: {m:?}"
    );
    let loss_after = m.loss.expect("the loss is measured on the new weights");

    // prod measured the round's losses on what the script wrote (policy examples; value examples,
    // whose completion is <true>/<false>): the script's own evaluation of its checkpoint agrees.
    let ckpt = run_dir.path().join("checkpoints/round-1");
    let examples = run_dir.path().join("rounds/round-1/examples.jsonl");
    let text = std::fs::read_to_string(&examples).unwrap();
    let (value, policy): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        ["<true>", "<false>"].contains(&v["completion"].as_str().unwrap())
    });
    assert!(
        policy.len() >= 2 && !value.is_empty(),
        "ground truth and value examples: {text}"
    );
    let (policy_file, value_file) = (
        run_dir.path().join("policy.jsonl"),
        run_dir.path().join("value.jsonl"),
    );
    std::fs::write(&policy_file, policy.join("\n") + "\n").unwrap();
    std::fs::write(&value_file, value.join("\n") + "\n").unwrap();
    let py_loss = python_eval(&py, &ckpt, &policy_file);
    assert!(
        rel(loss_after, py_loss) < 1e-4,
        "prod's round loss {loss_after} vs the script's {py_loss}"
    );
    let value_loss = m.value_loss.expect("value examples were trained");
    let py_value = python_eval(&py, &ckpt, &value_file);
    assert!(
        rel(value_loss, py_value) < 1e-4,
        "prod's value loss {value_loss} vs the script's {py_value}"
    );
    // The round trained: all its examples have a lower loss than on the start model.
    let before = python_eval(&py, &dir.path().join("model"), &examples);
    let after = python_eval(&py, &ckpt, &examples);
    eprintln!("round loss {loss_after:.5}, value loss {value_loss:.5}; all examples before {before:.5}, after {after:.5}");
    assert!(after < before - 0.05, "{before} -> {after}");
    // The next round can start from the script's checkpoint.
    prod_run::NativePolicy::load(&ckpt, prod_run::NativeParams::default()).unwrap();
}

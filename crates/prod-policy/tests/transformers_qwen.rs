//! Qwen2 and Qwen3 run natively as `transformers` runs them. Tiny random models made and saved
//! by transformers (`tests/data/qwen_reference.py`: seeded, non-zero q/k/v and o biases, q/k
//! norm weights away from 1, a Qwen3 head width other than hidden size / heads, tied and untied
//! heads) give transformers' logits when loaded here: a padded batch, the KV cache and row
//! decoding. Saved here, each loads in transformers again as the same architecture with the
//! same logits.
//!
//! Qwen3 needs transformers ≥ 4.51: the RL venv's (`PROD_RL_PYTHON`, transformers 5) runs every
//! model; the project's pinned 4.44.2 (`PROD_PYTHON`) runs Qwen2. Without the interpreter a
//! test skips (fails under `CI=true`).

use std::path::Path;
use std::process::Command;

use prod_policy::candle_core::{Device, Tensor};
use prod_policy::model::{Batch, KvCache, Llama};
use prod_policy::DecodeWeights;

const SEQS: [&[u32]; 3] = [&[3, 17, 5, 40, 9, 2, 11, 30], &[7, 1, 60], &[12, 33]];

/// What the script printed for one model: its transformers class and, per sequence, the
/// logits `[position][vocab]`.
struct Reference {
    class: String,
    logits: Vec<Vec<Vec<f32>>>,
}

/// Runs the reference script (`make` or `check`) over `names` in `dir`.
fn script(py: &Path, mode: &str, dir: &Path, names: &[&str]) -> Vec<Reference> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qwen_reference.py");
    let seqs = serde_json::to_string(&SEQS).unwrap();
    let out = Command::new(py)
        .arg(path)
        .arg(mode)
        .arg(dir)
        .arg(seqs)
        .args(names)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("run the Python");
    assert!(
        out.status.success(),
        "qwen_reference.py {mode} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{mode}: {e}: {stdout}"));
    names
        .iter()
        .map(|n| Reference {
            class: json[n]["class"].as_str().unwrap().to_string(),
            logits: serde_json::from_value(json[n]["logits"].clone()).unwrap(),
        })
        .collect()
}

/// `got` against `want` within 1e-4 of the largest logit (at least 1).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: vocabulary");
    let scale = want.iter().fold(1f32, |m, x| m.max(x.abs()));
    let d = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        d <= 1e-4 * scale,
        "{what}: logits differ by {d} (scale {scale})"
    );
}

fn rows(t: &Tensor) -> Vec<Vec<f32>> {
    t.to_vec2().unwrap()
}

/// The model's logits against the reference: every position of a right-padded batch, the last
/// position through a left-padded KV-cache prefill, and the last token decoded as rows after a
/// prefill of the others.
fn check_logits(m: &Llama, want: &[Vec<Vec<f32>>], name: &str) {
    let full = m.logits(&Batch::right_padded(&SEQS), false).unwrap();
    for (i, (seq, w)) in SEQS.iter().zip(want).enumerate() {
        let got = rows(&full.get(i).unwrap());
        for p in 0..seq.len() {
            assert_close(
                &got[p],
                &w[p],
                &format!("{name}: batch, sequence {i} position {p}"),
            );
        }
    }
    let mut cache = KvCache::new(m.config().num_hidden_layers);
    let last = m
        .forward_cached(&Batch::left_padded(&SEQS), &mut cache)
        .unwrap();
    let mut kv: Vec<_> = SEQS
        .iter()
        .map(|s| {
            m.prefill_row(&s[..s.len() - 1], DecodeWeights::F32)
                .unwrap()
                .0
        })
        .collect();
    let ids: Vec<u32> = SEQS.iter().map(|s| s[s.len() - 1]).collect();
    let mut refs: Vec<&mut _> = kv.iter_mut().collect();
    let decoded = m.decode_rows(&mut refs, &ids, DecodeWeights::F32).unwrap();
    for (i, (seq, w)) in SEQS.iter().zip(want).enumerate() {
        let end = &w[seq.len() - 1];
        assert_close(
            &rows(&last)[i],
            end,
            &format!("{name}: cache, sequence {i}"),
        );
        assert_close(
            &rows(&decoded)[i],
            end,
            &format!("{name}: rows, sequence {i}"),
        );
    }
}

/// transformers' models load here with its logits; saved here, they load there as the same
/// class with the same logits.
fn round_trip(py: &Path, names: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (made, saved) = (dir.path().join("transformers"), dir.path().join("prod"));
    let reference = script(py, "make", &made, names);
    for (name, r) in names.iter().zip(&reference) {
        let m = Llama::load(&made.join(name), &Device::Cpu).unwrap();
        assert_eq!(m.config().architecture().class_name(), r.class, "{name}");
        check_logits(&m, &r.logits, name);
        m.save(&saved.join(name)).unwrap();
    }
    for ((name, back), r) in names
        .iter()
        .zip(script(py, "check", &saved, names))
        .zip(&reference)
    {
        assert_eq!(back.class, r.class, "{name}: loaded back as another class");
        for (i, (b, w)) in back.logits.iter().zip(&r.logits).enumerate() {
            for (p, (x, y)) in b.iter().zip(w).enumerate() {
                assert_close(x, y, &format!("{name}: saved, sequence {i} position {p}"));
            }
        }
    }
}

#[test]
fn qwen2_and_qwen3_match_transformers_5() {
    let missing = "set PROD_RL_PYTHON to a Python with torch and transformers >= 4.51 \
                   (the RL venv: python/requirements-rl.txt)";
    let Some(py) =
        prod_test_support::python_of("PROD_RL_PYTHON", &["torch", "transformers"], missing)
    else {
        return;
    };
    round_trip(&py, &["qwen2", "qwen3", "qwen3_bias"]);
}

#[test]
fn qwen2_matches_the_pinned_transformers() {
    let missing =
        "set PROD_PYTHON to a Python with torch and transformers (python/requirements-ci.txt)";
    let Some(py) = prod_test_support::python_with(&["torch", "transformers"], missing) else {
        return;
    };
    round_trip(&py, &["qwen2"]);
}

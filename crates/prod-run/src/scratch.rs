//! A policy made from scratch (`prod model init`): a byte-level BPE tokenizer trained on a
//! corpus (text files, or dataset JSONL whose lines give their context, statement and
//! conditional proof) and a Llama of a [`ModelShape`] with seeded random weights, written as a
//! model directory every command loads.

use std::path::{Path, PathBuf};

use prod_policy::model::Llama;
use prod_policy::{ModelShape, ProdTokenizer};

use crate::sft::read_data_lines;
use crate::BadInput;

/// What [`init_model`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewModel {
    pub params: usize,
    pub vocab: usize,
}

/// Positions a model made from scratch takes (the paper's prompts are ~1,000 context tokens and a
/// statement, the proof comes after).
pub const POSITIONS: usize = 4096;

/// Trains the tokenizer on `corpus`, draws the weights of `shape` with `seed` and writes the
/// model directory `out`. A bad shape is `PolicyError::BadInput`, an unreadable corpus file
/// [`BadInput`].
pub fn init_model(
    corpus: &[PathBuf],
    shape: &ModelShape,
    seed: u64,
    out: &Path,
) -> anyhow::Result<NewModel> {
    shape.check()?;
    let mut texts = Vec::new();
    for p in corpus {
        if p.extension().is_some_and(|e| e == "jsonl") {
            for l in read_data_lines(p, None)? {
                let proof = l.conditional_proof.unwrap_or_default();
                texts.push(format!("{}\n{}\n{proof}", l.context, l.statement));
            }
        } else {
            let text = std::fs::read_to_string(p)
                .map_err(|e| BadInput(format!("{}: {e}", p.display())))?;
            texts.push(text);
        }
    }
    let tok = ProdTokenizer::train_bpe(texts.iter(), shape.vocab_size, 2)?;
    let cfg = shape.config(tok.vocab_size(), POSITIONS);
    let mut model = Llama::random(&cfg, seed, &prod_policy::candle_core::Device::Cpu)?;
    prod_policy::save_model_dir(out, &mut model, &tok)?;
    Ok(NewModel {
        params: model.num_params(),
        vocab: tok.vocab_size(),
    })
}

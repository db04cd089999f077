//! `prod model sample`: samples of the native policy for a raw text, or for each line of a
//! dataset JSONL's ProD prompt with whether each parses as a conditional proof — the quick
//! look at what a model writes before it is evaluated.

use std::path::Path;

use prod_core::{ConditionalProof, ProofLanguage, T0};
use prod_policy::model::Llama;
use prod_policy::prompt;
use prod_policy::sample::{self, SamplingParams};
use prod_policy::ProdTokenizer;
use serde::Serialize;

use crate::{BadInput, Bars};

/// What a sampling session samples with, beside the sampler's parameters.
pub struct SampleSession<'a> {
    pub model: &'a Llama,
    pub tok: &'a ProdTokenizer,
    /// `seed` is the first prompt's; dataset line i is sampled with `seed + i`.
    pub params: SamplingParams,
    /// The first token, forced (the paper forces `<no_invoke>` at the depth limit).
    pub force_t0: Option<T0>,
}

/// One sample of a raw prompt.
#[derive(Serialize)]
pub struct PromptSample {
    pub sample: usize,
    pub text: String,
    pub tokens: usize,
    pub stopped: bool,
}

/// One sample of a dataset line's prompt.
#[derive(Serialize)]
pub struct LineSample {
    pub id: String,
    pub sample: usize,
    /// The sample, its forced first token included.
    pub conditional_proof: String,
    pub parses: bool,
    pub stopped: bool,
    pub tokens: usize,
}

/// A dataset's samples in all.
#[derive(Serialize, Debug, Default, PartialEq)]
pub struct SampledData {
    pub samples: usize,
    pub parse_as_conditional_proof: usize,
    /// Tokens generated.
    #[serde(skip)]
    pub generated: usize,
}

impl SampledData {
    /// The share of samples that parse (0 when there is none).
    pub fn parse_rate(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.parse_as_conditional_proof as f64 / self.samples as f64
        }
    }
}

impl SampleSession<'_> {
    /// Samples continuing `text` (no ProD formatting), each given to `emit`; the tokens
    /// generated.
    pub fn raw_prompt(
        &self,
        text: &str,
        emit: &mut dyn FnMut(PromptSample) -> anyhow::Result<()>,
    ) -> anyhow::Result<usize> {
        let mut ids = self.tok.encode(text)?;
        if let Some(t0) = self.force_t0 {
            ids = prompt::with_forced_t0(self.tok, &ids, t0);
        }
        let mut generated = 0;
        for (i, s) in sample::sample(self.model, &ids, &self.params)?
            .iter()
            .enumerate()
        {
            generated += s.ids.len();
            emit(PromptSample {
                sample: i,
                text: self.tok.decode(&s.ids)?,
                tokens: s.ids.len(),
                stopped: s.stopped,
            })?;
        }
        Ok(generated)
    }

    /// Samples for each line of `data` (the first `limit`), prompted as the policy is (the
    /// last `context_tokens` of the context), each given to `emit` with whether it parses as
    /// a conditional proof of `lang`.
    pub fn dataset(
        &self,
        data: &Path,
        limit: Option<usize>,
        context_tokens: usize,
        lang: &dyn ProofLanguage,
        bars: &Bars,
        emit: &mut dyn FnMut(LineSample) -> anyhow::Result<()>,
    ) -> anyhow::Result<SampledData> {
        let lines = crate::sft::read_data_lines(data, limit)?;
        let pb = bars.bar("sample", "prompts", Some(lines.len()));
        let mut all = SampledData::default();
        for (li, l) in lines.iter().enumerate() {
            let mut ids = prompt::prompt_ids(self.tok, &l.context, &l.statement, context_tokens)
                .map_err(|e| BadInput(format!("{}:{}: {e}", data.display(), l.line)))?;
            if let Some(t0) = self.force_t0 {
                ids = prompt::with_forced_t0(self.tok, &ids, t0);
            }
            let p = SamplingParams {
                seed: self.params.seed.wrapping_add(li as u64),
                ..self.params.clone()
            };
            for (i, s) in sample::sample(self.model, &ids, &p)?.iter().enumerate() {
                let text = self.tok.decode(&s.ids)?;
                let text = match self.force_t0 {
                    Some(t0) => format!("{}{text}", t0.token()),
                    None => text,
                };
                let parses = ConditionalProof::parse_with(&text, lang).is_ok();
                all.samples += 1;
                all.parse_as_conditional_proof += parses as usize;
                all.generated += s.ids.len();
                emit(LineSample {
                    id: l.id.clone(),
                    sample: i,
                    conditional_proof: text,
                    parses,
                    stopped: s.stopped,
                    tokens: s.ids.len(),
                })?;
            }
            pb.inc(1);
        }
        pb.finish();
        Ok(all)
    }
}

//! The tokenizer: any Hugging Face `tokenizer.json`, plus ProD's six special tokens
//! (`prod_core::conditional::SPECIAL_TOKENS`) as single, never-split tokens.

use std::path::Path;

use prod_core::conditional::{FALSE_TOKEN, NO_INVOKE, SPECIAL_TOKENS, TRUE_TOKEN, USE_INVOKE};
use prod_core::T0;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, Tokenizer, TokenizerBuilder};

use crate::{PolicyError, Result};

/// The end-of-sequence token of tokenizers trained here.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// Names tried, in order, for the end token when the model config does not give one.
const END_TOKEN_CANDIDATES: [&str; 3] = [END_OF_TEXT, "</s>", "<eos>"];

fn tk_err(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Tokenizer(e.to_string())
}

/// A tokenizer that knows ProD's special tokens and the end token that closes a target.
#[derive(Clone)]
pub struct ProdTokenizer {
    inner: Tokenizer,
    special: [u32; 6],
    end_id: u32,
}

impl ProdTokenizer {
    /// Wraps a tokenizer, adding ProD's special tokens if they are missing. `end_id`: the model's
    /// end-of-sequence id (`eos_token_id` of config.json); `None` looks for a usual end token.
    pub fn new(mut inner: Tokenizer, end_id: Option<u32>) -> Result<Self> {
        let added: Vec<AddedToken> = SPECIAL_TOKENS
            .iter()
            .filter(|t| inner.token_to_id(t).is_none())
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        if !added.is_empty() {
            inner.add_special_tokens(added).map_err(tk_err)?;
        }
        let mut special = [0u32; 6];
        for (slot, t) in special.iter_mut().zip(SPECIAL_TOKENS) {
            *slot = inner
                .token_to_id(t)
                .ok_or_else(|| tk_err(format!("special token {t} has no id")))?;
        }
        let end_id = match end_id {
            Some(id) => id,
            None => END_TOKEN_CANDIDATES
                .iter()
                .find_map(|t| inner.token_to_id(t))
                .ok_or_else(|| {
                    tk_err(format!(
                        "no end token: none of {END_TOKEN_CANDIDATES:?} is in the vocabulary"
                    ))
                })?,
        };
        let tok = ProdTokenizer {
            inner,
            special,
            end_id,
        };
        // Only now can we check that each special token really is one token.
        for (t, &id) in SPECIAL_TOKENS.iter().zip(&tok.special) {
            let ids = tok.encode(t)?;
            if ids != [id] {
                return Err(tk_err(format!(
                    "special token {t} encodes as {ids:?}, not as the single id {id}"
                )));
            }
        }
        Ok(tok)
    }

    /// Loads a `tokenizer.json`.
    pub fn from_file(path: &Path, end_id: Option<u32>) -> Result<Self> {
        let inner =
            Tokenizer::from_file(path).map_err(|e| tk_err(format!("{}: {e}", path.display())))?;
        Self::new(inner, end_id)
    }

    /// Trains a byte-level BPE tokenizer on `texts` (for from-scratch models): vocabulary of
    /// `vocab_size` entries including ProD's special tokens and [`END_OF_TEXT`].
    pub fn train_bpe<I, S>(texts: I, vocab_size: usize, min_frequency: u64) -> Result<Self>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
    {
        let specials: Vec<AddedToken> = std::iter::once(END_OF_TEXT)
            .chain(SPECIAL_TOKENS)
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        let mut trainer = BpeTrainerBuilder::new()
            .vocab_size(vocab_size)
            .min_frequency(min_frequency)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .special_tokens(specials)
            .build();
        let mut tok = TokenizerBuilder::<
            BPE,
            NormalizerWrapper,
            ByteLevel,
            PostProcessorWrapper,
            ByteLevel,
        >::new()
        .with_model(BPE::default())
        .with_normalizer(None)
        .with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)))
        .with_post_processor(None)
        .with_decoder(Some(ByteLevel::default()))
        .build()
        .map_err(tk_err)?;
        tok.train(&mut trainer, texts).map_err(tk_err)?;
        Self::new(Tokenizer::from(tok), None)
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        self.inner
            .save(path, true)
            .map_err(|e| tk_err(format!("{}: {e}", path.display())))
    }

    pub fn inner(&self) -> &Tokenizer {
        &self.inner
    }

    /// Number of ids (the model's vocabulary must be at least this large).
    pub fn vocab_size(&self) -> usize {
        let max_id = self
            .inner
            .get_vocab(true)
            .values()
            .copied()
            .max()
            .map_or(0, |m| m as usize + 1);
        max_id.max(self.inner.get_vocab_size(true))
    }

    /// Token ids of `text`; special tokens inside it become their single ids. No BOS/EOS added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self
            .inner
            .encode(text, false)
            .map_err(tk_err)?
            .get_ids()
            .to_vec())
    }

    /// Text of `ids`, special tokens kept (a conditional proof needs its `<invoke>`s).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(tk_err)
    }

    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Id of a ProD special token (one of `SPECIAL_TOKENS`).
    pub fn special_id(&self, token: &str) -> Option<u32> {
        SPECIAL_TOKENS
            .iter()
            .position(|t| *t == token)
            .map(|i| self.special[i])
    }

    pub fn t0_id(&self, t0: T0) -> u32 {
        match t0 {
            T0::UseInvoke => self.special[0],
            T0::NoInvoke => self.special[1],
        }
    }

    pub fn use_invoke_id(&self) -> u32 {
        self.special[SPECIAL_TOKENS
            .iter()
            .position(|t| *t == USE_INVOKE)
            .unwrap_or(0)]
    }

    pub fn no_invoke_id(&self) -> u32 {
        self.special[SPECIAL_TOKENS
            .iter()
            .position(|t| *t == NO_INVOKE)
            .unwrap_or(1)]
    }

    pub fn true_id(&self) -> u32 {
        self.special[SPECIAL_TOKENS
            .iter()
            .position(|t| *t == TRUE_TOKEN)
            .unwrap_or(4)]
    }

    pub fn false_id(&self) -> u32 {
        self.special[SPECIAL_TOKENS
            .iter()
            .position(|t| *t == FALSE_TOKEN)
            .unwrap_or(5)]
    }

    /// The token that ends a target (and stops sampling).
    pub fn end_id(&self) -> u32 {
        self.end_id
    }
}

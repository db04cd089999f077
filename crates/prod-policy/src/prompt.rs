//! Prompts and targets exactly as the paper builds them (§3.1, §3.2, §4.1):
//! - input `x = c s`: the context truncated to its last `N` tokens (default 1,000), then the
//!   statement;
//! - target: `t0` + conditional proof + the end token; the loss covers the target only (an
//!   option also puts the statement in the loss, as the paper does for built-in libraries);
//! - forced prefixes: `x <no_invoke>` at the depth limit, `x <use_invoke>` when RL forces it;
//! - `P(<use_invoke>)` normalised over the two `t0` tokens, and the value
//!   `P(<true>) / (P(<true>) + P(<false>))`.
//!
//! Layout in tokens: `tail_N(tok(context + "\n")) ++ tok(statement + "\n") ++ target`. Context
//! and statement are tokenised separately so that truncation never changes the statement's
//! tokens.

use prod_core::{ConditionalProof, T0};

use crate::model::Llama;
use crate::tokenizer::ProdTokenizer;
use crate::{PolicyError, Result};

/// The prompt `x = c s` with the context truncated to its last `context_tokens` tokens.
pub fn prompt_ids(tok: &ProdTokenizer, context: &str, statement: &str, context_tokens: usize) -> Result<Vec<u32>> {
    let context = context.trim_end();
    let mut ids = if context.is_empty() { Vec::new() } else { tok.encode(&format!("{context}\n"))? };
    if ids.len() > context_tokens {
        ids.drain(..ids.len() - context_tokens);
    }
    let statement = statement.trim();
    if statement.is_empty() {
        return Err(PolicyError::BadInput("empty statement".into()));
    }
    ids.extend(tok.encode(&format!("{statement}\n"))?);
    Ok(ids)
}

/// The prompt with a forced `t0` (`<no_invoke>` at the depth limit, `<use_invoke>` when RL
/// forces lemma proposals): sampling continues after it.
pub fn with_forced_t0(tok: &ProdTokenizer, prompt: &[u32], t0: T0) -> Vec<u32> {
    let mut ids = prompt.to_vec();
    ids.push(tok.t0_id(t0));
    ids
}

/// One training example: a token sequence, the index of its first loss token, and its weight.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainExample {
    pub ids: Vec<u32>,
    /// Tokens `ids[loss_from..]` are predicted in the loss; must be ≥ 1.
    pub loss_from: usize,
    pub weight: f32,
}

impl TrainExample {
    pub fn target_tokens(&self) -> usize {
        self.ids.len().saturating_sub(self.loss_from)
    }
}

/// What goes into an SFT / REINFORCE example.
#[derive(Clone, Copy, Debug)]
pub struct ExampleOptions {
    pub context_tokens: usize,
    /// Longest allowed sequence; longer examples are an error (the caller skips and counts them).
    pub max_seq_len: usize,
    /// Also train on the statement (the paper does this for built-in libraries).
    pub statement_in_loss: bool,
}

/// `(x, t0 + conditional proof + end, weight)`. The target must parse as a conditional proof
/// (starts with `t0`, balanced `<invoke>`s), so malformed data never trains the policy.
pub fn policy_example(
    tok: &ProdTokenizer,
    context: &str,
    statement: &str,
    conditional_proof: &str,
    weight: f32,
    opts: &ExampleOptions,
) -> Result<TrainExample> {
    ConditionalProof::parse(conditional_proof)
        .map_err(|e| PolicyError::BadInput(format!("target is not a conditional proof: {e}")))?;
    if !weight.is_finite() {
        return Err(PolicyError::BadInput(format!("weight {weight} is not finite")));
    }
    let context = context.trim_end();
    let mut ids = if context.is_empty() { Vec::new() } else { tok.encode(&format!("{context}\n"))? };
    if ids.len() > opts.context_tokens {
        ids.drain(..ids.len() - opts.context_tokens);
    }
    let statement_start = ids.len();
    let statement = statement.trim();
    if statement.is_empty() {
        return Err(PolicyError::BadInput("empty statement".into()));
    }
    ids.extend(tok.encode(&format!("{statement}\n"))?);
    let target_start = ids.len();
    ids.extend(tok.encode(conditional_proof.trim())?);
    ids.push(tok.end_id());
    if ids.len() > opts.max_seq_len {
        return Err(PolicyError::BadInput(format!(
            "example has {} tokens, more than max_seq_len {}",
            ids.len(),
            opts.max_seq_len
        )));
    }
    // The first token has no left context to be predicted from.
    let loss_from = if opts.statement_in_loss { statement_start.max(1) } else { target_start };
    Ok(TrainExample { ids, loss_from, weight })
}

/// `(x, <true> or <false>)` for the value model: the loss is on that one token.
pub fn value_example(tok: &ProdTokenizer, prompt: &[u32], proved: bool, weight: f32) -> Result<TrainExample> {
    if prompt.is_empty() {
        return Err(PolicyError::BadInput("empty prompt".into()));
    }
    let mut ids = prompt.to_vec();
    ids.push(if proved { tok.true_id() } else { tok.false_id() });
    Ok(TrainExample { loss_from: prompt.len(), ids, weight })
}

/// `P(a) / (P(a) + P(b))` for the next token after each prompt; equals `sigmoid(l_a - l_b)`,
/// computed that way so it is exact even when both probabilities underflow.
pub fn pair_probability(model: &Llama, prompts: &[&[u32]], a: u32, b: u32) -> Result<Vec<f64>> {
    if prompts.is_empty() {
        return Ok(Vec::new());
    }
    let logits = model.next_token_logits(prompts)?;
    let pick = |id: u32| -> Result<Vec<f32>> {
        Ok(logits.narrow(1, id as usize, 1)?.squeeze(1)?.to_vec1::<f32>()?)
    };
    let (la, lb) = (pick(a)?, pick(b)?);
    Ok(la.iter().zip(&lb).map(|(&x, &y)| 1.0 / (1.0 + (y as f64 - x as f64).exp())).collect())
}

/// `π(<use_invoke> | x)` normalised over the two `t0` tokens (RL forces `<use_invoke>` for the
/// top half of a batch by this number).
pub fn p_use_invoke(model: &Llama, tok: &ProdTokenizer, prompts: &[&[u32]]) -> Result<Vec<f64>> {
    pair_probability(model, prompts, tok.use_invoke_id(), tok.no_invoke_id())
}

/// The value `V(x) = P(<true>) / (P(<true>) + P(<false>))`.
pub fn value(model: &Llama, tok: &ProdTokenizer, prompts: &[&[u32]]) -> Result<Vec<f64>> {
    pair_probability(model, prompts, tok.true_id(), tok.false_id())
}

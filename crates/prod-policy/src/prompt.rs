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
//! tokens. A training example longer than `max_seq_len` loses more of its context (still its
//! last tokens) before it is refused: only statement + target beyond the limit drop it, so
//! long proofs (which are more often the ones proposing lemmas) are not lost to a context
//! that could have been shortened.

use prod_core::{ConditionalProof, ParseErrorKind, T0};

use crate::model::Llama;
use crate::tokenizer::ProdTokenizer;
use crate::{PolicyError, Result};

/// The two texts a prompt is made of, each tokenised on its own: the context part (`None` for
/// an empty context) and the statement part. Every prompt and training example is built from
/// these, and so is the template shipped with a model ([`template`]); the export to RL
/// frameworks writes the same two parts as one text (`prod_core::prompt::prompt_text`).
pub use prod_core::prompt::prompt_parts;

/// The prompt `x = c s` with the context truncated to its last `context_tokens` tokens.
pub fn prompt_ids(
    tok: &ProdTokenizer,
    context: &str,
    statement: &str,
    context_tokens: usize,
) -> Result<Vec<u32>> {
    if statement.trim().is_empty() {
        return Err(PolicyError::BadInput("empty statement".into()));
    }
    let (context, statement) = prompt_parts(context, statement);
    let mut ids = match context {
        Some(c) => tok.encode(&c)?,
        None => Vec::new(),
    };
    if ids.len() > context_tokens {
        ids.drain(..ids.len() - context_tokens);
    }
    ids.extend(tok.encode(&statement)?);
    Ok(ids)
}

/// The model-folder file that ships the prompt format ([`template`]).
pub const TEMPLATE_FILE: &str = "prompt_template.json";

/// The prompt format as data, for users of a saved model outside ProD (`transformers`,
/// vLLM): the prompt and completion as text templates with `{context}`, `{statement}` and
/// `{conditional_proof}` placeholders, built by [`prompt_parts`] itself, the end and special
/// tokens, and the rules that text alone cannot say (separate tokenisation, the left cut).
/// Not a chat template: a ProD policy is a plain causal LM over this layout.
pub fn template(end_token: &str) -> serde_json::Value {
    use prod_core::conditional::{
        END_INVOKE, FALSE_TOKEN, INVOKE, NO_INVOKE, TRUE_TOKEN, USE_INVOKE,
    };
    let (context, statement) = prompt_parts("{context}", "{statement}");
    let (_, bare) = prompt_parts("", "{statement}");
    serde_json::json!({
        "format": "prod-conditional-proof",
        "version": 1,
        "prompt": format!("{}{statement}", context.unwrap_or_default()),
        "prompt_without_context": bare,
        "completion": format!("{{conditional_proof}}{end_token}"),
        "end_token": end_token,
        "t0_tokens": [USE_INVOKE, NO_INVOKE],
        "lemma_tokens": [INVOKE, END_INVOKE],
        "value_tokens": [TRUE_TOKEN, FALSE_TOKEN],
        "default_context_tokens": 1000,
        "rules": [
            "{context} is the context with trailing whitespace removed; {statement} the statement, trimmed. An empty context gives prompt_without_context.",
            "The context part (up to and including its newline) and the statement part are tokenised separately, with no BOS or EOS added, and their ids concatenated; the context's ids are cut from the left to its last context_tokens tokens (the paper keeps the last 1000).",
            "The completion is a conditional proof: <use_invoke> (it may propose lemmas as <invoke> Lemma name : statement. </invoke> among its tactics) or <no_invoke>, then the proof, then the end token.",
            "At the depth limit <no_invoke> is appended to the prompt ids and sampling continues after it; RL may force <use_invoke> the same way.",
            "P(<use_invoke>) is the next-token probability after the prompt normalised over the two t0 tokens; a value model is read the same way over <true> and <false>.",
            "Sampling defaults (temperature) are in generation_config.json."
        ],
    })
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
    /// Longest allowed sequence. The context is cut further (still to its LAST tokens) until
    /// the example fits; only an example whose statement and target alone exceed it is refused
    /// ([`DropReason::TooLong`]).
    pub max_seq_len: usize,
    /// Also train on the statement (the paper does this for built-in libraries).
    pub statement_in_loss: bool,
}

/// Why a dataset line yields no training example.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Statement + target + end token exceed `max_seq_len` even with no context at all.
    TooLong,
    /// The target does not parse as a conditional proof.
    BadTarget,
    /// Empty statement.
    EmptyStatement,
    /// Weight not finite.
    BadWeight,
    /// The tokenizer failed.
    Tokenizer,
}

impl DropReason {
    /// Snake-case name, for reports (`skipped_by_reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::TooLong => "too_long",
            DropReason::BadTarget => "bad_target",
            DropReason::EmptyStatement => "empty_statement",
            DropReason::BadWeight => "bad_weight",
            DropReason::Tokenizer => "tokenizer",
        }
    }
}

/// A dataset line that yields no training example: the reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub reason: DropReason,
    pub message: String,
}

/// A built training example and how much of its context it kept.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltExample {
    pub example: TrainExample,
    /// Tokens of the whole context (`tok(context + "\n")`).
    pub context_tokens_full: usize,
    /// Tokens of it kept: `min(full, context_tokens, max_seq_len − statement − target)`.
    pub context_tokens_kept: usize,
}

impl BuiltExample {
    /// The context was cut further than `context_tokens` to fit `max_seq_len`.
    pub fn cut_for_length(&self, opts: &ExampleOptions) -> bool {
        self.context_tokens_kept < self.context_tokens_full.min(opts.context_tokens)
    }
}

/// `(x, t0 + conditional proof + end, weight)`. The target must parse as a conditional proof
/// (starts with `t0`, balanced `<invoke>`s; [`ConditionalProof::parse`], which leaves the
/// markers beside strings and comments to the prover's language), so malformed data never
/// trains the policy.
pub fn policy_example(
    tok: &ProdTokenizer,
    context: &str,
    statement: &str,
    conditional_proof: &str,
    weight: f32,
    opts: &ExampleOptions,
) -> Result<TrainExample> {
    build_policy_example(tok, context, statement, conditional_proof, weight, opts)
        .map(|b| b.example)
        .map_err(|d| PolicyError::BadInput(d.message))
}

/// [`policy_example`] with the reason of a refusal and the context actually kept.
///
/// Layout: `tail_k(tok(context + "\n")) ++ tok(statement + "\n") ++ tok(target) ++ end`, with
/// `k = min(context_tokens, max_seq_len − |statement| − |target| − 1)`: the context, never the
/// statement or the proof, gives way to the length limit (the paper keeps the LAST tokens of
/// the context), so an example is refused only when statement and proof alone do not fit.
pub fn build_policy_example(
    tok: &ProdTokenizer,
    context: &str,
    statement: &str,
    conditional_proof: &str,
    weight: f32,
    opts: &ExampleOptions,
) -> std::result::Result<BuiltExample, Dropped> {
    let drop = |reason, message: String| Dropped { reason, message };
    let tokenizer = |e: PolicyError| drop(DropReason::Tokenizer, e.to_string());
    // The policy does not know the prover: the language-less parse refuses only what no
    // language parses, except where markers stand beside string or comment delimiters, which
    // only the proof's language can place (training data is written from proofs parsed in it).
    match ConditionalProof::parse(conditional_proof) {
        Err(e) if e.kind != ParseErrorKind::NeedsLanguage => {
            return Err(drop(
                DropReason::BadTarget,
                format!("target is not a conditional proof: {e}"),
            ))
        }
        _ => {}
    }
    if !weight.is_finite() {
        return Err(drop(
            DropReason::BadWeight,
            format!("weight {weight} is not finite"),
        ));
    }
    if statement.trim().is_empty() {
        return Err(drop(DropReason::EmptyStatement, "empty statement".into()));
    }
    let (context, statement) = prompt_parts(context, statement);
    let mut body = tok.encode(&statement).map_err(tokenizer)?;
    let statement_len = body.len();
    body.extend(tok.encode(conditional_proof.trim()).map_err(tokenizer)?);
    body.push(tok.end_id());
    if body.len() > opts.max_seq_len {
        return Err(drop(
            DropReason::TooLong,
            format!(
                "statement and proof have {} tokens, more than max_seq_len {}",
                body.len(),
                opts.max_seq_len
            ),
        ));
    }
    let mut ids = match context {
        Some(c) => tok.encode(&c).map_err(tokenizer)?,
        None => Vec::new(),
    };
    let full = ids.len();
    let keep = full
        .min(opts.context_tokens)
        .min(opts.max_seq_len - body.len());
    ids.drain(..full - keep);
    let statement_start = ids.len();
    let target_start = statement_start + statement_len;
    ids.extend(body);
    // The first token has no left context to be predicted from.
    let loss_from = if opts.statement_in_loss {
        statement_start.max(1)
    } else {
        target_start
    };
    Ok(BuiltExample {
        example: TrainExample {
            ids,
            loss_from,
            weight,
        },
        context_tokens_full: full,
        context_tokens_kept: keep,
    })
}

/// `(x, <true> or <false>)` for the value model: the loss is on that one token.
pub fn value_example(
    tok: &ProdTokenizer,
    prompt: &[u32],
    proved: bool,
    weight: f32,
) -> Result<TrainExample> {
    if prompt.is_empty() {
        return Err(PolicyError::BadInput("empty prompt".into()));
    }
    let mut ids = prompt.to_vec();
    ids.push(if proved {
        tok.true_id()
    } else {
        tok.false_id()
    });
    Ok(TrainExample {
        loss_from: prompt.len(),
        ids,
        weight,
    })
}

/// `P(a) / (P(a) + P(b))` for the next token after each prompt; equals `sigmoid(l_a - l_b)`,
/// computed that way so it is exact even when both probabilities underflow.
pub fn pair_probability(model: &Llama, prompts: &[&[u32]], a: u32, b: u32) -> Result<Vec<f64>> {
    if prompts.is_empty() {
        return Ok(Vec::new());
    }
    let logits = model.next_token_logits(prompts)?;
    let pick = |id: u32| -> Result<Vec<f32>> {
        Ok(logits
            .narrow(1, id as usize, 1)?
            .squeeze(1)?
            .to_vec1::<f32>()?)
    };
    let (la, lb) = (pick(a)?, pick(b)?);
    Ok(la
        .iter()
        .zip(&lb)
        .map(|(&x, &y)| 1.0 / (1.0 + (y as f64 - x as f64).exp()))
        .collect())
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

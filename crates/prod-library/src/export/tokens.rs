//! The export's token counts (`prod dataset export --tokenizer`): lengths in a model's tokens, so that a trainer's limits
//! (verl's `data.max_prompt_length` / `max_response_length`, OpenRLHF's `--data.max_len`, TRL's
//! `max_completion_length`) can be set from the export instead of guessed: the prompts' and the
//! ground-truth completions' token counts, as percentiles in `export.json`; and
//! `--prompt-tokens N`, which cuts each prompt's context (at line starts) until the prompt
//! fits in `N` tokens, so a trainer never cuts it (verl refuses or cuts an over-long prompt,
//! OpenRLHF cuts it from the left, which loses the context the prompt keeps on purpose).
//!
//! Counts are the tokenizer's own (`tokenizer.json`, the Hugging Face `tokenizers` format),
//! without special tokens, of the prompt text as exported: exact for a model folder written by
//! prod, whose chat template passes the message through; a chat template of another model adds
//! its own tokens around it.

use std::path::{Path, PathBuf};

/// A tokenizer that counts tokens.
pub struct TokenCounter {
    tokenizer: tokenizers::Tokenizer,
    pub path: PathBuf,
}

impl TokenCounter {
    /// `path`: a `tokenizer.json`, or a model folder that holds one.
    pub fn load(path: &Path) -> Result<Self, String> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        let tokenizer = tokenizers::Tokenizer::from_file(&file)
            .map_err(|e| format!("--tokenizer {}: {e}", file.display()))?;
        Ok(TokenCounter {
            tokenizer,
            path: file,
        })
    }

    /// Tokens of `text`, no special tokens added.
    pub fn count(&self, text: &str) -> Result<usize, String> {
        let e = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| format!("{}: cannot encode: {e}", self.path.display()))?;
        Ok(e.len())
    }
}

/// Nearest-rank percentiles of token counts.
#[derive(serde::Serialize, Debug, PartialEq, Eq)]
pub struct Percentiles {
    pub rows: usize,
    pub p50: usize,
    pub p90: usize,
    pub p95: usize,
    pub p99: usize,
    pub max: usize,
}

/// The percentiles of `counts` (all zero for none).
pub fn percentiles(mut counts: Vec<usize>) -> Percentiles {
    counts.sort_unstable();
    let at = |q: usize| -> usize {
        if counts.is_empty() {
            return 0;
        }
        // Nearest rank: the smallest count with at least q% of the rows at or below it.
        let rank = (q * counts.len()).div_ceil(100).max(1);
        counts[rank - 1]
    };
    Percentiles {
        rows: counts.len(),
        p50: at(50),
        p90: at(90),
        p95: at(95),
        p99: at(99),
        max: counts.last().copied().unwrap_or(0),
    }
}

/// What `export.json` records under `tokens`.
#[derive(serde::Serialize, Debug)]
pub struct TokenReport {
    pub tokenizer: String,
    /// The prompts as written (after `--prompt-tokens`).
    pub prompt: Percentiles,
    /// The rows' ground-truth completions (`conditional_proof`: what SFT teaches the model to
    /// write), with the end token a model adds after it not counted.
    pub ground_truth_completion: Percentiles,
}

/// The longest prompt, among `prompt_for(tail)` for the tails of `context` that start at a line
/// start (`tails`, longest first; each at most the byte bound already), whose token count is
/// at most `budget`, with that count; `None` when even the statement alone (the empty tail,
/// which the caller puts last) does not fit. A binary search: a longer tail never has fewer
/// tokens but where a tokenizer merges across the cut, and the count checked is always the
/// chosen prompt's own.
pub fn fit_prompt(
    counter: &TokenCounter,
    tails: &[&str],
    budget: usize,
    prompt_for: impl Fn(&str) -> String,
) -> Result<Option<(String, usize)>, String> {
    let check = |i: usize| -> Result<(String, usize), String> {
        let p = prompt_for(tails[i]);
        let n = counter.count(&p)?;
        Ok((p, n))
    };
    // tails[0] is the longest; find the smallest index whose prompt fits.
    let first = check(0)?;
    if first.1 <= budget {
        return Ok(Some(first));
    }
    let last = tails.len() - 1;
    let shortest = check(last)?;
    if shortest.1 > budget {
        return Ok(None);
    }
    let (mut lo, mut hi, mut best) = (0, last, shortest); // tails[lo] too long, tails[hi] fits
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        let got = check(mid)?;
        if got.1 <= budget {
            hi = mid;
            best = got;
        } else {
            lo = mid;
        }
    }
    Ok(Some(best))
}

/// The tails of `context` to try under a token budget, longest first: the one the byte bound
/// gives (`first`, as `--prompt-context-bytes` cuts it), then each shorter one that starts at a
/// line start, then the empty tail.
pub fn line_tails<'c>(context: &'c str, first: &'c str) -> Vec<&'c str> {
    let mut out = vec![];
    let mut t = first;
    while !t.is_empty() {
        out.push(t);
        t = t.find('\n').map_or("", |i| &t[i + 1..]);
    }
    debug_assert!(context.trim_end().ends_with(first));
    out.push("");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let p = percentiles((1..=100).collect());
        assert_eq!((p.p50, p.p90, p.p95, p.p99, p.max), (50, 90, 95, 99, 100));
        let p = percentiles(vec![7, 3]);
        assert_eq!((p.rows, p.p50, p.p99, p.max), (2, 3, 7, 7));
        assert_eq!(percentiles(vec![]).max, 0);
    }

    #[test]
    fn tails_are_line_starts_of_the_first_one() {
        let c = "A.\nBé.\nC.\n";
        assert_eq!(
            line_tails(c, "A.\nBé.\nC."),
            vec!["A.\nBé.\nC.", "Bé.\nC.", "C.", ""]
        );
        assert_eq!(line_tails(c, "é.\nC."), vec!["é.\nC.", "C.", ""]);
        assert_eq!(line_tails(c, ""), vec![""]);
    }
}

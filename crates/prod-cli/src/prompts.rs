//! `prod model prompts`: the prompt of every theorem of a dataset split as token ids, for a
//! sampler that runs elsewhere (`python/device/prod_device.py` on a GPU) and must build exactly
//! the prompts `prod eval` would: the context part and the statement part apart, so that the
//! sampler can put a proposed lemma's statement after the same context.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use sha2::{Digest, Sha256};

use crate::{exit, ranges};

/// The prompt token ids of a split's theorems, for a sampler that runs elsewhere.
///
/// Write the prompt token ids of a split's theorems, one JSON line each:
/// {"theorem", "statement", "context_key", "context_ids", "statement_ids"}.
///
/// `context_ids ++ statement_ids` is the prompt `prod eval` samples from (the context's last
/// --context-tokens tokens, then the statement); `statement_ids` is the statement part alone
/// (`statement.trim() + "\n"`), so that the prompt of a lemma proposed in the same context is
/// `context_ids ++ tok(lemma.trim() + "\n")`; `context_key` is the SHA-256 of the theorem's full
/// context (lemmas are shared by theorems only within the same context, as in Algorithm 1).
///
/// Example: prod model prompts --model ~/.cache/prod/models/smollm2-135m --dataset data/stdlib --out prompts.jsonl
#[derive(Args)]
pub struct PromptsArgs {
    /// Model folder whose tokenizer builds the prompts.
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub draw: crate::draw::DrawArgs,
    /// The context is cut to its last N tokens (paper: 1,000).
    #[arg(long, default_value_t = prod_core::Sampling::default().context_tokens, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// Output JSONL (written atomically).
    #[arg(long)]
    pub out: PathBuf,
}

fn write(a: &PromptsArgs) -> anyhow::Result<usize> {
    let bad = |m: String| anyhow::Error::new(prod_run::BadInput(m));
    let theorems = a.draw.load().map_err(bad)?;
    let cfg = prod_policy::LlamaConfig::load(&a.model.join("config.json"))
        .map_err(|e| bad(format!("model {}: {e}", a.model.display())))?;
    let tok = prod_policy::ProdTokenizer::from_file(&a.model.join("tokenizer.json"), cfg.eos_id())
        .map_err(|e| bad(format!("model {}: {e}", a.model.display())))?;
    let params = prod_run::NativeParams {
        sampling: prod_core::Sampling {
            context_tokens: a.context_tokens,
            ..prod_core::Sampling::default()
        },
        ..Default::default()
    };
    let mut tmp = a.out.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?,
    );
    for t in &theorems {
        let full = prod_run::policy::prompt_ids(&tok, &params, &t.context, &t.statement)
            .map_err(|e| bad(format!("theorem {}: {e}", t.id)))?;
        let (_, statement_part) = prod_policy::prompt::prompt_parts("", &t.statement);
        let st = tok.encode(&statement_part)?;
        let Some(ctx) = full.strip_suffix(st.as_slice()) else {
            anyhow::bail!(
                "theorem {}: the prompt does not end with its statement's tokens",
                t.id
            );
        };
        let line = serde_json::json!({
            "theorem": t.id, "statement": t.statement,
            "context_key": hex::encode(Sha256::digest(t.context.as_bytes())),
            "context_ids": ctx, "statement_ids": st,
        });
        writeln!(f, "{line}")?;
    }
    f.flush()?;
    drop(f);
    std::fs::rename(&tmp, &a.out).with_context(|| format!("write {}", a.out.display()))?;
    Ok(theorems.len())
}

pub fn run(a: PromptsArgs) -> i32 {
    match write(&a) {
        Ok(n) => {
            eprintln!("wrote the prompts of {n} theorems to {}", a.out.display());
            0
        }
        Err(e) if e.downcast_ref::<prod_run::BadInput>().is_some() => exit::bad_input(e),
        Err(e) => exit::failure(e),
    }
}

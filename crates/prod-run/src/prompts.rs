//! The prompt of every theorem of a draw as token ids, for a sampler that runs elsewhere
//! (`python/device/prod_device.py` on a GPU) and must build exactly the prompts `prod eval`
//! would (`prod model prompts`): the context part and the statement part apart, so that the
//! sampler can put a proposed lemma's statement after the same context. The trees it samples
//! come back through [`crate::trees`].

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use prod_library::theorem::Theorem;
use sha2::{Digest, Sha256};

use crate::BadInput;

/// Write one JSON line per theorem to `out` (atomically): {"theorem", "statement",
/// "context_key", "context_ids", "statement_ids"}, the prompt's context cut to its last
/// `context_tokens` tokens of `model`'s tokenizer. An unreadable model is bad input.
pub fn write_prompts(
    model: &Path,
    theorems: &[Theorem],
    context_tokens: usize,
    out: &Path,
) -> anyhow::Result<()> {
    let bad = |m: String| anyhow::Error::new(BadInput(m));
    let cfg = prod_policy::LlamaConfig::load(&model.join("config.json"))
        .map_err(|e| bad(format!("model {}: {e}", model.display())))?;
    let tok = prod_policy::ProdTokenizer::from_file(&model.join("tokenizer.json"), cfg.eos_id())
        .map_err(|e| bad(format!("model {}: {e}", model.display())))?;
    let params = crate::NativeParams {
        sampling: prod_core::Sampling {
            context_tokens,
            ..prod_core::Sampling::default()
        },
        ..Default::default()
    };
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    let mut f = std::io::BufWriter::new(file);
    for t in theorems {
        let full = crate::policy::prompt_ids(&tok, &params, &t.context, &t.statement)
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
    std::fs::rename(&tmp, out).with_context(|| format!("write {}", out.display()))
}

//! SFT data: dataset lines as the trainer reads them ([`DataLine`]), each line through the one
//! path to a training example ([`build_line`]: the policy's example or the value model's), and
//! the examples of many lines with the lines dropped, by reason ([`examples`]).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use prod_core::T0;
use prod_policy::prompt::{self, BuiltExample, ExampleOptions, TrainExample};
use prod_policy::ProdTokenizer;

use crate::BadInput;

/// One dataset line, as much of it as the policy needs.
#[derive(Clone, Debug)]
pub struct DataLine {
    /// 1-based line in its file.
    pub line: usize,
    pub id: String,
    pub context: String,
    pub statement: String,
    pub conditional_proof: Option<String>,
    /// A value-model line: the node's global correctness (the target is `<true>`/`<false>`).
    pub proved: Option<bool>,
    pub weight: f32,
    pub statement_in_loss: bool,
    /// The dataset's `variant` (`wo_lemmas`, `augmented`, `w_lemmas`), if the line has one.
    pub variant: Option<String>,
}

impl DataLine {
    /// A built dataset's example (the `n`-th of its file) as a policy line of weight 1.
    pub fn from_example(n: usize, e: prod_library::dataset::Example) -> Self {
        DataLine {
            line: n,
            id: e.id,
            context: e.context,
            statement: e.statement,
            conditional_proof: Some(e.conditional_proof),
            proved: None,
            weight: 1.0,
            statement_in_loss: false,
            variant: Some(e.variant),
        }
    }

    /// Does the line's proof start with `<use_invoke>`?
    pub fn uses_invoke(&self) -> bool {
        self.conditional_proof
            .as_deref()
            .is_some_and(|cp| cp.trim_start().starts_with(T0::UseInvoke.token()))
    }
}

fn bad(m: String) -> anyhow::Error {
    anyhow::Error::new(BadInput(m))
}

/// The lines of a JSONL file (the first `limit` non-blank ones): `statement` is required,
/// everything else optional. A file of a built dataset must be complete, as its `stats.json`
/// records it. Every error is the user's input ([`BadInput`]).
pub fn read_data_lines(path: &Path, limit: Option<usize>) -> anyhow::Result<Vec<DataLine>> {
    prod_library::output::check_unread_file(path).map_err(bad)?;
    let f = std::fs::File::open(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        let line = line.map_err(|e| bad(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(path, i + 1, &line)?);
    }
    Ok(out)
}

/// Line `n` of `path`.
fn parse_line(path: &Path, n: usize, line: &str) -> anyhow::Result<DataLine> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| bad(format!("{}:{n}: {e}", path.display())))?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    let statement = s("statement")
        .ok_or_else(|| bad(format!("{}:{n}: no \"statement\" string", path.display())))?;
    Ok(DataLine {
        line: n,
        id: s("id").unwrap_or_else(|| format!("line{n}")),
        context: s("context").unwrap_or_default(),
        statement,
        conditional_proof: s("conditional_proof"),
        proved: v.get("proved").and_then(|b| b.as_bool()),
        weight: v.get("weight").and_then(|w| w.as_f64()).unwrap_or(1.0) as f32,
        statement_in_loss: v
            .get("statement_in_loss")
            .and_then(|b| b.as_bool())
            .unwrap_or(false),
        variant: s("variant"),
    })
}

/// Which examples a training run takes from its lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Policy lines, and value lines where a line has `proved` instead of a proof.
    Any,
    /// Policy lines only (`t0 + proof + end`).
    Policy,
    /// Value lines only (`<true>`/`<false>` after the prompt).
    Value,
}

/// What became of one dataset line on its way to a training example.
pub enum LineOutcome {
    Kept(BuiltExample),
    /// A value line (no context accounting).
    KeptValue(TrainExample),
    /// The reason (`too_long`, `no_target`, …) and the message.
    Dropped(&'static str, String),
}

/// One line through exactly the path training takes (policy or value example).
pub fn build_line(
    tok: &ProdTokenizer,
    l: &DataLine,
    opts: &ExampleOptions,
    targets: Targets,
) -> LineOutcome {
    let (cp, proved) = match targets {
        Targets::Any => (&l.conditional_proof, l.proved),
        Targets::Policy => (&l.conditional_proof, None),
        Targets::Value => (&None, l.proved),
    };
    match (cp, proved) {
        // Value model (paper §3.2): prompt `c s`, target `<true>` or `<false>`.
        (None, Some(proved)) => {
            match prompt::prompt_ids(tok, &l.context, &l.statement, opts.context_tokens)
                .and_then(|p| prompt::value_example(tok, &p, proved, l.weight))
            {
                Ok(e) => LineOutcome::KeptValue(e),
                Err(e) => LineOutcome::Dropped("bad_value_line", e.to_string()),
            }
        }
        (Some(cp), _) => {
            let o = ExampleOptions {
                statement_in_loss: l.statement_in_loss,
                ..*opts
            };
            match prompt::build_policy_example(tok, &l.context, &l.statement, cp, l.weight, &o) {
                Ok(b) => LineOutcome::Kept(b),
                Err(d) => LineOutcome::Dropped(d.reason.as_str(), d.message),
            }
        }
        (None, None) => LineOutcome::Dropped("no_target", "no conditional_proof or proved".into()),
    }
}

/// Training examples of some lines, and the lines dropped, by reason.
pub struct Examples {
    pub examples: Vec<TrainExample>,
    pub dropped: BTreeMap<&'static str, usize>,
}

/// How many dropped lines of one set are told (`on_dropped`): enough to see what is wrong.
const DROPS_TOLD: usize = 3;

/// The examples of `lines`; the first few lines dropped for a reason worth telling (not lines
/// that are simply of the other kind) go to `on_dropped(line, message)`.
pub fn examples(
    tok: &ProdTokenizer,
    lines: &[DataLine],
    opts: &ExampleOptions,
    targets: Targets,
    on_dropped: &mut dyn FnMut(&DataLine, &str),
) -> Examples {
    let mut out = Vec::new();
    let mut dropped = BTreeMap::new();
    let mut told = 0;
    for l in lines {
        match build_line(tok, l, opts, targets) {
            LineOutcome::Kept(b) => out.push(b.example),
            LineOutcome::KeptValue(e) => out.push(e),
            LineOutcome::Dropped(reason, e) => {
                *dropped.entry(reason).or_insert(0) += 1;
                if reason != "no_target" && told < DROPS_TOLD {
                    told += 1;
                    on_dropped(l, &e);
                }
            }
        }
    }
    Examples {
        examples: out,
        dropped,
    }
}

/// Each line built into an example (any kind), in order. Tokenising is the cost (contexts of
/// up to 16 KiB): one chunk of lines per core.
pub fn build_lines_in_parallel(
    tok: &ProdTokenizer,
    lines: &[DataLine],
    opts: &ExampleOptions,
) -> anyhow::Result<Vec<LineOutcome>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let chunk = lines.len().div_ceil(threads).max(1);
    let outcomes: Vec<LineOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|c| {
                s.spawn(move || {
                    c.iter()
                        .map(|l| build_line(tok, l, opts, Targets::Any))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    if outcomes.len() != lines.len() {
        return Err(anyhow::anyhow!("a tokenizer thread failed"));
    }
    Ok(outcomes)
}

/// The `t0` of a policy example (`None` for value examples).
pub fn t0_id(tok: &ProdTokenizer, e: &TrainExample) -> Option<u32> {
    let t0 = [tok.use_invoke_id(), tok.no_invoke_id()];
    e.ids
        .get(e.loss_from..)?
        .iter()
        .copied()
        .find(|t| t0.contains(t))
}

/// Share of policy examples whose `t0` is `<use_invoke>` (value examples have no `t0`).
pub fn use_invoke_share(tok: &ProdTokenizer, data: &[TrainExample]) -> Option<f64> {
    let t0: Vec<u32> = data.iter().filter_map(|e| t0_id(tok, e)).collect();
    (!t0.is_empty())
        .then(|| t0.iter().filter(|&&t| t == tok.use_invoke_id()).count() as f64 / t0.len() as f64)
}

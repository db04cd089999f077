//! What a training run would actually train on (`prod model data-stats`): every line through
//! [`super::build_line`], counted in total and per `variant` — lines kept and dropped (by
//! reason), the `<use_invoke>` share before and after, contexts cut to fit.

use std::collections::BTreeMap;

use prod_policy::prompt::ExampleOptions;
use prod_policy::ProdTokenizer;

use super::data::{build_lines_in_parallel, DataLine, LineOutcome};

/// Counts for one group of lines.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DataCounts {
    pub lines: usize,
    pub use_invoke_lines: usize,
    pub use_invoke_share_lines: f64,
    pub examples: usize,
    pub use_invoke_examples: usize,
    pub use_invoke_share_examples: f64,
    pub dropped_by_reason: BTreeMap<&'static str, usize>,
    /// Examples whose context was cut below `context_tokens` so that they fit.
    pub context_cut_for_length: usize,
    /// What the older rule kept (context cut to `context_tokens` only, an example still too
    /// long dropped).
    pub kept_if_dropped_not_cut: usize,
    pub use_invoke_if_dropped_not_cut: usize,
    pub use_invoke_share_if_dropped_not_cut: f64,
    /// Mean tokens per kept example, and of its context.
    pub mean_tokens: f64,
    pub mean_context_tokens: f64,
}

impl DataCounts {
    /// This group's row of [`DataStats::table`].
    fn row(&self, name: &str) -> String {
        let dropped: Vec<String> = self
            .dropped_by_reason
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        format!(
            "{:<12} {:>7} {:>7.1}% {:>7} {:>7.1}% {:>9} {:>9} {:>7.1}% {:>9.0}  {}\n",
            name,
            self.lines,
            100.0 * self.use_invoke_share_lines,
            self.examples,
            100.0 * self.use_invoke_share_examples,
            self.context_cut_for_length,
            self.kept_if_dropped_not_cut,
            100.0 * self.use_invoke_share_if_dropped_not_cut,
            self.mean_tokens,
            if dropped.is_empty() {
                "-".into()
            } else {
                dropped.join(", ")
            }
        )
    }

    fn add(&mut self, use_invoke: bool, outcome: &LineOutcome, opts: &ExampleOptions) {
        self.lines += 1;
        self.use_invoke_lines += use_invoke as usize;
        match outcome {
            LineOutcome::Kept(b) => {
                self.examples += 1;
                self.use_invoke_examples += use_invoke as usize;
                self.context_cut_for_length += b.cut_for_length(opts) as usize;
                let body = b.example.ids.len() - b.context_tokens_kept;
                if b.context_tokens_full.min(opts.context_tokens) + body <= opts.max_seq_len {
                    self.kept_if_dropped_not_cut += 1;
                    self.use_invoke_if_dropped_not_cut += use_invoke as usize;
                }
                self.mean_tokens += b.example.ids.len() as f64;
                self.mean_context_tokens += b.context_tokens_kept as f64;
            }
            LineOutcome::KeptValue(e) => {
                self.examples += 1;
                self.kept_if_dropped_not_cut += 1;
                self.mean_tokens += e.ids.len() as f64;
            }
            LineOutcome::Dropped(reason, _) => {
                *self.dropped_by_reason.entry(reason).or_insert(0) += 1
            }
        }
    }

    fn finish(&mut self) {
        let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        self.use_invoke_share_lines = share(self.use_invoke_lines, self.lines);
        self.use_invoke_share_examples = share(self.use_invoke_examples, self.examples);
        self.use_invoke_share_if_dropped_not_cut = share(
            self.use_invoke_if_dropped_not_cut,
            self.kept_if_dropped_not_cut,
        );
        let n = self.examples.max(1) as f64;
        self.mean_tokens /= n;
        self.mean_context_tokens /= n;
    }
}

/// The counts of a set of lines: in total and per variant (`(none)` for lines without one).
#[derive(Clone, Debug, Default)]
pub struct DataStats {
    pub total: DataCounts,
    pub by_variant: BTreeMap<String, DataCounts>,
}

impl DataStats {
    /// The table `prod model data-stats` prints: a heading naming `data` and the options, one
    /// row per variant and the total, a legend.
    pub fn table(&self, data: &std::path::Path, opts: &ExampleOptions) -> String {
        use std::fmt::Write as _;
        let mut o = format!(
            "{}: max_seq_len {}, context_tokens {}\n",
            data.display(),
            opts.max_seq_len,
            opts.context_tokens
        );
        let _ = writeln!(
            o,
            "{:<12} {:>7} {:>8} {:>7} {:>8} {:>9} {:>9} {:>8} {:>9}  dropped",
            "variant",
            "lines",
            "use_inv",
            "kept",
            "use_inv",
            "cut_len",
            "old_kept",
            "old_use",
            "mean_tok"
        );
        for (v, c) in &self.by_variant {
            o += &c.row(v);
        }
        o += &self.total.row("total");
        o += "(use_inv: share whose t0 is <use_invoke>; cut_len: context cut below context_tokens to fit; old_*: the rule that dropped instead of cutting)\n";
        o
    }
}

/// Every line built into an example as training would (in parallel), counted.
pub fn data_stats(
    tok: &ProdTokenizer,
    lines: &[DataLine],
    opts: &ExampleOptions,
) -> anyhow::Result<DataStats> {
    let outcomes = build_lines_in_parallel(tok, lines, opts)?;
    let mut stats = DataStats::default();
    for (l, o) in lines.iter().zip(&outcomes) {
        let use_invoke = l.uses_invoke();
        stats.total.add(use_invoke, o, opts);
        let variant = l.variant.clone().unwrap_or_else(|| "(none)".into());
        stats
            .by_variant
            .entry(variant)
            .or_default()
            .add(use_invoke, o, opts);
    }
    stats.total.finish();
    stats.by_variant.values_mut().for_each(DataCounts::finish);
    Ok(stats)
}

/// What `prod model data-stats` measures: a model's tokenizer over a data file, cut as
/// training would (feature `clap`: its flags).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DataStatsRequest {
    /// Model directory whose tokenizer is used.
    #[cfg_attr(feature = "clap", arg(long))]
    pub model: std::path::PathBuf,
    /// Dataset JSONL to measure (e.g. sft.jsonl).
    #[cfg_attr(feature = "clap", arg(long))]
    pub data: std::path::PathBuf,
    /// Only the first N lines of --data.
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub limit: Option<usize>,
    /// Longest training sequence, in tokens (as `prod model train`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = prod_policy::PolicyConfig::default().max_seq_len,
        value_parser = prod_core::range::parse::positive_usize))]
    pub max_seq_len: usize,
    /// The context is cut to its last N tokens (as `prod model train`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = prod_policy::PolicyConfig::default().context_tokens,
        value_parser = prod_core::range::parse::positive_usize))]
    pub context_tokens: usize,
}

impl DataStatsRequest {
    /// The examples' shape the request asks for.
    pub fn options(&self) -> ExampleOptions {
        ExampleOptions {
            context_tokens: self.context_tokens,
            max_seq_len: self.max_seq_len,
            statement_in_loss: false,
        }
    }

    /// Every line counted ([`data_stats`]) with the model's tokenizer, loaded without the
    /// weights; the JSON form has the request and the seconds it took.
    pub fn measure(&self) -> anyhow::Result<(DataStats, serde_json::Value)> {
        let cfg = prod_policy::LlamaConfig::load(&self.model.join("config.json"))?;
        let tok = ProdTokenizer::from_file(&self.model.join("tokenizer.json"), cfg.eos_id())?;
        let lines = super::read_data_lines(&self.data, self.limit)?;
        let start = std::time::Instant::now();
        let stats = data_stats(&tok, &lines, &self.options())?;
        let json = serde_json::json!({
            "data": self.data, "max_seq_len": self.max_seq_len, "context_tokens": self.context_tokens,
            "total": stats.total, "by_variant": stats.by_variant, "seconds": start.elapsed().as_secs_f64(),
        });
        Ok((stats, json))
    }
}

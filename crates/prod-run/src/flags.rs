//! The flags of the commands that sample and evaluate, and what they make: `prod eval`'s
//! [`EvalJob`] (the config file's `[check]` section — `--config`, else `$PROD_CONFIG`, else
//! ./prod.toml —, then the flags, resolved once here), `prod model sample`'s sampler settings,
//! and the sampling options both take.

use std::path::PathBuf;

use clap::Args;
use prod_policy::sample::SamplingParams;
use prod_policy::DecodeWeights;

use crate::job::{BadInput, CoqFlags, CoqJobConfig, EvalJob, HammerBaseline};
use crate::{EvalOptions, FirstToken, NativeParams};

/// How samples are drawn: `prod model sample` and `prod eval` take the same options, those of
/// [`prod_core::Sampling`] (declared there with their defaults and ranges), and the native
/// sampler's weights.
#[derive(Args, Debug, Clone)]
pub struct SamplingFlags {
    #[command(flatten)]
    pub sampling: prod_core::Sampling,
    /// Weights the decoding steps read: f32 (exact) or q8 (block-quantised copies: 4 bits
    /// where that is exact, as for a model imported from a Q4 GGUF, else 8 bits; about 3×
    /// faster at batch 1). A prompt longer than one token is prefilled in f32.
    #[arg(long, default_value_t = NativeParams::default().decode_weights)]
    pub decode_weights: DecodeWeights,
}

/// What `prod model sample` is given, but for how it prints.
#[derive(Args)]
pub struct SampleFlags {
    /// Model directory (config.json, model.safetensors, tokenizer.json).
    #[arg(long)]
    pub model: PathBuf,
    /// A raw text prompt (no ProD formatting).
    #[arg(long, conflicts_with = "data")]
    pub prompt: Option<String>,
    /// Dataset JSONL: one prompt per line from its context and statement.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Only the first N lines of --data.
    #[arg(long, value_parser = prod_core::range::parse::positive_usize)]
    pub limit: Option<usize>,
    /// The proof language of --data's samples: whether a sample parses as a conditional proof
    /// depends on where its strings and comments are.
    #[arg(long, value_enum, default_value_t = prod_prover::ProverKind::Coq)]
    pub prover: prod_prover::ProverKind,
    /// Force the first token (the paper forces <no_invoke> at the depth limit).
    #[arg(long, value_enum)]
    pub force_t0: Option<prod_core::T0>,
    /// Samples per prompt.
    #[arg(long, default_value_t = SamplingParams::default().n,
          value_parser = prod_core::range::parse::positive_usize)]
    pub n: usize,
    #[command(flatten)]
    pub sampling: SamplingFlags,
    /// Sampling seed.
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
}

impl SampleFlags {
    /// The sampler's parameters, stopping at the token `end`.
    pub fn params(&self, end: u32) -> SamplingParams {
        let s = &self.sampling.sampling;
        SamplingParams {
            n: self.n,
            temperature: s.temperature,
            top_p: s.top_p,
            max_new_tokens: s.max_new_tokens,
            seed: self.seed,
            stop: vec![end],
            decode_weights: self.sampling.decode_weights,
        }
    }
}

/// What `prod eval` is given, but for how it prints.
#[derive(Args)]
pub struct EvalFlags {
    /// Model directory (config.json, model.safetensors, tokenizer.json).
    #[arg(long, required_unless_present = "trees")]
    pub model: Option<PathBuf>,
    /// Check proof trees sampled elsewhere instead of sampling: a trees JSONL
    /// (docs/models.md; written by python/device/prod_device.py). Trees per theorem, depth and
    /// temperature come from the file; every node is checked, solved and scored as usual.
    #[arg(long, conflicts_with_all = ["model", "theorems", "samples", "remote_url"])]
    pub trees: Option<PathBuf>,
    /// Dataset directory written by `prod dataset build`.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Evaluate this many theorems of the split, drawn with --seed (default: all).
    #[arg(long, value_parser = prod_core::range::parse::positive_usize)]
    pub theorems: Option<usize>,
    /// n: independent proof trees per theorem (default: the largest k).
    #[arg(long, value_parser = prod_core::range::parse::positive_u32)]
    pub samples: Option<u32>,
    #[command(flatten)]
    pub options: EvalOptions,
    /// The prover: `coq` (runs here) or `isabelle` (a running Isabelle2022 server, the
    /// `Isabelle` options below over `[check.isabelle]` of prod.toml; the dataset must be an
    /// Isabelle one).
    #[arg(long, value_enum, default_value_t = prod_prover::ProverKind::Coq)]
    pub prover: prod_prover::ProverKind,
    #[command(flatten)]
    pub isabelle: prod_prover::IsabelleServer,
    /// Reads `[check.coq]` (`workers`, `step_timeout_s`, `root`, `load_paths`) or, with
    /// `--prover isabelle`, `[check.isabelle]`.
    #[command(flatten)]
    pub config: prod_prover::flags::ConfigArg,
    #[command(flatten)]
    pub prover_root: prod_prover::flags::ProverArgs,
    /// Coq workers (Isabelle: connections to the server) [default: the config file's, else 2].
    #[arg(long, value_parser = prod_core::range::parse::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit of one proof step, seconds [default: the config file's, else 10].
    #[arg(long, value_parser = prod_core::range::parse::positive_u32)]
    pub timeout: Option<u32>,
    #[command(flatten)]
    pub sampling: SamplingFlags,
    /// How a sample's first token is drawn: free (from the model's whole distribution) or t0
    /// (from the two `t0` tokens' probabilities at the sampling temperature, the ratio
    /// Algorithm 2 uses, then the rest given it): every sample then begins as a conditional
    /// proof does, for a briefly fine-tuned model that does not yet always put a `t0` first.
    #[arg(long, value_enum, default_value_t = FirstToken::Free)]
    pub first_token: FirstToken,
    /// Disable `hammer.` expansion (faster; `hammer.` steps then fail).
    #[arg(long)]
    pub no_hammer: bool,
    /// Expand `hammer.` with the fixed tactic list only, without CoqHammer's provers (those
    /// installed — E and CVC4 on Debian — at the hammer's `atp_limit_s`, 2 s, each; each
    /// goal's result is remembered, so a goal met in many samples calls them once).
    #[arg(long)]
    pub no_atp: bool,
    /// Do not evaluate CoqHammer alone on the same theorems (one `hammer.` per theorem, same
    /// checker; reported beside pass@k with the paired difference). Coq only.
    #[arg(long)]
    pub no_hammer_baseline: bool,
    /// Verification cache of the CoqHammer-alone baseline, shared across runs (default
    /// $PROD_CACHE/hammer-baseline.sqlite, PROD_CACHE defaulting to ~/.cache/prod).
    #[arg(long)]
    pub hammer_baseline_cache: Option<PathBuf>,
    /// Beside the dataset's own bindings (its stats.json), which are always used.
    #[command(flatten)]
    pub load_paths: prod_prover::flags::LoadPathArgs,
    /// Verification cache file (default RUN_DIR/cache.sqlite).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Run directory (created; an existing one is resumed). A start that fails before any
    /// work removes what it created there, so the corrected command is not refused.
    #[arg(long)]
    pub out: PathBuf,
    /// Sample from this OpenAI-compatible server (e.g. http://127.0.0.1:8000) instead of the
    /// native model; --model then only provides the tokenizer (tokenizer.json).
    #[arg(long, help_heading = "Remote inference")]
    pub remote_url: Option<String>,
    /// The server on the other end (how probabilities are asked for, which fields are sent).
    #[arg(long, value_enum, default_value_t = prod_remote::ServerKind::Vllm, help_heading = "Remote inference")]
    pub remote_server: prod_remote::ServerKind,
    /// The served model's name (vLLM --served-model-name).
    #[arg(long, default_value = "prod", help_heading = "Remote inference")]
    pub remote_model: String,
    #[command(flatten)]
    pub shared: crate::job::SharedStoreFlags,
}

/// The Isabelle settings of an `--prover isabelle` run: `[check.isabelle]` of the config file
/// (`--config`, else `$PROD_CONFIG`, else ./prod.toml), then the flags.
fn isabelle_config(
    a: &EvalFlags,
    mut cfg: prod_check_isabelle::IsabelleCheckConfig,
) -> prod_check_isabelle::IsabelleCheckConfig {
    a.isabelle.apply(&mut cfg);
    cfg.workers = a.workers.unwrap_or(cfg.workers);
    cfg.step_timeout_s = a.timeout.unwrap_or(cfg.step_timeout_s);
    if a.no_hammer {
        cfg.hammer.enabled = false;
    }
    cfg
}

/// The Coq settings of a run: `[check.coq]` of the config file, then the flags.
fn coq_config(
    a: &EvalFlags,
    from_file: prod_check_coq::CoqCheckConfig,
) -> Result<CoqJobConfig, String> {
    let flags = CoqFlags {
        workers: a.workers,
        step_timeout_s: a.timeout,
        no_hammer: a.no_hammer,
        no_atp: a.no_atp,
        load_paths: a.load_paths.load_path.clone(),
        root: a.prover_root.coq_root.clone(),
    };
    CoqJobConfig::resolve(from_file, flags).map_err(|e| e.to_string())
}

impl EvalFlags {
    /// The evaluation the flags ask for, over the config file's `[check]` section.
    pub fn job(&self) -> Result<EvalJob, BadInput> {
        job_of(self)
    }
}

fn job_of(a: &EvalFlags) -> Result<EvalJob, BadInput> {
    let section = a.config.check_section().map_err(BadInput)?;
    let o = &a.options;
    let samples = a
        .samples
        .unwrap_or_else(|| o.ks.iter().copied().max().unwrap_or(1) as u32);
    Ok(EvalJob {
        model: a.model.clone().unwrap_or_default(),
        trees: a.trees.clone(),
        dataset: a.dataset.clone(),
        theorems: a.theorems,
        options: EvalOptions {
            samples,
            temperature: a.sampling.sampling.temperature,
            ..o.clone()
        },
        sampling: NativeParams {
            sampling: a.sampling.sampling.clone(),
            seed: o.seed,
            decode_weights: a.sampling.decode_weights,
            first_token: a.first_token,
            ..NativeParams::default()
        },
        prover: a.prover,
        isabelle: match a.prover {
            prod_prover::ProverKind::Isabelle => Some(isabelle_config(a, section.isabelle)),
            prod_prover::ProverKind::Coq => None,
        },
        coq: coq_config(a, section.coq).map_err(BadInput)?,
        out: a.out.clone(),
        cache: a.cache.clone(),
        remote: a.remote_url.as_ref().map(|url| {
            let base = prod_remote::RemoteConfig::for_server(a.remote_server, url);
            prod_remote::RemoteConfig {
                model: a.remote_model.clone(),
                seed: Some(o.seed),
                ..base
            }
        }),
        postgres: a.shared.apply(None),
        hammer_baseline: HammerBaseline {
            enabled: !a.no_hammer_baseline && !a.no_hammer,
            cache: a.hammer_baseline_cache.clone(),
        },
    })
}

//! `prod eval`: test-time proof trees (paper Algorithm 1), checked by Coq or Isabelle, pass@k.

use std::path::PathBuf;

use clap::Args;
use prod_run::policy::FirstToken;
use prod_run::prod_report::summary;
use prod_run::{BadInput, Bars, CoqFlags, CoqJobConfig, EvalJob, EvalOptions, NativeParams};

use crate::{exit, ranges};

/// Evaluate a model: test-time proof trees (Algorithm 1) checked by the prover, pass@k with CIs.
///
/// For each theorem of a dataset split, `--samples` independent proof trees
/// (paper Algorithm 1: lemmas proposed at depth < `--depth` become the next level's theorems,
/// `<no_invoke>` is forced at the depth limit); every node is checked by the prover (the Coq
/// pool, or an Isabelle server with `--prover isabelle`; with the verification cache); global
/// correctness per tree; the assembled proof of each proved tree is re-checked cold (`coqc`, or
/// a fresh Isabelle session; a theorem counts as proved only if that passes); pass@k (unbiased
/// estimator, 95% CIs), the Fig. 5 depth table and the novel-lemma share.
///
/// Everything goes into RUN_DIR/run.sqlite; rerunning the same command resumes (nothing is
/// sampled or checked twice; nodes lost to infra failures are retried). Results:
/// RUN_DIR/run.json (render with `prod report RUN_DIR/run.json --out DIR`).
///
/// Examples:
///
///   prod eval --model models/toy-sft --dataset data/stdlib --theorems 20 --k 1,2,4 --out runs/eval1
///
///   prod eval --prover isabelle --server 127.0.0.1:4711 --password PW --dirs /opt/afp/thys --model models/afp-sft --dataset data/afp --k 1,4 --out runs/afp1
///
///   prod eval --trees gpu/prod-sft/trees.jsonl --dataset data/stdlib --k 1,4,8 --out runs/gpu-sft
#[derive(Args)]
pub struct EvalArgs {
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
    #[arg(long, value_parser = ranges::positive_usize)]
    pub theorems: Option<usize>,
    /// n: independent proof trees per theorem (default: the largest k).
    #[arg(long, value_parser = ranges::positive_u32)]
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
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit of one proof step, seconds [default: the config file's, else 10].
    #[arg(long, value_parser = ranges::positive_u32)]
    pub timeout: Option<u32>,
    #[command(flatten)]
    pub sampling: crate::model::SamplingArgs,
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
    /// Print one JSON summary line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
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
    pub shared: prod_run::job::SharedStoreFlags,
}

/// Hammer leaves (`prod_run::leaves`): on unless turned off; the help and the default are
/// declared there once.
#[derive(Args, Debug, Clone, Copy)]
pub struct HammerLeavesArg {
    #[arg(long, help = prod_run::leaves::OFF_HELP)]
    pub no_hammer_leaves: bool,
}

/// The Isabelle settings of an `--prover isabelle` run: `[check.isabelle]` of the config file
/// (`--config`, else `$PROD_CONFIG`, else ./prod.toml), then the flags.
fn isabelle_config(
    a: &EvalArgs,
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
    a: &EvalArgs,
    from_file: prod_check_coq::CoqCheckConfig,
) -> anyhow::Result<CoqJobConfig> {
    let flags = CoqFlags {
        workers: a.workers,
        step_timeout_s: a.timeout,
        no_hammer: a.no_hammer,
        no_atp: a.no_atp,
        load_paths: a.load_paths.load_path.clone(),
        root: a.prover_root.coq_root.clone(),
    };
    CoqJobConfig::resolve(from_file, flags).map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn job_of(a: &EvalArgs) -> anyhow::Result<EvalJob> {
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
        coq: coq_config(a, section.coq).map_err(|e| BadInput(format!("{e:#}")))?,
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
        hammer_baseline: prod_run::HammerBaseline {
            enabled: !a.no_hammer_baseline && !a.no_hammer,
            cache: a.hammer_baseline_cache.clone(),
        },
    })
}

/// Exit code of a job error: 3 for an accepted canary (a soundness alarm), 2 for the user's
/// input, 1 otherwise.
pub fn error_code(e: anyhow::Error) -> i32 {
    if e.downcast_ref::<prod_run::canary::CanaryAccepted>()
        .is_some()
    {
        exit::soundness_alarm(e)
    } else if e.downcast_ref::<BadInput>().is_some()
        || e.downcast_ref::<prod_run::StoreError>()
            .is_some_and(|s| matches!(s, prod_run::StoreError::Mismatch(_)))
    {
        exit::bad_input(e)
    } else {
        exit::failure(e)
    }
}

pub fn run(a: EvalArgs) -> i32 {
    let bars = Bars::for_stderr(a.json);
    let job = match job_of(&a) {
        Ok(j) => j,
        Err(e) => return error_code(e),
    };
    // A shared (PostgreSQL) store is not in --out: nothing there to undo.
    let result = match job.postgres {
        None => prod_run::job::undoing_a_failed_start(&a.out, &bars, || {
            prod_run::run_eval_job(&job, &bars)
        }),
        Some(_) => prod_run::run_eval_job(&job, &bars),
    };
    match result {
        Ok((report, _)) => {
            let path = a.out.join("run.json");
            let out = if a.json {
                format!("{}\n", summary::summary_json(&report, &path))
            } else {
                eprintln!(
                    "wrote {} (render: prod report {} --out DIR)",
                    path.display(),
                    path.display()
                );
                summary::terminal(&report)
            };
            use std::io::Write as _;
            exit::written(std::io::stdout().lock().write_all(out.as_bytes()))
        }
        Err(e) => error_code(e),
    }
}

#[cfg(test)]
mod exit_code_tests {
    #[test]
    fn an_accepted_canary_exits_3_bad_input_2_other_failures_1() {
        let alarm = prod_run::canary::CanaryAccepted(Default::default(), "x".into());
        assert_eq!(super::error_code(alarm.into()), 3);
        assert_eq!(super::error_code(prod_run::BadInput("x".into()).into()), 2);
        assert_eq!(super::error_code(anyhow::anyhow!("x")), 1);
    }
}

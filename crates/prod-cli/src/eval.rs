//! `prod eval`: test-time proof trees (paper Algorithm 1), checked by Coq or Isabelle, pass@k.

use std::path::PathBuf;

use clap::Args;
use prod_run::prod_report::summary;
use prod_run::{
    BadInput, Bars, CoqFlags, CoqJobConfig, EvalJob, EvalOptions, NativeParams, SharedStore,
};

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
    /// Which split file of --dataset holds the theorems (test, val, train, rl, …).
    #[arg(long, default_value_t = EvalOptions::default().split)]
    pub split: String,
    /// Evaluate this many theorems of the split, drawn with --seed (default: all).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub theorems: Option<usize>,
    /// pass@k for these k (comma-separated; each ≤ --samples).
    #[arg(long, value_delimiter = ',', default_values_t = EvalOptions::default().ks, value_parser = ranges::positive_usize)]
    pub k: Vec<usize>,
    /// n: independent proof trees per theorem (default: the largest k).
    #[arg(long, value_parser = ranges::positive_u32)]
    pub samples: Option<u32>,
    /// Depth limit of the trees (paper: 2; 0: no lemma proposals, `<no_invoke>` forced).
    #[arg(long, default_value_t = EvalOptions::default().depth)]
    pub depth: u32,
    /// The prover: `coq` (runs here) or `isabelle` (a running Isabelle2022 server, the
    /// `Isabelle` options below over `[check.isabelle]` of prod.toml; the dataset must be an
    /// Isabelle one).
    #[arg(long, value_enum, default_value_t = prod_prover::ProverKind::Coq)]
    pub prover: prod_prover::ProverKind,
    #[command(flatten)]
    pub isabelle: crate::prover::IsabelleArgs,
    /// Reads `[check.coq]` (`workers`, `step_timeout_s`, `root`, `load_paths`) or, with
    /// `--prover isabelle`, `[check.isabelle]`.
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
    #[command(flatten)]
    pub prover_root: crate::prover::ProverArgs,
    /// Coq workers (Isabelle: connections to the server) [default: the config file's, else 2].
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit of one proof step, seconds [default: the config file's, else 10].
    #[arg(long, value_parser = ranges::positive_u32)]
    pub timeout: Option<u32>,
    /// Time limit of one cold `coqc` re-check of an assembled proof, seconds.
    #[arg(long, default_value_t = EvalOptions::default().final_timeout_s, value_parser = ranges::positive_u64)]
    pub final_timeout: u64,
    /// Bootstrap rounds of each 95% interval (drawn from the stream of --seed; the interval is
    /// the hull of the bootstrap and Wilson's score interval).
    #[arg(long, default_value_t = EvalOptions::default().bootstrap, value_parser = ranges::positive_usize)]
    pub bootstrap: usize,
    #[command(flatten)]
    pub sampling: crate::model::SamplingArgs,
    /// Seed of sampling, of the theorem draw and of the bootstrap.
    #[arg(long, default_value_t = EvalOptions::default().seed)]
    pub seed: u64,
    /// Name of this evaluation in the report.
    #[arg(long, default_value_t = EvalOptions::default().name)]
    pub name: String,
    /// How a sample's first token is drawn: free (from the model's whole distribution) or t0
    /// (from the two `t0` tokens' probabilities at the sampling temperature, the ratio
    /// Algorithm 2 uses, then the rest given it): every sample then begins as a conditional
    /// proof does, for a briefly fine-tuned model that does not yet always put a `t0` first.
    #[arg(long, value_enum, default_value_t = FirstTokenArg::Free)]
    pub first_token: FirstTokenArg,
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
    #[command(flatten)]
    pub hammer_leaves: HammerLeavesArg,
    /// Beside the dataset's own bindings (its stats.json), which are always used.
    #[command(flatten)]
    pub load_paths: crate::prover::LoadPathArgs,
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
    pub shared: SharedStoreArgs,
}

/// Hammer leaves (`prod_run::leaves`): on unless turned off; the help and the default are
/// declared there once.
#[derive(Args, Debug, Clone, Copy)]
pub struct HammerLeavesArg {
    #[arg(long, help = prod_run::leaves::OFF_HELP)]
    pub no_hammer_leaves: bool,
}

/// Scale-out: keep the run store in PostgreSQL and let `prod queue work` processes on other
/// machines do the checks.
#[derive(Args, Debug, Clone)]
pub struct SharedStoreArgs {
    /// PostgreSQL database for the run store and its check queue (postgres://user@host/db or
    /// "host=/run/postgresql dbname=prod"). Start workers anywhere with
    /// `prod queue work --store URL --run RUN` (same [coq] settings: a worker only takes
    /// checks made for its exact checker configuration).
    #[arg(long, help_heading = "Scale-out")]
    pub store: Option<String>,
    /// The run's name in the database (default: the --out directory's name).
    #[arg(long, requires = "store", help_heading = "Scale-out")]
    pub run: Option<String>,
    /// Only the queue workers check; this process samples, waits and trains.
    #[arg(long, requires = "store", help_heading = "Scale-out")]
    pub no_check_here: bool,
}

impl SharedStoreArgs {
    /// The flags over `base` (a config file's `[postgres]`), if any store is set.
    pub fn apply(&self, base: Option<SharedStore>) -> Option<SharedStore> {
        let mut s = match (&self.store, base) {
            (Some(url), b) => SharedStore {
                url: url.clone(),
                ..b.unwrap_or_default()
            },
            (None, Some(b)) => b,
            (None, None) => return None,
        };
        if let Some(r) = &self.run {
            s.run = r.clone();
        }
        if self.no_check_here {
            s.check_here = false;
        }
        Some(s)
    }
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
    let section = a
        .config
        .check_section()
        .map_err(|e| BadInput(format!("{e:#}")))?;
    let samples = a
        .samples
        .unwrap_or_else(|| a.k.iter().copied().max().unwrap_or(1) as u32);
    Ok(EvalJob {
        model: a.model.clone().unwrap_or_default(),
        trees: a.trees.clone(),
        dataset: a.dataset.clone(),
        theorems: a.theorems,
        options: EvalOptions {
            name: a.name.clone(),
            split: a.split.clone(),
            ks: a.k.clone(),
            samples,
            depth: a.depth,
            final_timeout_s: a.final_timeout,
            bootstrap: a.bootstrap,
            seed: a.seed,
            temperature: a.sampling.sampling.temperature,
            hammer_leaves: !a.hammer_leaves.no_hammer_leaves,
        },
        sampling: NativeParams {
            sampling: a.sampling.sampling.clone(),
            seed: a.seed,
            decode_weights: a.sampling.decode_weights,
            first_token: match a.first_token {
                FirstTokenArg::Free => prod_run::policy::FirstToken::Free,
                FirstTokenArg::T0 => prod_run::policy::FirstToken::T0,
            },
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
                seed: Some(a.seed),
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

/// `--first-token`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FirstTokenArg {
    Free,
    T0,
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

//! `prod eval`: test-time proof trees (paper Algorithm 1), checked by Coq, pass@k.

use std::path::PathBuf;

use clap::Args;
use prod_run::{BadInput, Bars, CoqJobConfig, EvalJob, EvalOptions, NativeParams, SharedStore};

use crate::{exit, ranges};

/// Evaluate a model on a dataset split: for each theorem, `--samples` independent proof trees
/// (paper Algorithm 1: lemmas proposed at depth < `--depth` become the next level's theorems,
/// `<no_invoke>` is forced at the depth limit); every node is checked by the Coq pool (with
/// the verification cache); global correctness per tree; the assembled proof of each proved
/// tree is re-checked cold by `coqc` (a theorem counts as proved only if that passes); pass@k
/// (unbiased estimator, bootstrap 95% CIs), the Fig. 5 depth table and the novel-lemma share.
///
/// Everything goes into RUN_DIR/run.sqlite; rerunning the same command resumes (nothing is
/// sampled or checked twice; nodes lost to infra failures are retried). Results:
/// RUN_DIR/run.json (render with `prod report RUN_DIR/run.json --out DIR`).
///
/// Example:
///   prod eval --model models/toy-sft --dataset data/stdlib --theorems 20 --k 1,2,4 --out runs/eval1
#[derive(Args)]
pub struct EvalArgs {
    /// Model directory (config.json, model.safetensors, tokenizer.json).
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset directory written by `prod dataset build`.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Which split file of --dataset holds the theorems (test, val, train, rl, …).
    #[arg(long, default_value = "test")]
    pub split: String,
    /// Evaluate this many theorems of the split, drawn with --seed (default: all).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub theorems: Option<usize>,
    /// pass@k for these k (comma-separated; each ≤ --samples).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16", value_parser = ranges::positive_usize)]
    pub k: Vec<usize>,
    /// n: independent proof trees per theorem (default: the largest k).
    #[arg(long, value_parser = ranges::positive_u32)]
    pub samples: Option<u32>,
    /// Depth limit of the trees (paper: 2; 0: no lemma proposals, `<no_invoke>` forced).
    #[arg(long, default_value_t = 2)]
    pub depth: u32,
    /// Coq workers.
    #[arg(long, default_value_t = 2, value_parser = ranges::positive_usize)]
    pub workers: usize,
    /// Time limit of one proof step, seconds.
    #[arg(long, default_value_t = prod_check_coq::config::DEFAULT_STEP_TIMEOUT_S, value_parser = ranges::positive_u32)]
    pub timeout: u32,
    /// Time limit of one cold `coqc` re-check of an assembled proof, seconds.
    #[arg(long, default_value_t = 120, value_parser = ranges::positive_u64)]
    pub final_timeout: u64,
    #[command(flatten)]
    pub sampling: crate::model::SamplingArgs,
    /// Seed of sampling, of the theorem draw and of the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Name of this evaluation in the report.
    #[arg(long, default_value = "eval")]
    pub name: String,
    /// Disable `hammer.` expansion (faster; `hammer.` steps then fail).
    #[arg(long)]
    pub no_hammer: bool,
    /// Beside the dataset's own bindings (its stats.json), which are always used.
    #[command(flatten)]
    pub load_paths: crate::prover::LoadPathArgs,
    /// Verification cache file (default RUN_DIR/cache.sqlite).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Run directory (created; an existing one is resumed).
    #[arg(long)]
    pub out: PathBuf,
    /// Print one JSON summary line on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
    /// Sample from this OpenAI-compatible server (e.g. http://127.0.0.1:8000) instead of the
    /// native model; --model then only provides the tokenizer (tokenizer.json).
    #[arg(long, help_heading = "Remote inference")]
    pub remote_url: Option<String>,
    /// The server: vllm, sglang or llama_cpp (one completion per request, text prompts).
    #[arg(long, default_value = "vllm", value_parser = ["vllm", "sglang", "llama_cpp"], help_heading = "Remote inference")]
    pub remote_server: String,
    /// The served model's name (vLLM --served-model-name).
    #[arg(long, default_value = "prod", help_heading = "Remote inference")]
    pub remote_model: String,
    #[command(flatten)]
    pub shared: SharedStoreArgs,
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

pub fn job_of(a: &EvalArgs) -> EvalJob {
    let samples = a
        .samples
        .unwrap_or_else(|| a.k.iter().copied().max().unwrap_or(1) as u32);
    EvalJob {
        model: a.model.clone(),
        dataset: a.dataset.clone(),
        theorems: a.theorems,
        options: EvalOptions {
            name: a.name.clone(),
            split: a.split.clone(),
            ks: a.k.clone(),
            samples,
            depth: a.depth,
            final_timeout_s: a.final_timeout,
            bootstrap: 1000,
            seed: a.seed,
            temperature: a.sampling.temperature,
        },
        sampling: NativeParams {
            temperature: a.sampling.temperature,
            top_p: a.sampling.top_p,
            max_new_tokens: a.sampling.max_new_tokens,
            context_tokens: a.sampling.context_tokens,
            seed: a.seed,
            decode_weights: a.sampling.decode_weights,
            ..NativeParams::default()
        },
        coq: CoqJobConfig {
            workers: a.workers,
            step_timeout_s: a.timeout,
            hammer: !a.no_hammer,
            hammer_atp: false,
            load_paths: a.load_paths.load_path.clone(),
        },
        out: a.out.clone(),
        cache: a.cache.clone(),
        remote: a.remote_url.as_ref().map(|url| {
            let base = if a.remote_server == "llama_cpp" {
                prod_remote::RemoteConfig::llama_cpp(url)
            } else {
                prod_remote::RemoteConfig {
                    base_url: url.clone(),
                    server: if a.remote_server == "sglang" {
                        prod_remote::ServerKind::Sglang
                    } else {
                        prod_remote::ServerKind::Vllm
                    },
                    ..Default::default()
                }
            };
            prod_remote::RemoteConfig {
                model: a.remote_model.clone(),
                temperature: a.sampling.temperature,
                top_p: a.sampling.top_p,
                max_tokens: a.sampling.max_new_tokens,
                context_tokens: a.sampling.context_tokens,
                seed: Some(a.seed),
                ..base
            }
        }),
        postgres: a.shared.apply(None),
    }
}

/// Exit code of a job error: 2 for the user's input, 1 otherwise.
pub fn error_code(e: anyhow::Error) -> i32 {
    if e.downcast_ref::<BadInput>().is_some()
        || e.downcast_ref::<prod_run::StoreError>()
            .is_some_and(|s| matches!(s, prod_run::StoreError::Mismatch(_)))
    {
        exit::bad_input(e)
    } else {
        exit::failure(e)
    }
}

/// One summary line: pass@k estimates with CIs.
pub fn summary_json(
    report: &prod_run::prod_report::RunReport,
    run_json: &std::path::Path,
) -> serde_json::Value {
    let evals: Vec<serde_json::Value> = report
        .evaluations
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name, "theorems": e.theorems, "samples": e.samples_per_theorem,
                "pass_at_k": e.pass_at_k.iter().map(|p| serde_json::json!({"k": p.k, "estimate": p.estimate, "ci": [p.ci_low, p.ci_high]})).collect::<Vec<_>>(),
                "checked_nodes": e.checked_nodes, "infra_nodes": e.infra_nodes, "novel_lemma_share": e.novel_lemma_share,
                "use_invoke_share_root": e.use_invoke_share_root, "proposals": e.proposals,
                "sampled_trees_height_ge1": e.sampled_trees_height_ge1,
                "node_outcomes": e.node_outcomes.as_ref().map(|o| serde_json::json!({
                    "nodes": o.nodes, "proved": o.proved, "failed": o.failed, "rejected": o.rejected,
                    "timed_out": o.timed_out, "infra": o.infra, "globally_correct": o.globally_correct,
                })),
            })
        })
        .collect();
    serde_json::json!({"run": run_json.display().to_string(), "evaluations": evals})
}

pub fn print_human(report: &prod_run::prod_report::RunReport) {
    for e in &report.evaluations {
        eprintln!(
            "{}: {} theorems, {} trees each (T = {})",
            e.name, e.theorems, e.samples_per_theorem, e.temperature
        );
        for p in &e.pass_at_k {
            eprintln!(
                "  pass@{:<2} = {:5.1}%  (95% CI {:.1}–{:.1}%, {} theorems judged, {} skipped)",
                p.k,
                100.0 * p.estimate,
                100.0 * p.ci_low,
                100.0 * p.ci_high,
                p.theorems_judged,
                p.theorems_skipped
            );
        }
        eprintln!(
            "  nodes checked {}, lost to infra {}",
            e.checked_nodes, e.infra_nodes
        );
        if let Some(o) = &e.node_outcomes {
            eprintln!(
                "  nodes: {} proved, {} failed, {} rejected, {} timed out, {} infra ({} globally correct)",
                o.proved, o.failed, o.rejected, o.timed_out, o.infra, o.globally_correct
            );
            if let Some(f) = o.top_failures.first() {
                eprintln!("  most common failure ({} nodes): {}", f.count, f.message);
            }
        }
        if let Some(s) = e.use_invoke_share_root {
            eprintln!("  <use_invoke> share of root samples: {:.1}%", 100.0 * s);
        }
        if let (Some(p), Some(t)) = (e.proposals, e.sampled_trees_height_ge1) {
            eprintln!(
                "  lemmas proposed: {p}; proved trees of height >= 1 built only from sampled nodes: {t}"
            );
        }
        if let Some(s) = e.novel_lemma_share {
            eprintln!(
                "  novel lemmas among proved trees' lemmas: {:.1}%",
                100.0 * s
            );
        }
    }
    for n in &report.notes {
        eprintln!("  {n}");
    }
}

pub fn run(a: EvalArgs) -> i32 {
    let bars = Bars::terminal(a.json);
    let job = job_of(&a);
    match prod_run::run_eval_job(&job, &bars) {
        Ok((report, _)) => {
            let path = a.out.join("run.json");
            if a.json {
                println!("{}", summary_json(&report, &path));
            } else {
                print_human(&report);
                eprintln!(
                    "wrote {} (render: prod report {} --out DIR)",
                    path.display(),
                    path.display()
                );
            }
            0
        }
        Err(e) => error_code(e),
    }
}

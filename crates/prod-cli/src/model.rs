//! `prod model …`: the native policy — create, import, sample, train, benchmark.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use clap::{Args, Subcommand, ValueEnum};
use prod_core::{Sampling, T0};
use prod_policy::bench::BenchOptions;
use prod_policy::model::Llama;
use prod_policy::prompt::ExampleOptions;
use prod_policy::sample::SamplingParams;
use prod_policy::{DecodeWeights, LlamaConfig, ModelShape, PolicyConfig, ProdTokenizer};
use prod_run::sample_bench::SampleBench;
use prod_run::sample_data::SampleSession;
use prod_run::sft::{self, SftEvent, SftSettings, SftSource, ShuffleRng, Steps, Targets};

use crate::{exit, ranges};

/// `prod train sft|value`: the names for the two trainers (`prod model train` is SFT
/// and, on lines with `proved`, value training at once).
#[derive(Subcommand)]
pub enum TrainCommand {
    /// Supervised fine-tuning of the policy on a dataset's JSONL.
    ///
    /// Supervised fine-tuning of the policy on dataset JSONL (context, statement,
    /// conditional_proof): weighted cross-entropy on `t0 + proof + end`.
    ///
    /// Example: prod train sft --model models/toy --data data/stdlib/train.jsonl --steps 200 --out models/toy-sft
    Sft(TrainArgs),
    /// The value model V (paper §3.2): is a lemma provable?
    ///
    /// The value model V (paper §3.2) on JSONL lines {context, statement, proved: true|false}:
    /// cross-entropy on `<true>`/`<false>` after the prompt; lines without `proved` are skipped.
    ///
    /// Example: prod train value --model models/toy-sft --data runs/r1/values.jsonl --out models/toy-value
    Value(TrainArgs),
}

pub fn run_train(cmd: TrainCommand) -> i32 {
    exit_code(match cmd {
        TrainCommand::Sft(a) => train_with(a, Targets::Policy),
        TrainCommand::Value(a) => train_with(a, Targets::Value),
    })
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Create a small random model with its own byte-level BPE tokenizer (tests, toy runs).
    ///
    /// Create a small random model with a byte-level BPE tokenizer trained on text (for tests
    /// and toy runs; ProD's special tokens are single tokens).
    ///
    /// `--corpus` files are plain text, or dataset JSONL (`.jsonl`: context, statement and
    /// conditional_proof of every line are used).
    ///
    /// Example: prod model init --corpus data/stdlib/train.jsonl --vocab-size 4000 --out models/toy
    Init(InitArgs),
    /// Import a llama.cpp GGUF file (Llama architecture) as a model directory.
    ///
    /// Turn a llama.cpp GGUF file (Llama architecture) into a model directory: weights
    /// dequantised to f32, tokenizer rebuilt from the metadata, ProD's special tokens added with
    /// embeddings initialised to the mean embedding.
    ///
    /// Example: prod model import-gguf SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
    ImportGguf(ImportArgs),
    #[command(verbatim_doc_comment)]
    /// Sample continuations: a raw prompt, or `t0 + conditional proof` for each dataset line.
    ///
    /// Sample continuations: a raw prompt, or `t0 + conditional proof` for every line of a
    /// dataset JSONL (prompt = last N context tokens + statement, as in the paper).
    ///
    /// Examples:
    ///   prod model sample --model models/smollm2 --prompt "The capital of France is" --n 2
    ///   prod model sample --model models/toy --data data/stdlib/test.jsonl --limit 20 --json
    Sample(SampleArgs),
    /// Supervised fine-tuning with weighted cross-entropy on `t0 + proof + end`.
    ///
    /// Supervised fine-tuning with weighted cross-entropy (loss on `t0 + proof + end` only),
    /// AdamW, linear warm-up then constant learning rate, accumulation to a macro batch.
    ///
    /// Data: dataset JSONL (context, statement, conditional_proof; optional weight,
    /// statement_in_loss). Writes a checkpoint (model + optimizer + position) to --out.
    /// Value-model lines have `proved` (true/false) instead of `conditional_proof`: the target is
    /// `<true>`/`<false>` after the prompt, so the same command trains the value model V.
    ///
    /// Example: prod model train --model models/toy --data data/stdlib/train.jsonl --eval data/stdlib/val.jsonl --steps 200 --out models/toy-sft
    Train(TrainArgs),
    /// Benchmark a model shape: sampling tok/s, training s/step, peak memory.
    ///
    /// Benchmark at a model shape: sampling tok/s at batch 1 and 8 (f32 and q8 decoding weights),
    /// training s/step at 256 tokens, peak memory, and the matmul-bound training limit measured
    /// on this machine.
    ///
    /// Example: prod model bench --shape smollm2-135m
    Bench(BenchArgs),
    /// Sampling as an evaluation asks for it: one prompt at a time against batched, side by side.
    ///
    /// Sampling as an evaluation asks for it, timed side by side: `--samples` proof trees' root
    /// requests for each of `--prompts` theorems (one call per tree, as `prod eval` makes
    /// them), first one prompt after another (each request prefilled and decoded alone, as the
    /// native policy did before it batched across prompts), then through the native policy
    /// (all requests of a call decoded together, `--batch-rows` per step, each prompt
    /// prefilled once). Both with f32 and with q8 decoding weights.
    ///
    /// Example: prod model bench-sample --model models/smollm2 --data data/stdlib/test.jsonl --prompts 60
    BenchSample(BenchSampleArgs),
    /// What a training run would actually train on: lines kept and dropped, by reason.
    ///
    /// What a training run would actually train on: every line of --data through the same
    /// path as `prod model train` (the model's tokenizer, the context cut to its last
    /// --context-tokens tokens and further until --max-seq-len fits), with the lines kept and
    /// dropped (by reason) and the share whose `t0` is `<use_invoke>` before and after, in
    /// total and per `variant`. `kept_if_dropped_not_cut` is what the older rule kept (context
    /// cut to --context-tokens only, an example still too long dropped).
    ///
    /// Example: prod model data-stats --model models/smollm2 --data data/stdlib/sft.jsonl --max-seq-len 512 --context-tokens 256
    DataStats(DataStatsArgs),
    MergeLora(crate::merge_lora::MergeLoraArgs),
    Prompts(crate::prompts::PromptsArgs),
}

#[derive(Args)]
pub struct DataStatsArgs {
    /// Model directory whose tokenizer is used.
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset JSONL to measure (e.g. sft.jsonl).
    #[arg(long)]
    pub data: PathBuf,
    /// Only the first N lines of --data.
    #[arg(long, value_parser = ranges::positive_usize)]
    pub limit: Option<usize>,
    /// Longest training sequence, in tokens (as `prod model train`).
    #[arg(long, default_value_t = PolicyConfig::default().max_seq_len, value_parser = ranges::positive_usize)]
    pub max_seq_len: usize,
    /// The context is cut to its last N tokens (as `prod model train`).
    #[arg(long, default_value_t = PolicyConfig::default().context_tokens, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InitArgs {
    /// Text files the BPE tokenizer is trained on (one or more; dataset JSONL gives each line's
    /// context, statement and conditional proof).
    #[arg(long, required = true, num_args = 1..)]
    pub corpus: Vec<PathBuf>,
    #[command(flatten)]
    pub shape: ModelShape,
    /// Seed of the random initial weights.
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
    /// Model directory to write (created).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args)]
pub struct ImportArgs {
    /// The GGUF file (llama.cpp, Llama architecture).
    pub file: PathBuf,
    /// Model directory to write (created).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args)]
pub struct SampleArgs {
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
    #[arg(long, value_parser = ranges::positive_usize)]
    pub limit: Option<usize>,
    /// The proof language of --data's samples: whether a sample parses as a conditional proof
    /// depends on where its strings and comments are.
    #[arg(long, value_enum, default_value_t = prod_prover::ProverKind::Coq)]
    pub prover: prod_prover::ProverKind,
    /// Force the first token (the paper forces <no_invoke> at the depth limit).
    #[arg(long, value_enum)]
    pub force_t0: Option<T0>,
    /// Samples per prompt.
    #[arg(long, default_value_t = SamplingParams::default().n, value_parser = ranges::positive_usize)]
    pub n: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Sampling seed.
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
    /// One JSON object per sample, then a summary object.
    #[arg(long)]
    pub json: bool,
}

/// How samples are drawn: `prod model sample` and `prod eval` take the same options, those of
/// [`Sampling`] (declared there with their defaults and ranges), and the native sampler's
/// weights.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Weights the decoding steps read: f32 (exact) or q8 (block-quantised copies: 4 bits
    /// where that is exact, as for a model imported from a Q4 GGUF, else 8 bits; about 3×
    /// faster at batch 1). A prompt longer than one token is prefilled in f32.
    #[arg(long, default_value_t = prod_run::NativeParams::default().decode_weights)]
    pub decode_weights: DecodeWeights,
}

#[derive(Args)]
pub struct TrainArgs {
    /// Model directory to start from (a checkpoint in --out is resumed instead).
    #[arg(long)]
    pub model: PathBuf,
    /// Training JSONL (a dataset's sft.jsonl, or lines with `proved` for the value model).
    #[arg(long)]
    pub data: PathBuf,
    /// Only the first N lines of --data.
    #[arg(long, value_parser = ranges::positive_usize)]
    pub limit: Option<usize>,
    /// Held-out JSONL for the eval loss (before and after training).
    #[arg(long)]
    pub eval: Option<PathBuf>,
    /// Only the first N eval lines.
    #[arg(long, default_value_t = sft::EVAL_LIMIT, value_parser = ranges::positive_usize)]
    pub eval_limit: usize,
    /// Checkpoint directory (created; an existing checkpoint there is resumed).
    #[arg(long, required_unless_present = "write_examples")]
    pub out: Option<PathBuf>,
    /// Train nothing: write the training examples, exactly as this command would train on them
    /// (same shuffle, --limit, context cut, length drops and oversampling; the model's token
    /// ids; weight 1), one JSON line each ({prompt, completion, weight, prompt_ids,
    /// completion_ids}, the format of `prod rl`'s rounds/round-N/examples.jsonl), for an
    /// external trainer on a GPU. Then:
    /// python python/train_weighted.py --data FILE --model MODEL --out SFT --lr 1e-4 --macro-batch 32 --epochs 2 --warmup-steps 20 --bf16
    /// (docs/models.md: from a dataset to Table 2 with a GPU SFT)
    #[arg(long, value_name = "FILE")]
    pub write_examples: Option<PathBuf>,
    /// Optimizer steps (default: one epoch).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub steps: Option<usize>,
    #[command(flatten)]
    pub trainer: PolicyConfig,
    /// Save a checkpoint every N steps (and at the end).
    #[arg(long, default_value_t = sft::SAVE_EVERY, value_parser = ranges::positive_usize)]
    pub save_every: usize,
    /// NOT the paper's method (off by default, 1): every policy example whose `t0` is
    /// `<use_invoke>` enters the training stream N times (the copies shuffled in with the rest),
    /// for small models that otherwise learn to propose almost nothing. The paper trains on
    /// `sft.jsonl` as it is; report runs that use this as such.
    #[arg(long, default_value_t = sft::NO_OVERSAMPLING, value_parser = ranges::positive_usize)]
    pub oversample_use_invoke: usize,
    /// Seed of the data order and of the oversampling shuffle.
    #[arg(long, default_value_t = prod_core::DEFAULT_SEED)]
    pub seed: u64,
    /// Print the training report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Shape {
    Smollm2_135m,
    Tiny,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Model shape for random weights: smollm2-135m or tiny.
    #[arg(long, value_enum, default_value = "smollm2-135m")]
    pub shape: Shape,
    /// Benchmark a model directory instead of random weights at --shape.
    #[arg(long)]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub options: BenchOptions,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct BenchSampleArgs {
    /// Model directory to sample from.
    #[arg(long)]
    pub model: PathBuf,
    /// Dataset JSONL whose first --prompts lines are the theorems (default: synthetic prompts
    /// of --context-tokens tokens).
    #[arg(long)]
    pub data: Option<PathBuf>,
    #[command(flatten)]
    pub bench: SampleBench,
    /// Print the figures as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ModelCommand) -> i32 {
    exit_code(match cmd {
        ModelCommand::MergeLora(a) => return crate::merge_lora::run(a),
        ModelCommand::Prompts(a) => return crate::prompts::run(a),
        ModelCommand::Init(a) => init(a),
        ModelCommand::ImportGguf(a) => import(a),
        ModelCommand::Sample(a) => sample_cmd(a),
        ModelCommand::Train(a) => train_with(a, Targets::Any),
        ModelCommand::Bench(a) => bench(a),
        ModelCommand::DataStats(a) => data_stats(a),
        ModelCommand::BenchSample(a) => bench_sample(a),
    })
}

/// 2 for the user's input (our checks, the policy's bad input or model config), else 1.
fn exit_code(r: anyhow::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) if e.downcast_ref::<prod_run::BadInput>().is_some() => exit::bad_input(e),
        Err(e) => match e.downcast_ref::<prod_policy::PolicyError>() {
            Some(prod_policy::PolicyError::BadInput(_) | prod_policy::PolicyError::Config(_)) => {
                exit::bad_input(e)
            }
            _ => exit::failure(e),
        },
    }
}

fn bad(m: String) -> anyhow::Error {
    anyhow::Error::new(prod_run::BadInput(m))
}

/// Progress of `label` over `total` `unit`s (see `prod_progress`).
fn progress(label: &str, unit: &str, total: usize, json: bool) -> prod_progress::Progress {
    let display = prod_progress::Display::for_stderr(json);
    prod_progress::Progress::new(display, label, unit, Some(total as u64))
}

fn device() -> prod_policy::candle_core::Device {
    prod_policy::candle_core::Device::Cpu
}

fn init(a: InitArgs) -> anyhow::Result<()> {
    let m = prod_run::scratch::init_model(&a.corpus, &a.shape, a.seed, &a.out)?;
    eprintln!(
        "wrote {} ({} parameters, vocabulary {})",
        a.out.display(),
        m.params,
        m.vocab
    );
    Ok(())
}

fn import(a: ImportArgs) -> anyhow::Result<()> {
    let (mut model, tok) = prod_policy::gguf::import_gguf(&a.file, &device())?;
    prod_policy::save_model_dir(&a.out, &mut model, &tok)?;
    eprintln!(
        "wrote {} ({} layers, {} parameters, vocabulary {} incl. ProD's 6 special tokens)",
        a.out.display(),
        model.config().num_hidden_layers,
        model.num_params(),
        model.config().vocab_size
    );
    Ok(())
}

fn sample_cmd(a: SampleArgs) -> anyhow::Result<()> {
    let (model, tok) = prod_policy::load_model_dir(&a.model, &device())?;
    let session = SampleSession {
        model: &model,
        tok: &tok,
        params: SamplingParams {
            n: a.n,
            temperature: a.sampling.sampling.temperature,
            top_p: a.sampling.sampling.top_p,
            max_new_tokens: a.sampling.sampling.max_new_tokens,
            seed: a.seed,
            stop: vec![tok.end_id()],
            decode_weights: a.sampling.decode_weights,
        },
        force_t0: a.force_t0,
    };
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut emit = |v: serde_json::Value, text: String| {
        let r = if a.json {
            writeln!(out, "{v}")
        } else {
            writeln!(out, "{text}\n---")
        };
        match exit::written(r) {
            0 => Ok(()),
            _ => Err(anyhow!("cannot write output")),
        }
    };
    let generated = match (&a.prompt, &a.data) {
        (Some(p), _) => session.raw_prompt(p, &mut |s| {
            emit(serde_json::to_value(&s)?, format!("{p}{}", s.text))
        })?,
        (None, Some(d)) => {
            let bars = prod_run::Bars::for_stderr(a.json);
            let lang = a.prover.language();
            let all = session.dataset(
                d,
                a.limit,
                a.sampling.sampling.context_tokens,
                lang,
                &bars,
                &mut |s| {
                    let text = format!(
                        "{} #{} (parses: {})\n{}",
                        s.id, s.sample, s.parses, s.conditional_proof
                    );
                    emit(serde_json::to_value(&s)?, text)
                },
            )?;
            let (parsed, total) = (all.parse_as_conditional_proof, all.samples);
            if a.json {
                let summary = serde_json::json!({"summary": true, "samples": total,
                    "parse_as_conditional_proof": parsed, "parse_rate": all.parse_rate()});
                println!("{summary}");
            } else {
                eprintln!("{parsed}/{total} samples parse as conditional proofs");
            }
            all.generated
        }
        (None, None) => return Err(bad("give --prompt TEXT or --data FILE.jsonl".into())),
    };
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{generated} tokens in {secs:.1} s ({:.1} tok/s)",
        generated as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// `prod model data-stats`: every line built into an example as training would, counted in
/// total and per variant ([`sft::data_stats`]), printed as JSON or a table.
fn data_stats(a: DataStatsArgs) -> anyhow::Result<()> {
    // The tokenizer as `load_model_dir` builds it, without loading the weights.
    let cfg = LlamaConfig::load(&a.model.join("config.json"))?;
    let tok = ProdTokenizer::from_file(&a.model.join("tokenizer.json"), cfg.eos_id())?;
    let opts = ExampleOptions {
        context_tokens: a.context_tokens,
        max_seq_len: a.max_seq_len,
        statement_in_loss: false,
    };
    let lines = sft::read_data_lines(&a.data, a.limit)?;
    let start = Instant::now();
    let stats = sft::data_stats(&tok, &lines, &opts)?;
    let report = serde_json::json!({
        "data": a.data, "max_seq_len": a.max_seq_len, "context_tokens": a.context_tokens,
        "total": stats.total, "by_variant": stats.by_variant, "seconds": start.elapsed().as_secs_f64(),
    });
    if a.json {
        println!("{report}");
        return Ok(());
    }
    print!("{}", stats.table(&a.data, &opts));
    Ok(())
}

fn train_with(a: TrainArgs, targets: Targets) -> anyhow::Result<()> {
    let t = &a.trainer;
    if t.micro_batch > t.macro_batch {
        let m = format!(
            "--micro-batch {} must not exceed --macro-batch {}",
            t.micro_batch, t.macro_batch
        );
        return Err(bad(m));
    }
    let (model, tok) = prod_policy::load_model_dir(&a.model, &device())?;
    let settings = sft_settings(&a, targets);
    let mut out = TrainOutput::new(a.json);
    let lines = sft::read_train_lines(&settings)?;
    let set = sft::training_set(&settings, &tok, &lines, &mut |e| out.event(e))?;
    match (&a.write_examples, &a.out) {
        (Some(path), _) => write_training_examples(&a, &tok, &set, path),
        (None, Some(dir)) => {
            let r = sft::train(&settings, set, model, tok, dir, &mut |e| out.event(e))?;
            report_json(
                a.json,
                serde_json::json!({"done": true, "step": r.step, "eval_loss_before": r.start.eval_loss_before,
                "eval_loss_after": r.eval_loss_after, "seconds": out.seconds(), "out": dir}),
            );
            Ok(())
        }
        (None, None) => Err(bad("--out or --write-examples is required".into())),
    }
}

/// The SFT run the command line asks for: the files' lines shuffled with `StdRng` (this
/// command's seeded order), resumed from a checkpoint in --out, one epoch unless --steps.
fn sft_settings(a: &TrainArgs, targets: Targets) -> SftSettings {
    SftSettings {
        source: SftSource::Files {
            train: a.data.clone(),
            eval: a.eval.clone(),
        },
        targets,
        trainer: a.trainer.clone(),
        seed: a.seed,
        shuffle: ShuffleRng::Std,
        limit: a.limit,
        eval_limit: a.eval_limit,
        oversample_use_invoke: a.oversample_use_invoke,
        steps: a.steps.map_or(Steps::OneEpoch, Steps::Total),
        deadline: None,
        save_every: Some(a.save_every),
        resume: true,
    }
}

/// `--write-examples`: the set as an external trainer's JSONL (written atomically).
fn write_training_examples(
    a: &TrainArgs,
    tok: &ProdTokenizer,
    set: &sft::TrainingSet,
    path: &Path,
) -> anyhow::Result<()> {
    prod_run::rl::write_examples(path, &set.examples, tok)?;
    let v = serde_json::json!({"examples": set.examples.len(), "skipped": set.dropped.values().sum::<usize>(),
        "skipped_by_reason": set.dropped, "use_invoke_share": sft::data::use_invoke_share(tok, &set.examples),
        "written": path});
    report_json(a.json, v);
    Ok(())
}

/// One JSON line: on stdout with `--json`, else on stderr beside the progress bar.
fn report_json(json: bool, v: serde_json::Value) {
    if json {
        println!("{v}");
    } else {
        eprintln!("{v}");
    }
}

/// What `prod train` prints as the run goes: the first dropped lines, the start report, a
/// progress bar (and with `--json` a line per step).
struct TrainOutput {
    json: bool,
    bar: Option<prod_progress::Progress>,
    /// When the steps started.
    clock: Option<Instant>,
}

impl TrainOutput {
    fn new(json: bool) -> Self {
        TrainOutput {
            json,
            bar: None,
            clock: None,
        }
    }

    fn event(&mut self, e: SftEvent<'_>) {
        match e {
            SftEvent::Dropped {
                path,
                line,
                message,
            } => eprintln!("skipped {}:{line}: {message}", path.display()),
            SftEvent::Started(s) => {
                report_json(
                    self.json,
                    serde_json::json!({"examples": s.examples, "skipped": s.dropped.values().sum::<usize>(),
                    "skipped_by_reason": s.dropped, "use_invoke_share": s.use_invoke_share, "eval_examples": s.eval_examples,
                    "eval_loss_before": s.eval_loss_before, "start_step": s.start_step, "steps": s.steps}),
                );
                self.clock = Some(Instant::now());
                let left = s.steps.map_or(0, |n| n.saturating_sub(s.start_step));
                self.bar = Some(progress("train", "steps", left, self.json));
            }
            SftEvent::Step { stats, tok_per_s } => {
                if let Some(pb) = &self.bar {
                    pb.set_message(format!("loss {:.4} {:.0} tok/s", stats.loss, tok_per_s));
                    pb.inc(1);
                }
                if self.json {
                    println!(
                        "{}",
                        serde_json::json!({"step": stats.step, "loss": stats.loss, "grad_norm": stats.grad_norm, "lr": stats.lr, "tok_per_s": tok_per_s})
                    );
                }
            }
            SftEvent::StepsDone => self.bar.iter().for_each(|pb| pb.finish()),
        }
    }

    /// Seconds since the steps started.
    fn seconds(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.elapsed().as_secs_f64())
    }
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let dev = device();
    let model = bench_model(&a, &dev)?;
    let out = serde_json::to_value(prod_policy::bench::bench_model(&model, &a.options, &dev)?)?;
    if a.json {
        println!("{out}");
    } else {
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

/// The model `prod model bench` measures: `--model`, or a random one of `--shape`.
fn bench_model(a: &BenchArgs, dev: &prod_policy::candle_core::Device) -> anyhow::Result<Llama> {
    Ok(match &a.model {
        Some(d) => prod_policy::load_model_dir(d, dev)?.0,
        None => {
            let cfg = match a.shape {
                Shape::Smollm2_135m => LlamaConfig::smollm2_135m(),
                Shape::Tiny => LlamaConfig::tiny(512),
            };
            Llama::random(&cfg, 0, dev)?
        }
    })
}

fn bench_sample(a: BenchSampleArgs) -> anyhow::Result<()> {
    let bars = prod_run::Bars::for_stderr(a.json);
    let out = a
        .bench
        .run(&a.model, a.data.as_deref(), &bars, &mut |row| {
            if !a.json {
                println!("{}", serde_json::to_value(row).unwrap_or_default());
            }
        })?;
    match a.json {
        true => println!("{out}"),
        false => println!("{}", serde_json::to_string_pretty(&out)?),
    }
    Ok(())
}

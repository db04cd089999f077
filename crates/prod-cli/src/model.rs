//! `prod model …`: the native policy — create, import, sample, train, benchmark.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use prod_policy::bench::{BenchOptions, BenchTarget};
use prod_policy::{ModelShape, ProdTokenizer};
use prod_run::flags::SampleFlags;
use prod_run::sample_bench::SampleBench;
use prod_run::sample_data::SampleSession;
use prod_run::sft::console::SftConsole;
use prod_run::sft::files::SftFiles;
use prod_run::sft::stats::DataStatsRequest;
use prod_run::sft::{self, Targets};

use crate::exit;

/// `prod train sft|value`: the names for the two trainers (`prod model train` is SFT
/// and, on lines with `proved`, value training at once).
#[derive(Subcommand)]
pub enum TrainCommand {
    /// Supervised fine-tuning of the policy on a dataset's JSONL.
    ///
    /// Lines: context, statement, conditional_proof; weighted cross-entropy on `t0 + proof + end`.
    ///
    /// Example: prod train sft --model models/toy --data data/stdlib/train.jsonl --steps 200 --out models/toy-sft
    Sft(TrainArgs),
    /// The value model V (paper §3.2): is a lemma provable?
    ///
    /// Lines: {context, statement, proved: true|false}; cross-entropy on `<true>`/`<false>`
    /// after the prompt; lines without `proved` are skipped.
    ///
    /// Example: prod train value --model models/toy-sft --data runs/r1/values.jsonl --out models/toy-value
    Value(TrainArgs),
}

pub fn run_train(cmd: TrainCommand) -> exit::Result {
    Ok(match cmd {
        TrainCommand::Sft(a) => train_with(a, Targets::Policy),
        TrainCommand::Value(a) => train_with(a, Targets::Value),
    }?)
}

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Create a small random model with its own byte-level BPE tokenizer (tests, toy runs).
    ///
    /// The tokenizer is trained on `--corpus` (ProD's special tokens are single tokens): plain
    /// text, or dataset JSONL (`.jsonl`: context, statement and conditional_proof of every line).
    ///
    /// Example: prod model init --corpus data/stdlib/train.jsonl --vocab-size 4000 --out models/toy
    Init(InitArgs),
    /// Import a llama.cpp GGUF file (Llama architecture) as a model directory.
    ///
    /// Weights dequantised to f32, tokenizer rebuilt from the metadata, ProD's special tokens
    /// added with embeddings initialised to the mean embedding.
    ///
    /// Example: prod model import-gguf SmolLM2-135M-Instruct.Q4_1.gguf --out models/smollm2
    ImportGguf(ImportArgs),
    #[command(verbatim_doc_comment)]
    /// Sample continuations: a raw prompt, or `t0 + conditional proof` for each dataset line.
    ///
    /// A dataset line's prompt is its context's last N tokens and its statement, as in the paper.
    ///
    /// Examples:
    ///   prod model sample --model models/smollm2 --prompt "The capital of France is" --n 2
    ///   prod model sample --model models/toy --data data/stdlib/test.jsonl --limit 20 --json
    Sample(SampleArgs),
    /// Supervised fine-tuning with weighted cross-entropy on `t0 + proof + end`.
    ///
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
    /// Sampling at batch 1 and 8 (f32 and q8 decoding weights), training at 256 tokens, and the
    /// matmul-bound training limit measured on this machine.
    ///
    /// Example: prod model bench --shape smollm2-135m
    Bench(BenchArgs),
    /// Sampling as an evaluation asks for it: one prompt at a time against batched, side by side.
    ///
    /// `--samples` proof trees' root requests for each of `--prompts` theorems (one call per tree, as `prod eval` makes
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
    #[command(flatten)]
    pub request: DataStatsRequest,
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
    #[command(flatten)]
    pub flags: SampleFlags,
    /// One JSON object per sample, then a summary object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub files: SftFiles,
    /// Print the training report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub target: BenchTarget,
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

pub fn run(cmd: ModelCommand) -> exit::Result {
    Ok(match cmd {
        ModelCommand::MergeLora(a) => return crate::merge_lora::run(a),
        ModelCommand::Prompts(a) => return crate::prompts::run(a),
        ModelCommand::Init(a) => init(a),
        ModelCommand::ImportGguf(a) => import(a),
        ModelCommand::Sample(a) => sample_cmd(a),
        ModelCommand::Train(a) => train_with(a, Targets::Any),
        ModelCommand::Bench(a) => bench(a),
        ModelCommand::DataStats(a) => data_stats(a),
        ModelCommand::BenchSample(a) => bench_sample(a),
    }?)
}

fn bad(m: String) -> anyhow::Error {
    anyhow::Error::new(prod_run::BadInput(m))
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
    let f = &a.flags;
    let (model, tok) = prod_policy::load_model_dir(&f.model, &device())?;
    let session = SampleSession {
        model: &model,
        tok: &tok,
        params: f.params(tok.end_id()),
        force_t0: f.force_t0,
    };
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut emit = |v: serde_json::Value, text: String| {
        let r = if a.json {
            writeln!(out, "{v}")
        } else {
            writeln!(out, "{text}\n---")
        };
        exit::written(r).map_err(|_| anyhow!("cannot write output"))
    };
    let generated = match (&f.prompt, &f.data) {
        (Some(p), _) => session.raw_prompt(p, &mut |s| {
            emit(serde_json::to_value(&s)?, format!("{p}{}", s.text))
        })?,
        (None, Some(d)) => {
            let bars = prod_run::Bars::for_stderr(a.json);
            let lang = f.prover.language();
            let all = session.dataset(
                d,
                f.limit,
                f.sampling.sampling.context_tokens,
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
/// total and per variant, printed as JSON or a table.
fn data_stats(a: DataStatsArgs) -> anyhow::Result<()> {
    let (stats, json) = a.request.measure()?;
    match a.json {
        true => println!("{json}"),
        false => print!("{}", stats.table(&a.request.data, &a.request.options())),
    }
    Ok(())
}

fn train_with(a: TrainArgs, targets: Targets) -> anyhow::Result<()> {
    let settings = a.files.settings(targets)?;
    let (model, tok) = prod_policy::load_model_dir(&a.files.model, &device())?;
    let mut out = SftConsole::new(a.json);
    let lines = sft::read_train_lines(&settings)?;
    let set = sft::training_set(&settings, &tok, &lines, &mut |e| out.event(e))?;
    match (&a.files.write_examples, &a.files.out) {
        (Some(path), _) => write_training_examples(&a, &tok, &set, path),
        (None, Some(dir)) => {
            let r = sft::train(&settings, set, model, tok, dir, &mut |e| out.event(e))?;
            sft::console::report_json(
                a.json,
                serde_json::json!({"done": true, "step": r.step, "eval_loss_before": r.start.eval_loss_before,
                "eval_loss_after": r.eval_loss_after, "seconds": out.seconds(), "out": dir}),
            );
            Ok(())
        }
        (None, None) => Err(bad("--out or --write-examples is required".into())),
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
    sft::console::report_json(a.json, v);
    Ok(())
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let dev = device();
    let model = a.target.load(&dev)?;
    let out = serde_json::to_value(prod_policy::bench::bench_model(&model, &a.options, &dev)?)?;
    match a.json {
        true => println!("{out}"),
        false => println!("{}", serde_json::to_string_pretty(&out)?),
    }
    Ok(())
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

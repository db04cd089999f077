//! `prod model …`: the native policy — create, import, sample, train, benchmark.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use clap::{Args, Subcommand, ValueEnum};
use prod_core::{ConditionalProof, Sampling, T0};
use prod_policy::model::Llama;
use prod_policy::prompt::{self, ExampleOptions, TrainExample};
use prod_policy::sample::{self, SamplingParams};
use prod_policy::train::{self, Trainer};
use prod_policy::{DecodeWeights, LlamaConfig, PolicyConfig, ProdTokenizer};

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
        TrainCommand::Sft(a) => train_with(a, Kind::Sft),
        TrainCommand::Value(a) => train_with(a, Kind::Value),
    })
}

/// Which examples a training run takes from its lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Policy lines, and value lines where a line has `proved` instead of a proof.
    Any,
    Sft,
    Value,
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
    #[arg(long, default_value_t = 2048, value_parser = ranges::positive_usize)]
    pub max_seq_len: usize,
    /// The context is cut to its last N tokens (as `prod model train`).
    #[arg(long, default_value_t = 1000, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct InitArgs {
    /// Text files the BPE tokenizer is trained on (one or more).
    #[arg(long, required = true, num_args = 1..)]
    pub corpus: Vec<PathBuf>,
    /// BPE vocabulary size (ProD's six special tokens included).
    #[arg(long, default_value_t = 2000, value_parser = ranges::positive_usize)]
    pub vocab_size: usize,
    /// Hidden size: a multiple of --heads, with an even head dimension (hidden / heads).
    #[arg(long, default_value_t = 128, value_parser = ranges::positive_usize)]
    pub hidden: usize,
    /// Transformer layers.
    #[arg(long, default_value_t = 4, value_parser = ranges::positive_usize)]
    pub layers: usize,
    /// Attention heads: a multiple of --kv-heads.
    #[arg(long, default_value_t = 4, value_parser = ranges::positive_usize)]
    pub heads: usize,
    /// Key/value heads (grouped-query attention).
    #[arg(long, default_value_t = 2, value_parser = ranges::positive_usize)]
    pub kv_heads: usize,
    /// Hidden size of each MLP block.
    #[arg(long, default_value_t = 384, value_parser = ranges::positive_usize)]
    pub intermediate: usize,
    /// Seed of the random initial weights.
    #[arg(long, default_value_t = 0)]
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

#[derive(Clone, Copy, ValueEnum)]
pub enum ForceT0 {
    UseInvoke,
    NoInvoke,
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
    pub force_t0: Option<ForceT0>,
    /// Samples per prompt.
    #[arg(long, default_value_t = 1, value_parser = ranges::positive_usize)]
    pub n: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One JSON object per sample, then a summary object.
    #[arg(long)]
    pub json: bool,
}

/// How samples are drawn: `prod model sample` and `prod eval` take the same options, with the
/// defaults and ranges of [`Sampling`] (what to sample) and the native sampler's weights.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Sampling temperature (0 = greedy; paper: 0.7).
    #[arg(long, default_value_t = Sampling::default().temperature, value_parser = |s: &str| ranges::real_in(s, Sampling::TEMPERATURE))]
    pub temperature: f64,
    /// Nucleus (top-p) threshold in (0, 1]; 1 = off.
    #[arg(long, default_value_t = Sampling::default().top_p, value_parser = |s: &str| ranges::real_in(s, Sampling::TOP_P))]
    pub top_p: f64,
    /// Longest generated proof, in tokens.
    #[arg(long, default_value_t = Sampling::default().max_new_tokens, value_parser = ranges::positive_usize)]
    pub max_new_tokens: usize,
    /// The context is cut to its last N tokens (paper: 1,000).
    #[arg(long, default_value_t = Sampling::default().context_tokens, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// Weights the decoding steps read: f32 (exact) or q8 (block-quantised copies: 4 bits
    /// where that is exact, as for a model imported from a Q4 GGUF, else 8 bits; about 3×
    /// faster at batch 1). A prompt longer than one token is prefilled in f32.
    #[arg(long, default_value_t = prod_run::NativeParams::default().decode_weights)]
    pub decode_weights: DecodeWeights,
}

impl SamplingArgs {
    /// What to sample, as every policy takes it.
    pub fn sampling(&self) -> Sampling {
        Sampling {
            temperature: self.temperature,
            top_p: self.top_p,
            max_new_tokens: self.max_new_tokens,
            context_tokens: self.context_tokens,
        }
    }
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
    #[arg(long, default_value_t = 200, value_parser = ranges::positive_usize)]
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
    /// Learning rate after warm-up.
    #[arg(long, default_value_t = 1e-5, value_parser = ranges::positive_finite_f64)]
    pub lr: f64,
    /// Warm-up steps (0: none).
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Examples per optimizer step.
    #[arg(long, default_value_t = 128, value_parser = ranges::positive_usize)]
    pub macro_batch: usize,
    /// Examples per forward/backward pass (at most --macro-batch).
    #[arg(long, default_value_t = 4, value_parser = ranges::positive_usize)]
    pub micro_batch: usize,
    /// Longest training sequence, in tokens: the context gives way first.
    #[arg(long, default_value_t = 2048, value_parser = ranges::positive_usize)]
    pub max_seq_len: usize,
    /// The context is cut to its last N tokens (paper: 1,000).
    #[arg(long, default_value_t = 1000, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// Save a checkpoint every N steps (and at the end).
    #[arg(long, default_value_t = 100, value_parser = ranges::positive_usize)]
    pub save_every: usize,
    /// NOT the paper's method (off by default, 1): every policy example whose `t0` is
    /// `<use_invoke>` enters the training stream N times (the copies shuffled in with the rest),
    /// for small models that otherwise learn to propose almost nothing. The paper trains on
    /// `sft.jsonl` as it is; report runs that use this as such.
    #[arg(long, default_value_t = 1, value_parser = ranges::positive_usize)]
    pub oversample_use_invoke: usize,
    /// Seed of the data order and of the oversampling shuffle.
    #[arg(long, default_value_t = 0)]
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
    /// Tokens generated per sample.
    #[arg(long, default_value_t = 32, value_parser = ranges::positive_usize)]
    pub new_tokens: usize,
    /// Prompt length for sampling (ProD's prompts are about 1,000 context tokens + statement).
    #[arg(long, default_value_t = 16, value_parser = ranges::positive_usize)]
    pub prompt_tokens: usize,
    /// Timed training steps after one warm-up step; the figure is the fastest (as the GEMM
    /// rate is the best of ten products), so that host noise inflates it less.
    #[arg(long, default_value_t = 6, value_parser = ranges::positive_usize)]
    pub train_steps: usize,
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
    /// Theorems (prompts) to sample for.
    #[arg(long, default_value_t = 60, value_parser = ranges::positive_usize)]
    pub prompts: usize,
    /// Samples per prompt (proof trees).
    #[arg(long, default_value_t = 4, value_parser = ranges::positive_usize)]
    pub samples: usize,
    /// The context is cut to its last N tokens (synthetic prompts have this many).
    #[arg(long, default_value_t = 256, value_parser = ranges::positive_usize)]
    pub context_tokens: usize,
    /// Tokens generated per sample.
    #[arg(long, default_value_t = 192, value_parser = ranges::positive_usize)]
    pub new_tokens: usize,
    /// Rows decoded together per step by the native policy.
    #[arg(long, default_value_t = 16, value_parser = ranges::positive_usize)]
    pub batch_rows: usize,
    /// Sampling temperature (paper: 0.7).
    #[arg(long, default_value_t = Sampling::default().temperature, value_parser = |s: &str| ranges::real_in(s, Sampling::TEMPERATURE))]
    pub temperature: f64,
    /// Decoding weights to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "f32,q8")]
    pub weights: Vec<DecodeWeights>,
    /// Skip the one-prompt-at-a-time path (only the batched figures).
    #[arg(long)]
    pub batched_only: bool,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
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
        ModelCommand::Train(a) => train_cmd(a),
        ModelCommand::Bench(a) => bench(a),
        ModelCommand::DataStats(a) => data_stats(a),
        ModelCommand::BenchSample(a) => bench_sample(a),
    })
}

/// 2 for the user's input (our checks, the policy's bad input or model config), else 1.
fn exit_code(r: anyhow::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) if e.downcast_ref::<BadInput>().is_some() => exit::bad_input(e),
        Err(e) => match e.downcast_ref::<prod_policy::PolicyError>() {
            Some(prod_policy::PolicyError::BadInput(_) | prod_policy::PolicyError::Config(_)) => {
                exit::bad_input(e)
            }
            _ => exit::failure(e),
        },
    }
}

/// Marks errors caused by the user's input (exit code 2).
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BadInput {}

fn bad(m: String) -> anyhow::Error {
    anyhow::Error::new(BadInput(m))
}

/// Progress of `label` over `total` `unit`s (see `prod_progress`).
fn progress(label: &str, unit: &str, total: usize, json: bool) -> prod_progress::Progress {
    let display = prod_progress::Display::for_stderr(json);
    prod_progress::Progress::new(display, label, unit, Some(total as u64))
}

/// One dataset line, as much of it as the policy needs.
struct DataLine {
    /// 1-based line in its file.
    line: usize,
    id: String,
    context: String,
    statement: String,
    conditional_proof: Option<String>,
    /// A value-model line: the node's global correctness (the target is `<true>`/`<false>`).
    proved: Option<bool>,
    weight: f32,
    statement_in_loss: bool,
    /// The dataset's `variant` (`wo_lemmas`, `augmented`, `w_lemmas`), if the line has one.
    variant: Option<String>,
}

fn read_jsonl(path: &Path, limit: Option<usize>) -> anyhow::Result<Vec<DataLine>> {
    // A file of a built dataset: complete, as its stats.json records it.
    prod_library::output::check_unread_file(path).map_err(bad)?;
    let f = std::fs::File::open(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        let line = line.map_err(|e| bad(format!("{}:{}: {e}", path.display(), i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| bad(format!("{}:{}: {e}", path.display(), i + 1)))?;
        let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
        let statement = s("statement").ok_or_else(|| {
            bad(format!(
                "{}:{}: no \"statement\" string",
                path.display(),
                i + 1
            ))
        })?;
        out.push(DataLine {
            line: i + 1,
            id: s("id").unwrap_or_else(|| format!("line{}", i + 1)),
            context: s("context").unwrap_or_default(),
            statement,
            conditional_proof: s("conditional_proof"),
            proved: v.get("proved").and_then(|b| b.as_bool()),
            weight: v.get("weight").and_then(|w| w.as_f64()).unwrap_or(1.0) as f32,
            statement_in_loss: v
                .get("statement_in_loss")
                .and_then(|b| b.as_bool())
                .unwrap_or(false),
            variant: s("variant"),
        });
    }
    Ok(out)
}

fn device() -> prod_policy::candle_core::Device {
    prod_policy::candle_core::Device::Cpu
}

/// The model shape's constraints (the ranges of single flags are checked by clap).
fn check_shape(a: &InitArgs) -> anyhow::Result<()> {
    if !a.hidden.is_multiple_of(a.heads) {
        return Err(bad(format!(
            "--hidden {} must be a multiple of --heads {}",
            a.hidden, a.heads
        )));
    }
    if !a.heads.is_multiple_of(a.kv_heads) {
        return Err(bad(format!(
            "--heads {} must be a multiple of --kv-heads {}",
            a.heads, a.kv_heads
        )));
    }
    if !(a.hidden / a.heads).is_multiple_of(2) {
        return Err(bad(format!(
            "--hidden {} / --heads {} = {} must be even (RoPE)",
            a.hidden,
            a.heads,
            a.hidden / a.heads
        )));
    }
    Ok(())
}

fn init(a: InitArgs) -> anyhow::Result<()> {
    check_shape(&a)?;
    let mut texts = Vec::new();
    for p in &a.corpus {
        if p.extension().is_some_and(|e| e == "jsonl") {
            for l in read_jsonl(p, None)? {
                texts.push(format!(
                    "{}\n{}\n{}",
                    l.context,
                    l.statement,
                    l.conditional_proof.unwrap_or_default()
                ));
            }
        } else {
            texts.push(
                std::fs::read_to_string(p).map_err(|e| bad(format!("{}: {e}", p.display())))?,
            );
        }
    }
    let tok = ProdTokenizer::train_bpe(texts.iter(), a.vocab_size, 2)?;
    let mut cfg = LlamaConfig::tiny(tok.vocab_size());
    cfg.hidden_size = a.hidden;
    cfg.num_hidden_layers = a.layers;
    cfg.num_attention_heads = a.heads;
    cfg.num_key_value_heads = Some(a.kv_heads);
    cfg.intermediate_size = a.intermediate;
    cfg.max_position_embeddings = 4096;
    let mut model = Llama::random(&cfg, a.seed, &device())?;
    prod_policy::save_model_dir(&a.out, &mut model, &tok)?;
    eprintln!(
        "wrote {} ({} parameters, vocabulary {})",
        a.out.display(),
        model.num_params(),
        tok.vocab_size()
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
    let params = SamplingParams {
        n: a.n,
        temperature: a.sampling.temperature,
        top_p: a.sampling.top_p,
        max_new_tokens: a.sampling.max_new_tokens,
        seed: a.seed,
        stop: vec![tok.end_id()],
        decode_weights: a.sampling.decode_weights,
    };
    let start = Instant::now();
    let generated = match (&a.prompt, &a.data) {
        (Some(p), _) => sample_raw_prompt(&a, &model, &tok, &params, p)?,
        (None, Some(d)) => sample_dataset(&a, &model, &tok, &params, d)?,
        (None, None) => return Err(bad("give --prompt TEXT or --data FILE.jsonl".into())),
    };
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{generated} tokens in {secs:.1} s ({:.1} tok/s)",
        generated as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// Where `prod model sample` writes each sample: a JSON object with `--json`, else the text
/// and a `---` line.
struct SampleOut {
    json: bool,
    out: std::io::StdoutLock<'static>,
}

impl SampleOut {
    fn new(json: bool) -> Self {
        SampleOut {
            json,
            out: std::io::stdout().lock(),
        }
    }

    fn emit(&mut self, v: serde_json::Value, text: &str) -> anyhow::Result<()> {
        let r = if self.json {
            writeln!(self.out, "{v}")
        } else {
            writeln!(self.out, "{text}\n---")
        };
        if exit::written(r) != 0 {
            return Err(anyhow!("cannot write output"));
        }
        Ok(())
    }
}

/// `--prompt`: samples continuing a raw text; returns the tokens generated.
fn sample_raw_prompt(
    a: &SampleArgs,
    model: &Llama,
    tok: &ProdTokenizer,
    params: &SamplingParams,
    p: &str,
) -> anyhow::Result<usize> {
    let mut out = SampleOut::new(a.json);
    let mut ids = tok.encode(p)?;
    if let Some(f) = a.force_t0 {
        ids = prompt::with_forced_t0(tok, &ids, t0_of(f));
    }
    let mut generated = 0usize;
    for (i, s) in sample::sample(model, &ids, params)?.iter().enumerate() {
        generated += s.ids.len();
        let text = tok.decode(&s.ids)?;
        out.emit(
            serde_json::json!({"sample": i, "text": text, "tokens": s.ids.len(), "stopped": s.stopped}),
            &format!("{p}{text}"),
        )?;
    }
    Ok(generated)
}

/// `--data`: samples for each dataset line's ProD prompt (line i seeded `seed + i`), whether
/// each parses as a conditional proof, then a summary; returns the tokens generated.
fn sample_dataset(
    a: &SampleArgs,
    model: &Llama,
    tok: &ProdTokenizer,
    params: &SamplingParams,
    d: &Path,
) -> anyhow::Result<usize> {
    let mut out = SampleOut::new(a.json);
    let lines = read_jsonl(d, a.limit)?;
    let pb = progress("sample", "prompts", lines.len(), a.json);
    let (mut total, mut parsed, mut generated) = (0usize, 0usize, 0usize);
    let forced = a.force_t0.map(t0_of);
    for (li, l) in lines.iter().enumerate() {
        let mut ids = prompt::prompt_ids(tok, &l.context, &l.statement, a.sampling.context_tokens)
            .map_err(|e| bad(format!("{}:{}: {e}", d.display(), l.line)))?;
        if let Some(t0) = forced {
            ids = prompt::with_forced_t0(tok, &ids, t0);
        }
        let p = SamplingParams {
            seed: a.seed.wrapping_add(li as u64),
            ..params.clone()
        };
        for (i, s) in sample::sample(model, &ids, &p)?.iter().enumerate() {
            generated += s.ids.len();
            let mut text = tok.decode(&s.ids)?;
            if let Some(t0) = forced {
                text = format!("{}{text}", t0.token());
            }
            let ok = ConditionalProof::parse_with(&text, a.prover.language()).is_ok();
            total += 1;
            parsed += ok as usize;
            out.emit(
                serde_json::json!({"id": l.id, "sample": i, "conditional_proof": text, "parses": ok,
                                   "stopped": s.stopped, "tokens": s.ids.len()}),
                &format!("{} #{i} (parses: {ok})\n{text}", l.id),
            )?;
        }
        pb.inc(1);
    }
    pb.finish();
    let summary = serde_json::json!({"summary": true, "samples": total, "parse_as_conditional_proof": parsed,
        "parse_rate": if total > 0 { parsed as f64 / total as f64 } else { 0.0 }});
    if a.json {
        println!("{summary}");
    } else {
        eprintln!("{parsed}/{total} samples parse as conditional proofs");
    }
    Ok(generated)
}

fn t0_of(f: ForceT0) -> T0 {
    match f {
        ForceT0::UseInvoke => T0::UseInvoke,
        ForceT0::NoInvoke => T0::NoInvoke,
    }
}

/// What became of one dataset line on its way to a training example.
enum LineOutcome {
    Kept(prompt::BuiltExample),
    /// A value line (no context accounting).
    KeptValue(TrainExample),
    Dropped(&'static str, String),
}

/// One line through exactly the path training takes (policy or value example).
fn build_line(tok: &ProdTokenizer, l: &DataLine, opts: &ExampleOptions, kind: Kind) -> LineOutcome {
    let (cp, proved) = match kind {
        Kind::Any => (&l.conditional_proof, l.proved),
        Kind::Sft => (&l.conditional_proof, None),
        Kind::Value => (&None, l.proved),
    };
    match (cp, proved) {
        // Value model (paper §3.2): prompt `c s`, target `<true>` or `<false>`.
        (None, Some(proved)) => {
            match prompt::prompt_ids(tok, &l.context, &l.statement, opts.context_tokens)
                .and_then(|p| prompt::value_example(tok, &p, proved, l.weight))
            {
                Ok(e) => LineOutcome::KeptValue(e),
                Err(e) => LineOutcome::Dropped("bad_value_line", e.to_string()),
            }
        }
        (Some(cp), _) => {
            let o = ExampleOptions {
                statement_in_loss: l.statement_in_loss,
                ..*opts
            };
            match prompt::build_policy_example(tok, &l.context, &l.statement, cp, l.weight, &o) {
                Ok(b) => LineOutcome::Kept(b),
                Err(d) => LineOutcome::Dropped(d.reason.as_str(), d.message),
            }
        }
        (None, None) => LineOutcome::Dropped("no_target", "no conditional_proof or proved".into()),
    }
}

/// Training examples of `lines`, and the lines dropped, by reason.
fn examples(
    tok: &ProdTokenizer,
    lines: &[DataLine],
    path: &Path,
    opts: &ExampleOptions,
    kind: Kind,
) -> (
    Vec<TrainExample>,
    std::collections::BTreeMap<&'static str, usize>,
) {
    let mut out = Vec::new();
    let mut skipped = std::collections::BTreeMap::new();
    let mut shown = 0;
    for l in lines {
        match build_line(tok, l, opts, kind) {
            LineOutcome::Kept(b) => out.push(b.example),
            LineOutcome::KeptValue(e) => out.push(e),
            LineOutcome::Dropped(reason, e) => {
                *skipped.entry(reason).or_insert(0) += 1;
                // Lines that are simply of the other kind are not worth a message.
                if reason != "no_target" && shown < 3 {
                    shown += 1;
                    eprintln!("skipped {}:{}: {e}", path.display(), l.line);
                }
            }
        }
    }
    (out, skipped)
}

/// The `t0` of a policy example (`None` for value examples).
fn t0_id(tok: &ProdTokenizer, e: &TrainExample) -> Option<u32> {
    let t0 = [tok.use_invoke_id(), tok.no_invoke_id()];
    e.ids
        .get(e.loss_from..)?
        .iter()
        .copied()
        .find(|t| t0.contains(t))
}

/// Share of policy examples whose `t0` is `<use_invoke>` (value examples have no `t0`).
fn use_invoke_share(tok: &ProdTokenizer, data: &[TrainExample]) -> Option<f64> {
    let t0: Vec<u32> = data.iter().filter_map(|e| t0_id(tok, e)).collect();
    (!t0.is_empty())
        .then(|| t0.iter().filter(|&&t| t == tok.use_invoke_id()).count() as f64 / t0.len() as f64)
}

/// Counts for one group of lines in `prod model data-stats`.
#[derive(Default, serde::Serialize)]
struct DataCounts {
    lines: usize,
    use_invoke_lines: usize,
    use_invoke_share_lines: f64,
    examples: usize,
    use_invoke_examples: usize,
    use_invoke_share_examples: f64,
    dropped_by_reason: std::collections::BTreeMap<&'static str, usize>,
    /// Examples whose context was cut below --context-tokens so that they fit.
    context_cut_for_length: usize,
    kept_if_dropped_not_cut: usize,
    use_invoke_if_dropped_not_cut: usize,
    use_invoke_share_if_dropped_not_cut: f64,
    /// Mean tokens per kept example, and of its context.
    mean_tokens: f64,
    mean_context_tokens: f64,
}

impl DataCounts {
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

/// `prod model data-stats`: every line built into an example as training would, counted in
/// total and per variant, printed as JSON or a table.
fn data_stats(a: DataStatsArgs) -> anyhow::Result<()> {
    // The tokenizer as `load_model_dir` builds it, without loading the weights.
    let cfg = LlamaConfig::load(&a.model.join("config.json"))?;
    let tok = ProdTokenizer::from_file(&a.model.join("tokenizer.json"), cfg.eos_id())?;
    let opts = ExampleOptions {
        context_tokens: a.context_tokens,
        max_seq_len: a.max_seq_len,
        statement_in_loss: false,
    };
    let lines = read_jsonl(&a.data, a.limit)?;
    let start = Instant::now();
    let outcomes = build_lines_in_parallel(&tok, &lines, &opts)?;
    let (total, by_variant) = tally_by_variant(&lines, &outcomes, &opts);
    let report = serde_json::json!({
        "data": a.data, "max_seq_len": a.max_seq_len, "context_tokens": a.context_tokens,
        "total": total, "by_variant": by_variant, "seconds": start.elapsed().as_secs_f64(),
    });
    if a.json {
        println!("{report}");
        return Ok(());
    }
    print_data_stats(&a, &total, &by_variant);
    Ok(())
}

/// Each line built into an example (any kind), in order. Tokenising is the cost (contexts of
/// up to 16 KiB): one chunk of lines per core.
fn build_lines_in_parallel(
    tok: &ProdTokenizer,
    lines: &[DataLine],
    opts: &ExampleOptions,
) -> anyhow::Result<Vec<LineOutcome>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let chunk = lines.len().div_ceil(threads).max(1);
    let outcomes: Vec<LineOutcome> = std::thread::scope(|s| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|c| {
                s.spawn(move || {
                    c.iter()
                        .map(|l| build_line(tok, l, opts, Kind::Any))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    if outcomes.len() != lines.len() {
        return Err(anyhow!("a tokenizer thread failed"));
    }
    Ok(outcomes)
}

/// The lines' outcomes counted in total and per variant (`(none)` for lines without one).
fn tally_by_variant(
    lines: &[DataLine],
    outcomes: &[LineOutcome],
    opts: &ExampleOptions,
) -> (DataCounts, std::collections::BTreeMap<String, DataCounts>) {
    let mut total = DataCounts::default();
    let mut by_variant: std::collections::BTreeMap<String, DataCounts> = Default::default();
    for (l, o) in lines.iter().zip(outcomes) {
        let use_invoke = l
            .conditional_proof
            .as_deref()
            .is_some_and(|cp| cp.trim_start().starts_with(T0::UseInvoke.token()));
        total.add(use_invoke, o, opts);
        let variant = l.variant.clone().unwrap_or_else(|| "(none)".into());
        by_variant
            .entry(variant)
            .or_default()
            .add(use_invoke, o, opts);
    }
    total.finish();
    by_variant.values_mut().for_each(DataCounts::finish);
    (total, by_variant)
}

/// The data-stats table: a heading, one row per variant and the total, a legend.
fn print_data_stats(
    a: &DataStatsArgs,
    total: &DataCounts,
    by_variant: &std::collections::BTreeMap<String, DataCounts>,
) {
    println!(
        "{}: max_seq_len {}, context_tokens {}",
        a.data.display(),
        a.max_seq_len,
        a.context_tokens
    );
    println!(
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
    for (v, c) in by_variant {
        print_data_row(v, c);
    }
    print_data_row("total", total);
    println!("(use_inv: share whose t0 is <use_invoke>; cut_len: context cut below context_tokens to fit; old_*: the rule that dropped instead of cutting)");
}

/// One row of the data-stats table.
fn print_data_row(name: &str, c: &DataCounts) {
    let dropped: Vec<String> = c
        .dropped_by_reason
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    println!(
        "{:<12} {:>7} {:>7.1}% {:>7} {:>7.1}% {:>9} {:>9} {:>7.1}% {:>9.0}  {}",
        name,
        c.lines,
        100.0 * c.use_invoke_share_lines,
        c.examples,
        100.0 * c.use_invoke_share_examples,
        c.context_cut_for_length,
        c.kept_if_dropped_not_cut,
        100.0 * c.use_invoke_share_if_dropped_not_cut,
        c.mean_tokens,
        if dropped.is_empty() {
            "-".into()
        } else {
            dropped.join(", ")
        }
    );
}

fn train_cmd(a: TrainArgs) -> anyhow::Result<()> {
    train_with(a, Kind::Any)
}

fn train_with(a: TrainArgs, kind: Kind) -> anyhow::Result<()> {
    if a.micro_batch > a.macro_batch {
        return Err(bad(format!(
            "--micro-batch {} must not exceed --macro-batch {}",
            a.micro_batch, a.macro_batch
        )));
    }
    let dev = device();
    let (model, tok) = prod_policy::load_model_dir(&a.model, &dev)?;
    let set = training_data(&a, &tok, kind)?;
    match (&a.write_examples, &a.out) {
        (Some(path), _) => write_training_examples(&a, &tok, &set, path),
        (None, Some(out)) => train_on(&a, out, model, tok, set, kind),
        (None, None) => Err(bad("--out or --write-examples is required".into())),
    }
}

/// A run's training examples: --data shuffled (seeded, before --limit, so that a limited run
/// still sees every file and `data_position` means the same thing on resume), cut and dropped
/// as the trainer sees them, oversampled if asked; with the dropped lines by reason.
struct TrainingSet {
    data: Vec<TrainExample>,
    skipped: std::collections::BTreeMap<&'static str, usize>,
    opts: ExampleOptions,
}

fn training_data(a: &TrainArgs, tok: &ProdTokenizer, kind: Kind) -> anyhow::Result<TrainingSet> {
    let opts = ExampleOptions {
        context_tokens: a.context_tokens,
        max_seq_len: a.max_seq_len,
        statement_in_loss: false,
    };
    let mut lines = read_jsonl(&a.data, None)?;
    {
        use rand::{seq::SliceRandom, SeedableRng};
        lines.shuffle(&mut rand::rngs::StdRng::seed_from_u64(a.seed));
    }
    if let Some(l) = a.limit {
        lines.truncate(l);
    }
    let (mut data, skipped) = examples(tok, &lines, &a.data, &opts, kind);
    if a.oversample_use_invoke > 1 {
        use rand::{seq::SliceRandom, SeedableRng};
        let copies: Vec<TrainExample> = data
            .iter()
            .filter(|e| t0_id(tok, e) == Some(tok.use_invoke_id()))
            .flat_map(|e| std::iter::repeat_n(e.clone(), a.oversample_use_invoke - 1))
            .collect();
        data.extend(copies);
        // Seeded, so that `data_position` means the same thing on resume.
        data.shuffle(&mut rand::rngs::StdRng::seed_from_u64(a.seed ^ 0x0e5a_4d1e));
    }
    if data.is_empty() {
        return Err(bad(format!(
            "{}: no usable training example",
            a.data.display()
        )));
    }
    Ok(TrainingSet {
        data,
        skipped,
        opts,
    })
}

/// `--write-examples`: the set as an external trainer's JSONL (written atomically).
fn write_training_examples(
    a: &TrainArgs,
    tok: &ProdTokenizer,
    set: &TrainingSet,
    path: &Path,
) -> anyhow::Result<()> {
    prod_run::rl::write_examples(path, &set.data, tok)?;
    let v = serde_json::json!({"examples": set.data.len(), "skipped": set.skipped.values().sum::<usize>(),
        "skipped_by_reason": set.skipped, "use_invoke_share": use_invoke_share(tok, &set.data),
        "written": path});
    report_json(a.json, v);
    Ok(())
}

/// Train on `set` from `model` (or the checkpoint in `out`), saving every --save-every steps:
/// the held-out loss before, the steps, the final checkpoint, the held-out loss after.
fn train_on(
    a: &TrainArgs,
    out: &Path,
    model: Llama,
    tok: ProdTokenizer,
    set: TrainingSet,
    kind: Kind,
) -> anyhow::Result<()> {
    let TrainingSet {
        data,
        skipped,
        opts,
    } = set;
    let cfg = policy_config(a);
    let eval = match &a.eval {
        Some(p) => examples(&tok, &read_jsonl(p, Some(a.eval_limit))?, p, &opts, kind).0,
        None => Vec::new(),
    };
    let (mut model, mut trainer) = start_or_resume(out, model, &cfg)?;
    let steps = a.steps.unwrap_or(data.len().div_ceil(cfg.macro_batch));
    let eval_before = held_out_loss(&model, &eval, cfg.micro_batch)?;
    report_json(
        a.json,
        serde_json::json!({"examples": data.len(), "skipped": skipped.values().sum::<usize>(),
        "skipped_by_reason": skipped, "use_invoke_share": use_invoke_share(&tok, &data), "eval_examples": eval.len(),
        "eval_loss_before": eval_before, "start_step": trainer.state.step, "steps": steps}),
    );
    let start = Instant::now();
    run_steps(a, out, &model, &tok, &mut trainer, &data, steps)?;
    model.set_eos_token_id(tok.end_id());
    trainer.save_checkpoint(&model, out)?;
    tok.save(&out.join("tokenizer.json"))?;
    let eval_after = held_out_loss(&model, &eval, cfg.micro_batch)?;
    report_json(
        a.json,
        serde_json::json!({"done": true, "step": trainer.state.step, "eval_loss_before": eval_before,
        "eval_loss_after": eval_after, "seconds": start.elapsed().as_secs_f64(), "out": out}),
    );
    Ok(())
}

/// The trainer's settings from the command line.
fn policy_config(a: &TrainArgs) -> PolicyConfig {
    PolicyConfig {
        learning_rate: a.lr,
        warmup_steps: a.warmup,
        macro_batch: a.macro_batch,
        micro_batch: a.micro_batch,
        max_seq_len: a.max_seq_len,
        context_tokens: a.context_tokens,
        seed: a.seed,
        ..PolicyConfig::default()
    }
}

/// A fresh trainer for `model`, or, when `out` holds a checkpoint, that checkpoint's model and
/// trainer state (a killed run goes on where it stopped).
fn start_or_resume(
    out: &Path,
    model: Llama,
    cfg: &PolicyConfig,
) -> anyhow::Result<(Llama, Trainer)> {
    if out.join("trainer_state.json").exists() {
        let model = prod_policy::load_model_dir(out, &device())?.0;
        Ok((model, Trainer::resume(cfg.clone(), out)?))
    } else {
        Ok((model, Trainer::new(cfg.clone())))
    }
}

/// The mean loss on the held-out examples; none without them.
fn held_out_loss(
    model: &Llama,
    eval: &[TrainExample],
    micro_batch: usize,
) -> anyhow::Result<Option<f64>> {
    if eval.is_empty() {
        return Ok(None);
    }
    Ok(Some(train::eval_loss(model, eval, micro_batch)?))
}

/// One JSON line: on stdout with `--json`, else on stderr beside the progress bar.
fn report_json(json: bool, v: serde_json::Value) {
    if json {
        println!("{v}");
    } else {
        eprintln!("{v}");
    }
}

/// The training steps from the trainer's step up to `steps`, cycling through `data` in order;
/// a checkpoint every `--save-every` steps, a JSON line per step with `--json`.
fn run_steps(
    a: &TrainArgs,
    out: &Path,
    model: &Llama,
    tok: &ProdTokenizer,
    trainer: &mut Trainer,
    data: &[TrainExample],
    steps: usize,
) -> anyhow::Result<()> {
    let macro_batch = trainer.cfg.macro_batch;
    let pb = progress(
        "train",
        "steps",
        steps.saturating_sub(trainer.state.step),
        a.json,
    );
    let start = Instant::now();
    let mut tokens_seen = 0usize;
    while trainer.state.step < steps {
        let pos = trainer.state.data_position % data.len();
        let batch: Vec<TrainExample> = (0..macro_batch)
            .map(|i| data[(pos + i) % data.len()].clone())
            .collect();
        let s = trainer.step(model, &batch)?;
        tokens_seen += batch.iter().map(|e| e.ids.len()).sum::<usize>();
        let tps = tokens_seen as f64 / start.elapsed().as_secs_f64().max(1e-9);
        pb.set_message(format!("loss {:.4} {:.0} tok/s", s.loss, tps));
        pb.inc(1);
        if a.json {
            println!(
                "{}",
                serde_json::json!({"step": s.step, "loss": s.loss, "grad_norm": s.grad_norm, "lr": s.lr, "tok_per_s": tps})
            );
        }
        if s.step % a.save_every == 0 {
            trainer.save_checkpoint(model, out)?;
            tok.save(&out.join("tokenizer.json"))?;
        }
    }
    pb.finish();
    Ok(())
}

/// Seconds for the matrix products of one training step on `tokens` tokens (best of 3): per
/// layer the seven projections and attention's two products, then the head on every position;
/// each forward product `[m,k]·[k,n]` also costs `[m,n]·[n,k]` and `[k,m]·[m,n]` backward.
fn model_gemm_seconds(
    cfg: &LlamaConfig,
    tokens: usize,
    dev: &prod_policy::candle_core::Device,
) -> anyhow::Result<f64> {
    use prod_policy::candle_core::Tensor;
    let (t, d, hd) = (tokens, cfg.hidden_size, cfg.head_dim());
    let (kv, aw) = (cfg.kv_heads() * hd, cfg.attention_width());
    let inter = cfg.intermediate_size;
    let mut shapes: Vec<(usize, usize, usize, usize)> = Vec::new(); // (batch, m, k, n)
    for _ in 0..cfg.num_hidden_layers {
        for (k, n) in [
            (d, aw),
            (d, kv),
            (d, kv),
            (aw, d),
            (d, inter),
            (d, inter),
            (inter, d),
        ] {
            shapes.push((1, t, k, n));
        }
        shapes.push((cfg.num_attention_heads, t, hd, t)); // scores
        shapes.push((cfg.num_attention_heads, t, t, hd)); // probabilities · values
    }
    shapes.push((1, t, d, cfg.vocab_size));
    let mut total = 0.0;
    let mut cache: std::collections::HashMap<(usize, usize, usize, usize), f64> =
        Default::default();
    for &(b, m, k, n) in &shapes {
        if let Some(s) = cache.get(&(b, m, k, n)) {
            total += s;
            continue;
        }
        let mut secs = 0.0;
        for (mm, kk, nn) in [(m, k, n), (m, n, k), (k, m, n)] {
            let a = Tensor::randn(0f32, 1.0, (b, mm, kk), dev)?;
            let w = Tensor::randn(0f32, 1.0, (b, kk, nn), dev)?;
            let mut best = f64::MAX;
            for _ in 0..3 {
                let s = Instant::now();
                let y = a.matmul(&w)?;
                let _ = y.flatten_all()?.get(0)?.to_scalar::<f32>()?;
                best = best.min(s.elapsed().as_secs_f64());
            }
            secs += best;
        }
        cache.insert((b, m, k, n), secs);
        total += secs;
    }
    Ok(total)
}

fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn bench(a: BenchArgs) -> anyhow::Result<()> {
    let dev = device();
    let model = bench_model(&a, &dev)?;
    let cfg = model.config().clone();
    let params = model.num_params();
    // GEMM rate: 1024³ f32 products, best of 10 on each thread pool, the higher rate (the
    // stricter limit).
    let gflops = prod_policy::ops::measured_gemm_gflops(1024, 10);
    let train_tokens = 256usize;
    let limit_s = 6.0 * params as f64 * train_tokens as f64 / (gflops * 1e9);
    // A tighter limit: the very GEMMs one training step of this model does (each projection
    // forward, and its two backward products), at their own skinny shapes, nothing else.
    let model_gemm_s = model_gemm_seconds(&cfg, train_tokens, &dev)?;
    let prompt: Vec<u32> = (0..a.prompt_tokens)
        .map(|i| (i * 37 % cfg.vocab_size) as u32)
        .collect();
    let s = timed_sampling(&model, &prompt, a.new_tokens)?;
    let step_s = timed_training_step(&model, train_tokens, a.train_steps)?;
    let out = serde_json::json!({
        "params": params, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "vocab": cfg.vocab_size,
        "prompt_tokens": prompt.len(), "prefill_s": s.prefill_s,
        "sample_tok_per_s_batch1": s.tok_s[0], "sample_tok_per_s_batch8": s.tok_s[1],
        "sample_q8_tok_per_s_batch1": s.tok_s[2], "sample_q8_tok_per_s_batch8": s.tok_s[3],
        "q8_weights_in_4_bits": s.four_bit as f64 / (s.four_bit + s.eight_bit).max(1) as f64,
        "q8_weights_mb": s.quant_bytes as f64 / 1e6,
        "train_s_per_step_256_tokens": step_s, "gemm_gflops": gflops,
        "matmul_bound_limit_s": limit_s, "train_over_limit": step_s / limit_s,
        "model_gemms_s": model_gemm_s, "train_over_model_gemms": step_s / model_gemm_s,
        "peak_rss_mb": peak_rss_mb(),
    });
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

/// What `timed_sampling` measured.
struct SamplingTimes {
    prefill_s: f64,
    /// Tokens per second: f32 at batch 1 and 8, then q8 at batch 1 and 8.
    tok_s: Vec<f64>,
    four_bit: usize,
    eight_bit: usize,
    quant_bytes: usize,
}

/// Sampling `new_tokens` tokens after `prompt`, no stop: the prompt's prefill alone, then f32 and
/// q8 decoding at batch 1 and 8 (tok/s counts the prefill too; the quantised copies are built
/// before the clock starts).
fn timed_sampling(
    model: &Llama,
    prompt: &[u32],
    new_tokens: usize,
) -> anyhow::Result<SamplingTimes> {
    let t = Instant::now();
    sample::sample(
        model,
        prompt,
        &SamplingParams {
            n: 1,
            max_new_tokens: 1,
            ..SamplingParams::default()
        },
    )?;
    let prefill_s = t.elapsed().as_secs_f64();
    let (four_bit, eight_bit, quant_bytes) = model.quantized_weights()?.summary();
    let mut tok_s = Vec::new();
    for decode_weights in [DecodeWeights::F32, DecodeWeights::Q8] {
        for batch in [1usize, 8] {
            let p = SamplingParams {
                n: batch,
                temperature: prod_core::PAPER_TEMPERATURE,
                max_new_tokens: new_tokens,
                seed: 1,
                decode_weights,
                ..SamplingParams::default()
            };
            let t = Instant::now();
            let s = sample::sample(model, prompt, &p)?;
            let total: usize = s.iter().map(|x| x.ids.len()).sum();
            tok_s.push(total as f64 / t.elapsed().as_secs_f64());
        }
    }
    Ok(SamplingTimes {
        prefill_s,
        tok_s,
        four_bit,
        eight_bit,
        quant_bytes,
    })
}

/// The fastest of `steps` training steps on one `tokens`-token example, all of it in the loss
/// (a first step before them is warm-up).
fn timed_training_step(model: &Llama, tokens: usize, steps: usize) -> anyhow::Result<f64> {
    let vocab = model.config().vocab_size;
    let ex = TrainExample {
        ids: (0..tokens).map(|i| (i * 7919 % vocab) as u32).collect(),
        loss_from: 1,
        weight: 1.0,
    };
    let mut trainer = Trainer::new(PolicyConfig {
        micro_batch: 1,
        warmup_steps: 0,
        ..PolicyConfig::default()
    });
    trainer.step(model, std::slice::from_ref(&ex))?;
    let mut step_s = f64::MAX;
    for _ in 0..steps {
        let t = Instant::now();
        trainer.step(model, std::slice::from_ref(&ex))?;
        step_s = step_s.min(t.elapsed().as_secs_f64());
    }
    Ok(step_s)
}

fn bench_sample(a: BenchSampleArgs) -> anyhow::Result<()> {
    use prod_rl::SampleRequest;
    use prod_run::{NativeParams, NativePolicy};

    let base = NativeParams {
        sampling: prod_core::Sampling {
            temperature: a.temperature,
            max_new_tokens: a.new_tokens,
            context_tokens: a.context_tokens,
            ..prod_core::Sampling::default()
        },
        seed: a.seed,
        batch_rows: a.batch_rows,
        ..prod_run::NativeParams::default()
    };
    let mut policy = NativePolicy::load(&a.model, base.clone())?;
    let theorems = bench_theorems(&a)?;
    let mut prompts = Vec::new();
    for (c, s) in &theorems {
        prompts.push(policy.prompt(c, s)?);
    }
    let prompt_tokens =
        prompts.iter().map(|p| p.len()).sum::<usize>() as f64 / prompts.len() as f64;
    let requests: Vec<SampleRequest<'_>> = theorems
        .iter()
        .map(|(c, s)| SampleRequest {
            context: c,
            statement: s,
            forced_t0: None,
        })
        .collect();
    let n = prompts.len();
    let mut rows = Vec::new();
    for &w in &a.weights {
        policy.params = NativeParams {
            decode_weights: w,
            ..base.clone()
        };
        if w == DecodeWeights::Q8 {
            policy.model.quantized_weights()?; // built before the clock starts
        }
        let old = if a.batched_only {
            None
        } else {
            Some(OneAtATime::sample(&policy, &prompts, &a, w)?)
        };
        let row = batched_row(&mut policy, &requests, &a, w, &base, old.as_ref())?;
        if !a.json {
            println!("{row}");
        }
        rows.push(row);
    }
    let out = serde_json::json!({
        "prompts": n, "samples": a.samples, "mean_prompt_tokens": prompt_tokens, "new_tokens": a.new_tokens,
        "batch_rows": a.batch_rows, "temperature": a.temperature, "runs": rows,
    });
    println!(
        "{}",
        if a.json {
            out.to_string()
        } else {
            serde_json::to_string_pretty(&out)?
        }
    );
    Ok(())
}

/// The benchmark's theorems (context, statement): `--prompts` dataset lines, or synthetic
/// contexts that fill the context budget.
fn bench_theorems(a: &BenchSampleArgs) -> anyhow::Result<Vec<(String, String)>> {
    let theorems: Vec<(String, String)> = match &a.data {
        Some(d) => read_jsonl(d, Some(a.prompts))?
            .into_iter()
            .map(|l| (l.context, l.statement))
            .collect(),
        None => (0..a.prompts)
            .map(|i| {
                let ctx: String = (0..a.context_tokens * 2)
                    .map(|j| format!("Lemma l{i}_{j} : {j} + {i} = {i} + {j}.\n"))
                    .collect();
                (
                    ctx,
                    format!("Lemma goal{i} : forall n : nat, n + {i} = {i} + n."),
                )
            })
            .collect(),
    };
    if theorems.len() < a.prompts {
        return Err(bad(format!(
            "--prompts {} but only {} theorems",
            a.prompts,
            theorems.len()
        )));
    }
    Ok(theorems)
}

/// One prompt after another: request `seq` alone, prefilled and decoded by itself.
struct OneAtATime {
    secs: f64,
    tokens: usize,
    /// Each sample's token ids, tree by tree.
    ids: Vec<Vec<u32>>,
}

impl OneAtATime {
    fn sample(
        policy: &prod_run::NativePolicy,
        prompts: &[Vec<u32>],
        a: &BenchSampleArgs,
        w: DecodeWeights,
    ) -> anyhow::Result<Self> {
        let end = policy.tok.end_id();
        let n = prompts.len();
        let pb = progress(
            &format!("{w} one at a time"),
            "samples",
            a.samples * n,
            a.json,
        );
        let t = Instant::now();
        let (mut tokens, mut texts) = (0usize, Vec::new());
        for tree in 0..a.samples {
            for (i, ids) in prompts.iter().enumerate() {
                let p = SamplingParams {
                    n: 1,
                    temperature: a.temperature,
                    max_new_tokens: a.new_tokens,
                    seed: prod_run::policy::mix_seed(a.seed, (tree * n + i) as u64),
                    stop: vec![end],
                    decode_weights: w,
                    ..SamplingParams::default()
                };
                let s = sample::sample(&policy.model, ids, &p)?.remove(0);
                tokens += s.ids.len();
                texts.push(s.ids);
                pb.inc(1);
            }
        }
        pb.finish();
        Ok(OneAtATime {
            secs: t.elapsed().as_secs_f64(),
            tokens,
            ids: texts,
        })
    }
}

/// The native policy: one call per tree, all its requests decoded together; the row of
/// figures for weights `w`, beside the one-at-a-time figures `old` where they were taken.
fn batched_row(
    policy: &mut prod_run::NativePolicy,
    requests: &[prod_rl::SampleRequest<'_>],
    a: &BenchSampleArgs,
    w: DecodeWeights,
    base: &prod_run::NativeParams,
    old: Option<&OneAtATime>,
) -> anyhow::Result<serde_json::Value> {
    use prod_run::policy::SeqPolicy;

    let n = requests.len();
    policy.prefills = sample::Prefills::new(base.prefill_cache_mb << 20);
    let before = policy.generated_tokens;
    let pb = progress(&format!("{w} batched"), "samples", a.samples * n, a.json);
    let t = Instant::now();
    let mut texts = Vec::new();
    for tree in 0..a.samples {
        texts.extend(policy.sample_at(requests, (tree * n) as u64)?);
        pb.inc(n as u64);
    }
    pb.finish();
    let new_s = t.elapsed().as_secs_f64();
    let new_tokens = policy.generated_tokens - before;
    let mut row = serde_json::json!({
        "decode_weights": w.to_string(),
        "batched_s": new_s, "batched_tokens": new_tokens, "batched_tok_per_s": new_tokens as f64 / new_s,
        "prefills": policy.prefills.computed, "prefills_reused": policy.prefills.reused,
    });
    if let Some(OneAtATime {
        secs: old_s,
        tokens: old_tokens,
        ids: old_ids,
    }) = old
    {
        let same = old_ids
            .iter()
            .zip(&texts)
            .filter(|(ids, c)| policy.tok.decode(ids).ok().as_deref() == Some(c.text.as_str()))
            .count();
        row["per_prompt_s"] = (*old_s).into();
        row["per_prompt_tokens"] = (*old_tokens).into();
        row["per_prompt_tok_per_s"] = (*old_tokens as f64 / old_s).into();
        row["speedup"] = (old_s / new_s).into();
        row["same_text"] = format!("{same}/{}", texts.len()).into();
    }
    Ok(row)
}

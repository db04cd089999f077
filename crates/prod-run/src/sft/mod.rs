//! Supervised fine-tuning (ProD-SFT, and the value model V on lines with `proved`): the one
//! SFT loop of the project. `prod train sft|value`, `prod model train`, the demo's and the
//! experiment's SFT stages all call [`run`] (or its steps: [`read_train_lines`],
//! [`training_set`], [`train`]) with an [`SftSettings`]; what differs between them is a
//! setting, never a second loop.
//!
//! The loop: the training lines read (a JSONL file, or a dataset directory's lines as
//! [`SftData`] selects), shuffled (seeded) before `limit`, built into examples (context cut to
//! its last tokens until the example fits; [`data::build_line`]), oversampled if asked; the
//! held-out loss before; macro batches cycling through the examples from the trainer's data
//! position until the step limit or the deadline; a checkpoint every `save_every` steps and
//! at the end (a model directory with the trainer's state: [`prod_policy::save_checkpoint_dir`]);
//! the held-out loss after. A run resumes from the checkpoint in its directory when
//! `resume` says so (its data order is the same: the shuffle is seeded).

pub mod console;
pub mod data;
pub mod files;
pub mod stats;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use prod_policy::model::Llama;
use prod_policy::prompt::{ExampleOptions, TrainExample};
use prod_policy::train::{self, StepStats, Trainer};
use prod_policy::{PolicyConfig, ProdTokenizer};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

pub use data::{read_data_lines, DataLine, Targets};
pub use stats::{data_stats, DataCounts, DataStats};

use crate::BadInput;

/// Held-out lines whose loss is measured before and after training, unless told otherwise.
pub const EVAL_LIMIT: usize = 200;
/// Steps between checkpoints of a command-line SFT, unless told otherwise.
pub const SAVE_EVERY: usize = 100;
/// `oversample_use_invoke` of the paper's method: every example once.
pub const NO_OVERSAMPLING: usize = 1;

/// Which lines of a dataset directory an SFT trains on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SftData {
    /// ProD-SFT: `sft.jsonl` (else `train.jsonl`), both the w/o lemma lines (which propose) and
    /// their augmented copies (lemmas admitted in the context); validation on `val.jsonl`.
    #[default]
    Sft,
    /// The paper's "SFT w/o lemma proposal" baseline (§5): D^{w/ l}, `train_wl.jsonl` — every
    /// human lemma kept in the context, proofs that propose nothing; validation `val_wl.jsonl`.
    WithLemmas,
    /// The lines of `sft.jsonl` whose proof starts with `<no_invoke>` and proposes nothing (the
    /// augmented copies and the lines that never proposed); validation likewise from `val.jsonl`.
    NoInvoke,
}

/// Where an SFT's lines come from.
#[derive(Clone, Debug, PartialEq)]
pub enum SftSource {
    /// JSONL files read leniently ([`read_data_lines`]: policy lines with optional `weight`,
    /// `statement_in_loss` and `variant`, value lines with `proved`); every error in them is
    /// the user's ([`BadInput`]). The held-out lines are optional.
    Files {
        train: PathBuf,
        eval: Option<PathBuf>,
    },
    /// A built dataset directory's examples (weight 1), as `which` selects; its validation
    /// file, when missing or unreadable, gives no held-out lines.
    Dataset { dir: PathBuf, which: SftData },
}

/// The generator of the seeded line shuffle. Two, because two callers' seeded runs predate
/// the one loop: `prod train`/`prod model train` shuffled with `StdRng`, the demo and the
/// experiment with `SmallRng`; each keeps its generator, so that its seeded runs see the same
/// lines in the same order as before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShuffleRng {
    Std,
    Small,
}

/// When the loop stops (besides [`SftSettings::deadline`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// When the trainer's step reaches one pass over the training examples.
    OneEpoch,
    /// When the trainer's step (a resumed run's earlier steps included) reaches this.
    Total(usize),
    /// Only the deadline stops it.
    Unbounded,
}

/// Everything an SFT run is asked to do.
#[derive(Clone, Debug)]
pub struct SftSettings {
    pub source: SftSource,
    pub targets: Targets,
    /// The optimizer and the examples' shape (`context_tokens`, `max_seq_len`); its `seed`
    /// is the trainer's, [`SftSettings::seed`] the data order's.
    pub trainer: PolicyConfig,
    /// Seed of the line shuffle (and of the oversampling shuffle).
    pub seed: u64,
    pub shuffle: ShuffleRng,
    /// Only the first N training lines after the shuffle.
    pub limit: Option<usize>,
    /// Only the first N held-out lines (in file order).
    pub eval_limit: usize,
    /// NOT the paper's method (1 = off): every policy example whose `t0` is `<use_invoke>`
    /// enters the training stream this many times, the copies shuffled in with the rest.
    pub oversample_use_invoke: usize,
    pub steps: Steps,
    /// No step starts after this instant.
    pub deadline: Option<Instant>,
    /// A checkpoint every N steps (and always at the end).
    pub save_every: Option<usize>,
    /// Resume from the checkpoint in the output directory when there is one (else it is
    /// overwritten by a fresh run).
    pub resume: bool,
}

impl SftSettings {
    /// The examples' shape: the trainer's context and sequence limits.
    pub fn example_options(&self) -> ExampleOptions {
        ExampleOptions {
            context_tokens: self.trainer.context_tokens,
            max_seq_len: self.trainer.max_seq_len,
            statement_in_loss: false,
        }
    }
}

/// What the loop tells its caller as it goes.
pub enum SftEvent<'a> {
    /// One of the first lines of a set that made no example (file, line, why).
    Dropped {
        path: &'a Path,
        line: usize,
        message: &'a str,
    },
    /// The data is ready and the held-out loss measured; the steps start.
    Started(&'a SftStart),
    /// One optimizer step done.
    Step {
        stats: &'a StepStats,
        tok_per_s: f64,
    },
    /// The last step done; the final checkpoint and held-out loss follow.
    StepsDone,
}

/// The training lines, shuffled and limited, with the file they came from.
pub struct SftLines {
    pub lines: Vec<DataLine>,
    pub path: PathBuf,
}

/// A run's training examples, with the training lines dropped, by reason.
pub struct TrainingSet {
    pub examples: Vec<TrainExample>,
    pub dropped: BTreeMap<&'static str, usize>,
}

/// The run at its first step.
#[derive(Clone, Debug)]
pub struct SftStart {
    pub examples: usize,
    pub dropped: BTreeMap<&'static str, usize>,
    pub use_invoke_share: Option<f64>,
    pub eval_examples: usize,
    /// Held-out lines that made no example.
    pub eval_dropped: usize,
    /// None without held-out examples.
    pub eval_loss_before: Option<f64>,
    /// The trainer's step (a resumed run's earlier steps).
    pub start_step: usize,
    /// The step it stops at, unless the deadline comes first (None: only the deadline).
    pub steps: Option<usize>,
}

/// What a finished run did.
#[derive(Clone, Debug)]
pub struct SftReport {
    pub start: SftStart,
    /// The trainer's step at the end.
    pub step: usize,
    /// Examples trained on by this run's steps.
    pub examples_seen: usize,
    pub eval_loss_after: Option<f64>,
    pub params: usize,
    pub vocab: usize,
}

impl SftReport {
    /// Steps this run took.
    pub fn steps_run(&self) -> usize {
        self.step - self.start.start_step
    }
}

/// The whole SFT: [`read_train_lines`], [`training_set`], [`train`] into `out`.
pub fn run(
    settings: &SftSettings,
    model: Llama,
    tok: ProdTokenizer,
    out: &Path,
    on_event: &mut dyn FnMut(SftEvent<'_>),
) -> anyhow::Result<SftReport> {
    let lines = read_train_lines(settings)?;
    let set = training_set(settings, &tok, &lines, on_event)?;
    train(settings, set, model, tok, out, on_event)
}

/// The training lines of `settings.source`, shuffled (seeded) before `limit`, so that a
/// limited run still sees every file and the data position means the same on resume.
pub fn read_train_lines(settings: &SftSettings) -> anyhow::Result<SftLines> {
    let (mut lines, path) = match &settings.source {
        SftSource::Files { train, .. } => (read_data_lines(train, None)?, train.clone()),
        SftSource::Dataset { dir, which } => dataset_lines(dir, *which, Split::Train)?,
    };
    match settings.shuffle {
        ShuffleRng::Std => lines.shuffle(&mut rand::rngs::StdRng::seed_from_u64(settings.seed)),
        ShuffleRng::Small => lines.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(settings.seed)),
    }
    if let Some(l) = settings.limit {
        lines.truncate(l);
    }
    Ok(SftLines { lines, path })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Split {
    Train,
    Val,
}

/// The lines of a dataset directory's `split` that `which` selects, and the file read.
fn dataset_lines(
    dir: &Path,
    which: SftData,
    split: Split,
) -> anyhow::Result<(Vec<DataLine>, PathBuf)> {
    let file = |name: &str| dir.join(name);
    let read = |p: &Path| prod_library::dataset::read_examples(p).map_err(|e| anyhow::anyhow!(e));
    let sft_or_train = || {
        let sft = file("sft.jsonl");
        read(&sft).map(|l| (l, sft)).or_else(|_| {
            let train = file("train.jsonl");
            read(&train).map(|l| (l, train))
        })
    };
    let val = |name: &str| {
        let p = file(name);
        (read(&p).unwrap_or_default(), p)
    };
    let (examples, path) = match (which, split) {
        (SftData::Sft | SftData::NoInvoke, Split::Train) => sft_or_train()?,
        (SftData::WithLemmas, Split::Train) => {
            let p = file("train_wl.jsonl");
            (read(&p)?, p)
        }
        (SftData::Sft | SftData::NoInvoke, Split::Val) => val("val.jsonl"),
        (SftData::WithLemmas, Split::Val) => val("val_wl.jsonl"),
    };
    // A dataset writes `<no_invoke>` exactly before the proofs that propose nothing (it builds
    // each line from a parsed proof), so the leading token tells, in any proof language.
    let keep = |e: &prod_library::dataset::Example| {
        which != SftData::NoInvoke
            || prod_core::T0::leading(&e.conditional_proof) == Some(prod_core::T0::NoInvoke)
    };
    let lines = examples
        .into_iter()
        .filter(keep)
        .enumerate()
        .map(|(i, e)| DataLine::from_example(i + 1, e))
        .collect();
    Ok((lines, path))
}

/// The held-out lines (the first `eval_limit`, in file order) and their file; none without.
fn read_eval_lines(settings: &SftSettings) -> anyhow::Result<(Vec<DataLine>, PathBuf)> {
    let (mut lines, path) = match &settings.source {
        SftSource::Files { eval: None, .. } => return Ok((Vec::new(), PathBuf::new())),
        SftSource::Files {
            eval: Some(eval), ..
        } => (
            read_data_lines(eval, Some(settings.eval_limit))?,
            eval.clone(),
        ),
        SftSource::Dataset { dir, which } => dataset_lines(dir, *which, Split::Val)?,
    };
    lines.truncate(settings.eval_limit);
    Ok((lines, path))
}

/// The examples of `lines` as the trainer sees them (cut and dropped), oversampled if asked;
/// no example at all is the user's error.
pub fn training_set(
    settings: &SftSettings,
    tok: &ProdTokenizer,
    lines: &SftLines,
    on_event: &mut dyn FnMut(SftEvent<'_>),
) -> anyhow::Result<TrainingSet> {
    let built = data::examples(
        tok,
        &lines.lines,
        &settings.example_options(),
        settings.targets,
        &mut |l, message| {
            on_event(SftEvent::Dropped {
                path: &lines.path,
                line: l.line,
                message,
            })
        },
    );
    let mut examples = built.examples;
    if settings.oversample_use_invoke > 1 {
        let copies: Vec<TrainExample> = examples
            .iter()
            .filter(|e| data::t0_id(tok, e) == Some(tok.use_invoke_id()))
            .flat_map(|e| std::iter::repeat_n(e.clone(), settings.oversample_use_invoke - 1))
            .collect();
        examples.extend(copies);
        // Seeded, so that the data position means the same thing on resume.
        examples.shuffle(&mut rand::rngs::StdRng::seed_from_u64(
            settings.seed ^ 0x0e5a_4d1e,
        ));
    }
    if examples.is_empty() {
        return Err(anyhow::Error::new(BadInput(format!(
            "{}: no usable training example",
            lines.path.display()
        ))));
    }
    Ok(TrainingSet {
        examples,
        dropped: built.dropped,
    })
}

/// Train on `set` from `model` (or, with `resume`, the checkpoint in `out`): the held-out loss
/// before, the steps, the final checkpoint, the held-out loss after.
pub fn train(
    settings: &SftSettings,
    set: TrainingSet,
    model: Llama,
    tok: ProdTokenizer,
    out: &Path,
    on_event: &mut dyn FnMut(SftEvent<'_>),
) -> anyhow::Result<SftReport> {
    let (eval, eval_dropped) = held_out_examples(settings, &tok, on_event)?;
    let (mut model, mut trainer) = start_or_resume(settings, out, model)?;
    let micro = trainer.cfg.micro_batch;
    let start = SftStart {
        examples: set.examples.len(),
        use_invoke_share: data::use_invoke_share(&tok, &set.examples),
        dropped: set.dropped,
        eval_examples: eval.len(),
        eval_dropped,
        eval_loss_before: held_out_loss(&model, &eval, micro)?,
        start_step: trainer.state.step,
        steps: match settings.steps {
            Steps::OneEpoch => Some(set.examples.len().div_ceil(trainer.cfg.macro_batch)),
            Steps::Total(n) => Some(n),
            Steps::Unbounded => None,
        },
    };
    on_event(SftEvent::Started(&start));
    let position = trainer.state.data_position;
    run_steps(
        settings,
        &mut trainer,
        (&mut model, &tok),
        &set.examples,
        (start.steps, out),
        on_event,
    )?;
    on_event(SftEvent::StepsDone);
    prod_policy::save_checkpoint_dir(out, &mut model, &tok, &trainer)?;
    Ok(SftReport {
        step: trainer.state.step,
        examples_seen: trainer.state.data_position - position,
        eval_loss_after: held_out_loss(&model, &eval, micro)?,
        params: model.num_params(),
        vocab: tok.vocab_size(),
        start,
    })
}

/// The held-out examples and how many held-out lines made none.
fn held_out_examples(
    settings: &SftSettings,
    tok: &ProdTokenizer,
    on_event: &mut dyn FnMut(SftEvent<'_>),
) -> anyhow::Result<(Vec<TrainExample>, usize)> {
    let (lines, path) = read_eval_lines(settings)?;
    let built = data::examples(
        tok,
        &lines,
        &settings.example_options(),
        settings.targets,
        &mut |l, message| {
            on_event(SftEvent::Dropped {
                path: &path,
                line: l.line,
                message,
            })
        },
    );
    Ok((built.examples, built.dropped.values().sum()))
}

/// A fresh trainer for `model`, or, with `resume` and a checkpoint in `out`, that checkpoint's
/// model and trainer state (a killed run goes on where it stopped).
fn start_or_resume(
    settings: &SftSettings,
    out: &Path,
    model: Llama,
) -> anyhow::Result<(Llama, Trainer)> {
    let cfg = settings.trainer.clone();
    if settings.resume && out.join("trainer_state.json").exists() {
        let model = prod_policy::load_model_dir(out, &prod_policy::candle_core::Device::Cpu)?.0;
        Ok((model, Trainer::resume(cfg, out)?))
    } else {
        Ok((model, Trainer::new(cfg)))
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

/// The steps from the trainer's step until `until` or the deadline, each a macro batch
/// cycling through `data` from the trainer's data position; a checkpoint every `save_every`.
fn run_steps(
    settings: &SftSettings,
    trainer: &mut Trainer,
    (model, tok): (&mut Llama, &ProdTokenizer),
    data: &[TrainExample],
    (until, out): (Option<usize>, &Path),
    on_event: &mut dyn FnMut(SftEvent<'_>),
) -> anyhow::Result<()> {
    let macro_batch = trainer.cfg.macro_batch;
    let clock = Instant::now();
    let mut tokens_seen = 0usize;
    while until.is_none_or(|u| trainer.state.step < u)
        && settings.deadline.is_none_or(|d| Instant::now() < d)
    {
        let pos = trainer.state.data_position % data.len();
        let batch: Vec<TrainExample> = (0..macro_batch)
            .map(|i| data[(pos + i) % data.len()].clone())
            .collect();
        let stats = trainer.step(model, &batch)?;
        tokens_seen += batch.iter().map(|e| e.ids.len()).sum::<usize>();
        let tok_per_s = tokens_seen as f64 / clock.elapsed().as_secs_f64().max(1e-9);
        on_event(SftEvent::Step {
            stats: &stats,
            tok_per_s,
        });
        if settings
            .save_every
            .is_some_and(|n| stats.step.is_multiple_of(n))
        {
            prod_policy::save_checkpoint_dir(out, model, tok, trainer)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 12 policy lines (every third proposes a lemma) and 2 value lines; a tokenizer on them.
    fn files() -> (tempfile::TempDir, PathBuf, ProdTokenizer) {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for i in 0..12 {
            let cp = if i % 3 == 0 {
                format!("<use_invoke> intros. <invoke> Lemma h{i} : True. </invoke> exact I.")
            } else {
                "<no_invoke> lia.".to_string()
            };
            let variant = if i % 2 == 0 { "augmented" } else { "wo_lemmas" };
            let line = serde_json::json!({"statement": format!("Lemma l{i} : {i} + 0 = {i}."),
                "conditional_proof": cp, "variant": variant});
            text.push_str(&format!("{line}\n"));
        }
        text.push_str("{\"statement\": \"Lemma v : True.\", \"proved\": true}\n\n");
        text.push_str("{\"statement\": \"Lemma w : False.\", \"proved\": false}\n");
        let path = dir.path().join("data.jsonl");
        std::fs::write(&path, &text).unwrap();
        let tok = ProdTokenizer::train_bpe(text.lines(), 300, 2).unwrap();
        (dir, path, tok)
    }

    fn settings(path: &Path) -> SftSettings {
        SftSettings {
            source: SftSource::Files {
                train: path.to_path_buf(),
                eval: None,
            },
            targets: Targets::Any,
            trainer: PolicyConfig::default(),
            seed: 7,
            shuffle: ShuffleRng::Std,
            limit: None,
            eval_limit: 10,
            oversample_use_invoke: 1,
            steps: Steps::OneEpoch,
            deadline: None,
            save_every: None,
            resume: false,
        }
    }

    fn ids(lines: &SftLines) -> Vec<String> {
        lines.lines.iter().map(|l| l.id.clone()).collect()
    }

    #[test]
    fn the_shuffle_is_seeded_by_generator_and_comes_before_the_limit() {
        let (_dir, path, _) = files();
        let s = settings(&path);
        let all = read_train_lines(&s).unwrap();
        assert_eq!(all.lines.len(), 14);
        assert_eq!(ids(&all), ids(&read_train_lines(&s).unwrap()));
        let small = SftSettings {
            shuffle: ShuffleRng::Small,
            ..s.clone()
        };
        assert_ne!(ids(&all), ids(&read_train_lines(&small).unwrap()));
        let limited = read_train_lines(&SftSettings {
            limit: Some(5),
            ..s
        })
        .unwrap();
        assert_eq!(ids(&limited), ids(&all)[..5]);
    }

    #[test]
    fn targets_select_lines_and_oversampling_repeats_use_invoke_examples() {
        let (_dir, path, tok) = files();
        let count = |s: &SftSettings| {
            let lines = read_train_lines(s).unwrap();
            training_set(s, &tok, &lines, &mut |_| {}).unwrap()
        };
        let s = settings(&path);
        let any = count(&s);
        assert_eq!(any.examples.len(), 14);
        let policy = count(&SftSettings {
            targets: Targets::Policy,
            ..s.clone()
        });
        assert_eq!(policy.examples.len(), 12);
        assert_eq!(policy.dropped.get("no_target"), Some(&2));
        assert_eq!(
            data::use_invoke_share(&tok, &policy.examples),
            Some(4.0 / 12.0)
        );
        let value = count(&SftSettings {
            targets: Targets::Value,
            ..s.clone()
        });
        assert_eq!(value.examples.len(), 2);
        let over = count(&SftSettings {
            targets: Targets::Policy,
            oversample_use_invoke: 3,
            ..s
        });
        assert_eq!(over.examples.len(), 12 + 2 * 4);
        assert_eq!(
            data::use_invoke_share(&tok, &over.examples),
            Some(12.0 / 20.0)
        );
    }

    #[test]
    fn data_stats_count_each_variant_and_the_total() {
        let (_dir, path, tok) = files();
        let lines = read_data_lines(&path, None).unwrap();
        let opts = settings(&path).example_options();
        let stats = data_stats(&tok, &lines, &opts).unwrap();
        assert_eq!(stats.total.lines, 14);
        assert_eq!(stats.total.examples, 14);
        assert_eq!(stats.total.use_invoke_lines, 4);
        let keys: Vec<&str> = stats.by_variant.keys().map(String::as_str).collect();
        assert_eq!(keys, ["(none)", "augmented", "wo_lemmas"]);
        assert_eq!(stats.by_variant["augmented"].use_invoke_lines, 2);
        assert_eq!(stats.by_variant["(none)"].lines, 2);
        // The table: heading, column names, a row per variant, the total, the legend.
        let table = stats.table(&path, &opts);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 2 + 3 + 1 + 1, "{table}");
        assert!(rows[0].ends_with(&format!(
            "max_seq_len {}, context_tokens {}",
            opts.max_seq_len, opts.context_tokens
        )));
        assert!(rows[1].starts_with("variant") && rows[1].ends_with("dropped"));
        let total: Vec<&str> = rows[5].split_whitespace().collect();
        assert_eq!(&total[..4], ["total", "14", "28.6%", "14"], "{table}");
        assert!(rows[6].starts_with("(use_inv:"));
    }

    #[test]
    fn a_file_without_a_usable_line_is_the_users_error() {
        let (dir, _, tok) = files();
        let path = dir.path().join("values.jsonl");
        std::fs::write(
            &path,
            "{\"statement\": \"Lemma v : True.\", \"proved\": true}\n",
        )
        .unwrap();
        let s = SftSettings {
            targets: Targets::Policy,
            ..settings(&path)
        };
        let lines = read_train_lines(&s).unwrap();
        let e = training_set(&s, &tok, &lines, &mut |_| {}).err().unwrap();
        assert!(e.downcast_ref::<BadInput>().is_some(), "{e}");
        std::fs::write(&path, "{\"context\": \"\"}\n").unwrap();
        let e = read_train_lines(&s).err().unwrap();
        assert!(
            e.downcast_ref::<BadInput>().is_some() && e.to_string().contains(":1:"),
            "{e}"
        );
    }
}

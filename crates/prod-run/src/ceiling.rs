//! The ceiling: how much room decomposition leaves over the hammer. If a policy proposed the
//! lemmas the library's authors did, how many theorems would a tree prove with CoqHammer
//! closing the lemmas? Measured as an evaluation ([`run_eval_given`], like `prod eval
//! --trees`) whose nodes are the dataset's ground truth plus hammer leaves
//! ([`crate::leaves`]), in the run store under [`Phase::Ceiling`], resumable, beside
//! CoqHammer alone on the same theorems ([`crate::baseline`]), paired theorem by theorem:
//!
//! * round 0, **the ground truth at the root**: each theorem's human conditional proof as its
//!   only root, every lemma it proposes a hammer leaf;
//! * round 1, **the ground-truth tree to depth d**: the human decomposition of every lemma
//!   down to level d (the split's example of the same file and statement, where that example
//!   itself proposes lemmas), every proposed lemma a hammer leaf. A lemma whose human proof is
//!   flat (proposes nothing) keeps only its leaf, as does one the split has no example of: with
//!   the human's flat proofs the tree would be the human proof itself, which proves nearly
//!   every theorem by construction and says nothing about the room over the hammer.
//!
//! The theorems are those `prod eval --theorems N --seed S` draws from the split, kept when
//! their ground-truth depth is at least `min_depth` (default 1: at depth 0 the ground truth is
//! a whole human proof, nothing is decomposed). Every check also goes through the cross-run
//! cache of CoqHammer alone (`$PROD_CACHE/hammer-baseline.sqlite`): the ceiling is
//! deterministic, so a second run on the same machine costs nothing.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use prod_check::{CachedChecker, Checker, Verdict};
use prod_core::pass_at_k::{Bootstrap, TheoremOutcome};
use prod_core::{ConditionalProof, ProofLanguage};
use prod_report::{Comparison, DatasetInfo, Evaluation, ModelInfo, RunReport, TheoremDetail};
use prod_rl::{GeneratedNode, Origin};
use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::eval::{dataset_statements, run_eval_given, EvalOptions, EvalResult, Theorem};
use crate::job::{open_store, BadInput, CoqJobConfig, ProverChoice};
use crate::progress::Bars;
use crate::prover::{CheckSetup, ProverKind};
use crate::store::{Phase, RunStore};

/// `prod ceiling` as a job; also its flags (feature `clap`; the Coq settings come from the
/// config file and the command's checker flags).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default, deny_unknown_fields)]
pub struct CeilingJob {
    /// Dataset directory written by `prod dataset build`.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dataset: PathBuf,
    /// Which split file of --dataset holds the theorems.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CeilingJob::default().split))]
    pub split: String,
    /// The theorems `prod eval --theorems N` draws with --seed (default: all of the split), of
    /// which those of ground-truth depth ≥ --min-depth are kept.
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub theorems: Option<usize>,
    /// Keep the theorems whose ground-truth proof tree is at least this deep (at depth 0 the
    /// ground truth is a whole human proof: nothing is decomposed).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CeilingJob::default().min_depth))]
    pub min_depth: u32,
    /// d of the second row, the ground-truth tree to depth d (0: the first row only).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CeilingJob::default().depth))]
    pub depth: u32,
    #[cfg_attr(feature = "clap", arg(skip))]
    pub coq: CoqJobConfig,
    /// Run directory (created; an existing one is resumed).
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: PathBuf,
    /// Verification cache file (default RUN_DIR/cache.sqlite).
    #[cfg_attr(feature = "clap", arg(long))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathBuf>,
    /// Cross-run cache shared with CoqHammer alone (default
    /// $PROD_CACHE/hammer-baseline.sqlite, PROD_CACHE defaulting to ~/.cache/prod).
    #[cfg_attr(
        feature = "clap",
        arg(long = "hammer-baseline-cache", value_name = "HAMMER_BASELINE_CACHE")
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hammer_cache: Option<PathBuf>,
    /// Seed of the theorem draw and of the bootstrap.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CeilingJob::default().seed))]
    pub seed: u64,
    /// Bootstrap rounds of each 95% interval.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CeilingJob::default().bootstrap,
        value_parser = prod_core::range::parse::positive_usize))]
    pub bootstrap: usize,
    /// Time limit of one cold `coqc` re-check of an assembled proof, seconds.
    #[cfg_attr(feature = "clap", arg(long = "final-timeout", value_name = "FINAL_TIMEOUT", default_value_t = CeilingJob::default().final_timeout_s,
        value_parser = prod_core::range::parse::positive_u64))]
    pub final_timeout_s: u64,
}

impl Default for CeilingJob {
    fn default() -> Self {
        let e = EvalOptions::default();
        CeilingJob {
            dataset: PathBuf::new(),
            split: e.split,
            theorems: None,
            min_depth: 1,
            depth: e.depth,
            coq: CoqJobConfig::default(),
            out: PathBuf::from("runs/ceiling"),
            cache: None,
            hammer_cache: None,
            seed: e.seed,
            bootstrap: e.bootstrap,
            final_timeout_s: e.final_timeout_s,
        }
    }
}

impl CeilingJob {
    /// The job as its run store keeps it: not where it runs (the workers, the caches).
    fn identity(&self) -> CeilingJob {
        CeilingJob {
            coq: CoqJobConfig {
                workers: 0,
                ..self.coq.clone()
            },
            out: PathBuf::new(),
            cache: None,
            hammer_cache: None,
            ..self.clone()
        }
    }

    /// The evaluation options of one row (one tree per theorem, pass@1).
    fn options(&self, name: String, depth: u32) -> EvalOptions {
        EvalOptions {
            name,
            split: self.split.clone(),
            ks: vec![1],
            samples: 1,
            depth,
            final_timeout_s: self.final_timeout_s,
            bootstrap: self.bootstrap,
            seed: self.seed,
            temperature: 0.0,
            hammer_leaves: true,
        }
    }
}

/// The first row's name.
pub const ROOT_ROW: &str = "Ground truth at the root + hammer leaves";

/// The second row's name.
pub fn tree_row(depth: u32) -> String {
    format!("Ground-truth tree to depth {depth} + hammer leaves")
}

/// What the ceiling measured: its rows, CoqHammer alone on the same theorems, and the
/// figures of the first row that the report's notes give.
pub struct Ceiling {
    pub root: EvalResult,
    pub tree: Option<EvalResult>,
    pub hammer: crate::baseline::BaselineRun,
    /// Roots (the ground truth of each theorem) the checker found locally correct.
    pub roots_correct: usize,
    /// The lemmas of the second row's tree, by what it has of their ground truth.
    pub tree_lemmas: TreeLemmas,
    pub seconds: f64,
}

/// `prod ceiling`: the rows and CoqHammer alone in `job.out` (resumed when it exists), then
/// `run.json`, `report.html` and `summary.md` there; the report and what it was made of.
pub fn run_ceiling_job(job: &CeilingJob, bars: &Bars) -> anyhow::Result<(RunReport, Ceiling)> {
    job.coq
        .validate()
        .map_err(|e| BadInput(format!("coq.{e}")))?;
    if !job.coq.hammer {
        return Err(BadInput("the ceiling needs Coq with the hammer on".into()).into());
    }
    let theorems = ceiling_theorems(job)?;
    let store = open_store(&job.out, None)?;
    store.ensure_meta("ceiling_job", &serde_json::to_string(&job.identity())?)?;
    let cache = job
        .cache
        .clone()
        .unwrap_or_else(|| job.out.join("cache.sqlite"));
    let choice = ProverChoice {
        kind: ProverKind::Coq,
        coq: &job.coq,
        isabelle: None,
    };
    let prover = choice.start(&job.dataset, &cache, &job.out, None)?;
    let novel = dataset_statements(&job.dataset, prover.lang);
    let ctx = RunContext {
        store: &store,
        prover: prover.setup(),
        out: &job.out,
        bars,
        dataset_statements: &novel,
    };
    let c = run_ceiling(&ctx, job, &theorems)?;
    let report = ceiling_report(job, &c, &prover.name)?;
    crate::job::write_report(&job.out, &report)?;
    crate::job::write_pages(&job.out, &report)?;
    Ok((report, c))
}

/// The theorems an evaluation of `job.theorems` draws from the split, of ground-truth depth at
/// least `job.min_depth`: possibly none.
pub fn decomposed_theorems(job: &CeilingJob) -> anyhow::Result<Vec<Theorem>> {
    let mut theorems = crate::job::run_theorems(&job.dataset, &job.split, job.theorems, job.seed)?;
    theorems.retain(|t| t.depth.unwrap_or(0) >= job.min_depth);
    Ok(theorems)
}

/// The theorems an evaluation of `job.theorems` draws from the split, of ground-truth depth at
/// least `job.min_depth`; none is the user's error.
pub fn ceiling_theorems(job: &CeilingJob) -> anyhow::Result<Vec<Theorem>> {
    let theorems = decomposed_theorems(job)?;
    if theorems.is_empty() {
        return Err(BadInput(format!(
            "{}: no theorem of split {:?}{} has a ground-truth depth of at least {}",
            job.dataset.display(),
            job.split,
            job.theorems
                .map_or_else(String::new, |n| format!(" (of the {n} drawn)")),
            job.min_depth
        ))
        .into());
    }
    Ok(theorems)
}

/// The rows and CoqHammer alone on `theorems` (in `ctx`'s store, resumable), every check also
/// behind the cross-run cache of CoqHammer alone.
pub fn run_ceiling(
    ctx: &RunContext<'_>,
    job: &CeilingJob,
    theorems: &[Theorem],
) -> anyhow::Result<Ceiling> {
    let start = Instant::now();
    let path = job
        .hammer_cache
        .clone()
        .unwrap_or_else(crate::baseline::default_cache);
    let shared: CachedChecker<&dyn Checker> =
        crate::baseline::shared_cache(ctx.prover.checker, &path)?;
    let sub = RunContext {
        prover: CheckSetup {
            checker: &shared,
            ..ctx.prover
        },
        ..*ctx
    };
    let lang = ctx.prover.lang;
    let gt = GroundTruth::read(&job.dataset, &job.split, lang).map_err(BadInput)?;
    ctx.bars.say(&format!(
        "ceiling: {} theorems of ground-truth depth ≥ {}: the ground truth at the root{}, each proposed lemma a hammer leaf; then CoqHammer alone",
        theorems.len(),
        job.min_depth,
        if job.depth > 0 { format!(", then the ground-truth tree to depth {}", job.depth) } else { String::new() }
    ));
    let (nodes, _) = gt.nodes(theorems, 0, lang);
    let opts = job.options(ROOT_ROW.to_string(), 0);
    let root = run_eval_given(&sub, &nodes, theorems, &opts, 0, Phase::Ceiling)?;
    let (tree, tree_lemmas) = if job.depth > 0 {
        let (nodes, missing) = gt.nodes(theorems, job.depth, lang);
        let opts = job.options(tree_row(job.depth), job.depth);
        let r = run_eval_given(&sub, &nodes, theorems, &opts, 1, Phase::Ceiling)?;
        (Some(r), missing)
    } else {
        (None, TreeLemmas::default())
    };
    let base = job.options(crate::baseline::HAMMER_BASELINE.to_string(), 0);
    let hammer = crate::baseline::run_hammer_baseline(&sub, theorems, &base, None)?;
    Ok(Ceiling {
        roots_correct: roots_correct(ctx.store)?,
        root,
        tree,
        hammer,
        tree_lemmas,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The first row's roots that the checker proved.
fn roots_correct(store: &RunStore) -> anyhow::Result<usize> {
    let mut n = 0;
    for node in store.nodes(0, Phase::Ceiling)? {
        if node.depth == 0 && matches!(store.verdict(node.id)?, Some(Verdict::Proved { .. })) {
            n += 1;
        }
    }
    Ok(n)
}

/// The distinct lemmas of the ground-truth trees (per theorem) down to the depth limit, by what
/// the tree has of them: their human decomposition, or only their hammer leaf because their
/// human proof is flat or the split has no example of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeLemmas {
    /// Their human conditional proof proposes lemmas: it is a node of the tree.
    pub decomposed: usize,
    /// Their human proof is flat (or not readable as a conditional proof): a leaf only.
    pub flat: usize,
    /// The split has no example of them: a leaf only.
    pub without_example: usize,
}

/// The split's ground-truth conditional proofs by file and statement: each theorem's own, and
/// the lemmas' of the tree rows.
struct GroundTruth {
    /// (logical path, normalised statement) → conditional proof.
    by_goal: HashMap<(String, String), String>,
    /// Example id → logical path.
    file_of: HashMap<String, String>,
}

impl GroundTruth {
    fn read(dataset: &Path, split: &str, lang: &dyn ProofLanguage) -> Result<Self, String> {
        let path = dataset.join(format!("{split}.jsonl"));
        let mut gt = GroundTruth {
            by_goal: HashMap::new(),
            file_of: HashMap::new(),
        };
        for e in prod_library::dataset::read_examples(&path)? {
            let key = (
                e.logical_path.clone(),
                lang.normalize_statement(&e.statement),
            );
            gt.by_goal.entry(key).or_insert(e.conditional_proof);
            gt.file_of.insert(e.id, e.logical_path);
        }
        Ok(gt)
    }

    /// One tree per theorem (tree 0): every theorem's ground truth as its root (in the order
    /// of `theorems`), then below each root the ground truth of every lemma it proposes that
    /// proposes lemmas itself, level by level down to `depth`, each lemma once per theorem;
    /// and the lemmas by what they got.
    fn nodes(
        &self,
        theorems: &[Theorem],
        depth: u32,
        lang: &dyn ProofLanguage,
    ) -> (Vec<GeneratedNode>, TreeLemmas) {
        let node = |t: &Theorem, statement: &str, depth: u32, text: &str| GeneratedNode {
            context: t.context.clone(),
            statement: statement.to_string(),
            depth,
            tree: 0,
            forced_t0: None,
            origin: Origin::GroundTruth,
            completion: text.to_string(),
            proof: ConditionalProof::parse_with(text, lang),
            truncated: false,
        };
        let (mut roots, mut below) = (Vec::new(), Vec::new());
        let mut counts = TreeLemmas::default();
        for t in theorems {
            let text = t.ground_truth.as_deref().unwrap_or_default();
            roots.push(node(t, &t.statement, 0, text));
            let file = self.file_of.get(&t.id);
            let mut seen = HashSet::from([lang.normalize_statement(&t.statement)]);
            let mut frontier: Vec<ConditionalProof> = ConditionalProof::parse_with(text, lang)
                .into_iter()
                .collect();
            for level in 1..=depth {
                let mut next = Vec::new();
                for l in frontier.iter().flat_map(|p| p.lemmas()) {
                    let key = lang.normalize_statement(l);
                    if !seen.insert(key.clone()) {
                        continue;
                    }
                    let human = file.and_then(|f| self.by_goal.get(&(f.clone(), key)));
                    let parsed = human.map(|text| (text, ConditionalProof::parse_with(text, lang)));
                    match parsed {
                        Some((text, Ok(p))) if p.lemma_count() > 0 => {
                            counts.decomposed += 1;
                            below.push(node(t, l, level, text));
                            next.push(p);
                        }
                        Some(_) => counts.flat += 1,
                        None => counts.without_example += 1,
                    }
                }
                frontier = next;
            }
        }
        roots.extend(below);
        (roots, counts)
    }
}

/// The ceiling's `run.json`: the rows (the tree row also without its leaves), CoqHammer alone,
/// each row against it, and the first row's figures in a line.
pub fn ceiling_report(job: &CeilingJob, c: &Ceiling, prover: &str) -> anyhow::Result<RunReport> {
    let hammer = &c.hammer.result.evaluation;
    let boot = job.options(String::new(), 0).intervals();
    let rows: Vec<&Evaluation> = std::iter::once(&c.root.evaluation)
        .chain(c.tree.as_ref().map(|t| &t.evaluation))
        .collect();
    let comparisons: Vec<Comparison> = rows
        .iter()
        .map(|e| crate::baseline::compare(e, hammer, &[1], boot))
        .collect();
    let mut notes = vec![root_line(c, &comparisons[0])];
    if c.tree.is_some() {
        notes.push(format!(
            "the ground-truth tree to depth {}: {} lemmas with their human decomposition; a hammer leaf only: {} whose human proof is flat, {} the split has no example of",
            job.depth, c.tree_lemmas.decomposed, c.tree_lemmas.flat, c.tree_lemmas.without_example
        ));
    }
    notes.extend(
        comparisons
            .iter()
            .map(|x| crate::baseline::summary_line(x, None)),
    );
    for row in &rows {
        notes.extend(depth_lines(row, hammer, boot));
    }
    notes.push(format!(
        "{:.0} s this invocation (CoqHammer alone {:.0} s); every check also through the cross-run cache of CoqHammer alone",
        c.seconds, c.hammer.seconds
    ));
    let mut evaluations: Vec<Evaluation> = rows.into_iter().cloned().collect();
    evaluations.extend(c.tree.as_ref().and_then(|t| t.without_leaves.clone()));
    evaluations.push(hammer.clone());
    Ok(RunReport {
        title: format!(
            "The ceiling: the ground-truth decomposition with hammer leaves on {}",
            job.split
        ),
        created: crate::job::now_rfc3339(),
        prover: prover.to_string(),
        dataset: DatasetInfo {
            name: job
                .dataset
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            split: job.split.clone(),
            size: c.root.evaluation.theorems,
        },
        model: ModelInfo {
            name: "the dataset's ground truth (human conditional proofs)".into(),
            params: None,
        },
        config: serde_json::to_value(job.identity())?,
        evaluations,
        notes,
        comparisons,
        ..RunReport::default()
    })
}

/// The first row in a line, as the measurement by hand was put: roots locally correct,
/// lemmas the hammer closed, theorems proved and how many of them CoqHammer alone does not.
pub fn root_line(c: &Ceiling, vs: &Comparison) -> String {
    let e = &c.root.evaluation;
    let (leaves, closed) = e
        .hammer_leaves
        .as_ref()
        .map_or((0, 0), |l| (l.leaves, l.proved));
    format!(
        "the ground truth at the root: {} of {} roots locally correct; CoqHammer closes {closed} of their {leaves} lemmas; {} of {} theorems globally correct (cold re-check passed), {} of them not proved by CoqHammer alone (which proves {} of the {})",
        c.roots_correct,
        e.theorems,
        vs.both + vs.method_only,
        e.theorems,
        vs.method_only,
        vs.both + vs.baseline_only,
        e.theorems
    )
}

/// `e` on the theorems of ground-truth depth `depth` only: their details and pass@1 with its
/// 95% interval, recomputed from their outcomes.
fn at_depth(e: &Evaluation, depth: Option<u32>, boot: Bootstrap) -> Evaluation {
    let theorems_detail: Vec<TheoremDetail> = e
        .theorems_detail
        .iter()
        .filter(|t| t.ground_truth_depth == depth)
        .cloned()
        .collect();
    let outcomes: Vec<TheoremOutcome> = theorems_detail
        .iter()
        .map(|t| TheoremOutcome {
            samples: t.trees,
            correct: t.proved_trees,
        })
        .collect();
    Evaluation {
        name: e.name.clone(),
        split: e.split.clone(),
        theorems: theorems_detail.len(),
        samples_per_theorem: e.samples_per_theorem,
        pass_at_k: prod_core::pass_at_k::estimate(&outcomes, 1, boot)
            .map(|p| prod_report::PassAtK::from_estimate(&p))
            .into_iter()
            .collect(),
        theorems_detail,
        ..Evaluation::default()
    }
}

/// `row` against CoqHammer alone at each ground-truth depth, a line each: pass@1 of both with
/// their 95% intervals, the paired difference, and who proved what.
pub fn depth_lines(row: &Evaluation, hammer: &Evaluation, boot: Bootstrap) -> Vec<String> {
    let depths: std::collections::BTreeSet<Option<u32>> = row
        .theorems_detail
        .iter()
        .map(|t| t.ground_truth_depth)
        .collect();
    let pct = |p: Option<&prod_report::PassAtK>| {
        p.map_or_else(
            || "–".to_string(),
            |p| {
                format!(
                    "{:.1}% [{:.1}, {:.1}]",
                    100.0 * p.estimate,
                    100.0 * p.ci_low,
                    100.0 * p.ci_high
                )
            },
        )
    };
    depths
        .into_iter()
        .map(|d| {
            let (a, b) = (at_depth(row, d, boot), at_depth(hammer, d, boot));
            let c = crate::baseline::compare(&a, &b, &[1], boot);
            let r = c.rows.first();
            let delta = r.and_then(|r| r.difference.as_ref()).map_or_else(
                || "–".to_string(),
                |x| {
                    format!(
                        "{:+.1} [{:+.1}, {:+.1}]",
                        100.0 * x.estimate,
                        100.0 * x.ci_low,
                        100.0 * x.ci_high
                    )
                },
            );
            format!(
                "ground-truth depth {}: {} theorems; {} {}, {} {}, Δ {delta} points (paired); proved by both {}, only by the first {}, only by {} {}, by neither {}",
                d.map_or_else(|| "unknown".to_string(), |d| d.to_string()),
                a.theorems,
                row.name,
                pct(r.and_then(|r| r.method.as_ref())),
                hammer.name,
                pct(r.and_then(|r| r.baseline.as_ref())),
                c.both,
                c.method_only,
                hammer.name,
                c.baseline_only,
                c.neither
            )
        })
        .collect()
}

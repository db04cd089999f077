//! Whole jobs as the CLI runs them: load the dataset and the model, start the Coq pool with its
//! verification cache, run (or resume) in a run directory, write `RUN_DIR/run.json`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use prod_check::{CachedChecker, Checker, VerificationCache};
use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_report::{DatasetInfo, ModelInfo, RunReport};
use serde::{Deserialize, Serialize};

use crate::eval::{dataset_statements, run_eval, EvalOptions, EvalResult, Theorem};
use crate::policy::{NativeParams, NativePolicy};
use crate::progress::Bars;
use crate::prover::ProverKind;
use crate::store::{Phase, RunStore};

/// Input that the user got wrong (exit code 2 in the CLI).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// `prod eval` as a job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalJob {
    pub model: PathBuf,
    pub dataset: PathBuf,
    /// Theorems drawn (seeded) from the split; all when `None`.
    pub theorems: Option<usize>,
    pub options: EvalOptions,
    pub sampling: NativeParams,
    /// `coq` (default) or `isabelle` (then `isabelle` says which server and session).
    #[serde(default, skip_serializing_if = "ProverKind::is_coq")]
    pub prover: ProverKind,
    pub coq: CoqJobConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isabelle: Option<prod_check_isabelle::IsabelleCheckConfig>,
    pub out: PathBuf,
    /// Verification cache file (default `RUN_DIR/cache.sqlite`).
    pub cache: Option<PathBuf>,
    /// Sample from a remote inference server instead of the native model (`model` then only
    /// provides the tokenizer, so prompts are the very tokens the served model was trained on).
    #[serde(default)]
    pub remote: Option<prod_remote::RemoteConfig>,
    /// Scale-out: the run store and the checks in PostgreSQL (see [`SharedStore`]).
    #[serde(default)]
    pub postgres: Option<SharedStore>,
    /// Proof trees sampled elsewhere (`crate::trees`): they are checked instead of sampling
    /// (`model` is then unused; samples, depth and temperature come from the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trees: Option<PathBuf>,
    /// CoqHammer alone on the same theorems beside the policy ([`crate::baseline`]; Coq only).
    #[serde(default, skip_serializing_if = "HammerBaseline::is_off")]
    pub hammer_baseline: HammerBaseline,
}

/// Whether an evaluation runs CoqHammer alone beside the policy, and where that baseline's
/// checks are cached across runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HammerBaseline {
    pub enabled: bool,
    /// Verification cache of the baseline's checks (default
    /// [`crate::baseline::default_cache`]); the run's own cache is used as well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<PathBuf>,
}

impl HammerBaseline {
    /// On, with the default cache.
    pub fn on() -> Self {
        HammerBaseline {
            enabled: true,
            cache: None,
        }
    }

    pub fn is_off(&self) -> bool {
        !self.enabled
    }

    /// The cache file its checks go through.
    pub fn cache_path(&self) -> PathBuf {
        self.cache
            .clone()
            .unwrap_or_else(crate::baseline::default_cache)
    }
}

/// Scale-out: the run store lives in a PostgreSQL database (schema
/// `prod_run_<run>`), and every check goes through the run's queue in the same database, where
/// `prod queue work --store URL --run RUN` processes on any machine claim it. A worker only
/// claims checks made for its exact checker configuration (the fingerprint: Coq version, time
/// limits, automation); one that dies leaves its claims to expire after `lease_s` and be
/// retried. The run directory keeps the files (checkpoints, examples, reports).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SharedStore {
    /// `postgres://user@host/db` or a libpq string (`host=/run/postgresql dbname=prod`).
    pub url: String,
    /// The run's name (default: the run directory's name).
    pub run: String,
    /// This process checks too (with its `[coq]` workers); `false`: only queue workers do.
    pub check_here: bool,
    /// Seconds a claim holds (longer than the longest check).
    pub lease_s: f64,
    /// Checks claimed at a time by this process.
    pub batch: usize,
}

impl Default for SharedStore {
    fn default() -> Self {
        SharedStore {
            url: String::new(),
            run: String::new(),
            check_here: true,
            lease_s: 900.0,
            batch: 8,
        }
    }
}

/// Scale-out flags of `prod eval` and `prod rl` (feature `clap`): keep the run store in
/// PostgreSQL and let `prod queue work` processes on other machines do the checks.
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SharedStoreFlags {
    /// PostgreSQL database for the run store and its check queue (postgres://user@host/db or
    /// "host=/run/postgresql dbname=prod"). Start workers anywhere with
    /// `prod queue work --store URL --run RUN` (same [coq] settings: a worker only takes
    /// checks made for its exact checker configuration).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Scale-out"))]
    pub store: Option<String>,
    /// The run's name in the database (default: the --out directory's name).
    #[cfg_attr(
        feature = "clap",
        arg(long, requires = "store", help_heading = "Scale-out")
    )]
    pub run: Option<String>,
    /// Only the queue workers check; this process samples, waits and trains.
    #[cfg_attr(
        feature = "clap",
        arg(long, requires = "store", help_heading = "Scale-out")
    )]
    pub no_check_here: bool,
}

impl SharedStoreFlags {
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

impl SharedStore {
    /// Every number in its range; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        crate::ranges::positive_seconds("lease_s", self.lease_s)?;
        crate::ranges::at_least_one("batch", self.batch)
    }

    /// The run name: `run`, or the run directory's name.
    pub fn run_name(&self, out: &Path) -> String {
        if !self.run.is_empty() {
            return self.run.clone();
        }
        out.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into())
    }
}

/// The run store of run directory `out`: `out/run.sqlite`, or the PostgreSQL one.
pub fn open_store(out: &Path, shared: Option<&SharedStore>) -> anyhow::Result<RunStore> {
    match shared {
        None => Ok(RunStore::open_dir(out)?),
        Some(s) => {
            std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
            let run = s.run_name(out);
            crate::store::postgres_schema(&run).map_err(BadInput)?;
            RunStore::open_postgres(&s.url, &run)
                .with_context(|| format!("PostgreSQL run store {run:?}"))
        }
    }
}

/// The checker of a run: the Coq pool, or (with a shared store) the run's check queue with
/// this process's pool as one of its workers; behind the verification cache either way.
pub fn start_run_checker(
    cfg: &CoqCheckConfig,
    cache: &Path,
    out: &Path,
    shared: Option<&SharedStore>,
) -> anyhow::Result<Box<dyn Checker>> {
    let Some(s) = shared else {
        return Ok(Box::new(start_checker(cfg, cache)?));
    };
    let coq = coq_checker(cfg)?;
    let run = s.run_name(out);
    let mut queue = prod_queue::Queue::connect(&s.url, &run)
        .with_context(|| format!("check queue of run {run:?}"))?;
    // Workers started with only --store/--run check with exactly this configuration.
    queue.set_checker_config(&serde_json::to_value(cfg)?)?;
    let opts = prod_queue::WorkOptions {
        batch: s.batch.max(1),
        lease: std::time::Duration::from_secs_f64(s.lease_s.max(1.0)),
        poll: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let worker = format!("{}:coordinator", prod_queue::process_worker_name());
    let checker = prod_queue::QueueChecker::new(queue, coq, s.check_here, &worker, opts);
    Ok(Box::new(cached(checker, cache)?))
}

/// The checker settings a job exposes (the rest of `[check.coq]` keeps its defaults).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CoqJobConfig {
    pub workers: usize,
    pub step_timeout_s: u32,
    /// Expand `hammer.` steps (fixed tactics, then CoqHammer's provers).
    pub hammer: bool,
    /// Run CoqHammer's external provers when the fixed tactic list fails, as the paper runs
    /// Sledgehammer (each prover `atp_limit_s`, 2 s by default; the checker remembers every
    /// goal's result, so a goal met in many samples calls them once). Off: the fixed list alone.
    pub hammer_atp: bool,
    /// Load-path bindings beside the dataset's own (`--load-path DIR=Root`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load_paths: Vec<prod_check_coq::LoadPathBinding>,
    /// A Debian root holding the prover instead of the host's Coq (`--coq-root`, e.g. Rocq 9.2
    /// from `scripts/install-rocq.sh`; docs/provers.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
}

impl Default for CoqJobConfig {
    fn default() -> Self {
        CoqJobConfig {
            workers: prod_prover::DEFAULT_WORKERS,
            step_timeout_s: prod_check::TimeLimits::DEFAULT.step_s,
            hammer: true,
            hammer_atp: true,
            load_paths: vec![],
            root: None,
        }
    }
}

/// What a command line sets over `[check.coq]` of the config file (absent: the file's value).
#[derive(Clone, Debug, Default)]
pub struct CoqFlags {
    pub workers: Option<usize>,
    pub step_timeout_s: Option<u32>,
    pub no_hammer: bool,
    pub no_atp: bool,
    /// Bindings added to the file's.
    pub load_paths: Vec<prod_check_coq::LoadPathBinding>,
    /// Replaces the file's root.
    pub root: Option<PathBuf>,
}

impl CoqJobConfig {
    /// A run's Coq settings, resolved once: `[check.coq]` of the config file, then the flags,
    /// then validated. The file's `workers = 0` (one per core, as `prod check` reads it) is a
    /// run's default here: a run's samples, not the cores, set how much checking there is.
    pub fn resolve(file: CoqCheckConfig, flags: CoqFlags) -> Result<Self, String> {
        let mut load_paths = file.load_paths;
        load_paths.extend(flags.load_paths);
        let cfg = CoqJobConfig {
            workers: flags.workers.unwrap_or(match file.workers {
                0 => CoqJobConfig::default().workers,
                n => n,
            }),
            step_timeout_s: flags.step_timeout_s.unwrap_or(file.step_timeout_s),
            hammer: !flags.no_hammer,
            hammer_atp: !flags.no_atp,
            load_paths,
            root: flags.root.or(file.root),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Every number in its range and the prover root a Debian root; the error names the key.
    pub fn validate(&self) -> Result<(), String> {
        crate::ranges::at_least_one("workers", self.workers)?;
        crate::ranges::at_least_one("step_timeout_s", self.step_timeout_s)?;
        self.to_config().validate()
    }

    pub fn to_config(&self) -> CoqCheckConfig {
        let mut c = CoqCheckConfig {
            workers: self.workers,
            step_timeout_s: self.step_timeout_s,
            ..Default::default()
        };
        c.hammer.enabled = self.hammer;
        c.hammer.use_atp = self.hammer_atp;
        c.load_paths = self.load_paths.clone();
        c.root = self.root.clone();
        c
    }

    /// [`CoqJobConfig::to_config`] with the load-path bindings of `dataset` (its `stats.json`:
    /// a user's project compiled into the dataset's `lib/`), checked: a binding outside the
    /// dataset or one that shadows an installed library is the user's error.
    pub fn config_for_dataset(&self, dataset: &Path) -> Result<CoqCheckConfig, BadInput> {
        let mut c = self.to_config();
        let installed = prod_check_coq::installed_root(&c);
        let bindings =
            prod_library::compile::dataset_bindings(dataset, &installed).map_err(BadInput)?;
        c.load_paths.extend(
            bindings
                .into_iter()
                .map(|b| prod_check_coq::LoadPathBinding {
                    dir: b.dir,
                    logical: b.logical,
                }),
        );
        prod_check_coq::check_load_paths(&mut c).map_err(BadInput)?;
        Ok(c)
    }
}

/// The prover settings of a job (its `prover`, `coq` and `isabelle` keys).
#[derive(Clone, Copy, Debug)]
pub struct ProverChoice<'a> {
    pub kind: ProverKind,
    pub coq: &'a CoqJobConfig,
    /// `[isabelle]`: the server and session (the keys of `[check.isabelle]` in `prod.toml`).
    pub isabelle: Option<&'a prod_check_isabelle::IsabelleCheckConfig>,
}

impl ProverChoice<'_> {
    /// Start the prover of a run on `dataset` (its load-path bindings for Coq), its checks
    /// cached in `cache`; with a shared store the Coq checks go through the run's queue.
    pub fn start(
        &self,
        dataset: &Path,
        cache: &Path,
        out: &Path,
        shared: Option<&SharedStore>,
    ) -> anyhow::Result<crate::prover::Prover> {
        match self.kind {
            ProverKind::Coq => {
                let cfg = self.coq.config_for_dataset(dataset)?;
                let checker = start_run_checker(&cfg, cache, out, shared)?;
                let name = prod_prover::prover_name(self.kind, &checker.fingerprint());
                Ok(crate::prover::Prover {
                    kind: self.kind,
                    checker,
                    lang: self.kind.language(),
                    final_check: Box::new(prod_prover::CoqFinal(cfg)),
                    name,
                })
            }
            ProverKind::Isabelle => {
                if shared.is_some() {
                    return Err(BadInput(
                        "prover = \"isabelle\": the PostgreSQL check queue serves Coq only".into(),
                    )
                    .into());
                }
                let cfg = self.isabelle.cloned().unwrap_or_default();
                cfg.validate()
                    .map_err(|e| BadInput(format!("isabelle.{e}")))?;
                let checker =
                    prod_prover::start_isabelle(cfg.clone()).map_err(anyhow::Error::msg)?;
                let name = prod_prover::prover_name(self.kind, &checker.fingerprint());
                Ok(crate::prover::Prover {
                    kind: self.kind,
                    checker: Box::new(cached(checker, cache)?),
                    lang: self.kind.language(),
                    final_check: Box::new(prod_prover::IsabelleFinal(cfg)),
                    name,
                })
            }
        }
    }
}

impl EvalJob {
    /// The prover settings.
    pub fn prover_choice(&self) -> ProverChoice<'_> {
        ProverChoice {
            kind: self.prover,
            coq: &self.coq,
            isabelle: self.isabelle.as_ref(),
        }
    }
}

/// The Coq pool behind the verification cache.
pub fn start_checker(
    cfg: &CoqCheckConfig,
    cache: &Path,
) -> anyhow::Result<CachedChecker<CoqChecker>> {
    cached(coq_checker(cfg)?, cache)
}

/// The Coq pool ([`prod_prover::start_coq`]).
fn coq_checker(cfg: &CoqCheckConfig) -> anyhow::Result<CoqChecker> {
    prod_prover::start_coq(cfg.clone()).map_err(anyhow::Error::msg)
}

/// `checker` behind the verification cache file `cache`.
pub(crate) fn cached<C: Checker>(checker: C, cache: &Path) -> anyhow::Result<CachedChecker<C>> {
    let cache = VerificationCache::open(cache)
        .with_context(|| format!("verification cache {}", cache.display()))?;
    Ok(CachedChecker::new(checker, cache))
}

/// Now, as RFC 3339 UTC (no date crate needed: days-from-civil inverse).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Write `run.json` atomically (temp file + rename): a kill never leaves half a report.
pub fn write_report(dir: &Path, report: &RunReport) -> anyhow::Result<PathBuf> {
    let path = dir.join("run.json");
    write_atomic(&path, &(serde_json::to_string_pretty(report)? + "\n"))?;
    Ok(path)
}

/// The HTML report and the Markdown summary beside a run's `run.json`, each written atomically.
pub fn write_pages(dir: &Path, report: &RunReport) -> anyhow::Result<()> {
    write_atomic(&dir.join("report.html"), &prod_report::render_html(report))?;
    let summary = prod_report::render_markdown(report);
    write_atomic(&dir.join("summary.md"), &summary)
}

/// Write `text` to `path` atomically ([`prod_library::output::write_atomic`]).
pub fn write_atomic(path: &Path, text: &str) -> anyhow::Result<()> {
    prod_library::output::write_atomic(path, text.as_bytes())
        .with_context(|| format!("write {}", path.display()))
}

/// Runs `start` (a job on the run directory `dir`). When it fails and the run store it left
/// there holds nothing but settings, what it created in `dir` is removed, so that the corrected
/// command is not refused as "started with a different configuration"; a run that did any work
/// is always kept (it resumes), and so is a store that was there before.
pub fn undoing_a_failed_start<T>(
    dir: &Path,
    bars: &Bars,
    start: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let before = entries(dir);
    let result = start();
    if result.is_err() && undo_unused_store(dir, &before) {
        bars.say(&format!(
            "nothing was run: removed what this start created in {}",
            dir.display()
        ));
    }
    result
}

/// What a run directory holds (`None`: it does not exist).
fn entries(dir: &Path) -> Option<std::collections::BTreeSet<std::ffi::OsString>> {
    std::fs::read_dir(dir)
        .ok()
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
}

/// Removes what is in `dir` beyond `before` when its run store is new and unused; whether it
/// did.
fn undo_unused_store(
    dir: &Path,
    before: &Option<std::collections::BTreeSet<std::ffi::OsString>>,
) -> bool {
    let store = dir.join("run.sqlite");
    let existed = before
        .as_ref()
        .is_some_and(|b| b.contains(std::ffi::OsStr::new("run.sqlite")));
    if existed || !store.is_file() {
        return false;
    }
    if !matches!(RunStore::open(&store).and_then(|s| s.is_unused()), Ok(true)) {
        return false;
    }
    let Some(now) = entries(dir) else {
        return false;
    };
    for name in now.difference(&before.clone().unwrap_or_default()) {
        let p = dir.join(name);
        let _ = if p.is_dir() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
    }
    if before.is_none() {
        let _ = std::fs::remove_dir(dir);
    }
    true
}

/// Run (or resume) an evaluation job; writes `out/run.json` and returns the report.
pub fn run_eval_job(job: &EvalJob, bars: &Bars) -> anyhow::Result<(RunReport, EvalResult)> {
    let (job, theorems, given) = job_with_trees(job)?;
    let job = &job;
    check_ks(&job.options)?;
    let store = open_eval_store(job, given.as_ref())?;
    let cache = job
        .cache
        .clone()
        .unwrap_or_else(|| job.out.join("cache.sqlite"));
    let prover =
        job.prover_choice()
            .start(&job.dataset, &cache, &job.out, job.postgres.as_ref())?;
    let mut policy = match given {
        Some(_) => None,
        None => Some(EvalPolicy::open(job)?),
    };
    let novel = dataset_statements(&job.dataset, prover.lang);
    bars.say(&announce_eval(job, theorems.len(), given.is_some()));
    let ctx = crate::context::RunContext {
        store: &store,
        prover: prover.setup(),
        out: &job.out,
        bars,
        dataset_statements: &novel,
    };
    let before = ctx.prover.checker.hammer_stats();
    let mut result = match (&given, policy.as_mut()) {
        (Some(t), _) => {
            crate::eval::run_eval_given(&ctx, &t.nodes, &theorems, &job.options, 0, Phase::Eval)?
        }
        (None, Some(p)) => run_eval(&ctx, p.seq(), &theorems, &job.options, 0, Phase::Eval)?,
        (None, None) => unreachable!("a policy is opened whenever no trees are given"),
    };
    result.evaluation.hammer =
        crate::baseline::hammer_use(before, ctx.prover.checker.hammer_stats());
    // After the evaluation, so its samples are those of a run without canaries.
    let canaries = eval_canaries(
        &ctx,
        given.as_ref(),
        policy.as_mut(),
        &theorems,
        &job.options,
    )?;
    let mut report = eval_report(
        job,
        theorems.len(),
        &result,
        &prover.name,
        policy.as_ref().and_then(EvalPolicy::native),
    )?;
    report.canaries = vec![canaries.clone()];
    if let Some(t) = &given {
        report.model.name = t.header.model.clone();
        report.notes.push(crate::trees::note(
            job.trees.as_deref().unwrap_or(Path::new("")),
            t,
        ));
    }
    if let Some(b) = hammer_baseline(job, &prover, &ctx, &theorems)? {
        let methods: Vec<prod_report::Evaluation> = report.evaluations.clone();
        add_baseline(&mut report, &methods, b, &job.options);
    }
    write_report(&job.out, &report)?;
    crate::canary::stop_on_alarm(&canaries, &job.out)?;
    Ok((report, result))
}

/// The evaluation's run store: a resumed run must be the same experiment (where it runs is
/// not part of it) and, with `--trees`, read the same trees file.
fn open_eval_store(
    job: &EvalJob,
    given: Option<&crate::trees::TreesFile>,
) -> anyhow::Result<RunStore> {
    let store = open_store(&job.out, job.postgres.as_ref())?;
    store.ensure_meta(
        "eval_job",
        &crate::leaves::identity_text(&job.identity(), &["options", "hammer_leaves"])?,
    )?;
    if let Some(t) = given {
        store.ensure_meta("eval_trees_sha256", &t.sha256)?;
        if !t.stops_given {
            store.disown_truncation()?;
        }
    }
    Ok(store)
}

/// The evaluation's first log line: what is evaluated, from where, into where.
fn announce_eval(job: &EvalJob, theorems: usize, given: bool) -> String {
    format!(
        "eval: {} theorems × {} trees (depth ≤ {}) {} {} → {}",
        theorems,
        job.options.samples,
        job.options.depth,
        if given { "read from" } else { "with" },
        job.trees.as_ref().unwrap_or(&job.model).display(),
        job.out.display()
    )
}

/// The job and its theorems, as a trees file (`--trees`) leaves them: the theorems it has
/// trees for, and the trees per theorem, depth limit and temperature of its header.
fn job_with_trees(
    job: &EvalJob,
) -> anyhow::Result<(EvalJob, Vec<Theorem>, Option<crate::trees::TreesFile>)> {
    let mut theorems = run_theorems(
        &job.dataset,
        &job.options.split,
        job.theorems,
        job.options.seed,
    )?;
    let given = match &job.trees {
        None => None,
        Some(path) => {
            let t = crate::trees::read_trees(path, &theorems, job.prover.language())
                .map_err(BadInput)?;
            theorems = t.theorems.clone();
            Some(t)
        }
    };
    let mut job = match &given {
        Some(t) => job.with_trees_header(t)?,
        None => job.clone(),
    };
    job.options.hammer_leaves =
        crate::leaves::in_effect(job.options.hammer_leaves, job.prover, job.coq.hammer);
    Ok((job, theorems, given))
}

/// The canaries of an evaluation, sampled from its policy. Trees sampled elsewhere bring no
/// policy: the canaries then get the file's own root completions.
fn eval_canaries(
    ctx: &crate::context::RunContext<'_>,
    given: Option<&crate::trees::TreesFile>,
    policy: Option<&mut EvalPolicy>,
    theorems: &[Theorem],
    options: &EvalOptions,
) -> anyhow::Result<prod_report::CanaryCheck> {
    let mut replay = given.map(|t| crate::trees::GivenCompletions::new(&t.nodes));
    let canary_policy: &mut dyn crate::policy::SeqPolicy = match (replay.as_mut(), policy) {
        (Some(r), _) => r,
        (None, Some(p)) => p.seq(),
        (None, None) => unreachable!("a policy is opened whenever no trees are given"),
    };
    crate::canary::run_canaries(ctx, canary_policy, theorems, options, 0)
}

/// CoqHammer alone on `theorems` when the job asks for it and the prover is Coq with the
/// hammer on (`None` otherwise).
fn hammer_baseline(
    job: &EvalJob,
    prover: &crate::prover::Prover,
    ctx: &crate::context::RunContext<'_>,
    theorems: &[Theorem],
) -> anyhow::Result<Option<crate::baseline::BaselineRun>> {
    if !job.hammer_baseline.enabled || !prover.kind.is_coq() || !job.coq.hammer {
        return Ok(None);
    }
    let cache = job.hammer_baseline.cache_path();
    crate::baseline::run_hammer_baseline(ctx, theorems, &job.options, Some(&cache)).map(Some)
}

/// The baseline's evaluation as the report's last row, each method's comparison with it (the
/// policy's trees, and the same trees without hammer leaves), and a note each.
pub(crate) fn add_baseline(
    report: &mut RunReport,
    methods: &[prod_report::Evaluation],
    b: crate::baseline::BaselineRun,
    opts: &EvalOptions,
) {
    for method in methods {
        let c = crate::baseline::compare(method, &b.result.evaluation, &opts.ks, opts.intervals());
        report
            .notes
            .push(crate::baseline::summary_line(&c, Some(b.seconds)));
        report.comparisons.push(c);
    }
    report.evaluations.push(b.result.evaluation);
}

/// CoqHammer alone on the job's theorems, nothing else (no model is loaded): `prod experiment`'s
/// baseline stage. Writes `out/run.json` with the baseline's evaluation.
pub fn run_hammer_baseline_job(job: &EvalJob, bars: &Bars) -> anyhow::Result<RunReport> {
    let theorems = run_theorems(
        &job.dataset,
        &job.options.split,
        job.theorems,
        job.options.seed,
    )?;
    let store = open_store(&job.out, job.postgres.as_ref())?;
    let mut id = job.identity();
    id.model = PathBuf::new();
    id.sampling = NativeParams::default();
    id.options.name = crate::baseline::HAMMER_BASELINE.to_string();
    // One `hammer.` root per theorem: nothing is proposed, so there is nothing to add leaves to.
    id.options.hammer_leaves = false;
    store.ensure_meta(
        "hammer_baseline_job",
        &crate::leaves::identity_text(&id, &["options", "hammer_leaves"])?,
    )?;
    let cache = job
        .cache
        .clone()
        .unwrap_or_else(|| job.out.join("cache.sqlite"));
    let prover =
        job.prover_choice()
            .start(&job.dataset, &cache, &job.out, job.postgres.as_ref())?;
    if !prover.kind.is_coq() || !job.coq.hammer {
        return Err(BadInput("the hammer baseline needs Coq with the hammer on".into()).into());
    }
    let novel = dataset_statements(&job.dataset, prover.lang);
    let ctx = crate::context::RunContext {
        store: &store,
        prover: prover.setup(),
        out: &job.out,
        bars,
        dataset_statements: &novel,
    };
    let shared = job.hammer_baseline.cache_path();
    let b = crate::baseline::run_hammer_baseline(&ctx, &theorems, &job.options, Some(&shared))?;
    let t = &b.result.times;
    let report = RunReport {
        title: format!("{} on {}", crate::baseline::HAMMER_BASELINE, job.options.split),
        created: now_rfc3339(),
        prover: prover.name.clone(),
        dataset: DatasetInfo {
            name: job.dataset.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            split: job.options.split.clone(),
            size: theorems.len(),
        },
        model: ModelInfo {
            name: crate::baseline::HAMMER_BASELINE.to_string(),
            params: None,
        },
        config: serde_json::to_value(&id)?,
        evaluations: vec![b.result.evaluation.clone()],
        notes: vec![format!(
            "one `{}` per theorem; phase seconds (this invocation): check {:.1} ({} sent to {}), final check {:.1}; {:.0} s in all",
            crate::baseline::HAMMER_PROOF, t.check_s, t.checked_now, prover.name, t.final_s, b.seconds
        )],
        ..RunReport::default()
    };
    write_report(&job.out, &report)?;
    Ok(report)
}

/// The named theorems of `split` (`limit` of them drawn with `seed`, all when `None`); none is
/// the user's error.
pub(crate) fn run_theorems(
    dataset: &Path,
    split: &str,
    limit: Option<usize>,
    seed: u64,
) -> anyhow::Result<Vec<Theorem>> {
    prod_library::theorem::load_named_theorems(dataset, split, limit, seed)
        .map_err(|e| BadInput(e).into())
}

/// Every k in `1..=samples`.
fn check_ks(opts: &EvalOptions) -> Result<(), BadInput> {
    match opts
        .ks
        .iter()
        .find(|&&k| k == 0 || k > opts.samples as usize)
    {
        Some(&k) => Err(BadInput(format!(
            "k = {k}: every k must be in 1..=samples ({})",
            opts.samples
        ))),
        None => Ok(()),
    }
}

impl EvalJob {
    /// The job with what a trees file fixes: trees per theorem, depth limit, temperature and
    /// (unless named) the evaluation's name; the split must be the file's.
    fn with_trees_header(&self, t: &crate::trees::TreesFile) -> Result<EvalJob, BadInput> {
        let h = &t.header;
        if h.split != self.options.split {
            return Err(BadInput(format!(
                "the trees were sampled for split {:?}, --split is {:?}",
                h.split, self.options.split
            )));
        }
        let mut job = self.clone();
        job.options.samples = h.samples;
        job.options.depth = h.depth;
        job.options.temperature = h.temperature;
        job.sampling.sampling.temperature = h.temperature;
        if job.options.name == EvalOptions::default().name {
            job.options.name = h.model.clone();
        }
        // The default k list, cut to the file's trees (an explicit list is checked as given).
        if job.options.ks == EvalOptions::default().ks {
            job.options.ks.retain(|&k| k <= h.samples as usize);
        }
        Ok(job)
    }

    /// The job as the run store keeps it: what the experiment is, not where it runs (workers,
    /// Isabelle server address, PostgreSQL store left out).
    fn identity(&self) -> EvalJob {
        let mut fixed = self.clone();
        leave_out_where(&mut fixed.coq, &mut fixed.isabelle, &mut fixed.postgres);
        // The baseline is a second evaluation beside the policy's: it changes nothing of it.
        fixed.hammer_baseline = HammerBaseline::default();
        fixed
    }
}

/// A run's identity without where it runs: the Coq workers, the Isabelle server and the
/// PostgreSQL store.
pub(crate) fn leave_out_where(
    coq: &mut CoqJobConfig,
    isabelle: &mut Option<prod_check_isabelle::IsabelleCheckConfig>,
    postgres: &mut Option<SharedStore>,
) {
    coq.workers = 0;
    *isabelle = isabelle.as_ref().map(crate::prover::isabelle_identity);
    *postgres = None;
}

/// The policy an evaluation samples from: the native model, or a remote server (with the
/// model directory's tokenizer).
enum EvalPolicy {
    Native(Box<NativePolicy>),
    Remote(Box<crate::policy::RemoteSeq>),
}

impl EvalPolicy {
    fn open(job: &EvalJob) -> Result<EvalPolicy, BadInput> {
        Ok(match &job.remote {
            Some(r) => EvalPolicy::Remote(Box::new(
                crate::policy::RemoteSeq::open(r, &job.sampling.sampling, &job.model)
                    .map_err(BadInput)?,
            )),
            None => EvalPolicy::Native(Box::new(
                NativePolicy::load(&job.model, job.sampling.clone())
                    .map_err(|e| BadInput(format!("model {}: {e}", job.model.display())))?,
            )),
        })
    }

    fn seq(&mut self) -> &mut dyn crate::policy::SeqPolicy {
        match self {
            EvalPolicy::Native(n) => n.as_mut(),
            EvalPolicy::Remote(r) => r.as_mut(),
        }
    }

    fn native(&self) -> Option<&NativePolicy> {
        match self {
            EvalPolicy::Native(n) => Some(n),
            EvalPolicy::Remote(_) => None,
        }
    }
}

/// `run.json` of an evaluation: the evaluation, the job, node counts and phase seconds.
fn eval_report(
    job: &EvalJob,
    theorems: usize,
    result: &EvalResult,
    prover: &str,
    native: Option<&NativePolicy>,
) -> anyhow::Result<RunReport> {
    let t = &result.times;
    Ok(RunReport {
        title: format!("ProD evaluation: {}", job.options.name),
        created: now_rfc3339(),
        prover: prover.to_string(),
        dataset: DatasetInfo {
            name: job.dataset.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            split: job.options.split.clone(),
            size: theorems,
        },
        model: ModelInfo {
            name: job.model.display().to_string(),
            params: native.map(|n| n.model.num_params() as u64),
        },
        config: serde_json::to_value(job)?,
        evaluations: std::iter::once(result.evaluation.clone())
            .chain(result.without_leaves.clone())
            .collect(),
        rounds: vec![],
        canaries: vec![],
        notes: vec![
            format!(
                "nodes: {} sampled, {} parse as conditional proofs, {} locally correct",
                result.nodes, result.parsed_nodes, result.locally_correct
            ),
            format!(
                "phase seconds (this invocation): sample {:.1} ({} fresh, {} replayed from the run store, {} tokens), check {:.1} ({} sent to {}), solve {:.2}, final check {:.1}",
                t.sample_s, t.sampled_fresh, t.sampled_replayed, native.map_or(0, |n| n.generated_tokens), t.check_s, t.checked_now, prover, t.solve_s, t.final_s
            ),
        ],
        comparisons: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::CoqJobConfig;

    /// A failed start takes back what it created around a store that did nothing; a failure
    /// after work, or in a store that was there, keeps everything.
    #[test]
    fn a_failed_start_takes_back_only_what_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let bars = crate::Bars::hidden();
        let fail = |dir: &std::path::Path, work: bool| {
            super::undoing_a_failed_start(dir, &bars, || -> anyhow::Result<()> {
                let store = super::open_store(dir, None)?;
                store.ensure_meta("job", "{}")?;
                if work {
                    store.put_checkpoint(0, "ckpt", "{}")?;
                }
                std::fs::write(dir.join("made.txt"), "x")?;
                anyhow::bail!("bad start")
            })
        };
        let new = tmp.path().join("new");
        assert!(fail(&new, false).is_err());
        assert!(!new.exists());
        let mine = tmp.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("notes.txt"), "mine").unwrap();
        assert!(fail(&mine, false).is_err());
        let left: Vec<_> = std::fs::read_dir(&mine)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["notes.txt"]);
        // Settings and more: the run resumes, nothing goes.
        assert!(fail(&mine, true).is_err());
        assert!(mine.join("run.sqlite").is_file() && mine.join("made.txt").is_file());
        // A store that was there before is never removed.
        std::fs::remove_file(mine.join("made.txt")).unwrap();
        let kept = tmp.path().join("kept");
        super::open_store(&kept, None)
            .unwrap()
            .ensure_meta("job", "{}")
            .unwrap();
        assert!(fail(&kept, false).is_err());
        assert!(kept.join("run.sqlite").is_file() && kept.join("made.txt").is_file());
    }

    #[test]
    fn a_jobs_prover_root_reaches_the_checker_and_is_checked() {
        let cfg: CoqJobConfig = toml::from_str("workers = 1\nroot = \"/nonexistent\"").unwrap();
        assert_eq!(
            cfg.to_config().root.as_deref(),
            Some(std::path::Path::new("/nonexistent"))
        );
        let e = cfg.validate().unwrap_err();
        assert!(e.contains("root = /nonexistent"), "{e}");
        // No root: the host's Coq, and the job's serialized form is what it was.
        let host = CoqJobConfig::default();
        assert!(host.validate().is_ok());
        assert!(!serde_json::to_string(&host).unwrap().contains("root"));
    }

    #[test]
    fn date() {
        let d = super::now_rfc3339();
        assert_eq!(
            (d.len(), &d[4..5], &d[10..11], &d[19..]),
            (20, "-", "T", "Z")
        );
    }
}

//! `prod bench libraries`: every installed Debian `libcoq-*` library through the dataset build and
//! a ground-truth validation sample, one row per library, plus the time of `--library all`.
//!
//! A row answers "can ProD use this library?": how many files, blocks and examples the build
//! finds, what it skips and why, and which share of a random sample of its ground-truth
//! conditional proofs the real checker proves in their full contexts. A library whose sample is
//! not all proved is shown with its most frequent miss reasons. Each library's row is written
//! to `OUT/<package>/bench.json` when it is done, so a killed run resumes where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, Context as _};
use prod_library::dataset::{self, DatasetConfig};
use prod_library::LibrarySpec;
use prod_prover::validate::{check_sample, sample, with_full_contexts, Counts, SampleOutcome};
use prod_prover::BatchProgress;
use serde::{Deserialize, Serialize};

/// The command that installs every Debian Coq library (documented in docs/results.md).
pub const INSTALL_ALL: &str = "apt-get install --no-install-recommends \
     $(apt-cache search --names-only '^libcoq-' | cut -d' ' -f1)";

/// The progress of one library's sample checks, made for the sample's size.
pub type Progress<'a> = dyn Fn(usize) -> Box<dyn BatchProgress + 'a> + 'a;

/// Which libraries, and how many of their examples are checked.
#[derive(Clone, Debug)]
pub struct LibrariesSettings {
    /// Ground-truth examples checked per library (all of them when it has fewer).
    pub sample: usize,
    /// Seed of every library's sample.
    pub seed: u64,
    /// The datasets and per-library results; a rerun with the same sample and seed reuses the
    /// libraries already done.
    pub out: PathBuf,
    /// Only these packages (empty: every installed one, and `--library all`'s build time).
    pub only: Vec<String>,
    /// Check a sample of each library's examples (off: build and count only).
    pub validate: bool,
}

impl Default for LibrariesSettings {
    fn default() -> Self {
        LibrariesSettings {
            sample: 200,
            seed: prod_core::DEFAULT_SEED,
            out: PathBuf::from("bench-libraries"),
            only: Vec::new(),
            validate: true,
        }
    }
}

/// One library's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub library: String,
    /// `.v` files the package ships.
    pub sources: usize,
    pub files: usize,
    pub blocks: usize,
    /// Train + val + test examples.
    pub examples: usize,
    pub skipped: BTreeMap<String, usize>,
    pub build_seconds: f64,
    pub sample: usize,
    pub seed: u64,
    /// None: not validated (see `note`).
    pub counts: Option<Counts>,
    pub check_seconds: f64,
    /// The most frequent reasons of the misses, with their counts.
    pub misses: Vec<(String, usize)>,
    pub note: Option<String>,
}

impl Row {
    /// The share of the checked sample proved; None when nothing was checked.
    pub fn validated_share(&self) -> Option<f64> {
        let c = self.counts.as_ref()?;
        (c.checked > 0).then(|| c.proved as f64 / c.checked as f64)
    }
}

/// Every library's row, and the time of `--library all`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub all_build_seconds: Option<f64>,
    pub all_examples: Option<usize>,
    pub install: &'static str,
    pub rows: Vec<Row>,
}

/// Builds (and validates) every installed library of `installed` (package, `.v` sources) that
/// `s.only` selects; `progress` makes the progress of a sample's checks (its size given).
pub fn bench_libraries(
    s: &LibrariesSettings,
    installed: Vec<(String, usize)>,
    progress: &Progress<'_>,
) -> anyhow::Result<Report> {
    if installed.is_empty() {
        return Err(anyhow!(
            "no Debian libcoq-* package is installed (install them with: {INSTALL_ALL})"
        ));
    }
    std::fs::create_dir_all(&s.out).with_context(|| format!("create {}", s.out.display()))?;
    let mut report = Report {
        all_build_seconds: None,
        all_examples: None,
        install: INSTALL_ALL,
        rows: Vec::new(),
    };
    if s.only.is_empty() {
        let started = Instant::now();
        let stats = build(&LibrarySpec::All, &s.out.join("all"))?;
        report.all_build_seconds = Some(started.elapsed().as_secs_f64());
        report.all_examples = Some(stats.examples_per_split.values().sum());
        eprintln!(
            "--library all: {} files, {} blocks in {:.2} s",
            stats.files,
            stats.blocks,
            report.all_build_seconds.unwrap_or(0.0)
        );
    }
    let chosen: Vec<_> = installed
        .into_iter()
        .filter(|(p, _)| s.only.is_empty() || s.only.contains(p))
        .collect();
    let mut checker = None;
    for (k, (package, sources)) in chosen.iter().enumerate() {
        eprintln!("[{}/{}] {package}", k + 1, chosen.len());
        let row = library_row(s, package, *sources, &mut checker, progress)?;
        report.rows.push(row);
    }
    Ok(report)
}

/// A library's row: reused from `OUT/<package>/bench.json` when it was done with the same
/// sample and seed, otherwise built, checked and saved.
fn library_row(
    s: &LibrariesSettings,
    package: &str,
    sources: usize,
    checker: &mut Option<prod_check_coq::CoqChecker>,
    progress: &Progress<'_>,
) -> anyhow::Result<Row> {
    let dir = s.out.join(package);
    let saved = dir.join("bench.json");
    if let Some(row) = done_before(s, &saved) {
        eprintln!("  done before ({})", saved.display());
        return Ok(row);
    }
    let mut row = Row {
        library: package.to_string(),
        sources,
        files: 0,
        blocks: 0,
        examples: 0,
        skipped: BTreeMap::new(),
        build_seconds: 0.0,
        sample: s.sample,
        seed: s.seed,
        counts: None,
        check_seconds: 0.0,
        misses: Vec::new(),
        note: None,
    };
    if sources == 0 {
        row.note = Some("ships no .v sources (compiled files or a plugin only)".into());
        return save(&saved, row);
    }
    let started = Instant::now();
    let stats = match build(&LibrarySpec::parse(package), &dir) {
        Ok(s) => s,
        Err(e) => {
            row.note = Some(format!("build failed: {e:#}"));
            return save(&saved, row);
        }
    };
    row.build_seconds = started.elapsed().as_secs_f64();
    row.files = stats.files;
    row.blocks = stats.blocks;
    row.examples = stats.examples_per_split.values().sum();
    row.skipped = stats.skipped_by_reason.clone();
    if !s.validate {
        return Ok(row);
    }
    validate(s, &dir, &mut row, checker, progress)?;
    save(&saved, row)
}

/// The row saved at `saved` when it was done with the same sample and seed (and validated,
/// unless validation is off or it has a note saying why not).
fn done_before(s: &LibrariesSettings, saved: &Path) -> Option<Row> {
    std::fs::read(saved)
        .ok()
        .and_then(|b| serde_json::from_slice::<Row>(&b).ok())
        .filter(|r| r.sample == s.sample && r.seed == s.seed)
        .filter(|r| r.counts.is_some() || !s.validate || r.note.is_some())
}

/// Checks a sample of the library's examples built in `dir`: the row's counts, check time
/// and commonest misses, or a note saying why nothing could be checked.
fn validate(
    s: &LibrariesSettings,
    dir: &Path,
    row: &mut Row,
    checker: &mut Option<prod_check_coq::CoqChecker>,
    progress: &Progress<'_>,
) -> anyhow::Result<()> {
    let examples = with_full_contexts(dir, &["train", "val", "test"]).map_err(|e| anyhow!(e))?;
    // Files that need their own prover world (`-noinit -indices-matter`: HoTT, UniMath) cannot
    // be checked by workers that load the prelude.
    let (examples, own_world): (Vec<_>, Vec<_>) =
        examples.into_iter().partition(|e| e.flags.is_empty());
    if examples.is_empty() {
        row.note = Some(match own_world.first() {
            Some(e) => format!(
                "not validated: its files need their own prover world ({}); the checker's workers load the standard prelude",
                e.flags.join(" ")
            ),
            None => "no examples".into(),
        });
        return Ok(());
    }
    let chosen = sample(examples, s.sample, s.seed);
    let c = started_checker(checker)?;
    let started = Instant::now();
    let outcome =
        check_sample(&chosen, c, progress(chosen.len()).as_ref()).map_err(|e| anyhow!(e))?;
    row.check_seconds = started.elapsed().as_secs_f64();
    row.misses = commonest_misses(&outcome);
    row.counts = Some(outcome.counts);
    if let Some(share) = row.validated_share() {
        eprintln!(
            "  {:.1}% of {} proved in {:.0} s",
            100.0 * share,
            chosen.len(),
            row.check_seconds
        );
    }
    Ok(())
}

/// The Coq checker shared by the libraries, started on first use.
fn started_checker(
    checker: &mut Option<prod_check_coq::CoqChecker>,
) -> anyhow::Result<&prod_check_coq::CoqChecker> {
    if checker.is_none() {
        let c = prod_check_coq::CoqChecker::new(prod_check_coq::CoqCheckConfig::default())
            .map_err(|e| anyhow!("cannot start the Coq checker: {e}"))?;
        *checker = Some(c);
    }
    let Some(c) = checker.as_ref() else {
        unreachable!("set above")
    };
    Ok(c)
}

/// The three commonest reasons for a miss (a verdict's or a context's that does not load),
/// most frequent first, ties by reason.
fn commonest_misses(outcome: &SampleOutcome) -> Vec<(String, usize)> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for m in &outcome.misses {
        *reasons.entry(miss_reason(&m.verdict)).or_default() += 1;
    }
    for (_, r) in &outcome.context_failures {
        *reasons
            .entry(format!("context does not load: {}", first_line(r, 70)))
            .or_default() += 1;
    }
    let mut reasons: Vec<_> = reasons.into_iter().collect();
    reasons.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    reasons.truncate(3);
    reasons
}

fn build(spec: &LibrarySpec, out: &Path) -> anyhow::Result<dataset::Stats> {
    let cfg = DatasetConfig::default();
    dataset::build(spec, out, &cfg, Some(&prod_coq::CoqLanguage), &|_, _| {})
        .map_err(|e| anyhow!(e))
}

fn first_line(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    line.chars().take(max).collect()
}

/// A miss's kind and the first line of its message, for grouping.
fn miss_reason(v: &prod_check::Verdict) -> String {
    use prod_check::Verdict as V;
    match v {
        V::Failed { message, .. } => format!("failed: {}", first_line(message, 70)),
        V::TimedOut { .. } => "timed out".into(),
        V::Rejected { reason } => format!("rejected: {}", first_line(reason, 70)),
        V::Infra { message } => format!("infra: {}", first_line(message, 70)),
        V::Proved { .. } => "proved".into(),
    }
}

/// Write the row to `path` atomically and return it.
fn save(path: &Path, row: Row) -> anyhow::Result<Row> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension("json.partial");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&row)?)
        .and_then(|_| std::fs::rename(&tmp, path))
        .with_context(|| format!("write {}", path.display()))?;
    Ok(row)
}

/// The Markdown table of docs/results.md.
pub fn table(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    if let (Some(s), Some(n)) = (r.all_build_seconds, r.all_examples) {
        let _ = writeln!(o, "`--library all`: built in {s:.2} s ({n} examples)\n");
    }
    let _ = writeln!(o, "| library | .v | files | blocks | examples | skipped | checked | proved | failed | timed out | rejected | infra | validated | build s | check s |");
    let _ = writeln!(
        o,
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut notes = Vec::new();
    for row in &r.rows {
        let skipped = row
            .skipped
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let c = row.counts.clone().unwrap_or_default();
        let share = row
            .validated_share()
            .map(|s| format!("{:.1}%", 100.0 * s))
            .unwrap_or_else(|| "—".into());
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.0} |",
            row.library,
            row.sources,
            row.files,
            row.blocks,
            row.examples,
            skipped,
            c.checked,
            c.proved,
            c.failed,
            c.timed_out,
            c.rejected,
            c.infra,
            share,
            row.build_seconds,
            row.check_seconds
        );
        if let Some(n) = &row.note {
            notes.push(format!("- {}: {n}", row.library));
        }
        if row.validated_share().is_some_and(|s| s < 1.0) {
            let m = row
                .misses
                .iter()
                .map(|(k, v)| format!("{v}× {k}"))
                .collect::<Vec<_>>()
                .join("; ");
            notes.push(format!("- {} misses: {m}", row.library));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(o, "\n{}", notes.join("\n"));
    }
    o
}

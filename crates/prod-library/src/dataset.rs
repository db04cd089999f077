//! Building a dataset directory: examples, splits, JSONL files, `stats.json`.
//! Schema: `docs/dataset.md`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use prod_core::{ConditionalProof, ProofLanguage};
use serde::Serialize;

use crate::discovery::LibrarySpec;
use crate::examples::{build_examples, Rewriter, TheoremExample};
use crate::peel::peel;
pub use crate::schema::{
    read_stats, BuildError, DatasetConfig, Example, Skipped, SourceRecord, SplitUnit, Stats,
};
use crate::segment::{ProofEnd, SkipReason};
use crate::source::{FileSegmenter, LibrarySource, SegmentedSource};

/// An example with its theorem's name, scope, line, imports and proof end.
type FileExample = (
    TheoremExample,
    String,
    Vec<String>,
    usize,
    Vec<String>,
    ProofEnd,
    Vec<String>,
);

/// What one file produced.
#[derive(Default)]
struct FileOut {
    source: String,
    reduced: String,
    examples: Vec<FileExample>,
    skipped: Vec<Skipped>,
    blocks: usize,
    qed: usize,
    defined: usize,
    goal_blocks: usize,
    unclosed_blocks: usize,
    body_start: usize,
    used_glob: bool,
    failed: Option<String>,
}

/// One file read, segmented, peeled and turned into examples (with its skipped records).
fn process_file(
    src: &dyn LibrarySource,
    segmenter: &mut dyn FileSegmenter,
    i: usize,
    hammer: bool,
) -> FileOut {
    let f = &src.library().files[i];
    let file = f.path.display().to_string();
    let mut out = FileOut::default();
    let source = match read_source(&f.path) {
        Ok(s) => s,
        Err(e) => {
            out.failed = Some(e);
            return out;
        }
    };
    let cf = segmenter.segment(i, &source);
    out.used_glob = cf.prover_references;
    out.goal_blocks = cf.goal_blocks;
    out.unclosed_blocks = cf.unclosed_blocks;
    out.body_start = cf.body_start;
    let seg = &cf.segments;
    let peeling = peel(seg);
    let no_rewrite = |_: &[crate::segment::Step], _: usize| None;
    let hammer_rule = |steps: &[crate::segment::Step], k: usize| src.rewrite_step(steps, k);
    let rewriter: &Rewriter<'_> = if hammer { &hammer_rule } else { &no_rewrite };
    let (examples, failed) = build_examples(seg, &peeling, rewriter, src.proof_language());
    out.blocks = seg.theorems.len();
    out.reduced = crate::examples::reduced_source(seg, &peeling);
    out.qed = seg
        .theorems
        .iter()
        .filter(|t| t.end == ProofEnd::Qed)
        .count();
    out.defined = (seg.theorems.iter())
        .filter(|t| t.end == ProofEnd::Defined)
        .count();
    out.skipped = skipped_records(&file, &cf, &failed);
    for ex in examples {
        let t = &seg.theorems[ex.index];
        let imports = cf
            .imports
            .iter()
            .filter(|(o, _)| *o < t.start)
            .map(|(_, s)| s.clone())
            .collect();
        out.examples.push((
            ex,
            t.name.clone().unwrap_or_default(),
            t.scope.clone(),
            t.line,
            imports,
            t.end,
            t.module_path.clone(),
        ));
    }
    // The segmenter's text: Coq's has its library-internal `Require`s qualified.
    out.source = if seg.source == source {
        source
    } else {
        seg.source.clone()
    };
    out
}

/// A source file's text; `Err`: the failure reason (`not_utf8`, `read_error: …`).
fn read_source(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read_error: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "not_utf8".to_string())
}

/// The skipped records of one segmented file, in order: the segmenter's issues, skipped
/// theorems, other skipped sentences, then theorems whose proof holds a special token
/// (`failed`: their indices).
fn skipped_records(file: &str, cf: &SegmentedSource, failed: &[usize]) -> Vec<Skipped> {
    let seg = &cf.segments;
    let record = |line: usize, name: &Option<String>, reason: &str| Skipped {
        file: file.to_string(),
        line,
        name: name.clone().unwrap_or_default(),
        reason: reason.to_string(),
    };
    let mut skipped: Vec<Skipped> = (cf.issues.iter())
        .map(|(line, reason)| record(*line, &None, reason))
        .collect();
    for t in &seg.theorems {
        if let Some(r) = t.skip {
            skipped.push(record(t.line, &t.name, r.as_str()));
        }
    }
    for (r, line) in &seg.other_skipped {
        skipped.push(record(*line, &None, r.as_str()));
    }
    for &i in failed {
        let t = &seg.theorems[i];
        skipped.push(record(t.line, &t.name, "special_token_in_proof"));
    }
    skipped
}

/// Where the shown part of a context starts: `end - max` moved forward to a line start.
fn context_start(base: &str, end: usize, max: usize) -> usize {
    if max == 0 || end <= max {
        return 0;
    }
    let from = end - max;
    match base.get(from..end).and_then(|t| t.find('\n')) {
        Some(nl) => from + nl + 1,
        None => (from..end)
            .find(|&i| base.is_char_boundary(i))
            .unwrap_or(end),
    }
}

/// Read `sources.jsonl` into a map by logical path.
pub fn read_sources(dir: &Path) -> Result<HashMap<String, SourceRecord>, String> {
    let path = dir.join("sources.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::output::check_file(&path, crate::output::count_lines(text.as_bytes()))?;
    let mut out = HashMap::new();
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: SourceRecord =
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        out.insert(r.logical_path.clone(), r);
    }
    Ok(out)
}

/// Progress callback: (files done, files total).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Build a dataset for the Coq library `spec` into `out_dir`. Returns the stats (also written to
/// `stats.json`). `lang`: the language for augmented copies (`None`: none are written).
pub fn build(
    spec: &LibrarySpec,
    out_dir: &Path,
    cfg: &DatasetConfig,
    lang: Option<&dyn ProofLanguage>,
    progress: Progress,
) -> Result<Stats, BuildError> {
    let started = std::time::Instant::now();
    let source = crate::coq::CoqSource::discover(spec, &cfg.coqlib, lang)?;
    let (mut stats, written) = write_files(&source, out_dir, cfg, progress, started)?;
    if let LibrarySpec::Path(_) = spec {
        // A user's project is not installed: the dataset carries it compiled, with its bindings.
        // `lib/` changes under the old `stats.json`, so that goes first.
        use crate::source::LibrarySource as _;
        crate::output::retract(out_dir)?;
        let c = crate::compile::compile_project(source.library(), out_dir, &cfg.coqlib, &cfg.coqc);
        stats.load_paths = c.bindings;
        stats.notes.extend(c.notes);
        stats.seconds = started.elapsed().as_secs_f64();
    }
    commit(out_dir, written, &stats)?;
    Ok(stats)
}

/// Build a dataset from any [`LibrarySource`] (the one pipeline of every prover). `started`:
/// when the build began (discovery included), for `stats.seconds`. The files are written as
/// `NAME.tmp` and renamed into place at the end, `stats.json` last ([`crate::output`]).
pub fn build_from(
    src: &dyn LibrarySource,
    out_dir: &Path,
    cfg: &DatasetConfig,
    progress: Progress,
    started: std::time::Instant,
) -> Result<Stats, BuildError> {
    let (stats, written) = write_files(src, out_dir, cfg, progress, started)?;
    commit(out_dir, written, &stats)?;
    Ok(stats)
}

/// The dataset card (`README.md`, for Hugging Face `datasets`) beside the written files, then
/// everything renamed into place, `stats.json` last.
fn commit(out_dir: &Path, mut written: Vec<PathBuf>, stats: &Stats) -> Result<(), BuildError> {
    let card = out_dir.join(crate::card::CARD);
    crate::output::write_tmp(
        &card,
        crate::card::render(stats, crate::card::Layout::Jsonl, &|rel| {
            crate::card::file_size(out_dir, rel)
        })
        .as_bytes(),
    )?;
    written.push(card);
    crate::output::commit(out_dir, &written, stats)
}

/// Everything of [`build_from`] but the commit: the stats and the files written as `NAME.tmp`.
/// Stages: process the files, plan the splits, cap the test files, open the output, tally the
/// per-file statistics, render and write the lines, then the skipped records and final stats.
fn write_files(
    src: &dyn LibrarySource,
    out_dir: &Path,
    cfg: &DatasetConfig,
    progress: Progress,
    started: std::time::Instant,
) -> Result<(Stats, Vec<PathBuf>), BuildError> {
    let lib = src.library();
    let threads = worker_threads(cfg);
    let results = process_files(src, cfg, progress, threads)?;
    if std::env::var_os("PROD_DATASET_TIMING").is_some() {
        eprintln!(
            "timing: files segmented, peeled and turned into examples after {:.2?}",
            started.elapsed()
        );
    }

    // Units and the test split (the prover's plan; by default the dependency sampler).
    let file_sizes = crate::split::UnitSizes {
        examples: results.iter().map(|r| r.examples.len()).collect(),
        tree: results
            .iter()
            .map(|r| r.examples.iter().filter(|e| e.0.in_tree).count())
            .collect(),
        // Per file already: each file is its own entry of `tree`.
        files: Vec::new(),
    };
    let plan = src.split_plan(cfg, &file_sizes);
    let flags = UnitFlags::new(&plan);
    let capped = TestCap::draw(lib, cfg, &results, &file_sizes.tree, &plan.unit_of, &flags);

    // Assign splits; validation drawn from the non-test examples.
    let non_test: usize = results
        .iter()
        .enumerate()
        .filter(|(i, _)| !flags.is_test(&plan, *i) && !flags.is_excluded(&plan, *i))
        .map(|(_, r)| r.examples.len())
        .sum();
    let val_mask = crate::split::validation_mask(non_test, cfg.val_fraction, cfg.seed);
    crate::card::check_replaceable(out_dir)?;
    crate::output::begin(out_dir)?;
    let mut w = Writers::new(out_dir)?;
    let mut stats = initial_stats(src, cfg, &plan, &capped);
    let (skipped_all, val_start) = tally_files(&mut stats, lib, &results, &plan, &flags);
    let rc = RenderContext {
        src,
        lib,
        cfg,
        lang: src.language(),
        unit_of: &plan.unit_of,
        is_test_unit: &flags.test,
        is_excluded: &flags.excluded,
        val_mask: &val_mask,
        val_start: &val_start,
        test_dropped: &capped.dropped,
    };
    let with_example = write_rendered(&rc, &results, threads, out_dir, &mut w, &mut stats)?;
    for s in &skipped_all {
        let reason = s.reason.split(':').next().unwrap_or(&s.reason).to_string();
        *stats.skipped_by_reason.entry(reason).or_default() += 1;
        w.write("skipped", s)?;
    }
    let (files_written, written) = w.finish()?;
    stats.files_written = files_written;
    for split in ["train", "val", "test"] {
        stats.examples_per_split.insert(
            split.into(),
            stats.files_written.get(split).copied().unwrap_or(0),
        );
    }
    stats.peeled_share = if with_example > 0 {
        stats.peeled as f64 / with_example as f64
    } else {
        0.0
    };
    stats.seconds = started.elapsed().as_secs_f64();
    Ok((stats, written))
}

/// Worker threads: `cfg.threads`, or all cores when 0.
fn worker_threads(cfg: &DatasetConfig) -> usize {
    if cfg.threads == 0 {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    } else {
        cfg.threads
    }
}

/// Segment, peel and build the examples of every file, in parallel; results in file order.
fn process_files(
    src: &dyn LibrarySource,
    cfg: &DatasetConfig,
    progress: Progress,
    threads: usize,
) -> Result<Vec<FileOut>, BuildError> {
    let n = src.library().files.len();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut results: Vec<Option<FileOut>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut segmenter = src.segmenter();
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        mine.push((i, process_file(src, segmenter.as_mut(), i, cfg.hammer)));
                        progress(done.fetch_add(1, Ordering::Relaxed) + 1, n);
                    }
                    mine
                })
            })
            .collect();
        for h in handles {
            // A worker panic is a bug; surface it as an infra error rather than a partial dataset.
            if let Ok(mine) = h.join() {
                for (i, r) in mine {
                    results[i] = Some(r);
                }
            }
        }
    });
    if results.iter().any(|r| r.is_none()) {
        return Err(BuildError::Worker);
    }
    Ok(results.into_iter().flatten().collect())
}

/// Per unit of a [`SplitPlan`](crate::source::SplitPlan): is it a test unit, is it excluded?
struct UnitFlags {
    test: Vec<bool>,
    excluded: Vec<bool>,
}

impl UnitFlags {
    fn new(plan: &crate::source::SplitPlan) -> Self {
        let units = plan.unit_names.len();
        let mask = |chosen: &[usize]| {
            let mut v = vec![false; units];
            for &u in chosen {
                if u < units {
                    v[u] = true;
                }
            }
            v
        };
        UnitFlags {
            test: mask(&plan.test),
            excluded: mask(&plan.excluded),
        }
    }

    /// Is file `i` in a test unit?
    fn is_test(&self, plan: &crate::source::SplitPlan, i: usize) -> bool {
        self.test[plan.unit_of[i]]
    }

    /// Is file `i` in an excluded unit?
    fn is_excluded(&self, plan: &crate::source::SplitPlan, i: usize) -> bool {
        self.excluded[plan.unit_of[i]]
    }
}

/// The per-file cap: a test file keeps at most `cap` of its T_tree theorems, a seeded choice
/// (by the file's logical path, so it does not depend on what else is built); the rest go to
/// no split, since their file is a test unit (nothing in train may come from it).
struct TestCap {
    /// Test files with T_tree theorems.
    files: Vec<usize>,
    /// Their T_tree theorems, in the order of `files`.
    sizes: Vec<usize>,
    cap: crate::split::FileCap,
    /// Per file, per example: left out by the cap (empty: none).
    dropped: Vec<Vec<bool>>,
    /// (file, theorems kept) for each of `files`.
    kept: Vec<(usize, usize)>,
}

impl TestCap {
    fn draw(
        lib: &crate::discovery::Library,
        cfg: &DatasetConfig,
        results: &[FileOut],
        tree: &[usize],
        unit_of: &[usize],
        flags: &UnitFlags,
    ) -> Self {
        let n = results.len();
        let files: Vec<usize> = (0..n)
            .filter(|&i| flags.test[unit_of[i]] && tree[i] > 0)
            .collect();
        let sizes: Vec<usize> = files.iter().map(|&i| tree[i]).collect();
        let cap = crate::split::file_cap(&sizes, cfg.test_file_cap);
        let mut dropped: Vec<Vec<bool>> = vec![Vec::new(); n];
        let mut kept: Vec<(usize, usize)> = Vec::new();
        for &i in &files {
            let tree: Vec<usize> = results[i]
                .examples
                .iter()
                .enumerate()
                .filter(|(_, e)| e.0.in_tree)
                .map(|(k, _)| k)
                .collect();
            let keep = cap.cap.map_or(tree.len(), |c| tree.len().min(c));
            kept.push((i, keep));
            if keep < tree.len() {
                let key = fnv1a(&lib.files[i].logical);
                dropped[i] = dropped_by_cap(tree, keep, results[i].examples.len(), cfg.seed ^ key);
            }
        }
        TestCap {
            files,
            sizes,
            cap,
            dropped,
            kept,
        }
    }
}

/// FNV-1a hash of `s` (a seed that depends only on the file's logical path).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Of the T_tree examples `tree` of a file with `len` examples, all but a seeded `keep` are
/// dropped: the mask of dropped examples.
fn dropped_by_cap(tree: Vec<usize>, keep: usize, len: usize, seed: u64) -> Vec<bool> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order = tree;
    order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    let mut dropped = vec![false; len];
    for &k in &order[keep..] {
        dropped[k] = true;
    }
    dropped
}

/// The stats known before any file is tallied: the library, the plan, the cap, and notes.
fn initial_stats(
    src: &dyn LibrarySource,
    cfg: &DatasetConfig,
    plan: &crate::source::SplitPlan,
    capped: &TestCap,
) -> Stats {
    let lib = src.library();
    let unit_names = |us: &[usize]| -> Vec<String> {
        us.iter()
            .filter_map(|&u| plan.unit_names.get(u).cloned())
            .collect()
    };
    let mut stats = Stats {
        library: lib.name.clone(),
        prover: src.prover().into(),
        files: lib.files.len(),
        split_unit: plan.unit_kind.clone(),
        units: plan.unit_names.len(),
        ..Default::default()
    };
    stats.test_units = unit_names(&plan.test);
    stats.excluded_units = unit_names(&plan.excluded);
    stats.notes = lib.notes.clone();
    stats.load_paths = lib.load_paths.clone();
    stats.notes.extend(plan.notes.iter().cloned());
    stats.test_theorems = capped.kept.iter().map(|&(_, k)| k).sum();
    stats.test_file_cap = capped.cap.cap;
    stats.test_dropped_by_cap = capped.sizes.iter().sum::<usize>() - stats.test_theorems;
    if let Some(&(i, k)) = capped
        .kept
        .iter()
        .max_by_key(|&&(i, k)| (k, std::cmp::Reverse(i)))
    {
        stats.test_max_file_share = k as f64 / stats.test_theorems.max(1) as f64;
        stats.test_max_file = lib.files[i].logical.clone();
    }
    if !capped.cap.met {
        stats.notes.push(format!(
            "the test split has only {} file(s) with theorems: no cap keeps every file under {}% of it, so none is applied",
            capped.files.len(),
            100.0 * cfg.test_file_cap
        ));
    }
    if cfg.test_fraction > 0.0 && stats.test_theorems < cfg.test_min_theorems {
        stats.notes.push(format!(
            "the test split has {} theorems, fewer than the {} aimed for: no candidate unit is left",
            stats.test_theorems, cfg.test_min_theorems
        ));
    }
    if src.language().is_none() {
        stats
            .notes
            .push("no ProofLanguage given: sft.jsonl has no augmented copies".into());
    }
    for s in &lib.dep_source {
        *stats.dependency_sources.entry(s.to_string()).or_default() += 1;
    }
    stats
}

/// Add each file's block counts to `stats`. Returns every skipped record (failed files
/// included) and, per file, the index into the validation mask of its first example.
fn tally_files(
    stats: &mut Stats,
    lib: &crate::discovery::Library,
    results: &[FileOut],
    plan: &crate::source::SplitPlan,
    flags: &UnitFlags,
) -> (Vec<Skipped>, Vec<usize>) {
    let mut skipped_all = Vec::new();
    let mut val_start = vec![0usize; results.len()];
    let mut non_test_before = 0usize;
    for (i, r) in results.iter().enumerate() {
        let f = &lib.files[i];
        stats.blocks += r.blocks;
        stats.blocks_qed += r.qed;
        stats.blocks_defined += r.defined;
        stats.files_with_glob_refs += r.used_glob as usize;
        stats.goal_blocks += r.goal_blocks;
        if flags.is_test(plan, i) {
            let name = plan
                .unit_names
                .get(plan.unit_of[i])
                .cloned()
                .unwrap_or_default();
            *stats.blocks_per_test_unit.entry(name).or_default() += r.blocks;
        }
        stats.unclosed_blocks += r.unclosed_blocks;
        if let Some(e) = &r.failed {
            stats.files_failed += 1;
            skipped_all.push(Skipped {
                file: f.path.display().to_string(),
                line: 0,
                name: String::new(),
                reason: format!("file_{e}"),
            });
        }
        skipped_all.extend(r.skipped.iter().cloned());
        val_start[i] = non_test_before;
        if flags.is_excluded(plan, i) {
            stats.examples_excluded += r.examples.len();
        } else if !flags.is_test(plan, i) {
            non_test_before += r.examples.len();
        }
    }
    (skipped_all, val_start)
}

/// Lines are rendered per file in parallel and written in file order, so the output is the
/// same whatever the thread count. Adds the example statistics to `stats`; returns the number
/// of theorems with an example.
fn write_rendered(
    rc: &RenderContext<'_>,
    results: &[FileOut],
    threads: usize,
    out_dir: &Path,
    w: &mut Writers,
    stats: &mut Stats,
) -> Result<usize, BuildError> {
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<(usize, Result<Rendered, String>)>(threads.max(1) * 4);
    let next = AtomicUsize::new(0);
    let mut with_example = 0usize;
    let mut failure: Option<BuildError> = None;
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(r) = results.get(i) else { break };
                if tx.send((i, render_file(rc, i, r))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut pending: BTreeMap<usize, Result<Rendered, String>> = BTreeMap::new();
        let mut want = 0usize;
        'receive: while let Ok((i, r)) = rx.recv() {
            pending.insert(i, r);
            while let Some(r) = pending.remove(&want) {
                want += 1;
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        failure = Some(BuildError::Io(
                            out_dir.join("(serialisation)"),
                            std::io::Error::other(e),
                        ));
                        break 'receive;
                    }
                };
                with_example += r.with_example;
                if let Err(e) = add_rendered(r, w, stats) {
                    failure = Some(e);
                    break 'receive;
                }
            }
        }
        // Dropping the receiver stops the workers after an error.
        drop(rx);
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(with_example),
    }
}

/// One file's rendered lines written, its example statistics added.
fn add_rendered(r: Rendered, w: &mut Writers, stats: &mut Stats) -> Result<(), BuildError> {
    stats.peeled += r.peeled;
    for (d, c) in &r.depth {
        *stats.depth_histogram.entry(*d).or_default() += c;
    }
    stats.replaced_steps += r.replaced;
    stats.examples_with_replacement += r.with_replacement;
    for (name, (bytes, lines)) in r.lines {
        w.write_raw(name, &bytes, lines)?;
    }
    Ok(())
}

/// What rendering needs beside one file's result.
struct RenderContext<'a> {
    src: &'a dyn LibrarySource,
    lib: &'a crate::discovery::Library,
    cfg: &'a DatasetConfig,
    lang: Option<&'a dyn ProofLanguage>,
    unit_of: &'a [usize],
    is_test_unit: &'a [bool],
    is_excluded: &'a [bool],
    val_mask: &'a [bool],
    /// Index into `val_mask` of each file's first example.
    val_start: &'a [usize],
    /// Per file, per example: a test theorem left out by the per-file cap (empty: none).
    test_dropped: &'a [Vec<bool>],
}

/// One file's lines for each output file, and its share of the example statistics.
#[derive(Default)]
struct Rendered {
    lines: BTreeMap<&'static str, (Vec<u8>, usize)>,
    with_example: usize,
    peeled: usize,
    depth: BTreeMap<u32, usize>,
    replaced: usize,
    with_replacement: usize,
}

impl Rendered {
    fn push<T: Serialize>(&mut self, name: &'static str, v: &T) -> Result<(), String> {
        let (buf, n) = self.lines.entry(name).or_default();
        serde_json::to_writer(&mut *buf, v).map_err(|e| format!("{name}.jsonl: {e}"))?;
        buf.push(b'\n');
        *n += 1;
        Ok(())
    }
}

/// `sources.jsonl` line without copying the texts (same fields, same order as [`SourceRecord`]).
#[derive(Serialize)]
struct SourceRecordRef<'a> {
    logical_path: &'a str,
    file: String,
    package: &'a str,
    flags: &'a [String],
    source: &'a str,
    reduced: &'a str,
    #[serde(skip_serializing_if = "crate::schema::is_zero")]
    body_start: usize,
}

/// One file's output lines: its `sources` record, then each example in its split (with its
/// `w_lemmas` copy, and in train its `sft`/`rl` lines).
fn render_file(rc: &RenderContext<'_>, i: usize, r: &FileOut) -> Result<Rendered, String> {
    let f = &rc.lib.files[i];
    let mut out = Rendered::default();
    out.push(
        "sources",
        &SourceRecordRef {
            logical_path: &f.logical,
            file: f.path.display().to_string(),
            package: &f.package,
            flags: &f.flags,
            source: &r.source,
            reduced: &r.reduced,
            body_start: r.body_start,
        },
    )?;
    let unit = rc.unit_of[i];
    if rc.is_excluded[unit] {
        return Ok(out);
    }
    let test_file = rc.is_test_unit[unit];
    let mut k = rc.val_start[i];
    for (j, fe) in r.examples.iter().enumerate() {
        let ex = &fe.0;
        out.with_example += 1;
        let split = if test_file {
            "test"
        } else {
            k += 1;
            if rc.val_mask.get(k - 1).copied().unwrap_or(false) {
                "val"
            } else {
                "train"
            }
        };
        out.peeled += ex.in_tree as usize;
        *out.depth.entry(ex.depth).or_default() += 1;
        out.replaced += ex.replaced_steps;
        out.with_replacement += (ex.replaced_steps > 0) as usize;
        let base = base_example(rc, i, r, fe, split);
        let wl = with_lemmas_example(rc, r, ex, &base);
        match split {
            "test" => {
                // Paper §4.1: the test sets keep only the theorems in T_tree (and the per-file
                // cap only some of a large file's).
                let capped = rc
                    .test_dropped
                    .get(i)
                    .and_then(|d| d.get(j))
                    .copied()
                    .unwrap_or(false);
                if ex.in_tree && !capped {
                    out.push("test", &base)?;
                    out.push("test_wl", &wl)?;
                }
            }
            "val" => {
                out.push("val", &base)?;
                out.push("val_wl", &wl)?;
            }
            _ => push_train(&mut out, ex, &base, &wl, rc.lang)?,
        }
    }
    Ok(out)
}

/// A train example's lines: `train`, `train_wl`, `sft` (with an augmented copy when it
/// proposes lemmas and a language is given), and `rl` when in T_tree.
fn push_train(
    out: &mut Rendered,
    ex: &TheoremExample,
    base: &Example,
    wl: &Example,
    lang: Option<&dyn ProofLanguage>,
) -> Result<(), String> {
    out.push("train", base)?;
    out.push("train_wl", wl)?;
    out.push("sft", base)?;
    if let (false, Some(lang)) = (base.proposed_lemmas.is_empty(), lang) {
        if let Some(aug) = augmented_example(base, lang) {
            out.push("sft", &aug)?;
        }
    }
    if ex.in_tree {
        out.push("rl", base)?;
    }
    Ok(())
}

/// The `wo_lemmas` example of file `i`'s example `fe` in `split`: the reduced context (peeled
/// lemmas removed), the conditional proof proposing them.
fn base_example(
    rc: &RenderContext<'_>,
    i: usize,
    r: &FileOut,
    fe: &FileExample,
    split: &str,
) -> Example {
    let (ex, name, scope, line, imports, end, module_path) = fe;
    let (lib, f) = (rc.lib, &rc.lib.files[i]);
    let cstart = context_start(&r.reduced, ex.context_end, rc.cfg.context_bytes);
    Example {
        id: format!("{}:{}:{}", f.logical, ex.index, name),
        library: lib.name.clone(),
        package: f.package.clone(),
        file: f.path.display().to_string(),
        logical_path: f.logical.clone(),
        line: *line,
        position: ex.index,
        scope: scope.clone(),
        qualified_name: module_path
            .iter()
            .chain(std::iter::once(name))
            .cloned()
            .collect::<Vec<_>>()
            .join("."),
        name: name.clone(),
        imports: imports.clone(),
        flags: f.flags.clone(),
        context: r
            .reduced
            .get(cstart..ex.context_end)
            .unwrap_or("")
            .to_string(),
        context_start: cstart,
        context_end: ex.context_end,
        context_extra: String::new(),
        context_axioms: rc
            .src
            .context_axioms(r.reduced.get(..ex.context_end).unwrap_or("")),
        statement: ex.statement.clone(),
        conditional_proof: ex.conditional_proof.clone(),
        conditional_proof_original: ex.conditional_proof_original.clone(),
        proposed_lemmas: ex.proposed_lemmas.clone(),
        proposed_names: ex.proposed_names.clone(),
        depth: ex.depth,
        in_tree: ex.in_tree,
        proof_end: if *end == ProofEnd::Defined {
            "defined"
        } else {
            "qed"
        }
        .into(),
        replaced_steps: ex.replaced_steps,
        split: split.into(),
        variant: "wo_lemmas".into(),
    }
}

/// D^{w/ l}: every human lemma stays in the context; the proof proposes nothing.
fn with_lemmas_example(
    rc: &RenderContext<'_>,
    r: &FileOut,
    ex: &TheoremExample,
    base: &Example,
) -> Example {
    let end = ex.context_with_lemmas_end;
    let wstart = context_start(&r.source, end, rc.cfg.context_bytes);
    Example {
        context: r.source.get(wstart..end).unwrap_or("").to_string(),
        context_start: wstart,
        context_end: end,
        context_axioms: rc.src.context_axioms(r.source.get(..end).unwrap_or("")),
        conditional_proof: ex.plain_proof.clone(),
        conditional_proof_original: ConditionalProof::parse_with(
            &ex.conditional_proof_original,
            rc.src.proof_language(),
        )
        .map(|cp| ConditionalProof::plain(prod_core::T0::NoInvoke, &cp.proof_text()).to_string())
        .unwrap_or_default(),
        proposed_lemmas: vec![],
        proposed_names: vec![],
        variant: "w_lemmas".into(),
        ..base.clone()
    }
}

/// The `augmented` copy of a train example: its proposed lemmas moved into the context.
fn augmented_example(base: &Example, lang: &dyn ProofLanguage) -> Option<Example> {
    let cp = ConditionalProof::parse_with(&base.conditional_proof, lang).ok()?;
    // Only the admitted lemmas are new: they follow the file prefix.
    let (extra, proof) = cp.move_lemmas_to_context("", lang);
    let extra = format!("\n{extra}");
    Some(Example {
        id: format!("{}:augmented", base.id),
        context: format!("{}{extra}", base.context),
        context_axioms: base
            .context_axioms
            .iter()
            .chain(&base.proposed_names)
            .cloned()
            .collect(),
        context_extra: extra,
        conditional_proof: proof.to_string(),
        proposed_lemmas: vec![],
        proposed_names: vec![],
        variant: "augmented".into(),
        ..base.clone()
    })
}

/// The output files, in the order documented in docs/dataset.md.
pub const OUTPUT_FILES: [&str; 11] = [
    "train", "val", "test", "rl", "sft", "train_wl", "val_wl", "test_wl", "sources", "skipped",
    "stats",
];

/// The JSONL files of a build, each written as `NAME.jsonl.tmp` until [`crate::output::commit`].
struct Writers {
    dir: PathBuf,
    files: BTreeMap<&'static str, (std::io::BufWriter<std::fs::File>, usize)>,
}

impl Writers {
    fn path(&self, name: &str) -> PathBuf {
        crate::output::tmp_path(&self.dir.join(format!("{name}.jsonl")))
    }
    fn new(dir: &Path) -> Result<Self, BuildError> {
        let mut w = Writers {
            dir: dir.to_path_buf(),
            files: BTreeMap::new(),
        };
        for name in OUTPUT_FILES.iter().filter(|n| **n != "stats") {
            let path = w.path(name);
            let f = std::fs::File::create(&path).map_err(|e| BuildError::Io(path.clone(), e))?;
            w.files.insert(*name, (std::io::BufWriter::new(f), 0));
        }
        Ok(w)
    }
    fn write<T: Serialize>(&mut self, name: &'static str, v: &T) -> Result<(), BuildError> {
        let path = self.path(name);
        let Some((w, n)) = self.files.get_mut(name) else {
            return Err(BuildError::Io(path, std::io::ErrorKind::NotFound.into()));
        };
        serde_json::to_writer(&mut *w, v).map_err(|e| BuildError::Io(path.clone(), e.into()))?;
        w.write_all(b"\n").map_err(|e| BuildError::Io(path, e))?;
        *n += 1;
        Ok(())
    }
    /// Append already serialised lines.
    fn write_raw(
        &mut self,
        name: &'static str,
        bytes: &[u8],
        lines: usize,
    ) -> Result<(), BuildError> {
        let path = self.path(name);
        let Some((w, n)) = self.files.get_mut(name) else {
            return Err(BuildError::Io(path, std::io::ErrorKind::NotFound.into()));
        };
        w.write_all(bytes).map_err(|e| BuildError::Io(path, e))?;
        *n += lines;
        Ok(())
    }
    /// Flush every file to disk: the lines per file, and the final paths to rename them to.
    fn finish(self) -> Result<(BTreeMap<String, usize>, Vec<PathBuf>), BuildError> {
        let mut counts = BTreeMap::new();
        let mut paths = Vec::new();
        for (name, (w, n)) in self.files {
            let path = self.dir.join(format!("{name}.jsonl"));
            let tmp = crate::output::tmp_path(&path);
            w.into_inner()
                .map_err(|e| e.into_error())
                .and_then(|f| f.sync_all())
                .map_err(|e| BuildError::Io(tmp, e))?;
            counts.insert(name.to_string(), n);
            paths.push(path);
        }
        Ok((counts, paths))
    }
}

/// Read a JSONL split file. Errors name the line. A file of a built dataset must have the line
/// count its `stats.json` records, and a folder left by an interrupted build is refused
/// ([`crate::output::check_file`]).
pub fn read_examples(path: &Path) -> Result<Vec<Example>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::output::check_file(path, crate::output::count_lines(text.as_bytes()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Unused-variant guard: keep SkipReason in the public surface for stats consumers.
pub fn skip_reason_names() -> Vec<&'static str> {
    [
        SkipReason::Admitted,
        SkipReason::Aborted,
        SkipReason::Program,
        SkipReason::ProofWith,
        SkipReason::Mutual,
        SkipReason::EmptyProof,
        SkipReason::Unsupported,
        SkipReason::Unterminated,
        SkipReason::Schematic,
        SkipReason::Other,
    ]
    .iter()
    .map(|r| r.as_str())
    .collect()
}

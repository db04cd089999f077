//! Building a dataset directory (deliverables 6–7): examples, splits, JSONL files, `stats.json`.
//! Schema: `docs/dataset.md`.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use prod_core::{ConditionalProof, ProofLanguage};
use serde::{Deserialize, Serialize};

use crate::coq;
use crate::discovery::{self, Library, LibrarySpec};
use crate::examples::{build_examples, Rewriter, TheoremExample};
use crate::peel::peel;
use crate::segment::{ProofEnd, SkipReason};

/// `[dataset]` section of `prod.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct DatasetConfig {
    /// Coq installation root (`coqc -where`).
    pub coqlib: PathBuf,
    /// Share of the dependency sinks held out as test units.
    pub test_fraction: f64,
    /// Share of the remaining examples drawn for validation.
    pub val_fraction: f64,
    pub seed: u64,
    /// Split unit: `auto` (package when the library has several, else file), `package`, `file`.
    pub unit: SplitUnit,
    /// Replace hammer-findable steps by `hammer.` (Appendix A.3).
    pub hammer: bool,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Keep at most this many bytes of each context inline (0: the whole context). The full
    /// context is always recoverable from `sources.jsonl` (see [`Example::context`]).
    pub context_bytes: usize,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            coqlib: PathBuf::from(discovery::DEFAULT_COQLIB),
            test_fraction: 0.1,
            val_fraction: 0.05,
            seed: 0,
            unit: SplitUnit::Auto,
            hammer: true,
            threads: 0,
            context_bytes: 16 * 1024,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitUnit {
    #[default]
    Auto,
    Package,
    File,
}

/// One line of a dataset JSONL file (every file has the same schema).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// `<logical path>:<theorem index>:<name>`; unique within a dataset directory and variant.
    pub id: String,
    pub library: String,
    pub package: String,
    /// Path of the source file.
    pub file: String,
    pub logical_path: String,
    /// 1-based line of the statement.
    pub line: usize,
    /// Index of the theorem among the file's theorem blocks.
    pub position: usize,
    /// Enclosing Section/Module names, outermost first (the context ends inside them).
    pub scope: Vec<String>,
    /// The theorem's name once every scope is closed (`M.N.name` inside modules `M`, `N`).
    pub qualified_name: String,
    pub name: String,
    /// `Require` sentences of the context.
    pub imports: Vec<String>,
    /// `coqc` flags the context needs (empty for the stdlib world).
    pub flags: Vec<String>,
    /// The context to show a model: the last `context_bytes` of the full context (from a line
    /// start), or all of it. Full context = `base[..context_end] + context_extra`, where `base` is
    /// the file's `reduced` (variants `wo_lemmas`, `augmented`) or `source` (`w_lemmas`) text in
    /// `sources.jsonl`; `context` = `base[context_start..context_end] + context_extra`.
    pub context: String,
    pub context_start: usize,
    pub context_end: usize,
    /// Text after the file prefix: the admitted lemmas of an augmented example, else empty.
    pub context_extra: String,
    pub statement: String,
    /// Ground truth: `t0` + proof steps with `<invoke>`s (and `hammer.` replacements).
    pub conditional_proof: String,
    /// The same before hammer replacement.
    pub conditional_proof_original: String,
    pub proposed_lemmas: Vec<String>,
    pub proposed_names: Vec<String>,
    /// Depth of the ground-truth proof tree (0: proposes nothing).
    pub depth: u32,
    /// Is the theorem in T_tree (peeled)?
    pub in_tree: bool,
    /// `qed` or `defined`.
    pub proof_end: String,
    pub replaced_steps: usize,
    /// `train`, `val` or `test`.
    pub split: String,
    /// `wo_lemmas` (our setup), `w_lemmas` (§4.2 D^{w/ l}) or `augmented` (lemmas moved to context).
    pub variant: String,
}

/// A block that yields no example, with its reason.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    pub file: String,
    pub line: usize,
    pub name: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stats {
    pub library: String,
    pub files: usize,
    pub files_with_glob_refs: usize,
    pub files_failed: usize,
    pub blocks: usize,
    pub blocks_qed: usize,
    pub blocks_defined: usize,
    pub examples_per_split: BTreeMap<String, usize>,
    /// Lines per output file.
    pub files_written: BTreeMap<String, usize>,
    /// Theorems peeled (T_tree) / theorems with an example.
    pub peeled: usize,
    pub peeled_share: f64,
    pub depth_histogram: BTreeMap<u32, usize>,
    pub replaced_steps: usize,
    pub examples_with_replacement: usize,
    pub skipped_by_reason: BTreeMap<String, usize>,
    pub split_unit: String,
    pub units: usize,
    pub test_units: Vec<String>,
    pub dependency_sources: BTreeMap<String, usize>,
    pub notes: Vec<String>,
    pub seconds: f64,
}

/// An example with its theorem's name, scope, line, imports and proof end.
type FileExample = (TheoremExample, String, Vec<String>, usize, Vec<String>, ProofEnd, Vec<String>);

/// What one file produced.
struct FileOut {
    source: String,
    reduced: String,
    examples: Vec<FileExample>,
    skipped: Vec<Skipped>,
    blocks: usize,
    qed: usize,
    defined: usize,
    used_glob: bool,
    failed: Option<String>,
}

fn process_file(lib: &Library, i: usize, hammer: bool) -> FileOut {
    let f = &lib.files[i];
    let file = f.path.display().to_string();
    let mut out = FileOut { source: String::new(), reduced: String::new(), examples: vec![], skipped: vec![], blocks: 0, qed: 0, defined: 0, used_glob: false, failed: None };
    let source = match std::fs::read(&f.path) {
        Ok(b) => match String::from_utf8(b) {
            Ok(s) => s,
            Err(_) => {
                out.failed = Some("not_utf8".into());
                return out;
            }
        },
        Err(e) => {
            out.failed = Some(format!("read_error: {e}"));
            return out;
        }
    };
    let glob = f.glob.as_ref().and_then(|g| std::fs::read_to_string(g).ok()).map(|t| crate::glob::parse(&t).0);
    let cf = coq::segment(&source, glob.as_ref());
    out.used_glob = cf.used_glob;
    if let Some(e) = cf.lex_errors.first() {
        out.skipped.push(Skipped { file: file.clone(), line: 0, name: String::new(), reason: format!("lex_error_rest_of_file: {e}") });
    }
    let seg = &cf.segments;
    let peeling = peel(seg);
    let no_rewrite = |_: &[crate::segment::Step], _: usize| None;
    let rewriter: &Rewriter = if hammer { &crate::hammer::replace_step } else { &no_rewrite };
    let (examples, failed) = build_examples(seg, &peeling, rewriter);
    out.blocks = seg.theorems.len();
    out.reduced = crate::examples::reduced_source(seg, &peeling);
    for t in &seg.theorems {
        match t.end {
            ProofEnd::Qed => out.qed += 1,
            ProofEnd::Defined => out.defined += 1,
            _ => {}
        }
        if let Some(r) = t.skip {
            out.skipped.push(Skipped { file: file.clone(), line: t.line, name: t.name.clone().unwrap_or_default(), reason: r.as_str().into() });
        }
    }
    for (r, n) in &seg.other_skipped {
        for _ in 0..*n {
            out.skipped.push(Skipped { file: file.clone(), line: 0, name: String::new(), reason: r.as_str().into() });
        }
    }
    for i in failed {
        let t = &seg.theorems[i];
        out.skipped.push(Skipped { file: file.clone(), line: t.line, name: t.name.clone().unwrap_or_default(), reason: "special_token_in_proof".into() });
    }
    for ex in examples {
        let t = &seg.theorems[ex.index];
        let imports = cf.imports.iter().filter(|(o, _)| *o < t.start).map(|(_, s)| s.clone()).collect();
        out.examples.push((ex, t.name.clone().unwrap_or_default(), t.scope.clone(), t.line, imports, t.end, t.module_path.clone()));
    }
    out.source = source;
    out
}

/// Where the shown part of a context starts: `end - max` moved forward to a line start.
fn context_start(base: &str, end: usize, max: usize) -> usize {
    if max == 0 || end <= max {
        return 0;
    }
    let from = end - max;
    match base.get(from..end).and_then(|t| t.find('\n')) {
        Some(nl) => from + nl + 1,
        None => (from..end).find(|&i| base.is_char_boundary(i)).unwrap_or(end),
    }
}

/// One line of `sources.jsonl`: the texts contexts are slices of.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SourceRecord {
    pub logical_path: String,
    pub file: String,
    pub package: String,
    pub flags: Vec<String>,
    /// The file as it is (base of `w_lemmas` contexts).
    pub source: String,
    /// The file with every peeled pair removed (base of `wo_lemmas`/`augmented` contexts).
    pub reduced: String,
}

impl Example {
    /// The full, checkable context of this example, from its file's record.
    pub fn full_context(&self, src: &SourceRecord) -> Option<String> {
        let base = if self.variant == "w_lemmas" { &src.source } else { &src.reduced };
        Some(format!("{}{}", base.get(..self.context_end)?, self.context_extra))
    }
}

/// Read `sources.jsonl` into a map by logical path.
pub fn read_sources(dir: &Path) -> Result<HashMap<String, SourceRecord>, String> {
    let path = dir.join("sources.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = HashMap::new();
    for (i, l) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let r: SourceRecord = serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        out.insert(r.logical_path.clone(), r);
    }
    Ok(out)
}

/// Progress callback: (files done, files total).
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Build a dataset for `spec` into `out_dir`. Returns the stats (also written to `stats.json`).
pub fn build(spec: &LibrarySpec, out_dir: &Path, cfg: &DatasetConfig, lang: Option<&dyn ProofLanguage>, progress: Progress) -> Result<Stats, BuildError> {
    let started = std::time::Instant::now();
    let mut lib = discovery::discover(spec, &cfg.coqlib)?;
    discovery::resolve_dependencies(&mut lib, &cfg.coqlib);
    let n = lib.files.len();
    let threads = if cfg.threads == 0 { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2) } else { cfg.threads };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let mut results: Vec<Option<FileOut>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        mine.push((i, process_file(&lib, i, cfg.hammer)));
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
    let results: Vec<FileOut> = results.into_iter().flatten().collect();

    // Units and the test split.
    let packages: Vec<String> = {
        let mut p: Vec<String> = lib.files.iter().map(|f| f.package.clone()).collect();
        p.sort();
        p.dedup();
        p
    };
    let by_package = matches!(cfg.unit, SplitUnit::Package) || (cfg.unit == SplitUnit::Auto && packages.len() > 1);
    let unit_of: Vec<usize> = if by_package {
        let idx: HashMap<&str, usize> = packages.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
        lib.files.iter().map(|f| idx[f.package.as_str()]).collect()
    } else {
        (0..n).collect()
    };
    let units = if by_package { packages.len() } else { n };
    let unit_name = |u: usize| if by_package { packages[u].clone() } else { lib.files[u].logical.clone() };
    let mut unit_deps = vec![Vec::new(); units];
    let mut unknown = vec![false; units];
    for (i, d) in lib.file_deps.iter().enumerate() {
        for &j in d {
            if unit_of[j] != unit_of[i] {
                unit_deps[unit_of[i]].push(unit_of[j]);
            }
        }
        if lib.dep_source[i] == "none" {
            unknown[unit_of[i]] = true;
        }
    }
    let test = crate::split::test_units(&unit_deps, cfg.test_fraction, cfg.seed, &unknown);
    let mut is_test_unit = vec![false; units];
    for &u in &test {
        is_test_unit[u] = true;
    }

    // Assign splits; validation drawn from the non-test examples.
    let non_test: usize = results.iter().enumerate().filter(|(i, _)| !is_test_unit[unit_of[*i]]).map(|(_, r)| r.examples.len()).sum();
    let val_mask = crate::split::validation_mask(non_test, cfg.val_fraction, cfg.seed);
    let mut k = 0;
    std::fs::create_dir_all(out_dir).map_err(|e| BuildError::Io(out_dir.to_path_buf(), e))?;
    let mut w = Writers::new(out_dir)?;
    let mut stats = Stats { library: lib.name.clone(), files: n, split_unit: if by_package { "package" } else { "file" }.into(), units, ..Default::default() };
    stats.test_units = test.iter().map(|&u| unit_name(u)).collect();
    stats.notes = lib.notes.clone();
    if lang.is_none() {
        stats.notes.push("no ProofLanguage given: sft.jsonl has no augmented copies".into());
    }
    for s in &lib.dep_source {
        *stats.dependency_sources.entry(s.to_string()).or_default() += 1;
    }
    let mut skipped_all = Vec::new();
    let mut with_example = 0usize;
    for (i, r) in results.iter().enumerate() {
        let f = &lib.files[i];
        stats.blocks += r.blocks;
        stats.blocks_qed += r.qed;
        stats.blocks_defined += r.defined;
        stats.files_with_glob_refs += r.used_glob as usize;
        if let Some(e) = &r.failed {
            stats.files_failed += 1;
            skipped_all.push(Skipped { file: f.path.display().to_string(), line: 0, name: String::new(), reason: format!("file_{e}") });
        }
        skipped_all.extend(r.skipped.iter().cloned());
        w.write(
            "sources",
            &SourceRecord {
                logical_path: f.logical.clone(),
                file: f.path.display().to_string(),
                package: f.package.clone(),
                flags: f.flags.clone(),
                source: r.source.clone(),
                reduced: r.reduced.clone(),
            },
        )?;
        let test_file = is_test_unit[unit_of[i]];
        for (ex, name, scope, line, imports, end, module_path) in &r.examples {
            with_example += 1;
            let split = if test_file {
                "test"
            } else {
                k += 1;
                if val_mask[k - 1] {
                    "val"
                } else {
                    "train"
                }
            };
            stats.peeled += ex.in_tree as usize;
            *stats.depth_histogram.entry(ex.depth).or_default() += 1;
            stats.replaced_steps += ex.replaced_steps;
            stats.examples_with_replacement += (ex.replaced_steps > 0) as usize;
            let cstart = context_start(&r.reduced, ex.context_end, cfg.context_bytes);
            let base = Example {
                id: format!("{}:{}:{}", f.logical, ex.index, name),
                library: lib.name.clone(),
                package: f.package.clone(),
                file: f.path.display().to_string(),
                logical_path: f.logical.clone(),
                line: *line,
                position: ex.index,
                scope: scope.clone(),
                qualified_name: module_path.iter().chain(std::iter::once(name)).cloned().collect::<Vec<_>>().join("."),
                name: name.clone(),
                imports: imports.clone(),
                flags: f.flags.clone(),
                context: r.reduced.get(cstart..ex.context_end).unwrap_or("").to_string(),
                context_start: cstart,
                context_end: ex.context_end,
                context_extra: String::new(),
                statement: ex.statement.clone(),
                conditional_proof: ex.conditional_proof.clone(),
                conditional_proof_original: ex.conditional_proof_original.clone(),
                proposed_lemmas: ex.proposed_lemmas.clone(),
                proposed_names: ex.proposed_names.clone(),
                depth: ex.depth,
                in_tree: ex.in_tree,
                proof_end: if *end == ProofEnd::Defined { "defined" } else { "qed" }.into(),
                replaced_steps: ex.replaced_steps,
                split: split.into(),
                variant: "wo_lemmas".into(),
            };
            // D^{w/ l}: every human lemma stays in the context; the proof proposes nothing.
            let wstart = context_start(&r.source, ex.context_with_lemmas_end, cfg.context_bytes);
            let wl = Example {
                context: r.source.get(wstart..ex.context_with_lemmas_end).unwrap_or("").to_string(),
                context_start: wstart,
                context_end: ex.context_with_lemmas_end,
                conditional_proof: ex.plain_proof.clone(),
                conditional_proof_original: ConditionalProof::parse(&ex.conditional_proof_original)
                    .map(|cp| ConditionalProof::plain(prod_core::T0::NoInvoke, &cp.proof_text()).to_string())
                    .unwrap_or_default(),
                proposed_lemmas: vec![],
                proposed_names: vec![],
                variant: "w_lemmas".into(),
                ..base.clone()
            };
            match split {
                "test" => {
                    // Paper §4.1: the test sets keep only the theorems in T_tree.
                    if ex.in_tree {
                        w.write("test", &base)?;
                        w.write("test_wl", &wl)?;
                    }
                }
                "val" => {
                    w.write("val", &base)?;
                    w.write("val_wl", &wl)?;
                }
                _ => {
                    w.write("train", &base)?;
                    w.write("train_wl", &wl)?;
                    w.write("sft", &base)?;
                    if let (false, Some(lang)) = (base.proposed_lemmas.is_empty(), lang) {
                        if let Ok(cp) = ConditionalProof::parse(&base.conditional_proof) {
                            // Only the admitted lemmas are new: they follow the file prefix.
                            let (extra, proof) = cp.move_lemmas_to_context("", lang);
                            let extra = format!("\n{extra}");
                            let aug = Example {
                                id: format!("{}:augmented", base.id),
                                context: format!("{}{extra}", base.context),
                                context_extra: extra,
                                conditional_proof: proof.to_string(),
                                proposed_lemmas: vec![],
                                proposed_names: vec![],
                                variant: "augmented".into(),
                                ..base.clone()
                            };
                            w.write("sft", &aug)?;
                        }
                    }
                    if ex.in_tree {
                        w.write("rl", &base)?;
                    }
                }
            }
        }
    }
    for s in &skipped_all {
        let reason = s.reason.split(':').next().unwrap_or(&s.reason).to_string();
        *stats.skipped_by_reason.entry(reason).or_default() += 1;
        w.write("skipped", s)?;
    }
    stats.files_written = w.finish()?;
    for split in ["train", "val", "test"] {
        stats.examples_per_split.insert(split.into(), stats.files_written.get(split).copied().unwrap_or(0));
    }
    stats.peeled_share = if with_example > 0 { stats.peeled as f64 / with_example as f64 } else { 0.0 };
    stats.seconds = started.elapsed().as_secs_f64();
    let path = out_dir.join("stats.json");
    let text = serde_json::to_string_pretty(&stats).map_err(|e| BuildError::Io(path.clone(), e.into()))?;
    std::fs::write(&path, text + "\n").map_err(|e| BuildError::Io(path.clone(), e))?;
    Ok(stats)
}

/// The output files, in the order documented in docs/dataset.md.
pub const OUTPUT_FILES: [&str; 11] = ["train", "val", "test", "rl", "sft", "train_wl", "val_wl", "test_wl", "sources", "skipped", "stats"];

struct Writers {
    dir: PathBuf,
    files: BTreeMap<&'static str, (std::io::BufWriter<std::fs::File>, usize)>,
}

impl Writers {
    fn new(dir: &Path) -> Result<Self, BuildError> {
        let mut files = BTreeMap::new();
        for name in OUTPUT_FILES.iter().filter(|n| **n != "stats") {
            let path = dir.join(format!("{name}.jsonl"));
            let f = std::fs::File::create(&path).map_err(|e| BuildError::Io(path.clone(), e))?;
            files.insert(*name, (std::io::BufWriter::new(f), 0));
        }
        Ok(Writers { dir: dir.to_path_buf(), files })
    }
    fn write<T: Serialize>(&mut self, name: &'static str, v: &T) -> Result<(), BuildError> {
        let path = self.dir.join(format!("{name}.jsonl"));
        let Some((w, n)) = self.files.get_mut(name) else { return Err(BuildError::Io(path, std::io::ErrorKind::NotFound.into())) };
        serde_json::to_writer(&mut *w, v).map_err(|e| BuildError::Io(path.clone(), e.into()))?;
        w.write_all(b"\n").map_err(|e| BuildError::Io(path, e))?;
        *n += 1;
        Ok(())
    }
    fn finish(self) -> Result<BTreeMap<String, usize>, BuildError> {
        let mut out = BTreeMap::new();
        for (name, (mut w, n)) in self.files {
            w.flush().map_err(|e| BuildError::Io(self.dir.join(format!("{name}.jsonl")), e))?;
            out.insert(name.to_string(), n);
        }
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Discovery(#[from] discovery::DiscoveryError),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("a worker thread panicked (bug): the dataset was not written completely")]
    Worker,
}

/// Read a JSONL split file. Errors name the line.
pub fn read_examples(path: &Path) -> Result<Vec<Example>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1)))
        .collect()
}

/// Read `stats.json`.
pub fn read_stats(dir: &Path) -> Result<Stats, String> {
    let path = dir.join("stats.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
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
        SkipReason::Other,
    ]
    .iter()
    .map(|r| r.as_str())
    .collect()
}

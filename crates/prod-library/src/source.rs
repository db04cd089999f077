//! What differs between provers, behind one trait: the rest of the pipeline (peeling, contexts,
//! conditional proofs, SFT augmentation, w/ l variants, splits, JSONL, stats) is written once in
//! [`crate::dataset::build_from`] and knows no prover.
//!
//! A [`LibrarySource`] supplies: the library's files with their units and dependencies
//! ([`Library`]), a per-thread [`FileSegmenter`] that turns a file into [`Segments`] (blocks
//! `c1 s1 p1 … cl sl pl`, steps, references to the file's own theorems), the hammer rule, the
//! [`ProofLanguage`] (for augmented copies), and the choice of test units. Implementations:
//! [`crate::coq::CoqSource`] (Coq libraries) and [`crate::isar::AfpSource`] (the AFP).

use prod_core::ProofLanguage;

use crate::discovery::Library;
use crate::schema::{DatasetConfig, SplitUnit};
use crate::segment::{Segments, Step};
use crate::split::UnitSizes;

/// One file, segmented, with what the dataset records beside the blocks.
#[derive(Clone, Debug, Default)]
pub struct SegmentedSource {
    pub segments: Segments,
    /// Import commands: (byte offset, text). An example's `imports` are those before its
    /// statement (Coq: the `Require` sentences; Isabelle: the theory names after `imports`).
    pub imports: Vec<(usize, String)>,
    /// File-level problems, each reported once in `skipped.jsonl` as (line, reason) (Coq: the
    /// first lexer error, after which the rest of the file is not seen).
    pub issues: Vec<(usize, String)>,
    /// Did references come from the prover's own record (Coq `.glob`) rather than the text?
    pub prover_references: bool,
    /// Every proof-opening block the segmenter found, theorem or not (Isabelle also counts
    /// `instance`, `function`, `termination`, … proofs, which stay content).
    pub goal_blocks: usize,
    /// Blocks whose proof never closes.
    pub unclosed_blocks: usize,
    /// Where the theory body starts (Isabelle: after the header's `begin`; Coq: 0). A checker
    /// context is `base[body_start..context_end]` with the imports passed separately.
    pub body_start: usize,
}

/// Segments the files of one library. Created once per worker thread, so it may keep caches
/// that are neither `Send` nor `Sync` (Isabelle's keyword tables per import closure).
pub trait FileSegmenter {
    /// Segment file `file` (an index into [`LibrarySource::library`]'s files) whose text is
    /// `source`. Never panics; problems go into the result.
    fn segment(&mut self, file: usize, source: &str) -> SegmentedSource;
}

/// Which units are held out, and how the files map to units.
#[derive(Clone, Debug, Default)]
pub struct SplitPlan {
    /// What a unit is (`file`, `package`, `entry`), for `stats.json`.
    pub unit_kind: String,
    pub unit_names: Vec<String>,
    /// `unit_of[file]`.
    pub unit_of: Vec<usize>,
    /// Sorted test units.
    pub test: Vec<usize>,
    /// Units whose examples are left out of every split (they depend on a test unit, which the
    /// dependency-based split never produces but a date split can).
    pub excluded: Vec<usize>,
    pub notes: Vec<String>,
}

/// What differs per prover.
pub trait LibrarySource: Sync {
    /// `coq`, `isabelle` (for `stats.json`).
    fn prover(&self) -> &'static str;
    /// The files (path, logical path, package/unit, flags) and their dependencies.
    fn library(&self) -> &Library;
    /// A segmenter for the current thread.
    fn segmenter(&self) -> Box<dyn FileSegmenter + '_>;
    /// The hammer rule (Coq `hammer.`, Isabelle `sledgehammer`): step `k` rewritten, or `None`.
    fn rewrite_step(&self, steps: &[Step], k: usize) -> Option<String>;
    /// The language used to move proposed lemmas into the context (augmented SFT copies);
    /// `None`: no augmented copies (a note says so).
    fn language(&self) -> Option<&dyn ProofLanguage>;
    /// The language the library's proofs are written in: conditional proofs are built and read
    /// back with its lexer (markers only outside its strings and comments), as the checker
    /// will read them. Always known, unlike [`LibrarySource::language`].
    fn proof_language(&self) -> &dyn ProofLanguage;
    /// The constants `context` (a file's text before a theorem) admits without a proof, named
    /// relative to the file: recorded with each example, since the checker excuses none of
    /// them unless the user allows it by name. Empty where the prover's segmenter does not
    /// know how to read them.
    fn context_axioms(&self, _context: &str) -> Vec<String> {
        Vec::new()
    }
    /// Test units. `sizes`: per FILE, its examples and T_tree examples. The default is the
    /// dependency sampler of [`dependency_split`].
    fn split_plan(&self, cfg: &DatasetConfig, sizes: &UnitSizes) -> SplitPlan {
        dependency_split(self.library(), cfg, sizes)
    }
}

/// Per-file sizes summed per unit (`unit_of[file]`), with each unit's file sizes kept for the
/// per-file cap.
pub fn unit_sizes(file_sizes: &UnitSizes, unit_of: &[usize], units: usize) -> UnitSizes {
    let mut out = UnitSizes {
        examples: vec![0; units],
        tree: vec![0; units],
        files: vec![Vec::new(); units],
    };
    for (f, &u) in unit_of.iter().enumerate().filter(|(_, &u)| u < units) {
        let tree = file_sizes.tree.get(f).copied().unwrap_or(0);
        out.examples[u] += file_sizes.examples.get(f).copied().unwrap_or(0);
        out.tree[u] += tree;
        if tree > 0 {
            out.files[u].push(tree);
        }
    }
    out
}

/// The dependency-based holdout: unit = package when the library has several (or
/// `--unit package`), else file; test units from [`crate::split::test_units_sized`] (seeded,
/// never empty while a unit has a T_tree theorem, no file without one); units without
/// dependency information are never chosen.
pub fn dependency_split(lib: &Library, cfg: &DatasetConfig, sizes: &UnitSizes) -> SplitPlan {
    let n = lib.files.len();
    let packages: Vec<String> = {
        let mut p: Vec<String> = lib.files.iter().map(|f| f.package.clone()).collect();
        p.sort();
        p.dedup();
        p
    };
    let by_package = matches!(cfg.unit, SplitUnit::Package)
        || (cfg.unit == SplitUnit::Auto && packages.len() > 1);
    let unit_of: Vec<usize> = if by_package {
        let idx: std::collections::HashMap<&str, usize> = packages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), i))
            .collect();
        lib.files
            .iter()
            .map(|f| idx.get(f.package.as_str()).copied().unwrap_or(0))
            .collect()
    } else {
        (0..n).collect()
    };
    let units = if by_package { packages.len() } else { n };
    let unit_names: Vec<String> = if by_package {
        packages
    } else {
        lib.files.iter().map(|f| f.logical.clone()).collect()
    };
    let mut unit_deps = vec![Vec::new(); units];
    let mut unknown = vec![false; units];
    for (i, d) in lib.file_deps.iter().enumerate() {
        for &j in d {
            if j < n && unit_of[j] != unit_of[i] {
                unit_deps[unit_of[i]].push(unit_of[j]);
            }
        }
        if lib.dep_source.get(i).copied() == Some("none") {
            unknown[unit_of[i]] = true;
        }
    }
    let sizes = unit_sizes(sizes, &unit_of, units);
    let test = crate::split::test_units_sized(
        &unit_deps,
        cfg.test_fraction,
        cfg.seed,
        &unknown,
        &sizes,
        &cfg.test_target(),
    );
    SplitPlan {
        unit_kind: if by_package { "package" } else { "file" }.into(),
        unit_names,
        unit_of,
        test,
        excluded: vec![],
        notes: vec![],
    }
}

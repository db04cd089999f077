//! A dataset directory's schema: the builder's settings ([`DatasetConfig`]), one example line
//! ([`Example`]), `sources.jsonl`'s records, `skipped.jsonl`'s, `stats.json` ([`Stats`]), the
//! build's error and the files' column types (the card's `features`, Parquet's schema). Its own module, below the builder (`crate::dataset`), because every writer
//! and reader of the directory (the card, Parquet, the output checks, the compiled project,
//! the library sources) uses these types and the builder uses all of them.
//! Schema documentation: `docs/dataset.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::discovery;

/// The dataset builder's settings (also `prod dataset build`'s flags, feature `clap`; the Coq
/// root and the inline context's default come from the command's prover).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default)]
pub struct DatasetConfig {
    /// Coq installation root (`coqc -where`).
    #[cfg_attr(feature = "clap", arg(skip = DatasetConfig::default().coqlib))]
    pub coqlib: PathBuf,
    /// Share of dependency sinks held out as test units, in [0, 1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().test_fraction,
        value_parser = prod_core::range::parse::unit_interval_closed_open))]
    pub test_fraction: f64,
    /// Share of the remaining examples drawn for validation, in [0, 1) (and
    /// --test-fraction + --val-fraction < 1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().val_fraction,
        value_parser = prod_core::range::parse::unit_interval_closed_open))]
    pub val_fraction: f64,
    /// More test units are drawn (same seeded order) until the test split has this many
    /// theorems after the per-file cap, or no candidate is left.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().test_min_theorems))]
    pub test_min_theorems: usize,
    /// No file holds more than this share of the test theorems: a larger file keeps a seeded
    /// subset of its T_tree theorems and the rest go to no split (its file is a test unit).
    /// In [0, 1]; 0 or 1 turns the cap off.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().test_file_cap,
        value_parser = prod_core::range::parse::unit_interval_closed))]
    pub test_file_cap: f64,
    /// Seed for the test-unit sample and the validation draw.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().seed))]
    pub seed: u64,
    /// Split unit: auto (package if the library has several, else file), package, file.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = SplitUnit::Auto))]
    pub unit: SplitUnit,
    /// Replace hammer-findable steps by `hammer.` (Appendix A.3); `--no-hammer` keeps proof
    /// steps as written.
    #[cfg_attr(feature = "clap", arg(long = "no-hammer", action = clap::ArgAction::SetFalse,
        help = "Keep proof steps as written (no `hammer.` replacement)"))]
    pub hammer: bool,
    /// Worker threads (0: all cores).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = DatasetConfig::default().threads))]
    pub threads: usize,
    /// Keep at most this many bytes of each context inline (0: the whole context). The full
    /// context is always recoverable from `sources.jsonl` (see [`Example::context`]).
    #[cfg_attr(feature = "clap", arg(skip = DatasetConfig::default().context_bytes))]
    pub context_bytes: usize,
    /// The `coqc` that compiles a user's own project into the dataset's `lib/` (see
    /// [`crate::compile`]); it must be the checker's Coq, whose `.vo` files it loads.
    #[cfg_attr(feature = "clap", arg(skip = DatasetConfig::default().coqc))]
    pub coqc: PathBuf,
}

impl Default for DatasetConfig {
    fn default() -> Self {
        DatasetConfig {
            coqlib: PathBuf::from(discovery::DEFAULT_COQLIB),
            test_fraction: 0.1,
            val_fraction: 0.05,
            test_min_theorems: crate::split::MIN_TEST_THEOREMS,
            test_file_cap: crate::split::TEST_FILE_CAP,
            seed: prod_core::DEFAULT_SEED,
            unit: SplitUnit::Auto,
            hammer: true,
            threads: 0,
            context_bytes: Self::COQ_CONTEXT_BYTES,
            coqc: PathBuf::from("coqc"),
        }
    }
}

impl DatasetConfig {
    /// Bytes of each context kept inline by default: 16 KiB for Coq; 4 KiB for Isabelle, whose
    /// theories are long (the AFP with 16 KiB contexts is 9.4 GB of JSONL). The paper keeps the
    /// last 1k tokens; the full contexts are always in `sources.jsonl`.
    pub const COQ_CONTEXT_BYTES: usize = 16 * 1024;
    pub const ISABELLE_CONTEXT_BYTES: usize = 4 * 1024;

    /// What the test split aims for (minimum and per-file cap).
    pub fn test_target(&self) -> crate::split::TestTarget {
        crate::split::TestTarget {
            min_theorems: self.test_min_theorems,
            file_cap: self.test_file_cap,
        }
    }
}

/// What the test split holds out whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum SplitUnit {
    /// Package if the library has several, else file.
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
    /// The constants the full context admits without proof (`Axiom`, `Parameter`,
    /// `Conjecture`, a lemma closed by `Admitted`, …), named relative to the file. The checker
    /// excuses none of them unless the user allows it by name (`allowed_axioms`).
    #[serde(default)]
    pub context_axioms: Vec<String>,
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
#[serde(default)]
pub struct Stats {
    pub library: String,
    /// `coq` or `isabelle`.
    pub prover: String,
    pub files: usize,
    pub files_with_glob_refs: usize,
    pub files_failed: usize,
    /// Every proof-opening block the segmenter found (Isabelle: also `instance`, `function`,
    /// `termination`, … proofs, which stay content; Coq: the theorem blocks).
    pub goal_blocks: usize,
    /// Blocks whose proof never closes (skipped as `unterminated`).
    pub unclosed_blocks: usize,
    /// Theorem blocks (`Lemma …`/`lemma …`): the candidates for examples.
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
    /// Theorem blocks in each test unit (examples or not).
    pub blocks_per_test_unit: BTreeMap<String, usize>,
    /// Theorems in the test split (after the per-file cap).
    pub test_theorems: usize,
    /// The largest share of the test theorems one file holds, and that file.
    pub test_max_file_share: f64,
    pub test_max_file: String,
    /// Most test theorems one file keeps (`None`: no file needed capping, or the cap was off
    /// or could not be met; a note says which).
    pub test_file_cap: Option<usize>,
    /// T_tree theorems of test files beyond the cap: in no split.
    pub test_dropped_by_cap: usize,
    /// Units left out of every split because they depend on a test unit (date split only).
    pub excluded_units: Vec<String>,
    /// Examples of the excluded units (not written).
    pub examples_excluded: usize,
    pub dependency_sources: BTreeMap<String, usize>,
    /// The library's logical-root bindings (`-R`/`-Q dir Root`). Imports are qualified
    /// (`From Root Require …`). An installed library's are absolute (its directory under
    /// `coqc -where`; the checker needs no binding). A user's own project's are its compiled
    /// copy, relative to the dataset directory (`lib/MyLib`, see [`crate::compile`]): the checker
    /// binds exactly these with `-Q`, and only inside the dataset.
    pub load_paths: Vec<discovery::LoadPath>,
    pub notes: Vec<String>,
    pub seconds: f64,
}

impl Stats {
    /// The build's statistics for a reader, a line per concern.
    pub fn text(&self) -> String {
        let s = self;
        use std::fmt::Write as _;
        let mut o = String::new();
        let join = |m: &mut dyn Iterator<Item = String>| m.collect::<Vec<_>>().join(", ");
        let _ = writeln!(o, "library {}: {} files ({} with .glob references, {} unreadable), {} theorem blocks ({} Qed, {} Defined)", s.library, s.files, s.files_with_glob_refs, s.files_failed, s.blocks, s.blocks_qed, s.blocks_defined);
        let _ = writeln!(
            o,
            "goal blocks: {} ({} unclosed)",
            s.goal_blocks, s.unclosed_blocks
        );
        let _ = writeln!(
            o,
            "examples: {}",
            join(&mut s.examples_per_split.iter().map(|(k, v)| format!("{k} {v}")))
        );
        let _ = writeln!(
            o,
            "files written: {}",
            join(&mut s.files_written.iter().map(|(k, v)| format!("{k} {v}")))
        );
        let _ = writeln!(
            o,
            "peeled (T_tree): {} ({:.1}% of theorems with an example)",
            s.peeled,
            100.0 * s.peeled_share
        );
        let _ = writeln!(
            o,
            "depth histogram: {}",
            s.depth_histogram
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let _ = writeln!(
            o,
            "hammer replacement: {} steps in {} examples",
            s.replaced_steps, s.examples_with_replacement
        );
        let _ = writeln!(
            o,
            "skipped blocks: {}",
            join(&mut s.skipped_by_reason.iter().map(|(k, v)| format!("{k} {v}")))
        );
        let _ = writeln!(
            o,
            "split unit: {} ({} units; test: {})",
            s.split_unit,
            s.units,
            s.test_units.join(" ")
        );
        let _ = writeln!(
            o,
            "test theorems: {} (largest file share {:.1}%: {}; per-file cap {}, {} theorems left out by it)",
            s.test_theorems,
            100.0 * s.test_max_file_share,
            if s.test_max_file.is_empty() { "-" } else { &s.test_max_file },
            s.test_file_cap.map_or("none".to_string(), |c| c.to_string()),
            s.test_dropped_by_cap
        );
        if !s.excluded_units.is_empty() {
            let _ = writeln!(
                o,
                "left out (depend on test units): {} units, {} examples",
                s.excluded_units.len(),
                s.examples_excluded
            );
        }
        for n in &s.notes {
            let _ = writeln!(o, "note: {n}");
        }
        let _ = writeln!(o, "built in {:.2} s", s.seconds);
        o
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
    /// Isabelle: the byte after the theory header's `begin` (the same in `source` and
    /// `reduced`); a checker's context is the text from here. Absent (0) for Coq.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub body_start: usize,
}

pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Example {
    /// The full, checkable context of this example, from its file's record.
    pub fn full_context(&self, src: &SourceRecord) -> Option<String> {
        let base = if self.variant == "w_lemmas" {
            &src.source
        } else {
            &src.reduced
        };
        Some(format!(
            "{}{}",
            base.get(..self.context_end)?,
            self.context_extra
        ))
    }

    /// The context as a checker takes it: the full context from the file's `body_start` (for
    /// Isabelle the text after the theory header's `begin`, the imports being in `imports`;
    /// for Coq the same as [`Example::full_context`]).
    pub fn checker_context(&self, src: &SourceRecord) -> Option<String> {
        let base = if self.variant == "w_lemmas" {
            &src.source
        } else {
            &src.reduced
        };
        let start = src.body_start.min(self.context_end);
        Some(format!(
            "{}{}",
            base.get(start..self.context_end)?,
            self.context_extra
        ))
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

/// Read `stats.json`.
pub fn read_stats(dir: &Path) -> Result<Stats, String> {
    let path = dir.join("stats.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A column's type, as the card names it and as Parquet stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    String,
    Int,
    Float,
    Bool,
    /// A list of strings.
    Strings,
}

/// A table's columns: (name, type), in the order they are written.
pub type Columns = [(&'static str, ColumnType)];

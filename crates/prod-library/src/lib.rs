//! From a proof library to ProD datasets (paper §2 "Dataset construction", §4.1–4.2, App. A.3).
//!
//! Pipeline (one for every prover, [`dataset::build_from`]): a [`source::LibrarySource`] gives the
//! files and units and a per-thread segmenter (blocks `c1 s1 p1 … cl sl pl`, steps, references)
//! → [`peel`] (T_tree) → [`examples`] (contexts, conditional proofs, the prover's hammer rule) →
//! the prover's test units ([`split`]) → [`dataset`] (JSONL files + `stats.json`, written through
//! [`output`]: temporary files renamed into place, `stats.json` last; readers verify the counts;
//! [`card`]: the `README.md` that Hugging Face `datasets` loads the folder by).
//!
//! Prover-neutral parts: [`source`] (the trait), [`segment`] (the [`SegmentedFile`] trait),
//! [`peel`], [`examples`], [`split`], [`dataset`]. Coq: [`coq`] (`CoqSource`), [`glob`],
//! [`discovery`], [`hammer`], [`imports`] (library-internal `Require`s qualified), [`compile`] (a
//! user's project compiled into the dataset's `lib/`, with its load-path bindings), [`export`]
//! (a split in an RL framework's schema: rows, prompts, token counts, `export.json`), [`theorem`]
//! (a split's theorems with full contexts, as runs and benchmarks read them).
//! Isabelle/AFP: [`isar`] (`AfpSource`, on `prod-isar`).

pub mod card;
pub mod compile;
pub mod coq;
pub mod dataset;
pub mod discovery;
pub mod examples;
pub mod export;
pub mod glob;
pub mod hammer;
pub mod imports;
pub mod isar;
pub mod output;
pub mod parquet;
pub mod peel;
pub mod schema;
pub mod segment;
pub mod source;
pub mod split;
pub mod theorem;

pub use dataset::{build, DatasetConfig, Example, Stats};
pub use discovery::{discover, Library, LibrarySpec};
pub use peel::{peel, Peeling};
pub use segment::{ProofEnd, SegmentedFile, Segments, SkipReason, Step, Theorem};
pub use source::{FileSegmenter, LibrarySource, SegmentedSource, SplitPlan};

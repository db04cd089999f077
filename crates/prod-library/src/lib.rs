//! From a proof library to ProD datasets (paper §2 "Dataset construction", §4.1–4.2, App. A.3).
//!
//! Pipeline: [`discovery`] (files, logical paths, `.glob`s, dependencies) → [`coq`] segmenter
//! (blocks `c1 s1 p1 … cl sl pl`, steps, references; uses `prod-coq`'s lexer) → [`peel`]
//! (T_tree) → [`examples`] (contexts, conditional proofs, [`hammer`] replacement) → [`split`]
//! (holdout test units by the dependency graph) → [`dataset`] (JSONL files + `stats.json`).
//!
//! Prover-neutral parts: [`segment`] (the [`SegmentedFile`] trait), [`peel`], [`examples`],
//! [`split`]. Coq-specific: [`coq`], [`glob`], [`discovery`], [`hammer`].

pub mod coq;
pub mod dataset;
pub mod discovery;
pub mod examples;
pub mod glob;
pub mod hammer;
pub mod peel;
pub mod segment;
pub mod split;

pub use dataset::{build, DatasetConfig, Example, Stats};
pub use discovery::{discover, Library, LibrarySpec};
pub use peel::{peel, Peeling};
pub use segment::{ProofEnd, SegmentedFile, Segments, SkipReason, Step, Theorem};

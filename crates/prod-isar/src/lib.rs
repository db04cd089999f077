//! Isabelle/Isar outer syntax for ProD (pure: no process, no network).
//!
//! - [`lexer`]: a lossless lexer of Isabelle theory text (`lex` never fails: every byte is in exactly
//!   one token, and problems are reported beside the tokens).
//! - [`keywords`]: keyword kinds of `keyword.ML` and the built-in Pure/HOL tables.
//! - [`header`]: theory headers (`theory X imports … keywords … begin`).
//! - [`mod@segment`]: command spans and goal blocks (statement + proof steps).
//! - [`refs`]: candidate fact names referenced by a command.
//! - [`defs`]: fact names a theory defines (to intersect references with).
//! - [`root`]: session ROOT / ROOTS files.
//! - [`language`]: [`IsarLanguage`], the `prod_core::ProofLanguage` of Isabelle/Isar.
//! - [`sledgehammer`]: the paper's rule for replacing proof steps by `sledgehammer`.
//! - [`afp`]: AFP entries, their dependency graph, per-theory keyword tables, holdout and date splits.

pub mod afp;
pub mod defs;
pub mod header;
pub mod keyword_kind;
pub mod keywords;
pub mod language;
pub mod lexer;
pub mod refs;
pub mod root;
pub mod segment;
pub mod sledgehammer;

pub use afp::{Afp, KeywordResolver, HOLDOUT_ENTRIES};
pub use defs::{defined_names, DefinedName};
pub use header::{parse_header, KeywordDecl, TheoryHeader};
pub use keywords::{KeywordKind, KeywordTable};
pub use language::IsarLanguage;
pub use lexer::{lex, LexError, Token, TokenKind};
pub use refs::fact_references;
pub use root::{parse_root, parse_roots, Session};
pub use segment::{segment, segment_theory, CommandSpan, GoalBlock, SegmentError, Theory};

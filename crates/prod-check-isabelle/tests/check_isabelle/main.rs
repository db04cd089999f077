//! The integration tests of `prod-check-isabelle`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod checker;
mod common;
mod protocol;
mod real_isabelle;
mod rules_corpus;

//! The integration tests of `prod-coq`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod common;
mod coq_oracle;
mod lexer_data;
mod properties;
mod statements_data;
mod stdlib;

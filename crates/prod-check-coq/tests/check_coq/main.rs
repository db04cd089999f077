//! The integration tests of `prod-check-coq`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod attacks;
mod common;
mod corpus;
mod defence;
mod faults;
mod final_check;
mod hammer_cache;
mod load_paths;
mod plugin;

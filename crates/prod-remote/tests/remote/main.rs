//! The integration tests of `prod-remote`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod fake_server;
mod llama_cpp;

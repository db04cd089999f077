//! The integration tests of `prod-isar`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod afp;
mod afp_mini;
mod fixtures;
mod properties;

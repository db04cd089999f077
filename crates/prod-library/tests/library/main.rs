//! The integration tests of `prod-library`, one test binary (each file a module: linking
//! the workspace once per crate, not once per file).

mod afp;
mod fixtures;
mod imports;
mod isar_fixtures;
mod project;
mod split_cap;
mod stdlib;

//! Tidy tests, as rust-analyzer keeps them: the workspace's structural invariants are tests, so
//! they stay true (`cargo test -p prod-tidy`, part of the suite). What they read is the source
//! text itself, lexed just enough (comments, strings and `#[cfg(test)]` items blanked out):
//!
//! * [`source`] — a Rust file's code without comments, literals and test items;
//! * [`functions`] — every function's length, and whether a comment above it says why it is long;
//! * [`modules`] — each crate's modules and the references between them (for circles);
//! * the tests (`tests.rs`): function length, crate layering, no module circles, one
//!   integration-test binary per crate, the proof pipeline only in prod-prover, `prod-core`'s
//!   purity, and the architecture document's map.

pub mod functions;
pub mod modules;
pub mod source;

use std::path::{Path, PathBuf};

/// The workspace root (two levels above this crate).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The workspace's crates: `(name, directory)`, sorted by name.
pub fn crates() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(workspace().join("crates"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("Cargo.toml").is_file())
                .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[cfg(test)]
mod tests;

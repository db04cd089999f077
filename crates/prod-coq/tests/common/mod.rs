//! Shared by the stdlib sweeps: where the Debian stdlib sources are, and how to list them.

use std::path::{Path, PathBuf};

pub const STDLIB: &str = "/usr/lib/ocaml/coq/theories";

/// Every `.v` file under `dir`, recursively (unreadable directories are skipped).
pub fn v_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            v_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "v") {
            out.push(p);
        }
    }
}

//! Shared by the tests that compare the lexer with Coq: where the Debian stdlib sources are,
//! how to list them, and the two sides of the comparison.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Our lexer's sentence ranges.
pub fn sentence_ranges(text: &str) -> Vec<(usize, usize)> {
    prod_coq::sentences(text)
        .sentences
        .iter()
        .map(|s| (s.range.start, s.range.end))
        .collect()
}

/// Coq's own sentence ranges for `text` (from `coqc -time`, compiled in `dir`); `Err` with
/// Coq's message when it does not compile.
pub fn coq_ranges(dir: &Path, text: &str) -> Result<Vec<(usize, usize)>, String> {
    std::fs::write(dir.join("Oracle.v"), text).map_err(|e| e.to_string())?;
    let out = Command::new("coqc")
        .args(["-q", "-time", "Oracle.v"])
        .current_dir(dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let mut ranges: Vec<(usize, usize)> = vec![];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line.strip_prefix("Chars ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let a = it.next().and_then(|x| x.parse().ok());
        let _dash = it.next();
        let b = it.next().and_then(|x| x.parse().ok());
        // Coq replays a side-effecting command inside a proof (`Open Scope` after `Proof.`)
        // when the proof closes and prints its range again: keep ranges in file order only.
        if let (Some(a), Some(b)) = (a, b) {
            if !matches!(ranges.last(), Some(&(_, end)) if a < end) {
                ranges.push((a, b));
            }
        }
    }
    Ok(ranges)
}

//! A dataset folder on disk, written so that no reader takes a partial build for a complete one.
//!
//! A build first leaves a marker ([`BUILD_MARKER`]) in the folder, then writes every file as
//! `NAME.tmp`; only when all are written does it remove the old `stats.json`, rename the files
//! into place and write `stats.json` (with the line count of every file, `files_written`) last,
//! itself through a rename, and remove the marker. A build killed at any point therefore
//! leaves either the previous dataset as it was (its files and `stats.json` untouched, `*.tmp`
//! files beside them) or a folder with the marker and without `stats.json`, which readers
//! refuse. Readers also compare each file's line count with `stats.json`, so a truncated or
//! altered file is an error naming the file, not a smaller dataset.
//!
//! A folder that has neither `stats.json` nor the marker is a hand-made dataset (tests and
//! small experiments write a few JSONL files by hand) and is read as it is.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::schema::{BuildError, Stats};

/// Present in a dataset folder from the start of a build until its `stats.json` is in place.
pub const BUILD_MARKER: &str = ".prod-build-in-progress";

/// Where a file of the folder is written before it is renamed into place.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Replace `path` in one step: `bytes` written beside it ([`tmp_path`]) and flushed, then
/// renamed into place, so a kill leaves the old file or the new one, never half of one. Every
/// single-file write of ProD (run reports, exports, configs) goes through here.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes).and_then(|_| f.sync_all())?;
    std::fs::rename(&tmp, path)
}

/// Start a build in `dir`: create it and leave the marker (before any other file is written).
pub(crate) fn begin(dir: &Path) -> Result<(), BuildError> {
    std::fs::create_dir_all(dir).map_err(|e| BuildError::Io(dir.to_path_buf(), e))?;
    let marker = dir.join(BUILD_MARKER);
    std::fs::write(
        &marker,
        "a `prod dataset build` is writing this folder, or was interrupted: rebuild it\n",
    )
    .map_err(|e| BuildError::Io(marker, e))
}

/// Remove `dir/stats.json` (if any): from here on the folder is incomplete until
/// [`commit`] writes a new one.
pub(crate) fn retract(dir: &Path) -> Result<(), BuildError> {
    let path = dir.join("stats.json");
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BuildError::Io(path, e)),
        _ => Ok(()),
    }
}

/// Write `path`'s temporary file with `bytes`, flushed to disk.
pub(crate) fn write_tmp(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    let tmp = tmp_path(path);
    let mut f = std::fs::File::create(&tmp).map_err(|e| BuildError::Io(tmp.clone(), e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| BuildError::Io(tmp, e))
}

/// Finish a build: the old `stats.json` removed, each of `files` (already written as
/// `NAME.tmp`) renamed into place, then `stats.json`, then the marker removed.
pub(crate) fn commit(dir: &Path, files: &[PathBuf], stats: &Stats) -> Result<(), BuildError> {
    retract(dir)?;
    for f in files {
        std::fs::rename(tmp_path(f), f).map_err(|e| BuildError::Io(f.clone(), e))?;
    }
    let path = dir.join("stats.json");
    let text =
        serde_json::to_string_pretty(stats).map_err(|e| BuildError::Io(path.clone(), e.into()))?;
    write_tmp(&path, (text + "\n").as_bytes())?;
    std::fs::rename(tmp_path(&path), &path).map_err(|e| BuildError::Io(path.clone(), e))?;
    // The renames are durable once the folder itself is flushed.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    let marker = dir.join(BUILD_MARKER);
    match std::fs::remove_file(&marker) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BuildError::Io(marker, e)),
        _ => Ok(()),
    }
}

/// Lines of a JSONL text as the builder counts them (one per `\n`, plus an unterminated last
/// line).
pub fn count_lines(bytes: &[u8]) -> usize {
    let n = bytes.iter().filter(|&&b| b == b'\n').count();
    n + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// Whether a file of a dataset folder may be read: with `stats.json` beside it, its line count
/// (`lines`) must be the one `files_written` records for it (files it does not list are not
/// checked); without `stats.json`, the folder must not be an interrupted build.
pub fn check_file(path: &Path, lines: usize) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Some(stats) = stats_if_complete(dir)? else {
        return Ok(());
    };
    let Some(name) = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".jsonl"))
    else {
        return Ok(());
    };
    match stats.files_written.get(name) {
        Some(&want) if want != lines => Err(mismatch(path, lines, want)),
        _ => Ok(()),
    }
}

/// [`check_file`] for a file not yet read (counts its lines).
pub fn check_unread_file(path: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    check_file(path, count_lines(&bytes))
}

/// `dir/stats.json` when there is one; `None` for a hand-made folder (neither `stats.json` nor
/// the marker); an error for an interrupted build or an unreadable `stats.json`.
fn stats_if_complete(dir: &Path) -> Result<Option<Stats>, String> {
    let path = dir.join("stats.json");
    if !path.exists() {
        if dir.join(BUILD_MARKER).exists() {
            return Err(interrupted(dir));
        }
        return Ok(None);
    }
    crate::schema::read_stats(dir).map(Some)
}

fn interrupted(dir: &Path) -> String {
    format!(
        "{}: not a complete dataset: it has no stats.json and a `prod dataset build` was interrupted there ({} is present); rebuild it",
        dir.display(),
        BUILD_MARKER
    )
}

fn mismatch(path: &Path, lines: usize, want: usize) -> String {
    format!(
        "{}: {lines} lines, but stats.json records {want} (files_written): the file was cut short or changed after the build; rebuild the dataset",
        path.display()
    )
}

/// Read `dir/stats.json` and check every file it lists (`files_written`) against it: present,
/// with that many lines. Errors name the first file that differs.
pub fn verify(dir: &Path) -> Result<Stats, String> {
    if !dir.join("stats.json").exists() {
        if dir.join(BUILD_MARKER).exists() {
            return Err(interrupted(dir));
        }
        return Err(format!(
            "{}: no stats.json: not a dataset folder written by `prod dataset build`",
            dir.display()
        ));
    }
    let stats = crate::schema::read_stats(dir)?;
    for (name, &want) in &stats.files_written {
        let path = dir.join(format!("{name}.jsonl"));
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines = count_lines(&bytes);
        if lines != want {
            return Err(mismatch(&path, lines, want));
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stats(files: &[(&str, usize)]) -> Stats {
        Stats {
            files_written: files
                .iter()
                .map(|(n, c)| (n.to_string(), *c))
                .collect::<BTreeMap<_, _>>(),
            ..Default::default()
        }
    }

    #[test]
    fn lines_are_counted_as_written() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"{}\n"), 1);
        assert_eq!(count_lines(b"{}\n{}"), 2);
        assert_eq!(count_lines(b"{}\n{}\n"), 2);
    }

    #[test]
    fn a_committed_folder_verifies_and_a_cut_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        begin(d).unwrap();
        let train = d.join("train.jsonl");
        write_tmp(&train, b"{}\n{}\n").unwrap();
        // Before the commit: no stats.json, the marker present: refused.
        assert!(!train.exists());
        let e = verify(d).unwrap_err();
        assert!(e.contains("interrupted"), "{e}");
        assert!(check_file(&train, 0).unwrap_err().contains("interrupted"));
        commit(d, std::slice::from_ref(&train), &stats(&[("train", 2)])).unwrap();
        assert!(!d.join(BUILD_MARKER).exists());
        assert!(!tmp_path(&train).exists());
        assert_eq!(verify(d).unwrap().files_written["train"], 2);
        check_unread_file(&train).unwrap();
        // A file cut short after the build.
        std::fs::write(&train, "{}\n").unwrap();
        let e = verify(d).unwrap_err();
        assert!(
            e.contains("train.jsonl: 1 lines, but stats.json records 2"),
            "{e}"
        );
        assert!(check_unread_file(&train).is_err());
        // A file stats.json does not list is not checked; a missing listed file is an error.
        std::fs::write(d.join("extra.jsonl"), "{}\n").unwrap();
        check_unread_file(&d.join("extra.jsonl")).unwrap();
        std::fs::remove_file(&train).unwrap();
        assert!(verify(d).unwrap_err().contains("train.jsonl"));
    }

    #[test]
    fn a_rebuild_retracts_the_old_stats_before_any_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let train = d.join("train.jsonl");
        begin(d).unwrap();
        write_tmp(&train, b"{}\n").unwrap();
        commit(d, std::slice::from_ref(&train), &stats(&[("train", 1)])).unwrap();
        // A second build, interrupted before its commit: the old dataset is intact.
        begin(d).unwrap();
        write_tmp(&train, b"{}\n{}\n{}\n").unwrap();
        assert_eq!(verify(d).unwrap().files_written["train"], 1);
        check_unread_file(&train).unwrap();
        // Interrupted inside the commit, after the old stats.json went: refused.
        retract(d).unwrap();
        assert!(verify(d).unwrap_err().contains("interrupted"));
        assert!(check_unread_file(&train).is_err());
        // A hand-made folder (no stats.json, no marker) is read as it is.
        let hand = tempfile::tempdir().unwrap();
        std::fs::write(hand.path().join("test.jsonl"), "{}\n").unwrap();
        check_unread_file(&hand.path().join("test.jsonl")).unwrap();
        assert!(verify(hand.path()).unwrap_err().contains("no stats.json"));
    }
}

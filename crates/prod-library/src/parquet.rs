//! Parquet copies of JSONL files: the compact form of a dataset folder and of a run export.
//!
//! A dataset's JSONL repeats each file's context on every example (83% of `train.jsonl`'s
//! bytes); Parquet's dictionary encoding and zstd store each distinct context about once, so
//! the stdlib `train.jsonl` (107 MB) becomes about 3 MB, and Hugging Face `datasets`, pandas
//! and DuckDB read it as it is. [`write_dataset`] writes one folder per config
//! (`OUT/<config>/<split>.parquet`: the variants apart) with its own dataset card; the JSONL
//! folder stays what `prod` itself reads.
//!
//! Columns come from a fixed table of names and types (the card's `features`), never inferred:
//! a column that is always empty still has its type, and a JSON field the table does not name
//! is an error (strict mode) rather than a column silently lost.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::schema::{BuildError, Stats};
pub use crate::schema::{ColumnType, Columns};

fn schema(columns: &Columns) -> Arc<Schema> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|&(name, t)| {
            let dt = match t {
                ColumnType::String => DataType::Utf8,
                ColumnType::Int => DataType::Int64,
                ColumnType::Float => DataType::Float64,
                ColumnType::Bool => DataType::Boolean,
                ColumnType::Strings => {
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
                }
            };
            Field::new(name, dt, true)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Write the JSONL `input` (one object per line) as Parquet to `out` (through a temporary file
/// renamed into place). Returns the rows written. Errors name the file.
pub fn jsonl_to_parquet(
    input: &mut dyn std::io::BufRead,
    columns: &Columns,
    out: &Path,
) -> Result<usize, String> {
    jsonl_to_parquet_with(input, schema(columns), out)
}

/// [`jsonl_to_parquet`] with any Arrow schema (nested lists and structs included, e.g. the
/// chat-message `prompt` column an RL framework reads).
pub fn jsonl_to_parquet_with(
    input: &mut dyn std::io::BufRead,
    schema: Arc<Schema>,
    out: &Path,
) -> Result<usize, String> {
    let tmp = crate::output::tmp_path(out);
    let result = (|| -> Result<usize, String> {
        let reader = arrow_json::ReaderBuilder::new(schema.clone())
            .with_strict_mode(true)
            .build(input)
            .map_err(|e| e.to_string())?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build();
        let file = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
        let mut w = ArrowWriter::try_new(file, schema, Some(props)).map_err(|e| e.to_string())?;
        let mut rows = 0;
        for batch in reader {
            let batch = batch.map_err(|e| format!("after {rows} rows: {e}"))?;
            rows += batch.num_rows();
            w.write(&batch).map_err(|e| e.to_string())?;
        }
        w.close().map_err(|e| e.to_string())?;
        Ok(rows)
    })();
    match result {
        Ok(rows) => {
            std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))?;
            Ok(rows)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(format!("{}: {e}", out.display()))
        }
    }
}

/// The Parquet folder's list of files (rows, bytes, and the JSONL file each was made from).
pub const MANIFEST: &str = "parquet.json";

/// One file of a Parquet dataset folder.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Written {
    pub config: String,
    pub split: String,
    /// `<config>/<split>.parquet`, relative to the folder.
    pub path: String,
    pub rows: usize,
    pub bytes: u64,
    /// The JSONL file it was made from, and its size.
    pub from: String,
    pub from_bytes: u64,
}

impl Written {
    /// The file's line in `prod dataset parquet`'s table.
    pub fn text(&self) -> String {
        let (path, rows, bytes) = (&self.path, self.rows, self.bytes);
        let (from, from_bytes) = (&self.from, self.from_bytes);
        format!("{path:<24} {rows:>8} rows {bytes:>12} bytes (from {from}, {from_bytes} bytes)")
    }

    /// The table's last line: files, rows, bytes and how much smaller than the JSONL.
    pub fn total(written: &[Written], out: &Path) -> String {
        let rows: usize = written.iter().map(|w| w.rows).sum();
        let bytes: u64 = written.iter().map(|w| w.bytes).sum();
        let from: u64 = written.iter().map(|w| w.from_bytes).sum();
        let ratio = from as f64 / bytes.max(1) as f64;
        let n = written.len();
        format!(
            "{n} files, {rows} rows, {bytes} bytes ({ratio:.1}× smaller than the JSONL) → {}",
            out.display()
        )
    }
}

/// The Parquet form of the dataset folder `dir` in `out`: `out/<config>/<split>.parquet` for
/// every config and split the card of `dir` names, a card (`README.md`) pointing at them, and
/// [`MANIFEST`]. `out` must not exist yet, or be such a folder written before (replaced whole:
/// written beside it, then renamed into place). Every file's row count is checked against
/// `dir`'s `stats.json` first, so a cut or interrupted dataset is refused.
pub fn write_dataset(dir: &Path, out: &Path) -> Result<Vec<Written>, BuildError> {
    let stats = crate::output::verify(dir).map_err(|e| io_err(dir, e))?;
    let card_path = out.join(crate::card::CARD);
    if out.exists() && !crate::card::written_by_prod(&card_path) {
        return Err(io_err(
            out,
            "exists and is not a Parquet dataset folder written by prod: choose another --out",
        ));
    }
    let staging = sibling(out, ".tmp");
    let _ = std::fs::remove_dir_all(&staging);
    let written = write_files(dir, &stats, &staging).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&staging);
    })?;
    let card = crate::card::render(&stats, crate::card::Layout::Parquet, &|rel| {
        crate::card::file_size(&staging, rel)
    });
    let manifest = serde_json::json!({"from": dir.display().to_string(), "files": written});
    std::fs::write(staging.join(crate::card::CARD), card)
        .and_then(|_| std::fs::write(staging.join(MANIFEST), format!("{manifest:#}\n")))
        .map_err(|e| BuildError::Io(staging.clone(), e))?;
    let old = sibling(out, ".old");
    if out.exists() {
        std::fs::rename(out, &old).map_err(|e| BuildError::Io(out.to_path_buf(), e))?;
    }
    std::fs::rename(&staging, out).map_err(|e| BuildError::Io(out.to_path_buf(), e))?;
    let _ = std::fs::remove_dir_all(&old);
    Ok(written)
}

fn write_files(dir: &Path, stats: &Stats, staging: &Path) -> Result<Vec<Written>, BuildError> {
    let mut written = Vec::new();
    for (config, split, stem, columns) in crate::card::files(stats) {
        let from = dir.join(format!("{stem}.jsonl"));
        let folder = staging.join(config);
        std::fs::create_dir_all(&folder).map_err(|e| BuildError::Io(folder.clone(), e))?;
        let path = folder.join(format!("{split}.parquet"));
        let file = std::fs::File::open(&from).map_err(|e| BuildError::Io(from.clone(), e))?;
        let rows = jsonl_to_parquet(&mut std::io::BufReader::new(file), columns, &path)
            .map_err(|e| io_err(&from, e))?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        written.push(Written {
            config: config.to_string(),
            split: split.to_string(),
            path: format!("{config}/{split}.parquet"),
            rows,
            bytes: size(&path),
            from: format!("{stem}.jsonl"),
            from_bytes: size(&from),
        });
    }
    Ok(written)
}

/// `out` with `suffix` added to its last component.
fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    out.with_file_name(name)
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> BuildError {
    BuildError::Io(path.to_path_buf(), std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_keep_their_types_and_unknown_fields_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.parquet");
        const COLS: &Columns = &[
            ("id", ColumnType::String),
            ("n", ColumnType::Int),
            ("x", ColumnType::Float),
            ("ok", ColumnType::Bool),
            ("flags", ColumnType::Strings),
        ];
        let text = "{\"id\":\"a\",\"n\":1,\"x\":0.5,\"ok\":true,\"flags\":[]}\n\
                    {\"id\":\"b\",\"n\":null,\"x\":null,\"ok\":false,\"flags\":[\"q\"]}\n";
        let rows = jsonl_to_parquet(&mut text.as_bytes(), COLS, &out).unwrap();
        assert_eq!(rows, 2);
        let file = std::fs::File::open(&out).unwrap();
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(reader.schema().as_ref(), schema(COLS).as_ref());
        let batches: Vec<_> = reader.build().unwrap().map(|b| b.unwrap()).collect();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);

        let bad = "{\"id\":\"a\",\"n\":1,\"x\":0.5,\"ok\":true,\"flags\":[],\"extra\":1}\n";
        let e = jsonl_to_parquet(&mut bad.as_bytes(), COLS, &out).unwrap_err();
        assert!(e.contains("extra"), "{e}");
        // The earlier file is still there, whole: a failed write leaves nothing half-written.
        assert!(out.is_file() && !crate::output::tmp_path(&out).exists());
    }
}

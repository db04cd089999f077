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

use parquet::basic::{Compression, LogicalType, Repetition, Type as Physical, ZstdLevel};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;

use crate::schema::{BuildError, Stats};
pub use crate::schema::{ColumnType, Columns};

/// A column's type as JSON values are written into it; every value may be null, as in JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Utf8,
    Int64,
    Float64,
    Bool,
    List(Box<Kind>),
    Struct(Vec<(&'static str, Kind)>),
}

impl Kind {
    /// How many leaf columns Parquet stores for it.
    fn leaves(&self) -> usize {
        match self {
            Kind::List(e) => e.leaves(),
            Kind::Struct(fields) => fields.iter().map(|(_, k)| k.leaves()).sum(),
            _ => 1,
        }
    }

    /// Its Parquet schema node named `name` (lists in the standard three levels, the element
    /// named `item` as Arrow names it).
    fn parquet(&self, name: &str, repetition: Repetition) -> parquet::errors::Result<Type> {
        let leaf = |physical, logical| {
            Type::primitive_type_builder(name, physical)
                .with_repetition(repetition)
                .with_logical_type(logical)
                .build()
        };
        match self {
            Kind::Utf8 => leaf(Physical::BYTE_ARRAY, Some(LogicalType::String)),
            Kind::Int64 => leaf(Physical::INT64, None),
            Kind::Float64 => leaf(Physical::DOUBLE, None),
            Kind::Bool => leaf(Physical::BOOLEAN, None),
            Kind::List(e) => {
                let entry = Type::group_type_builder("list")
                    .with_repetition(Repetition::REPEATED)
                    .with_fields(vec![Arc::new(e.parquet("item", Repetition::OPTIONAL)?)])
                    .build()?;
                Type::group_type_builder(name)
                    .with_repetition(repetition)
                    .with_logical_type(Some(LogicalType::List))
                    .with_fields(vec![Arc::new(entry)])
                    .build()
            }
            Kind::Struct(fields) => {
                let children = fields
                    .iter()
                    .map(|(n, k)| k.parquet(n, Repetition::OPTIONAL).map(Arc::new))
                    .collect::<parquet::errors::Result<Vec<_>>>()?;
                Type::group_type_builder(name)
                    .with_repetition(repetition)
                    .with_fields(children)
                    .build()
            }
        }
    }
}

/// A dataset card's columns as a table of [`Kind`]s.
fn schema(columns: &Columns) -> Vec<(&'static str, Kind)> {
    let kind = |t| match t {
        ColumnType::String => Kind::Utf8,
        ColumnType::Int => Kind::Int64,
        ColumnType::Float => Kind::Float64,
        ColumnType::Bool => Kind::Bool,
        ColumnType::Strings => Kind::List(Box::new(Kind::Utf8)),
    };
    columns.iter().map(|&(name, t)| (name, kind(t))).collect()
}

/// Write the JSONL `input` (one object per line) as Parquet to `out` (through a temporary file
/// renamed into place). Returns the rows written. Errors name the file.
pub fn jsonl_to_parquet(
    input: &mut dyn std::io::BufRead,
    columns: &Columns,
    out: &Path,
) -> Result<usize, String> {
    jsonl_to_parquet_with(input, &schema(columns), out)
}

/// [`jsonl_to_parquet`] with any table of columns (nested lists and structs included, e.g.
/// the chat-message `prompt` column an RL framework reads). A field the table does not name,
/// or a value of another type, is an error.
pub fn jsonl_to_parquet_with(
    input: &mut dyn std::io::BufRead,
    schema: &[(&'static str, Kind)],
    out: &Path,
) -> Result<usize, String> {
    let tmp = crate::output::tmp_path(out);
    match write_rows(input, schema, &tmp) {
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

/// The rows of `input` shredded into leaf columns and written to `path`, zstd-compressed with
/// dictionary encoding, one row group per [`ROW_GROUP`] rows.
fn write_rows(
    input: &mut dyn std::io::BufRead,
    schema: &[(&'static str, Kind)],
    path: &Path,
) -> Result<usize, String> {
    let err = |e: parquet::errors::ParquetError| e.to_string();
    let fields = schema
        .iter()
        .map(|(n, k)| k.parquet(n, Repetition::OPTIONAL).map(Arc::new))
        .collect::<parquet::errors::Result<Vec<_>>>()
        .map_err(err)?;
    let root = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(err)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let mut w = SerializedFileWriter::new(file, Arc::new(root), Arc::new(props)).map_err(err)?;
    let (mut group, mut rows, mut in_group) = (RowGroup::new(schema), 0, 0);
    for (i, line) in std::io::BufRead::lines(&mut *input).enumerate() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim().is_empty() {
            continue;
        }
        let row: Value = serde_json::from_str(&line).map_err(|e| format!("line {}: {e}", i + 1))?;
        let at = |e: String| format!("line {}: {e}", i + 1);
        shred_row(schema, &row, &mut group.0).map_err(at)?;
        (rows, in_group) = (rows + 1, in_group + 1);
        if in_group == ROW_GROUP {
            group.write(&mut w).map_err(err)?;
            (group, in_group) = (RowGroup::new(schema), 0);
        }
    }
    if in_group > 0 || rows == 0 {
        group.write(&mut w).map_err(err)?;
    }
    w.close().map_err(err)?;
    Ok(rows)
}

/// Rows per row group (Arrow's writer's default).
const ROW_GROUP: usize = 1024 * 1024;

/// One leaf column's buffered values, with their definition and repetition levels.
struct Leaf {
    values: Values,
    def: Vec<i16>,
    rep: Vec<i16>,
}

enum Values {
    Utf8(Vec<ByteArray>),
    Int64(Vec<i64>),
    Float64(Vec<f64>),
    Bool(Vec<bool>),
}

/// A row group's leaf columns, in schema order.
struct RowGroup(Vec<Leaf>);

impl RowGroup {
    fn new(schema: &[(&'static str, Kind)]) -> Self {
        fn leaves(k: &Kind, out: &mut Vec<Leaf>) {
            let values = match k {
                Kind::List(e) => return leaves(e, out),
                Kind::Struct(fields) => return fields.iter().for_each(|(_, k)| leaves(k, out)),
                Kind::Utf8 => Values::Utf8(vec![]),
                Kind::Int64 => Values::Int64(vec![]),
                Kind::Float64 => Values::Float64(vec![]),
                Kind::Bool => Values::Bool(vec![]),
            };
            out.push(Leaf {
                values,
                def: vec![],
                rep: vec![],
            });
        }
        let mut out = vec![];
        schema.iter().for_each(|(_, k)| leaves(k, &mut out));
        RowGroup(out)
    }

    fn write<W: std::io::Write + Send>(
        self,
        w: &mut SerializedFileWriter<W>,
    ) -> parquet::errors::Result<()> {
        let mut group = w.next_row_group()?;
        for leaf in self.0 {
            let Some(mut col) = group.next_column()? else {
                break;
            };
            let (def, rep) = (Some(&leaf.def[..]), Some(&leaf.rep[..]));
            match &leaf.values {
                Values::Utf8(v) => col.typed::<ByteArrayType>().write_batch(v, def, rep)?,
                Values::Int64(v) => col.typed::<Int64Type>().write_batch(v, def, rep)?,
                Values::Float64(v) => col.typed::<DoubleType>().write_batch(v, def, rep)?,
                Values::Bool(v) => col.typed::<BoolType>().write_batch(v, def, rep)?,
            };
            col.close()?;
        }
        group.close().map(|_| ())
    }
}

/// One JSON row into the leaf columns (top-level fields at repetition 0, definition 0).
fn shred_row(
    schema: &[(&'static str, Kind)],
    row: &Value,
    leaves: &mut [Leaf],
) -> Result<(), String> {
    let Value::Object(map) = row else {
        return Err("not a JSON object".into());
    };
    shred_fields(schema, map, 0, 0, 0, leaves)
}

/// The fields of an object, each into its own leaves; a key no field names is an error.
fn shred_fields(
    fields: &[(&'static str, Kind)],
    map: &serde_json::Map<String, Value>,
    rep: i16,
    def: i16,
    depth: i16,
    leaves: &mut [Leaf],
) -> Result<(), String> {
    if let Some(k) = map.keys().find(|k| !fields.iter().any(|(n, _)| n == k)) {
        return Err(format!("field `{k}` is not a column"));
    }
    let mut rest = leaves;
    for (name, kind) in fields {
        let (mine, after) = std::mem::take(&mut rest).split_at_mut(kind.leaves());
        shred(kind, map.get(*name), rep, def, depth, mine).map_err(|e| format!("`{name}`: {e}"))?;
        rest = after;
    }
    Ok(())
}

/// No value below this point: every leaf gets the levels reached so far.
fn absent(leaves: &mut [Leaf], rep: i16, def: i16) {
    for l in leaves {
        l.def.push(def);
        l.rep.push(rep);
    }
}

/// A value (or its absence) into `leaves`: `rep` is the repetition level it starts at, `def`
/// the definition level of its parent, `depth` the number of lists around it (Dremel's
/// shredding; every node optional, a list two levels: itself and its repeated entry).
fn shred(
    kind: &Kind,
    v: Option<&Value>,
    rep: i16,
    def: i16,
    depth: i16,
    leaves: &mut [Leaf],
) -> Result<(), String> {
    let v = match v {
        None | Some(Value::Null) => {
            absent(leaves, rep, def);
            return Ok(());
        }
        Some(v) => v,
    };
    let mismatch = || Err(format!("expected {kind:?}, found {}", json_type(v)));
    match (kind, v) {
        (Kind::List(_), Value::Array(items)) if items.is_empty() => absent(leaves, rep, def + 1),
        (Kind::List(elem), Value::Array(items)) => {
            for (i, x) in items.iter().enumerate() {
                let r = if i == 0 { rep } else { depth + 1 };
                shred(elem, Some(x), r, def + 2, depth + 1, leaves)?;
            }
        }
        (Kind::Struct(fields), Value::Object(map)) => {
            shred_fields(fields, map, rep, def + 1, depth, leaves)?
        }
        (Kind::List(_) | Kind::Struct(_), _) => return mismatch(),
        _ => {
            let l = &mut leaves[0];
            match (&mut l.values, v) {
                (Values::Utf8(out), Value::String(s)) => out.push(ByteArray::from(s.as_str())),
                (Values::Int64(out), Value::Number(n)) if n.is_i64() => out.extend(n.as_i64()),
                (Values::Float64(out), Value::Number(n)) => out.extend(n.as_f64()),
                (Values::Bool(out), Value::Bool(b)) => out.push(*b),
                _ => return mismatch(),
            }
            l.def.push(def + 1);
            l.rep.push(rep);
        }
    }
    Ok(())
}

/// A JSON value's type, for an error message (never the value: it may be a whole context).
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
        let rows = read_back(&out);
        assert_eq!(
            rows,
            [
                r#"{id: "a", n: 1, x: 0.5, ok: true, flags: []}"#,
                r#"{id: "b", n: null, x: null, ok: false, flags: ["q"]}"#,
            ]
        );

        let bad = "{\"id\":\"a\",\"n\":1,\"x\":0.5,\"ok\":true,\"flags\":[],\"extra\":1}\n";
        let e = jsonl_to_parquet(&mut bad.as_bytes(), COLS, &out).unwrap_err();
        assert!(e.contains("extra"), "{e}");
        // The earlier file is still there, whole: a failed write leaves nothing half-written.
        assert!(out.is_file() && !crate::output::tmp_path(&out).exists());
    }

    /// Every row of a Parquet file, as the crate's reader prints it.
    fn read_back(path: &Path) -> Vec<String> {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let rows = reader.get_row_iter(None).unwrap();
        rows.map(|r| r.unwrap().to_string()).collect()
    }

    #[test]
    fn nested_lists_and_structs_are_shredded_as_dremel_says() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.parquet");
        let message = Kind::Struct(vec![("role", Kind::Utf8), ("content", Kind::Utf8)]);
        let schema = [
            ("prompt", Kind::List(Box::new(message))),
            (
                "extra",
                Kind::Struct(vec![
                    ("index", Kind::Int64),
                    ("tags", Kind::List(Box::new(Kind::Utf8))),
                ]),
            ),
        ];
        let text = r#"{"prompt":[{"role":"user","content":"a"},{"role":"system","content":null}],"extra":{"index":3,"tags":["x","y"]}}
{"prompt":[],"extra":null}
{"prompt":null,"extra":{"index":null,"tags":[null]}}
{"prompt":[null]}
"#;
        let rows = jsonl_to_parquet_with(&mut text.as_bytes(), &schema, &out).unwrap();
        assert_eq!(rows, 4);
        assert_eq!(
            read_back(&out),
            [
                r#"{prompt: [{role: "user", content: "a"}, {role: "system", content: null}], extra: {index: 3, tags: ["x", "y"]}}"#,
                r#"{prompt: [], extra: null}"#,
                r#"{prompt: null, extra: {index: null, tags: [null]}}"#,
                r#"{prompt: [null], extra: null}"#,
            ]
        );
        for (bad, why) in [
            (r#"{"prompt":{"role":"user"}}"#, "`prompt`: expected List"),
            (
                r#"{"extra":{"index":1.5}}"#,
                "`extra`: `index`: expected Int64, found a number",
            ),
            (
                r#"{"extra":{"other":1}}"#,
                "`extra`: field `other` is not a column",
            ),
            ("[1]", "not a JSON object"),
        ] {
            let e = jsonl_to_parquet_with(&mut bad.as_bytes(), &schema, &out).unwrap_err();
            assert!(e.contains(why) && e.contains("line 1"), "{e}");
        }
    }
}

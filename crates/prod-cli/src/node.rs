//! The one node schema of `prod check`, `prod tree solve`, `prod queue submit` and `prod serve`:
//! `{"id", "imports"?, "context"?, "statement", "proof", "locally_correct"?}`. An id is a
//! string or a number and names one node of a file (output lines, `--verdicts` and the
//! solver's lemma lookup are keyed by it). `imports` is a string or, as datasets carry it, a
//! list of `Require` sentences (joined by newlines). `locally_correct` is what `tree solve`
//! reads; `check` decides it itself and ignores the field, so that one file serves both.
//!
//! Other fields are the caller's (a researcher's metadata, an API's `custom_id`): `check` and
//! `serve` copy them into the node's output line. Two kinds are refused, so that a typo never
//! checks a node silently without its context: a field that looks like a misspelt one of the
//! node's own (`contxt`: "did you mean `context`?", by edit distance or case), and a field the
//! output line itself writes (`verdict`, `message`, …), which would be overwritten.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// The fields of a node (what [`NodeLine`] reads).
pub(crate) const NODE_FIELDS: [&str; 6] = [
    "id",
    "imports",
    "context",
    "statement",
    "proof",
    "locally_correct",
];

/// The fields an output line writes besides the node's id (`prod check --json`, `prod
/// serve`'s results and streamed lines): the verdict line's ([`prod_check::VerdictLine`]) and
/// the service's own.
fn is_output_field(key: &str) -> bool {
    key != "id"
        && (prod_check::VerdictLine::FIELDS.contains(&key)
            || ["index", "globally_correct"].contains(&key))
}

/// One input node.
#[derive(Deserialize)]
#[serde(try_from = "RawNode")]
pub(crate) struct NodeLine {
    pub id: serde_json::Value,
    pub imports: String,
    pub context: String,
    pub statement: String,
    pub proof: String,
    pub locally_correct: Option<bool>,
    /// The caller's own fields, copied into the output line.
    pub extra: Map<String, Value>,
}

/// A node as written, before its other fields are vetted.
#[derive(Deserialize)]
struct RawNode {
    #[serde(deserialize_with = "string_or_number")]
    id: serde_json::Value,
    #[serde(default, deserialize_with = "imports_text")]
    imports: String,
    #[serde(default, deserialize_with = "string_or_null")]
    context: String,
    // Optional here so that a misspelt `statment` is named ("did you mean") rather than
    // reported as a missing `statement`; `try_from` requires both.
    #[serde(default)]
    statement: Option<String>,
    #[serde(default)]
    proof: Option<String>,
    #[serde(default)]
    locally_correct: Option<bool>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl TryFrom<RawNode> for NodeLine {
    type Error = String;

    fn try_from(r: RawNode) -> Result<Self, String> {
        for key in r.extra.keys() {
            if let Some(known) = misspelt_field(key) {
                return Err(format!(
                    "unknown field `{key}`, did you mean `{known}`? (node fields: {})",
                    NODE_FIELDS.join(", ")
                ));
            }
            if is_output_field(key) {
                return Err(format!(
                    "unknown field `{key}`: the output line writes `{key}` itself; rename it"
                ));
            }
        }
        let required = |v: Option<String>, name: &str| {
            v.ok_or_else(|| {
                format!(
                    "missing field `{name}` (node fields: {})",
                    NODE_FIELDS.join(", ")
                )
            })
        };
        Ok(NodeLine {
            id: r.id,
            imports: r.imports,
            context: r.context,
            statement: required(r.statement, "statement")?,
            proof: required(r.proof, "proof")?,
            locally_correct: r.locally_correct,
            extra: r.extra,
        })
    }
}

/// The node field `key` looks like a misspelling of: the same but for case, or within a small
/// edit distance (1 for names of five letters or fewer, 2 above; `id` only by case, so that
/// `idx` or `uid` stay the caller's).
fn misspelt_field(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    NODE_FIELDS.into_iter().find(|f| {
        if lower == *f {
            return true;
        }
        let limit = match f.len() {
            0..=2 => return false,
            3..=5 => 1,
            _ => 2,
        };
        edit_distance(&lower, f) <= limit
    })
}

/// Levenshtein distance with adjacent transpositions (optimal string alignment), by chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// `imports`: a string, a list of strings (one `Require` sentence each, joined by newlines), or
/// null.
fn imports_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                other => Err(serde::de::Error::custom(format!(
                    "\"imports\" must be a string or a list of strings, not a list holding {other}"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.join("\n")),
        other => Err(serde::de::Error::custom(format!(
            "\"imports\" must be a string or a list of strings, not {other}"
        ))),
    }
}

/// A string, or null for "".
fn string_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// What a node's output line repeats of it: its id and the caller's own fields.
#[derive(Clone, Debug, Default)]
pub(crate) struct Echo {
    pub id: Value,
    pub extra: Map<String, Value>,
}

/// An output line's object: the verdict fields of `line`, then the node's own fields.
pub(crate) fn with_extra(mut line: Value, extra: &Map<String, Value>) -> Value {
    if let Value::Object(o) = &mut line {
        for (k, v) in extra {
            o.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    line
}

fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match v {
        serde_json::Value::String(_) | serde_json::Value::Number(_) => Ok(v),
        other => Err(serde::de::Error::custom(format!(
            "\"id\" must be a string or a number, not {other}"
        ))),
    }
}

/// An id as output lines and the solver name it: a string as it is, a number as written.
pub(crate) fn id_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The ids of a file so far: a second node with the same id is bad input.
#[derive(Default)]
pub(crate) struct SeenIds(HashSet<String>);

impl SeenIds {
    /// `Err` names the id when it was seen before.
    pub(crate) fn admit(&mut self, id: &serde_json::Value) -> Result<String, String> {
        let key = id_key(id).ok_or("\"id\" must be a string or a number")?;
        if self.0.insert(key.clone()) {
            Ok(key)
        } else {
            Err(format!("duplicate node id '{key}'"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_fields_pass_through_and_misspellings_are_refused() {
        let n: NodeLine = serde_json::from_str(
            r#"{"id":"a","statement":"s","proof":"p","custom_id":"x-1","idx":3,"ctx_note":null,
                "imports":["Require Import Arith.","Require Import Lia."],"context":null}"#,
        )
        .unwrap();
        assert_eq!(n.imports, "Require Import Arith.\nRequire Import Lia.");
        assert_eq!(n.context, "");
        assert_eq!(
            n.extra.keys().collect::<Vec<_>>(),
            ["custom_id", "idx", "ctx_note"]
        );
        let line = with_extra(
            serde_json::json!({"id": "a", "verdict": "proved"}),
            &n.extra,
        );
        assert_eq!(line["custom_id"], "x-1");
        assert_eq!(line["verdict"], "proved");
        for (field, hint) in [
            ("contxt", "context"),
            ("Context", "context"),
            ("statment", "statement"),
            ("staement", "statement"),
            ("prof", "proof"),
            ("proofs", "proof"),
            ("import", "imports"),
            ("ID", "id"),
            ("locally_corect", "locally_correct"),
        ] {
            let text = format!(r#"{{"id":1,"statement":"s","proof":"p","{field}":""}}"#);
            let e = serde_json::from_str::<NodeLine>(&text)
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.starts_with(&format!("unknown field `{field}`, did you mean `{hint}`?")),
                "{field}: {e}"
            );
        }
        let e = serde_json::from_str::<NodeLine>(
            r#"{"id":1,"statement":"s","proof":"p","verdict":"x"}"#,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("output line writes `verdict`"), "{e}");
        // Nor may a node's own field stand for what the checker found.
        for field in ["universe_constraints", "replacements", "axioms"] {
            let text = format!(r#"{{"id":1,"statement":"s","proof":"p","{field}":[]}}"#);
            let e = serde_json::from_str::<NodeLine>(&text)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(&format!("output line writes `{field}`")), "{e}");
        }
        for bad in [
            r#"{"id":1,"statement":"s","proof":"p","imports":3}"#,
            r#"{"id":1,"statement":"s","proof":"p","imports":["a",1]}"#,
        ] {
            let e = serde_json::from_str::<NodeLine>(bad)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("\"imports\" must be"), "{e}");
        }
    }

    #[test]
    fn ids_are_strings_or_numbers_and_name_one_node() {
        let ok: NodeLine =
            serde_json::from_str(r#"{"id":7,"statement":"s","proof":"p","locally_correct":true}"#)
                .unwrap();
        assert_eq!(id_key(&ok.id).as_deref(), Some("7"));
        for bad in [
            r#"{"id":null,"statement":"s","proof":"p"}"#,
            r#"{"id":[1],"statement":"s","proof":"p"}"#,
        ] {
            let e = serde_json::from_str::<NodeLine>(bad)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("must be a string or a number"), "{e}");
        }
        let mut seen = SeenIds::default();
        assert_eq!(seen.admit(&serde_json::json!("a")), Ok("a".to_string()));
        assert_eq!(seen.admit(&serde_json::json!(1)), Ok("1".to_string()));
        assert_eq!(
            seen.admit(&serde_json::json!("1")),
            Err("duplicate node id '1'".to_string())
        );
    }
}

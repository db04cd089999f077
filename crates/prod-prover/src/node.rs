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
//!
//! Read here ([`NodeLine`], [`parse_line`], [`read_node_lines`], [`read_nodes`]: a node with its
//! proof parsed in the prover's language, as the checker takes it) and written here
//! ([`echo_json`], [`verdict_json`]: the verdict's [`VerdictLine`] and the node's own fields),
//! so that every command and the service read and write one form.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

use prod_check::{CheckRequest, Verdict, VerdictLine};
use prod_core::{ConditionalProof, ProofLanguage};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// The fields of a node (what [`NodeLine`] reads).
pub const NODE_FIELDS: [&str; 6] = [
    "id",
    "imports",
    "context",
    "statement",
    "proof",
    "locally_correct",
];

/// The fields an output line writes besides the node's id (`prod check --json`, `prod
/// serve`'s results and streamed lines): the verdict line's ([`VerdictLine`]) and
/// the service's own.
fn is_output_field(key: &str) -> bool {
    key != "id"
        && (VerdictLine::FIELDS.contains(&key) || ["index", "globally_correct"].contains(&key))
}

/// One input node.
#[derive(Deserialize)]
#[serde(try_from = "RawNode")]
pub struct NodeLine {
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
pub struct Echo {
    pub id: Value,
    pub extra: Map<String, Value>,
}

/// An output line's object: the verdict fields of `line`, then the node's own fields.
pub fn with_extra(mut line: Value, extra: &Map<String, Value>) -> Value {
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
pub fn id_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The ids of a file so far: a second node with the same id is bad input.
#[derive(Default)]
pub struct SeenIds(HashSet<String>);

impl SeenIds {
    /// `Err` names the id when it was seen before.
    pub fn admit(&mut self, id: &serde_json::Value) -> Result<String, String> {
        let key = id_key(id).ok_or("\"id\" must be a string or a number")?;
        if self.0.insert(key.clone()) {
            Ok(key)
        } else {
            Err(format!("duplicate node id '{key}'"))
        }
    }
}

/// A node read from the input: its id and own fields (repeated in its output line) and its
/// request, or the verdict it already has (a proof that is not a conditional proof is the
/// model's fault, not unreadable input).
pub type InputNode = (Echo, Result<CheckRequest, Verdict>);

/// A node as the checker takes it (its `locally_correct`, if any, is the tree solver's to
/// read), its proof parsed in the prover's language `lang` (markers only outside its strings
/// and comments).
pub fn node_input(n: NodeLine, lang: &dyn ProofLanguage) -> InputNode {
    let req = ConditionalProof::parse_with(&n.proof, lang)
        .map(|p| CheckRequest::new(&n.imports, &n.context, &n.statement, p))
        .map_err(|e| Verdict::rejected(format!("not a conditional proof: {e}")));
    (
        Echo {
            id: n.id,
            extra: n.extra,
        },
        req,
    )
}

/// Line `n` of `file` as a node (`None` for a blank line), its id admitted into `seen`; the
/// error names the file and the line.
pub fn parse_line(
    (file, n): (&Path, usize),
    bytes: Vec<u8>,
    seen: &mut SeenIds,
) -> Result<Option<NodeLine>, String> {
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("{}: line {n} is not UTF-8", file.display()))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let node: NodeLine = serde_json::from_str(&text)
        .map_err(|e| format!("{}: line {n} is not a node: {e}", file.display()))?;
    seen.admit(&node.id)
        .map_err(|e| format!("{}: line {n}: {e}", file.display()))?;
    Ok(Some(node))
}

/// Every node of `file` (`-`: stdin) with its line number (1-based), blank lines skipped;
/// `Err` names the line.
pub fn read_node_lines(file: &Path) -> Result<Vec<(usize, NodeLine)>, String> {
    let reader: Box<dyn BufRead> = if file == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file)
                .map_err(|e| format!("cannot open {}: {e}", file.display()))?,
        ))
    };
    node_lines(reader, file).collect()
}

/// The nodes of `reader` as its lines arrive, each with its (1-based) line number, blank lines
/// skipped, ids admitted one by one; an error names `file` and the line.
fn node_lines<'a>(
    reader: impl BufRead + 'a,
    file: &'a Path,
) -> impl Iterator<Item = Result<(usize, NodeLine), String>> + 'a {
    let mut seen = SeenIds::default();
    reader
        .split(b'\n')
        .enumerate()
        .filter_map(move |(i, line)| {
            let n = i + 1;
            let node = line
                .map_err(|e| format!("{}: cannot read line {n}: {e}", file.display()))
                .and_then(|bytes| parse_line((file, n), bytes, &mut seen));
            node.transpose().map(|r| r.map(|node| (n, node)))
        })
}

/// The nodes of `file` (`-`: stdin) as the checker takes them ([`node_input`]); `Err` names
/// the line.
pub fn read_nodes(file: &Path, lang: &dyn ProofLanguage) -> Result<Vec<InputNode>, String> {
    Ok(read_node_lines(file)?
        .into_iter()
        .map(|(_, n)| node_input(n, lang))
        .collect())
}

/// A node's output object: [`verdict_json`] followed by the node's own fields.
pub fn echo_json(e: &Echo, v: &Verdict, t: Duration, prover: Option<&str>) -> Value {
    with_extra(verdict_json(&e.id, v, t, prover), &e.extra)
}

/// One output object (`prod check --json`'s line, `prod serve`'s result): the verdict's
/// [`VerdictLine`], the one JSON form `prod tree solve --verdicts` reads back. `prover` (`coq
/// 8.16.1`, `rocq 9.2`, `isabelle`) is the verdict's provenance, where it is known.
pub fn verdict_json(id: &Value, v: &Verdict, t: Duration, prover: Option<&str>) -> Value {
    VerdictLine::new(id.clone(), v, t, prover).to_json()
}

/// Nodes read from standard input on a thread of their own, each sent as soon as its line
/// has arrived (blank lines skipped), in `lang`; a line that is not a node is sent as its
/// error and ends the reading, as does the receiver going away.
pub fn read_stdin_nodes(
    lang: &'static dyn ProofLanguage,
) -> std::sync::mpsc::Receiver<Result<InputNode, String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for node in node_lines(std::io::stdin().lock(), Path::new("-")) {
            let last = node.is_err();
            if tx.send(node.map(|(_, n)| node_input(n, lang))).is_err() || last {
                return;
            }
        }
    });
    rx
}

/// The next batch of a stream ([`read_stdin_nodes`]): the first node waited for, then whatever
/// else has already arrived, at most `cap` in all; `None` when the stream has ended. A line that
/// is not a node ends the batch: the nodes before it, and its error.
pub fn next_batch(
    rx: &std::sync::mpsc::Receiver<Result<InputNode, String>>,
    cap: usize,
) -> Option<(Vec<InputNode>, Option<String>)> {
    let mut next = Some(rx.recv().ok()?);
    let mut nodes = vec![];
    while let Some(item) = next.take() {
        match item {
            Ok(n) => nodes.push(n),
            Err(e) => return Some((nodes, Some(e))),
        }
        if nodes.len() < cap {
            next = rx.try_recv().ok();
        }
    }
    Some((nodes, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COQ: &dyn ProofLanguage = &prod_coq::CoqLanguage;

    #[test]
    fn a_batch_is_what_has_arrived_up_to_its_cap_and_ends_at_a_bad_line() {
        let node = |i: i64| -> InputNode {
            let echo = Echo {
                id: i.into(),
                ..Default::default()
            };
            (echo, Err(Verdict::infra("x")))
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for item in [
            Ok(node(1)),
            Ok(node(2)),
            Ok(node(3)),
            Err("line 4".into()),
            Ok(node(5)),
        ] {
            tx.send(item).unwrap();
        }
        drop(tx);
        let ids = |b: &[InputNode]| b.iter().map(|n| n.0.id.clone()).collect::<Vec<_>>();
        let (b, e) = next_batch(&rx, 2).unwrap();
        assert_eq!((ids(&b), e), (vec![1.into(), 2.into()], None));
        let (b, e) = next_batch(&rx, 2).unwrap();
        assert_eq!((ids(&b), e), (vec![3.into()], Some("line 4".to_string())));
        let (b, e) = next_batch(&rx, 2).unwrap();
        assert_eq!((ids(&b), e), (vec![5.into()], None));
        assert!(next_batch(&rx, 2).is_none());
    }

    #[test]
    fn input_errors_name_the_line_and_bad_proofs_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.jsonl");
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"Lemma a : True.\",\"proof\":\"<no_invoke> exact I.\"}\n\n\
             {\"id\":\"b\",\"statement\":\"Lemma b : True.\",\"proof\":\"exact I.\"}\n",
        )
        .unwrap();
        let nodes = read_nodes(&p, COQ).unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(nodes[0].1.is_ok());
        assert_eq!(nodes[1].1.as_ref().unwrap_err().kind().as_str(), "rejected");
        assert_eq!(
            read_node_lines(&p)
                .unwrap()
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>(),
            [1, 3]
        );
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"x\",\"proof\":\"<no_invoke>\"}\n{\"id\":\"b\"}\n",
        )
        .unwrap();
        let e = read_nodes(&p, COQ).unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        // A misspelt field is an error, never a silently empty context.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"contxt\":\"x\",\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let e = read_nodes(&p, COQ).unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("unknown field `contxt`, did you mean `context`?"),
            "{e}"
        );
        // Other fields are the caller's: kept, and repeated in the output line.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"custom_id\":\"k-7\",\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let nodes = read_nodes(&p, COQ).unwrap();
        let j = echo_json(&nodes[0].0, &Verdict::infra("x"), Duration::ZERO, None);
        assert_eq!(
            (&j["id"], &j["custom_id"], &j["verdict"]),
            (
                &serde_json::json!("a"),
                &serde_json::json!("k-7"),
                &serde_json::json!("infra")
            )
        );
        assert!(read_nodes(&dir.path().join("missing.jsonl"), COQ).is_err());
        // Output lines and `tree solve --verdicts` are keyed by id: one id, one node.
        std::fs::write(
            &p,
            "{\"id\":1,\"statement\":\"s\",\"proof\":\"<no_invoke>\"}\n\
             {\"id\":\"1\",\"statement\":\"t\",\"proof\":\"<no_invoke>\"}\n",
        )
        .unwrap();
        let e = read_nodes(&p, COQ).unwrap_err();
        assert!(e.contains("line 2: duplicate node id '1'"), "{e}");
        // `tree solve`'s lines (with `locally_correct`) are `check`'s input as they are.
        std::fs::write(
            &p,
            "{\"id\":\"a\",\"statement\":\"s\",\"proof\":\"<no_invoke>\",\"locally_correct\":true}\n",
        )
        .unwrap();
        assert_eq!(read_nodes(&p, COQ).unwrap().len(), 1);
    }

    #[test]
    fn output_has_exactly_the_interface_keys() {
        let v = Verdict::Failed {
            step: 2,
            message: "no".into(),
        };
        let echo = Echo {
            id: serde_json::json!("n1"),
            ..Echo::default()
        };
        let j = echo_json(&echo, &v, Duration::from_millis(7), Some("coq 8.16.1"));
        let mut keys: Vec<&str> = j.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["id", "message", "prover", "time_ms", "verdict"]);
        assert_eq!(j["verdict"], "failed");
        assert_eq!(j["time_ms"], 7);
    }

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

//! The one node schema of `prod check`, `prod tree solve`, `prod queue submit` and `prod serve`:
//! `{"id", "imports"?, "context"?, "statement", "proof", "locally_correct"?}`. Unknown fields are
//! an error everywhere (a misspelt `contxt` must not silently check with an empty context); an
//! id is a string or a number and names one node of a file (output lines, `--verdicts` and the
//! solver's lemma lookup are keyed by it). `locally_correct` is what `tree solve` reads; `check`
//! decides it itself and ignores the field, so that one file serves both.

use std::collections::HashSet;

use serde::{Deserialize, Deserializer};

/// One input node.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeLine {
    #[serde(deserialize_with = "string_or_number")]
    pub id: serde_json::Value,
    #[serde(default)]
    pub imports: String,
    #[serde(default)]
    pub context: String,
    pub statement: String,
    pub proof: String,
    #[serde(default)]
    pub locally_correct: Option<bool>,
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

//! The theorems of a run: what the policy sees and what the final check needs, read from a
//! dataset split with full contexts, and the dataset's statements (what makes a lemma novel).

use std::collections::HashSet;
use std::path::Path;

use prod_core::ProofLanguage;
use serde::{Deserialize, Serialize};

/// A theorem of the run: what the policy sees and what the final check needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Theorem {
    pub id: String,
    /// The full, checkable context (imports included).
    pub context: String,
    pub statement: String,
    /// Ground-truth conditional proof (training: joins level 0).
    #[serde(default)]
    pub ground_truth: Option<String>,
    /// Depth of the ground-truth proof tree (Fig. 5 rows).
    #[serde(default)]
    pub depth: Option<u32>,
    /// Enclosing Sections/Modules (the context ends inside them).
    #[serde(default)]
    pub scope: Vec<String>,
    #[serde(default)]
    pub qualified_name: String,
    /// Source file (the report's per-theorem table), when known.
    #[serde(default)]
    pub file: String,
}

/// Read `split` of a dataset directory (docs/dataset.md) with full contexts from
/// `sources.jsonl`; `limit` theorems drawn with a seeded shuffle (all when `None`).
/// Theorems without a name (`Goal`) are left out: assembly needs a name.
pub fn load_theorems(
    dir: &Path,
    split: &str,
    limit: Option<usize>,
    seed: u64,
) -> Result<Vec<Theorem>, String> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let path = dir.join(format!("{split}.jsonl"));
    let examples = crate::dataset::read_examples(&path)?;
    let sources = crate::dataset::read_sources(dir)?;
    let mut out = Vec::new();
    for e in examples {
        if e.name.is_empty() {
            continue;
        }
        let Some(context) = sources.get(&e.logical_path).and_then(|s| e.full_context(s)) else {
            return Err(format!(
                "{}: example {}: its file is not in sources.jsonl",
                path.display(),
                e.id
            ));
        };
        out.push(Theorem {
            id: e.id.clone(),
            context,
            statement: e.statement.clone(),
            ground_truth: Some(e.conditional_proof.clone()),
            depth: Some(e.depth),
            scope: e.scope.clone(),
            qualified_name: e.qualified_name.clone(),
            file: e.file.clone(),
        });
    }
    if let Some(n) = limit {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        out.shuffle(&mut rng);
        out.truncate(n);
    }
    Ok(out)
}

/// [`load_theorems`], where a split without a named theorem is an error (the user's: a wrong
/// split or dataset).
pub fn load_named_theorems(
    dir: &Path,
    split: &str,
    limit: Option<usize>,
    seed: u64,
) -> Result<Vec<Theorem>, String> {
    let theorems = load_theorems(dir, split, limit, seed)?;
    if theorems.is_empty() {
        return Err(format!(
            "{}: split {split:?} has no named theorems",
            dir.display()
        ));
    }
    Ok(theorems)
}

/// Normalised statements of every theorem and ground-truth lemma of the dataset (train, val,
/// test): a proposed lemma outside this set is *novel* (paper §4.3: 37.7%).
pub fn dataset_statements(dir: &Path, lang: &dyn ProofLanguage) -> HashSet<String> {
    let mut out = HashSet::new();
    for split in ["train", "val", "test"] {
        if let Ok(es) = crate::dataset::read_examples(&dir.join(format!("{split}.jsonl"))) {
            for e in es {
                out.insert(lang.normalize_statement(&e.statement));
                for l in &e.proposed_lemmas {
                    out.insert(lang.normalize_statement(l));
                }
            }
        }
    }
    out
}

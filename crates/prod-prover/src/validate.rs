//! A dataset's ground truths checked by the real prover (`prod dataset validate`, `prod bench
//! libraries`): a seeded sample of examples, each checked in its full context, tallied by
//! verdict kind; or, with `--trees`, ground-truth proof trees — the root example and,
//! recursively, the examples of the lemmas it proposes (same file), all checked in the root's
//! context (paper §2), then global correctness, assembly (child first, `hammer.` steps replaced
//! by the tactic the checker found) and the cold final check of context + assembled proof.
//! What was found comes back as data; the progress and the printing are the caller's.

use std::collections::HashMap;
use std::path::Path;

use prod_check::{CheckRequest, Checker, Verdict, VerdictKind};
use prod_check_coq::CoqChecker;
use prod_core::ConditionalProof;
use prod_library::dataset::{self, Example};
use serde::{Deserialize, Serialize};

use crate::{BatchProgress, CheckedNode, CoqFinal, FinalCheck, FinalProof, Forest, ProverKind};

/// Examples (or ground-truth trees) `prod dataset validate` checks unless told otherwise.
pub const DEFAULT_SAMPLE: usize = 100;

/// Checks by verdict kind.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Counts {
    pub checked: usize,
    pub proved: usize,
    pub failed: usize,
    pub timed_out: usize,
    pub rejected: usize,
    pub infra: usize,
}

impl Counts {
    /// The counts as `prod dataset validate` prints them without `--json`.
    pub fn text(&self) -> String {
        format!(
            "checked {}: proved {}, failed {}, timed out {}, rejected {}, infra {}",
            self.checked, self.proved, self.failed, self.timed_out, self.rejected, self.infra
        )
    }

    pub fn add(&mut self, v: &Verdict) {
        self.checked += 1;
        match v.kind() {
            VerdictKind::Proved => self.proved += 1,
            VerdictKind::Failed => self.failed += 1,
            VerdictKind::TimedOut => self.timed_out += 1,
            VerdictKind::Rejected => self.rejected += 1,
            VerdictKind::Infra => self.infra += 1,
        }
    }
}

/// What `prod dataset validate` checks with: the examples of `split` in `dir` with their full
/// contexts, and the Coq checker of `cfg` with the dataset's own bindings (a user's project
/// compiled into `dir/lib/`) and, with `allow_context_axioms`, the constants the examples'
/// contexts admit allowed by name. An unknown split, an Isabelle dataset (checked with Coq only
/// here) or an unreadable folder is bad input; a checker that does not start, a failure.
pub fn open(
    dir: &Path,
    split: &str,
    mut cfg: prod_check_coq::CoqCheckConfig,
    load_paths: &[prod_check_coq::LoadPathBinding],
    allow_context_axioms: bool,
) -> Result<(Vec<Example>, CoqChecker), crate::SetupError> {
    use crate::SetupError::{BadInput, Failure};
    if !["train", "val", "test", "rl", "sft"].contains(&split) {
        return Err(BadInput(format!(
            "--split {split:?}: expected train, val, test, rl or sft"
        )));
    }
    if dataset::read_stats(dir).is_ok_and(|s| s.prover == "isabelle") {
        let m = "an Isabelle dataset; `prod dataset validate` checks with the Coq checker only";
        return Err(BadInput(format!("{}: {m}", dir.display())));
    }
    let examples = with_full_contexts(dir, &[split]).map_err(BadInput)?;
    crate::add_load_paths(&mut cfg, load_paths, Some(dir)).map_err(BadInput)?;
    if allow_context_axioms {
        let mut names: Vec<String> = examples
            .iter()
            .flat_map(|e| e.context_axioms.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        cfg.allowed_axioms.extend(names);
    }
    let checker =
        CoqChecker::new(cfg).map_err(|e| Failure(format!("cannot start the Coq checker: {e}")))?;
    Ok((examples, checker))
}

/// `n` of `items` drawn with `seed` (all of them, shuffled, when there are fewer).
pub fn sample<T>(mut items: Vec<T>, n: usize, seed: u64) -> Vec<T> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    items.shuffle(&mut rng);
    items.truncate(n);
    items
}

/// The examples of `splits` in `dir`, each with its full context from sources.jsonl (checking
/// needs it; the inline `context` may be truncated).
pub fn with_full_contexts(dir: &Path, splits: &[&str]) -> Result<Vec<Example>, String> {
    let sources = dataset::read_sources(dir)?;
    let mut out = Vec::new();
    for split in splits {
        let path = dir.join(format!("{split}.jsonl"));
        for mut e in dataset::read_examples(&path)? {
            match sources.get(&e.logical_path).and_then(|s| e.full_context(s)) {
                Some(c) => e.context = c,
                None => {
                    return Err(format!(
                        "{}: example {}: its file is not in sources.jsonl",
                        path.display(),
                        e.id
                    ))
                }
            }
            out.push(e);
        }
    }
    Ok(out)
}

/// What checking a sample of ground-truth examples found.
#[derive(Default)]
pub struct SampleOutcome {
    pub counts: Counts,
    /// Every example that was not proved (context failures excluded).
    pub misses: Vec<Miss>,
    /// (file, reason) for every example whose context did not load.
    pub context_failures: Vec<(String, String)>,
    /// (proved, checked) among the examples with `hammer.` steps.
    pub hammer: (usize, usize),
}

/// An example that was not proved.
pub struct Miss {
    /// `id (file:line): verdict as JSON`.
    pub line: String,
    pub verdict: Verdict,
}

/// Check `chosen` in their full contexts. Bad conditional-proof text in the data is an error.
pub fn check_sample(
    chosen: &[Example],
    checker: &dyn Checker,
    progress: &dyn BatchProgress,
) -> Result<SampleOutcome, String> {
    let mut requests = Vec::with_capacity(chosen.len());
    for e in chosen {
        let cp = ConditionalProof::parse_with(&e.conditional_proof, &prod_coq::CoqLanguage)
            .map_err(|err| format!("example {}: conditional proof: {err}", e.id))?;
        requests.push(CheckRequest::new("", &e.context, &e.statement, cp));
    }
    let verdicts = checker.check_batch(&requests, &|_, v| progress.record(v));
    progress.finish();
    let mut out = SampleOutcome::default();
    for (e, v) in chosen.iter().zip(verdicts) {
        out.counts.add(&v);
        if e.replaced_steps > 0 {
            out.hammer.1 += 1;
            out.hammer.0 += usize::from(v.kind() == VerdictKind::Proved);
        }
        if let Some(reason) = crate::context_failure(&v) {
            out.context_failures
                .push((e.logical_path.clone(), reason.to_string()));
        } else if v.kind() != VerdictKind::Proved {
            out.misses.push(Miss {
                line: format!(
                    "{} ({}:{}): {}",
                    e.id,
                    e.file,
                    e.line,
                    serde_json::to_string(&v).unwrap_or_default()
                ),
                verdict: v,
            });
        }
    }
    Ok(out)
}

/// A ground-truth tree that was not proved: its root, its size, the verdict it counts as and,
/// when a node was not locally correct, that node and its own verdict.
pub struct TreeMiss {
    pub root: String,
    pub nodes: usize,
    pub verdict: Verdict,
    pub node: Option<(String, Verdict)>,
}

/// What checking ground-truth trees found.
#[derive(Default)]
pub struct TreesOutcome {
    pub counts: Counts,
    pub misses: Vec<TreeMiss>,
}

/// The roots of the ground-truth trees to check: `n` of the named theorems in T_tree among
/// `examples`, drawn with `seed`.
pub fn tree_roots(examples: Vec<Example>, n: usize, seed: u64) -> Vec<Example> {
    let named = examples
        .into_iter()
        .filter(|e| e.in_tree && !e.name.is_empty())
        .collect();
    sample(named, n, seed)
}

/// The ground-truth trees of `roots` checked end to end; the lemmas' own examples are read
/// from every split of `dir`.
pub fn check_trees(
    dir: &Path,
    roots: &[Example],
    checker: &CoqChecker,
    progress: &dyn BatchProgress,
) -> TreesOutcome {
    // Lemmas of a test root are peeled theorems of the same file; they are in T_tree, so their
    // own examples are in the split file whose theorems they are, or in train/val/test.
    let mut by_key: HashMap<(String, String), Example> = HashMap::new();
    for split in ["train", "val", "test"] {
        if let Ok(es) = dataset::read_examples(&dir.join(format!("{split}.jsonl"))) {
            // Only statements matter here: lemma nodes are checked in the root's context.
            for e in es {
                by_key.insert((e.logical_path.clone(), e.statement.trim().to_string()), e);
            }
        }
    }
    let mut out = TreesOutcome::default();
    for root in roots {
        let (tree, missing) = ground_truth_tree(root, &by_key);
        let (verdict, node) = match missing {
            Some(l) => (
                Verdict::infra(format!(
                    "lemma of the ground-truth tree has no example: {l}"
                )),
                None,
            ),
            None => check_tree(root, &tree, checker),
        };
        if verdict.kind() != VerdictKind::Proved {
            out.misses.push(TreeMiss {
                root: root.id.clone(),
                nodes: tree.len(),
                verdict: verdict.clone(),
                node,
            });
        }
        out.counts.add(&verdict);
        progress.record(&verdict);
    }
    progress.finish();
    out
}

/// The root first, then every proposed lemma's own example, breadth first; a lemma without an
/// example is returned apart.
fn ground_truth_tree<'a>(
    root: &'a Example,
    by_key: &'a HashMap<(String, String), Example>,
) -> (Vec<&'a Example>, Option<String>) {
    let mut tree: Vec<&Example> = vec![root];
    let mut missing = None;
    let mut k = 0;
    while k < tree.len() {
        for l in &tree[k].proposed_lemmas {
            match by_key.get(&(root.logical_path.clone(), l.trim().to_string())) {
                Some(ex) if !tree.iter().any(|t| t.id == ex.id) => tree.push(ex),
                Some(_) => {}
                None => missing = Some(l.clone()),
            }
        }
        k += 1;
    }
    (tree, missing)
}

/// One tree: every node checked in the root's context, then global correctness, assembly and
/// the cold final check. A node that is not locally correct decides the tree's count with its
/// own kind (and is returned beside it).
fn check_tree(
    root: &Example,
    tree: &[&Example],
    checker: &CoqChecker,
) -> (Verdict, Option<(String, Verdict)>) {
    let mut requests = Vec::new();
    for e in tree {
        match ConditionalProof::parse_with(&e.conditional_proof, &prod_coq::CoqLanguage) {
            Ok(cp) => requests.push(CheckRequest::new("", &root.context, &e.statement, cp)),
            Err(err) => return (Verdict::rejected(format!("{}: {err}", e.id)), None),
        }
    }
    let verdicts = checker.check_batch(&requests, &|_, _| {});
    if let Some((e, v)) = tree.iter().zip(&verdicts).find(|(_, v)| !v.is_proved()) {
        return (v.clone(), Some((e.id.clone(), v.clone())));
    }
    let checked = tree
        .iter()
        .zip(&requests)
        .zip(&verdicts)
        .map(|((e, req), v)| CheckedNode {
            id: e.id.clone(),
            context: root.context.clone(),
            statement: e.statement.clone(),
            proof: &req.proof,
            verdict: Some(v),
        });
    let forest = Forest::solve(checked, ProverKind::Coq.language());
    let assembled = match forest.assemble(0) {
        Ok(p) => p,
        Err(e) => {
            let v = Verdict::Failed {
                step: 0,
                message: format!("assembly: {e}"),
            };
            return (v, None);
        }
    };
    let v = CoqFinal(checker.config().clone())
        .final_check(&FinalProof {
            imports: "",
            context: &root.context,
            scope: &root.scope,
            qualified_name: &root.qualified_name,
            statement: &root.statement,
            assembled: &assembled.proof,
            hammer_replaced: assembled.hammer_replaced,
            timeout: prod_check::TimeLimits::single_final(),
        })
        .0;
    (v, None)
}

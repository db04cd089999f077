//! Assembly (paper §2): from a globally correct root, list the statements of one valid proof tree
//! with their conditional proofs in child-first order and drop the lemma proposals — the result
//! is a complete proof the prover accepts without any admitted lemma.
//!
//! The tree is the one of [`Solution`]'s witnesses (minimal height). Each lemma appears once
//! (deduplicated by goal, i.e. normalised statement in the same context) under a unique name:
//! the name its first proposer used when that is free, else `name_2`, `name_3`, …; every
//! proof that refers to a renamed lemma is rewritten with [`ProofLanguage::rename_references`].

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::language::ProofLanguage;
use crate::tree::{GlobalVerdict, GoalId, Node, Solution};

/// One lemma (or the root) of an assembled proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AssembledLemma {
    /// Index of the node whose proof is used.
    pub node: usize,
    pub node_id: String,
    pub name: String,
    /// The statement under its final name.
    pub statement: String,
    /// The proof with `<invoke>`s removed and references renamed.
    pub proof: String,
}

/// A complete proof: `lemmas` in child-first order, the root last.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AssembledProof {
    pub lemmas: Vec<AssembledLemma>,
    /// The rendered text (context not included).
    pub text: String,
}

impl AssembledProof {
    pub fn root(&self) -> &AssembledLemma {
        self.lemmas
            .last()
            .expect("an assembled proof has at least its root")
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    #[error("node {0} does not exist")]
    NoSuchNode(usize),
    #[error("node '{id}' is not globally correct ({verdict:?})")]
    NotGloballyCorrect { id: String, verdict: GlobalVerdict },
    #[error("statement of node '{id}' has no lemma name: {statement}")]
    Unnamed { id: String, statement: String },
}

/// Assemble the complete proof of `root` (paper §2). `nodes` and `solution` must come from the
/// same [`crate::tree::solve`] call.
pub fn assemble(
    nodes: &[Node],
    solution: &Solution,
    root: usize,
    lang: &dyn ProofLanguage,
) -> Result<AssembledProof, AssemblyError> {
    let root_node = nodes.get(root).ok_or(AssemblyError::NoSuchNode(root))?;
    let verdict = solution.verdict(root);
    if verdict != GlobalVerdict::Correct {
        return Err(AssemblyError::NotGloballyCorrect {
            id: root_node.id.clone(),
            verdict,
        });
    }
    let order = child_first(solution, root);
    let root_name = lang
        .lemma_name(&root_node.statement)
        .ok_or_else(|| unnamed(root_node, &root_node.statement))?;
    let mut taken = words_in_use(nodes, &order, &root_node.context, lang);
    taken.insert(root_name.clone());
    let goal_name = lemma_names(nodes, solution, &order, taken, lang)?;
    let lemmas = order
        .iter()
        .map(|&(goal, node)| {
            let name = goal.map_or_else(|| root_name.clone(), |g| goal_name[&g].clone());
            assembled_lemma(&nodes[node], node, name, solution, &goal_name, lang)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let text = lemmas
        .iter()
        .map(|l| lang.render_proved(&l.statement, &l.proof))
        .collect::<Vec<_>>()
        .join("\n\n")
        + "\n";
    Ok(AssembledProof { lemmas, text })
}

fn unnamed(n: &Node, statement: &str) -> AssemblyError {
    AssemblyError::Unnamed {
        id: n.id.clone(),
        statement: statement.to_string(),
    }
}

/// The witness tree of `root` in child-first order: (lemma goal, node), each lemma goal once,
/// the root last (`None`), even if some lemma in its tree states the same thing (that lemma is
/// then proved separately, under another name). Iterative: trees may be deep.
fn child_first(solution: &Solution, root: usize) -> Vec<(Option<GoalId>, usize)> {
    let mut order: Vec<(Option<GoalId>, usize)> = Vec::new();
    let mut done: HashSet<GoalId> = HashSet::new();
    let mut stack: Vec<(Option<GoalId>, usize, usize)> = vec![(None, root, 0)]; // (goal, node, next lemma)
    while let Some((goal, node, next)) = stack.last_mut() {
        let goals = solution.lemma_goals(*node);
        if *next < goals.len() {
            let g = goals[*next];
            *next += 1;
            if done.insert(g) {
                // Witnesses are definitely correct nodes proved strictly earlier: no cycle.
                let w = solution
                    .witness(g)
                    .expect("a correct node's lemmas have witnesses");
                stack.push((Some(g), w, 0));
            }
        } else {
            order.push((*goal, *node));
            stack.pop();
        }
    }
    order
}

/// Each lemma goal's final name: the name its first proposer used (walking parents before
/// children, so the root's choices win), made fresh against `taken`.
fn lemma_names(
    nodes: &[Node],
    solution: &Solution,
    order: &[(Option<GoalId>, usize)],
    mut taken: HashSet<String>,
    lang: &dyn ProofLanguage,
) -> Result<HashMap<GoalId, String>, AssemblyError> {
    let mut goal_name: HashMap<GoalId, String> = HashMap::new();
    for &(_, node) in order.iter().rev() {
        let n = &nodes[node];
        for (lemma, &g) in n.proof.lemmas().zip(solution.lemma_goals(node)) {
            if goal_name.contains_key(&g) {
                continue;
            }
            let wanted = lang.lemma_name(lemma).ok_or_else(|| unnamed(n, lemma))?;
            let mut name = wanted.clone();
            let mut k = 2;
            while taken.contains(&name) || !lang.is_identifier(&name) {
                name = format!("{wanted}_{k}");
                k += 1;
            }
            taken.insert(name.clone());
            goal_name.insert(g, name);
        }
    }
    Ok(goal_name)
}

/// Node `node`'s lemma in the file under `name`: its statement renamed, its proof with the
/// references to its own proposals renamed to their final names.
fn assembled_lemma(
    n: &Node,
    node: usize,
    name: String,
    solution: &Solution,
    goal_name: &HashMap<GoalId, String>,
    lang: &dyn ProofLanguage,
) -> Result<AssembledLemma, AssemblyError> {
    let mut renames: Vec<(String, String)> = Vec::new();
    for (lemma, lg) in n.proof.lemmas().zip(solution.lemma_goals(node)) {
        let old = lang.lemma_name(lemma).ok_or_else(|| unnamed(n, lemma))?;
        let new = goal_name[lg].clone();
        if old != new && !renames.iter().any(|(o, _)| *o == old) {
            renames.push((old, new));
        }
    }
    let text = n.proof.proof_text();
    let proof = if renames.is_empty() {
        text
    } else {
        lang.rename_references(&text, &renames)
    };
    let own = lang
        .lemma_name(&n.statement)
        .ok_or_else(|| unnamed(n, &n.statement))?;
    let statement = if own == name {
        n.statement.trim().to_string()
    } else {
        lang.rename_statement(&n.statement, &name)
    };
    Ok(AssembledLemma {
        node,
        node_id: n.id.clone(),
        name,
        statement,
        proof,
    })
}

/// The words a lemma of the assembled file must not be named: every word of the context and
/// of each statement and proof in the file, except a node's own declared name in its statement
/// and its own proposals' names in its proof (those references are renamed with the lemma). A
/// lemma declared before a node and named like a word that node uses would change what the
/// word means there (a lemma `false` before `Theorem t : if false then …`).
fn words_in_use(
    nodes: &[Node],
    order: &[(Option<GoalId>, usize)],
    context: &str,
    lang: &dyn ProofLanguage,
) -> HashSet<String> {
    let mut taken: HashSet<String> = lang.words(context).into_iter().collect();
    for &(_, node) in order {
        let n = &nodes[node];
        let own = lang.lemma_name(&n.statement);
        taken.extend(
            lang.words(&n.statement)
                .into_iter()
                .filter(|w| Some(w) != own.as_ref()),
        );
        let proposed: HashSet<String> = n
            .proof
            .lemmas()
            .filter_map(|l| lang.lemma_name(l))
            .collect();
        taken.extend(
            lang.words(&n.proof.proof_text())
                .into_iter()
                .filter(|w| !proposed.contains(w)),
        );
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditional::ConditionalProof;
    use crate::language::tests_support::ToyLanguage;
    use crate::tree::solve;

    fn node(id: &str, stmt: &str, proof: &str) -> Node {
        Node {
            id: id.into(),
            context: "ctx".into(),
            statement: stmt.into(),
            proof: ConditionalProof::parse_with(proof, &ToyLanguage).unwrap(),
            local: crate::tree::LocalVerdict::Correct,
        }
    }

    #[test]
    fn child_first_dedup_and_rename() {
        let nodes = [
            node("root", "Lemma r : R.", "<use_invoke> <invoke> Lemma a : A. </invoke> <invoke> Lemma b : B. </invoke> use a b."),
            // b's proof proposes A under another name: same goal, must be renamed to `a`.
            node("b", "Lemma b : B.", "<use_invoke> <invoke> Lemma aa : A. </invoke> use aa."),
            node("a", "Lemma x : A.", "<no_invoke> base."),
        ];
        let s = solve(&nodes, &ToyLanguage);
        let p = assemble(&nodes, &s, 0, &ToyLanguage).unwrap();
        let names: Vec<_> = p.lemmas.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "r"]);
        assert_eq!(p.lemmas[0].statement, "Lemma a : A.");
        assert_eq!(p.lemmas[1].proof, "  use a.");
        assert_eq!(
            p.text,
            "Lemma a : A.\nProof. base. Qed.\n\nLemma b : B.\nProof. use a. Qed.\n\nLemma r : R.\nProof. use a b. Qed.\n"
        );
    }

    #[test]
    fn clashing_names_get_fresh_ones() {
        let nodes = [
            node("root", "Lemma r : R.", "<use_invoke> <invoke> Lemma h : A. </invoke> <invoke> Lemma r : B. </invoke> use h r."),
            node("a", "Lemma h : A.", "<use_invoke> <invoke> Lemma h : C. </invoke> use h."),
            node("c", "Lemma h : C.", "<no_invoke> c."),
            node("b", "Lemma r : B.", "<no_invoke> b."),
        ];
        let s = solve(&nodes, &ToyLanguage);
        let p = assemble(&nodes, &s, 0, &ToyLanguage).unwrap();
        let got: Vec<_> = p
            .lemmas
            .iter()
            .map(|l| (l.name.as_str(), l.proof.trim()))
            .collect();
        assert_eq!(
            got,
            [
                ("h_2", "c."),
                ("h", "use h_2."),
                ("r_2", "b."),
                ("r", "use h r_2.")
            ]
        );
    }

    #[test]
    fn lemma_names_never_capture_a_word_of_the_file() {
        // The root's statement uses `false` and `length` (context constants); lemmas proposed
        // under those names are renamed, and so are the references to them.
        let nodes = [
            node("root", "Lemma r : if false then length else X.", "<use_invoke> <invoke> Lemma false : A. </invoke> <invoke> Lemma length : B. </invoke> use false length."),
            node("a", "Lemma false : A.", "<no_invoke> a."),
            node("b", "Lemma length : B.", "<no_invoke> b."),
        ];
        let s = solve(&nodes, &ToyLanguage);
        let p = assemble(&nodes, &s, 0, &ToyLanguage).unwrap();
        let names: Vec<_> = p.lemmas.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["false_2", "length_2", "r"]);
        assert_eq!(p.lemmas[2].proof.trim(), "use false_2 length_2.");
        // A word of the context is taken too.
        let mut nodes = nodes.to_vec();
        for n in &mut nodes {
            n.context = "Definition false_2 := 0.".into();
        }
        let s = solve(&nodes, &ToyLanguage);
        let p = assemble(&nodes, &s, 0, &ToyLanguage).unwrap();
        assert_eq!(p.lemmas[0].name, "false_3");
    }

    #[test]
    fn refuses_incorrect_roots() {
        let mut nodes = vec![node(
            "root",
            "Lemma r : R.",
            "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
        )];
        let s = solve(&nodes, &ToyLanguage);
        assert!(matches!(
            assemble(&nodes, &s, 0, &ToyLanguage),
            Err(AssemblyError::NotGloballyCorrect { .. })
        ));
        assert!(matches!(
            assemble(&nodes, &s, 7, &ToyLanguage),
            Err(AssemblyError::NoSuchNode(7))
        ));
        nodes[0].statement = "Goal R.".into();
        nodes[0].proof = ConditionalProof::parse_with("<no_invoke> x.", &ToyLanguage).unwrap();
        let s = solve(&nodes, &ToyLanguage);
        assert!(matches!(
            assemble(&nodes, &s, 0, &ToyLanguage),
            Err(AssemblyError::Unnamed { .. })
        ));
    }
}

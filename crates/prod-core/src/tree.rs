//! Proof trees (paper §2, "Correctness of conditional proofs and proof trees").
//!
//! A [`Node`] is (context, statement, conditional proof, local verdict). The children of a node
//! are the nodes — from *any* sample — whose (context, normalised statement) equals one of its
//! proposed lemmas. A node is *globally correct* iff it is locally correct and every proposed
//! lemma has at least one globally correct node. We compute the **least** fixed point of that
//! rule, so cycles (A proposes B, B proposes A) never make anything correct: only nodes with a
//! finite, well-founded tree of locally correct nodes below them are accepted.
//!
//! The computation is the classic counter-based Horn-clause propagation (linear in nodes +
//! edges): a node waits on the distinct goals its lemmas name; the first node to prove a goal
//! becomes that goal's *witness* and releases every node waiting on it. A FIFO queue processes
//! nodes in order of tree height, so each witness has the smallest possible height, and the
//! witnesses form an acyclic choice of one valid tree per correct node (used by assembly).
//!
//! Infra failures are not proof failures: a node whose local verdict is [`LocalVerdict::Unknown`]
//! (not checked, or the checker failed for infrastructure reasons) is neither accepted nor
//! refuted. Two fixed points — one counting unknowns as incorrect, one as correct — give
//! `Correct`, `Incorrect`, or `Undetermined` for every node.

use std::collections::HashMap;
use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::conditional::ConditionalProof;
use crate::language::ProofLanguage;

/// The checker's verdict on a node in isolation (proposed lemmas admitted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalVerdict {
    Correct,
    /// Locally correct, but its proof adds universe constraints to its statement's own levels:
    /// it proves its own statement (as a root), never another node's proposal of the same
    /// text (which the proposer may use at other levels).
    CorrectAlone,
    Incorrect,
    /// Not checked yet, or the check failed for infrastructure reasons.
    Unknown,
}

impl LocalVerdict {
    /// Locally correct, alone or not.
    pub fn is_correct(self) -> bool {
        matches!(self, LocalVerdict::Correct | LocalVerdict::CorrectAlone)
    }
}

impl From<Option<bool>> for LocalVerdict {
    fn from(b: Option<bool>) -> Self {
        match b {
            Some(true) => LocalVerdict::Correct,
            Some(false) => LocalVerdict::Incorrect,
            None => LocalVerdict::Unknown,
        }
    }
}

/// Whether a node's statement is proved by some valid tree of locally correct nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalVerdict {
    Correct,
    Incorrect,
    /// Correct if some `Unknown` nodes turn out correct, incorrect otherwise.
    Undetermined,
}

impl GlobalVerdict {
    /// `Some(bool)` when decided.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            GlobalVerdict::Correct => Some(true),
            GlobalVerdict::Incorrect => Some(false),
            GlobalVerdict::Undetermined => None,
        }
    }
}

/// A proof-tree node. `context` is any string that names the context (its text or an id):
/// two nodes share a context iff the strings are equal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub context: String,
    pub statement: String,
    pub proof: ConditionalProof,
    pub local: LocalVerdict,
}

/// Index of a goal: a distinct (context, normalised statement).
pub type GoalId = usize;

/// Global correctness of a set of nodes, with the witness tree of every correct node.
#[derive(Clone, Debug)]
pub struct Solution {
    verdicts: Vec<GlobalVerdict>,
    /// Height of the chosen tree for definitely correct nodes (0: proposes no lemma).
    height: Vec<Option<u32>>,
    /// Goal each node proves.
    node_goal: Vec<GoalId>,
    /// Goal named by each proposed lemma of each node, in proposal order.
    lemma_goals: Vec<Vec<GoalId>>,
    /// First (lowest) definitely correct node of each goal.
    witness: Vec<Option<usize>>,
}

impl Solution {
    pub fn verdict(&self, node: usize) -> GlobalVerdict {
        self.verdicts[node]
    }
    pub fn verdicts(&self) -> &[GlobalVerdict] {
        &self.verdicts
    }
    /// Height of the tree that proves `node` (0 = no lemmas), if it is globally correct.
    pub fn height(&self, node: usize) -> Option<u32> {
        self.height[node]
    }
    pub fn goal_of(&self, node: usize) -> GoalId {
        self.node_goal[node]
    }
    /// Goals of the proposed lemmas of `node`, in proposal order (duplicates kept).
    pub fn lemma_goals(&self, node: usize) -> &[GoalId] {
        &self.lemma_goals[node]
    }
    /// The node chosen to prove `goal` in assembled proofs.
    pub fn witness(&self, goal: GoalId) -> Option<usize> {
        self.witness.get(goal).copied().flatten()
    }
    pub fn goal_count(&self) -> usize {
        self.witness.len()
    }
}

/// Compute global correctness for `nodes` (paper §2). Linear in nodes + proposed lemmas
/// (plus the cost of normalising each statement once).
pub fn solve(nodes: &[Node], lang: &dyn ProofLanguage) -> Solution {
    // Intern contexts and goals so the fixed point runs on integers.
    let lemma_total: usize = nodes.iter().map(|n| n.proof.lemma_count()).sum();
    let mut contexts: HashMap<&str, usize> = HashMap::new();
    let mut goals: HashMap<(usize, String), GoalId> =
        HashMap::with_capacity(nodes.len() + lemma_total);
    let mut node_goal = Vec::with_capacity(nodes.len());
    let mut lemma_goals = Vec::with_capacity(nodes.len());
    // Goal ids are handed out in order; a proposal whose meaning depends on where it is read
    // gets an id of its own that no statement maps to, so no node can ever prove it.
    let mut next_goal: GoalId = 0;
    let mut fresh = || {
        next_goal += 1;
        next_goal - 1
    };
    for n in nodes {
        let next = contexts.len();
        let c = *contexts.entry(n.context.as_str()).or_insert(next);
        let mut intern = |stmt: &str, fresh: &mut dyn FnMut() -> GoalId| {
            *goals
                .entry((c, lang.normalize_statement(stmt)))
                .or_insert_with(fresh)
        };
        let names: Vec<Option<String>> = n.proof.lemmas().map(|l| lang.lemma_name(l)).collect();
        // The node's statement is elaborated after its proposals: it must not mention them. A
        // node whose proof constrains its statement's universe levels proves it only alone.
        let all: Vec<String> = names.iter().flatten().cloned().collect();
        let shares = n.local != LocalVerdict::CorrectAlone
            && lang.statement_is_self_contained(&n.statement, &all);
        node_goal.push(if shares {
            intern(&n.statement, &mut fresh)
        } else {
            fresh()
        });
        let mut gs = Vec::with_capacity(names.len());
        for (i, l) in n.proof.lemmas().enumerate() {
            let siblings: Vec<String> = names
                .iter()
                .enumerate()
                .filter(|&(j, m)| j != i && m.is_some() && *m != names[i])
                .filter_map(|(_, m)| m.clone())
                .collect();
            gs.push(if lang.statement_is_self_contained(l, &siblings) {
                intern(l, &mut fresh)
            } else {
                fresh()
            });
        }
        lemma_goals.push(gs);
    }
    let goal_count = fresh();
    drop(goals);

    let definite = fixed_point(nodes, &node_goal, &lemma_goals, goal_count, |v| {
        v.is_correct()
    });
    let possible = fixed_point(nodes, &node_goal, &lemma_goals, goal_count, |v| {
        v != LocalVerdict::Incorrect
    });
    let verdicts = (0..nodes.len())
        .map(|i| match (definite.correct[i], possible.correct[i]) {
            (true, _) => GlobalVerdict::Correct,
            (false, false) => GlobalVerdict::Incorrect,
            (false, true) => GlobalVerdict::Undetermined,
        })
        .collect();
    Solution {
        verdicts,
        height: definite.height,
        node_goal,
        lemma_goals,
        witness: definite.witness,
    }
}

struct FixedPoint {
    correct: Vec<bool>,
    height: Vec<Option<u32>>,
    witness: Vec<Option<usize>>,
}

fn fixed_point(
    nodes: &[Node],
    node_goal: &[GoalId],
    lemma_goals: &[Vec<GoalId>],
    goal_count: usize,
    accept: impl Fn(LocalVerdict) -> bool,
) -> FixedPoint {
    let n = nodes.len();
    // Distinct goals each node waits on, and the reverse index (CSR layout) goal -> waiting nodes.
    let mut pending = vec![0u32; n];
    let mut waiting_len = vec![0usize; goal_count + 1];
    let mut seen_stamp = vec![usize::MAX; goal_count];
    let mut distinct: Vec<Vec<GoalId>> = Vec::with_capacity(n);
    for (i, gs) in lemma_goals.iter().enumerate() {
        let mut d = Vec::with_capacity(gs.len());
        for &g in gs {
            if seen_stamp[g] != i {
                seen_stamp[g] = i;
                d.push(g);
                waiting_len[g + 1] += 1;
            }
        }
        pending[i] = d.len() as u32;
        distinct.push(d);
    }
    for g in 0..goal_count {
        waiting_len[g + 1] += waiting_len[g];
    }
    let offsets = waiting_len;
    let mut fill = offsets.clone();
    let mut waiting = vec![0usize; offsets[goal_count]];
    for (i, d) in distinct.iter().enumerate() {
        for &g in d {
            waiting[fill[g]] = i;
            fill[g] += 1;
        }
    }

    let mut correct = vec![false; n];
    let mut height = vec![None; n];
    let mut witness: Vec<Option<usize>> = vec![None; goal_count];
    let mut queue: VecDeque<usize> = (0..n)
        .filter(|&i| pending[i] == 0 && accept(nodes[i].local))
        .collect();
    while let Some(i) = queue.pop_front() {
        correct[i] = true;
        // Every goal `i` waits on already has a witness (that is why `i` was queued).
        let h = distinct[i]
            .iter()
            .filter_map(|&g| witness[g].and_then(|w| height[w]))
            .max();
        height[i] = Some(h.map_or(0, |h: u32| h + 1));
        let g = node_goal[i];
        if witness[g].is_none() {
            witness[g] = Some(i);
            for &m in &waiting[offsets[g]..offsets[g + 1]] {
                pending[m] -= 1;
                if pending[m] == 0 && accept(nodes[m].local) {
                    queue.push_back(m);
                }
            }
        }
    }
    FixedPoint {
        correct,
        height,
        witness,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::tests_support::ToyLanguage;

    fn node(id: &str, stmt: &str, proof: &str, local: Option<bool>) -> Node {
        Node {
            id: id.into(),
            context: "ctx".into(),
            statement: stmt.into(),
            proof: ConditionalProof::parse_with(proof, &ToyLanguage).unwrap(),
            local: local.into(),
        }
    }

    fn verdicts(nodes: &[Node]) -> Vec<Option<bool>> {
        solve(nodes, &ToyLanguage)
            .verdicts()
            .iter()
            .map(|v| v.as_bool())
            .collect()
    }

    #[test]
    fn leaf_and_parent() {
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> apply a.",
                Some(true),
            ),
            node(
                "a",
                "Lemma other_name :   A.",
                "<no_invoke> auto.",
                Some(true),
            ),
        ];
        assert_eq!(verdicts(&nodes), [Some(true), Some(true)]);
        let s = solve(&nodes, &ToyLanguage);
        assert_eq!(s.height(0), Some(1));
        assert_eq!(s.height(1), Some(0));
    }

    #[test]
    fn missing_or_wrong_child_fails() {
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> apply a.",
                Some(true),
            ),
            node("a", "Lemma a : A.", "<no_invoke> auto.", Some(false)),
        ];
        assert_eq!(verdicts(&nodes), [Some(false), Some(false)]);
    }

    #[test]
    fn cycles_prove_nothing() {
        let nodes = [
            node(
                "a",
                "Lemma a : A.",
                "<use_invoke> <invoke> Lemma b : B. </invoke> x.",
                Some(true),
            ),
            node(
                "b",
                "Lemma b : B.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(true),
            ),
            node(
                "self",
                "Lemma c : C.",
                "<use_invoke> <invoke> Lemma c : C. </invoke> x.",
                Some(true),
            ),
        ];
        assert_eq!(verdicts(&nodes), [Some(false), Some(false), Some(false)]);
    }

    #[test]
    fn cycle_broken_by_another_sample() {
        let nodes = [
            node(
                "a",
                "Lemma a : A.",
                "<use_invoke> <invoke> Lemma b : B. </invoke> x.",
                Some(true),
            ),
            node(
                "b",
                "Lemma b : B.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(true),
            ),
            node("b2", "Lemma b : B.", "<no_invoke> y.", Some(true)),
        ];
        assert_eq!(verdicts(&nodes), [Some(true), Some(true), Some(true)]);
        let s = solve(&nodes, &ToyLanguage);
        assert_eq!(s.witness(s.goal_of(1)), Some(2));
    }

    #[test]
    fn contexts_separate_goals() {
        let mut child = node("a", "Lemma a : A.", "<no_invoke> auto.", Some(true));
        child.context = "other".into();
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(true),
            ),
            child,
        ];
        assert_eq!(verdicts(&nodes), [Some(false), Some(true)]);
    }

    #[test]
    fn unknown_is_neither() {
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(true),
            ),
            node("a", "Lemma a : A.", "<no_invoke> auto.", None),
            node(
                "bad",
                "Lemma z : Z.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(false),
            ),
        ];
        assert_eq!(verdicts(&nodes), [None, None, Some(false)]);
    }

    #[test]
    fn every_lemma_needs_a_proof() {
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> <invoke> Lemma b : B. </invoke> x.",
                Some(true),
            ),
            node("a", "Lemma a : A.", "<no_invoke> auto.", Some(true)),
        ];
        assert_eq!(verdicts(&nodes), [Some(false), Some(true)]);
    }

    #[test]
    fn witness_has_minimal_height() {
        let nodes = [
            node(
                "root",
                "Lemma r : R.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> x.",
                Some(true),
            ),
            node(
                "a_deep",
                "Lemma a : A.",
                "<use_invoke> <invoke> Lemma b : B. </invoke> x.",
                Some(true),
            ),
            node("b", "Lemma b : B.", "<no_invoke> x.", Some(true)),
            node("a_flat", "Lemma a : A.", "<no_invoke> x.", Some(true)),
        ];
        let s = solve(&nodes, &ToyLanguage);
        assert_eq!(s.witness(s.goal_of(1)), Some(3));
        assert_eq!(s.height(0), Some(1));
        assert_eq!(s.height(1), Some(1));
    }
}

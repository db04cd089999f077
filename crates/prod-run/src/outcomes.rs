//! What an evaluation's trees did, beyond pass@k: per-theorem details, nodes by verdict kind
//! with the most common failure messages, the `<use_invoke>` share of root samples, the number
//! of proposed lemmas, proved trees of height ≥ 1 built only from sampled nodes, the proposed
//! lemmas a sampled `hammer.` child closed (the policy planned, the hammer did the step), and a
//! few example trees node by node (with the assembled proof of a proved one). The report shows
//! these so that a reader can see *how* theorems were proved or why they were not.
//!
//! Pure over what the evaluation already has (stored nodes, their verdicts and global
//! verdicts, the cold-check results): nothing here changes pass@k. Nodes without a verdict
//! were lost to infrastructure failures; they are their own bucket, never failures.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use prod_check::Verdict;
use prod_core::conditional::USE_INVOKE;
use prod_core::{ConditionalProof, GlobalVerdict, ProofLanguage};
use prod_report::{ExampleNode, ExampleTree, FailureCount, NodeOutcomes, TheoremDetail};
use prod_rl::Origin;

use crate::store::{name, StoredNode};
use crate::theorem::Theorem;

/// Failure messages listed in the breakdown.
const TOP_FAILURES: usize = 10;
/// Characters kept of one failure message in the breakdown.
const FAILURE_CHARS: usize = 160;
/// Nodes shown per example tree.
const EXAMPLE_NODES: usize = 12;
/// Characters kept of a completion, a statement and a message in an example.
const COMPLETION_CHARS: usize = 4000;
const STATEMENT_CHARS: usize = 1000;
const MESSAGE_CHARS: usize = 1500;

/// A tree that proved its theorem (root globally correct, assembled proof passed the cold check).
#[derive(Clone, Debug)]
pub(crate) struct ProvedTree {
    pub height: Option<u32>,
    pub assembled: String,
    /// Every node of the assembled proof was sampled (none from the ground truth, no hammer
    /// leaf).
    pub sampled_only: bool,
    /// The proof needed a hammer leaf: the tree's other nodes alone did not prove it.
    pub with_leaves: bool,
}

/// Everything the details need, as the evaluation has it after its final phase.
pub(crate) struct Inputs<'a> {
    pub theorems: &'a [Theorem],
    pub nodes: &'a [StoredNode],
    /// Stored verdict per node id (`None`: lost to an infra failure).
    pub verdicts: &'a HashMap<i64, Option<Verdict>>,
    /// Global verdict per node id (conditional proofs only).
    pub globals: &'a HashMap<i64, GlobalVerdict>,
    /// (theorem index, tree) of every tree that proved its theorem.
    pub proved: &'a HashMap<(usize, u32), ProvedTree>,
    /// Per theorem: (judged trees, proving trees), as pass@k counts them.
    pub judged: &'a [(usize, usize)],
    pub lang: &'a dyn ProofLanguage,
    /// Whether the nodes' `truncated` flags are known (the store records cuts).
    pub truncation_recorded: bool,
}

/// The computed details (fields of `prod_report::Evaluation`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Details {
    pub theorems: Vec<TheoremDetail>,
    pub node_outcomes: NodeOutcomes,
    pub use_invoke_share_root: Option<f64>,
    pub proposals: usize,
    pub sampled_trees_height_ge1: usize,
    /// Proposed lemmas (per tree) proved by a sampled child whose proof is `hammer.` alone.
    pub lemmas_closed_by_hammer: usize,
    pub examples: Vec<ExampleTree>,
}

/// At most `max` characters, with an ellipsis when cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// A hypothesis line of a Coq environment (`n m : nat`, `H : x = y`).
fn is_hypothesis(line: &str) -> bool {
    match line.split_once(" : ") {
        Some((lhs, _)) => {
            let lhs = lhs.trim();
            !lhs.is_empty()
                && lhs
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '\'' | ' ' | ','))
        }
        None => false,
    }
}

/// How Coq's error sentences begin (after an `In environment` preamble).
const ERROR_STARTS: [&str; 14] = [
    "Unable to unify",
    "Impossible to unify",
    "Unable to find",
    "Unable to apply",
    "The term",
    "The reference",
    "The variable",
    "No such",
    "Cannot",
    "Found no",
    "Not an inductive",
    "Tactic failure",
    "Illegal application",
    "Error",
];

/// The line of a checker message that says what went wrong: the first non-empty line, skipping
/// Coq's `In environment` preamble and its hypotheses (they differ from node to node), also
/// when the checker has folded the message onto one line.
pub(crate) fn headline(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut first = lines.next().unwrap_or_default();
    if first == "In environment" {
        for l in lines.by_ref() {
            if !is_hypothesis(l) {
                first = l;
                break;
            }
        }
    } else if let Some(rest) = first.strip_prefix("In environment ") {
        if let Some(at) = ERROR_STARTS.iter().filter_map(|e| rest.find(e)).min() {
            first = &rest[at..];
        }
    }
    let line: String = first
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    cut(&line, FAILURE_CHARS)
}

fn kind_name(v: Option<&Verdict>) -> &'static str {
    v.map_or("infra", |v| v.kind().as_str())
}

/// The checker's message for a node that was not proved (empty for a proved one).
fn node_message(v: Option<&Verdict>) -> String {
    match v {
        Some(Verdict::Proved { .. }) => String::new(),
        Some(v) => cut(v.message().trim(), MESSAGE_CHARS),
        None => "no verdict: the check was lost to an infrastructure failure".to_string(),
    }
}

/// Nodes of one tree by (context key, normalised statement).
type GoalIndex<'a> = HashMap<(&'a str, String), Vec<usize>>;

/// Indexes of the nodes of `theorem`'s tree `tree`: its root, then every node proving one of
/// the lemmas proposed below it (breadth first; shared lemmas are reached once).
fn walk(inp: &Inputs<'_>, index: &HashMap<u32, GoalIndex<'_>>, roots: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen: HashSet<usize> = HashSet::new();
    let mut queue: VecDeque<usize> = roots.iter().copied().collect();
    while let Some(i) = queue.pop_front() {
        if !seen.insert(i) {
            continue;
        }
        out.push(i);
        let n = &inp.nodes[i];
        let Ok(p) = ConditionalProof::parse_with(&n.completion, inp.lang) else {
            continue;
        };
        let Some(goals) = index.get(&n.tree) else {
            continue;
        };
        for l in p.lemmas() {
            if let Some(children) =
                goals.get(&(n.context_key.as_str(), inp.lang.normalize_statement(l)))
            {
                queue.extend(children.iter().copied().filter(|c| !seen.contains(c)));
            }
        }
    }
    out
}

fn example(inp: &Inputs<'_>, kind: &str, th: usize, tree: u32, members: &[usize]) -> ExampleTree {
    let proved = inp.proved.get(&(th, tree));
    let nodes = members
        .iter()
        .take(EXAMPLE_NODES)
        .map(|&i| {
            let n = &inp.nodes[i];
            let v = inp.verdicts.get(&n.id).and_then(Option::as_ref);
            ExampleNode {
                depth: n.depth,
                statement: cut(n.statement.trim(), STATEMENT_CHARS),
                completion: cut(n.completion.trim(), COMPLETION_CHARS),
                origin: name(n.origin),
                verdict: kind_name(v).to_string(),
                truncated: n.truncated,
                message: node_message(v),
                global: inp
                    .globals
                    .get(&n.id)
                    .map_or_else(String::new, |&g| name(g)),
                lemmas: ConditionalProof::parse_with(&n.completion, inp.lang)
                    .map(|p| p.lemmas().map(|l| cut(l.trim(), STATEMENT_CHARS)).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let t = &inp.theorems[th];
    ExampleTree {
        kind: kind.to_string(),
        theorem: if t.qualified_name.is_empty() {
            t.id.clone()
        } else {
            t.qualified_name.clone()
        },
        tree,
        proved: proved.is_some(),
        height: proved.and_then(|p| p.height),
        nodes,
        assembled_proof: proved.map(|p| p.assembled.clone()),
        omitted_nodes: members.len().saturating_sub(EXAMPLE_NODES),
    }
}

/// Compute the details of an evaluation.
pub(crate) fn details(inp: &Inputs<'_>) -> Details {
    let nodes = node_counts(inp);
    let members = tree_members(inp);
    Details {
        theorems: theorem_details(inp, &members),
        node_outcomes: nodes.outcomes,
        use_invoke_share_root: nodes.use_invoke_share_root,
        proposals: nodes.proposals,
        sampled_trees_height_ge1: inp
            .proved
            .values()
            .filter(|p| p.sampled_only && p.height.is_some_and(|h| h >= 1))
            .count(),
        lemmas_closed_by_hammer: lemmas_closed_by_hammer(inp),
        examples: examples(inp, &members),
    }
}

/// A proof that is the `hammer.` step alone.
fn is_hammer_only(p: &ConditionalProof) -> bool {
    p.lemma_count() == 0 && p.proof_text().split_whitespace().eq(["hammer."])
}

/// Node `i` is a sampled lemma node (depth ≥ 1) whose proof is `hammer.` alone, and the prover
/// proved it.
fn hammer_child(inp: &Inputs<'_>, i: usize) -> bool {
    let n = &inp.nodes[i];
    n.depth > 0
        && n.origin == Origin::Sampled
        && locally_proved(inp, i)
        && ConditionalProof::parse_with(&n.completion, inp.lang).is_ok_and(|p| is_hammer_only(&p))
}

/// The proposed lemmas, counted once per tree (by context and normalised statement), that a
/// sampled `hammer.` child of the same tree proved.
fn lemmas_closed_by_hammer(inp: &Inputs<'_>) -> usize {
    let closed: HashSet<(u32, &str, String)> = (0..inp.nodes.len())
        .filter(|&i| hammer_child(inp, i))
        .map(|i| {
            let n = &inp.nodes[i];
            (
                n.tree,
                n.context_key.as_str(),
                inp.lang.normalize_statement(&n.statement),
            )
        })
        .collect();
    let mut proposed: HashSet<(u32, &str, String)> = HashSet::new();
    for n in inp.nodes {
        if let Ok(p) = ConditionalProof::parse_with(&n.completion, inp.lang) {
            for l in p.lemmas() {
                proposed.insert((
                    n.tree,
                    n.context_key.as_str(),
                    inp.lang.normalize_statement(l),
                ));
            }
        }
    }
    proposed.intersection(&closed).count()
}

/// The nodes by verdict (with the most common failures), the `<use_invoke>` share of the roots
/// and the number of proposed lemmas.
struct NodeCounts {
    outcomes: NodeOutcomes,
    use_invoke_share_root: Option<f64>,
    proposals: usize,
}

fn node_counts(inp: &Inputs<'_>) -> NodeCounts {
    let mut failures: BTreeMap<(&'static str, String), usize> = BTreeMap::new();
    let mut o = NodeOutcomes::default();
    let (mut roots, mut use_invoke, mut proposals) = (0usize, 0usize, 0usize);
    let mut truncated = 0usize;
    for n in inp.nodes {
        let v = inp.verdicts.get(&n.id).and_then(Option::as_ref);
        o.nodes += 1;
        match v {
            Some(Verdict::Proved { .. }) => o.proved += 1,
            // Cut by the token limit and then failed or refused: the model ran out of tokens,
            // which is not the same lesson as a wrong step ("sentence not ended by `.`").
            Some(Verdict::Failed { .. } | Verdict::Rejected { .. }) if n.truncated => {
                truncated += 1
            }
            Some(Verdict::Failed { message, .. }) => {
                o.failed += 1;
                *failures.entry(("failed", headline(message))).or_default() += 1;
            }
            Some(Verdict::Rejected { reason }) => {
                o.rejected += 1;
                *failures.entry(("rejected", headline(reason))).or_default() += 1;
            }
            Some(Verdict::TimedOut { .. }) => o.timed_out += 1,
            // Infra verdicts are never stored; a stored one would still not be a failure.
            Some(Verdict::Infra { .. }) | None => o.infra += 1,
        }
        if inp.globals.get(&n.id) == Some(&GlobalVerdict::Correct) {
            o.globally_correct += 1;
        }
        if let Ok(p) = ConditionalProof::parse_with(&n.completion, inp.lang) {
            proposals += p.lemma_count();
        }
        if n.depth == 0 && n.theorem.is_some() {
            roots += 1;
            if n.completion.trim_start().starts_with(USE_INVOKE) {
                use_invoke += 1;
            }
        }
    }
    o.top_failures = top_failures(failures);
    o.truncated = inp.truncation_recorded.then_some(truncated);
    NodeCounts {
        outcomes: o,
        use_invoke_share_root: (roots > 0).then(|| use_invoke as f64 / roots as f64),
        proposals,
    }
}

/// The most frequent failure headlines, most frequent first (ties by kind and message).
fn top_failures(failures: BTreeMap<(&'static str, String), usize>) -> Vec<FailureCount> {
    let mut top: Vec<((&str, String), usize)> = failures.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.into_iter()
        .take(TOP_FAILURES)
        .map(|((kind, message), count)| FailureCount {
            kind: kind.to_string(),
            message,
            count,
        })
        .collect()
}

/// The nodes of each (theorem, tree): its roots, then the nodes proving their proposed lemmas.
type Members = BTreeMap<(usize, u32), Vec<usize>>;

fn tree_members(inp: &Inputs<'_>) -> Members {
    let mut index: HashMap<u32, GoalIndex<'_>> = HashMap::new();
    let mut root_nodes: Members = BTreeMap::new();
    for (i, n) in inp.nodes.iter().enumerate() {
        index
            .entry(n.tree)
            .or_default()
            .entry((
                n.context_key.as_str(),
                inp.lang.normalize_statement(&n.statement),
            ))
            .or_default()
            .push(i);
        if n.depth == 0 {
            if let Some(th) = n
                .theorem
                .and_then(|t| usize::try_from(t).ok())
                .filter(|&t| t < inp.theorems.len())
            {
                root_nodes.entry((th, n.tree)).or_default().push(i);
            }
        }
    }
    root_nodes
        .iter()
        .map(|(key, roots)| (*key, walk(inp, &index, roots)))
        .collect()
}

/// Node `i`'s stored verdict (None: not checked, or lost to an infra failure).
fn verdict_at<'a>(inp: &Inputs<'a>, i: usize) -> Option<&'a Verdict> {
    inp.verdicts.get(&inp.nodes[i].id).and_then(Option::as_ref)
}

/// Whether node `i`'s stored verdict is `Proved`.
fn locally_proved(inp: &Inputs<'_>, i: usize) -> bool {
    matches!(verdict_at(inp, i), Some(Verdict::Proved { .. }))
}

/// The prover checked node `i` and it failed (a message, not a rejection before the prover).
fn prover_failed(inp: &Inputs<'_>, i: usize) -> bool {
    matches!(verdict_at(inp, i), Some(Verdict::Failed { .. }))
}

/// One row per theorem: its trees, the proving ones and their nodes.
fn theorem_details(inp: &Inputs<'_>, members: &Members) -> Vec<TheoremDetail> {
    let mut out = Vec::with_capacity(inp.theorems.len());
    for (th, t) in inp.theorems.iter().enumerate() {
        let (mut nodes, mut correct) = (0usize, 0usize);
        for ((_, _), m) in members.range((th, 0)..=(th, u32::MAX)) {
            nodes += m.len();
            correct += m.iter().filter(|&&i| locally_proved(inp, i)).count();
        }
        let proving: Vec<(u32, Option<u32>)> = inp
            .proved
            .iter()
            .filter(|((p, _), _)| *p == th)
            .map(|((_, tree), p)| (*tree, p.height))
            .collect();
        let (judged, proved) = inp.judged.get(th).copied().unwrap_or_default();
        out.push(TheoremDetail {
            id: t.id.clone(),
            name: t.qualified_name.clone(),
            file: t.file.clone(),
            ground_truth_depth: t.depth,
            trees: judged,
            proved_trees: proved,
            first_proved_sample: proving.iter().map(|(tree, _)| *tree as usize + 1).min(),
            proving_depth: proving.iter().filter_map(|p| p.1).min(),
            deepest_proving_depth: proving.iter().filter_map(|p| p.1).max(),
            nodes,
            locally_correct: correct,
        });
    }
    out
}

/// Up to three example trees: proved with proposed lemmas (preferably sampled only), proved
/// by a flat proof, and not proved although the root proposed lemmas.
fn examples(inp: &Inputs<'_>, members: &Members) -> Vec<ExampleTree> {
    let pick = |want: &dyn Fn(usize, u32, &[usize]) -> bool| {
        members
            .iter()
            .find(|((th, tree), m)| want(*th, *tree, m))
            .map(|(k, m)| (*k, m.clone()))
    };
    let proved_at = |th: usize, tree: u32| inp.proved.get(&(th, tree));
    let mut examples = Vec::new();
    let deep = pick(&|th, tree, _| {
        proved_at(th, tree).is_some_and(|p| p.sampled_only && p.height.is_some_and(|h| h >= 1))
    })
    .or_else(|| {
        pick(&|th, tree, _| proved_at(th, tree).is_some_and(|p| p.height.is_some_and(|h| h >= 1)))
    });
    if let Some(((th, tree), m)) = &deep {
        examples.push(example(inp, "proved with proposed lemmas", *th, *tree, m));
    }
    // A lemma the policy left to the hammer and the hammer closed (preferably in a proved
    // tree), other than the tree already shown.
    let shown = deep.as_ref().map(|(k, _)| *k);
    let hammer_closed = |th: usize, tree: u32, m: &[usize]| {
        shown != Some((th, tree)) && m.iter().skip(1).any(|&i| hammer_child(inp, i))
    };
    if let Some(((th, tree), m)) =
        pick(&|th, tree, m| proved_at(th, tree).is_some() && hammer_closed(th, tree, m))
            .or_else(|| pick(&|th, tree, m| hammer_closed(th, tree, m)))
    {
        examples.push(example(
            inp,
            "a proposed lemma closed by a sampled hammer. child",
            th,
            tree,
            &m,
        ));
    }
    if let Some(((th, tree), m)) =
        pick(&|th, tree, _| proved_at(th, tree).is_some_and(|p| p.height == Some(0)))
    {
        examples.push(example(inp, "proved by a flat proof", th, tree, &m));
    }
    let proposes = |i: usize| {
        ConditionalProof::parse_with(&inp.nodes[i].completion, inp.lang)
            .is_ok_and(|p| p.lemma_count() > 0)
    };
    // A failed tree whose root proposes lemmas: preferably one whose root itself checked, so
    // that the failure is in a lemma.
    let decided =
        |i: usize| inp.globals.get(&inp.nodes[i].id) != Some(&GlobalVerdict::Undetermined);
    let failed = pick(&|th, tree, m| {
        proved_at(th, tree).is_none()
            && m.first()
                .is_some_and(|&r| proposes(r) && decided(r) && locally_proved(inp, r))
    })
    .or_else(|| {
        pick(&|th, tree, m| {
            proved_at(th, tree).is_none() && m.first().is_some_and(|&r| proposes(r) && decided(r))
        })
    });
    if let Some(((th, tree), m)) = failed {
        examples.push(example(
            inp,
            "not proved, with proposed lemmas",
            th,
            tree,
            &m,
        ));
    } else if let Some(((th, tree), m)) = pick(&|th, tree, m| {
        // No failed tree proposes lemmas: show one whose root the prover refused, with its
        // message, so that a report of a run that proved nothing still shows what went wrong.
        proved_at(th, tree).is_none() && m.first().is_some_and(|&r| prover_failed(inp, r))
    }) {
        examples.push(example(inp, "not proved", th, tree, &m));
    }
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headline_skips_the_environment() {
        let m =
            "In environment\nn, m : nat\nH : n = m\nUnable to unify \"n + 0\" with \"n\".\nmore";
        assert_eq!(headline(m), "Unable to unify \"n + 0\" with \"n\".");
        assert_eq!(headline("  \nNo such goal.\n"), "No such goal.");
        assert_eq!(headline(""), "");
        let folded = "In environment m : nat H : The x = y Unable to unify \"m\" with \"m + 0\".";
        assert_eq!(headline(folded), "Unable to unify \"m\" with \"m + 0\".");
        assert_eq!(
            headline("In environment x : nat oops"),
            "In environment x : nat oops"
        );
        assert_eq!(headline(&"x".repeat(500)).chars().count(), FAILURE_CHARS);
    }
}

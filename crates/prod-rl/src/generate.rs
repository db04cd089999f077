//! Proof-tree generation with a policy: paper Algorithm 1 (test time) and Algorithm 2 (train
//! time, Appendix A.1).

use std::collections::HashSet;

use prod_core::conditional::{NO_INVOKE, USE_INVOKE};
use prod_core::{ConditionalProof, ParseError, ProofLanguage, T0};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A theorem (or proposed lemma) to prove: context, statement and, for dataset theorems, the
/// ground-truth conditional proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeGoal {
    pub context: String,
    pub statement: String,
    pub ground_truth: Option<ConditionalProof>,
}

impl TreeGoal {
    pub fn new(context: impl Into<String>, statement: impl Into<String>) -> Self {
        TreeGoal {
            context: context.into(),
            statement: statement.into(),
            ground_truth: None,
        }
    }
}

/// One sampling request: prompt = context + statement (+ the forced `t0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleRequest<'a> {
    pub context: &'a str,
    pub statement: &'a str,
    /// `Some(t0)`: the prompt ends with this token (paper: `x' = c s <no_invoke>`).
    pub forced_t0: Option<T0>,
}

/// The policy failed for infrastructure reasons (a lost server, OOM): never a proof failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy backend failed: {0}")]
pub struct PolicyError(pub String);

/// One sampled completion: the text as the policy wrote it, and whether the token limit cut
/// it (the sampler stopped at `max_new_tokens`, or the server said `finish_reason: "length"`)
/// rather than the model ending it. A cut completion is still checked like any other: the
/// flag only lets reports tell "the model ran out of tokens" from "the model wrote a wrong
/// proof", and never changes a verdict or a reward.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub truncated: bool,
}

impl Completion {
    /// A completion the model ended itself.
    pub fn ended(text: impl Into<String>) -> Self {
        Completion {
            text: text.into(),
            truncated: false,
        }
    }

    /// A completion the token limit cut.
    pub fn cut(text: impl Into<String>) -> Self {
        Completion {
            text: text.into(),
            truncated: true,
        }
    }
}

/// What tree generation needs from a policy model.
pub trait Policy {
    /// One completion per request, in order: `t0` followed by a conditional proof. For a forced
    /// request the completion may start after the forced token; it is put back in front.
    fn sample(&mut self, requests: &[SampleRequest<'_>]) -> Result<Vec<Completion>, PolicyError>;

    /// `π(<use_invoke>|x) / (π(<use_invoke>|x) + π(<no_invoke>|x))` for each (context, statement).
    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError>;
}

/// Where a node's conditional proof comes from (stored by this name in a run store's `nodes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Sampled,
    /// A dataset's human-written conditional proof (added at depth 0 in training).
    GroundTruth,
    /// A hammer leaf: the prover's hammer step alone, added by [`hammer_leaves`] for a lemma
    /// the tree proposed. Never a sample of the policy: it is no training example, and it
    /// counts for global correctness like any node.
    HammerLeaf,
}

/// A node produced by tree generation (not yet checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedNode {
    pub context: String,
    pub statement: String,
    /// Level in the tree: 0 for the theorems themselves.
    pub depth: u32,
    /// Which independent tree (test time, `0..k`) produced it; 0 in training.
    pub tree: u32,
    pub forced_t0: Option<T0>,
    pub origin: Origin,
    /// The text as the policy wrote it (with the forced token, if any, in front).
    pub completion: String,
    /// A completion that is not a conditional proof is kept (it is a locally incorrect node).
    pub proof: Result<ConditionalProof, ParseError>,
    /// The token limit cut the completion ([`Completion::truncated`]); false for ground truth.
    pub truncated: bool,
}

fn with_forced_token(completion: String, forced: Option<T0>) -> String {
    match forced {
        Some(t0) => {
            let s = completion.trim_start();
            if s.starts_with(USE_INVOKE) || s.starts_with(NO_INVOKE) {
                completion
            } else {
                format!("{}{completion}", t0.token())
            }
        }
        None => completion,
    }
}

fn sample_level(
    policy: &mut dyn Policy,
    goals: &[(String, String)],
    forced: &[Option<T0>],
    (depth, tree): (u32, u32),
    lang: &dyn ProofLanguage,
) -> Result<Vec<GeneratedNode>, PolicyError> {
    let requests: Vec<SampleRequest<'_>> = goals
        .iter()
        .zip(forced)
        .map(|((c, s), &f)| SampleRequest {
            context: c,
            statement: s,
            forced_t0: f,
        })
        .collect();
    let completions = policy.sample(&requests)?;
    if completions.len() != requests.len() {
        return Err(PolicyError(format!(
            "asked for {} samples, got {}",
            requests.len(),
            completions.len()
        )));
    }
    Ok(goals
        .iter()
        .zip(forced)
        .zip(completions)
        .map(|(((c, s), &f), sampled)| {
            let completion = with_forced_token(sampled.text, f);
            GeneratedNode {
                context: c.clone(),
                statement: s.clone(),
                depth,
                tree,
                forced_t0: f,
                origin: Origin::Sampled,
                proof: ConditionalProof::parse_with(&completion, lang),
                completion,
                truncated: sampled.truncated,
            }
        })
        .collect())
}

/// The next level's goals: every lemma proposed in `nodes`, same context, once each (a set,
/// as in the paper; "once" after the language's statement normalisation).
fn proposed_goals(nodes: &[GeneratedNode], lang: &dyn ProofLanguage) -> Vec<(String, String)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for n in nodes {
        if let Ok(p) = &n.proof {
            for l in p.lemmas() {
                if seen.insert((n.context.clone(), lang.normalize_statement(l))) {
                    out.push((n.context.clone(), l.to_string()));
                }
            }
        }
    }
    out
}

/// Hammer leaves: one node whose proof is `proof` (the prover's hammer step alone, for Coq
/// `<no_invoke> hammer.`) for every distinct lemma a tree proposes, at every level, the depth
/// limit included. A lemma is distinct per tree, by context and normalised statement; its leaf
/// sits one level below the first node that proposes it. Left out: a lemma that states one of
/// its tree's roots (the root itself is never hammered on the policy's behalf, so a comparison
/// with the hammer alone stays honest) and a lemma that already has a leaf, so that calling
/// this again on nodes that hold leaves adds none. The leaves come level by level, each
/// level in the order of its proposers.
pub fn hammer_leaves(
    nodes: &[GeneratedNode],
    proof: &str,
    lang: &dyn ProofLanguage,
) -> Vec<GeneratedNode> {
    let key = |n: &GeneratedNode, s: &str| (n.tree, n.context.clone(), lang.normalize_statement(s));
    let mut done: HashSet<(u32, String, String)> = nodes
        .iter()
        .filter(|n| n.depth == 0 || n.origin == Origin::HammerLeaf)
        .map(|n| key(n, &n.statement))
        .collect();
    let mut order: Vec<&GeneratedNode> = nodes.iter().collect();
    // Shallow proposers first: a lemma's leaf goes one level below its first proposer.
    order.sort_by_key(|n| n.depth);
    let mut out = Vec::new();
    for n in order {
        let Ok(p) = &n.proof else { continue };
        for l in p.lemmas() {
            if done.insert(key(n, l)) {
                out.push(GeneratedNode {
                    context: n.context.clone(),
                    statement: l.to_string(),
                    depth: n.depth + 1,
                    tree: n.tree,
                    forced_t0: None,
                    origin: Origin::HammerLeaf,
                    completion: proof.to_string(),
                    proof: ConditionalProof::parse_with(proof, lang),
                    truncated: false,
                });
            }
        }
    }
    out
}

/// Paper Algorithm 1: `k` independent proof trees per root, lemmas of depth `< max_depth` are
/// expanded, and depth `max_depth` is sampled with `<no_invoke>` forced.
pub fn generate_test_trees(
    policy: &mut dyn Policy,
    roots: &[TreeGoal],
    max_depth: u32,
    k: u32,
    lang: &dyn ProofLanguage,
) -> Result<Vec<GeneratedNode>, PolicyError> {
    let mut all = Vec::new();
    for tree in 0..k {
        let mut level: Vec<(String, String)> = roots
            .iter()
            .map(|g| (g.context.clone(), g.statement.clone()))
            .collect();
        for depth in 0..=max_depth {
            if level.is_empty() {
                break;
            }
            let forced = vec![(depth == max_depth).then_some(T0::NoInvoke); level.len()];
            let nodes = sample_level(policy, &level, &forced, (depth, tree), lang)?;
            level = proposed_goals(&nodes, lang);
            all.extend(nodes);
        }
    }
    Ok(all)
}

/// The 50% quantile of `p` (lower median: the value at rank ⌈n/2⌉), so that at least half the
/// batch is at or above it.
fn median_threshold(p: &[f64]) -> f64 {
    let mut s: Vec<f64> = p
        .iter()
        .map(|x| if x.is_nan() { 0.0 } else { *x })
        .collect();
    s.sort_by(f64::total_cmp);
    s.get((s.len().saturating_sub(1)) / 2)
        .copied()
        .unwrap_or(1.0)
}

/// Paper Algorithm 2 (train time): at every depth `≤ max_depth`, every goal gets a
/// `<no_invoke>` sample; below the depth limit, goals whose P(<use_invoke>) is at or above the
/// batch median are also sampled with `<use_invoke>` forced, and the others with probability
/// P(<use_invoke>). Ground-truth conditional proofs join depth 0.
pub fn generate_train_trees(
    policy: &mut dyn Policy,
    theorems: &[TreeGoal],
    max_depth: u32,
    rng: &mut impl Rng,
    lang: &dyn ProofLanguage,
) -> Result<Vec<GeneratedNode>, PolicyError> {
    let mut all = Vec::new();
    let mut level: Vec<(String, String)> = theorems
        .iter()
        .map(|g| (g.context.clone(), g.statement.clone()))
        .collect();
    for depth in 0..=max_depth {
        if level.is_empty() {
            break;
        }
        let mut goals = level.clone();
        let mut forced = vec![Some(T0::NoInvoke); level.len()];
        if depth < max_depth {
            let pairs: Vec<(&str, &str)> = level
                .iter()
                .map(|(c, s)| (c.as_str(), s.as_str()))
                .collect();
            let p = policy.p_use_invoke(&pairs)?;
            if p.len() != level.len() {
                return Err(PolicyError(format!(
                    "asked for {} probabilities, got {}",
                    level.len(),
                    p.len()
                )));
            }
            let kappa = median_threshold(&p);
            for (g, &pi) in level.iter().zip(&p) {
                let u: f64 = rng.gen();
                if pi >= kappa || u < pi {
                    goals.push(g.clone());
                    forced.push(Some(T0::UseInvoke));
                }
            }
        }
        let mut nodes = sample_level(policy, &goals, &forced, (depth, 0), lang)?;
        if depth == 0 {
            for t in theorems {
                if let Some(gt) = &t.ground_truth {
                    nodes.push(GeneratedNode {
                        context: t.context.clone(),
                        statement: t.statement.clone(),
                        depth: 0,
                        tree: 0,
                        forced_t0: None,
                        origin: Origin::GroundTruth,
                        completion: gt.to_string(),
                        proof: Ok(gt.clone()),
                        truncated: false,
                    });
                }
            }
        }
        level = proposed_goals(&nodes, lang);
        all.extend(nodes);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prod_core::language::tests_support::ToyLanguage;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// A scripted policy: statement `Lemma x : A<n>.` gets a proof that proposes `A<n+1>` when
    /// lemmas are allowed; P(<use_invoke>) is read from the statement's number.
    struct Scripted {
        calls: Vec<(String, Option<T0>)>,
    }

    fn number(statement: &str) -> u32 {
        let atom = statement.rsplit('A').next().unwrap_or("");
        atom.chars()
            .filter(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse()
            .unwrap_or(0)
    }

    impl Policy for Scripted {
        fn sample(
            &mut self,
            requests: &[SampleRequest<'_>],
        ) -> Result<Vec<Completion>, PolicyError> {
            Ok(requests
                .iter()
                .map(|r| {
                    self.calls.push((r.statement.to_string(), r.forced_t0));
                    let n = number(r.statement);
                    match r.forced_t0 {
                        // Forced: the completion starts after the token.
                        Some(T0::NoInvoke) => Completion::ended(" auto."),
                        // A cut completion keeps its flag on the node.
                        _ => Completion::cut(format!(
                            "<use_invoke> <invoke> Lemma l{} : A{}. </invoke> apply l{}.",
                            n + 1,
                            n + 1,
                            n + 1
                        )),
                    }
                })
                .collect())
        }
        fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
            Ok(goals
                .iter()
                .map(|(_, s)| {
                    if number(s).is_multiple_of(2) {
                        0.9
                    } else {
                        0.0
                    }
                })
                .collect())
        }
    }

    #[test]
    fn algorithm_1_expands_to_the_depth_limit() {
        let mut p = Scripted { calls: vec![] };
        let roots = [TreeGoal::new("c", "Lemma t : A0.")];
        let nodes = generate_test_trees(&mut p, &roots, 2, 3, &ToyLanguage).unwrap();
        // Per tree: depth 0 proposes A1, depth 1 proposes A2, depth 2 is forced to <no_invoke>.
        assert_eq!(nodes.len(), 9);
        for tree in 0..3 {
            let d: Vec<_> = nodes
                .iter()
                .filter(|n| n.tree == tree)
                .map(|n| (n.depth, n.statement.as_str(), n.forced_t0))
                .collect();
            assert_eq!(
                d,
                [
                    (0, "Lemma t : A0.", None),
                    (1, "Lemma l1 : A1.", None),
                    (2, "Lemma l2 : A2.", Some(T0::NoInvoke))
                ]
            );
        }
        let last = nodes.iter().find(|n| n.depth == 2).unwrap();
        assert_eq!(last.completion, "<no_invoke> auto.");
        // The policy's truncation flag reaches the node, whatever the forced token.
        assert!(!last.truncated);
        assert!(nodes.iter().filter(|n| n.depth < 2).all(|n| n.truncated));
        assert_eq!(last.proof.as_ref().unwrap().t0(), T0::NoInvoke);
    }

    #[test]
    fn algorithm_2_forces_use_invoke_above_the_median_and_adds_ground_truth() {
        let mut p = Scripted { calls: vec![] };
        let mut a = TreeGoal::new("c", "Lemma a : A0.");
        a.ground_truth =
            Some(ConditionalProof::parse_with("<no_invoke> gt.", &ToyLanguage).unwrap());
        let theorems = [
            a,
            TreeGoal::new("c", "Lemma b : A1."),
            TreeGoal::new("c", "Lemma d : A3."),
        ];
        let mut rng = SmallRng::seed_from_u64(1);
        let nodes = generate_train_trees(&mut p, &theorems, 1, &mut rng, &ToyLanguage).unwrap();
        let level0: Vec<_> = nodes
            .iter()
            .filter(|n| n.depth == 0)
            .map(|n| (n.statement.as_str(), n.forced_t0, n.origin))
            .collect();
        // p = [0.9, 0.0, 0.0]; median 0.0: every theorem is at or above it, so all get both.
        assert_eq!(level0.len(), 3 + 3 + 1);
        assert!(level0.contains(&("Lemma a : A0.", None, Origin::GroundTruth)));
        // Depth 1 = depth limit: only <no_invoke> samples, for the 3 distinct proposed lemmas.
        let level1: Vec<_> = nodes.iter().filter(|n| n.depth == 1).collect();
        assert_eq!(level1.len(), 3);
        assert!(level1.iter().all(|n| n.forced_t0 == Some(T0::NoInvoke)));
        assert!(p.calls.len() == 9);
    }

    #[test]
    fn hammer_leaves_one_per_distinct_lemma_per_tree_never_the_root() {
        let mut p = Scripted { calls: vec![] };
        let roots = [TreeGoal::new("c", "Lemma t : A0.")];
        let mut nodes = generate_test_trees(&mut p, &roots, 2, 2, &ToyLanguage).unwrap();
        // A second depth-1 node of tree 0 proposes A2 again (same goal, other spacing) and the
        // root's own statement: neither gets a second leaf or a leaf at all.
        let mut again = nodes.iter().find(|n| n.depth == 1).unwrap().clone();
        again.completion =
            "<use_invoke> <invoke> Lemma l2 :  A2. </invoke> <invoke> Lemma t : A0. </invoke> x."
                .into();
        again.proof = ConditionalProof::parse_with(&again.completion, &ToyLanguage);
        assert!(again.proof.is_ok());
        nodes.push(again);
        let leaves = hammer_leaves(&nodes, "<no_invoke> hammer.", &ToyLanguage);
        let got: Vec<_> = leaves
            .iter()
            .map(|n| (n.tree, n.depth, n.statement.as_str(), n.origin))
            .collect();
        // Level by level: A1 at depth 1 (both trees), then A2 at depth 2 (both trees); the
        // depth limit's lemmas get leaves too.
        assert_eq!(
            got,
            [
                (0, 1, "Lemma l1 : A1.", Origin::HammerLeaf),
                (1, 1, "Lemma l1 : A1.", Origin::HammerLeaf),
                (0, 2, "Lemma l2 : A2.", Origin::HammerLeaf),
                (1, 2, "Lemma l2 : A2.", Origin::HammerLeaf),
            ]
        );
        assert!(leaves.iter().all(|n| n.completion == "<no_invoke> hammer."
            && n.proof.as_ref().is_ok_and(|p| p.lemma_count() == 0)
            && n.forced_t0.is_none()
            && !n.truncated));
        // Nodes that hold their leaves get none again.
        nodes.extend(leaves);
        assert!(hammer_leaves(&nodes, "<no_invoke> hammer.", &ToyLanguage).is_empty());
    }

    #[test]
    fn median_threshold_is_the_lower_median() {
        assert_eq!(median_threshold(&[0.1, 0.9, 0.5, 0.7]), 0.5);
        assert_eq!(median_threshold(&[0.3]), 0.3);
        assert_eq!(median_threshold(&[]), 1.0);
    }

    #[test]
    fn short_answers_are_infra_errors() {
        struct Short;
        impl Policy for Short {
            fn sample(&mut self, _: &[SampleRequest<'_>]) -> Result<Vec<Completion>, PolicyError> {
                Ok(vec![])
            }
            fn p_use_invoke(&mut self, _: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
                Ok(vec![])
            }
        }
        let roots = [TreeGoal::new("c", "Lemma t : A0.")];
        assert!(generate_test_trees(&mut Short, &roots, 1, 1, &ToyLanguage).is_err());
        let mut rng = SmallRng::seed_from_u64(0);
        assert!(generate_train_trees(&mut Short, &roots, 1, &mut rng, &ToyLanguage).is_err());
    }
}

//! A round's training examples (paper §3.2, Step 3): one weighted example per generated
//! conditional proof, one augmented example (lemmas moved into the context) per locally correct
//! proof with lemmas, and the batch's ground-truth proofs.

use prod_core::tree::{GlobalVerdict, LocalVerdict};
use prod_core::{ConditionalProof, ProofLanguage, T0};
use serde::{Deserialize, Serialize};

use crate::filters::is_trivial_proposal;
use crate::generate::{GeneratedNode, Origin};
use crate::weights::{example_weight, Weighting};

/// Where a training example comes from (stored by this name in a run store's examples).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExampleKind {
    Generated,
    Augmented,
    GroundTruth,
    /// An earlier round's example drawn again from the replay buffer (never made by
    /// [`round_examples`]; the round that mixes it in marks it so).
    Replayed,
}

/// (prompt = context + statement, target = t0 + conditional proof, weight).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightedExample {
    pub context: String,
    pub statement: String,
    pub target: String,
    pub weight: f64,
    pub kind: ExampleKind,
}

impl WeightedExample {
    /// Whether the target begins with `<use_invoke>` (targets are written from parsed proofs).
    pub fn proposes_lemmas(&self) -> bool {
        T0::leading(&self.target) == Some(T0::UseInvoke)
    }
}

/// What the round knows about each generated node, index-aligned with the nodes.
pub struct RoundOutcome<'a> {
    pub nodes: &'a [GeneratedNode],
    pub local: &'a [LocalVerdict],
    pub global: &'a [GlobalVerdict],
}

/// Build the round's examples.
/// * Hammer leaves ([`Origin::HammerLeaf`]) are no examples: the policy did not write them. What
///   they earn reaches the node that proposed their lemma, through its global verdict and the
///   lemma's value (the caller's `value`).
/// * Trivial proposals (a lemma restating the theorem) are discarded (paper §3.2 filter (a)).
/// * Nodes whose local verdict is `Unknown` (infra) are skipped, never given weight 0 as if wrong:
///   they are retried by the caller or left out of the round.
/// * Augmented examples weigh `γ^h` (their lemmas are in the context: no value factor);
///   ground-truth examples weigh 1 (human proofs, as in SFT).
pub fn round_examples(
    round: &RoundOutcome<'_>,
    weighting: Weighting,
    value: &mut dyn FnMut(&str, &str) -> f64,
    proof_tokens: &dyn Fn(&str) -> usize,
    lang: &dyn ProofLanguage,
) -> Vec<WeightedExample> {
    let mut out = Vec::new();
    for ((node, &local), &global) in round.nodes.iter().zip(round.local).zip(round.global) {
        if node.origin == Origin::HammerLeaf {
            continue;
        }
        let Ok(proof) = &node.proof else {
            // Unparseable output is a locally incorrect node: weight 0 under REINFORCE.
            if local != LocalVerdict::Unknown {
                out.push(example(node, &node.completion, 0.0, ExampleKind::Generated));
            }
            continue;
        };
        if node.origin == Origin::GroundTruth {
            out.push(example(
                node,
                &proof.to_string(),
                1.0,
                ExampleKind::GroundTruth,
            ));
            continue;
        }
        if local == LocalVerdict::Unknown || is_trivial_proposal(&node.statement, proof, lang) {
            continue;
        }
        let correct = local.is_correct();
        let values: Vec<f64> = if correct && matches!(weighting, Weighting::Reinforce { .. }) {
            proof.lemmas().map(|l| value(&node.context, l)).collect()
        } else {
            vec![]
        };
        let body = proof.to_string();
        let tokens = proof_tokens(&body);
        let w = example_weight(weighting, correct, global.as_bool(), tokens, &values);
        out.push(example(node, &body, w, ExampleKind::Generated));
        if correct && proof.lemma_count() > 0 {
            let (context, plain) = proof.move_lemmas_to_context(&node.context, lang);
            let gamma = match weighting {
                Weighting::Reinforce { gamma } => gamma,
                Weighting::ExpertIteration => 1.0,
            };
            let target = plain.to_string();
            let w = gamma.powf(proof_tokens(&target) as f64);
            out.push(WeightedExample {
                context,
                statement: node.statement.clone(),
                target,
                weight: w,
                kind: ExampleKind::Augmented,
            });
        }
    }
    out
}

fn example(node: &GeneratedNode, target: &str, weight: f64, kind: ExampleKind) -> WeightedExample {
    WeightedExample {
        context: node.context.clone(),
        statement: node.statement.clone(),
        target: target.to_string(),
        weight,
        kind,
    }
}

/// For baselines without lemma proposal (paper Appendix A.2): a ground-truth conditional proof
/// becomes a plain proof with its lemmas in the context.
pub fn without_lemma_proposal(
    context: &str,
    proof: &ConditionalProof,
    lang: &dyn ProofLanguage,
) -> (String, ConditionalProof) {
    if proof.lemma_count() == 0 {
        return (context.to_string(), proof.with_t0(T0::NoInvoke));
    }
    proof.move_lemmas_to_context(context, lang)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::GAMMA_PAPER;
    use prod_core::language::tests_support::ToyLanguage;

    fn node(stmt: &str, text: &str, origin: Origin) -> GeneratedNode {
        GeneratedNode {
            context: "C.".into(),
            statement: stmt.into(),
            depth: 0,
            tree: 0,
            forced_t0: None,
            origin,
            completion: text.into(),
            proof: ConditionalProof::parse_with(text, &ToyLanguage),
            truncated: false,
        }
    }

    #[test]
    fn weights_augmented_and_skips() {
        let nodes = [
            node(
                "Lemma t : T.",
                "<use_invoke> <invoke> Lemma a : A. </invoke> apply a.",
                Origin::Sampled,
            ),
            node("Lemma t : T.", "<no_invoke> nope.", Origin::Sampled),
            node(
                "Lemma t : T.",
                "<use_invoke> <invoke> Lemma same : T. </invoke> exact same.",
                Origin::Sampled,
            ),
            node("Lemma t : T.", "garbage", Origin::Sampled),
            node("Lemma t : T.", "<no_invoke> lost.", Origin::Sampled),
            node("Lemma t : T.", "<no_invoke> human.", Origin::GroundTruth),
            node("Lemma a : A.", "<no_invoke> hammer.", Origin::HammerLeaf),
        ];
        use LocalVerdict::*;
        let local = [
            Correct, Incorrect, Correct, Incorrect, Unknown, Correct, Correct,
        ];
        let global = [GlobalVerdict::Undetermined; 7];
        let round = RoundOutcome {
            nodes: &nodes,
            local: &local,
            global: &global,
        };
        let mut asked = vec![];
        let mut value = |_: &str, l: &str| {
            asked.push(l.to_string());
            0.5
        };
        let len = |s: &str| s.split_whitespace().count();
        let ex = round_examples(&round, Weighting::default(), &mut value, &len, &ToyLanguage);
        let kinds: Vec<_> = ex
            .iter()
            .map(|e| (e.kind, (e.weight * 1e6).round() / 1e6))
            .collect();
        let g = |n: i32| (GAMMA_PAPER.powi(n) * 1e6).round() / 1e6;
        assert_eq!(
            kinds,
            [
                (
                    ExampleKind::Generated,
                    ((GAMMA_PAPER.powi(9) * 0.5) * 1e6).round() / 1e6
                ),
                (ExampleKind::Augmented, g(3)),
                (ExampleKind::Generated, 0.0),
                (ExampleKind::Generated, 0.0),
                (ExampleKind::GroundTruth, 1.0),
            ]
        );
        assert_eq!(asked, ["Lemma a : A."]);
        assert_eq!(ex[1].context, "C.\nLemma a : A. Admitted.\n");
        assert_eq!(ex[1].target, "<no_invoke>  apply a.");
    }
}

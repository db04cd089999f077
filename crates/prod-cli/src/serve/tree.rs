//! `POST /v1/tree`: the local verdicts of one request's nodes turned into global ones by
//! `prod_core::tree::solve` (the same solver as `prod tree solve`).

use std::time::Duration;

use prod_check::{CheckRequest, Verdict};
use prod_core::tree::{solve, LocalVerdict, Node};
use prod_core::ProofLanguage;

use crate::check::Prover;

/// The local verdict a check gives: `Infra` says nothing about the proof (`Unknown`, so never
/// `Incorrect` globally), only `Proved` is correct.
fn local(v: &Verdict) -> LocalVerdict {
    match v {
        Verdict::Proved { .. } => LocalVerdict::Correct,
        Verdict::Infra { .. } => LocalVerdict::Unknown,
        _ => LocalVerdict::Incorrect,
    }
}

/// Per node: `Some(true)` globally correct, `Some(false)` not, `None` undetermined (infra).
/// Nodes whose proof is not a conditional proof are locally incorrect and match nothing.
pub fn global_verdicts(
    prover: Prover,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
) -> Vec<Option<bool>> {
    let mut nodes = vec![];
    let mut index = vec![None; requests.len()];
    for (i, (req, (v, _))) in requests.iter().zip(verdicts).enumerate() {
        let Ok(r) = req else { continue };
        index[i] = Some(nodes.len());
        nodes.push(Node {
            id: i.to_string(),
            // Children share the imports and the context, not merely the context's text.
            context: r.context_key(),
            statement: r.statement.clone(),
            proof: r.proof.clone(),
            local: local(v),
        });
    }
    let lang: &dyn ProofLanguage = match prover {
        Prover::Coq => &prod_coq::CoqLanguage,
        Prover::Isabelle => &prod_isar::IsarLanguage,
    };
    let solution = solve(&nodes, lang);
    index
        .iter()
        .map(|n| n.map_or(Some(false), |j| solution.verdict(j).as_bool()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prod_core::ConditionalProof;

    fn req(statement: &str, proof: &str) -> Result<CheckRequest, Verdict> {
        Ok(CheckRequest::new(
            "",
            "",
            statement,
            ConditionalProof::parse(proof).unwrap(),
        ))
    }

    #[test]
    fn a_root_is_correct_through_its_lemma_and_infra_stays_undetermined() {
        let proved = Verdict::Proved {
            axioms: vec![],
            replacements: vec![],
            time: Duration::ZERO,
        };
        let requests = vec![
            req(
                "Lemma a : True.",
                "<use_invoke> <invoke> Lemma b : 1 = 1. </invoke> exact I.",
            ),
            req("Lemma b : 1 = 1.", "<no_invoke> reflexivity."),
            req(
                "Lemma c : True.",
                "<use_invoke> <invoke> Lemma d : 2 = 2. </invoke> exact I.",
            ),
            req("Lemma d : 2 = 2.", "<no_invoke> reflexivity."),
            Err(Verdict::rejected("not a conditional proof")),
        ];
        let verdicts: Vec<_> = [
            proved.clone(),
            proved.clone(),
            proved,
            Verdict::infra("lost worker"),
            Verdict::rejected("x"),
        ]
        .into_iter()
        .map(|v| (v, Duration::ZERO))
        .collect();
        let g = global_verdicts(Prover::Coq, &requests, &verdicts);
        assert_eq!(g, [Some(true), Some(true), None, None, Some(false)]);
    }
}

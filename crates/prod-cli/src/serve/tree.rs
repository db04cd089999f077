//! `POST /v1/tree`: the local verdicts of one request's nodes turned into global ones by
//! prod-prover's [`Forest`] (the same as a run's solve phase); `POST /v1/assemble`: a globally
//! correct root's complete proof and its cold re-check by the prover ([`prod_prover::FinalCheck`]).

use std::time::Duration;

use prod_check::{CheckRequest, Verdict};
use prod_prover::{CheckedNode, Forest, ProverKind};

/// One request's nodes as the solver sees them ([`Forest`]: proofs as their checks closed
/// them, local verdicts from the checks), children matched within the same imports and context.
struct Solved {
    forest: Forest<'static>,
    /// Request index → node index (`None`: not a conditional proof).
    index: Vec<Option<usize>>,
}

impl Solved {
    fn new(
        prover: ProverKind,
        requests: &[Result<CheckRequest, Verdict>],
        verdicts: &[(Verdict, Duration)],
    ) -> Solved {
        let mut index = vec![None; requests.len()];
        let mut checked = vec![];
        for (i, (req, (v, _))) in requests.iter().zip(verdicts).enumerate() {
            let Ok(r) = req else { continue };
            index[i] = Some(checked.len());
            checked.push(CheckedNode {
                id: i.to_string(),
                context: r.context_key(),
                statement: r.statement.clone(),
                proof: &r.proof,
                verdict: Some(v),
            });
        }
        Solved {
            forest: Forest::solve(checked, prover.language()),
            index,
        }
    }

    /// Per request: `Some(true)` globally correct, `Some(false)` not (or not a conditional
    /// proof), `None` undetermined.
    fn global(&self) -> Vec<Option<bool>> {
        self.index
            .iter()
            .map(|n| n.map_or(Some(false), |j| self.forest.verdict(j).as_bool()))
            .collect()
    }
}

/// Per node: `Some(true)` globally correct, `Some(false)` not, `None` undetermined (infra).
/// Nodes whose proof is not a conditional proof are locally incorrect and match nothing.
pub fn global_verdicts(
    prover: ProverKind,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
) -> Vec<Option<bool>> {
    Solved::new(prover, requests, verdicts).global()
}

/// What `/v1/assemble` found for its root.
pub struct Assembly {
    pub global: Vec<Option<bool>>,
    /// The complete proof, when the root is globally correct and assembles.
    pub assembled: Option<String>,
    /// The cold re-check of the complete proof (the file or theory as checked beside it).
    pub final_check: Option<(Verdict, String)>,
    /// Why there is no complete proof, when there is none.
    pub why_not: Option<String>,
}

/// Assemble request `root`'s proof from the request's nodes and re-check it cold.
pub fn assemble_root(
    pipeline: &crate::check::Pipeline,
    prover: ProverKind,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
    root: usize,
) -> Assembly {
    let f = Solved::new(prover, requests, verdicts);
    let mut out = Assembly {
        global: f.global(),
        assembled: None,
        final_check: None,
        why_not: None,
    };
    let (Some(Some(j)), Some(Ok(req))) = (f.index.get(root), requests.get(root)) else {
        out.why_not = Some("the root is not a conditional proof".into());
        return out;
    };
    let assembled = match f.forest.assemble(*j) {
        Ok(a) => a,
        Err(e) => {
            out.why_not = Some(format!("not assembled: {e}"));
            return out;
        }
    };
    out.final_check = Some(pipeline.final_check(req, &assembled.proof, assembled.hammer_replaced));
    out.assembled = Some(assembled.proof.text);
    out
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
            universe_constraints: vec![],
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
        let g = global_verdicts(ProverKind::Coq, &requests, &verdicts);
        assert_eq!(g, [Some(true), Some(true), None, None, Some(false)]);
    }
}

//! `POST /v1/tree` and `POST /v1/assemble`: one request's checked nodes judged by
//! prod-prover's [`judge_checked`], the pipeline every path that decides a root runs (solve
//! over the proofs as their checks closed them, a globally correct root assembled and
//! re-checked cold by the prover, the canary alarm on every node).

use std::time::Duration;

use prod_check::{CheckRequest, Verdict};
use prod_prover::{judge_checked, FinalCheck, Judgement, ProverKind, Tree};

/// Judge a request's nodes (`verdicts`: their checks); `root`: the node whose complete proof
/// is wanted (`/v1/assemble`), or none (`/v1/tree`). Children are matched within the same
/// imports and context.
pub fn judge_request(
    prover: ProverKind,
    fin: &dyn FinalCheck,
    requests: &[Result<CheckRequest, Verdict>],
    verdicts: &[(Verdict, Duration)],
    root: Option<usize>,
) -> Judgement {
    let tree = Tree {
        nodes: requests,
        root,
        scope: &[],
        qualified_name: "",
        final_timeout: prod_check::TimeLimits::single_final(),
    };
    let local = verdicts.iter().map(|(v, _)| v.clone()).collect();
    judge_checked(prover, fin, &tree, local)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/v1/tree` asks for no root: no final check runs.
    struct NoFinal;

    impl FinalCheck for NoFinal {
        fn final_check(&self, _: &prod_prover::FinalProof<'_>) -> (Verdict, String) {
            unreachable!("no root was asked for")
        }
    }
    use prod_core::ConditionalProof;

    fn req(statement: &str, proof: &str) -> Result<CheckRequest, Verdict> {
        Ok(CheckRequest::new(
            "",
            "",
            statement,
            ConditionalProof::parse_with(proof, ProverKind::Coq.language()).unwrap(),
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
        let g = judge_request(ProverKind::Coq, &NoFinal, &requests, &verdicts, None).global_bools();
        assert_eq!(g, [Some(true), Some(true), None, None, Some(false)]);
    }
}

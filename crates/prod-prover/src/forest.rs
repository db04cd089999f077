//! Checked nodes → global verdicts → a root's complete proof (paper §2). Every command and job
//! that solves trees builds them here, so the rules below hold everywhere alike:
//!
//! * a node's local verdict comes from its check's own [`Verdict`] ([`local_verdict`]): an
//!   `Infra` verdict or no verdict at all is *unknown*, never a failure;
//! * the solver sees each proof as its check closed it (`hammer.` steps replaced by the tactic
//!   the check found, [`prod_check::proof_as_checked`]), so the assembled file never calls
//!   CoqHammer, and the assembly knows when its file needs CoqHammer's tactic library.

use prod_check::Verdict;
use prod_core::tree::{solve, GlobalVerdict, LocalVerdict, Node, Solution};
use prod_core::{assemble, AssembledProof, AssemblyError, ConditionalProof, ProofLanguage};

/// A node's local verdict from its check ([`Verdict::local_verdict`]); unchecked → unknown.
pub fn local_verdict(v: Option<&Verdict>) -> LocalVerdict {
    v.map_or(LocalVerdict::Unknown, Verdict::local_verdict)
}

/// One node with its check, as the solver takes it.
pub struct CheckedNode<'a> {
    pub id: String,
    /// The key of its context: children match only within the same context.
    pub context: String,
    pub statement: String,
    /// The proof as written.
    pub proof: &'a ConditionalProof,
    /// Its check's verdict; `None`: not checked (yet).
    pub verdict: Option<&'a Verdict>,
}

/// Solved nodes: their global verdicts and heights, and the assembly of a correct root.
pub struct Forest<'l> {
    nodes: Vec<Node>,
    /// Per node: its proof had `hammer.` steps replaced.
    hammer: Vec<bool>,
    solution: Solution,
    lang: &'l dyn ProofLanguage,
}

/// A globally correct root's complete proof.
pub struct RootAssembly {
    pub proof: AssembledProof,
    /// Some node of the proof had `hammer.` steps replaced (its file needs CoqHammer's
    /// tactic library).
    pub hammer_replaced: bool,
}

impl<'l> Forest<'l> {
    /// Solve checked nodes (in their order: node `i` of the forest is the `i`-th given).
    pub fn solve<'a>(
        checked: impl IntoIterator<Item = CheckedNode<'a>>,
        lang: &'l dyn ProofLanguage,
    ) -> Self {
        let (mut nodes, mut hammer) = (Vec::new(), Vec::new());
        for c in checked {
            let (proof, replaced) = prod_check::proof_as_checked(c.proof, c.verdict, lang);
            nodes.push(Node {
                id: c.id,
                context: c.context,
                statement: c.statement,
                proof,
                local: local_verdict(c.verdict),
            });
            hammer.push(replaced);
        }
        let solution = solve(&nodes, lang);
        Forest {
            nodes,
            hammer,
            solution,
            lang,
        }
    }

    /// Solve nodes whose local verdicts were decided elsewhere (a round's filters); their
    /// proofs are taken as they are.
    pub fn solve_nodes(nodes: Vec<Node>, lang: &'l dyn ProofLanguage) -> Self {
        Self::solve_decided(nodes, vec![], lang)
    }

    /// [`Forest::solve_nodes`] of proofs already as their checks closed them (`prod tree
    /// solve --verdicts`): `hammer_replaced[i]` says node `i`'s `hammer.` steps were replaced
    /// (missing entries: not replaced).
    pub fn solve_decided(
        nodes: Vec<Node>,
        mut hammer_replaced: Vec<bool>,
        lang: &'l dyn ProofLanguage,
    ) -> Self {
        let solution = solve(&nodes, lang);
        hammer_replaced.resize(nodes.len(), false);
        Forest {
            hammer: hammer_replaced,
            nodes,
            solution,
            lang,
        }
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn solution(&self) -> &Solution {
        &self.solution
    }

    /// Node `i`'s global verdict.
    pub fn verdict(&self, i: usize) -> GlobalVerdict {
        self.solution.verdict(i)
    }

    /// Node `i`'s proof-tree height, when it is globally correct.
    pub fn height(&self, i: usize) -> Option<u32> {
        self.solution.height(i)
    }

    /// The complete proof of node `root` (globally correct and named, else the error).
    pub fn assemble(&self, root: usize) -> Result<RootAssembly, AssemblyError> {
        let proof = assemble(&self.nodes, &self.solution, root, self.lang)?;
        let hammer_replaced = proof
            .lemmas
            .iter()
            .any(|l| self.hammer.get(l.node).copied().unwrap_or(false));
        Ok(RootAssembly {
            proof,
            hammer_replaced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn proved(replacements: Vec<prod_check::Replacement>) -> Verdict {
        Verdict::Proved {
            axioms: vec![],
            replacements,
            time: Duration::ZERO,
            universe_constraints: vec![],
        }
    }

    fn node<'a>(id: &str, statement: &str, proof: &'a ConditionalProof) -> CheckedNode<'a> {
        CheckedNode {
            id: id.into(),
            context: String::new(),
            statement: statement.into(),
            proof,
            verdict: None,
        }
    }

    #[test]
    fn infra_and_unchecked_are_unknown_and_a_root_assembles_through_its_lemma() {
        let lang = &prod_coq::CoqLanguage;
        let root = ConditionalProof::parse_with(
            "<use_invoke> <invoke> Lemma b : 1 = 1. </invoke> exact I.",
            lang,
        )
        .unwrap();
        let lemma = ConditionalProof::parse_with("<no_invoke> hammer.", lang).unwrap();
        let v_root = proved(vec![]);
        let text = lemma.proof_text();
        let at = text.find("hammer.").unwrap();
        let v_lemma = proved(vec![prod_check::Replacement {
            step: 1,
            range: at..at + "hammer.".len(),
            tactic: "reflexivity.".into(),
        }]);
        let infra = Verdict::infra("lost worker");
        let f = Forest::solve(
            [
                CheckedNode {
                    verdict: Some(&v_root),
                    ..node("a", "Lemma a : True.", &root)
                },
                CheckedNode {
                    verdict: Some(&v_lemma),
                    ..node("b", "Lemma b : 1 = 1.", &lemma)
                },
                CheckedNode {
                    verdict: Some(&infra),
                    ..node("c", "Lemma c : True.", &root)
                },
                node("d", "Lemma d : True.", &root),
            ],
            lang,
        );
        assert_eq!(local_verdict(Some(&infra)), LocalVerdict::Unknown);
        assert_eq!(local_verdict(None), LocalVerdict::Unknown);
        assert_eq!(f.verdict(0), GlobalVerdict::Correct);
        assert_eq!(f.verdict(2), GlobalVerdict::Undetermined);
        assert_eq!(f.verdict(3), GlobalVerdict::Undetermined);
        let a = f.assemble(0).unwrap();
        assert!(a.hammer_replaced);
        assert!(!a.proof.text.contains("hammer"), "{}", a.proof.text);
        assert_eq!(a.proof.root().name, "a");
        assert!(f.assemble(2).is_err());
    }
}

//! One tree judged end to end, the way every path that decides a root judges it: each node's
//! check ([`judge`]; [`judge_checked`] when the checks are done), the tree solved over the
//! proofs as their checks closed them ([`Forest`]), the root's complete proof assembled and
//! re-checked cold from nothing but its context ([`FinalCheck`]), and the canary alarm on every
//! node ([`canary_alarm`]). `prod serve`'s `/v1/tree` and `/v1/assemble` and the adversary call
//! it, so the attacks the adversary tries reach exactly what a reward reaches.
//!
//! [`decided_node`] is the other way in, for nodes checked elsewhere: a verdict line as `prod
//! check --json` wrote it (`prod tree solve --verdicts`), read with the facts it carries (the
//! universe constraints that make a node correct alone, the tactics its `hammer.` steps
//! became); a line without them is never read as more than correct alone.

use std::time::Duration;

use prod_check::{CheckRequest, Checker, Verdict, VerdictLine};
use prod_core::tree::{GlobalVerdict, LocalVerdict, Node};
use prod_core::ConditionalProof;

use crate::canary::{canary_alarm, CanaryAlarm, RootDecision};
use crate::final_check::{FinalCheck, FinalProof};
use crate::forest::{CheckedNode, Forest};
use crate::ProverKind;

/// One tree to judge: its nodes (a node that is not a conditional proof comes with the
/// verdict that refused it), all in one context, and the node whose complete proof is wanted.
pub struct Tree<'a> {
    pub nodes: &'a [Result<CheckRequest, Verdict>],
    /// The node to assemble and re-check cold when it is globally correct (`None`: global
    /// verdicts only).
    pub root: Option<usize>,
    /// Coq: the Sections/Modules the context leaves open, outermost first.
    pub scope: &'a [String],
    /// Coq: the root's qualified name (empty = its own name).
    pub qualified_name: &'a str,
    /// The cold re-check's time limit.
    pub final_timeout: Duration,
}

/// What the pipeline decided about a tree.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// Per node: its check (or the verdict that refused its text).
    pub local: Vec<Verdict>,
    /// Per node: its global verdict (a node that is not a conditional proof is incorrect).
    pub global: Vec<GlobalVerdict>,
    /// The root's assembly and cold re-check, when a root was asked for.
    pub root: Option<RootJudgement>,
    /// Every node that states a canary and was accepted, with its index.
    pub alarms: Vec<(usize, CanaryAlarm)>,
}

/// What became of the root's complete proof.
#[derive(Clone, Debug)]
pub struct RootJudgement {
    pub index: usize,
    /// The complete proof (lemmas child-first, then the root), or why there is none.
    pub assembled: Result<String, String>,
    /// The cold re-check's verdict and the file or theory it checked; `None` when the root
    /// was not globally correct or did not assemble.
    pub final_check: Option<(Verdict, String)>,
}

impl Judgement {
    /// Per node: `Some(true)` globally correct, `Some(false)` not, `None` undetermined.
    pub fn global_bools(&self) -> Vec<Option<bool>> {
        self.global.iter().map(|g| g.as_bool()).collect()
    }

    /// The root counts as proved: globally correct and through the cold re-check.
    pub fn proved(&self) -> bool {
        self.root.as_ref().is_some_and(|r| {
            self.global.get(r.index) == Some(&GlobalVerdict::Correct)
                && r.final_check.as_ref().is_some_and(|(v, _)| v.is_proved())
        })
    }
}

/// Check every node of `tree` with `checker`, then [`judge_checked`].
pub fn judge(
    checker: &dyn Checker,
    kind: ProverKind,
    fin: &dyn FinalCheck,
    tree: &Tree<'_>,
) -> Judgement {
    let parsed: Vec<CheckRequest> = tree.nodes.iter().filter_map(|r| r.clone().ok()).collect();
    let mut checked = checker.check_batch(&parsed, &|_, _| {}).into_iter();
    let local = tree
        .nodes
        .iter()
        .map(|r| match r {
            Ok(_) => checked
                .next()
                .unwrap_or_else(|| Verdict::infra("the checker returned no verdict")),
            Err(v) => v.clone(),
        })
        .collect();
    judge_checked(kind, fin, tree, local)
}

/// Judge a tree whose nodes are checked (`local[i]` is node `i`'s verdict): solve, assemble
/// and re-check the root cold when it is globally correct, and look for accepted canaries.
pub fn judge_checked(
    kind: ProverKind,
    fin: &dyn FinalCheck,
    tree: &Tree<'_>,
    local: Vec<Verdict>,
) -> Judgement {
    let lang = kind.language();
    let mut index = vec![None; tree.nodes.len()];
    let mut checked = vec![];
    for (i, (req, v)) in tree.nodes.iter().zip(&local).enumerate() {
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
    let forest = Forest::solve(checked, lang);
    let global: Vec<GlobalVerdict> = index
        .iter()
        .map(|j| j.map_or(GlobalVerdict::Incorrect, |j| forest.verdict(j)))
        .collect();
    let root = tree
        .root
        .map(|r| root_judgement(fin, tree, &forest, index[r], r));
    let alarms = alarms(kind, tree.nodes, &local, &global, root.as_ref());
    Judgement {
        local,
        global,
        root,
        alarms,
    }
}

/// Assemble node `r` (`j`: its index in the forest) and re-check it cold, when it is globally
/// correct.
fn root_judgement(
    fin: &dyn FinalCheck,
    tree: &Tree<'_>,
    forest: &Forest<'_>,
    j: Option<usize>,
    r: usize,
) -> RootJudgement {
    let not = |why: String| RootJudgement {
        index: r,
        assembled: Err(why),
        final_check: None,
    };
    let (Some(j), Some(Ok(req))) = (j, tree.nodes.get(r)) else {
        return not("the root is not a conditional proof".into());
    };
    let a = match forest.assemble(j) {
        Ok(a) => a,
        Err(e) => return not(format!("not assembled: {e}")),
    };
    let final_check = fin.final_check(&FinalProof {
        imports: &req.imports,
        context: &req.context,
        scope: tree.scope,
        qualified_name: tree.qualified_name,
        statement: &req.statement,
        assembled: &a.proof,
        hammer_replaced: a.hammer_replaced,
        timeout: tree.final_timeout,
    });
    RootJudgement {
        index: r,
        assembled: Ok(a.proof.text),
        final_check: Some(final_check),
    }
}

/// Every node that states a canary and was accepted: locally alone, globally, or (the root)
/// through the cold re-check.
fn alarms(
    kind: ProverKind,
    nodes: &[Result<CheckRequest, Verdict>],
    local: &[Verdict],
    global: &[GlobalVerdict],
    root: Option<&RootJudgement>,
) -> Vec<(usize, CanaryAlarm)> {
    let mut out = vec![];
    for (i, (r, v)) in nodes.iter().zip(local).enumerate() {
        let Ok(r) = r else { continue };
        let final_check = root
            .filter(|root| root.index == i)
            .and_then(|root| root.final_check.as_ref())
            .map(|(v, _)| v);
        let decision = RootDecision {
            local: Some((v.local_verdict(), r.proof.lemma_count() > 0)),
            global: global.get(i).copied(),
            final_check,
        };
        if let Some(a) = canary_alarm(kind.language(), &r.statement, &decision) {
            out.push((i, a));
        }
    }
    out
}

/// A node checked elsewhere, as the solver takes it from its verdict line (`None`: it has no
/// line, so its verdict is unknown): the local verdict the line supports (a proved line
/// without its universe constraints is correct alone at most) and the proof as its check
/// closed it (`hammer.` steps replaced); and whether anything was replaced.
pub fn decided_node(
    id: String,
    context: String,
    statement: String,
    proof: &ConditionalProof,
    line: Option<&VerdictLine>,
    kind: ProverKind,
) -> (Node, bool) {
    let (local, proved) = match line {
        Some(l) => (l.local_verdict(), l.proved()),
        None => (LocalVerdict::Unknown, None),
    };
    let (proof, replaced) = prod_check::proof_as_checked(proof, proved.as_ref(), kind.language());
    (
        Node {
            id,
            context,
            statement,
            proof,
            local,
        },
        replaced,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A final check that must not be reached, or answers proved.
    struct Fixed(Option<Verdict>);

    impl FinalCheck for Fixed {
        fn final_check(&self, _: &FinalProof<'_>) -> (Verdict, String) {
            let v = self.0.clone().expect("the final check was not to run");
            (v, "file".into())
        }
    }

    fn proved(constraints: Vec<String>) -> Verdict {
        Verdict::Proved {
            axioms: vec![],
            replacements: vec![],
            time: Duration::ZERO,
            universe_constraints: constraints,
        }
    }

    fn req(statement: &str, proof: &str) -> Result<CheckRequest, Verdict> {
        let p = ConditionalProof::parse_with(proof, ProverKind::Coq.language()).unwrap();
        Ok(CheckRequest::new("", "", statement, p))
    }

    fn tree(nodes: &[Result<CheckRequest, Verdict>], root: Option<usize>) -> Tree<'_> {
        Tree {
            nodes,
            root,
            scope: &[],
            qualified_name: "",
            final_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_canary_root_through_its_lemma_is_judged_globally_and_raises_the_alarm() {
        let nodes = vec![
            req(
                "Lemma r : False.",
                "<use_invoke> <invoke> Lemma b : False. </invoke> exact b.",
            ),
            req("Lemma b : False.", "<no_invoke> exact x."),
            Err(Verdict::rejected("not a conditional proof")),
        ];
        let local = vec![
            proved(vec![]),
            proved(vec![]),
            Verdict::rejected("not a conditional proof"),
        ];
        let fin = Fixed(Some(proved(vec![])));
        let j = judge_checked(ProverKind::Coq, &fin, &tree(&nodes, Some(0)), local);
        assert_eq!(j.global[0], GlobalVerdict::Correct);
        assert_eq!(j.global[2], GlobalVerdict::Incorrect);
        assert!(j.proved());
        let at: Vec<usize> = j.alarms.iter().map(|(i, _)| *i).collect();
        assert_eq!(at, vec![0, 1]);
        assert!(j.root.as_ref().unwrap().assembled.is_ok());
    }

    #[test]
    fn a_lemma_whose_proof_constrains_its_levels_proves_no_root_and_no_final_check_runs() {
        let nodes = vec![
            req(
                "Lemma r : True.",
                "<use_invoke> <invoke> Lemma b : True. </invoke> exact b.",
            ),
            req("Lemma b : True.", "<no_invoke> exact I."),
        ];
        let local = vec![proved(vec![]), proved(vec!["u <= v".into()])];
        let j = judge_checked(ProverKind::Coq, &Fixed(None), &tree(&nodes, Some(0)), local);
        assert_eq!(j.global[0], GlobalVerdict::Incorrect);
        assert!(!j.proved());
        assert!(j.root.unwrap().final_check.is_none());
    }

    #[test]
    fn an_infra_check_leaves_the_root_undetermined_and_a_line_without_universes_is_alone() {
        let nodes = vec![
            req(
                "Lemma r : True.",
                "<use_invoke> <invoke> Lemma b : True. </invoke> exact b.",
            ),
            req("Lemma b : True.", "<no_invoke> exact I."),
        ];
        let local = vec![proved(vec![]), Verdict::infra("lost worker")];
        let j = judge_checked(ProverKind::Coq, &Fixed(None), &tree(&nodes, Some(0)), local);
        assert_eq!(j.global[0], GlobalVerdict::Undetermined);
        let mut line = VerdictLine::new(1.into(), &proved(vec![]), Duration::ZERO, None);
        line.universe_constraints = None;
        let Ok(r) = &nodes[1] else { unreachable!() };
        let (node, replaced) = decided_node(
            "b".into(),
            String::new(),
            r.statement.clone(),
            &r.proof,
            Some(&line),
            ProverKind::Coq,
        );
        assert_eq!(node.local, LocalVerdict::CorrectAlone);
        assert!(!replaced);
    }
}

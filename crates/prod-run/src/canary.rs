//! Canaries: statements that no proof may prove (`False`, `0 = 1`, `forall n : nat, n = S n`),
//! stated in the run's own contexts and sampled, checked, solved and re-checked exactly like
//! the run's theorems, in a phase of their own ([`Phase::Canary`]) so they never enter pass@k.
//!
//! A canary is a soundness alarm, not a statistic: a canary root that is locally correct
//! without proposing a lemma, globally correct, or through the final check means the reward
//! path accepted a wrong proof. The run then stops (exit code 3), the offending nodes are saved
//! to `canary-alarm.jsonl` beside the run store, and the report carries a banner.

use std::path::Path;

use prod_core::{ConditionalProof, ProofLanguage};
use prod_prover::RootDecision;
use prod_report::{CanaryAlarm, CanaryCheck};

use crate::context::RunContext;
use crate::eval::{run_eval, EvalOptions, Theorem};
use crate::policy::SeqPolicy;
use crate::store::{Phase, StoredNode};

/// The canaries (prod-prover's, the same every path that decides a root watches for).
pub use prod_prover::CANARIES;

/// The file the offending nodes of an alarm are saved to (in the run's output directory).
pub const ALARM_FILE: &str = "canary-alarm.jsonl";

/// A canary was accepted: the run must stop.
#[derive(Debug, thiserror::Error)]
#[error("SOUNDNESS ALARM: {} canary node(s) accepted (a statement no proof may prove); the run stopped, the nodes are in {}", .0.alarms.len(), .1)]
pub struct CanaryAccepted(pub CanaryCheck, pub String);

/// The canary theorems of a run: each canary in the context of one of the run's theorems
/// (round robin over them), under a name of its own.
pub fn canary_theorems(theorems: &[Theorem], lang: &dyn ProofLanguage) -> Vec<Theorem> {
    if theorems.is_empty() {
        return vec![];
    }
    CANARIES
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let host = &theorems[i % theorems.len()];
            let tag = c.tag;
            let name = format!("prod_canary_{tag}");
            let statement = c.statement(lang, &name);
            let qualified_name = match host.qualified_name.rsplit_once('.') {
                Some((module, _)) => format!("{module}.{name}"),
                None => name.clone(),
            };
            Theorem {
                id: format!("canary/{tag}"),
                context: host.context.clone(),
                statement,
                ground_truth: None,
                depth: None,
                scope: host.scope.clone(),
                qualified_name,
                file: host.file.clone(),
            }
        })
        .collect()
}

/// Sample, check, solve and re-check the canaries of `theorems` with `policy` (round `round`
/// of the canary phase; resumable like any evaluation), and say which were accepted. An
/// accepted canary is saved to [`ALARM_FILE`] in `out`.
pub fn run_canaries(
    ctx: &RunContext<'_>,
    policy: &mut dyn SeqPolicy,
    theorems: &[Theorem],
    opts: &EvalOptions,
    round: u32,
) -> anyhow::Result<CanaryCheck> {
    let canaries = canary_theorems(theorems, ctx.prover.lang);
    let opts = EvalOptions {
        name: "canaries".into(),
        ..opts.clone()
    };
    let result = run_eval(ctx, policy, &canaries, &opts, round, Phase::Canary)?;
    let nodes = ctx.store.nodes(round, Phase::Canary)?;
    let mut alarms = vec![];
    for n in nodes.iter().filter(|n| n.depth == 0) {
        if let Some(what) = accepted(ctx, n, round)? {
            let canary = n
                .theorem
                .and_then(|t| canaries.get(t as usize))
                .map_or_else(|| "?".to_string(), |t| t.id.clone());
            alarms.push(CanaryAlarm {
                canary,
                tree: n.tree,
                node: n.id,
                what,
                statement: n.statement.clone(),
                completion: n.completion.clone(),
            });
        }
    }
    let check = CanaryCheck {
        canaries: canaries.len(),
        nodes: result.nodes,
        alarms,
    };
    if !check.alarms.is_empty() {
        save_alarm(ctx.out, &nodes, &check)?;
    }
    Ok(check)
}

/// Why a canary root counts as accepted, if it does ([`prod_prover::canary_alarm`]: the rule
/// of every path that decides a root).
fn accepted(ctx: &RunContext<'_>, n: &StoredNode, round: u32) -> anyhow::Result<Option<String>> {
    let store = ctx.store;
    let local = store.verdict(n.id)?;
    let proposes =
        ConditionalProof::parse_with(&n.completion, ctx.prover.lang).map(|p| p.lemma_count() > 0);
    let final_check = match n.theorem {
        Some(th) => store.final_verdict(round, Phase::Canary, th, n.tree)?,
        None => None,
    };
    let decision = RootDecision {
        // A completion that is not a conditional proof proves nothing alone.
        local: local
            .as_ref()
            .map(|v| (v.local_verdict(), proposes.unwrap_or(true))),
        global: store.global(n.id)?.map(|(g, _)| g),
        final_check: final_check.as_ref(),
    };
    let alarm = prod_prover::canary_alarm(ctx.prover.lang, &n.statement, &decision);
    Ok(alarm.map(|a| a.accepted.to_string()))
}

/// `Err(CanaryAccepted)` when `check` has an alarm (its nodes are in `out`'s [`ALARM_FILE`]).
pub fn stop_on_alarm(check: &CanaryCheck, out: &Path) -> Result<(), CanaryAccepted> {
    if check.alarms.is_empty() {
        return Ok(());
    }
    Err(CanaryAccepted(
        check.clone(),
        out.join(ALARM_FILE).display().to_string(),
    ))
}

/// Every node of each accepted canary's tree, one JSON object per line, written atomically.
fn save_alarm(out: &Path, nodes: &[StoredNode], check: &CanaryCheck) -> anyhow::Result<()> {
    let mut text = String::new();
    for a in &check.alarms {
        let root = nodes.iter().find(|r| r.id == a.node).map(|r| r.theorem);
        let tree = nodes
            .iter()
            .filter(|n| n.tree == a.tree && Some(n.theorem) == root);
        for n in tree {
            text.push_str(&serde_json::to_string(&serde_json::json!({
                "alarm": a.what,
                "canary": a.canary,
                "tree": n.tree,
                "node": n.id,
                "depth": n.depth,
                "statement": n.statement,
                "completion": n.completion,
            }))?);
            text.push('\n');
        }
    }
    let path = out.join(ALARM_FILE);
    prod_library::output::write_atomic(&path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn theorem(id: &str, qualified: &str) -> Theorem {
        Theorem {
            id: id.into(),
            context: format!("(* context of {id} *)"),
            statement: format!("Lemma {id} : True."),
            ground_truth: None,
            depth: Some(0),
            scope: vec![],
            qualified_name: qualified.into(),
            file: "f.v".into(),
        }
    }

    #[test]
    fn canaries_live_in_the_run_s_contexts() {
        let ts = [theorem("a", "a"), theorem("b", "M.b")];
        let c = canary_theorems(&ts, &prod_coq::CoqLanguage);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].statement, "Lemma prod_canary_false : False.");
        assert_eq!(
            (c[0].context.as_str(), c[0].qualified_name.as_str()),
            ("(* context of a *)", "prod_canary_false")
        );
        assert_eq!(c[1].qualified_name, "M.prod_canary_zero_is_one");
        assert_eq!(c[2].context, "(* context of a *)");
        assert!(c
            .iter()
            .all(|t| t.id.starts_with("canary/") && t.ground_truth.is_none()));
        assert_eq!(
            canary_theorems(&ts, &prod_isar::IsarLanguage)[0].statement,
            "lemma prod_canary_false: \"False\""
        );
        assert!(canary_theorems(&[], &prod_coq::CoqLanguage).is_empty());
        // Each is a canary by the rule every path uses.
        for t in &c {
            assert!(prod_prover::canary_of(&prod_coq::CoqLanguage, &t.statement).is_some());
        }
    }
}

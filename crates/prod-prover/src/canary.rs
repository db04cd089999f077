//! Canaries: statements no proof may prove (`False`, `0 = 1`, `forall n : nat, n = S n`). A
//! canary root that is accepted — proved locally without proposing a lemma, globally correct,
//! or through the cold re-check — means the reward path accepted a wrong proof: a soundness
//! alarm, not a statistic.
//!
//! Every path that decides a root asks [`canary_alarm`] about it, so one rule says when a
//! canary was accepted, whatever the path: `prod serve`'s `/v1/check`, `/v1/tree` and
//! `/v1/assemble`, `prod tree solve`, and a run's canary phase (`prod eval`, every `prod rl`
//! round). What each path does with an alarm is its own (a metric and a line on stderr, exit
//! code 3, a stopped run).

use prod_check::Verdict;
use prod_core::tree::{GlobalVerdict, LocalVerdict};
use prod_core::ProofLanguage;

/// A statement no proof may prove, in each prover's syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Canary {
    /// A short name (`false`, `zero_is_one`, `n_is_succ`).
    pub tag: &'static str,
    /// The proposition in Coq.
    pub coq: &'static str,
    /// The proposition in Isabelle/HOL.
    pub isabelle: &'static str,
}

/// The canaries.
pub const CANARIES: [Canary; 3] = [
    Canary {
        tag: "false",
        coq: "False",
        isabelle: "False",
    },
    Canary {
        tag: "zero_is_one",
        coq: "0 = 1",
        isabelle: "(0::nat) = 1",
    },
    Canary {
        tag: "n_is_succ",
        coq: "forall n : nat, n = S n",
        isabelle: "\\<forall>n::nat. n = Suc n",
    },
];

impl Canary {
    /// The canary stated as lemma `name` in `lang`'s syntax (Isabelle for `isabelle`, Coq
    /// otherwise).
    pub fn statement(&self, lang: &dyn ProofLanguage, name: &str) -> String {
        if lang.name() == "isabelle" {
            format!("lemma {name}: \"{}\"", self.isabelle)
        } else {
            format!("Lemma {name} : {}.", self.coq)
        }
    }
}

/// The canary `statement` states, whatever its name and layout (`lang`'s statement keys).
pub fn canary_of(lang: &dyn ProofLanguage, statement: &str) -> Option<&'static Canary> {
    let key = lang.normalize_statement(statement);
    CANARIES
        .iter()
        .find(|c| lang.normalize_statement(&c.statement(lang, "prod_canary")) == key)
}

/// What a path decided about one root; what it did not decide is `None`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RootDecision<'a> {
    /// The root's local verdict and whether its proof proposes lemmas.
    pub local: Option<(LocalVerdict, bool)>,
    /// Its global verdict.
    pub global: Option<GlobalVerdict>,
    /// The cold re-check of its assembled proof.
    pub final_check: Option<&'a Verdict>,
}

/// How a canary root was accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Locally correct without proposing a lemma: the check alone proved it.
    Locally,
    /// Globally correct: a tree of locally correct nodes proved it.
    Globally,
    /// Its assembled proof passed the cold re-check.
    FinalCheck,
}

impl std::fmt::Display for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Accepted::Locally => "locally correct without proposing a lemma",
            Accepted::Globally => "globally correct",
            Accepted::FinalCheck => "passed the final check",
        })
    }
}

/// An accepted canary root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CanaryAlarm {
    pub canary: &'static Canary,
    pub accepted: Accepted,
}

impl std::fmt::Display for CanaryAlarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SOUNDNESS ALARM: a root stating the canary `{}` is {}",
            self.canary.coq, self.accepted
        )
    }
}

/// The alarm for a root stating `statement`, when it states a canary and `decision` accepts
/// it (the first of: locally alone, globally, through the final check).
pub fn canary_alarm(
    lang: &dyn ProofLanguage,
    statement: &str,
    decision: &RootDecision<'_>,
) -> Option<CanaryAlarm> {
    let canary = canary_of(lang, statement)?;
    let accepted = if matches!(decision.local, Some((l, false)) if l.is_correct()) {
        Accepted::Locally
    } else if decision.global == Some(GlobalVerdict::Correct) {
        Accepted::Globally
    } else if decision.final_check.is_some_and(Verdict::is_proved) {
        Accepted::FinalCheck
    } else {
        return None;
    };
    Some(CanaryAlarm { canary, accepted })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProverKind;

    #[test]
    fn canaries_are_known_by_their_statement_in_both_languages() {
        for kind in [ProverKind::Coq, ProverKind::Isabelle] {
            let lang = kind.language();
            for c in &CANARIES {
                let s = c.statement(lang, "prod_canary_x");
                assert_eq!(canary_of(lang, &s), Some(c), "{s}");
            }
        }
        let coq = ProverKind::Coq.language();
        assert_eq!(
            canary_of(coq, "Theorem t :  False (* c *) .").map(|c| c.tag),
            Some("false")
        );
        assert_eq!(canary_of(coq, "Lemma t : True."), None);
        assert_eq!(canary_of(coq, "Lemma t : 1 = 0."), None);
    }

    #[test]
    fn one_rule_for_what_accepts_a_canary() {
        let lang = ProverKind::Coq.language();
        let proved = Verdict::Proved {
            axioms: vec![],
            replacements: vec![],
            time: std::time::Duration::ZERO,
            universe_constraints: vec![],
        };
        let failed = Verdict::Failed {
            step: 1,
            message: "no".into(),
        };
        let alarm = |s: &str, d: RootDecision<'_>| canary_alarm(lang, s, &d).map(|a| a.accepted);
        let canary = "Lemma c : 0 = 1.";
        let none = RootDecision::default();
        assert_eq!(alarm(canary, none), None);
        let alone = RootDecision {
            local: Some((LocalVerdict::CorrectAlone, false)),
            ..none
        };
        assert_eq!(alarm(canary, alone), Some(Accepted::Locally));
        assert_eq!(alarm("Lemma c : 1 = 1.", alone), None);
        // A conditional proof proves nothing alone; a tree does.
        let conditional = RootDecision {
            local: Some((LocalVerdict::Correct, true)),
            ..none
        };
        assert_eq!(alarm(canary, conditional), None);
        let tree = RootDecision {
            global: Some(GlobalVerdict::Correct),
            ..conditional
        };
        assert_eq!(alarm(canary, tree), Some(Accepted::Globally));
        let undetermined = RootDecision {
            global: Some(GlobalVerdict::Undetermined),
            ..conditional
        };
        assert_eq!(alarm(canary, undetermined), None);
        assert_eq!(
            alarm(
                canary,
                RootDecision {
                    final_check: Some(&proved),
                    ..undetermined
                }
            ),
            Some(Accepted::FinalCheck)
        );
        assert_eq!(
            alarm(
                canary,
                RootDecision {
                    final_check: Some(&failed),
                    ..undetermined
                }
            ),
            None
        );
    }
}

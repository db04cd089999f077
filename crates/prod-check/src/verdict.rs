//! Verdicts of a local check.

use prod_core::tree::LocalVerdict;
use std::ops::Range;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A `hammer` step (the Sledgehammer analogue, paper §4.1) replaced by the tactic that closed it,
/// so that the assembled proof needs no external prover.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Replacement {
    /// The proof step (1-based sentence index, see [`Verdict`]) that was the hammer step.
    pub step: usize,
    /// Byte range of that sentence in the request's `proof.proof_text()`.
    pub range: Range<usize>,
    /// The complete sentence to put there instead (final `.` included), e.g. `lia.` or
    /// `hauto use: rev_involutive.`.
    pub tactic: String,
}

/// The outcome of checking one node.
///
/// Steps are numbered as the checker runs them: `0` is the set-up (admitting the proposed
/// lemmas and stating the goal), `1..=n` are the proof's own sentences in order, and `n + 1` is
/// the closing step the checker writes itself (`Qed`/`done` and the assumption check).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The goal is closed and the proof relies on nothing beyond the proposed lemmas and the
    /// context's own axioms (`axioms` lists those it does rely on, by name).
    Proved {
        axioms: Vec<String>,
        replacements: Vec<Replacement>,
        time: Duration,
        /// Universe constraints the proof adds among its statement's own universe levels
        /// (beyond those the statement itself imposes), as Coq prints them with the levels
        /// renamed `u0`, `u1`, …: such a proof holds only at some of the levels its statement
        /// admits, so it proves its own statement but never another node's proposal of it
        /// ([`LocalVerdict::CorrectAlone`]). An entry that says `unknown (…)` stands for
        /// constraints the checker could not compare; a verdict stored or written before this
        /// field was kept reads back as [`UNIVERSES_UNRECORDED`]. Always written (`[]` when
        /// none), so that "none" and "not recorded" never look alike.
        #[serde(default = "universes_unrecorded")]
        universe_constraints: Vec<String>,
    },
    /// The proof is wrong: the prover refused step `step`.
    Failed { step: usize, message: String },
    /// Step `step` ran past its time limit.
    TimedOut { step: usize },
    /// The untrusted text broke a rule before or while it ran (e.g. a vernacular command inside
    /// a proof, two sentences in a lemma statement, a NUL byte).
    Rejected { reason: String },
    /// Nothing is known about the proof: the prover crashed, ran out of memory, a worker was
    /// lost, the context does not load. Retried; never cached; never a proof failure.
    Infra { message: String },
}

/// The universe constraints of a `Proved` verdict that was serialized without them (a cache
/// entry, a run store row or a `prod check --json` line from before they were recorded):
/// unknown, so the node proves its own statement only ([`LocalVerdict::CorrectAlone`]).
pub const UNIVERSES_UNRECORDED: &str = "unknown (not recorded with this verdict)";

fn universes_unrecorded() -> Vec<String> {
    vec![UNIVERSES_UNRECORDED.to_string()]
}

/// The verdict's kind alone (what `prod check --json` prints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Proved,
    Failed,
    TimedOut,
    Rejected,
    Infra,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Proved => "proved",
            VerdictKind::Failed => "failed",
            VerdictKind::TimedOut => "timed_out",
            VerdictKind::Rejected => "rejected",
            VerdictKind::Infra => "infra",
        }
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Verdict {
    pub fn kind(&self) -> VerdictKind {
        match self {
            Verdict::Proved { .. } => VerdictKind::Proved,
            Verdict::Failed { .. } => VerdictKind::Failed,
            Verdict::TimedOut { .. } => VerdictKind::TimedOut,
            Verdict::Rejected { .. } => VerdictKind::Rejected,
            Verdict::Infra { .. } => VerdictKind::Infra,
        }
    }

    pub fn is_proved(&self) -> bool {
        matches!(self, Verdict::Proved { .. })
    }

    /// What the tree makes of this verdict (paper §2): proved is locally correct (alone, when
    /// the proof constrains its statement's universe levels), infra is unknown (never
    /// incorrect), anything else incorrect.
    pub fn local_verdict(&self) -> LocalVerdict {
        match self {
            Verdict::Proved {
                universe_constraints,
                ..
            } if !universe_constraints.is_empty() => LocalVerdict::CorrectAlone,
            Verdict::Proved { .. } => LocalVerdict::Correct,
            Verdict::Infra { .. } => LocalVerdict::Unknown,
            _ => LocalVerdict::Incorrect,
        }
    }

    /// Whether this verdict knows its universe constraints: `false` only for a `Proved`
    /// verdict read back from a serialization that did not carry them
    /// ([`UNIVERSES_UNRECORDED`]). A cache treats such an entry as a miss.
    pub fn universes_recorded(&self) -> bool {
        !matches!(self, Verdict::Proved { universe_constraints, .. }
            if universe_constraints.iter().any(|c| c == UNIVERSES_UNRECORDED))
    }

    /// Infra verdicts say nothing about the proof, so they must never be remembered.
    pub fn is_cacheable(&self) -> bool {
        !matches!(self, Verdict::Infra { .. })
    }

    pub fn infra(message: impl Into<String>) -> Self {
        Verdict::Infra {
            message: message.into(),
        }
    }

    pub fn rejected(reason: impl Into<String>) -> Self {
        Verdict::Rejected {
            reason: reason.into(),
        }
    }

    /// A one-line human message (empty for a plain `Proved`).
    pub fn message(&self) -> String {
        match self {
            Verdict::Proved {
                axioms,
                replacements,
                ..
            } => {
                let mut parts = vec![];
                if !axioms.is_empty() {
                    parts.push(format!("assumes {}", axioms.join(", ")));
                }
                for r in replacements {
                    parts.push(format!("step {}: {}", r.step, r.tactic));
                }
                parts.join("; ")
            }
            Verdict::Failed { step, message } => format!("step {step}: {message}"),
            Verdict::TimedOut { step } => format!("step {step} timed out"),
            Verdict::Rejected { reason } => reason.clone(),
            Verdict::Infra { message } => message.clone(),
        }
    }
}

/// The proof as its check closed it: a `Proved` verdict's replacements (the tactics found for
/// `hammer` steps) put in, so that an assembled proof needs no external prover. Returns the
/// proof and whether anything was replaced. Replacements never cross a lemma proposal and
/// assembly drops proposals, so the proposals go first, in order, and the replaced text after
/// them: everything solving and assembly use is kept. `lang` is the proof's language (the
/// rebuilt proof must parse back as it does).
pub fn proof_as_checked(
    proof: &prod_core::ConditionalProof,
    verdict: Option<&Verdict>,
    lang: &dyn prod_core::ProofLanguage,
) -> (prod_core::ConditionalProof, bool) {
    let Some(Verdict::Proved { replacements, .. }) = verdict else {
        return (proof.clone(), false);
    };
    if replacements.is_empty() {
        return (proof.clone(), false);
    }
    let text = apply_replacements(&proof.proof_text(), replacements);
    let mut segments = vec![String::new(); proof.lemma_count()];
    segments.push(text);
    let lemmas = proof.lemmas().map(|l| format!(" {l} ")).collect();
    match prod_core::ConditionalProof::from_parts(proof.t0(), segments, lemmas, lang) {
        Some(q) => (q, true),
        None => (proof.clone(), true),
    }
}

/// The proof text with every replacement applied (ranges must not overlap; ranges that do not
/// fit the text are ignored rather than panicking).
pub fn apply_replacements(proof_text: &str, replacements: &[Replacement]) -> String {
    let mut reps: Vec<&Replacement> = replacements.iter().collect();
    reps.sort_by_key(|r| r.range.start);
    let mut out = String::with_capacity(proof_text.len());
    let mut last = 0;
    for r in reps {
        let Range { start, end } = r.range.clone();
        if start < last || end < start || proof_text.get(start..end).is_none() {
            continue;
        }
        out.push_str(&proof_text[last..start]);
        out.push_str(&r.tactic);
        last = end;
    }
    out.push_str(&proof_text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_json() {
        let v = Verdict::TimedOut { step: 3 };
        assert_eq!(v.kind().as_str(), "timed_out");
        let j = serde_json::to_string(&v).unwrap();
        assert_eq!(j, r#"{"verdict":"timed_out","step":3}"#);
        assert_eq!(serde_json::from_str::<Verdict>(&j).unwrap(), v);
        assert!(!Verdict::infra("x").is_cacheable());
        assert!(Verdict::rejected("x").is_cacheable());
    }

    #[test]
    fn a_proof_as_its_check_closed_it() {
        use prod_core::language::tests_support::ToyLanguage;
        use prod_core::ConditionalProof;
        let p = ConditionalProof::parse_with(
            "<use_invoke> intros. <invoke> Lemma a : True. </invoke> hammer. exact I.",
            &ToyLanguage,
        )
        .unwrap();
        let text = p.proof_text();
        let at = text.find("hammer.").unwrap();
        let proved = Verdict::Proved {
            axioms: vec![],
            replacements: vec![Replacement {
                step: 2,
                range: at..at + "hammer.".len(),
                tactic: "sauto.".into(),
            }],
            time: Duration::ZERO,
            universe_constraints: vec![],
        };
        let (q, replaced) = proof_as_checked(&p, Some(&proved), &ToyLanguage);
        assert!(replaced);
        assert_eq!(q.lemmas().collect::<Vec<_>>(), ["Lemma a : True."]);
        assert!(q.proof_text().contains("intros.") && q.proof_text().contains("sauto. exact I."));
        assert!(!q.proof_text().contains("hammer"));
        // No replacements, no verdict, another verdict: the proof as it is.
        for v in [
            None,
            Some(Verdict::infra("x")),
            Some(Verdict::Proved {
                axioms: vec![],
                replacements: vec![],
                time: Duration::ZERO,
                universe_constraints: vec![],
            }),
        ] {
            assert_eq!(
                proof_as_checked(&p, v.as_ref(), &ToyLanguage),
                (p.clone(), false)
            );
        }
    }

    #[test]
    fn replacements_apply_in_place() {
        let text = " intros. hammer. simpl. hammer.";
        let a = text.find("hammer").unwrap();
        let b = text.rfind("hammer").unwrap();
        let reps = vec![
            Replacement {
                step: 4,
                range: b..b + 7,
                tactic: "lia.".into(),
            },
            Replacement {
                step: 2,
                range: a..a + 7,
                tactic: "sauto.".into(),
            },
        ];
        assert_eq!(
            apply_replacements(text, &reps),
            " intros. sauto. simpl. lia."
        );
        // Out-of-range replacements are ignored, not a panic.
        let bad = vec![Replacement {
            step: 1,
            range: 5..500,
            tactic: "x.".into(),
        }];
        assert_eq!(apply_replacements(text, &bad), text);
    }
}

/// Why untrusted text cannot be run, found by a backend's rules before anything reaches the
/// prover: a broken rule, or text the prover would refuse at `step` (an unclosed string, an
/// incomplete sentence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleError {
    Rejected(String),
    Syntax { step: usize, message: String },
}

impl RuleError {
    /// The final verdict: `Rejected`, or `Failed` at the step.
    pub fn into_verdict(self) -> Verdict {
        match self {
            RuleError::Rejected(reason) => Verdict::Rejected { reason },
            RuleError::Syntax { step, message } => Verdict::Failed { step, message },
        }
    }

    /// The verdict when the text was the `i`-th (0-based) proposed lemma's statement.
    pub fn for_proposed_lemma(self, i: usize) -> Verdict {
        match self {
            RuleError::Rejected(r) => Verdict::rejected(format!("proposed lemma {}: {r}", i + 1)),
            other => other.into_verdict(),
        }
    }
}

//! A verdict as one JSON object beside its node's id: `prod check --json`'s output line,
//! `prod serve`'s results (`/v1/check`, `/v1/tree`, `/v1/assemble`), and what `prod tree solve
//! --verdicts` reads back. One type writes and reads it, so that no fact the tree solver needs
//! can be written by one path and lost on another: besides the kind, a proved line carries the
//! proof's universe constraints (a proof that constrains its statement's levels proves only
//! its own statement, [`LocalVerdict::CorrectAlone`]), the tactics its `hammer.` steps became
//! (the proof as its check closed it) and the axioms it relies on.
//!
//! A proved line without `universe_constraints` (written before they travelled with it) is
//! read as [`crate::verdict::UNIVERSES_UNRECORDED`]: never `Correct`, only `CorrectAlone`.

use std::time::Duration;

use prod_core::tree::LocalVerdict;
use serde::{Deserialize, Serialize};

use crate::verdict::{Replacement, Verdict, VerdictKind, UNIVERSES_UNRECORDED};

/// One verdict line. Reading ignores fields it does not know: the node's own fields follow
/// the verdict's in every line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerdictLine {
    /// The node's id as given (a string or a number).
    pub id: serde_json::Value,
    pub verdict: VerdictKind,
    /// [`Verdict::message`] (may be left out of a line a person wrote).
    #[serde(default)]
    pub message: String,
    /// A proved check's own time; otherwise the wall time of its run (may be left out).
    #[serde(default)]
    pub time_ms: u64,
    /// The verdict's provenance (`coq 8.16.1`, `rocq 9.2`, `isabelle`), where it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prover: Option<String>,
    /// Proved only: the axioms the proof relies on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axioms: Option<Vec<String>>,
    /// Proved only: the `hammer.` steps replaced by the tactic that closed each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacements: Option<Vec<Replacement>>,
    /// Proved only: the universe constraints the proof adds to its statement's levels (`[]`:
    /// none; see [`Verdict::Proved`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe_constraints: Option<Vec<String>>,
}

impl VerdictLine {
    /// Every field a line may write: a node's own fields must not use these names.
    pub const FIELDS: [&'static str; 8] = [
        "id",
        "verdict",
        "message",
        "time_ms",
        "prover",
        "axioms",
        "replacements",
        "universe_constraints",
    ];

    /// The line of verdict `v` of node `id`; `wall` is the time its run took.
    pub fn new(id: serde_json::Value, v: &Verdict, wall: Duration, prover: Option<&str>) -> Self {
        let (time, axioms, replacements, universe_constraints) = match v {
            Verdict::Proved {
                axioms,
                replacements,
                time,
                universe_constraints,
            } => (
                *time,
                Some(axioms.clone()),
                Some(replacements.clone()),
                Some(universe_constraints.clone()),
            ),
            _ => (wall, None, None, None),
        };
        VerdictLine {
            id,
            verdict: v.kind(),
            message: v.message(),
            time_ms: u64::try_from(time.as_millis()).unwrap_or(u64::MAX),
            prover: prover.map(str::to_string),
            axioms,
            replacements,
            universe_constraints,
        }
    }

    /// The line as a JSON object (the caller may append the node's own fields).
    pub fn to_json(&self) -> serde_json::Value {
        // Strings, numbers and lists only: serializing cannot fail.
        serde_json::to_value(self).expect("a verdict line is plain JSON")
    }

    /// A line as written by [`VerdictLine::to_json`] (other fields are ignored).
    pub fn from_json(v: serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(v)
    }

    /// The `Proved` verdict of a proved line, as the solver takes it: its replacements, axioms
    /// and universe constraints (unrecorded when the line has none).
    pub fn proved(&self) -> Option<Verdict> {
        (self.verdict == VerdictKind::Proved).then(|| Verdict::Proved {
            axioms: self.axioms.clone().unwrap_or_default(),
            replacements: self.replacements.clone().unwrap_or_default(),
            time: Duration::from_millis(self.time_ms),
            universe_constraints: self
                .universe_constraints
                .clone()
                .unwrap_or_else(|| vec![UNIVERSES_UNRECORDED.to_string()]),
        })
    }

    /// What the tree makes of this line ([`Verdict::local_verdict`]): proved is correct, or
    /// correct alone when the proof constrains its statement's levels or the line does not
    /// say; infra is unknown; anything else incorrect.
    pub fn local_verdict(&self) -> LocalVerdict {
        match (self.proved(), self.verdict) {
            (Some(v), _) => v.local_verdict(),
            (None, VerdictKind::Infra) => LocalVerdict::Unknown,
            (None, _) => LocalVerdict::Incorrect,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proved(constraints: Vec<String>) -> Verdict {
        Verdict::Proved {
            axioms: vec!["ax".into()],
            replacements: vec![Replacement {
                step: 2,
                range: 3..10,
                tactic: "sauto.".into(),
            }],
            time: Duration::from_millis(12),
            universe_constraints: constraints,
        }
    }

    #[test]
    fn a_line_carries_what_the_solver_needs_and_reads_back() {
        for v in [
            proved(vec![]),
            proved(vec!["u0 <= u1".into()]),
            Verdict::Failed {
                step: 2,
                message: "no".into(),
            },
            Verdict::infra("lost"),
            Verdict::rejected("rule"),
            Verdict::TimedOut { step: 1 },
        ] {
            let line = VerdictLine::new(
                serde_json::json!("n1"),
                &v,
                Duration::from_millis(5),
                Some("coq 8.16.1"),
            );
            let json = line.to_json();
            let back = VerdictLine::from_json(json).unwrap();
            assert_eq!(back, line);
            assert_eq!(back.local_verdict(), v.local_verdict(), "{v:?}");
            if v.is_proved() {
                assert_eq!(back.proved(), Some(v.clone()));
            } else {
                assert_eq!(back.proved(), None);
            }
        }
    }

    #[test]
    fn a_proved_line_without_its_universes_is_correct_alone_only() {
        let old = serde_json::json!({"id": 1, "verdict": "proved", "message": "", "time_ms": 3,
                                     "custom_id": "kept by the caller"});
        let line = VerdictLine::from_json(old).unwrap();
        assert_eq!(line.local_verdict(), LocalVerdict::CorrectAlone);
        assert!(!line.proved().unwrap().universes_recorded());
        // Written now, a proof without constraints says so: `[]`.
        let now = VerdictLine::new(1.into(), &proved(vec![]), Duration::ZERO, None).to_json();
        assert_eq!(now["universe_constraints"], serde_json::json!([]));
        let line = VerdictLine::from_json(now).unwrap();
        assert_eq!(line.local_verdict(), LocalVerdict::Correct);
        // Every field a line writes is named in FIELDS.
        let full = VerdictLine::new(1.into(), &proved(vec![]), Duration::ZERO, Some("p"));
        for key in full.to_json().as_object().unwrap().keys() {
            assert!(VerdictLine::FIELDS.contains(&key.as_str()), "{key}");
        }
        for bad in [
            serde_json::json!({"id": 1, "verdict": "maybe", "message": "", "time_ms": 0}),
            serde_json::json!({"id": 1, "message": "", "time_ms": 0}),
            serde_json::json!({"id": 1, "verdict": "proved", "time_ms": "soon"}),
        ] {
            assert!(VerdictLine::from_json(bad).is_err());
        }
    }

    #[test]
    fn stored_verdicts_without_universes_are_unrecorded() {
        let old =
            r#"{"verdict":"proved","axioms":[],"replacements":[],"time":{"secs":0,"nanos":0}}"#;
        let v: Verdict = serde_json::from_str(old).unwrap();
        assert!(!v.universes_recorded());
        assert_eq!(v.local_verdict(), LocalVerdict::CorrectAlone);
        let now = serde_json::to_string(&proved(vec![])).unwrap();
        assert!(now.contains(r#""universe_constraints":[]"#), "{now}");
        let v: Verdict = serde_json::from_str(&now).unwrap();
        assert!(v.universes_recorded());
        assert_eq!(v.local_verdict(), LocalVerdict::Correct);
    }
}

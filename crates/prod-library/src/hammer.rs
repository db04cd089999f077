//! Hammer replacement (paper Appendix A.3, adapted to Coq): a proof step becomes `hammer.` when
//! (a) it contains a CoqHammer reconstruction tactic (these are what `hammer` itself prints), or
//! (b) it is exactly one tactic of a documented simple list that an automated prover can find.
//! The decision is syntactic, made without running Coq, exactly as in the paper.
//!
//! List (b) is split in two. Tactics that fail unless they close the goal (`lia`, `easy`, …) are
//! replaced wherever they stand alone. Tactics that may succeed without closing the goal
//! (`auto` does nothing when it fails, `field` leaves side conditions, `intuition` may leave
//! goals) are replaced only in a *closing position* — the last step, or a step followed by a
//! bullet or `}` — since elsewhere they would turn into a `hammer.` that must fail.

use prod_coq::{identifiers, sentence_head};

use crate::segment::Step;

/// CoqHammer reconstruction tactics (one list for the project, in `prod-coq`).
pub use prod_coq::COQHAMMER_TACTICS as RECONSTRUCTION_TACTICS;

/// Simple tactics that fail unless they solve the goal (one list with the checker's `hammer.`).
pub use prod_coq::HAMMER_CLOSING_TACTICS as CLOSING_TACTICS;

/// Simple tactics that may succeed without solving the goal: replaced only in closing position.
pub use prod_coq::HAMMER_MAYBE_CLOSING_TACTICS as MAYBE_CLOSING_TACTICS;

/// The replacement sentence.
pub const HAMMER: &str = "hammer.";

fn is_closing_position(steps: &[Step], k: usize) -> bool {
    match steps.get(k + 1) {
        None => true,
        Some(next) => {
            let t = next.text.trim_start();
            t.starts_with('}') || t.starts_with('-') || t.starts_with('+') || t.starts_with('*')
        }
    }
}

/// The CoqHammer tactic names that `texts` (a library's files) define as their own tactics
/// (`Ltac sauto := …`, `Ltac2 …`, `Tactic Notation "sauto" …`), sorted.
pub fn own_hammer_tactics(texts: impl Iterator<Item = String>) -> Vec<String> {
    let mut own = std::collections::BTreeSet::new();
    for text in texts {
        for keyword in ["Ltac ", "Ltac2 ", "Tactic Notation "] {
            for (at, _) in text.match_indices(keyword) {
                let rest = text[at + keyword.len()..].trim_start();
                let rest = rest.strip_prefix("Local ").unwrap_or(rest).trim_start();
                let rest = rest.strip_prefix('"').unwrap_or(rest);
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '\'')
                    .collect();
                if RECONSTRUCTION_TACTICS.contains(&name.as_str()) {
                    own.insert(name);
                }
            }
        }
    }
    own.into_iter().collect()
}

/// Does step `k` become `hammer.`? Returns the rewritten step (leading layout kept).
pub fn replace_step(steps: &[Step], k: usize) -> Option<String> {
    replace_step_except(steps, k, &[])
}

/// [`replace_step`] where the names in `own` are the library's own tactics, not CoqHammer's.
pub fn replace_step_except(steps: &[Step], k: usize, own: &[String]) -> Option<String> {
    let text = &steps.get(k)?.text;
    let body_at = text.len() - text.trim_start().len();
    let (lead, sentence) = text.split_at(body_at);
    let head = sentence_head(sentence);
    // Controls, attributes and goal selectors carry meaning `hammer.` would drop.
    if !head.controls.is_empty()
        || head.has_attributes()
        || head.selector.is_some()
        || !sentence.ends_with('.')
    {
        return None;
    }
    let hit = |r: std::ops::Range<usize>| {
        sentence
            .get(r)
            .is_some_and(|w| RECONSTRUCTION_TACTICS.contains(&w) && !own.iter().any(|o| o == w))
    };
    let bare = sentence
        .trim_end_matches('.')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let replace = identifiers(sentence).into_iter().any(hit)
        || CLOSING_TACTICS.contains(&bare.as_str())
        || (MAYBE_CLOSING_TACTICS.contains(&bare.as_str()) && is_closing_position(steps, k));
    (replace && bare != "hammer").then(|| format!("{lead}{HAMMER}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(texts: &[&str]) -> Vec<Step> {
        texts
            .iter()
            .map(|t| Step {
                text: t.to_string(),
                uses: vec![],
            })
            .collect()
    }

    #[test]
    fn replaces_reconstruction_and_closing_tactics() {
        let s = steps(&[
            "\n  intros.",
            " lia.",
            " sauto use: foo.",
            " auto.",
            " intros.",
            "\n  auto.",
            " lia.",
            " 2: lia.",
            " Time lia.",
            " lia using x.",
        ]);
        let r: Vec<_> = (0..s.len()).map(|k| replace_step(&s, k)).collect();
        assert_eq!(r[0], None);
        assert_eq!(r[1].as_deref(), Some(" hammer."));
        assert_eq!(r[2].as_deref(), Some(" hammer."));
        // `auto.` followed by a tactic: may be a no-op, not replaced.
        assert_eq!(r[3], None);
        assert_eq!(r[4], None);
        assert_eq!(r[5], None, "followed by another tactic");
        assert_eq!(r[6].as_deref(), Some(" hammer."));
        assert_eq!(r[7], None, "goal selector kept");
        assert_eq!(r[8], None, "control kept");
        assert_eq!(r[9], None, "arguments: not the bare tactic");
    }

    #[test]
    fn maybe_closing_in_closing_position() {
        let s = steps(&[" auto.", " -", " auto.", " }", " field."]);
        assert_eq!(replace_step(&s, 0).as_deref(), Some(" hammer."));
        assert_eq!(replace_step(&s, 2).as_deref(), Some(" hammer."));
        assert_eq!(replace_step(&s, 4).as_deref(), Some(" hammer."));
        assert_eq!(replace_step(&s, 9), None);
    }

    #[test]
    fn hammer_itself_is_left_alone() {
        assert_eq!(replace_step(&steps(&[" hammer."]), 0), None);
    }

    /// Coqprime defines its own `sauto`: its steps stay; CoqHammer's other names still count.
    #[test]
    fn a_library_tactic_named_like_coqhammer_is_not_replaced() {
        let own = own_hammer_tactics(
            [
                "Ltac sauto := auto.\nLtac mine := idtac.".to_string(),
                "Tactic Notation \"hauto\" := idtac.".into(),
            ]
            .into_iter(),
        );
        assert_eq!(own, ["hauto", "sauto"]);
        let s = steps(&[" apply f; sauto.", " sfirstorder."]);
        assert_eq!(replace_step_except(&s, 0, &own), None);
        assert_eq!(
            replace_step_except(&s, 1, &own).as_deref(),
            Some(" hammer.")
        );
        assert_eq!(replace_step(&s, 0).as_deref(), Some(" hammer."));
    }
}

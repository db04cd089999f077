//! Hammer leaves: every distinct lemma a tree proposes also gets a node whose proof is the
//! hammer alone ([`HAMMER_PROOF`], `<no_invoke> hammer.`), checked like any node (once per
//! goal: identical requests are sent once, the verification cache answers repeats, and the
//! checker's per-goal hammer memory answers the same goal under another name). A leaf counts
//! for global correctness like any node; it is never the policy's sample, so it is no training
//! example, and the root is never given one (`prod_rl::hammer_leaves`), so CoqHammer alone and
//! ProD stay paired and honest: what the tree proves beyond the hammer alone came from the
//! policy's decomposition.
//!
//! The setting is declared here once, with its default and its help: `prod eval`, `prod
//! demo`, `prod experiment` (`--no-hammer-leaves`) and `prod rl` (`hammer_leaves` in
//! `rl.toml`) all read it. It is in effect only where the prover has a hammer: Coq with
//! `hammer.` expansion on. A run without hammer leaves keeps the identity runs had before the
//! setting existed ([`identity_text`]), so a run store made before resumes with the setting
//! off; with it on, its settings differ and the store says so, naming `hammer_leaves`.

use prod_core::ProofLanguage;
use prod_rl::GeneratedNode;
use serde::Serialize;

/// The hammer alone as a conditional proof: a hammer leaf's proof, and CoqHammer alone's
/// proof of every theorem (`crate::baseline`).
pub const HAMMER_PROOF: &str = "<no_invoke> hammer.";

/// Hammer leaves are on unless a run turns them off.
pub const DEFAULT: bool = true;

/// The help of the flag that turns them off (`--no-hammer-leaves`).
pub const OFF_HELP: &str = "Do not add hammer leaves: by default every distinct lemma a proof \
    tree proposes (every level, the depth limit included) also gets a `<no_invoke> hammer.` \
    node, checked once per goal, that counts for global correctness like any node (never for \
    the root, never a training example). Reports give the theorems proved with hammer leaves \
    apart from those proved by sampled nodes only. Coq with the hammer on only.";

/// `serde`'s default of the setting ([`DEFAULT`]).
pub fn default_on() -> bool {
    DEFAULT
}

/// Whether hammer leaves are in effect: asked for, and the prover has a hammer (Coq with
/// `hammer.` expansion).
pub fn in_effect(asked: bool, prover: prod_prover::ProverKind, hammer: bool) -> bool {
    asked && prover.is_coq() && hammer
}

/// `generated` followed by its hammer leaves.
pub(crate) fn with_leaves(
    generated: &[GeneratedNode],
    lang: &dyn ProofLanguage,
) -> Vec<GeneratedNode> {
    let mut all = generated.to_vec();
    all.extend(prod_rl::hammer_leaves(generated, HAMMER_PROOF, lang));
    all
}

/// `value` as JSON, as a run store keeps its identity: the boolean at `path` (the hammer-leaves
/// setting) left out when it is `false`, which is what every run was before the setting
/// existed; on, it is written, so a store made before refuses to resume with it and names it.
pub(crate) fn identity_text<T: Serialize>(value: &T, path: &[&str]) -> serde_json::Result<String> {
    let mut v = serde_json::to_value(value)?;
    if let Some((last, parents)) = path.split_last() {
        let mut at = Some(&mut v);
        for p in parents {
            at = at.and_then(|x| x.get_mut(*p));
        }
        if let Some(obj) = at.and_then(serde_json::Value::as_object_mut) {
            if obj.get(*last) == Some(&serde_json::Value::Bool(false)) {
                obj.shift_remove(*last);
            }
        }
    }
    serde_json::to_string(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Opts {
        a: u32,
        hammer_leaves: bool,
        z: u32,
    }

    #[derive(Serialize)]
    struct Job {
        options: Opts,
    }

    #[test]
    fn off_is_left_out_of_the_identity_on_is_written() {
        let off = Job {
            options: Opts {
                a: 1,
                hammer_leaves: false,
                z: 2,
            },
        };
        // The order of the other fields is kept: the text equals the old identity's.
        assert_eq!(
            identity_text(&off, &["options", "hammer_leaves"]).unwrap(),
            r#"{"options":{"a":1,"z":2}}"#
        );
        let on = Job {
            options: Opts {
                hammer_leaves: true,
                ..off.options
            },
        };
        assert_eq!(
            identity_text(&on, &["options", "hammer_leaves"]).unwrap(),
            r#"{"options":{"a":1,"hammer_leaves":true,"z":2}}"#
        );
        assert!(!in_effect(true, prod_prover::ProverKind::Isabelle, true));
        assert!(!in_effect(true, prod_prover::ProverKind::Coq, false));
        assert!(in_effect(DEFAULT, prod_prover::ProverKind::Coq, true));
    }
}

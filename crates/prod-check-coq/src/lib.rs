//! ProD's Coq checker.
//!
//! * [`CoqChecker`] — the [`prod_check::Checker`] for Coq: a pool of persistent
//!   `coqtop -emacs -quiet` workers, each under bubblewrap and `prlimit --as`, with a watchdog
//!   outside Coq (SIGINT, then kill, then restart) and recycling; work is grouped by context and
//!   every attempt returns to the context's saved state with `BackTo`.
//! * Local correctness exactly as in the paper ([`session`]): the proposed lemmas are admitted
//!   (`Lemma l : S. Admitted.`), the checker writes `Lemma … Proof.` and `Qed.` itself, each proof
//!   sentence is judged by Coq's own prompt, and `Print Assumptions` may show nothing beyond the
//!   proposed lemmas and axioms the context already had.
//! * [`rules`] — what untrusted text may contain: one rule set for proofs, statements and
//!   proposed lemmas, with the constructs each prover release must refuse derived from the
//!   table of its known kernel bugs ([`bugs`]).
//! * The `hammer.` step: fixed tactic list, then CoqHammer; the tactic that worked is recorded.
//!   [`hammer_cache`] remembers each goal's result, so that the same goal in many samples runs
//!   the provers once (a remembered tactic is re-run by Coq, never trusted).
//! * [`final_check`] — a cold `coqc` of an assembled file in a fresh sandbox, then `coqchk`.
//! * [`plugin`] — the ProD Coq plugin: `ProdAssumptions`, `Print Assumptions` with the walk of
//!   library constants remembered across checks (same output; built once when OCaml and Coq's
//!   development files are installed, else the checker uses `Print Assumptions`).

pub mod assumptions;
pub mod bugs;
pub mod config;
pub mod final_check;
pub mod hammer_cache;
pub mod plugin;
pub mod pool;
pub mod protocol;
pub mod rules;
pub mod sandbox;
pub mod session;
mod universes;
pub mod worker;

pub use config::{
    CoqCheckConfig, FixedTactic, HammerConfig, LoadPathBinding, AFTER_CONTEXT,
    HAMMER_PLUGIN_IMPORT, HAMMER_TACTICS_IMPORT,
};
pub use final_check::{final_check, uses_hammer_tactics, AssembledFile, RenderedFile};
pub use pool::{check_load_paths, installed_root, CoqChecker};

/// The prover and its version from a checker fingerprint, for reports and every verdict's
/// provenance: `coq 8.16.1`, `rocq 9.2`.
pub fn prover_name(fingerprint: &str) -> String {
    let v = fingerprint
        .split("version")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .map(|s| s.trim_end_matches([';', ',']))
        .unwrap_or("?");
    let name = if fingerprint.contains("Rocq") {
        "rocq"
    } else {
        "coq"
    };
    format!("{name} {v}")
}

#[cfg(test)]
mod prover_name_tests {
    #[test]
    fn names() {
        assert_eq!(
            super::prover_name("coq: The Coq Proof Assistant, version 8.16.1; flags …"),
            "coq 8.16.1"
        );
        assert_eq!(
            super::prover_name("coq: The Rocq Prover, version 9.2; flags …"),
            "rocq 9.2"
        );
    }
}

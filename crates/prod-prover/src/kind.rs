//! Which prover checks: the one choice every command and job makes, and what follows from it
//! without starting the prover.

use prod_core::ProofLanguage;
use serde::{Deserialize, Serialize};

/// Which prover a command or job runs on (`--prover`, `prover = "…"` in a job's config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum ProverKind {
    /// Coq (or Rocq with `--coq-root`), run here in the sandbox.
    #[default]
    Coq,
    /// A running Isabelle server.
    Isabelle,
}

impl ProverKind {
    pub fn is_coq(&self) -> bool {
        *self == ProverKind::Coq
    }

    /// The prover's proof language (statement normalisation, lemma names), without starting
    /// the prover.
    pub fn language(self) -> &'static dyn ProofLanguage {
        match self {
            ProverKind::Coq => &prod_coq::CoqLanguage,
            ProverKind::Isabelle => &prod_isar::IsarLanguage,
        }
    }

    /// The trivial-proposal filter's tactic when the configuration names none: the theorem
    /// closes from the lemma alone (`{lemma}` = its name).
    pub fn trivial_tactic(self) -> &'static str {
        match self {
            ProverKind::Coq => "intros; eauto using {lemma}.",
            ProverKind::Isabelle => "using {lemma} by auto",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_configs_and_languages() {
        let k: ProverKind = serde_json::from_str("\"isabelle\"").unwrap();
        assert_eq!(k, ProverKind::Isabelle);
        assert_eq!(serde_json::to_string(&ProverKind::Coq).unwrap(), "\"coq\"");
        assert!(ProverKind::default().is_coq());
        assert_eq!(
            ProverKind::Coq.language().lemma_name("Lemma foo : True."),
            prod_coq::CoqLanguage.lemma_name("Lemma foo : True.")
        );
    }
}

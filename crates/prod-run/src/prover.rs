//! The prover of a run, started once: its checker (behind the run's verification cache or its
//! shared queue), its [`ProofLanguage`], the cold re-check of an assembled proof, its name and
//! version for reports. Which prover ([`ProverKind`]) and the cold re-check itself are
//! prod-prover's, shared with the CLI's checking commands; this module adds what a run needs
//! around them. Evaluation and ProD-RL take a [`Prover`] and never ask which one it is.

use prod_check::Checker;
use prod_check_isabelle::IsabelleCheckConfig;
use prod_core::ProofLanguage;
pub use prod_prover::{CoqFinal, FinalCheck, FinalProof, IsabelleFinal, ProverKind};

/// The prover as a run's phases use it: a [`Prover`]'s borrowed view.
#[derive(Clone, Copy)]
pub struct CheckSetup<'a> {
    pub checker: &'a dyn Checker,
    pub lang: &'a dyn ProofLanguage,
    pub final_check: &'a dyn FinalCheck,
}

/// Everything prover-specific a run needs.
pub struct Prover {
    pub kind: ProverKind,
    /// Behind the run's verification cache.
    pub checker: Box<dyn Checker>,
    pub lang: &'static dyn ProofLanguage,
    pub final_check: Box<dyn FinalCheck>,
    /// Name and version for reports (`coq 8.16.1`, `isabelle Isabelle2022`).
    pub name: String,
}

impl Prover {
    /// The borrowed view the evaluation and the rounds take.
    pub fn setup(&self) -> CheckSetup<'_> {
        CheckSetup {
            checker: &*self.checker,
            lang: self.lang,
            final_check: &*self.final_check,
        }
    }
}

/// The Isabelle settings that make a run what it is (a resumed run must match them): not where
/// it runs (workers, the server's address and password, directories on this machine).
pub fn isabelle_identity(cfg: &IsabelleCheckConfig) -> IsabelleCheckConfig {
    IsabelleCheckConfig {
        server: String::new(),
        password: String::new(),
        server_command: vec![],
        work_dir: None,
        workers: 0,
        ..cfg.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_leaves_out_where_it_runs() {
        let id = isabelle_identity(&IsabelleCheckConfig {
            password: "secret".into(),
            workers: 4,
            ..Default::default()
        });
        assert_eq!((id.password.as_str(), id.workers), ("", 0));
        assert_eq!(id.session, "HOL");
    }
}

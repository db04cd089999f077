//! The prover of a run, chosen once: its checker (behind the verification cache), its
//! [`ProofLanguage`], the cold re-check of an assembled proof, its name and version for reports,
//! and the defaults that depend on it (the trivial-proposal tactic). Evaluation and ProD-RL take
//! a [`Prover`] and never ask which one it is: Coq and Isabelle differ only here and in their
//! crates.

use std::path::Path;
use std::time::Duration;

use prod_check::{Checker, Verdict};
use prod_check_coq::CoqCheckConfig;
use prod_check_isabelle::IsabelleCheckConfig;
use prod_core::{AssembledProof, ProofLanguage};
use serde::{Deserialize, Serialize};

use crate::eval::Theorem;
use crate::job::{BadInput, CoqJobConfig, SharedStore};

/// Which prover a job runs on (`--prover`, `prover = "…"` in `rl.toml`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProverKind {
    #[default]
    Coq,
    Isabelle,
}

impl ProverKind {
    pub fn is_coq(&self) -> bool {
        *self == ProverKind::Coq
    }

    /// The prover's proof language (statement normalisation, lemma names), without starting
    /// the prover.
    pub fn language(self) -> Box<dyn ProofLanguage> {
        match self {
            ProverKind::Coq => Box::new(prod_coq::CoqLanguage),
            ProverKind::Isabelle => Box::new(prod_isar::IsarLanguage),
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

/// What the cold re-check of one proved tree gets.
pub struct FinalProof<'a> {
    pub theorem: &'a Theorem,
    pub assembled: &'a AssembledProof,
    /// Some node's proof had `hammer.` steps replaced by the tactic its check found.
    pub hammer_replaced: bool,
    pub timeout: Duration,
}

/// The cold re-check of an assembled proof, from nothing but the theorem's context.
pub trait FinalCheck: Send + Sync {
    /// The verdict and the complete text that was checked (kept in the run store).
    fn final_check(&self, proof: &FinalProof<'_>) -> (Verdict, String);
}

/// Coq: the whole file compiled by `coqc` in the sandbox, then `Print Assumptions`.
pub struct CoqFinal(pub CoqCheckConfig);

impl FinalCheck for CoqFinal {
    fn final_check(&self, p: &FinalProof<'_>) -> (Verdict, String) {
        let t = p.theorem;
        let rendered = prod_check_coq::AssembledFile {
            context: &t.context,
            scope: &t.scope,
            qualified_name: &t.qualified_name,
            root_statement: &t.statement,
            assembled: &p.assembled.text,
            root: &p.assembled.root().name,
            hammer_replaced: p.hammer_replaced,
        }
        .render();
        let (file, root) = match rendered {
            Ok(r) => r,
            Err(e) => return (Verdict::rejected(e), String::new()),
        };
        let v = prod_check_coq::final_check(&file, &root, &self.0, p.timeout);
        (v, file)
    }
}

/// Isabelle: the assembled theory in a fresh session of the server, the root audited.
pub struct IsabelleFinal(pub IsabelleCheckConfig);

impl FinalCheck for IsabelleFinal {
    fn final_check(&self, p: &FinalProof<'_>) -> (Verdict, String) {
        let cfg = IsabelleCheckConfig {
            attempt_timeout_s: u32::try_from(p.timeout.as_secs().max(1)).unwrap_or(u32::MAX),
            ..self.0.clone()
        };
        // The context is the theory file's prefix: its header gives the imports.
        prod_check_isabelle::final_check_assembled(&cfg, "", &p.theorem.context, p.assembled)
    }
}

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
    pub lang: Box<dyn ProofLanguage>,
    pub final_check: Box<dyn FinalCheck>,
    /// Name and version for reports (`coq 8.16.1`, `isabelle Isabelle2022`).
    pub name: String,
}

impl Prover {
    /// The borrowed view the evaluation and the rounds take.
    pub fn setup(&self) -> CheckSetup<'_> {
        CheckSetup {
            checker: &*self.checker,
            lang: &*self.lang,
            final_check: &*self.final_check,
        }
    }
}

/// The prover settings of a job (its `prover`, `coq` and `isabelle` keys).
#[derive(Clone, Copy, Debug)]
pub struct ProverChoice<'a> {
    pub kind: ProverKind,
    pub coq: &'a CoqJobConfig,
    /// `[isabelle]`: the server and session (the keys of `[check.isabelle]` in `prod.toml`).
    pub isabelle: Option<&'a IsabelleCheckConfig>,
}

impl ProverChoice<'_> {
    /// Start the prover of a run on `dataset` (its load-path bindings for Coq), its checks
    /// cached in `cache`; with a shared store the Coq checks go through the run's queue.
    pub fn start(
        &self,
        dataset: &Path,
        cache: &Path,
        out: &Path,
        shared: Option<&SharedStore>,
    ) -> anyhow::Result<Prover> {
        match self.kind {
            ProverKind::Coq => {
                let cfg = self.coq.config_for_dataset(dataset)?;
                let checker = crate::job::start_run_checker(&cfg, cache, out, shared)?;
                let name = prod_check_coq::prover_name(&checker.fingerprint());
                Ok(Prover {
                    kind: self.kind,
                    checker,
                    lang: Box::new(prod_coq::CoqLanguage),
                    final_check: Box::new(CoqFinal(cfg)),
                    name,
                })
            }
            ProverKind::Isabelle => {
                if shared.is_some() {
                    return Err(BadInput(
                        "prover = \"isabelle\": the PostgreSQL check queue serves Coq only".into(),
                    )
                    .into());
                }
                let cfg = self.isabelle.cloned().unwrap_or_default();
                cfg.validate()
                    .map_err(|e| BadInput(format!("isabelle.{e}")))?;
                let checker =
                    prod_check_isabelle::IsabelleChecker::connect(cfg.clone()).map_err(|e| {
                        anyhow::anyhow!("cannot reach the Isabelle server {}: {e}", cfg.server)
                    })?;
                let name = format!("isabelle {}", isabelle_version(&checker.fingerprint()));
                Ok(Prover {
                    kind: self.kind,
                    checker: Box::new(crate::job::cached(checker, cache)?),
                    lang: Box::new(prod_isar::IsarLanguage),
                    final_check: Box::new(IsabelleFinal(cfg)),
                    name,
                })
            }
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

/// `Isabelle2022` from the checker's fingerprint (`isabelle: Isabelle2022 (id); …`).
fn isabelle_version(fingerprint: &str) -> String {
    fingerprint
        .strip_prefix("isabelle: ")
        .and_then(|r| r.split([';', ' ']).next())
        .unwrap_or("?")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_identity() {
        assert_eq!(
            isabelle_version("isabelle: Isabelle2022 (fake); session HOL"),
            "Isabelle2022"
        );
        assert_eq!(isabelle_version("nonsense"), "?");
        let id = isabelle_identity(&IsabelleCheckConfig {
            password: "secret".into(),
            workers: 4,
            ..Default::default()
        });
        assert_eq!((id.password.as_str(), id.workers), ("", 0));
        assert_eq!(id.session, "HOL");
    }
}

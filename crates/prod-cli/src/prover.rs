//! Which Coq runs the checks: the host's (Coq 8.16 on Debian 12), or a prover root holding
//! another version (Rocq 9.2; docs/provers.md). One flag, shared by every command that checks.

use std::path::PathBuf;

use clap::Args;
use prod_check_coq::{sandbox, CoqCheckConfig};

#[derive(Args, Debug, Clone, Default)]
pub struct ProverArgs {
    /// A Debian root holding the prover instead of the host's Coq, e.g. Rocq 9.2 built by
    /// `scripts/install-rocq.sh` in ~/.cache/prod/rocq-9.2 (docs/provers.md). The checker's
    /// sandbox mounts its /usr and /lib in place of the host's.
    #[arg(long, value_name = "DIR", env = "PROD_COQ_ROOT")]
    pub coq_root: Option<PathBuf>,
}

impl ProverArgs {
    /// Put the root (if any) into `cfg` and check the result.
    pub fn apply(&self, cfg: &mut CoqCheckConfig) -> Result<(), String> {
        if let Some(r) = &self.coq_root {
            cfg.root = Some(r.clone());
        }
        cfg.validate().map_err(|e| format!("--coq-root: {e}"))
    }

    /// The prover's library directory (`coqc -where`) as a path on this machine.
    pub fn coqlib(&self) -> Result<Option<PathBuf>, String> {
        let Some(_) = &self.coq_root else {
            return Ok(None);
        };
        let mut cfg = CoqCheckConfig::default();
        self.apply(&mut cfg)?;
        sandbox::coqlib(&cfg).map(Some)
    }
}

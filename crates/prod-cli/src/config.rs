//! `--config FILE`: the config file `prod.toml` of every command that checks. What the file
//! holds, where it is looked up and how its `[check]` section is read is prod-prover's
//! ([`prod_prover::config`]); command-line options override the file.

use std::path::PathBuf;

/// `--config FILE`: one flag, one help, for every command that reads `prod.toml`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ConfigArg {
    /// Config file (default: $PROD_CONFIG, else ./prod.toml if present): its `[check]`,
    /// `[check.coq]` and `[check.isabelle]` tables, under the flags.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    /// The `[check]` section (its defaults without a file), every number checked.
    pub fn check_section(&self) -> anyhow::Result<prod_prover::CheckSection> {
        prod_prover::CheckSection::load(self.config.as_deref()).map_err(|e| anyhow::anyhow!(e))
    }

    /// `[check.coq]` with `--coq-root` over its `root`, checked: the Coq settings of a command
    /// that checks (its own flags go on top).
    pub fn coq_config(
        &self,
        root: &crate::prover::ProverArgs,
    ) -> anyhow::Result<prod_check_coq::CoqCheckConfig> {
        let mut cfg = self.check_section()?.coq;
        root.apply(&mut cfg).map_err(|e| anyhow::anyhow!(e))?;
        Ok(cfg)
    }
}

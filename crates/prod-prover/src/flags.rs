//! The prover's flag groups (feature `clap`), one declaration each for every command that
//! checks: which Coq runs the checks (`--coq-root`: the host's Coq, 8.16 on Debian 12, or a
//! prover root holding another version, Rocq 9.2; docs/provers.md), the load-path bindings of
//! compiled libraries that are not installed (`--load-path`) and the config file (`--config`: what it holds and where it is looked up is [`crate::config`]'s;
//! the flags go over it). The checker's own settings are flag groups beside their types
//! ([`crate::CheckerSettings`], [`crate::Overrides`], [`crate::IsabelleServer`]).

use std::path::{Path, PathBuf};

use clap::Args;
use prod_check_coq::{sandbox, CoqCheckConfig, LoadPathBinding};

/// `--coq-root`'s help, for every flag group that has it (this one, [`crate::CheckerSettings`]).
pub const COQ_ROOT_HELP: &str = "A Debian root holding the prover instead of the host's Coq, \
e.g. Rocq 9.2 built by `scripts/install-rocq.sh` in ~/.cache/prod/rocq-9.2 (docs/provers.md). \
The checker's sandbox mounts its /usr and /lib in place of the host's";

/// `--load-path`'s help.
pub const LOAD_PATH_HELP: &str = "Bind a directory of compiled `.vo` files to a logical root \
(`-Q DIR Root` in every Coq process, DIR mounted read-only in the sandbox), e.g. \
data/mine/lib/MyLib=MyLib. Repeatable. A dataset's own bindings (its stats.json) are used \
without this flag; a root may not shadow Coq's or an installed library's";

/// `--config`'s help.
pub const CONFIG_HELP: &str = "Config file (default: $PROD_CONFIG, else ./prod.toml if \
present): its `[check]`, `[check.coq]` and `[check.isabelle]` tables, under the flags";

/// `--coq-root`: which Coq runs the checks.
#[derive(Args, Debug, Clone, Default)]
pub struct ProverArgs {
    #[arg(long, value_name = "DIR", env = "PROD_COQ_ROOT", help = COQ_ROOT_HELP)]
    pub coq_root: Option<PathBuf>,
}

/// Compiled libraries that are not installed.
#[derive(Args, Debug, Clone, Default)]
pub struct LoadPathArgs {
    #[arg(long = "load-path", value_name = "DIR=ROOT", value_parser = LoadPathBinding::parse,
          help = LOAD_PATH_HELP)]
    pub load_path: Vec<LoadPathBinding>,
}

impl LoadPathArgs {
    /// Put the `--load-path` bindings and those of `dataset` (if any) into `cfg` and check them
    /// ([`crate::add_load_paths`]). Call after the prover root is set.
    pub fn apply(&self, cfg: &mut CoqCheckConfig, dataset: Option<&Path>) -> Result<(), String> {
        crate::add_load_paths(cfg, &self.load_path, dataset)
    }
}

impl ProverArgs {
    /// Put the root (if any) into `cfg` and check the result.
    pub fn apply(&self, cfg: &mut CoqCheckConfig) -> Result<(), String> {
        crate::set_root(cfg, self.coq_root.as_deref())
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

/// `--config FILE`: one flag, one help, for every command that reads `prod.toml`.
#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArg {
    #[arg(long, value_name = "FILE", help = CONFIG_HELP)]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    /// The `[check]` section (its defaults without a file), every number checked.
    pub fn check_section(&self) -> Result<crate::CheckSection, String> {
        crate::CheckSection::load(self.config.as_deref())
    }

    /// `[check.coq]` with `--coq-root` over its `root`, checked: the Coq settings of a command
    /// that checks (its own flags go on top).
    pub fn coq_config(&self, root: &ProverArgs) -> Result<CoqCheckConfig, String> {
        let mut cfg = self.check_section()?.coq;
        root.apply(&mut cfg)?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        prover: ProverArgs,
        #[command(flatten)]
        load_paths: LoadPathArgs,
    }

    #[test]
    fn load_path_flag_parses_and_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let arg = format!("{}=MyLib", dir.path().display());
        let cli = Cli::try_parse_from(["t", "--load-path", &arg]).unwrap();
        assert_eq!(cli.load_paths.load_path[0].logical, "MyLib");
        assert!(cli.prover.coq_root.is_none());
        assert!(Cli::try_parse_from(["t", "--load-path", "nodir"]).is_err());
        let shadow = format!("{}=Coq", dir.path().display());
        let cli = Cli::try_parse_from(["t", "--load-path", &shadow]).unwrap();
        let e = cli
            .load_paths
            .apply(&mut CoqCheckConfig::default(), None)
            .unwrap_err();
        assert!(e.contains("shadow"), "{e}");
    }
}

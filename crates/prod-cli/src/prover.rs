//! Which Coq runs the checks and which libraries it sees: the host's Coq (8.16 on Debian 12)
//! or a prover root holding another version (Rocq 9.2; docs/provers.md), plus the load-path
//! bindings of compiled libraries that are not installed (a user's project compiled into its
//! dataset's `lib/`). One place for these flags, shared by every command that checks.

use std::path::{Path, PathBuf};

use clap::Args;
use prod_check_coq::{sandbox, CoqCheckConfig, LoadPathBinding};
use prod_check_isabelle::IsabelleCheckConfig;

#[derive(Args, Debug, Clone, Default)]
pub struct ProverArgs {
    /// A Debian root holding the prover instead of the host's Coq, e.g. Rocq 9.2 built by
    /// `scripts/install-rocq.sh` in ~/.cache/prod/rocq-9.2 (docs/provers.md). The checker's
    /// sandbox mounts its /usr and /lib in place of the host's.
    #[arg(long, value_name = "DIR", env = "PROD_COQ_ROOT")]
    pub coq_root: Option<PathBuf>,
}

/// Compiled libraries that are not installed.
#[derive(Args, Debug, Clone, Default)]
pub struct LoadPathArgs {
    /// Bind a directory of compiled `.vo` files to a logical root (`-Q DIR Root` in every Coq
    /// process, DIR mounted read-only in the sandbox), e.g. data/mine/lib/MyLib=MyLib.
    /// Repeatable. A dataset's own bindings (its stats.json) are used without this flag; a root
    /// may not shadow Coq's or an installed library's.
    #[arg(long = "load-path", value_name = "DIR=ROOT", value_parser = LoadPathBinding::parse)]
    pub load_path: Vec<LoadPathBinding>,
}

impl LoadPathArgs {
    /// Put the `--load-path` bindings and those of `dataset` (if any) into `cfg` and check them
    /// ([`prod_prover::add_load_paths`]). Call after the prover root is set.
    pub fn apply(&self, cfg: &mut CoqCheckConfig, dataset: Option<&Path>) -> Result<(), String> {
        prod_prover::add_load_paths(cfg, &self.load_path, dataset)
    }
}

/// Where the Isabelle server is and which session it runs: the options of every command that
/// checks with Isabelle (`check`, `serve`, `eval`). Each overrides `[check.isabelle]`.
#[derive(Args, Debug, Clone, Default)]
pub struct IsabelleArgs {
    /// Isabelle: `HOST:PORT` of the server (default: `[check.isabelle] server`).
    #[arg(long, help_heading = "Isabelle")]
    pub server: Option<String>,
    /// Isabelle: the server's password (default: `[check.isabelle] password`).
    #[arg(
        long,
        env = "PROD_ISABELLE_PASSWORD",
        hide_env_values = true,
        help_heading = "Isabelle"
    )]
    pub password: Option<String>,
    /// Isabelle: logic session, e.g. HOL or an AFP session (default HOL).
    #[arg(long, help_heading = "Isabelle")]
    pub session: Option<String>,
    /// Isabelle: directory with ROOT/ROOTS files, e.g. the AFP's `thys` (repeatable).
    #[arg(long, help_heading = "Isabelle")]
    pub dirs: Vec<String>,
    /// Isabelle: start the server with this command when nobody listens ("isabelle server -n prod").
    #[arg(long, help_heading = "Isabelle")]
    pub server_command: Option<String>,
}

impl IsabelleArgs {
    /// The flags as the checker's Isabelle settings.
    pub fn settings(&self) -> prod_prover::IsabelleServer {
        prod_prover::IsabelleServer {
            server: self.server.clone(),
            password: self.password.clone(),
            session: self.session.clone(),
            dirs: self.dirs.clone(),
            server_command: self.server_command.clone(),
        }
    }

    /// The flags over `cfg` (the config file's `[check.isabelle]` or the defaults).
    #[cfg_attr(not(feature = "policy"), allow(dead_code))] // only `prod eval` uses it
    pub fn apply(&self, cfg: &mut IsabelleCheckConfig) {
        self.settings().apply(cfg);
    }
}

impl ProverArgs {
    /// Put the root (if any) into `cfg` and check the result.
    pub fn apply(&self, cfg: &mut CoqCheckConfig) -> Result<(), String> {
        prod_prover::set_root(cfg, self.coq_root.as_deref())
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

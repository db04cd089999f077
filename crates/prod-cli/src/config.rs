//! The config file `prod.toml`: TOML with one section per concern; `[check]` (with `[check.coq]`
//! and `[check.isabelle]`) is the one read, by every command that checks (`check`, `serve`,
//! `eval`, `dataset validate`, `dataset export --verify`; the benchmarks keep their fixed
//! settings so that their figures compare).
//!
//! Looked up in this order: `--config FILE` ([`ConfigArg`]), `$PROD_CONFIG`, `./prod.toml`. No
//! file is fine (every section has defaults); a file that exists but does not parse is an error,
//! never silently ignored. Command-line options override the file.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::de::DeserializeOwned;

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
    pub fn check_section(&self) -> anyhow::Result<crate::check::CheckSection> {
        crate::check::load_section(self.config.as_deref())
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

#[derive(Debug, Default)]
pub struct ConfigFile {
    table: toml::Table,
    path: Option<PathBuf>,
}

impl ConfigFile {
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Self> {
        let env = std::env::var_os("PROD_CONFIG").map(PathBuf::from);
        let path = match (explicit, env) {
            (Some(p), _) => Some(p.to_path_buf()),
            (None, Some(p)) => Some(p),
            (None, None) => Some(PathBuf::from("prod.toml")).filter(|p| p.exists()),
        };
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("config file {} is not valid TOML", path.display()))?;
        Ok(ConfigFile {
            table,
            path: Some(path),
        })
    }

    /// An error about a value in this file (`message` names the section and key).
    pub fn error(&self, message: String) -> anyhow::Error {
        match &self.path {
            Some(p) => anyhow::anyhow!("config file {}: {message}", p.display()),
            None => anyhow::anyhow!("config: {message}"),
        }
    }

    /// The section `name`, or its defaults when absent. Unknown keys are an error if the
    /// section's type says so (`#[serde(deny_unknown_fields)]`).
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> anyhow::Result<T> {
        match self.table.get(name) {
            None => Ok(T::default()),
            Some(v) => v.clone().try_into().with_context(|| {
                format!(
                    "section [{name}] of {}",
                    self.path
                        .as_deref()
                        .unwrap_or(Path::new("config"))
                        .display()
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Default, Debug, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Demo {
        workers: usize,
        timeout_s: f64,
    }

    #[test]
    fn sections_default_and_parse() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prod.toml");
        std::fs::write(&p, "[check]\nworkers = 3\n[other]\nx = 1\n").unwrap();
        let c = ConfigFile::load(Some(&p)).unwrap();
        assert_eq!(
            c.section::<Demo>("check").unwrap(),
            Demo {
                workers: 3,
                timeout_s: 0.0
            }
        );
        assert_eq!(c.section::<Demo>("missing").unwrap(), Demo::default());
        std::fs::write(&p, "[check]\nworkerz = 3\n").unwrap();
        let err = ConfigFile::load(Some(&p))
            .unwrap()
            .section::<Demo>("check")
            .unwrap_err();
        assert!(format!("{err:#}").contains("workerz"), "{err:#}");
        std::fs::write(&p, "[check\n").unwrap();
        assert!(ConfigFile::load(Some(&p)).is_err());
        assert!(ConfigFile::load(Some(&dir.path().join("absent.toml"))).is_err());
    }
}

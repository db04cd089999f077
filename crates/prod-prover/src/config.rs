//! The config file `prod.toml`: TOML with one section per concern; `[check]` (with `[check.coq]`
//! and `[check.isabelle]`) is the one read, by every command that checks (`check`, `serve`,
//! `queue work`, `eval`, `dataset validate`, `dataset export --verify`; the benchmarks keep
//! their fixed settings so that their figures compare).
//!
//! Looked up in this order: the file a command names (`--config FILE`), `$PROD_CONFIG`,
//! `./prod.toml`. No file is fine (every section has defaults); a file that exists but does not
//! parse is an error, never silently ignored. A command's flags go over the file
//! ([`crate::CheckerSettings`] merges them once).

use std::path::{Path, PathBuf};

use prod_check_coq::CoqCheckConfig;
use prod_check_isabelle::IsabelleCheckConfig;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The `[check]` section of `prod.toml`.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct CheckSection {
    /// Verification cache file.
    pub cache: Option<PathBuf>,
    pub coq: CoqCheckConfig,
    pub isabelle: IsabelleCheckConfig,
}

impl CheckSection {
    /// The section of the config file (`explicit`, else `$PROD_CONFIG`, else `./prod.toml`),
    /// its defaults without a file, every number checked. `Err` is the user's input.
    pub fn load(explicit: Option<&Path>) -> Result<Self, String> {
        let file = ConfigFile::load(explicit)?;
        let section: CheckSection = file.section("check")?;
        section.validate().map_err(|e| file.error(e))?;
        Ok(section)
    }

    /// Every number of `[check.coq]` and `[check.isabelle]` in its range.
    pub fn validate(&self) -> Result<(), String> {
        self.coq
            .validate()
            .map_err(|e| format!("[check.coq] {e}"))?;
        self.isabelle
            .validate()
            .map_err(|e| format!("[check.isabelle] {e}"))
    }
}

/// A config file as read: its table and where it came from.
#[derive(Debug, Default)]
pub struct ConfigFile {
    table: toml::Table,
    path: Option<PathBuf>,
}

impl ConfigFile {
    /// `explicit`, else `$PROD_CONFIG`, else `./prod.toml` if present; no file is an empty one.
    pub fn load(explicit: Option<&Path>) -> Result<Self, String> {
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
            .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        let table: toml::Table = text
            .parse()
            .map_err(|e| format!("config file {} is not valid TOML: {e}", path.display()))?;
        Ok(ConfigFile {
            table,
            path: Some(path),
        })
    }

    /// An error about a value in this file (`message` names the section and key).
    pub fn error(&self, message: String) -> String {
        match &self.path {
            Some(p) => format!("config file {}: {message}", p.display()),
            None => format!("config: {message}"),
        }
    }

    /// The section `name`, or its defaults when absent. Unknown keys are an error if the
    /// section's type says so (`#[serde(deny_unknown_fields)]`).
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T, String> {
        match self.table.get(name) {
            None => Ok(T::default()),
            Some(v) => v.clone().try_into().map_err(|e| {
                format!(
                    "section [{name}] of {}: {e}",
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
        assert!(err.contains("workerz"), "{err}");
        std::fs::write(&p, "[check\n").unwrap();
        assert!(ConfigFile::load(Some(&p)).is_err());
        assert!(ConfigFile::load(Some(&dir.path().join("absent.toml"))).is_err());
    }

    #[test]
    fn check_section_numbers_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prod.toml");
        std::fs::write(&p, "[check.coq]\nstep_timeout_s = 0\n").unwrap();
        let e = CheckSection::load(Some(&p)).unwrap_err();
        assert!(e.contains("[check.coq]") && e.contains("prod.toml"), "{e}");
        std::fs::write(&p, "[check]\ncache = \"v.sqlite\"\n").unwrap();
        let s = CheckSection::load(Some(&p)).unwrap();
        assert_eq!(s.cache.as_deref(), Some(Path::new("v.sqlite")));
    }
}

//! How a checker is set up: a command's settings ([`CheckerSettings`]: which prover, its
//! workers and limits, the cache, the prover root, load paths, the Isabelle server) merged with
//! the config file's `[check]` section in one place ([`CheckerSettings::resolve`]), so that
//! `prod check`, `prod serve`, `prod queue work` and `prod bench serve` read the file and
//! their flags alike. Each setting a command leaves unset keeps the file's value; the file's
//! unset values keep the checkers' defaults.
//!
//! The pieces of the merge ([`Overrides`], [`IsabelleServer`], [`set_root`],
//! [`add_load_paths`]) are public for the commands that build their checker's config another
//! way (from a run's recorded settings, a dataset's bindings).

use std::path::{Path, PathBuf};

use prod_check_coq::{CoqCheckConfig, LoadPathBinding};
use prod_check_isabelle::IsabelleCheckConfig;

use crate::config::CheckSection;
use crate::ProverKind;

/// Why the checker could not be set up: the user's input (a command exits 2) or anything else
/// (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupError {
    /// A bad config file, prover root, load path or setting.
    BadInput(String),
    /// The prover or the cache would not start.
    Failure(String),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::BadInput(e) | SetupError::Failure(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for SetupError {}

/// A command's numbers over the config file's `[check.coq]` or `[check.isabelle]`: `None`
/// keeps the file's. Also their flags (feature `clap`).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Overrides {
    /// Persistent workers (default: `[check.coq] workers`, else one per core).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub workers: Option<usize>,
    /// Time limit per proof step, seconds (default: `[check.coq] step_timeout_s`, else 10).
    #[cfg_attr(feature = "clap", arg(long = "timeout", value_name = "TIMEOUT", value_parser = prod_core::range::parse::positive_u32))]
    pub step_timeout_s: Option<u32>,
    /// Address-space limit per Coq process, MiB (default 4096).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_u64))]
    pub memory_mb: Option<u64>,
    /// Do not load CoqHammer; `hammer.` steps then fail like any unknown tactic (Isabelle:
    /// `sledgehammer` steps are not expanded).
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_hammer: bool,
}

impl Overrides {
    /// These over a Coq config.
    pub fn coq(&self, cfg: &mut CoqCheckConfig) {
        if let Some(w) = self.workers {
            cfg.workers = w;
        }
        if let Some(t) = self.step_timeout_s {
            cfg.step_timeout_s = t;
        }
        if let Some(m) = self.memory_mb {
            cfg.memory_limit_mb = m;
        }
        if self.no_hammer {
            cfg.hammer.enabled = false;
        }
    }

    /// These over an Isabelle config (it has no memory limit of its own).
    pub fn isabelle(&self, cfg: &mut IsabelleCheckConfig) {
        if let Some(w) = self.workers {
            cfg.workers = w;
        }
        if let Some(t) = self.step_timeout_s {
            cfg.step_timeout_s = t;
        }
        if self.no_hammer {
            cfg.hammer.enabled = false;
        }
    }
}

/// Where the Isabelle server is and which session it runs; each set value overrides
/// `[check.isabelle]`. Also the flags of every command that checks with Isabelle (`check`,
/// `serve`, `eval`; feature `clap`).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct IsabelleServer {
    /// Isabelle: `HOST:PORT` of the server (default: `[check.isabelle] server`).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Isabelle"))]
    pub server: Option<String>,
    /// Isabelle: the server's password (default: `[check.isabelle] password`).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            env = "PROD_ISABELLE_PASSWORD",
            hide_env_values = true,
            help_heading = "Isabelle"
        )
    )]
    pub password: Option<String>,
    /// Isabelle: logic session, e.g. HOL or an AFP session (default HOL).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Isabelle"))]
    pub session: Option<String>,
    /// Isabelle: directory with ROOT/ROOTS files, e.g. the AFP's `thys` (repeatable).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Isabelle"))]
    pub dirs: Vec<String>,
    /// Isabelle: start the server with this command when nobody listens ("isabelle server -n prod").
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Isabelle"))]
    pub server_command: Option<String>,
}

impl IsabelleServer {
    /// These over `cfg` (the config file's `[check.isabelle]` or the defaults).
    pub fn apply(&self, cfg: &mut IsabelleCheckConfig) {
        if let Some(s) = &self.server {
            cfg.server = s.clone();
        }
        if let Some(p) = &self.password {
            cfg.password = p.clone();
        }
        if let Some(s) = &self.session {
            cfg.session = s.clone();
        }
        if !self.dirs.is_empty() {
            cfg.dirs = self.dirs.clone();
        }
        if let Some(c) = &self.server_command {
            cfg.server_command = c.split_whitespace().map(String::from).collect();
        }
    }
}

/// Put the prover root `root` (if any: a Debian root holding another Coq, docs/provers.md)
/// into `cfg` and check the result; the error names `--coq-root`.
pub fn set_root(cfg: &mut CoqCheckConfig, root: Option<&Path>) -> Result<(), String> {
    if let Some(r) = root {
        cfg.root = Some(r.to_path_buf());
    }
    cfg.validate().map_err(|e| format!("--coq-root: {e}"))
}

/// Put `bindings` and those of `dataset` (if any: its stats.json's, a user's project compiled
/// into `DIR/lib/`) into `cfg` and check them all (existing directories, inside the dataset,
/// no root shadowing Coq's or an installed library's). Call after the prover root is set: the
/// installed libraries are that prover's.
pub fn add_load_paths(
    cfg: &mut CoqCheckConfig,
    bindings: &[LoadPathBinding],
    dataset: Option<&Path>,
) -> Result<(), String> {
    cfg.load_paths.extend(bindings.iter().cloned());
    if let Some(dir) = dataset {
        let installed = prod_check_coq::installed_root(cfg);
        let found = prod_library::compile::dataset_bindings(dir, &installed)?;
        cfg.load_paths
            .extend(found.into_iter().map(|b| LoadPathBinding {
                dir: b.dir,
                logical: b.logical,
            }));
    }
    for lp in &cfg.load_paths {
        lp.validate()?;
    }
    prod_check_coq::check_load_paths(cfg).map(|_| ())
}

/// How a command wants its checker: every value it leaves unset comes from the config file's
/// `[check]` section ([`CheckerSettings::resolve`]). Also the checker's flags of `prod check`,
/// `prod serve` and `prod bench serve` (feature `clap`; `--coq-root`, `--load-path` and
/// `--config` with the help of [`crate::flags`]).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CheckerSettings {
    /// The prover: `coq` (runs here) or `isabelle` (a running Isabelle server).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = ProverKind::Coq))]
    pub prover: ProverKind,
    /// Workers, step limit, memory, hammer.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub overrides: Overrides,
    /// SQLite verification cache file (default: `[check] cache`, else none).
    #[cfg_attr(feature = "clap", arg(long))]
    pub cache: Option<PathBuf>,
    /// Coq: a prover root instead of the host's Coq.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR", env = "PROD_COQ_ROOT",
        help = crate::flags::COQ_ROOT_HELP))]
    pub coq_root: Option<PathBuf>,
    /// Coq: compiled libraries that are not installed (`DIR=Root`).
    #[cfg_attr(feature = "clap", arg(long = "load-path", value_name = "DIR=ROOT",
        value_parser = LoadPathBinding::parse, help = crate::flags::LOAD_PATH_HELP))]
    pub load_paths: Vec<LoadPathBinding>,
    /// Coq: a dataset directory whose library the nodes import (its stats.json bindings: a
    /// user's project compiled into DIR/lib/).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub dataset: Option<PathBuf>,
    /// The config file (else `$PROD_CONFIG`, else `./prod.toml` if present).
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE", help = crate::flags::CONFIG_HELP))]
    pub config: Option<PathBuf>,
    /// Isabelle: the server and session.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub isabelle: IsabelleServer,
    /// Isabelle: leave the logic session running afterwards (faster next time).
    #[cfg_attr(feature = "clap", arg(long, help_heading = "Isabelle"))]
    pub keep_session: bool,
}

/// A prover's checker config, settings and file merged.
#[derive(Clone, Debug)]
pub enum ProverConfig {
    Coq(CoqCheckConfig),
    Isabelle(IsabelleCheckConfig),
}

/// What starts a [`crate::Pipeline`]: the settings over the config file, checked.
#[derive(Clone, Debug)]
pub struct CheckerConfig {
    pub kind: ProverKind,
    pub prover: ProverConfig,
    pub cache: Option<PathBuf>,
    pub keep_session: bool,
}

impl CheckerSettings {
    /// The config file's `[check]` section with these settings over it: the one merge of file
    /// and flags. Every error is the user's input (a bad file, a root or load path that does
    /// not hold).
    pub fn resolve(&self) -> Result<CheckerConfig, SetupError> {
        let bad = SetupError::BadInput;
        let section = CheckSection::load(self.config.as_deref()).map_err(bad)?;
        let mut coq = section.coq;
        set_root(&mut coq, self.coq_root.as_deref()).map_err(bad)?;
        let prover = match self.prover {
            ProverKind::Coq => {
                add_load_paths(&mut coq, &self.load_paths, self.dataset.as_deref()).map_err(bad)?;
                self.overrides.coq(&mut coq);
                ProverConfig::Coq(coq)
            }
            ProverKind::Isabelle => {
                let mut cfg = section.isabelle;
                self.isabelle.apply(&mut cfg);
                self.overrides.isabelle(&mut cfg);
                ProverConfig::Isabelle(cfg)
            }
        };
        Ok(CheckerConfig {
            kind: self.prover,
            prover,
            cache: self.cache.clone().or(section.cache),
            keep_session: self.keep_session,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_go_over_the_file_and_unset_ones_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prod.toml");
        std::fs::write(
            &p,
            "[check]\ncache = \"file.sqlite\"\n[check.coq]\nworkers = 3\nstep_timeout_s = 7\n\
             [check.isabelle]\nsession = \"HOL-Library\"\nworkers = 2\n",
        )
        .unwrap();
        let s = CheckerSettings {
            config: Some(p.clone()),
            overrides: Overrides {
                step_timeout_s: Some(11),
                no_hammer: true,
                ..Overrides::default()
            },
            ..CheckerSettings::default()
        };
        let c = s.resolve().unwrap();
        assert_eq!(c.cache.as_deref(), Some(Path::new("file.sqlite")));
        let ProverConfig::Coq(coq) = c.prover else {
            panic!("a Coq config")
        };
        assert_eq!((coq.workers, coq.step_timeout_s), (3, 11));
        assert!(!coq.hammer.enabled);
        let s = CheckerSettings {
            prover: ProverKind::Isabelle,
            cache: Some("flag.sqlite".into()),
            isabelle: IsabelleServer {
                server: Some("127.0.0.1:1".into()),
                ..IsabelleServer::default()
            },
            ..s
        };
        let c = s.resolve().unwrap();
        assert_eq!(c.cache.as_deref(), Some(Path::new("flag.sqlite")));
        let ProverConfig::Isabelle(isa) = c.prover else {
            panic!("an Isabelle config")
        };
        assert_eq!(
            (isa.session.as_str(), isa.server.as_str(), isa.workers),
            ("HOL-Library", "127.0.0.1:1", 2)
        );
        assert_eq!(isa.step_timeout_s, 11);
    }

    #[test]
    fn a_bad_file_or_load_path_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("prod.toml");
        std::fs::write(&p, "[check.coq]\nstep_timeout_s = 0\n").unwrap();
        let s = CheckerSettings {
            config: Some(p),
            ..CheckerSettings::default()
        };
        assert!(matches!(s.resolve(), Err(SetupError::BadInput(_))));
        let shadow = LoadPathBinding {
            dir: dir.path().to_path_buf(),
            logical: "Coq".into(),
        };
        let s = CheckerSettings {
            load_paths: vec![shadow],
            ..CheckerSettings::default()
        };
        match s.resolve() {
            Err(SetupError::BadInput(e)) => assert!(e.contains("shadow"), "{e}"),
            _ => panic!("a load path shadowing Coq is bad input"),
        }
    }
}

//! A dataset from a prover's library (`prod dataset build`): which library, read as which
//! prover's (a Coq library's files segmented with Coq's lexer, or the AFP's theories with a
//! split of its entries), with which settings; the flags declared once and the build they ask
//! for.

use std::path::PathBuf;

use clap::Args;
use prod_library::dataset::{self, BuildError, DatasetConfig, Progress, Stats};
use prod_library::isar::{AfpOptions, AfpSource, AfpSplit, EntrySelection};
use prod_library::LibrarySpec;

use crate::{ProverKind, SetupError};

/// What `prod dataset build` is given, but for how it prints.
#[derive(Args)]
pub struct BuildFlags {
    /// Prover whose library is read.
    #[arg(long, value_enum, default_value_t = ProverKind::Coq)]
    pub prover: ProverKind,
    /// Coq: `stdlib`, `all`, a Debian package (`libcoq-mathcomp-ssreflect`), a user-contrib root
    /// (`Hammer`), or a directory (with or without a `_CoqProject`). Isabelle: `afp` (with
    /// --afp) or the unpacked AFP directory (the one holding `thys/`).
    #[arg(long, default_value = "stdlib")]
    pub library: String,
    /// Isabelle: the AFP, unpacked (the directory holding `thys/`) or as its release tarball
    /// (`afp-2022-12-06.tar.xz`, unpacked once into the temporary directory and reused).
    #[arg(long)]
    pub afp: Option<PathBuf>,
    /// Isabelle: the test split: `holdout` (the paper's 36 entries), `deps` (a seeded sample of
    /// the entries nothing depends on, --test-fraction), or `after:YYYY-MM-DD` (entries dated
    /// after that day; entries that depend on them are left out).
    #[arg(long, default_value = "holdout")]
    pub split: String,
    /// Isabelle: build only some entries: `N` (the first N in dependency order) or `A,B,C`.
    #[arg(long)]
    pub entries: Option<String>,
    /// Output directory (created; existing dataset files in it are replaced at the end of the
    /// build, a README.md only if a build wrote it).
    #[arg(long)]
    pub out: PathBuf,
    /// Coq installation root (`coqc -where`; default: the host's Coq, or the --coq-root's).
    #[arg(long)]
    pub coqlib: Option<PathBuf>,
    #[command(flatten)]
    pub root: crate::flags::ProverArgs,
    #[command(flatten)]
    pub settings: DatasetConfig,
    /// Keep at most this many bytes of each context inline (0: whole contexts; the dataset then
    /// grows quadratically with file size). Full contexts are always in sources.jsonl.
    /// Default: 16384 for Coq, 4096 for Isabelle (the paper keeps the last 1k tokens; the AFP
    /// with 16 KiB contexts is 9.4 GB of JSONL).
    #[arg(long)]
    pub context_bytes: Option<usize>,
}

impl BuildFlags {
    /// What the build's progress counts: the AFP's theories or a Coq library's files.
    pub fn unit(&self) -> &'static str {
        match self.prover {
            ProverKind::Isabelle => "theories",
            ProverKind::Coq => "files",
        }
    }

    /// Build the dataset into `--out`. Bad input: the settings, the library not found, the AFP
    /// not given; a failure: anything else.
    pub fn build(&self, progress: Progress) -> Result<Stats, SetupError> {
        let cfg = self.config().map_err(SetupError::BadInput)?;
        let result = match self.prover {
            ProverKind::Isabelle => {
                let (dir, opts) = self.afp_selection().map_err(SetupError::BadInput)?;
                let started = std::time::Instant::now();
                AfpSource::load(&dir, opts)
                    .map_err(BuildError::from)
                    .and_then(|src| dataset::build_from(&src, &self.out, &cfg, progress, started))
            }
            ProverKind::Coq => {
                let spec = LibrarySpec::parse(&self.library);
                dataset::build(
                    &spec,
                    &self.out,
                    &cfg,
                    Some(self.prover.language()),
                    progress,
                )
            }
        };
        result.map_err(|e| match e {
            BuildError::Discovery(_) => SetupError::BadInput(e.to_string()),
            e => SetupError::Failure(e.to_string()),
        })
    }

    /// The build's settings (bad input: the two fractions leave nothing to train on, or the
    /// Coq root's `coqlib` cannot be read).
    fn config(&self) -> Result<DatasetConfig, String> {
        let (test, val) = (self.settings.test_fraction, self.settings.val_fraction);
        if test + val >= 1.0 {
            return Err(format!(
                "--test-fraction {test} plus --val-fraction {val} must be less than 1"
            ));
        }
        let mut cfg = DatasetConfig {
            context_bytes: self.context_bytes.unwrap_or(match self.prover {
                ProverKind::Isabelle => DatasetConfig::ISABELLE_CONTEXT_BYTES,
                ProverKind::Coq => DatasetConfig::COQ_CONTEXT_BYTES,
            }),
            ..self.settings.clone()
        };
        match &self.coqlib {
            Some(c) => cfg.coqlib = c.clone(),
            None => cfg.coqlib = self.root.coqlib()?.unwrap_or(cfg.coqlib),
        }
        Ok(cfg)
    }

    /// Isabelle: the unpacked AFP directory and which of its entries and split to read.
    fn afp_selection(&self) -> Result<(PathBuf, AfpOptions), String> {
        let split = AfpSplit::parse(&self.split).map_err(|e| format!("--split: {e}"))?;
        let entries = self
            .entries
            .as_deref()
            .map(EntrySelection::parse)
            .unwrap_or(EntrySelection::All);
        let dir = match (&self.afp, self.library.as_str()) {
            (Some(p), _) => p.clone(),
            (None, "afp" | "stdlib") => {
                return Err(
                    "--prover isabelle needs the AFP: --afp DIR_OR_TARBALL or --library DIR".into(),
                )
            }
            (None, lib) => PathBuf::from(lib),
        };
        let dir = prod_library::isar::unpacked_afp(&dir).map_err(|e| e.to_string())?;
        Ok((dir, AfpOptions { split, entries }))
    }
}

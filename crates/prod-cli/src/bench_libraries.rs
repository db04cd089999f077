//! `prod bench libraries`: the flags, and the report printed (the measuring is
//! `prod_bench::libraries`).

use std::path::PathBuf;

use clap::Args;
use prod_bench::libraries::{self, LibrariesSettings, INSTALL_ALL};
use prod_library::discovery;

use crate::check_progress::CheckProgress;
use crate::{exit, ranges};

#[derive(Args, Debug)]
pub struct BenchLibrariesArgs {
    /// Ground-truth examples checked per library: a random sample of its train, val and test
    /// examples (all of them when it has fewer).
    #[arg(long, default_value_t = LibrariesSettings::default().sample, value_parser = ranges::positive_usize)]
    pub sample: usize,
    /// Seed of every library's sample.
    #[arg(long, default_value_t = LibrariesSettings::default().seed)]
    pub seed: u64,
    /// Directory for the datasets and the per-library results. A rerun with the same sample
    /// and seed reuses the libraries already done.
    #[arg(long, default_value_os_t = LibrariesSettings::default().out)]
    pub out: PathBuf,
    /// Only these packages (comma-separated), e.g. `libcoq-flocq,libcoq-coquelicot`.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Build and count only: check nothing.
    #[arg(long)]
    pub no_validate: bool,
    /// Machine-readable output: one JSON object with every row.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BenchLibrariesArgs) -> exit::Result {
    let installed = discovery::installed_packages();
    if let Some(o) = a
        .only
        .iter()
        .find(|o| !installed.iter().any(|(p, _)| p == *o))
    {
        return Err(exit::input(format!(
            "--only {o}: not an installed libcoq-* package (install every one with: {INSTALL_ALL})"
        )));
    }
    let settings = LibrariesSettings {
        sample: a.sample,
        seed: a.seed,
        out: a.out.clone(),
        only: a.only.clone(),
        validate: !a.no_validate,
    };
    let progress = |n: usize| -> Box<dyn prod_prover::BatchProgress> {
        Box::new(CheckProgress::new("validate", n, a.json))
    };
    let r = libraries::bench_libraries(&settings, installed, &progress)?;
    match a.json {
        true => exit::println(serde_json::to_string(&r).map_err(exit::other)?),
        false => exit::print(&libraries::table(&r)),
    }
}

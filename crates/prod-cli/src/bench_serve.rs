//! `prod bench serve`: the flags of the service's load benchmark; the measurement (the server
//! in this process, the same checks directly and over HTTP) and its table are prod-serve's
//! ([`prod_serve::bench`]).

use clap::Args;
use prod_serve::bench::BenchSettings;

use crate::{exit, ranges};
use prod_prover::CheckerSettings;

#[derive(Args, Debug)]
pub struct BenchServeArgs {
    /// Checks per concurrency level and path (the same number directly and over HTTP).
    #[arg(long, default_value_t = prod_serve::bench::COUNT, value_parser = ranges::positive_usize)]
    pub count: usize,
    /// Concurrency levels: clients (threads directly, connections over HTTP) sending at once.
    #[arg(long, value_delimiter = ',', default_values_t = prod_serve::bench::CONCURRENCY, value_parser = ranges::positive_usize)]
    pub concurrency: Vec<usize>,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub checker: CheckerSettings,
}

pub fn run(a: BenchServeArgs) -> exit::Result {
    let settings = BenchSettings {
        count: a.count,
        concurrency: a.concurrency.clone(),
        checker: a.checker.clone(),
    };
    let report = prod_serve::bench::bench(&settings, &|line| eprintln!("{line}"))?;
    match a.json {
        true => exit::println(report.json())?,
        false => exit::print(&report.text())?,
    }
    for l in &report.levels {
        for (path, s) in [("direct", &l.direct), ("HTTP", &l.http)] {
            for o in &s.other {
                eprintln!("concurrency {}, {path}: not proved: {o}", l.concurrency);
            }
        }
    }
    match report.all_proved() {
        true => Ok(()),
        false => Err(exit::other("not every check was proved (listed above)")),
    }
}

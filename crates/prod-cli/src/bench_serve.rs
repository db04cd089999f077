//! `prod bench serve`: the flags of the service's load benchmark and its table; the
//! measurement (the server in this process, the same checks directly and over HTTP) is
//! prod-serve's ([`prod_serve::bench`]).

use clap::Args;
use prod_serve::bench::{BenchReport, BenchSettings, TARGET_OVERHEAD_MS};

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

pub fn run(a: BenchServeArgs) -> i32 {
    let settings = BenchSettings {
        count: a.count,
        concurrency: a.concurrency.clone(),
        checker: a.checker.clone(),
    };
    let report = match prod_serve::bench::bench(&settings, &|line| eprintln!("{line}")) {
        Ok(r) => r,
        Err(e) => return exit::setup(e),
    };
    if a.json {
        println!("{}", report.json());
    } else {
        print_table(&report);
    }
    for l in &report.levels {
        for (path, s) in [("direct", &l.direct), ("HTTP", &l.http)] {
            for o in &s.other {
                eprintln!("concurrency {}, {path}: not proved: {o}", l.concurrency);
            }
        }
    }
    if report.all_proved() {
        0
    } else {
        1
    }
}

/// The figures as a Markdown table, one row per concurrency level, and the HTTP floor.
fn print_table(r: &BenchReport) {
    println!(
        "{} checks per level and path, one node per request, {} workers, {}\n",
        r.count, r.workers, r.prover
    );
    println!("| concurrency | direct checks/s | HTTP checks/s | direct p50 ms | HTTP p50 ms | direct p95 ms | HTTP p95 ms | direct p99 ms | HTTP p99 ms | HTTP overhead p50 ms |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for l in &r.levels {
        let (d, h) = (&l.direct, &l.http);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.2} |",
            l.concurrency,
            d.per_s(),
            h.per_s(),
            d.pct_ms(50.0),
            h.pct_ms(50.0),
            d.pct_ms(95.0),
            h.pct_ms(95.0),
            d.pct_ms(99.0),
            h.pct_ms(99.0),
            l.overhead_p50_ms()
        );
    }
    let floor = &r.floor;
    println!(
        "\nHTTP floor (the HTTP layer alone: {} requests, one at a time, each node answered \
         without the pool): p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms; target for the HTTP \
         overhead at p50: <= {TARGET_OVERHEAD_MS} ms",
        floor.checks,
        floor.pct_ms(50.0),
        floor.pct_ms(95.0),
        floor.pct_ms(99.0)
    );
}

//! `prod bench …`: the flags of the benchmarks and their printing; the measuring is
//! prod-bench's (`check`, `tree`, `adversary`), prod-serve's (`serve`) and this crate's
//! `bench_libraries.rs` (`libraries`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use prod_bench::adversary::{AdversaryReport, AdversarySettings};
use prod_bench::check::CheckSettings;
use prod_bench::tree::{TreeSettings, TreeSize};
use prod_bench::BenchError;

use crate::{exit, ranges};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Checking speed: `coqc` per check against the persistent worker pool, side by side.
    ///
    /// Checking speed: `coqc` per check vs the persistent worker pool, on real stdlib lemmas
    /// re-checked in place (each in the context of everything before it in its file).
    ///
    /// Example: prod bench check --count 300 --workers 2
    Check(BenchCheckArgs),
    /// The global-correctness solver on synthetic forests of N/10 and N nodes, side by side.
    ///
    /// Global-correctness solver on synthetic proof forests: the median time at N/10 and N nodes
    /// side by side, and their ratio (linear time gives ~10).
    ///
    /// Example: prod bench tree --nodes 100000
    Tree(BenchTreeArgs),
    #[command(verbatim_doc_comment)]
    /// Every installed Debian `libcoq-*` library built into a dataset and a sample checked.
    ///
    /// Every installed Debian `libcoq-*` library: files, blocks, examples and skips of its
    /// dataset build, and the share of a ground-truth sample the checker proves; also the time
    /// of `prod dataset build --library all`. Resumable: each library's row is kept in
    /// OUT/<package>/bench.json.
    ///
    /// Install every library first (Debian):
    ///   apt-get install --no-install-recommends $(apt-cache search --names-only '^libcoq-' | cut -d' ' -f1)
    ///
    /// Examples:
    ///   prod bench libraries --sample 200 --out data/bench-libraries
    ///   prod bench libraries --only libcoq-flocq,libcoq-coquelicot --sample 50
    Libraries(crate::bench_libraries::BenchLibrariesArgs),
    /// `prod serve` under load on loopback: HTTP against the pool directly, side by side.
    ///
    /// `prod serve` under a bounded load on loopback: `--count` checks of cheap honest lemmas
    /// (one per request, one shared context) at each `--concurrency`, over HTTP to an in-process
    /// server and directly to the same pool; checks/s, p50/p95/p99 latency side by side and the
    /// HTTP overhead at p50. Stops by itself.
    ///
    /// Example: prod bench serve --count 120 --concurrency 1,8,64 --workers 2
    Serve(Box<crate::bench_serve::BenchServeArgs>),
    /// The adversary: seeded attack scenarios through check, tree, assembly and final check.
    ///
    /// The adversary: seeded scenarios that move every attack construct (fixpoints, SProp,
    /// kernel-deferring tactics, the context's admitted constants, printed error texts, `t0`,
    /// name capture) between proof, statement, proposal and context and vary their layout, each
    /// through check → tree → assembly → final check with the real prover. Every attack's root
    /// is a canary: none may be globally correct or pass the final check, and no attack node may
    /// end in `infra`; honest look-alikes must be proved. Exit 3 when an attack is accepted.
    ///
    /// Examples:
    ///   prod bench adversary --scenarios 1000 --seed 7
    ///   prod bench adversary --scenarios 300 --coq-root ~/.cache/prod/rocq-9.2 --json
    #[command(verbatim_doc_comment)]
    Adversary(BenchAdversaryArgs),
    /// CoqHammer alone on a split's theorems under hammer profiles side by side: goals, seconds.
    ///
    /// CoqHammer alone (`<no_invoke> hammer.` at each theorem's root) on a dataset split's
    /// theorems under several hammer profiles, interleaved so that load weighs on all alike:
    /// goals proved, by the fixed tactic list or the provers, the hammer's seconds (fixed list,
    /// provers; context loading apart) and the goals closed within t seconds, with the proved
    /// goals and the seconds of each profile against the first. Never answered from a cache.
    /// Resumable: rows are kept in OUT/rows.jsonl.
    ///
    /// Profiles: before (the hammer before this bench measured it: sauto, intros; sauto and best
    /// at 2 s, CoqHammer's own sauto try, provers 10 s within 40 s, slots given to provers that
    /// are not installed), default (the checker's hammer), fixed-only and provers-only (the
    /// default's two phases alone), atp-3s and atp-5s (the default with the provers at 3 s, and
    /// at 5 s within 40 s as the default was before this bench lowered it).
    ///
    /// Examples:
    ///   prod bench hammer --dataset data/stdlib --theorems 40 --out runs/bench-hammer
    ///   prod bench hammer --dataset data/stdlib --profiles default,fixed-only,provers-only --out runs/phases
    #[command(verbatim_doc_comment)]
    Hammer(BenchHammerArgs),
}

#[derive(Args, Debug)]
pub struct BenchHammerArgs {
    #[command(flatten)]
    pub draw: crate::draw::DrawArgs,
    /// Profiles to measure, the first being the one the others are compared with.
    #[arg(long, value_delimiter = ',', default_value = "before,default",
          value_parser = clap::builder::PossibleValuesParser::new(prod_bench::hammer::PROFILES))]
    pub profiles: Vec<String>,
    /// Worker threads (each runs one checker per profile).
    #[arg(long, default_value_t = prod_prover::DEFAULT_WORKERS, value_parser = ranges::positive_usize)]
    pub workers: usize,
    /// Folder of the rows (OUT/rows.jsonl); a rerun resumes from it.
    #[arg(long)]
    pub out: PathBuf,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub prover: prod_prover::flags::ProverArgs,
}

#[derive(Args, Debug)]
pub struct BenchTreeArgs {
    #[command(flatten)]
    pub settings: TreeSettings,
    /// Print the timings as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct BenchAdversaryArgs {
    #[command(flatten)]
    pub settings: AdversarySettings,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub prover: prod_prover::flags::ProverArgs,
}

#[derive(Args, Debug)]
pub struct BenchCheckArgs {
    #[command(flatten)]
    pub settings: CheckSettings,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub prover: prod_prover::flags::ProverArgs,
}

pub fn run(cmd: BenchCommand) -> i32 {
    match cmd {
        BenchCommand::Check(a) => bench_check(a),
        BenchCommand::Tree(a) => bench_tree(a),
        BenchCommand::Libraries(a) => crate::bench_libraries::run(a),
        BenchCommand::Serve(a) => crate::bench_serve::run(*a),
        BenchCommand::Adversary(a) => bench_adversary(a),
        BenchCommand::Hammer(a) => bench_hammer(a),
    }
}

/// A benchmark's error as the exit code: 2 for the user's input, 1 for anything else.
fn bench_error(e: BenchError) -> i32 {
    match e {
        BenchError::BadInput(e) => exit::bad_input(e),
        BenchError::Failure(e) => exit::failure(e),
    }
}

/// `prod bench tree`: one line per forest size as it is measured, then the ratios.
fn bench_tree(a: BenchTreeArgs) -> i32 {
    let json = a.json;
    let report = prod_bench::tree::bench_tree(a.settings, &|s: &TreeSize| match json {
        true => println!("{}", s.json()),
        false => println!("{}", s.text()),
    });
    match json {
        true => println!("{}", report.json()),
        false => println!("{}", report.text()),
    }
    0
}

/// `prod bench adversary`: the scenarios, their outcomes by family, and any accepted attack
/// (exit 3).
fn bench_adversary(a: BenchAdversaryArgs) -> i32 {
    let settings = AdversarySettings {
        coq_root: a.prover.coq_root.clone(),
        ..a.settings.clone()
    };
    let bar = std::cell::OnceCell::new();
    let progress = |done: usize, total: usize| {
        let p = bar.get_or_init(|| {
            prod_progress::Progress::new(
                prod_progress::Display::for_stderr(a.json),
                "adversary",
                "scenarios",
                Some(total as u64),
            )
        });
        if done > 0 {
            p.inc(1);
        }
    };
    let report = prod_bench::adversary::adversary(&settings, &progress);
    if let Some(p) = bar.get() {
        p.finish();
    }
    match report {
        Ok(r) => print_adversary(&r, a.json),
        Err(e) => exit::failure(e),
    }
}

/// The adversary's figures (one JSON object, or lines of text) and its exit code.
fn print_adversary(r: &AdversaryReport, json: bool) -> i32 {
    match json {
        true => println!("{}", r.json()),
        false => print!("{}", r.text()),
    }
    r.exit_code()
}

/// `prod bench hammer`: progress on stderr, the figures on stdout.
fn bench_hammer(a: BenchHammerArgs) -> i32 {
    let profiles = match prod_bench::hammer::profiles(&a.profiles) {
        Ok(p) => p,
        Err(e) => return exit::bad_input(anyhow::anyhow!(e)),
    };
    let settings = prod_bench::hammer::HammerSettings {
        dataset: a.draw.dataset.clone(),
        split: a.draw.split.clone(),
        theorems: a.draw.theorems,
        seed: a.draw.seed,
        workers: a.workers,
        profiles,
        coq_root: a.prover.coq_root.clone(),
        out: a.out.clone(),
    };
    let bar = std::sync::OnceLock::new();
    let progress = |done: usize, total: usize| {
        let p = bar.get_or_init(|| {
            let p = prod_progress::Progress::new(
                prod_progress::Display::for_stderr(a.json),
                "hammer",
                "checks",
                Some(total as u64),
            );
            p.resumed(done.saturating_sub(1) as u64);
            p
        });
        p.inc(1);
    };
    let report = prod_bench::hammer::bench_hammer(&settings, &progress);
    if let Some(p) = bar.get() {
        p.finish();
    }
    match report {
        Ok(r) if a.json => {
            println!("{}", r.json());
            0
        }
        Ok(r) => {
            print!("{}", r.text());
            0
        }
        Err(e) => bench_error(e),
    }
}

/// `prod bench check`: the figures on stdout, the misses on stderr.
fn bench_check(a: BenchCheckArgs) -> i32 {
    let settings = CheckSettings {
        coq_root: a.prover.coq_root.clone(),
        ..a.settings.clone()
    };
    let r = match prod_bench::check::bench_check(&settings, &|line| eprintln!("{line}")) {
        Ok(r) => r,
        Err(e) => return bench_error(e),
    };
    match a.json {
        true => println!("{}", r.json()),
        false => print!("{}", r.text()),
    }
    for f in &r.pool.failures {
        eprintln!("not proved by the pool: {f}");
    }
    for name in r.coqc.errors.iter().take(5) {
        eprintln!("coqc did not close: {name}");
    }
    0
}

//! `prod bench …`: the flags of the benchmarks and their printing; the measuring is
//! prod-bench's (`check`, `tree`, `adversary`), prod-serve's (`serve`) and this crate's
//! `bench_libraries.rs` (`libraries`).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use prod_bench::adversary::AdversarySettings;
use prod_bench::check::CheckSettings;
use prod_bench::tree::{TreeSettings, TreeSize};

use crate::{exit, ranges};

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Checking speed: `coqc` per check against the persistent worker pool, side by side.
    ///
    /// On real stdlib lemmas re-checked in place (each in the context of everything before it
    /// in its file).
    ///
    /// Example: prod bench check --count 300 --workers 2
    Check(BenchCheckArgs),
    /// The global-correctness solver on synthetic forests of N/10 and N nodes, side by side.
    ///
    /// The median time at each size and their ratio (linear time gives ~10).
    ///
    /// Example: prod bench tree --nodes 100000
    Tree(BenchTreeArgs),
    #[command(verbatim_doc_comment)]
    /// Every installed Debian `libcoq-*` library built into a dataset and a sample checked.
    ///
    /// Files, blocks, examples and skips of each build, and the share of a ground-truth sample
    /// the checker proves; also the time of `prod dataset build --library all`. Resumable:
    /// each library's row is kept in OUT/<package>/bench.json.
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
    /// `--count` checks of cheap honest lemmas (one per request, one shared context) at each
    /// `--concurrency`, over HTTP to an in-process server and directly to the same pool; checks/s, p50/p95/p99 latency side by side and the
    /// HTTP overhead at p50. Stops by itself.
    ///
    /// Example: prod bench serve --count 120 --concurrency 1,8,64 --workers 2
    Serve(Box<crate::bench_serve::BenchServeArgs>),
    /// The adversary: seeded attack scenarios through check, tree, assembly and final check.
    ///
    /// The scenarios move every attack construct (fixpoints, SProp, kernel-deferring tactics,
    /// the context's admitted constants, printed error texts, `t0`, name capture) between
    /// proof, statement, proposal and context and vary their layout, each through check →
    /// tree → assembly → final check with the real prover. Every attack's root
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
    /// `<no_invoke> hammer.` at each theorem's root, the profiles interleaved so that load
    /// weighs on all alike: goals proved, by the fixed tactic list or the provers, the hammer's
    /// seconds (fixed list, provers; context loading apart) and the goals closed within t
    /// seconds, with the proved goals and the seconds of each profile against the first. Never answered from a cache.
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

pub fn run(cmd: BenchCommand) -> exit::Result {
    match cmd {
        BenchCommand::Check(a) => bench_check(a),
        BenchCommand::Tree(a) => bench_tree(a),
        BenchCommand::Libraries(a) => crate::bench_libraries::run(a),
        BenchCommand::Serve(a) => crate::bench_serve::run(*a),
        BenchCommand::Adversary(a) => bench_adversary(a),
        BenchCommand::Hammer(a) => bench_hammer(a),
    }
}

/// `prod bench tree`: one line per forest size as it is measured, then the ratios.
fn bench_tree(a: BenchTreeArgs) -> exit::Result {
    let json = a.json;
    let report = prod_bench::tree::bench_tree(a.settings, &|s: &TreeSize| match json {
        true => println!("{}", s.json()),
        false => println!("{}", s.text()),
    });
    match json {
        true => exit::println(report.json()),
        false => exit::println(report.text()),
    }
}

/// `prod bench adversary`: the scenarios, their outcomes by family, and any accepted attack
/// (exit 3).
fn bench_adversary(a: BenchAdversaryArgs) -> exit::Result {
    let settings = AdversarySettings {
        coq_root: a.prover.coq_root.clone(),
        ..a.settings.clone()
    };
    let bar = std::sync::OnceLock::new();
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
    let r = report.map_err(exit::Failure::Other)?;
    match a.json {
        true => exit::println(r.json())?,
        false => exit::print(&r.text())?,
    }
    // An accepted attack is a soundness alarm; any other problem (an attack node ending in
    // infra, an honest look-alike not proved) a failure.
    if r.attacks_accepted > 0 {
        let n = r.attacks_accepted;
        return Err(exit::Failure::Alarm(anyhow::anyhow!(
            "{n} attack(s) accepted"
        )));
    }
    match r.problems.len() {
        0 => Ok(()),
        n => Err(exit::other(format!(
            "{n} problem(s) (in the figures above)"
        ))),
    }
}

/// `prod bench hammer`: progress on stderr, the figures on stdout.
fn bench_hammer(a: BenchHammerArgs) -> exit::Result {
    let profiles = prod_bench::hammer::profiles(&a.profiles).map_err(exit::input)?;
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
    let r = report?;
    match a.json {
        true => exit::println(r.json()),
        false => exit::print(&r.text()),
    }
}

/// `prod bench check`: the figures on stdout, the misses on stderr.
fn bench_check(a: BenchCheckArgs) -> exit::Result {
    let settings = CheckSettings {
        coq_root: a.prover.coq_root.clone(),
        ..a.settings.clone()
    };
    let r = prod_bench::check::bench_check(&settings, &|line| eprintln!("{line}"))?;
    match a.json {
        true => exit::println(r.json())?,
        false => exit::print(&r.text())?,
    }
    for f in &r.pool.failures {
        eprintln!("not proved by the pool: {f}");
    }
    for name in r.coqc.errors.iter().take(5) {
        eprintln!("coqc did not close: {name}");
    }
    Ok(())
}

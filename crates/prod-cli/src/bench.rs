//! `prod bench …`: benchmarks measured side by side in one process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Context as _};
use clap::{Args, Subcommand};
use prod_check::{CheckRequest, Verdict};
use prod_check_coq::{rules, sandbox, CoqCheckConfig, CoqChecker};
use prod_core::{ConditionalProof, T0};

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
    Tree(crate::tree::BenchArgs),
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
}

#[derive(Args, Debug)]
pub struct BenchAdversaryArgs {
    /// Scenarios to run (the first ones are every family in every placement, the rest random
    /// layouts of them).
    #[arg(long, default_value_t = 300, value_parser = ranges::positive_usize)]
    pub scenarios: usize,
    /// Seed of the layouts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Checker workers.
    #[arg(long, default_value_t = 2, value_parser = ranges::positive_usize)]
    pub workers: usize,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub prover: crate::prover::ProverArgs,
}

#[derive(Args, Debug)]
pub struct BenchCheckArgs {
    /// Number of lemmas to check (spread evenly over the file; 0 = every eligible lemma).
    #[arg(long, default_value_t = 300)]
    pub count: usize,
    /// Workers for both ways (pool workers, parallel `coqc` processes).
    #[arg(long, default_value_t = 2, value_parser = ranges::positive_usize)]
    pub workers: usize,
    /// How many of the checks to also run with `coqc` (default: all of them).
    #[arg(long, value_parser = ranges::positive_usize)]
    pub coqc_checks: Option<usize>,
    /// The Coq file to take lemmas from (default: the stdlib's `Lists/List.v`).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Print one JSON object with the figures.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub prover: crate::prover::ProverArgs,
}

pub fn run(cmd: BenchCommand) -> i32 {
    match cmd {
        BenchCommand::Check(a) => match bench_check(a) {
            Ok(code) => code,
            Err(e) => exit::failure(e),
        },
        BenchCommand::Tree(a) => crate::tree::run_bench(a),
        BenchCommand::Libraries(a) => crate::bench_libraries::run(a),
        BenchCommand::Serve(a) => crate::bench_serve::run(*a),
        BenchCommand::Adversary(a) => match bench_adversary(a) {
            Ok(code) => code,
            Err(e) => exit::failure(e),
        },
    }
}

/// `prod bench adversary`: the scenarios, their outcomes by family, and any accepted attack.
fn bench_adversary(a: BenchAdversaryArgs) -> anyhow::Result<i32> {
    use prod_prover::adversary::{run, scenarios};
    let mut cfg = CoqCheckConfig {
        workers: a.workers,
        ..Default::default()
    };
    a.prover.apply(&mut cfg).map_err(|e| anyhow!(e))?;
    let checker = CoqChecker::new(cfg).map_err(|e| anyhow!(e))?;
    let all = scenarios(a.seed, a.scenarios);
    let start = Instant::now();
    let progress = prod_progress::Progress::new(
        prod_progress::Display::for_stderr(a.json),
        "adversary",
        "scenarios",
        Some(all.len() as u64),
    );
    let mut problems = vec![];
    let mut by_family: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    let (mut attacks, mut honest, mut honest_proved) = (0usize, 0usize, 0usize);
    for s in &all {
        let out = run(&checker, s, std::time::Duration::from_secs(120));
        let family = s.id.split('/').next().unwrap_or("").to_string();
        let e = by_family.entry(family).or_default();
        e.0 += 1;
        if s.honest {
            honest += 1;
            honest_proved += usize::from(out.proved());
        } else {
            attacks += 1;
            e.1 += usize::from(out.proved());
        }
        if let Some(p) = out.problem(s) {
            problems.push(p);
        }
        progress.inc(1);
    }
    progress.finish();
    let secs = start.elapsed().as_secs_f64();
    let accepted = problems
        .iter()
        .filter(|p| p.starts_with("ATTACK ACCEPTED"))
        .count();
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "prover": prod_check_coq::prover_name(&prod_check::Checker::fingerprint(&checker)),
                "seed": a.seed,
                "scenarios": all.len(),
                "attacks": attacks,
                "attacks_accepted": accepted,
                "look_alikes": honest,
                "look_alikes_proved": honest_proved,
                "problems": problems,
                "seconds": secs,
            })
        );
    } else {
        println!(
            "{}: {} scenarios (seed {}) in {secs:.1} s: {attacks} attacks, {accepted} accepted; {honest} look-alikes, {honest_proved} proved",
            prod_check_coq::prover_name(&prod_check::Checker::fingerprint(&checker)),
            all.len(),
            a.seed
        );
        for (f, (n, _)) in &by_family {
            println!("  {f:10} {n:5} scenarios");
        }
        for p in &problems {
            println!("{p}");
        }
    }
    Ok(if accepted > 0 {
        3
    } else if problems.is_empty() {
        0
    } else {
        1
    })
}

/// One lemma of the file, re-checked in place.
struct InPlace {
    /// Everything before the lemma.
    context_end: usize,
    /// From the lemma statement to the end of its `Qed.`.
    span: (usize, usize),
    name: String,
    statement: String,
    body: String,
}

/// The stdlib's `Lists/List.v` of the prover that checks: the host's Coq 8 (`theories`), or a
/// prover root's Rocq 9 (`user-contrib/Stdlib`).
fn stdlib_list(prover: &crate::prover::ProverArgs) -> anyhow::Result<PathBuf> {
    if let Some(lib) = prover.coqlib().map_err(|e| anyhow!(e))? {
        return Ok(lib.join("user-contrib/Stdlib/Lists/List.v"));
    }
    let out = Command::new("coqc")
        .arg("-where")
        .output()
        .context("cannot run coqc -where")?;
    let lib = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(Path::new(&lib).join("theories/Lists/List.v"))
}

/// Lemmas written `Lemma … . Proof. <tactics> Qed.` whose text passes the checker's rules.
fn eligible(text: &str) -> Vec<InPlace> {
    let lexed = prod_coq::sentences(text);
    let ss = &lexed.sentences;
    let mut out = vec![];
    let mut i = 0;
    while i + 1 < ss.len() {
        let st = ss[i].text(text);
        let Ok(statement) = rules::check_statement(&rules::RuleSet::strictest(), st) else {
            i += 1;
            continue;
        };
        if ss[i + 1].text(text) != "Proof." {
            i += 1;
            continue;
        }
        let Some(k) = (i + 2..ss.len()).find(|&k| {
            matches!(
                ss[k].text(text),
                "Qed." | "Defined." | "Admitted." | "Abort."
            )
        }) else {
            break;
        };
        let body = &text[ss[i + 1].range.end..ss[k].range.start];
        if ss[k].text(text) == "Qed."
            && rules::check_proof(&rules::RuleSet::strictest(), body).is_ok()
        {
            out.push(InPlace {
                context_end: ss[i].range.start,
                span: (ss[i].range.start, ss[k].range.end),
                name: statement.name,
                statement: st.to_string(),
                body: body.to_string(),
            });
        }
        i = k + 1;
    }
    out
}

/// Coq's own time (`coqc -time`) for each lemma span: the statement, `Proof.`, the tactics, `Qed.`.
fn coq_own_times(
    cfg: &CoqCheckConfig,
    text: &str,
    spans: &[(usize, usize)],
) -> anyhow::Result<Vec<f64>> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("ProdBenchCopy.v"), text)?;
    let mut cmd = sandbox::command(
        cfg,
        Path::new("coqc"),
        &["-q", "-time", "ProdBenchCopy.v"],
        Some(dir.path()),
    );
    let out = cmd.stdin(Stdio::null()).output().context("coqc -time")?;
    if !out.status.success() {
        return Err(anyhow!(
            "coqc -time failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut times = vec![0.0; spans.len()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // `Chars 123 - 456 [sentence] 0.012 secs (0.01u,0.s)`
        let Some(rest) = line.strip_prefix("Chars ") else {
            continue;
        };
        let mut w = rest.split_whitespace();
        let (Some(a), Some("-"), Some(b)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        let (Ok(a), Ok(_b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
            continue;
        };
        let Some(secs) = line
            .rsplit_once(" secs (")
            .and_then(|(l, _)| l.rsplit(' ').next())
            .and_then(|s| s.parse::<f64>().ok())
        else {
            continue;
        };
        if let Some(j) = spans.iter().position(|&(s, e)| a >= s && a < e) {
            times[j] += secs;
        }
    }
    Ok(times)
}

fn coqc_check(cfg: &CoqCheckConfig, file_text: &str) -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    if std::fs::write(dir.path().join("ProdBenchCheck.v"), file_text).is_err() {
        return false;
    }
    // The same kernel settings as the pool's workers, so both ways check the same thing.
    let mut args = vec!["-q"];
    args.extend_from_slice(prod_check_coq::config::PROVER_FLAGS);
    args.push("ProdBenchCheck.v");
    let mut cmd = sandbox::command(cfg, Path::new("coqc"), &args, Some(dir.path()));
    let out = cmd.stdin(Stdio::null()).output();
    // `Print Assumptions` ran (it is the file's last command, so everything before it passed) and
    // shows no axiom: closed, or only section variables for a lemma inside a `Section` (coqc
    // then also complains that the section is not closed at the end of the file).
    let Ok(o) = out else { return false };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (text.contains("Closed under the global context") || text.contains("Section Variables:"))
        && !text.contains("Axioms:")
}

fn bench_check(a: BenchCheckArgs) -> anyhow::Result<i32> {
    if let Err(e) = a.prover.apply(&mut CoqCheckConfig::default()) {
        return Ok(exit::bad_input(anyhow!(e)));
    }
    let path = match &a.file {
        Some(p) => p.clone(),
        None => stdlib_list(&a.prover)?,
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let all = eligible(&text);
    if all.is_empty() {
        return Ok(exit::bad_input(anyhow!(
            "{}: no eligible `Lemma … Proof. … Qed.` found",
            path.display()
        )));
    }
    let n = if a.count == 0 {
        all.len()
    } else {
        a.count.min(all.len())
    };
    // Spread evenly over the file, keeping file order.
    let picked: Vec<&InPlace> = (0..n).map(|j| &all[j * all.len() / n]).collect();
    let mut cfg = CoqCheckConfig {
        workers: a.workers,
        ..Default::default()
    };
    cfg.hammer.enabled = false;
    a.prover.apply(&mut cfg).map_err(|e| anyhow!(e))?;
    eprintln!(
        "bench check: {} lemmas of {} eligible in {}, {} workers",
        n,
        all.len(),
        path.display(),
        cfg.workers
    );
    let pool = PoolRun::measure(&cfg, &text, &picked)?;
    let own_mean = coq_own_mean(&cfg, &text, &picked, &pool)?;
    let coqc = CoqcRun::measure(&cfg, &text, &picked, a.coqc_checks);
    print_check_figures(a.json, &path, n, cfg.workers, &pool, own_mean, &coqc);
    for f in pool.failures {
        eprintln!("not proved by the pool: {f}");
    }
    for name in coqc.errors.iter().take(5) {
        eprintln!("coqc did not close: {name}");
    }
    Ok(0)
}

/// Step 1, the pool: the picked lemmas checked in place, and (1b) Coq's own time in the same
/// kind of worker.
struct PoolRun {
    results: Vec<(Verdict, std::time::Duration)>,
    wall: std::time::Duration,
    proved: usize,
    attempt_mean: f64,
    /// The first few lemmas the pool did not prove, with the verdict.
    failures: Vec<String>,
    /// (Coq's own time, the pool's attempt time) of the lemmas proved both ways, s.
    replay_pairs: Vec<(f64, f64)>,
    replay_own_mean: f64,
    replay_pool_mean: f64,
}

impl PoolRun {
    fn measure(cfg: &CoqCheckConfig, text: &str, picked: &[&InPlace]) -> anyhow::Result<Self> {
        let checker = CoqChecker::new(cfg.clone()).map_err(|e| anyhow!(e))?;
        let requests: Vec<CheckRequest> = picked
            .iter()
            .map(|l| {
                CheckRequest::new(
                    "",
                    &text[..l.context_end],
                    &l.statement,
                    ConditionalProof::plain(T0::NoInvoke, &l.body),
                )
            })
            .collect();
        let t = Instant::now();
        let results = checker.check_batch_timed(&requests, &|_, _, _| {});
        let wall = t.elapsed();
        let proved = results.iter().filter(|(v, _)| v.is_proved()).count();
        let attempt_times: Vec<f64> = results
            .iter()
            .filter_map(|(v, _)| match v {
                Verdict::Proved { time, .. } => Some(time.as_secs_f64()),
                _ => None,
            })
            .collect();
        let attempt_mean = attempt_times.iter().sum::<f64>() / attempt_times.len().max(1) as f64;
        let failures: Vec<String> = results
            .iter()
            .zip(picked)
            .filter(|(r, _)| !r.0.is_proved())
            .take(5)
            .map(|(r, l)| format!("{}: {} {}", l.name, r.0.kind(), r.0.message()))
            .collect();
        // 1b. Coq's own time in the same kind of worker: each lemma's sentences sent in one
        // write with a single sentinel after `Qed.` (no per-sentence round trip, prompt check
        // or `Print Assumptions`), same contexts, same parallelism.
        let replay = checker.replay_batch_timed(&requests);
        let mut replay_pairs = vec![];
        for ((r, _), (p, _)) in replay.iter().zip(&results) {
            if let (Verdict::Proved { time: own, .. }, Verdict::Proved { time: pool, .. }) = (r, p)
            {
                replay_pairs.push((own.as_secs_f64(), pool.as_secs_f64()));
            }
        }
        let replay_own_mean =
            replay_pairs.iter().map(|x| x.0).sum::<f64>() / replay_pairs.len().max(1) as f64;
        let replay_pool_mean =
            replay_pairs.iter().map(|x| x.1).sum::<f64>() / replay_pairs.len().max(1) as f64;
        drop(checker);
        Ok(PoolRun {
            results,
            wall,
            proved,
            attempt_mean,
            failures,
            replay_pairs,
            replay_own_mean,
            replay_pool_mean,
        })
    }
}

/// Step 2, Coq's own time for the same sentences (the ones the pool proved), from
/// `coqc -time`: the mean, s.
fn coq_own_mean(
    cfg: &CoqCheckConfig,
    text: &str,
    picked: &[&InPlace],
    pool: &PoolRun,
) -> anyhow::Result<f64> {
    let spans: Vec<(usize, usize)> = picked.iter().map(|l| l.span).collect();
    let own = coq_own_times(cfg, text, &spans)?;
    let own_proved: Vec<f64> = own
        .iter()
        .zip(&pool.results)
        .filter(|(_, r)| r.0.is_proved())
        .map(|(t, _)| *t)
        .collect();
    Ok(own_proved.iter().sum::<f64>() / own_proved.len().max(1) as f64)
}

/// Step 3, one cold `coqc` per check, same parallelism, on `m` of the picked lemmas.
struct CoqcRun {
    m: usize,
    ok: usize,
    wall: std::time::Duration,
    /// The lemmas `coqc` did not close.
    errors: Vec<String>,
}

impl CoqcRun {
    fn measure(
        cfg: &CoqCheckConfig,
        text: &str,
        picked: &[&InPlace],
        coqc_checks: Option<usize>,
    ) -> Self {
        let n = picked.len();
        let m = coqc_checks.unwrap_or(n).min(n);
        let sample: Vec<&InPlace> = (0..m).map(|j| picked[j * n / m.max(1)]).collect();
        let next = AtomicUsize::new(0);
        let ok = AtomicUsize::new(0);
        let t = Instant::now();
        let errors = Mutex::new(vec![]);
        std::thread::scope(|s| {
            for _ in 0..cfg.workers {
                s.spawn(|| loop {
                    let j = next.fetch_add(1, Ordering::SeqCst);
                    let Some(l) = sample.get(j) else { break };
                    let file = format!(
                        "{}\n{}\nProof.{}Qed.\nPrint Assumptions {}.\n",
                        &text[..l.context_end],
                        l.statement,
                        l.body,
                        l.name
                    );
                    if coqc_check(cfg, &file) {
                        ok.fetch_add(1, Ordering::SeqCst);
                    } else if let Ok(mut e) = errors.lock() {
                        e.push(l.name.clone());
                    }
                });
            }
        });
        let wall = t.elapsed();
        CoqcRun {
            m,
            ok: ok.load(Ordering::SeqCst),
            wall,
            // A poisoned list (a thread that panicked) is reported as no names.
            errors: errors.into_inner().unwrap_or_default(),
        }
    }
}

/// The figures on stdout: one JSON object, or a few lines of text.
fn print_check_figures(
    json: bool,
    path: &Path,
    n: usize,
    workers: usize,
    pool: &PoolRun,
    own_mean: f64,
    coqc: &CoqcRun,
) {
    let (pool_wall, pool_proved, pool_attempt_mean) = (pool.wall, pool.proved, pool.attempt_mean);
    let (replay_pairs, replay_own_mean, replay_pool_mean) = (
        &pool.replay_pairs,
        pool.replay_own_mean,
        pool.replay_pool_mean,
    );
    let (m, coqc_wall) = (coqc.m, coqc.wall);
    let coqc_mean = coqc_wall.as_secs_f64() / m.max(1) as f64;
    let pool_mean = pool_wall.as_secs_f64() / n as f64;
    let ratio = coqc_mean / pool_mean;
    let ms = |d: f64| d * 1000.0;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "file": path.display().to_string(), "checks": n, "workers": workers,
                "pool_wall_s": pool_wall.as_secs_f64(), "pool_proved": pool_proved,
                "pool_wall_ms_per_check": ms(pool_mean), "pool_attempt_ms_mean": ms(pool_attempt_mean),
                "coq_own_ms_mean": ms(own_mean), "overhead_ms": ms(pool_attempt_mean - own_mean),
                "replay_pairs": replay_pairs.len(), "coqtop_own_ms_mean": ms(replay_own_mean),
                "pool_attempt_ms_mean_same_lemmas": ms(replay_pool_mean),
                "overhead_vs_coqtop_ms": ms(replay_pool_mean - replay_own_mean),
                "coqc_checks": m, "coqc_ok": coqc.ok, "coqc_wall_s": coqc_wall.as_secs_f64(),
                "coqc_ms_per_check": ms(coqc_mean), "ratio": ratio,
            })
        );
        return;
    }
    println!(
        "file: {} ({} checks in place, {} workers both ways)",
        path.display(),
        n,
        workers
    );
    println!(
        "pool : {:8.2} s wall, {:7.1} ms/check wall, {:6.1} ms mean attempt; proved {}/{}",
        pool_wall.as_secs_f64(),
        ms(pool_mean),
        ms(pool_attempt_mean),
        pool_proved,
        n
    );
    println!("coq  : {:6.1} ms mean own time for the same sentences (coqc -time, rounded to 1 ms per sentence); pool overhead {:+.1} ms", ms(own_mean), ms(pool_attempt_mean - own_mean));
    println!(
        "coqtop: {:6.1} ms mean own time, same sentences sent in one write to a worker ({} lemmas); pool {:.1} ms on them: overhead {:+.1} ms",
        ms(replay_own_mean),
        replay_pairs.len(),
        ms(replay_pool_mean),
        ms(replay_pool_mean - replay_own_mean)
    );
    println!(
        "coqc : {:8.2} s wall, {:7.1} ms/check wall ({} checks); ok {}/{}",
        coqc_wall.as_secs_f64(),
        ms(coqc_mean),
        m,
        coqc.ok,
        m
    );
    println!("ratio: {ratio:.1}x (coqc per check / pool, wall time per check)");
}

//! `prod bench check`: checking speed, one cold `coqc` per check against the persistent worker
//! pool, side by side, on real lemmas re-checked in place (each in the context of everything
//! before it in its file; by default the stdlib's `Lists/List.v`).
//!
//! Three measurements of the same picked lemmas: (1) the pool's batch, with (1b) Coq's own time
//! in the same kind of worker (the sentences replayed in one write); (2) Coq's own time from
//! `coqc -time`; (3) one `coqc` per check at the same parallelism.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use prod_check::{CheckRequest, Verdict};
use prod_check_coq::{rules, sandbox, CoqCheckConfig, CoqChecker};
use prod_core::{ConditionalProof, T0};

use crate::BenchError;

/// What `prod bench check` measures, and how (also its flags, feature `clap`; the prover root
/// is the command's `--coq-root`).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CheckSettings {
    /// Number of lemmas to check (spread evenly over the file; 0 = every eligible lemma).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CheckSettings::default().count))]
    pub count: usize,
    /// Workers for both ways (pool workers, parallel `coqc` processes).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = CheckSettings::default().workers,
        value_parser = prod_core::range::parse::positive_usize))]
    pub workers: usize,
    /// How many of the checks to also run with `coqc` (default: all of them).
    #[cfg_attr(feature = "clap", arg(long, value_parser = prod_core::range::parse::positive_usize))]
    pub coqc_checks: Option<usize>,
    /// The Coq file to take lemmas from (default: the stdlib's `Lists/List.v`).
    #[cfg_attr(feature = "clap", arg(long))]
    pub file: Option<PathBuf>,
    /// A Debian root holding the prover instead of the host's Coq.
    #[cfg_attr(feature = "clap", arg(skip))]
    pub coq_root: Option<PathBuf>,
}

impl Default for CheckSettings {
    /// 300 lemmas of the stdlib's `Lists/List.v`, each also with `coqc`.
    fn default() -> Self {
        CheckSettings {
            count: 300,
            workers: prod_prover::DEFAULT_WORKERS,
            coqc_checks: None,
            file: None,
            coq_root: None,
        }
    }
}

/// The figures of one `prod bench check`.
#[derive(Debug)]
pub struct CheckReport {
    /// The file the lemmas came from.
    pub file: PathBuf,
    /// Lemmas checked.
    pub checks: usize,
    /// Workers both ways.
    pub workers: usize,
    pub pool: PoolRun,
    /// Coq's own mean time (`coqc -time`) for the lemmas the pool proved, s.
    pub coq_own_mean: f64,
    pub coqc: CoqcRun,
}

impl CheckReport {
    /// The pool's wall time per check, s.
    pub fn pool_mean(&self) -> f64 {
        self.pool.wall.as_secs_f64() / self.checks as f64
    }

    /// One `coqc`'s wall time per check, s.
    pub fn coqc_mean(&self) -> f64 {
        self.coqc.wall.as_secs_f64() / self.coqc.checks.max(1) as f64
    }

    /// `coqc` per check over the pool per check (wall times).
    pub fn ratio(&self) -> f64 {
        self.coqc_mean() / self.pool_mean()
    }

    /// `--json`'s object.
    pub fn json(&self) -> serde_json::Value {
        let (pool, coqc) = (&self.pool, &self.coqc);
        let ms = |d: f64| d * 1000.0;
        serde_json::json!({
            "file": self.file.display().to_string(), "checks": self.checks, "workers": self.workers,
            "pool_wall_s": pool.wall.as_secs_f64(), "pool_proved": pool.proved,
            "pool_wall_ms_per_check": ms(self.pool_mean()), "pool_attempt_ms_mean": ms(pool.attempt_mean),
            "coq_own_ms_mean": ms(self.coq_own_mean), "overhead_ms": ms(pool.attempt_mean - self.coq_own_mean),
            "replay_pairs": pool.replay_pairs.len(), "coqtop_own_ms_mean": ms(pool.replay_own_mean),
            "pool_attempt_ms_mean_same_lemmas": ms(pool.replay_pool_mean),
            "overhead_vs_coqtop_ms": ms(pool.replay_pool_mean - pool.replay_own_mean),
            "coqc_checks": coqc.checks, "coqc_ok": coqc.ok, "coqc_wall_s": coqc.wall.as_secs_f64(),
            "coqc_ms_per_check": ms(self.coqc_mean()), "ratio": self.ratio(),
        })
    }

    /// The figures as a few lines of text.
    pub fn text(&self) -> String {
        let (pool, coqc, n) = (&self.pool, &self.coqc, self.checks);
        let ms = |d: f64| d * 1000.0;
        [
            format!("file: {} ({n} checks in place, {} workers both ways)", self.file.display(), self.workers),
            format!(
                "pool : {:8.2} s wall, {:7.1} ms/check wall, {:6.1} ms mean attempt; proved {}/{n}",
                pool.wall.as_secs_f64(), ms(self.pool_mean()), ms(pool.attempt_mean), pool.proved
            ),
            format!(
                "coq  : {:6.1} ms mean own time for the same sentences (coqc -time, rounded to 1 ms per sentence); pool overhead {:+.1} ms",
                ms(self.coq_own_mean), ms(pool.attempt_mean - self.coq_own_mean)
            ),
            format!(
                "coqtop: {:6.1} ms mean own time, same sentences sent in one write to a worker ({} lemmas); pool {:.1} ms on them: overhead {:+.1} ms",
                ms(pool.replay_own_mean), pool.replay_pairs.len(), ms(pool.replay_pool_mean),
                ms(pool.replay_pool_mean - pool.replay_own_mean)
            ),
            format!(
                "coqc : {:8.2} s wall, {:7.1} ms/check wall ({} checks); ok {}/{}",
                coqc.wall.as_secs_f64(), ms(self.coqc_mean()), coqc.checks, coqc.ok, coqc.checks
            ),
            format!("ratio: {:.1}x (coqc per check / pool, wall time per check)", self.ratio()),
        ]
        .join("\n")
            + "\n"
    }
}

/// Runs the benchmark; `log` gets a line saying what is measured before it starts. A prover
/// root that is not one, an unreadable `file` or one without eligible lemmas is bad input.
pub fn bench_check(s: &CheckSettings, log: &dyn Fn(&str)) -> Result<CheckReport, BenchError> {
    let mut cfg = CoqCheckConfig {
        workers: s.workers,
        ..Default::default()
    };
    cfg.hammer.enabled = false;
    prod_prover::set_root(&mut cfg, s.coq_root.as_deref())
        .map_err(|e| BenchError::BadInput(anyhow!(e)))?;
    let path = match &s.file {
        Some(p) => p.clone(),
        None => stdlib_list(s.coq_root.as_deref())?,
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let all = eligible(&text);
    if all.is_empty() {
        return Err(BenchError::BadInput(anyhow!(
            "{}: no eligible `Lemma … Proof. … Qed.` found",
            path.display()
        )));
    }
    let n = if s.count == 0 {
        all.len()
    } else {
        s.count.min(all.len())
    };
    // Spread evenly over the file, keeping file order.
    let picked: Vec<&InPlace> = (0..n).map(|j| &all[j * all.len() / n]).collect();
    log(&format!(
        "bench check: {} lemmas of {} eligible in {}, {} workers",
        n,
        all.len(),
        path.display(),
        cfg.workers
    ));
    let pool = PoolRun::measure(&cfg, &text, &picked)?;
    let coq_own_mean = coq_own_mean(&cfg, &text, &picked, &pool)?;
    let coqc = CoqcRun::measure(&cfg, &text, &picked, s.coqc_checks);
    Ok(CheckReport {
        file: path,
        checks: n,
        workers: cfg.workers,
        pool,
        coq_own_mean,
        coqc,
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
fn stdlib_list(coq_root: Option<&Path>) -> anyhow::Result<PathBuf> {
    if coq_root.is_some() {
        let mut cfg = CoqCheckConfig::default();
        prod_prover::set_root(&mut cfg, coq_root).map_err(|e| anyhow!(e))?;
        let lib = sandbox::coqlib(&cfg).map_err(|e| anyhow!(e))?;
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
        if let Some((start, secs)) = sentence_time(line) {
            if let Some(j) = spans.iter().position(|&(s, e)| start >= s && start < e) {
                times[j] += secs;
            }
        }
    }
    Ok(times)
}

/// A `coqc -time` line's sentence start and seconds:
/// `Chars 123 - 456 [sentence] 0.012 secs (0.01u,0.s)`.
fn sentence_time(line: &str) -> Option<(usize, f64)> {
    let rest = line.strip_prefix("Chars ")?;
    let mut w = rest.split_whitespace();
    let (Some(a), Some("-"), Some(b)) = (w.next(), w.next(), w.next()) else {
        return None;
    };
    let (Ok(a), Ok(_b)) = (a.parse::<usize>(), b.parse::<usize>()) else {
        return None;
    };
    let secs = line
        .rsplit_once(" secs (")
        .and_then(|(l, _)| l.rsplit(' ').next())
        .and_then(|s| s.parse::<f64>().ok())?;
    Some((a, secs))
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

/// Step 1, the pool: the picked lemmas checked in place, and (1b) Coq's own time in the same
/// kind of worker.
#[derive(Debug)]
pub struct PoolRun {
    results: Vec<(Verdict, Duration)>,
    pub wall: Duration,
    pub proved: usize,
    /// Mean attempt time of the proved lemmas, s.
    pub attempt_mean: f64,
    /// The first few lemmas the pool did not prove, with the verdict.
    pub failures: Vec<String>,
    /// (Coq's own time, the pool's attempt time) of the lemmas proved both ways, s.
    pub replay_pairs: Vec<(f64, f64)>,
    pub replay_own_mean: f64,
    pub replay_pool_mean: f64,
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
        let attempt_mean = mean(&attempt_times);
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
        let own: Vec<f64> = replay_pairs.iter().map(|x| x.0).collect();
        let pool: Vec<f64> = replay_pairs.iter().map(|x| x.1).collect();
        drop(checker);
        Ok(PoolRun {
            results,
            wall,
            proved,
            attempt_mean,
            failures,
            replay_own_mean: mean(&own),
            replay_pool_mean: mean(&pool),
            replay_pairs,
        })
    }
}

/// The mean, 0 for none.
fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
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
    Ok(mean(&own_proved))
}

/// Step 3, one cold `coqc` per check, same parallelism, on some of the picked lemmas.
#[derive(Debug)]
pub struct CoqcRun {
    /// Checks run with `coqc`.
    pub checks: usize,
    /// Those `coqc` closed.
    pub ok: usize,
    pub wall: Duration,
    /// The lemmas `coqc` did not close.
    pub errors: Vec<String>,
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
            checks: m,
            ok: ok.load(Ordering::SeqCst),
            wall,
            // A poisoned list (a thread that panicked) is reported as no names.
            errors: errors.into_inner().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eligible_lemmas_are_qed_proofs_that_pass_the_rules() {
        let text = "Lemma a : True.\nProof. exact I. Qed.\n\
                    Lemma b : True.\nProof. exact I. Defined.\n\
                    Lemma c : True.\nProof. admit. Admitted.\n\
                    Lemma d : 1 = 1.\nProof. reflexivity. Qed.\n";
        let found = eligible(text);
        let names: Vec<&str> = found.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a", "d"]);
        let d = &found[1];
        assert_eq!(d.statement, "Lemma d : 1 = 1.");
        assert_eq!(d.body.trim(), "reflexivity.");
        assert!(text[..d.context_end].ends_with("Admitted.\n"));
        assert!(text[d.span.0..d.span.1].ends_with("Qed."));
    }

    #[test]
    fn a_coqc_time_line_gives_its_sentence_start_and_seconds() {
        assert_eq!(
            sentence_time("Chars 123 - 456 [Proof.] 0.012 secs (0.01u,0.s)"),
            Some((123, 0.012))
        );
        assert_eq!(sentence_time("Chars 1 - x [a] 0.1 secs (0.u,0.s)"), None);
        assert_eq!(sentence_time("Finished transaction in 0.1 secs"), None);
    }
}

//! Progress of a long batch of checks (`prod dataset validate`) that never stalls silently: a
//! bar on a terminal; otherwise (logs, CI, `nohup`) a line on stderr at the first verdict, every
//! tenth of the batch, every 30 s with news, and a heartbeat every 60 s while nothing finishes.
//! Also the per-context summary: a context that does not load is reported once, with its
//! reason and how many examples it cost, instead of one line per example.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prod_check::Verdict;

/// Verdicts so far, by kind, and when the last line was printed.
#[derive(Default)]
struct State {
    done: usize,
    by_kind: BTreeMap<&'static str, usize>,
    last_line: Option<Instant>,
    last_done_printed: usize,
}

/// See the module documentation.
pub struct CheckProgress {
    what: &'static str,
    total: usize,
    started: Instant,
    bar: Option<indicatif::ProgressBar>,
    lines: bool,
    state: Mutex<State>,
}

impl CheckProgress {
    /// `bar`: draw a bar when stderr is a terminal (callers pass `!json`).
    pub fn new(what: &'static str, total: usize, bar: bool) -> CheckProgress {
        let terminal = std::io::stderr().is_terminal();
        let bar = (bar && terminal).then(|| {
            let pb = indicatif::ProgressBar::new(total as u64);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} checked {pos}/{len} [{bar:40}] {elapsed}",
            ) {
                pb.set_style(style);
            }
            pb
        });
        CheckProgress {
            what,
            total,
            started: Instant::now(),
            bar,
            lines: !terminal,
            state: Mutex::new(State::default()),
        }
    }

    /// One verdict came in.
    pub fn record(&self, v: &Verdict) {
        if let Some(pb) = &self.bar {
            pb.inc(1);
        }
        let Ok(mut s) = self.state.lock() else { return };
        s.done += 1;
        *s.by_kind.entry(v.kind().as_str()).or_default() += 1;
        let step = (self.total / 10).max(1);
        let due = s
            .last_line
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(30))
            || s.done / step > s.last_done_printed / step
            || s.done == self.total;
        if self.lines && due {
            self.print(&mut s, "");
        }
    }

    fn print(&self, s: &mut State, note: &str) {
        let kinds: Vec<String> = s.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        eprintln!(
            "{}: {}/{} checked ({}) after {:.0?}{note}",
            self.what,
            s.done,
            self.total,
            kinds.join(", "),
            self.started.elapsed()
        );
        s.last_line = Some(Instant::now());
        s.last_done_printed = s.done;
    }

    /// Run `work` with a heartbeat: a line every `every` while no verdict arrives (lines mode).
    pub fn with_heartbeat<T>(&self, every: Duration, work: impl FnOnce() -> T) -> T {
        if !self.lines {
            return work();
        }
        let (stop, wait): (Sender<()>, _) = channel();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(every) {
                    if let Ok(mut s) = self.state.lock() {
                        if s.last_line.is_none_or(|t| t.elapsed() >= every) {
                            self.print(&mut s, "; still working");
                        }
                    }
                }
            });
            let out = work();
            let _ = stop.send(());
            out
        })
    }

    /// Clear the bar (lines mode printed its last line with the last verdict).
    pub fn finish(&self) {
        if let Some(pb) = &self.bar {
            pb.finish_and_clear();
        }
    }
}

/// Is this verdict a context that does not load (the checker's own wording)?
pub fn context_failure(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Infra { message } => message.strip_prefix("context does not load: "),
        _ => None,
    }
}

/// Context failures grouped: (file, reason) → examples. One stderr line per group.
pub fn report_context_failures<'a>(failures: impl Iterator<Item = (&'a str, &'a str)>) -> usize {
    let mut groups: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (file, reason) in failures {
        *groups.entry((file, reason)).or_default() += 1;
    }
    for ((file, reason), n) in &groups {
        let reason: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        eprintln!("context does not load ({n} example(s) of {file}): {reason}");
    }
    groups.len()
}

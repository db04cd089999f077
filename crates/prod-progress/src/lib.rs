//! Progress of long work (building a dataset, sampling, checking, training) on stderr.
//!
//! One type for every command, so that every command reports alike: on a terminal an indicatif
//! bar; when stderr is not a terminal (a log file, CI, `nohup`) a plain line every
//! `PROD_PROGRESS_SECS` seconds (default 30) from a background thread, so that a long job never
//! sits silent and a stalled one shows it (the line keeps coming, the count does not move).
//! A line reads `check: 120/400 nodes (30%), 3.2 nodes/s, 38 s, eta 1m 28s; failed 70, proved 50`.
//!
//! Rates are printed with three significant digits at most; the total may be unknown (sampling
//! trees, where deeper levels are only known as they come), then no bar length and no eta.
//! `--json` hides the bar (machine output asked for), never the log lines: those go to stderr,
//! results to stdout.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// How progress is shown; decided once per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Display {
    /// An indicatif bar (stderr is a terminal).
    Bar,
    /// A line on stderr every [`line_interval`].
    Lines,
    /// Nothing (tests, library callers).
    Off,
}

impl Display {
    /// A bar on a terminal unless `json`; log lines when stderr is not a terminal.
    pub fn for_stderr(json: bool) -> Display {
        match (std::io::stderr().is_terminal(), json) {
            (true, false) => Display::Bar,
            (true, true) => Display::Off,
            (false, _) => Display::Lines,
        }
    }

    /// Is anything shown (phase summaries follow the same rule)?
    pub fn shows(self) -> bool {
        self != Display::Off
    }
}

/// Seconds between two log lines: `PROD_PROGRESS_SECS` (a positive number), else 30.
pub fn line_interval() -> Duration {
    std::env::var("PROD_PROGRESS_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(30))
}

/// What a line needs, shared with the line thread.
struct Shared {
    label: String,
    unit: String,
    started: Instant,
    pos: AtomicU64,
    /// Done before this run started (a resumed run): in the position, not in the rate.
    resumed: AtomicU64,
    /// `u64::MAX`: unknown.
    total: AtomicU64,
    message: Mutex<String>,
}

impl Shared {
    fn total(&self) -> Option<u64> {
        match self.total.load(Ordering::Relaxed) {
            u64::MAX => None,
            t => Some(t),
        }
    }

    fn line(&self) -> String {
        let pos = self.pos.load(Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        let fresh = pos.saturating_sub(self.resumed.load(Ordering::Relaxed));
        let rate = fresh as f64 / elapsed.as_secs_f64().max(1e-9);
        let mut s = format!("{}: {pos}", self.label);
        if let Some(t) = self.total() {
            let pct = if t == 0 {
                100.0
            } else {
                100.0 * pos as f64 / t as f64
            };
            s.push_str(&format!("/{t} {} ({pct:.0}%)", self.unit));
        } else {
            s.push_str(&format!(" {}", self.unit));
        }
        s.push_str(&format!(
            ", {} {}/s, {}",
            rate_text(rate),
            self.unit,
            duration_text(elapsed)
        ));
        if let Some(t) = self.total() {
            if pos > 0 && pos < t {
                let left = (t - pos) as f64 / rate.max(1e-9);
                s.push_str(&format!(
                    ", eta {}",
                    duration_text(Duration::from_secs_f64(left))
                ));
            }
        }
        if let Ok(m) = self.message.lock() {
            if !m.is_empty() {
                s.push_str("; ");
                s.push_str(&m);
            }
        }
        s
    }
}

/// The log-line thread and the way to stop it.
struct Lines {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

/// Progress of one phase. See the module documentation.
pub struct Progress {
    shared: Arc<Shared>,
    bar: Option<ProgressBar>,
    lines: Mutex<Option<Lines>>,
    /// A line was printed: the end gets one too.
    printed: Arc<AtomicU64>,
}

impl Progress {
    /// Progress of `label` (a phase: `check`, `sample`, `train`) counting `unit`s (`nodes`,
    /// `examples`, `files`); `total` when known in advance.
    pub fn new(display: Display, label: &str, unit: &str, total: Option<u64>) -> Progress {
        let shared = Arc::new(Shared {
            label: label.to_string(),
            unit: unit.to_string(),
            started: Instant::now(),
            pos: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            total: AtomicU64::new(total.unwrap_or(u64::MAX)),
            message: Mutex::new(String::new()),
        });
        let printed = Arc::new(AtomicU64::new(0));
        let bar = (display == Display::Bar).then(|| bar(label, unit, total));
        let lines = (display == Display::Lines).then(|| start_lines(&shared, &printed));
        Progress {
            shared,
            bar,
            lines: Mutex::new(lines),
            printed,
        }
    }

    /// Shows nothing.
    pub fn hidden() -> Progress {
        Progress::new(Display::Off, "", "", None)
    }

    pub fn inc(&self, n: u64) {
        self.shared.pos.fetch_add(n, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// `done` units were finished by an earlier run: the position starts there, and the rate
    /// and the time left count only what this run does.
    pub fn resumed(&self, done: u64) {
        self.shared.resumed.store(done, Ordering::Relaxed);
        self.set_position(done);
        if let Some(b) = &self.bar {
            b.reset_eta();
        }
    }

    pub fn set_position(&self, pos: u64) {
        self.shared.pos.store(pos, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_position(pos);
        }
    }

    /// The total became known (or changed).
    pub fn set_total(&self, total: u64) {
        let was = self.shared.total.swap(total, Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_length(total);
            // A spinner becomes a bar once, not on every call (callers report the total often).
            if was == u64::MAX {
                if let Some(style) = style(&self.shared.unit, true) {
                    b.set_style(style);
                }
            }
        }
    }

    /// A short note after the counts (the loss, verdicts so far).
    pub fn set_message(&self, message: impl Into<String>) {
        let message = message.into();
        if let Some(b) = &self.bar {
            b.set_message(message.clone());
        }
        if let Ok(mut m) = self.shared.message.lock() {
            *m = message;
        }
    }

    pub fn position(&self) -> u64 {
        self.shared.pos.load(Ordering::Relaxed)
    }

    /// The phase is over: the bar is cleared; in log lines, a last line when any was printed
    /// (a phase shorter than one interval stays silent).
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if self.stop_lines() && self.printed.load(Ordering::Relaxed) > 0 {
            eprintln!("{} (done)", self.shared.line());
        }
    }

    /// Stop the line thread; whether it was running.
    fn stop_lines(&self) -> bool {
        let lines = self.lines.lock().ok().and_then(|mut l| l.take());
        lines.is_some_and(|l| {
            let _ = l.stop.send(());
            let _ = l.thread.join();
            true
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // An early return (an error) stops the thread without a closing line.
        self.stop_lines();
    }
}

fn start_lines(shared: &Arc<Shared>, printed: &Arc<AtomicU64>) -> Lines {
    let (stop, wait) = channel::<()>();
    let (shared, printed) = (Arc::clone(shared), Arc::clone(printed));
    let every = line_interval();
    let thread = std::thread::spawn(move || {
        while let Err(RecvTimeoutError::Timeout) = wait.recv_timeout(every) {
            eprintln!("{}", shared.line());
            printed.fetch_add(1, Ordering::Relaxed);
        }
    });
    Lines { stop, thread }
}

fn bar(label: &str, unit: &str, total: Option<u64>) -> ProgressBar {
    let pb = match total {
        Some(t) => ProgressBar::new(t),
        None => ProgressBar::new_spinner(),
    };
    if let Some(style) = style(unit, total.is_some()) {
        pb.set_style(style);
    }
    pb.set_prefix(label.to_string());
    if total.is_none() {
        pb.enable_steady_tick(Duration::from_millis(200));
    }
    pb
}

fn style(unit: &str, known_total: bool) -> Option<ProgressStyle> {
    let template = if known_total {
        format!("{{prefix:>8}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{rate}} {{elapsed}} eta {{eta}} {{msg}}")
    } else {
        format!("{{prefix:>8}} {{spinner}} {{pos}} {unit} {{rate}} {{elapsed}} {{msg}}")
    };
    let unit = unit.to_string();
    ProgressStyle::with_template(&template).ok().map(|s| {
        s.progress_chars("=> ").with_key(
            "rate",
            move |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{} {unit}/s", rate_text(st.per_sec()));
            },
        )
    })
}

/// A rate with at most three significant digits (`0.123`, `12.3`, `1234`).
pub fn rate_text(r: f64) -> String {
    if !r.is_finite() || r <= 0.0 {
        "0".to_string()
    } else if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else if r >= 1.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.3}")
    }
}

/// `45 s`, `3m 05s`, `2h 07m`.
pub fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_have_three_significant_digits_at_most() {
        assert_eq!(rate_text(68.0796), "68.1");
        assert_eq!(rate_text(1234.56), "1235");
        assert_eq!(rate_text(2.71), "2.71");
        assert_eq!(rate_text(0.01234), "0.012");
        assert_eq!(rate_text(f64::NAN), "0");
        assert_eq!(rate_text(0.0), "0");
    }

    #[test]
    fn durations_read_as_a_person_writes_them() {
        assert_eq!(duration_text(Duration::from_secs(45)), "45 s");
        assert_eq!(duration_text(Duration::from_secs(185)), "3m 05s");
        assert_eq!(duration_text(Duration::from_secs(7620)), "2h 07m");
    }

    fn shared(total: Option<u64>) -> Shared {
        Shared {
            label: "check".into(),
            unit: "nodes".into(),
            started: Instant::now() - Duration::from_secs(10),
            pos: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            total: AtomicU64::new(total.unwrap_or(u64::MAX)),
            message: Mutex::new(String::new()),
        }
    }

    #[test]
    fn a_line_names_the_phase_the_unit_the_count_and_what_is_left() {
        let s = shared(Some(40));
        s.pos.store(20, Ordering::Relaxed);
        *s.message.lock().unwrap() = "failed 7, proved 3".into();
        let line = s.line();
        assert!(
            line.starts_with(
                "check: 20/40 nodes (50%), 2.00 nodes/s, 10 s, eta 10 s; failed 7, proved 3"
            ),
            "{line}"
        );
    }

    /// A resumed run's earlier work is in the count, not in the rate or the time left.
    #[test]
    fn a_resumed_run_rates_only_its_own_work() {
        let s = shared(Some(100));
        s.resumed.store(60, Ordering::Relaxed);
        s.pos.store(80, Ordering::Relaxed);
        let line = s.line();
        assert!(
            line.starts_with("check: 80/100 nodes (80%), 2.00 nodes/s, 10 s, eta 10 s"),
            "{line}"
        );
    }

    #[test]
    fn an_unknown_total_gives_a_count_without_eta() {
        let s = shared(None);
        s.pos.store(15, Ordering::Relaxed);
        let line = s.line();
        assert!(
            line.starts_with("check: 15 nodes, 1.50 nodes/s, 10 s"),
            "{line}"
        );
        assert!(!line.contains("eta"), "{line}");
    }

    #[test]
    fn hidden_progress_counts_but_prints_nothing() {
        let p = Progress::hidden();
        p.inc(3);
        p.set_total(5);
        p.set_message("x");
        assert_eq!(p.position(), 3);
        p.finish();
    }
}

//! What a command-line SFT shows as it runs: the first dropped lines, the start report, a
//! progress bar (no terminal: a line every 30 s), and with `--json` one line per step on stdout.

use std::time::Instant;

use super::SftEvent;

/// One JSON line: on stdout with `--json`, else on stderr beside the progress bar.
pub fn report_json(json: bool, v: serde_json::Value) {
    if json {
        println!("{v}");
    } else {
        eprintln!("{v}");
    }
}

/// What a command-line SFT (`prod train`, `prod model train`) prints as the run goes.
pub struct SftConsole {
    json: bool,
    bar: Option<prod_progress::Progress>,
    /// When the steps started.
    clock: Option<Instant>,
}

impl SftConsole {
    pub fn new(json: bool) -> Self {
        SftConsole {
            json,
            bar: None,
            clock: None,
        }
    }

    pub fn event(&mut self, e: SftEvent<'_>) {
        match e {
            SftEvent::Dropped {
                path,
                line,
                message,
            } => eprintln!("skipped {}:{line}: {message}", path.display()),
            SftEvent::Started(s) => {
                report_json(
                    self.json,
                    serde_json::json!({"examples": s.examples, "skipped": s.dropped.values().sum::<usize>(),
                    "skipped_by_reason": s.dropped, "use_invoke_share": s.use_invoke_share, "eval_examples": s.eval_examples,
                    "eval_loss_before": s.eval_loss_before, "start_step": s.start_step, "steps": s.steps}),
                );
                self.clock = Some(Instant::now());
                let left = s.steps.map_or(0, |n| n.saturating_sub(s.start_step));
                let bars = crate::Bars::for_stderr(self.json);
                self.bar = Some(bars.bar("train", "steps", Some(left)));
            }
            SftEvent::Step { stats, tok_per_s } => {
                if let Some(pb) = &self.bar {
                    pb.set_message(format!("loss {:.4} {:.0} tok/s", stats.loss, tok_per_s));
                    pb.inc(1);
                }
                if self.json {
                    println!(
                        "{}",
                        serde_json::json!({"step": stats.step, "loss": stats.loss, "grad_norm": stats.grad_norm, "lr": stats.lr, "tok_per_s": tok_per_s})
                    );
                }
            }
            SftEvent::StepsDone => self.bar.iter().for_each(|pb| pb.finish()),
        }
    }

    /// Seconds since the steps started.
    pub fn seconds(&self) -> f64 {
        self.clock.map_or(0.0, |c| c.elapsed().as_secs_f64())
    }
}

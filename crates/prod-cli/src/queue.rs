//! `prod queue`: checking at scale — one round's checks in PostgreSQL, drained by any number of
//! `prod queue work` processes on any number of machines.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use prod_check::Verdict;
use prod_check_coq::CoqChecker;
use prod_queue::{Queue, WorkOptions};

use crate::check::render;
use crate::{exit, ranges};
use prod_prover::node::{read_nodes, Echo};
use prod_prover::{CheckSection, Overrides};

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Add the nodes of a JSONL file (the `prod check` input format) to a run's queue.
    ///
    /// Example: prod queue submit --store postgres://prod@db/prod --run round-3 nodes.jsonl
    Submit(SubmitArgs),
    /// Check queued nodes until none is left; start one per machine.
    ///
    /// Claims expire after --lease (a worker that dies leaves its claims to be retried);
    /// start one per machine, e.g. as a Slurm array.
    ///
    /// Example: prod queue work --store postgres://prod@db/prod --run round-3 --workers 2
    ///
    /// For a `prod rl … --store URL --out runs/rl1` run: prod queue work --store URL --run rl1
    /// --idle-exit 3600 (checker settings come from the run; each round's checks as they come).
    Work(WorkArgs),
    /// Counts of waiting, claimed and done nodes.
    Status(StoreArgs),
    /// The recorded verdicts, in submission order, as `prod check` prints them.
    Results(StoreArgs),
}

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// PostgreSQL connection (URL or libpq string), e.g. postgres://user@host/db or
    /// "host=/run/postgresql user=prod".
    #[arg(long, env = "PROD_STORE")]
    pub store: String,
    /// The run (a name; one queue per run).
    #[arg(long)]
    pub run: String,
    /// Machine-readable output: one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// JSONL nodes (`id`, `imports`, `context`, `statement`, `proof`), `-` for stdin.
    pub file: PathBuf,
}

#[derive(Args, Debug)]
pub struct WorkArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Coq workers in this process.
    #[arg(long, value_parser = ranges::positive_usize)]
    pub workers: Option<usize>,
    /// Time limit per proof step, seconds.
    #[arg(long, value_parser = ranges::positive_u32)]
    pub timeout: Option<u32>,
    /// Nodes claimed at a time.
    #[arg(long, default_value_t = WorkOptions::default().batch, value_parser = ranges::positive_usize)]
    pub batch: usize,
    /// Seconds a claim holds before another worker may take the node.
    #[arg(long, default_value_t = WorkOptions::default().lease.as_secs_f64(), value_parser = ranges::positive_seconds)]
    pub lease: f64,
    /// A name for this worker (default: host:pid).
    #[arg(long)]
    pub name: Option<String>,
    /// Keep waiting for new checks until none has come for this many seconds: a coordinator
    /// queues its checks in phases (`prod eval` its evaluation's, then its canaries'; `prod rl`
    /// each round's as it gets there). 0: stop once the queue is empty (enough when the
    /// coordinator checks too, without --no-check-here).
    #[arg(long, default_value_t = WorkOptions::default().idle_exit.as_secs_f64(), value_parser = ranges::non_negative_finite_f64)]
    pub idle_exit: f64,
    /// Config file (reads `[check]` and `[check.coq]`). Without it, the worker uses the
    /// checker settings the run's coordinator recorded (`prod rl`/`prod eval --store`).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(cmd: QueueCommand) -> exit::Result {
    match cmd {
        QueueCommand::Submit(a) => submit(a),
        QueueCommand::Work(a) => work(a),
        QueueCommand::Status(a) => status(a),
        QueueCommand::Results(a) => results(a),
    }
}

fn connect(a: &StoreArgs) -> exit::Result<Queue> {
    Queue::connect(&a.store, &a.run).map_err(|e| exit::other(format!("cannot open the queue: {e}")))
}

fn submit(a: SubmitArgs) -> exit::Result {
    // The queue's workers are Coq checkers: its proofs are read as Coq lexes them.
    let nodes = read_nodes(&a.file, &prod_coq::CoqLanguage).map_err(exit::input)?;
    let mut jobs = vec![];
    for (echo, req) in nodes {
        let item = match &echo.id {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match req {
            Ok(r) => jobs.push((item, r)),
            Err(v) => eprintln!("{item}: not queued: {}", v.message()),
        }
    }
    let mut q = connect(&a.store)?;
    let added = q.submit(&jobs)?;
    let s = q.status()?;
    if a.store.json {
        let mut v = s.json();
        v["submitted"] = jobs.len().into();
        v["added"] = added.into();
        println!("{v}");
    } else {
        println!("{added} new of {} submitted; {}", jobs.len(), s.text());
    }
    Ok(())
}

fn work(a: WorkArgs) -> exit::Result {
    let section = CheckSection::load(a.config.as_deref()).map_err(exit::input)?;
    let mut q = connect(&a.store)?;
    let mut cfg = section.coq;
    // Without a config file, check as the run's coordinator does (it recorded its settings):
    // only checks made for the same checker fingerprint are ever claimed.
    if a.config.is_none() {
        if let Some(v) = q.checker_config()? {
            let workers = cfg.workers;
            cfg = serde_json::from_value(v)
                .map_err(|e| anyhow!("the run's recorded checker configuration: {e}"))?;
            cfg.workers = workers;
        }
    }
    let flags = Overrides {
        workers: a.workers,
        step_timeout_s: a.timeout,
        ..Overrides::default()
    };
    flags.coq(&mut cfg);
    let checker = CoqChecker::new(cfg).map_err(exit::other)?;
    let name = a
        .name
        .clone()
        .unwrap_or_else(prod_queue::process_worker_name);
    let opts = WorkOptions {
        batch: a.batch,
        lease: Duration::from_secs_f64(a.lease),
        idle_exit: Duration::from_secs_f64(a.idle_exit),
        ..WorkOptions::default()
    };
    let stats = prod_queue::work_until_idle(&mut q, &checker, &name, &opts)?;
    match a.store.json {
        true => exit::println(stats.json(&name)),
        false => exit::println(stats.text(&name)),
    }
}

fn status(a: StoreArgs) -> exit::Result {
    let s = connect(&a)?.status()?;
    match a.json {
        true => exit::println(s.json()),
        false => exit::println(s.text()),
    }
}

fn results(a: StoreArgs) -> exit::Result {
    let results = connect(&a)?.results()?;
    for (item, v, attempts, completions) in results {
        let v = v.unwrap_or_else(|| Verdict::infra("not checked yet"));
        let line = render(
            &Echo {
                id: serde_json::Value::String(item),
                ..Default::default()
            },
            &v,
            Duration::ZERO,
            None,
            a.json,
        );
        if a.json {
            let mut j: serde_json::Value = serde_json::from_str(&line).map_err(exit::other)?;
            j["claims"] = attempts.into();
            j["recordings"] = completions.into();
            println!("{j}");
        } else {
            println!("{line}");
        }
    }
    Ok(())
}

//! `prod check`: local correctness of nodes with the real prover (a stable interface: JSON in,
//! JSON out).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::check_progress::CheckProgress;
use clap::Args;
use prod_check::{CheckRequest, Verdict, VerdictLine};
use prod_prover::node::{echo_json, read_nodes, Echo};
use prod_prover::{CheckerSettings, Pipeline};

use crate::exit;

/// Check nodes with the real prover, one JSON object per line in, one verdict per line out.
///
/// Input (`FILE.jsonl`, one node per line):
///   {"id": "n1", "imports": "From Coq Require Import Arith List Lia.", "context": "",
///    "statement": "Lemma foo : forall n : nat, n + 0 = n.", "proof": "<no_invoke> intros n. lia."}
/// `proof` is a conditional proof: its `<invoke> Lemma … . </invoke>` segments are admitted first.
/// `imports` may also be a list of sentences. Other fields are copied to the output line; one
/// that looks like a misspelt node field (`contxt`) is an error ("did you mean `context`?").
///
/// Output, same order: {"id": "n1", "verdict": "proved|failed|timed_out|rejected|infra",
/// "message": "...", "time_ms": N, "prover": "coq 8.16.1", …the node's other fields}; a proved
/// line also carries "axioms", "replacements" (the tactics its `hammer.` steps became) and
/// "universe_constraints" (what the proof adds to its statement's universe levels: such a node
/// proves only its own statement), which `prod tree solve --verdicts` reads. Exit 0 when every
/// line was judged, 2 on unreadable input.
///
/// Isabelle (`--prover isabelle`) needs a running Isabelle2022 server (`isabelle server -n prod`
/// prints `server "prod" = 127.0.0.1:PORT (password "PW")`) with heaps for the session; node
/// lines are the same with Isar text: {"imports": "Main", "statement": "lemma add_0: \"(n::nat) +
/// 0 = n\"", "proof": "<no_invoke> by simp"}; `sledgehammer` steps are expanded (the paper's
/// method list, then Sledgehammer). See crates/prod-check-isabelle/README.md.
///
/// Example: prod check --prover coq nodes.jsonl --json --workers 2 --timeout 10
/// Example: prod check --prover isabelle nodes.jsonl --server 127.0.0.1:4711 --password PW
///          --session HOL --dirs /opt/afp-2022-12-06/thys --json
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct CheckArgs {
    /// JSONL file of nodes (`-`: stdin, each batch answered as it arrives).
    pub file: PathBuf,
    /// One JSON object per output line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub checker: CheckerSettings,
}

/// Printing in input order: the next line to print, the verdicts so far, the first write error.
type PrintState = (usize, Vec<Option<(Verdict, Duration)>>, std::io::Result<()>);

pub fn run(a: CheckArgs) -> exit::Result {
    if a.file == Path::new("-") {
        return run_stream(a);
    }
    let nodes = read_nodes(&a.file, a.checker.prover.language()).map_err(exit::input)?;
    if nodes.is_empty() {
        // Not an error (a filter upstream may leave nothing), but never silent.
        eprintln!("{}: no nodes, nothing to check", a.file.display());
        return Ok(());
    }
    let pipeline = Pipeline::open(&a.checker)?;
    let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
    let progress = CheckProgress::new("check", ids.len(), a.json);
    let written = check_printing(&pipeline, &ids, &requests, a.json, Some(&progress));
    progress.finish();
    close(&pipeline);
    exit::written(written)
}

/// `prod check -`: nodes are checked as they arrive on stdin (whatever has arrived while the
/// previous batch was checked forms the next batch) and answered in input order, so a caller
/// can feed a pipe and read verdicts before it has written everything. A line that is not a node
/// ends the run with exit 2 after every earlier node is answered.
fn run_stream(a: CheckArgs) -> exit::Result {
    let pipeline = Pipeline::open(&a.checker)?;
    let rx = prod_prover::node::read_stdin_nodes(a.checker.prover.language());
    let batch_cap = pipeline.workers().max(1) * 8;
    let mut written = Ok(());
    let mut bad = None;
    while let Some((nodes, error)) = prod_prover::node::next_batch(&rx, batch_cap) {
        let (ids, requests): (Vec<_>, Vec<_>) = nodes.into_iter().unzip();
        if written.is_ok() {
            written = check_printing(&pipeline, &ids, &requests, a.json, None);
        }
        if let Some(e) = error {
            bad = Some(anyhow::anyhow!(e));
            break;
        }
    }
    close(&pipeline);
    match bad {
        Some(e) => Err(exit::Failure::BadInput(e)),
        None => exit::written(written),
    }
}

/// Check `requests` and print one line per node in input order, each as soon as every earlier
/// one is done. Returns the first write error (a closed stdout), if any.
fn check_printing(
    pipeline: &Pipeline,
    ids: &[Echo],
    requests: &[Result<CheckRequest, Verdict>],
    json: bool,
    progress: Option<&CheckProgress>,
) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let state = Mutex::new((0usize, vec![None; ids.len()], Ok::<(), std::io::Error>(())));
    let flush = |st: &mut PrintState| {
        let mut out = stdout.lock();
        while st.0 < ids.len() {
            let Some((v, t)) = st.1[st.0].as_ref() else {
                break;
            };
            let line = render(&ids[st.0], v, *t, Some(pipeline.prover()), json);
            if st.2.is_ok() {
                st.2 = writeln!(out, "{line}").and_then(|_| out.flush());
            }
            st.0 += 1;
        }
    };
    pipeline.check(requests, &|i, v, t, _| {
        if let Some(p) = progress {
            p.record(v);
        }
        if let Ok(mut st) = state.lock() {
            st.1[i] = Some((v.clone(), t));
            flush(&mut st);
        }
    });
    match state.into_inner() {
        Ok(s) => s.2,
        Err(e) => e.into_inner().2,
    }
}

/// After the last check: the pipeline closed, a session that would not stop a warning.
pub(crate) fn close(pipeline: &Pipeline) {
    if let Err(e) = pipeline.close() {
        eprintln!("warning: {e}");
    }
}

/// One output line (with `json`, the node's own fields after the verdict's).
pub(crate) fn render(
    echo: &Echo,
    v: &Verdict,
    t: Duration,
    prover: Option<&str>,
    json: bool,
) -> String {
    if json {
        return echo_json(echo, v, t, prover).to_string();
    }
    let id = match &echo.id {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let line = VerdictLine::new(echo.id.clone(), v, t, prover);
    format!(
        "{id}\t{}\t{} ms\t{}",
        line.verdict, line.time_ms, line.message
    )
}

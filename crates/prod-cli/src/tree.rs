//! `prod tree …`: global correctness and assembly over checked proof-tree nodes.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use prod_check::VerdictLine;
use prod_core::tree::{GlobalVerdict, LocalVerdict, Node};
use prod_core::{ConditionalProof, ProofLanguage};
use prod_prover::{FinalProof, Forest, ProverKind, RootDecision};

use crate::exit;
use prod_prover::node::{id_key, read_node_lines, NodeLine};

#[derive(Subcommand)]
pub enum TreeCommand {
    #[command(verbatim_doc_comment)]
    /// Decide global correctness of every node, and optionally assemble a complete proof.
    ///
    /// Input: JSON Lines, one node per line (blank lines are ignored), in `prod check`'s schema
    /// plus the local verdict:
    ///
    ///   {"id": "n1", "imports": "", "context": "…", "statement": "Lemma foo : …", "proof": "<use_invoke> … <invoke> Lemma bar : … </invoke> …", "locally_correct": true}
    ///
    /// `id` is a string or a number, unique in the file; `imports` and `context` default to "";
    /// unknown fields are an error. The local verdicts come from `locally_correct`, or from
    /// `prod check --json`'s output with --verdicts (proved: correct, or correct alone when its
    /// proof constrains its statement's universe levels or the line does not say, as lines
    /// written before they carried `universe_constraints`; failed, timed_out, rejected:
    /// incorrect; infra or no line: unknown). A node correct alone proves its own statement
    /// only, never another node's proposal. With --verdicts the proofs are taken as their
    /// checks closed them (`hammer.` steps replaced). A node whose proof is not a conditional
    /// proof is locally incorrect (as `prod check` rejects it), unless it claims to be correct.
    ///
    /// The children of a node are the nodes, from any line, with the same imports and context and a statement equal
    /// to one of its proposed lemmas (comments, layout and the lemma's name do not matter). A node is globally correct
    /// iff it is locally correct and each proposed lemma has a globally correct node (least fixed point: cycles prove
    /// nothing). `"locally_correct": null` means "not checked / infra failure": such nodes, and nodes that depend on
    /// them, come out as `null` (undetermined), never as false.
    ///
    /// --assemble prints the root's complete file as the final check compiles it: imports,
    /// context, the root's statement admitted under a fresh name, the lemmas child-first, the
    /// root, and a definition that has the kernel compare the root with its statement.
    ///
    /// A node that states a canary (`False`, `0 = 1`, `forall n : nat, n = S n`) and comes out
    /// locally correct without a lemma or globally correct is a soundness alarm: a line on
    /// stderr and exit code 3, after the output.
    ///
    /// Examples:
    ///   prod tree solve nodes.jsonl --json
    ///   prod tree solve nodes.jsonl --assemble n1 > n1_complete.v
    ///   prod check nodes.jsonl --json > verdicts.jsonl
    ///   prod tree solve nodes.jsonl --verdicts verdicts.jsonl --json
    Solve(SolveArgs),
}

#[derive(Args)]
pub struct SolveArgs {
    /// JSONL file of nodes (`-` for standard input).
    pub file: PathBuf,
    /// Print the complete file of the node with this id (it compiles by itself) instead of the
    /// verdicts.
    #[arg(long, value_name = "ID")]
    pub assemble: Option<String>,
    /// The local verdicts: `prod check --json`'s output for these nodes, joined by id (the
    /// nodes then carry no `locally_correct`).
    #[arg(long, value_name = "FILE")]
    pub verdicts: Option<PathBuf>,
    /// Machine-readable output: one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// The nodes' proof language: how statements match proposals, how lemmas are named.
    #[arg(long, value_enum, default_value_t = ProverKind::Coq)]
    pub prover: ProverKind,
}

fn open_lines(file: &PathBuf) -> anyhow::Result<Box<dyn BufRead>> {
    Ok(if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        ))
    })
}

/// `prod check --json`'s output ([`VerdictLine`]s), by id. Errors name the line.
fn read_verdicts(file: &PathBuf) -> anyhow::Result<HashMap<String, VerdictLine>> {
    let mut out = HashMap::new();
    for (i, line) in open_lines(file)?.lines().enumerate() {
        let lineno = i + 1;
        let where_ = || format!("{}: line {lineno}", file.display());
        let line = line.with_context(|| format!("{}: cannot read (not UTF-8?)", where_()))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: VerdictLine = serde_json::from_str(&line).with_context(|| {
            format!(
                "{}: not a verdict line of prod check --json (\"verdict\" is one of proved, \
                 failed, timed_out, rejected, infra)",
                where_()
            )
        })?;
        let id = id_key(&v.id)
            .ok_or_else(|| anyhow::anyhow!("{}: no string or number \"id\"", where_()))?;
        if out.insert(id.clone(), v).is_some() {
            anyhow::bail!("{}: a second verdict for id '{id}'", where_());
        }
    }
    Ok(out)
}

/// The nodes of the input as the solver takes them, and per node what the output needs.
struct Input {
    nodes: Vec<Node>,
    given: Vec<Given>,
}

/// A node's id as given, its imports and context (a root's complete file starts with them),
/// and whether its proof had `hammer.` steps replaced by its check.
struct Given {
    id: serde_json::Value,
    imports: String,
    context: String,
    hammer_replaced: bool,
}

/// Read nodes (and the ids as given); errors name the line (1-based) and, for proofs, the
/// byte position.
fn read_nodes(file: &Path, verdicts: Option<&PathBuf>, kind: ProverKind) -> anyhow::Result<Input> {
    let mut lines = match verdicts {
        Some(v) => Some(read_verdicts(v)?),
        None => None,
    };
    let mut input = Input {
        nodes: vec![],
        given: vec![],
    };
    for (lineno, n) in read_node_lines(file).map_err(|e| anyhow::anyhow!(e))? {
        let id = id_text(&n.id);
        let checked = match &mut lines {
            Some(g) => {
                if n.locally_correct.is_some() {
                    anyhow::bail!("line {lineno}: node '{id}' has \"locally_correct\" and --verdicts gives its verdict: give one of them");
                }
                Some(g.remove(&id))
            }
            None => None,
        };
        let (node, hammer_replaced) = solver_node(id, &n, checked, kind)
            .with_context(|| format!("line {lineno}: node '{}'", id_text(&n.id)))?;
        input.nodes.push(node);
        input.given.push(Given {
            id: n.id,
            imports: n.imports,
            context: n.context,
            hammer_replaced,
        });
    }
    if let Some(g) = lines.filter(|g| !g.is_empty()) {
        let mut extra: Vec<&String> = g.keys().collect();
        extra.sort();
        anyhow::bail!(
            "--verdicts has verdicts for ids that are not nodes: {}",
            extra
                .iter()
                .take(5)
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(input)
}

fn id_text(id: &serde_json::Value) -> String {
    id_key(id).unwrap_or_else(|| id.to_string())
}

/// Node `n` as the solver takes it: its local verdict from its verdict line (`checked`: with
/// --verdicts, `Some(None)` when it has no line) or its `locally_correct`, its proof as its
/// check closed it (`hammer.` steps replaced); and whether anything was replaced.
fn solver_node(
    id: String,
    n: &NodeLine,
    checked: Option<Option<VerdictLine>>,
    kind: ProverKind,
) -> anyhow::Result<(Node, bool)> {
    let context = context_key(&n.imports, &n.context);
    let local = match &checked {
        Some(Some(line)) => line.local_verdict(),
        Some(None) => LocalVerdict::Unknown,
        None => n.locally_correct.into(),
    };
    match ConditionalProof::parse_with(&n.proof, kind.language()) {
        // Read from its verdict line as every two-step path reads one.
        Ok(p) => Ok(match &checked {
            Some(line) => {
                let s = n.statement.clone();
                prod_prover::decided_node(id, context, s, &p, line.as_ref(), kind)
            }
            None => (
                Node {
                    id,
                    context,
                    statement: n.statement.clone(),
                    proof: p,
                    local,
                },
                false,
            ),
        }),
        // Not a conditional proof: the model's fault (as prod check rejects it), so locally
        // incorrect; it proves nothing, so its placeholder proof is never read. A node said
        // to be correct with such a proof is contradictory input.
        Err(_) if !local.is_correct() => Ok((
            Node {
                id,
                context,
                statement: n.statement.clone(),
                proof: ConditionalProof::plain(prod_core::T0::NoInvoke, ""),
                local: LocalVerdict::Incorrect,
            },
            false,
        )),
        Err(e) => Err(anyhow::Error::new(e).context("bad conditional proof")),
    }
}

/// What children must share with their parent: the imports and the context (both, unambiguously).
fn context_key(imports: &str, context: &str) -> String {
    serde_json::json!([imports, context]).to_string()
}

pub fn run(cmd: TreeCommand) -> i32 {
    match cmd {
        TreeCommand::Solve(args) => run_solve(args),
    }
}

fn run_solve(args: SolveArgs) -> i32 {
    let input = match read_nodes(&args.file, args.verdicts.as_ref(), args.prover) {
        Ok(n) => n,
        Err(e) => return exit::bad_input(e),
    };
    let hammer = input.given.iter().map(|g| g.hammer_replaced).collect();
    let lang = args.prover.language();
    let forest = Forest::solve_decided(input.nodes, hammer, lang);
    let alarms = canary_alarms(&forest, &input.given, lang);
    let mut out = std::io::stdout().lock();
    let code = if let Some(id) = &args.assemble {
        let Some(root) = forest.nodes().iter().position(|n| &n.id == id) else {
            return exit::bad_input(anyhow::anyhow!("no node with id '{id}'"));
        };
        match forest.assemble(root) {
            Ok(a) => match complete_file(args.prover, &forest, &input.given[root], root, &a) {
                Ok(file) => exit::written(print_assembly(&mut out, id, &a.proof, &file, args.json)),
                Err(e) => exit::failure(anyhow::anyhow!("cannot write the complete file: {e}")),
            },
            Err(e) => exit::failure(anyhow::anyhow!("cannot assemble: {e}")),
        }
    } else {
        exit::written(if args.json {
            print_verdicts_json(&mut out, &forest, &input.given)
        } else {
            print_table(&mut out, &forest)
        })
    };
    if alarms == 0 {
        code
    } else {
        exit::soundness_alarm(anyhow::anyhow!(
            "{alarms} node(s) stating a canary accepted (a statement no proof may prove)"
        ))
    }
}

/// Every node that states a canary and came out accepted ([`prod_prover::canary_alarm`]), on
/// stderr; returns how many.
fn canary_alarms(forest: &Forest<'_>, given: &[Given], lang: &dyn ProofLanguage) -> usize {
    let mut alarms = 0;
    for (i, n) in forest.nodes().iter().enumerate() {
        let decision = RootDecision {
            local: Some((n.local, n.proof.lemma_count() > 0)),
            global: Some(forest.verdict(i)),
            final_check: None,
        };
        if let Some(a) = prod_prover::canary_alarm(lang, &n.statement, &decision) {
            eprintln!("{a}: node {}", given[i].id);
            alarms += 1;
        }
    }
    alarms
}

/// The complete file of root `root` as the final check compiles it: its imports, its context,
/// the lemmas child-first and the root ([`prod_prover::complete_text`]).
fn complete_file(
    prover: ProverKind,
    forest: &Forest<'_>,
    given: &Given,
    root: usize,
    a: &prod_prover::RootAssembly,
) -> Result<String, String> {
    prod_prover::complete_text(
        prover,
        &FinalProof {
            imports: &given.imports,
            context: &given.context,
            scope: &[],
            qualified_name: "",
            statement: &forest.nodes()[root].statement,
            assembled: &a.proof,
            hammer_replaced: a.hammer_replaced,
            timeout: prod_check::TimeLimits::single_final(),
        },
    )
}

/// The complete file; with `--json`, the file, the assembled proof's text and its lemmas.
fn print_assembly(
    out: &mut impl Write,
    id: &str,
    p: &prod_core::AssembledProof,
    file: &str,
    json: bool,
) -> std::io::Result<()> {
    if !json {
        return write!(out, "{file}");
    }
    let lemmas: Vec<_> = p
        .lemmas
        .iter()
        .map(|l| serde_json::json!({"name": l.name, "node": l.node_id, "statement": l.statement}))
        .collect();
    let line = serde_json::json!({"id": id, "file": file, "proof": p.text, "lemmas": lemmas});
    writeln!(out, "{line}")
}

/// One line per node: its id as given and its global verdict (`null`: undetermined).
fn print_verdicts_json(
    out: &mut impl Write,
    forest: &Forest<'_>,
    given: &[Given],
) -> std::io::Result<()> {
    for (i, g) in given.iter().enumerate() {
        let v = forest.verdict(i).as_bool();
        writeln!(
            out,
            "{}",
            serde_json::json!({"id": g.id, "globally_correct": v})
        )?;
    }
    Ok(())
}

/// A table of local and global verdicts and depths, and the totals.
fn print_table(out: &mut impl Write, forest: &Forest<'_>) -> std::io::Result<()> {
    let nodes = forest.nodes();
    let width = nodes.iter().map(|n| n.id.len()).max().unwrap_or(2).max(2);
    writeln!(
        out,
        "{:width$}  {:13}  {:9}  depth",
        "id", "local", "global"
    )?;
    for (i, n) in nodes.iter().enumerate() {
        let local = match n.local {
            LocalVerdict::Correct => "correct",
            LocalVerdict::CorrectAlone => "correct_alone",
            LocalVerdict::Incorrect => "incorrect",
            LocalVerdict::Unknown => "unknown",
        };
        let global = match forest.verdict(i) {
            GlobalVerdict::Correct => "correct",
            GlobalVerdict::Incorrect => "incorrect",
            GlobalVerdict::Undetermined => "undecided",
        };
        let depth = forest.height(i).map_or("-".to_string(), |h| h.to_string());
        writeln!(out, "{:width$}  {local:13}  {global:9}  {depth}", n.id)?;
    }
    let verdicts = forest.solution().verdicts();
    let count = |v| verdicts.iter().filter(|&&x| x == v).count();
    writeln!(
        out,
        "{} nodes: {} globally correct, {} incorrect, {} undetermined",
        nodes.len(),
        count(GlobalVerdict::Correct),
        count(GlobalVerdict::Incorrect),
        count(GlobalVerdict::Undetermined)
    )
}

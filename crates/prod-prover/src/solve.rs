//! `prod tree solve`'s input as the solver takes it: the nodes of a node file, each with its
//! local verdict from its own `locally_correct` or from a verdict line of `prod check --json`
//! (`--verdicts`, read as every two-step path reads one: [`crate::decided_node`]); then, over
//! the solved [`Forest`], the canary alarms and the complete file of an assembled root.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use prod_check::VerdictLine;
use prod_core::tree::{LocalVerdict, Node};
use prod_core::{ConditionalProof, ProofLanguage};

use crate::node::{id_key, read_node_lines, NodeLine};
use crate::{FinalProof, Forest, ProverKind, RootAssembly, RootDecision};

/// The nodes of the input as the solver takes them, and per node what the output needs.
pub struct TreeInput {
    pub nodes: Vec<Node>,
    pub given: Vec<Given>,
}

/// A node's id as given, its imports and context (a root's complete file starts with them),
/// and whether its proof had `hammer.` steps replaced by its check.
pub struct Given {
    pub id: serde_json::Value,
    pub imports: String,
    pub context: String,
    pub hammer_replaced: bool,
}

impl TreeInput {
    /// Reads the node file (`-`: stdin) and, with `verdicts`, their verdict lines; errors name
    /// the line (1-based) and, for proofs, the byte position. Every error is the input's.
    pub fn read(file: &Path, verdicts: Option<&Path>, kind: ProverKind) -> Result<Self, String> {
        let mut lines = verdicts.map(read_verdicts).transpose()?;
        let mut input = TreeInput {
            nodes: vec![],
            given: vec![],
        };
        for (lineno, n) in read_node_lines(file)? {
            let id = id_text(&n.id);
            let checked = match &mut lines {
                Some(_) if n.locally_correct.is_some() => {
                    return Err(format!("line {lineno}: node '{id}' has \"locally_correct\" and --verdicts gives its verdict: give one of them"));
                }
                Some(g) => Some(g.remove(&id)),
                None => None,
            };
            let (node, hammer_replaced) = solver_node(id.clone(), &n, checked, kind)
                .map_err(|e| format!("line {lineno}: node '{id}': {e}"))?;
            input.nodes.push(node);
            input.given.push(Given {
                id: n.id,
                imports: n.imports,
                context: n.context,
                hammer_replaced,
            });
        }
        if let Some(g) = lines.filter(|g| !g.is_empty()) {
            let mut extra: Vec<&str> = g.keys().map(String::as_str).collect();
            extra.sort();
            extra.truncate(5);
            return Err(format!(
                "--verdicts has verdicts for ids that are not nodes: {}",
                extra.join(", ")
            ));
        }
        Ok(input)
    }

    /// Solves the nodes (global correctness over the decided local verdicts).
    pub fn solve(self, lang: &dyn ProofLanguage) -> (Forest<'_>, Vec<Given>) {
        let hammer = self.given.iter().map(|g| g.hammer_replaced).collect();
        (Forest::solve_decided(self.nodes, hammer, lang), self.given)
    }
}

fn open_lines(file: &Path) -> Result<Box<dyn BufRead>, String> {
    Ok(if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| format!("cannot open {}: {e}", file.display()))?;
        Box::new(std::io::BufReader::new(f))
    })
}

/// `prod check --json`'s output ([`VerdictLine`]s), by id. Errors name the line.
fn read_verdicts(file: &Path) -> Result<HashMap<String, VerdictLine>, String> {
    let mut out = HashMap::new();
    for (i, line) in open_lines(file)?.lines().enumerate() {
        let where_ = format!("{}: line {}", file.display(), i + 1);
        let line = line.map_err(|_| format!("{where_}: cannot read (not UTF-8?)"))?;
        if line.trim().is_empty() {
            continue;
        }
        let v: VerdictLine = serde_json::from_str(&line).map_err(|e| {
            format!(
                "{where_}: not a verdict line of prod check --json (\"verdict\" is one of proved, \
                 failed, timed_out, rejected, infra): {e}"
            )
        })?;
        let id = id_key(&v.id).ok_or_else(|| format!("{where_}: no string or number \"id\""))?;
        if out.insert(id.clone(), v).is_some() {
            return Err(format!("{where_}: a second verdict for id '{id}'"));
        }
    }
    Ok(out)
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
) -> Result<(Node, bool), String> {
    let context = context_key(&n.imports, &n.context);
    let local = match &checked {
        Some(Some(line)) => line.local_verdict(),
        Some(None) => LocalVerdict::Unknown,
        None => n.locally_correct.into(),
    };
    let statement = n.statement.clone();
    let (proof, local) = match ConditionalProof::parse_with(&n.proof, kind.language()) {
        Ok(p) => match &checked {
            // Read from its verdict line as every two-step path reads one.
            Some(line) => {
                let decided = crate::decided_node(id, context, statement, &p, line.as_ref(), kind);
                return Ok(decided);
            }
            None => (p, local),
        },
        // Not a conditional proof: the model's fault (as prod check rejects it), so locally
        // incorrect; it proves nothing, so its placeholder proof is never read. A node said
        // to be correct with such a proof is contradictory input.
        Err(_) if !local.is_correct() => (
            ConditionalProof::plain(prod_core::T0::NoInvoke, ""),
            LocalVerdict::Incorrect,
        ),
        Err(e) => return Err(format!("bad conditional proof: {e}")),
    };
    let node = Node {
        id,
        context,
        statement,
        proof,
        local,
    };
    Ok((node, false))
}

/// What children must share with their parent: the imports and the context (both, unambiguously).
fn context_key(imports: &str, context: &str) -> String {
    serde_json::json!([imports, context]).to_string()
}

/// Every node that states a canary and came out accepted ([`crate::canary_alarm`]): the alarm
/// and the node's id, one line each.
pub fn canary_alarms(
    forest: &Forest<'_>,
    given: &[Given],
    lang: &dyn ProofLanguage,
) -> Vec<String> {
    let mut alarms = vec![];
    for (i, n) in forest.nodes().iter().enumerate() {
        let decision = RootDecision {
            local: Some((n.local, n.proof.lemma_count() > 0)),
            global: Some(forest.verdict(i)),
            final_check: None,
        };
        if let Some(a) = crate::canary_alarm(lang, &n.statement, &decision) {
            alarms.push(format!("{a}: node {}", given[i].id));
        }
    }
    alarms
}

/// The complete file of root `root` as the final check compiles it: its imports, its context,
/// the lemmas child-first and the root ([`crate::complete_text`]).
pub fn complete_file(
    prover: ProverKind,
    forest: &Forest<'_>,
    given: &Given,
    root: usize,
    a: &RootAssembly,
) -> Result<String, String> {
    crate::complete_text(
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

/// `prod tree solve --json`'s lines: each node's id as given and its global verdict (`null`:
/// undetermined).
pub fn verdict_lines(forest: &Forest<'_>, given: &[Given]) -> Vec<serde_json::Value> {
    given
        .iter()
        .enumerate()
        .map(|(i, g)| serde_json::json!({"id": g.id, "globally_correct": forest.verdict(i).as_bool()}))
        .collect()
}

/// `prod tree solve --assemble ID --json`'s object: the complete file, the assembled proof's
/// text and its lemmas.
pub fn assembly_json(id: &str, p: &prod_core::AssembledProof, file: &str) -> serde_json::Value {
    let lemmas: Vec<_> = p
        .lemmas
        .iter()
        .map(|l| serde_json::json!({"name": l.name, "node": l.node_id, "statement": l.statement}))
        .collect();
    serde_json::json!({"id": id, "file": file, "proof": p.text, "lemmas": lemmas})
}

/// `prod tree solve`'s table: each node's local and global verdict and depth, then the totals.
pub fn table(forest: &Forest<'_>) -> String {
    use prod_core::tree::GlobalVerdict;
    let nodes = forest.nodes();
    let width = nodes.iter().map(|n| n.id.len()).max().unwrap_or(2).max(2);
    let mut t = format!("{:width$}  {:13}  {:9}  depth\n", "id", "local", "global");
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
        t += &format!("{:width$}  {local:13}  {global:9}  {depth}\n", n.id);
    }
    let verdicts = forest.solution().verdicts();
    let count = |v| verdicts.iter().filter(|&&x| x == v).count();
    let (c, i, u) = (
        count(GlobalVerdict::Correct),
        count(GlobalVerdict::Incorrect),
        count(GlobalVerdict::Undetermined),
    );
    t + &format!(
        "{} nodes: {c} globally correct, {i} incorrect, {u} undetermined\n",
        nodes.len()
    )
}

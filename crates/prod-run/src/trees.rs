//! Proof trees sampled elsewhere (`prod eval --trees FILE`): a GPU machine without Coq samples
//! Algorithm 1's trees (`python/device/prod_device.py`), and this module reads them back as the
//! nodes an evaluation would have sampled, so that they are checked by the real prover, solved,
//! re-checked cold and scored exactly as in `prod eval`.
//!
//! The file (schema in docs/models.md): a header line (`"format": "prod-trees"`, version 1,
//! `samples` trees per theorem, the depth limit, the model's name, the sampling settings), then
//! one line per node: `node` (an id), `tree`, `depth`, `parent` (a node id, null for a root),
//! `theorem` (the dataset id of the tree's theorem), `statement`, `forced_t0` (`"no_invoke"` at
//! the depth limit), `t0` (the token the completion begins with), `completion`, and optionally
//! `tokens` and `stop`. Every line is checked and a bad one is refused with its line number:
//! each theorem has exactly one root per tree with its dataset statement, a child is one level
//! below its parent in the same tree and states a lemma its parent proposes, the depth limit
//! forces `<no_invoke>`, and every lemma proposed below the limit has a node at the next level.
//!
//! Algorithm 1 samples each proposed lemma once per tree and level, up to the prover's
//! statement normalisation (`prod_rl::generate_test_trees`); a sampler that told lemmas apart
//! more finely (by their text) wrote more nodes than that. Such extra nodes — a second node of
//! the same level, context and normalised statement, and what only it proposed — are left out,
//! and counted, so that the trees evaluated are the ones Algorithm 1 defines.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use prod_core::conditional::{NO_INVOKE, USE_INVOKE};
use prod_core::{ConditionalProof, ProofLanguage, T0};
use prod_rl::{GeneratedNode, Origin};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::eval::Theorem;

/// The file's format name and the version this reader knows.
pub const FORMAT: &str = "prod-trees";
pub const VERSION: u32 = 1;

/// The header line. Fields beyond these are kept as they are (`extra`) for the report.
#[derive(Clone, Debug, Deserialize)]
pub struct TreesHeader {
    pub format: String,
    pub version: u32,
    /// The model that sampled the trees (the report's name for the evaluation).
    pub model: String,
    /// Trees per theorem (n).
    pub samples: u32,
    /// Algorithm 1's depth limit d: `<no_invoke>` is forced at depth d.
    pub depth: u32,
    pub temperature: f64,
    /// The dataset split the theorems come from.
    #[serde(default = "default_split")]
    pub split: String,
    /// How many theorems the file has trees for.
    pub theorems: usize,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn default_split() -> String {
    "test".into()
}

/// One node line.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeLine {
    node: u64,
    tree: u32,
    depth: u32,
    parent: Option<u64>,
    theorem: String,
    statement: String,
    forced_t0: Option<T0>,
    t0: Option<T0>,
    completion: String,
    #[serde(default)]
    tokens: Option<u64>,
    #[serde(default)]
    stop: Option<String>,
}

/// A read and checked trees file.
#[derive(Debug)]
pub struct TreesFile {
    pub header: TreesHeader,
    /// The dataset's theorems the file has trees for, in the dataset's order.
    pub theorems: Vec<Theorem>,
    /// The nodes Algorithm 1 defines, tree by tree: its roots in the order of `theorems`,
    /// then the deeper levels.
    pub nodes: Vec<GeneratedNode>,
    /// Node lines left out (a lemma sampled twice in one tree and level).
    pub left_out: usize,
    /// Node lines in the file.
    pub lines: usize,
    /// SHA-256 of the file's bytes (a resumed run must read the same file).
    pub sha256: String,
    /// Tokens the sampler generated (the lines' `tokens`, where given).
    pub generated_tokens: u64,
    /// Samples the sampler cut at its token limit (`"stop": "length"`).
    pub cut_at_length: usize,
    /// Whether every node line says why its sample stopped (`stop`), so that the nodes'
    /// truncation flags are known rather than assumed.
    pub stops_given: bool,
}

/// A policy for the canaries of a run whose trees were sampled elsewhere: no model is here,
/// so each canary request (a statement no proof may prove, in one of the run's contexts) is
/// answered with a root completion the file has for that context, in turn by request
/// sequence number — the model's own proof texts, tried on statements they must not prove.
/// A context with no root gets an empty completion (a failed node).
pub struct GivenCompletions {
    by_context: HashMap<String, Vec<String>>,
}

impl GivenCompletions {
    pub fn new(nodes: &[GeneratedNode]) -> Self {
        let mut by_context: HashMap<String, Vec<String>> = HashMap::new();
        for n in nodes.iter().filter(|n| n.depth == 0) {
            by_context
                .entry(n.context.clone())
                .or_default()
                .push(n.completion.clone());
        }
        GivenCompletions { by_context }
    }

    /// The answer to request number `seq`: the context's roots in turn.
    fn answer(&self, r: &prod_rl::SampleRequest<'_>, seq: u64) -> String {
        let answers = self
            .by_context
            .get(r.context)
            .map_or(&[][..], |v| v.as_slice());
        if answers.is_empty() {
            return String::new();
        }
        let text = &answers[seq as usize % answers.len()];
        match r.forced_t0 {
            // A forced request continues after the forced token, which the caller puts in
            // front: the root's text without its own `t0`.
            Some(_) => {
                let s = text.trim_start();
                s.strip_prefix(USE_INVOKE)
                    .or_else(|| s.strip_prefix(NO_INVOKE))
                    .unwrap_or(s)
                    .to_string()
            }
            None => text.clone(),
        }
    }
}

impl crate::policy::SeqPolicy for GivenCompletions {
    fn sample_at(
        &mut self,
        requests: &[prod_rl::SampleRequest<'_>],
        first_seq: u64,
    ) -> Result<Vec<prod_rl::Completion>, prod_rl::PolicyError> {
        Ok(requests
            .iter()
            .enumerate()
            .map(|(i, r)| prod_rl::Completion::ended(self.answer(r, first_seq + i as u64)))
            .collect())
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, prod_rl::PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

/// The report's note on where the trees came from.
pub fn note(path: &Path, t: &TreesFile) -> String {
    let sampler = t
        .header
        .extra
        .get("sampler")
        .and_then(|v| v.as_str())
        .unwrap_or("elsewhere");
    format!(
        "trees read from {} (SHA-256 {}), sampled by {sampler}: {} node lines, {} left out as lemmas sampled twice in one tree and level; {} tokens generated, {} samples cut at the token limit",
        path.display(),
        &t.sha256[..16.min(t.sha256.len())],
        t.lines,
        t.left_out,
        t.generated_tokens,
        t.cut_at_length
    )
}

fn t0_of(text: &str) -> Option<T0> {
    let s = text.trim_start();
    if s.starts_with(USE_INVOKE) {
        Some(T0::UseInvoke)
    } else if s.starts_with(NO_INVOKE) {
        Some(T0::NoInvoke)
    } else {
        None
    }
}

fn name(t: Option<T0>) -> &'static str {
    match t {
        Some(T0::UseInvoke) => "use_invoke",
        Some(T0::NoInvoke) => "no_invoke",
        None => "null",
    }
}

/// Reads `path` against the dataset split's theorems (`split_theorems`, in the dataset's
/// order). Errors name the file and line.
pub fn read_trees(
    path: &Path,
    split_theorems: &[Theorem],
    lang: &dyn ProofLanguage,
) -> Result<TreesFile, String> {
    let (text, sha256) = read_text(path)?;
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hl, htext)) = lines.next() else {
        return Err(format!("{}: empty (no header line)", path.display()));
    };
    let header = parse_header(path, hl, htext)?;
    let by_id: HashMap<&str, &Theorem> =
        split_theorems.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut read = NodeLines::new(path, &header, &by_id, lang);
    for (ln, l) in lines {
        read.push(ln, l)?;
    }
    let NodeLines { nodes, roots, .. } = read;
    let theorems = theorems_with_trees(path, hl, &header, split_theorems, &nodes, &roots)?;
    let (kept, left_out) = algorithm1_nodes(&nodes, &header, &by_id, lang, path)?;
    let generated = generated_nodes(&nodes, kept, (&theorems, &by_id), lang);
    let cut = nodes
        .iter()
        .filter(|(_, n)| n.stop.as_deref() == Some("length"))
        .count();
    let tokens = nodes.iter().filter_map(|(_, n)| n.tokens).sum();
    Ok(TreesFile {
        header,
        theorems,
        nodes: generated,
        left_out,
        lines: nodes.len(),
        sha256,
        generated_tokens: tokens,
        cut_at_length: cut,
        stops_given: nodes.iter().all(|(_, n)| n.stop.is_some()),
    })
}

/// An error at a line of the file.
fn at(path: &Path, line: usize, m: String) -> String {
    format!("{}:{line}: {m}", path.display())
}

/// The file's text and the SHA-256 of its bytes.
fn read_text(path: &Path) -> Result<(String, String), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let text =
        String::from_utf8(bytes).map_err(|e| format!("{}: not UTF-8: {e}", path.display()))?;
    Ok((text, sha256))
}

/// The header line (line `hl`), of this reader's format and version, with at least one tree.
fn parse_header(path: &Path, hl: usize, htext: &str) -> Result<TreesHeader, String> {
    let header: TreesHeader = serde_json::from_str(htext)
        .map_err(|e| at(path, hl, format!("not a trees header: {e}")))?;
    if header.format != FORMAT || header.version != VERSION {
        return Err(at(
            path,
            hl,
            format!(
                "format {:?} version {}: this prod reads {FORMAT:?} version {VERSION}",
                header.format, header.version
            ),
        ));
    }
    if header.samples == 0 {
        return Err(at(
            path,
            hl,
            "samples is 0: the file has no complete tree".into(),
        ));
    }
    Ok(header)
}

/// The node lines read so far, each checked on its own and against its parent (an earlier
/// line), and the roots seen (theorem, tree).
struct NodeLines<'a> {
    path: &'a Path,
    header: &'a TreesHeader,
    by_id: &'a HashMap<&'a str, &'a Theorem>,
    /// The proofs' language: which lemmas a completion proposes.
    lang: &'a dyn ProofLanguage,
    nodes: Vec<(usize, NodeLine)>,
    /// A node id's index in `nodes`.
    index: HashMap<u64, usize>,
    roots: HashSet<(String, u32)>,
}

impl<'a> NodeLines<'a> {
    fn new(
        path: &'a Path,
        header: &'a TreesHeader,
        by_id: &'a HashMap<&'a str, &'a Theorem>,
        lang: &'a dyn ProofLanguage,
    ) -> Self {
        NodeLines {
            path,
            header,
            by_id,
            lang,
            nodes: Vec::new(),
            index: HashMap::new(),
            roots: HashSet::new(),
        }
    }

    fn at(&self, line: usize, m: String) -> String {
        at(self.path, line, m)
    }

    /// Parses and checks line `ln`, then keeps it.
    fn push(&mut self, ln: usize, l: &str) -> Result<(), String> {
        let n: NodeLine =
            serde_json::from_str(l).map_err(|e| self.at(ln, format!("not a node line: {e}")))?;
        if self.index.contains_key(&n.node) {
            return Err(self.at(ln, format!("node {} appears twice", n.node)));
        }
        let by_id = self.by_id;
        let Some(th) = by_id.get(n.theorem.as_str()) else {
            return Err(self.at(
                ln,
                format!(
                    "theorem {:?} is not in the dataset's {} split",
                    n.theorem, self.header.split
                ),
            ));
        };
        self.check_level(ln, &n)?;
        match n.parent {
            None => {
                self.check_root(ln, &n, th)?;
                if !self.roots.insert((n.theorem.clone(), n.tree)) {
                    return Err(self.at(
                        ln,
                        format!("a second root of theorem {} in tree {}", n.theorem, n.tree),
                    ));
                }
            }
            Some(p) => self.check_child(ln, &n, p)?,
        }
        self.index.insert(n.node, self.nodes.len());
        self.nodes.push((ln, n));
        Ok(())
    }

    /// The node's tree and depth are within the header's, and its `forced_t0` and `t0` are
    /// the ones Algorithm 1 gives at that depth and the completion begins with.
    fn check_level(&self, ln: usize, n: &NodeLine) -> Result<(), String> {
        let header = self.header;
        if n.tree >= header.samples {
            return Err(self.at(
                ln,
                format!(
                    "tree {} but the header says {} trees",
                    n.tree, header.samples
                ),
            ));
        }
        if n.depth > header.depth {
            return Err(self.at(
                ln,
                format!("depth {} beyond the depth limit {}", n.depth, header.depth),
            ));
        }
        let want_forced = (n.depth == header.depth).then_some(T0::NoInvoke);
        if n.forced_t0 != want_forced {
            return Err(self.at(
                ln,
                format!(
                    "forced_t0 is {} at depth {}: Algorithm 1 forces <no_invoke> exactly at the depth limit {}",
                    name(n.forced_t0),
                    n.depth,
                    header.depth
                ),
            ));
        }
        let begins = t0_of(&n.completion);
        if n.t0 != begins {
            return Err(self.at(
                ln,
                format!(
                    "t0 is {} but the completion begins with {}",
                    name(n.t0),
                    name(begins)
                ),
            ));
        }
        if n.forced_t0.is_some() && begins != n.forced_t0 {
            return Err(self.at(
                ln,
                "a forced node's completion must begin with the forced token".into(),
            ));
        }
        Ok(())
    }

    /// A root is at depth 0 and states its theorem's dataset statement.
    fn check_root(&self, ln: usize, n: &NodeLine, th: &Theorem) -> Result<(), String> {
        if n.depth != 0 {
            return Err(self.at(ln, format!("no parent at depth {}", n.depth)));
        }
        if n.statement != th.statement {
            return Err(self.at(
                ln,
                format!(
                    "the root's statement differs from theorem {}'s in the dataset (another dataset?)",
                    n.theorem
                ),
            ));
        }
        Ok(())
    }

    /// A child's parent `p` is an earlier node of the same tree and theorem, one level up,
    /// whose conditional proof proposes the child's statement as a lemma.
    fn check_child(&self, ln: usize, n: &NodeLine, p: u64) -> Result<(), String> {
        let Some(&pi) = self.index.get(&p) else {
            return Err(self.at(ln, format!("parent {p} is not an earlier node of the file")));
        };
        let (pl, parent) = &self.nodes[pi];
        if parent.tree != n.tree || parent.depth + 1 != n.depth || parent.theorem != n.theorem {
            return Err(self.at(
                ln,
                format!(
                    "parent {p} (line {pl}) is in tree {} at depth {} of theorem {}: a child is in its parent's tree and theorem, one level below",
                    parent.tree, parent.depth, parent.theorem
                ),
            ));
        }
        let proposed = ConditionalProof::parse_with(&parent.completion, self.lang)
            .map(|c| c.lemmas().any(|l| l == n.statement))
            .unwrap_or(false);
        if !proposed {
            return Err(self.at(
                ln,
                format!("the statement is not a lemma proposed by its parent {p} (line {pl})"),
            ));
        }
        Ok(())
    }
}

/// The split's theorems the node lines have trees for, in the dataset's order: as many as the
/// header (line `hl`) says, each with a root in every tree.
fn theorems_with_trees(
    path: &Path,
    hl: usize,
    header: &TreesHeader,
    split_theorems: &[Theorem],
    nodes: &[(usize, NodeLine)],
    roots: &HashSet<(String, u32)>,
) -> Result<Vec<Theorem>, String> {
    let in_file: HashSet<&str> = nodes.iter().map(|(_, n)| n.theorem.as_str()).collect();
    let theorems: Vec<Theorem> = split_theorems
        .iter()
        .filter(|t| in_file.contains(t.id.as_str()))
        .cloned()
        .collect();
    if theorems.len() != header.theorems {
        return Err(at(
            path,
            hl,
            format!(
                "the header says {} theorems, the nodes have {}",
                header.theorems,
                theorems.len()
            ),
        ));
    }
    for t in &theorems {
        for tree in 0..header.samples {
            if !roots.contains(&(t.id.clone(), tree)) {
                return Err(format!(
                    "{}: theorem {} has no root in tree {tree} (every theorem needs one per tree)",
                    path.display(),
                    t.id
                ));
            }
        }
    }
    Ok(theorems)
}

/// The kept nodes as the nodes an evaluation samples, tree by tree and level by level: the
/// roots in the order of `theorems`, then the deeper levels in file order.
fn generated_nodes(
    nodes: &[(usize, NodeLine)],
    kept: Vec<usize>,
    (theorems, by_id): (&[Theorem], &HashMap<&str, &Theorem>),
    lang: &dyn ProofLanguage,
) -> Vec<GeneratedNode> {
    let root_order: HashMap<&str, usize> = theorems
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.as_str(), i))
        .collect();
    let mut order: Vec<usize> = kept;
    order.sort_by_key(|&i| {
        let n = &nodes[i].1;
        (
            n.tree,
            n.depth,
            if n.depth == 0 {
                root_order[n.theorem.as_str()]
            } else {
                0
            },
            i,
        )
    });
    order
        .into_iter()
        .map(|i| {
            let n = &nodes[i].1;
            GeneratedNode {
                context: by_id[n.theorem.as_str()].context.clone(),
                statement: n.statement.clone(),
                depth: n.depth,
                tree: n.tree,
                forced_t0: n.forced_t0,
                origin: Origin::Sampled,
                proof: ConditionalProof::parse_with(&n.completion, lang),
                completion: n.completion.clone(),
                truncated: n.stop.as_deref() == Some("length"),
            }
        })
        .collect()
}

/// The indices of the nodes Algorithm 1 defines (level by level: the first node of each
/// (context, normalised statement) proposed by a kept node of the level above), and how many
/// lines that leaves out. A proposal with no node at all is an error naming its proposer.
fn algorithm1_nodes(
    nodes: &[(usize, NodeLine)],
    header: &TreesHeader,
    by_id: &HashMap<&str, &Theorem>,
    lang: &dyn ProofLanguage,
    path: &Path,
) -> Result<(Vec<usize>, usize), String> {
    let context = |n: &NodeLine| by_id[n.theorem.as_str()].context.as_str();
    let mut kept: Vec<usize> = Vec::new();
    let mut level: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].1.depth == 0)
        .collect();
    kept.extend(&level);
    for depth in 0..header.depth {
        // The next level's nodes of the file, first by key.
        let mut first: HashMap<(u32, &str, String), usize> = HashMap::new();
        for (i, (_, n)) in nodes.iter().enumerate() {
            if n.depth == depth + 1 {
                first
                    .entry((n.tree, context(n), lang.normalize_statement(&n.statement)))
                    .or_insert(i);
            }
        }
        let mut next = Vec::new();
        let mut seen: HashSet<(u32, &str, String)> = HashSet::new();
        for &i in &level {
            let (ln, n) = &nodes[i];
            let Ok(p) = ConditionalProof::parse_with(&n.completion, lang) else {
                continue;
            };
            for l in p.lemmas() {
                let key = (n.tree, context(n), lang.normalize_statement(l));
                if !seen.insert(key.clone()) {
                    continue;
                }
                match first.get(&key) {
                    Some(&c) => next.push(c),
                    None => {
                        return Err(format!(
                            "{}:{ln}: node {} (tree {}, depth {depth}) proposes `{l}`, which has no node at depth {}: Algorithm 1 samples every proposed lemma",
                            path.display(),
                            n.node,
                            n.tree,
                            depth + 1
                        ))
                    }
                }
            }
        }
        kept.extend(&next);
        level = next;
    }
    let left_out = nodes.len() - kept.len();
    Ok((kept, left_out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CTX: &str = "From Coq Require Import Arith.\n";

    fn theorem(id: &str, statement: &str) -> Theorem {
        Theorem {
            id: id.into(),
            context: CTX.into(),
            statement: statement.into(),
            ground_truth: None,
            depth: Some(0),
            scope: vec![],
            qualified_name: id.into(),
            file: "F.v".into(),
        }
    }

    fn theorems() -> Vec<Theorem> {
        vec![
            theorem("F:a", "Lemma a : 1 + 1 = 2."),
            theorem("F:b", "Lemma b : 2 + 2 = 4."),
            theorem("F:c", "Lemma c : 3 = 3."),
        ]
    }

    fn header(samples: u32, depth: u32, n: usize) -> serde_json::Value {
        json!({"format": "prod-trees", "version": 1, "model": "m", "samples": samples, "depth": depth,
               "temperature": 0.7, "theorems": n, "sampler": "test"})
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        id: u64,
        tree: u32,
        depth: u32,
        parent: Option<u64>,
        th: &str,
        st: &str,
        forced: bool,
        c: &str,
    ) -> serde_json::Value {
        let t0 = if c.trim_start().starts_with("<use_invoke>") {
            json!("use_invoke")
        } else if c.trim_start().starts_with("<no_invoke>") {
            json!("no_invoke")
        } else {
            json!(null)
        };
        json!({"node": id, "tree": tree, "depth": depth, "parent": parent, "theorem": th, "statement": st,
               "forced_t0": if forced { json!("no_invoke") } else { json!(null) }, "t0": t0,
               "completion": c, "tokens": 3, "stop": "end"})
    }

    /// Two theorems, two trees, depth limit 1: tree 0's root of `a` proposes two lemmas (one
    /// of them twice, under two names), tree 1 proposes nothing.
    fn good() -> Vec<serde_json::Value> {
        let p = "<use_invoke> <invoke> Lemma x : 1 = 1. </invoke> <invoke> Lemma y : 1 = 1. </invoke> <invoke> Lemma z : 0 = 0. </invoke> auto.";
        vec![
            header(2, 1, 2),
            node(0, 0, 0, None, "F:a", "Lemma a : 1 + 1 = 2.", false, p),
            node(
                1,
                0,
                0,
                None,
                "F:b",
                "Lemma b : 2 + 2 = 4.",
                false,
                "<no_invoke> auto.",
            ),
            node(
                2,
                0,
                1,
                Some(0),
                "F:a",
                "Lemma x : 1 = 1.",
                true,
                "<no_invoke> reflexivity.",
            ),
            node(
                3,
                0,
                1,
                Some(0),
                "F:a",
                "Lemma y : 1 = 1.",
                true,
                "<no_invoke> auto.",
            ),
            node(
                4,
                0,
                1,
                Some(0),
                "F:a",
                "Lemma z : 0 = 0.",
                true,
                "<no_invoke> auto.",
            ),
            node(
                5,
                1,
                0,
                None,
                "F:b",
                "Lemma b : 2 + 2 = 4.",
                false,
                "garbage",
            ),
            node(
                6,
                1,
                0,
                None,
                "F:a",
                "Lemma a : 1 + 1 = 2.",
                false,
                "<no_invoke> lia.",
            ),
        ]
    }

    fn read(lines: &[serde_json::Value]) -> Result<TreesFile, String> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&p, text).unwrap();
        read_trees(&p, &theorems(), &prod_coq::CoqLanguage)
    }

    #[test]
    fn reads_algorithm1_trees_in_root_order_and_leaves_out_a_lemma_sampled_twice() {
        let t = read(&good()).unwrap();
        assert_eq!(t.header.samples, 2);
        let ids: Vec<&str> = t.theorems.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["F:a", "F:b"]);
        // `y` states what `x` states (statement keys ignore the name): Algorithm 1 samples it once.
        assert_eq!((t.lines, t.left_out, t.nodes.len()), (7, 1, 6));
        let order: Vec<(u32, u32, &str)> = t
            .nodes
            .iter()
            .map(|n| (n.tree, n.depth, n.statement.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                (0, 0, "Lemma a : 1 + 1 = 2."),
                (0, 0, "Lemma b : 2 + 2 = 4."),
                (0, 1, "Lemma x : 1 = 1."),
                (0, 1, "Lemma z : 0 = 0."),
                (1, 0, "Lemma a : 1 + 1 = 2."),
                (1, 0, "Lemma b : 2 + 2 = 4."),
            ]
        );
        assert!(t
            .nodes
            .iter()
            .all(|n| n.context == CTX && n.origin == Origin::Sampled));
        assert_eq!(t.nodes[2].forced_t0, Some(T0::NoInvoke));
        assert!(
            t.nodes[5].proof.is_err(),
            "an unparsable completion stays a (failed) node"
        );
        assert_eq!(t.generated_tokens, 21);
        assert!(t.stops_given && t.nodes.iter().all(|n| !n.truncated));
    }

    /// `"stop": "length"` marks the node cut; a file where a line has no `stop` does not claim
    /// to know its cuts.
    #[test]
    fn a_sample_stopped_by_length_is_a_cut_node() {
        let mut lines = good();
        lines[6]["stop"] = json!("length");
        let t = read(&lines).unwrap();
        assert_eq!(t.cut_at_length, 1);
        let cut: Vec<bool> = t.nodes.iter().map(|n| n.truncated).collect();
        assert_eq!(cut, [false, false, false, false, false, true]);
        lines[1].as_object_mut().unwrap().remove("stop");
        assert!(!read(&lines).unwrap().stops_given);
    }

    #[test]
    fn refuses_malformed_files_naming_the_line() {
        /// A change to the good file, and what the error must say.
        type Case = (Box<dyn Fn(&mut Vec<serde_json::Value>)>, &'static str);
        let cases: Vec<Case> = vec![
            (Box::new(|f| f[0]["version"] = json!(2)), "t.jsonl:1: format"),
            (Box::new(|f| f[0]["samples"] = json!(0)), "t.jsonl:1: samples is 0"),
            (Box::new(|f| f[0]["theorems"] = json!(3)), "t.jsonl:1: the header says 3 theorems"),
            (Box::new(|f| f[2]["extra"] = json!(1)), "t.jsonl:3: not a node line: unknown field"),
            (Box::new(|f| f[3]["node"] = json!(0)), "t.jsonl:4: node 0 appears twice"),
            (Box::new(|f| f[2]["theorem"] = json!("F:zz")), "t.jsonl:3: theorem \"F:zz\" is not in"),
            (Box::new(|f| f[2]["tree"] = json!(2)), "t.jsonl:3: tree 2 but the header says 2 trees"),
            (Box::new(|f| f[2]["statement"] = json!("Lemma b : 5 = 5.")), "t.jsonl:3: the root's statement differs"),
            (Box::new(|f| f[3]["forced_t0"] = json!(null)), "t.jsonl:4: forced_t0 is null at depth 1"),
            (Box::new(|f| f[2]["t0"] = json!("use_invoke")), "t.jsonl:3: t0 is use_invoke but the completion begins with no_invoke"),
            (Box::new(|f| f[3]["completion"] = json!("<use_invoke> auto.")), "t.jsonl:4: t0 is no_invoke but the completion begins with use_invoke"),
            (Box::new(|f| f[3]["statement"] = json!("Lemma q : 1 = 1.")), "t.jsonl:4: the statement is not a lemma proposed by its parent 0 (line 2)"),
            (Box::new(|f| f[3]["parent"] = json!(9)), "t.jsonl:4: parent 9 is not an earlier node"),
            (Box::new(|f| f[3]["parent"] = json!(1)), "t.jsonl:4: parent 1 (line 3) is in tree 0 at depth 0 of theorem F:b"),
            (Box::new(|f| f[3]["depth"] = json!(0)), "t.jsonl:4: forced_t0 is no_invoke at depth 0"),
            (Box::new(|f| f[6]["theorem"] = json!("F:a")), "t.jsonl:7: the root's statement differs"),
            (Box::new(|f| { f[6]["theorem"] = json!("F:a"); f[6]["statement"] = f[7]["statement"].clone(); }), "t.jsonl:8: a second root of theorem F:a in tree 1"),
            (Box::new(|f| { f.remove(7); }), "theorem F:a has no root in tree 1"),
            (Box::new(|f| { f.remove(5); }), "t.jsonl:2: node 0 (tree 0, depth 0) proposes `Lemma z : 0 = 0.`, which has no node at depth 1"),
            (Box::new(|f| f[1]["completion"] = json!("{")), "t.jsonl:2: t0 is use_invoke but the completion begins with null"),
        ];
        for (change, want) in cases {
            let mut f = good();
            change(&mut f);
            let e = read(&f).unwrap_err();
            assert!(e.contains(want), "want {want:?}, got {e:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"format\": \"prod-trees\"\n").unwrap();
        let e = read_trees(&p, &theorems(), &prod_coq::CoqLanguage).unwrap_err();
        assert!(e.contains("t.jsonl:1: not a trees header"), "{e}");
        std::fs::write(&p, "\n\n").unwrap();
        let e = read_trees(&p, &theorems(), &prod_coq::CoqLanguage).unwrap_err();
        assert!(e.contains("empty (no header line)"), "{e}");
    }
}

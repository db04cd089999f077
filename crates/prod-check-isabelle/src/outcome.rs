//! Reading one `use_theories` result of a generated theory: where the first error is, whether
//! every command ran, and what the checker's audit printed.

use crate::server::{NodeResult, Position, ServerMessage, UseTheoriesResult};
use crate::theory::{audit_tag, Region, Theory};

/// What one pass over the generated theory showed.
#[derive(Clone, Debug, PartialEq)]
pub enum PassOutcome {
    /// No error; every command finished; the audit printed its line.
    Clean(Audit),
    /// The earliest error of our theory, by position.
    Error { region: Region, message: String },
    /// An error we cannot place in our theory (another file, or no position).
    Elsewhere(String),
    /// No error, but not every command finished (the watchdog ended the pass).
    Incomplete { finished: u64, total: u64 },
    /// Everything ran, but the audit line is missing or malformed.
    NoAudit(String),
}

/// The audit line: `PRODCHK_audit_<nonce> theorems=N oracles=a,b axioms=c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub theorems: usize,
    pub oracles: Vec<String>,
    pub axioms: Vec<String>,
}

pub fn parse_audit(nonce: &str, message: &str) -> Option<Audit> {
    let rest = message.trim().strip_prefix(&audit_tag(nonce))?;
    let rest = rest.strip_prefix(" theorems=")?;
    let (n, rest) = rest.split_once(" oracles=")?;
    let (oracles, axioms) = rest.split_once(" axioms=")?;
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    Some(Audit {
        theorems: n.trim().parse().ok()?,
        oracles: list(oracles),
        axioms: list(axioms),
    })
}

/// Is this message about the file `file_name` (our theory)? Positions name the file relative
/// or absolute; the theory name carries a fresh nonce, so the base name decides.
fn in_file(m: &ServerMessage, file_name: &str) -> Option<bool> {
    let f = m.pos.as_ref()?.file.as_deref()?;
    Some(f.rsplit(['/', '\\']).next() == Some(file_name))
}

/// Our node in the result.
pub fn our_node<'a>(theory: &Theory, result: &'a UseTheoriesResult) -> Option<&'a NodeResult> {
    let file = format!("{}.thy", theory.name);
    result.nodes.iter().find(|n| {
        n.theory_name.rsplit('.').next() == Some(theory.name.as_str())
            || n.node_name.rsplit(['/', '\\']).next() == Some(file.as_str())
    })
}

/// Interpret a `use_theories` result of `theory` (written with `nonce`).
pub fn interpret(theory: &Theory, nonce: &str, result: &UseTheoriesResult) -> PassOutcome {
    let file = format!("{}.thy", theory.name);
    let node = our_node(theory, result);
    let errors = error_messages(node, result);
    let (placed, elsewhere) = place_errors(theory, &file, node, &errors);
    if let Some(outcome) = first_error(placed, &elsewhere) {
        return outcome;
    }
    let Some(node) = node else {
        return PassOutcome::NoAudit(format!(
            "the result has no node for {} (nodes: {:?})",
            theory.name,
            result
                .nodes
                .iter()
                .map(|n| &n.theory_name)
                .collect::<Vec<_>>()
        ));
    };
    if let Some(outcome) = unfinished(node, result) {
        return outcome;
    }
    audit_outcome(theory, nonce, node)
}

/// The error messages: our node's own, plus the global list (which includes imported
/// theories'), each once.
fn error_messages<'a>(
    node: Option<&'a NodeResult>,
    result: &'a UseTheoriesResult,
) -> Vec<&'a ServerMessage> {
    let mut errors: Vec<&ServerMessage> = vec![];
    if let Some(n) = node {
        errors.extend(n.messages.iter().filter(|m| m.kind == "error"));
    }
    for e in &result.errors {
        if !errors.contains(&e) {
            errors.push(e);
        }
    }
    errors
}

/// The byte of `theory` a message position points at (by offset, else by line).
fn byte_at(theory: &Theory, p: &Position) -> Option<usize> {
    p.offset
        .and_then(|o| theory.byte_of_offset(o))
        .or_else(|| p.line.and_then(|l| theory.byte_of_line(l)))
}

/// The errors placed in a region of our theory (byte, region, message), and the others
/// (another file's, or ours without a position or region), as messages.
fn place_errors(
    theory: &Theory,
    file: &str,
    node: Option<&NodeResult>,
    errors: &[&ServerMessage],
) -> (Vec<(usize, Region, String)>, Vec<String>) {
    let mut placed: Vec<(usize, Region, String)> = vec![];
    let mut elsewhere: Vec<String> = vec![];
    for e in errors {
        let ours = match in_file(e, file) {
            Some(b) => b,
            // No file: ours only if it came with our node's messages.
            None => node.is_some_and(|n| n.messages.contains(e)),
        };
        let pos = e.pos.as_ref();
        let byte = pos.and_then(|p| byte_at(theory, p));
        match (ours, byte) {
            (true, Some(b)) => match theory.region_at(b) {
                Some(r) => placed.push((b, r.clone(), e.message.clone())),
                None => elsewhere.push(e.message.clone()),
            },
            (true, None) => elsewhere.push(format!("(no position) {}", e.message)),
            (false, _) => {
                let where_ = pos
                    .and_then(|p| p.file.clone())
                    .unwrap_or_else(|| "?".into());
                elsewhere.push(format!("{where_}: {}", e.message));
            }
        }
    }
    (placed, elsewhere)
}

/// The outcome the errors give, if any: the earliest placed one, unless an error in an
/// imported theory explains it; else the first error elsewhere.
fn first_error(placed: Vec<(usize, Region, String)>, elsewhere: &[String]) -> Option<PassOutcome> {
    if let Some((_, region, message)) = placed.into_iter().min_by_key(|(b, _, _)| *b) {
        // An error in an imported theory is reported first: it explains ours.
        if let Some(m) = elsewhere
            .first()
            .filter(|m| !m.starts_with("(no position)"))
        {
            return Some(PassOutcome::Elsewhere(m.clone()));
        }
        return Some(PassOutcome::Error { region, message });
    }
    elsewhere.first().map(|m| PassOutcome::Elsewhere(m.clone()))
}

/// Without errors, a node whose commands did not all finish: failed or cancelled ones
/// (nothing to judge by), or a pass the watchdog ended.
fn unfinished(node: &NodeResult, result: &UseTheoriesResult) -> Option<PassOutcome> {
    if node.status.failed > 0 || node.status.canceled {
        // Failed or cancelled commands without an error message: nothing to judge by.
        return Some(PassOutcome::NoAudit(format!(
            "{} failed command(s){} without an error message",
            node.status.failed,
            if node.status.canceled {
                ", canceled"
            } else {
                ""
            }
        )));
    }
    if !node.status.complete() || !result.ok {
        return Some(PassOutcome::Incomplete {
            finished: node.status.finished,
            total: node.status.total,
        });
    }
    None
}

/// The audit line of a clean pass: exactly one, printed by the audit command, well formed.
fn audit_outcome(theory: &Theory, nonce: &str, node: &NodeResult) -> PassOutcome {
    let tag = audit_tag(nonce);
    let audits: Vec<&ServerMessage> = node
        .messages
        .iter()
        .filter(|m| m.kind == "writeln" && m.message.trim_start().starts_with(&tag))
        .collect();
    let [m] = audits.as_slice() else {
        return PassOutcome::NoAudit(format!("{} audit lines", audits.len()));
    };
    // The line must come from the audit command itself (PIDE positions every message at the
    // command that printed it).
    let at_audit = m.pos.as_ref().is_some_and(|p| {
        let b = byte_at(theory, p);
        b.and_then(|b| theory.region_at(b)) == Some(&Region::Audit)
    });
    if !at_audit {
        return PassOutcome::NoAudit(
            "the audit line is not positioned at the audit command".into(),
        );
    }
    match parse_audit(nonce, &m.message) {
        Some(a) => PassOutcome::Clean(a),
        None => PassOutcome::NoAudit(format!("malformed audit line {:?}", m.message)),
    }
}

/// The writeln messages positioned inside `region` (Sledgehammer's output at a step).
pub fn messages_in<'a>(theory: &Theory, node: &'a NodeResult, region: &Region) -> Vec<&'a str> {
    node.messages
        .iter()
        .filter(|m| m.kind == "writeln")
        .filter(|m| {
            m.pos
                .as_ref()
                .and_then(|p| {
                    p.offset
                        .and_then(|o| theory.byte_of_offset(o))
                        .or_else(|| p.line.and_then(|l| theory.byte_of_line(l)))
                })
                .and_then(|b| theory.region_at(b))
                == Some(region)
        })
        .map(|m| m.message.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{NodeStatus, Position};
    use crate::theory::TheorySpec;

    fn thy() -> Theory {
        Theory::build(&TheorySpec {
            nonce: "n1",
            imports: "Main",
            inline_context: "",
            open_blocks: 0,
            proved: &[],
            lemmas: &[],
            statement: "lemma PRODCHK_goal_n1: \"x = x\"",
            steps: &[
                "proof -".into(),
                "show ?thesis by simp".into(),
                "qed".into(),
            ],
            allowed_oracles: &[],
        })
    }

    fn msg(t: &Theory, kind: &str, text: &str, at: &str, file: Option<&str>) -> ServerMessage {
        let b = t.text.find(at).unwrap();
        ServerMessage {
            kind: kind.into(),
            message: text.into(),
            pos: Some(Position {
                line: None,
                offset: Some(t.offset_of_byte(b)),
                end_offset: None,
                file: file.map(String::from),
            }),
        }
    }

    fn done() -> NodeStatus {
        NodeStatus {
            ok: true,
            total: 9,
            finished: 9,
            consolidated: true,
            percentage: 100,
            ..Default::default()
        }
    }

    fn result(t: &Theory, messages: Vec<ServerMessage>, status: NodeStatus) -> UseTheoriesResult {
        UseTheoriesResult {
            ok: status.ok,
            errors: messages
                .iter()
                .filter(|m| m.kind == "error")
                .cloned()
                .collect(),
            nodes: vec![NodeResult {
                node_name: format!("/tmp/x/{}.thy", t.name),
                theory_name: format!("Draft.{}", t.name),
                status,
                messages,
            }],
        }
    }

    #[test]
    fn earliest_error_wins_and_files_matter() {
        let t = thy();
        let f = Some("PRODCHK_Check_n1.thy");
        let r = result(
            &t,
            vec![
                msg(&t, "error", "late", "qed", f),
                msg(&t, "error", "early", "by simp", f),
            ],
            NodeStatus {
                ok: false,
                failed: 2,
                ..done()
            },
        );
        assert_eq!(
            interpret(&t, "n1", &r),
            PassOutcome::Error {
                region: Region::Step(2),
                message: "early".into()
            }
        );
        // An error of another file (an import) explains everything.
        let mut r2 = r.clone();
        r2.errors.push(msg(
            &t,
            "error",
            "import broke",
            "qed",
            Some("/afp/Other.thy"),
        ));
        assert!(
            matches!(interpret(&t, "n1", &r2), PassOutcome::Elsewhere(m) if m.contains("import broke"))
        );
        // No file on a message of our node: ours.
        let r3 = result(
            &t,
            vec![msg(&t, "error", "e", "proof -", None)],
            NodeStatus {
                ok: false,
                failed: 1,
                ..done()
            },
        );
        assert!(matches!(
            interpret(&t, "n1", &r3),
            PassOutcome::Error {
                region: Region::Step(1),
                ..
            }
        ));
    }

    #[test]
    fn clean_needs_a_complete_node_and_the_audit_at_its_place() {
        let t = thy();
        let f = Some("PRODCHK_Check_n1.thy");
        let audit = |at: &str| {
            msg(
                &t,
                "writeln",
                "PRODCHK_audit_n1 theorems=1 oracles= axioms=",
                at,
                f,
            )
        };
        let r = result(&t, vec![audit("ML \\<open>\nlet")], done());
        assert!(matches!(interpret(&t, "n1", &r), PassOutcome::Clean(_)));
        // Still running (watchdog): incomplete, whatever was printed.
        let r = result(
            &t,
            vec![audit("ML \\<open>\nlet")],
            NodeStatus {
                running: 1,
                finished: 8,
                consolidated: false,
                ..done()
            },
        );
        assert!(matches!(
            interpret(&t, "n1", &r),
            PassOutcome::Incomplete {
                finished: 8,
                total: 9
            }
        ));
        // Failed commands without messages: nothing to judge by.
        let r = result(
            &t,
            vec![audit("ML \\<open>\nlet")],
            NodeStatus {
                failed: 1,
                ..done()
            },
        );
        assert!(matches!(interpret(&t, "n1", &r), PassOutcome::NoAudit(_)));
        // The line printed from a proof step, two lines, or another nonce: not the audit.
        let r = result(&t, vec![audit("by simp")], done());
        assert!(matches!(interpret(&t, "n1", &r), PassOutcome::NoAudit(_)));
        let r = result(
            &t,
            vec![audit("ML \\<open>\nlet"), audit("ML \\<open>\nlet")],
            done(),
        );
        assert!(matches!(interpret(&t, "n1", &r), PassOutcome::NoAudit(_)));
        assert!(matches!(
            interpret(
                &t,
                "n2",
                &result(&t, vec![audit("ML \\<open>\nlet")], done())
            ),
            PassOutcome::NoAudit(_)
        ));
        // No node for our theory at all.
        let mut r = result(&t, vec![], done());
        r.nodes[0].theory_name = "Draft.Other".into();
        r.nodes[0].node_name = "/tmp/Other.thy".into();
        assert!(matches!(interpret(&t, "n1", &r), PassOutcome::NoAudit(_)));
    }

    #[test]
    fn audit_lines() {
        assert_eq!(
            parse_audit("n1", "PRODCHK_audit_n1 theorems=1 oracles= axioms="),
            Some(Audit {
                theorems: 1,
                oracles: vec![],
                axioms: vec![]
            })
        );
        assert_eq!(
            parse_audit(
                "n1",
                "PRODCHK_audit_n1 theorems=2 oracles=Pure.skip_proof,X.y axioms=T.ax"
            ),
            Some(Audit {
                theorems: 2,
                oracles: vec!["Pure.skip_proof".into(), "X.y".into()],
                axioms: vec!["T.ax".into()]
            })
        );
        assert_eq!(
            parse_audit("n2", "PRODCHK_audit_n1 theorems=1 oracles= axioms="),
            None
        );
        assert_eq!(
            parse_audit("n1", "PRODCHK_audit_n1 theorems=x oracles= axioms="),
            None
        );
    }
}

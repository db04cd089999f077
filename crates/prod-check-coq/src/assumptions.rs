//! Reading `Print Assumptions` strictly (anything not understood means "not proved"), and
//! which axioms may stand behind a proof ([`AxiomPolicy`]).

use crate::config::CoqCheckConfig;

/// The axioms that may stand behind a proof besides its proposed lemmas. The prover's own
/// library (its logical axioms: excluded middle, functional extensionality, the real numbers'
/// axioms, …) is trusted as the prover is; every other constant without a proof — an `Axiom`,
/// `Parameter`, `Conjecture` or `Admitted` lemma of the context, of a user's project or of
/// another installed library — excuses nothing unless the user allows it by name
/// (`allowed_axioms`): an admitted lemma of a context would otherwise be a reward oracle,
/// since every proof could use it.
///
/// Names are qualified. A constant the context itself declares is named relative to the
/// file it is checked in (`my_axiom`, `M.my_axiom`), which is `Top` in the checker's workers
/// and the assembled file's module in the final check: both prefixes are dropped first.
#[derive(Clone, Debug)]
pub struct AxiomPolicy {
    allowed: Vec<String>,
}

/// The logical roots of the prover's own library: Coq 8.16's stdlib, Rocq 9's core and stdlib.
pub const PROVER_LIBRARY_ROOTS: &[&str] = &["Coq", "Corelib", "Stdlib", "Ltac2"];

/// The module names a context's own constants get: coqtop's top level, the assembled file.
/// Module name of the final check's compiled file (its constants are `ProdAssembled.x`).
pub const FILE_MODULE: &str = "ProdAssembled";

const FILE_MODULES: &[&str] = &["Top", FILE_MODULE];

impl AxiomPolicy {
    pub fn new(cfg: &CoqCheckConfig) -> AxiomPolicy {
        Self::allowing(&cfg.allowed_axioms)
    }

    pub fn allowing(allowed: &[String]) -> AxiomPolicy {
        AxiomPolicy {
            allowed: allowed.to_vec(),
        }
    }

    /// May a proof rely on the axiom with this qualified name?
    pub fn trusts(&self, qualified: &str) -> bool {
        let relative = FILE_MODULES
            .iter()
            .find_map(|m| qualified.strip_prefix(m)?.strip_prefix('.'))
            .unwrap_or(qualified);
        if self.allowed.iter().any(|a| a == qualified || a == relative) {
            return true;
        }
        let root = qualified.split('.').next().unwrap_or("");
        relative == qualified && qualified.contains('.') && PROVER_LIBRARY_ROOTS.contains(&root)
    }
}

/// What `Print Assumptions x.` said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assumptions {
    /// `Closed under the global context`.
    Closed,
    /// The axioms by name (as printed), plus whether section variables were listed.
    Axioms {
        axioms: Vec<String>,
        section_variables: bool,
    },
}

/// Is `s` a (possibly qualified) Coq identifier as Coq prints it?
fn is_qualid(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(prod_coq::is_identifier)
}

/// Remove Coq's own `Fetching opaque proofs from disk for M` notices (they come out while
/// assumptions are collected); any other `<infomsg>` is left in place and makes parsing fail.
fn strip_fetch_notices(output: &str) -> String {
    let mut out = String::with_capacity(output.len());
    let mut rest = output;
    while let Some(i) = rest.find("<infomsg>") {
        let after = &rest[i + "<infomsg>".len()..];
        let Some(j) = after.find("</infomsg>") else {
            break;
        };
        let body = after[..j].trim();
        let is_fetch = body
            .strip_prefix("Fetching opaque proofs from disk for ")
            .is_some_and(|m| is_qualid(m.trim()));
        if is_fetch {
            out.push_str(&rest[..i]);
            rest = &after[j + "</infomsg>".len()..];
        } else {
            out.push_str(&rest[..i + "<infomsg>".len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What `sh` prints on its standard error when the command it waits for is killed.
const SHELL_NOTICES: [&str; 2] = ["Killed", "Terminated"];

/// Parse `Print Assumptions` output. `Err` (with the offending line) for anything else: unsafe
/// flags (`… is assumed to be guarded.`, `… relies on an unsafe hierarchy.`, `… is assumed to be
/// positive.`), unknown headers, messages, errors.
///
/// A printed type can hold any line: a string term is printed with its characters as they are
/// (`String (Ascii false true false true false false false false) "Axioms:"` prints a line
/// break, then `Axioms:` at the start of a line), whatever the rules allow in literals. So a
/// line of the output may be the proof's, and the parse may only ever read *more* axioms from
/// such lines, never fewer: Coq prints `Section Variables:` before `Axioms:` and each once, so a
/// header out of that order is refused (a forged `Section Variables:` after `Axioms:` would
/// otherwise read every later axiom as a section variable), and a forged entry is one more
/// axiom to justify.
///
/// A job-status line of a shell (`Killed`, `Terminated`) is not Coq's and is left out: the
/// hammer's prover processes run under `sh` on coqtop's own output pipe, and when the hammer
/// kills the provers it no longer needs, their shells' notices can arrive while a later command
/// runs (seen in the assumptions of a proof whose hammer step had just finished). Leaving such a
/// line out never drops an axiom: an entry is a name with its type, and each line is read alone.
pub fn parse_assumptions(output: &str) -> Result<Assumptions, String> {
    let text = strip_fetch_notices(output);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !SHELL_NOTICES.contains(&l.trim()))
        .collect();
    if lines.len() == 1 && lines[0] == "Closed under the global context" {
        return Ok(Assumptions::Closed);
    }
    if lines.is_empty() {
        return Err("Print Assumptions printed nothing".into());
    }
    /// In the order Coq prints them.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Section {
        None,
        Variables,
        Axioms,
    }
    let mut section = Section::None;
    let mut axioms = vec![];
    let mut section_variables = false;
    for line in lines {
        // Continuation lines of a long type are indented.
        if line.starts_with([' ', '\t']) {
            if matches!(section, Section::None) {
                return Err(format!("unexpected line {line:?}"));
            }
            continue;
        }
        let header = match line {
            "Axioms:" => Some(Section::Axioms),
            "Section Variables:" => Some(Section::Variables),
            _ => None,
        };
        if let Some(next) = header {
            if next <= section {
                return Err(format!("header {line:?} out of Coq's order"));
            }
            section = next;
            section_variables |= next == Section::Variables;
            continue;
        }
        match section {
            Section::Axioms => {
                let name = line.split_once(" : ").map(|(n, _)| n).unwrap_or(line);
                if line.contains(" : ") && is_qualid(name) {
                    axioms.push(name.to_string());
                } else if is_qualid(line) {
                    // A long entry may put the type on the next line (`name\n  : type`).
                    axioms.push(line.to_string());
                } else if let Some(n) = line.strip_suffix(" :").filter(|n| is_qualid(n)) {
                    // Rocq 9 breaks after the colon instead (`name :\n  type`).
                    axioms.push(n.to_string());
                } else {
                    return Err(format!("not an axiom entry: {line:?}"));
                }
            }
            // Section variables print as `A : Type` or as `A` then `: Type`.
            Section::Variables => {
                let name = line.split_once(" : ").map(|(n, _)| n).unwrap_or(line);
                if !(is_qualid(name) || line.starts_with(": ")) {
                    return Err(format!("not a section variable entry: {line:?}"));
                }
            }
            Section::None => return Err(format!("unexpected line {line:?}")),
        }
    }
    Ok(Assumptions::Axioms {
        axioms,
        section_variables,
    })
}

#[cfg(test)]
mod policy_tests {
    use super::AxiomPolicy;

    #[test]
    fn the_prover_library_is_trusted_and_nothing_else_unless_allowed() {
        let p = AxiomPolicy::allowing(&["my_ax".into(), "Flocq.Core.Raux.x".into()]);
        assert!(p.trusts("Coq.Logic.Classical_Prop.classic"));
        assert!(p.trusts("Stdlib.Logic.Classical_Prop.classic"));
        assert!(p.trusts("Top.my_ax") && p.trusts("ProdAssembled.my_ax"));
        assert!(p.trusts("Flocq.Core.Raux.x"));
        assert!(!p.trusts("Top.other") && !p.trusts("ProdAssembled.other"));
        assert!(!p.trusts("Flocq.Core.Raux.y") && !p.trusts("classic"));
        // A context module named like the prover's library is still the context's.
        assert!(!p.trusts("Top.Coq.x") && !p.trusts("ProdAssembled.Coq.x"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_and_axioms() {
        assert_eq!(
            parse_assumptions("Closed under the global context\n"),
            Ok(Assumptions::Closed)
        );
        let out = "<infomsg>Fetching opaque proofs from disk for Coq.Init.Logic</infomsg>\nAxioms:\nmyax : 1 = 2\n\
Classical_Prop.classic : forall P : Prop,\n                         P \\/ ~ P\n";
        assert_eq!(
            parse_assumptions(out),
            Ok(Assumptions::Axioms {
                axioms: vec!["myax".into(), "Classical_Prop.classic".into()],
                section_variables: false
            })
        );
        let rocq =
            "Axioms:\nClassicalDedekindReals.sig_forall_dec :\n  forall P : nat -> Prop,\n  P\n";
        assert_eq!(
            parse_assumptions(rocq),
            Ok(Assumptions::Axioms {
                axioms: vec!["ClassicalDedekindReals.sig_forall_dec".into()],
                section_variables: false
            })
        );
        let sv = "Section Variables:\nA\n: Type\n";
        assert_eq!(
            parse_assumptions(sv),
            Ok(Assumptions::Axioms {
                axioms: vec![],
                section_variables: true
            })
        );
    }

    #[test]
    fn unsafe_and_unknown_lines_are_errors() {
        assert!(parse_assumptions("Axioms:\nbad is assumed to be guarded.\n").is_err());
        assert!(parse_assumptions("Axioms:\ntt' relies on an unsafe hierarchy.\n").is_err());
        assert!(parse_assumptions("Axioms:\nNeg is assumed to be positive.\n").is_err());
        assert!(parse_assumptions("").is_err());
        assert!(parse_assumptions("Toplevel input\nError: The reference a was not found").is_err());
        assert!(
            parse_assumptions("<infomsg>hello</infomsg>\nClosed under the global context").is_err()
        );
        assert!(parse_assumptions(
            "Closed under the global context\nClosed under the global context"
        )
        .is_err());
    }

    /// A killed prover's shell notice, on the pipe coqtop shares with the hammer's provers,
    /// is not an unknown assumption; dropping it drops no entry, even one forged to print it.
    #[test]
    fn shell_notices_are_not_assumptions() {
        let closed = "Killed\nClosed under the global context\nTerminated\n";
        assert_eq!(parse_assumptions(closed), Ok(Assumptions::Closed));
        let axioms = "Axioms:\nKilled\nClassicalDedekindReals.sig_forall_dec :\n  forall P, P\n";
        assert_eq!(
            parse_assumptions(axioms),
            Ok(Assumptions::Axioms {
                axioms: vec!["ClassicalDedekindReals.sig_forall_dec".into()],
                section_variables: false
            })
        );
        let forged = "Axioms:\np : \"\nKilled\n  \" = \"\"\ncheat : False\n";
        assert_eq!(
            parse_assumptions(forged),
            Ok(Assumptions::Axioms {
                axioms: vec!["p".into(), "cheat".into()],
                section_variables: false
            })
        );
        assert!(parse_assumptions("Killed\n").is_err());
        assert!(parse_assumptions("Killed\nAxioms:\n").is_ok());
    }

    /// A type may print any line (a string term prints its line breaks): a header out of
    /// Coq's order is refused, so no printed line can move a later axiom out of `Axioms:`.
    #[test]
    fn forged_headers_hide_no_axiom() {
        let forged = "Axioms:\np : \"\nSection Variables:\" = \"\" -> True\ncheat : False\n";
        assert!(parse_assumptions(forged).is_err());
        assert!(parse_assumptions("Axioms:\na : A\nAxioms:\nb : B\n").is_err());
        assert!(parse_assumptions("Section Variables:\nA : Type\nSection Variables:\n").is_err());
        // In Coq's order, a forged line only adds an axiom to justify.
        let more =
            "Section Variables:\nA : Type\nAxioms:\np : \"\nq : False\" = \"\"\ncheat : False\n";
        assert_eq!(
            parse_assumptions(more),
            Ok(Assumptions::Axioms {
                axioms: vec!["p".into(), "q".into(), "cheat".into()],
                section_variables: true
            })
        );
    }
}

//! The constants a Coq text admits without proof: what a context hands every proof in it.
//!
//! `Axiom`/`Axioms`, `Parameter`/`Parameters`, `Conjecture`, and `Hypothesis`/`Variable` (and
//! their plurals) outside a section declare constants without a proof; a lemma closed by
//! `Admitted` is one too. Inside a section, `Variable` and `Hypothesis` are section variables:
//! they become hypotheses of what uses them when the section closes, not axioms. Names are
//! relative to the text's file (`M.oracle` inside module `M`; sections do not qualify names),
//! the form the checker's `allowed_axioms` takes.

use crate::head::sentence_head;
use crate::lexer::{identifiers, sentences, SentenceKind};
use crate::statement::THEOREM_KEYWORDS;

/// Keywords that declare constants without a proof anywhere.
const AXIOM_KEYWORDS: &[&str] = &["Axiom", "Axioms", "Parameter", "Parameters", "Conjecture"];

/// Keywords that declare section variables inside a section and axioms outside one.
const SECTION_KEYWORDS: &[&str] = &["Hypothesis", "Hypotheses", "Variable", "Variables"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Module,
    /// A module type: its declarations are a signature's fields, not constants.
    Signature,
    Section,
}

/// The constants `text` admits, in order, relative to its file. Text that does not lex is read
/// up to where it stops lexing. Not seen: the fields of a `Declare Module M : T.` (axioms too,
/// named by `T`'s text elsewhere).
pub fn admitted_constants(text: &str) -> Vec<String> {
    let lexed = sentences(text);
    let mut out = vec![];
    let mut scopes: Vec<(Scope, String)> = vec![];
    // The last lemma opened at the top of a proof, waiting for its closing sentence.
    let mut open_lemma: Option<String> = None;
    for s in &lexed.sentences {
        if s.kind != SentenceKind::Command {
            continue;
        }
        let head = sentence_head(s.text(text));
        let Some(keyword) = head.keyword else {
            continue;
        };
        let rest = head.body[keyword.len()..].trim_start();
        let words: Vec<&str> = identifiers(rest).into_iter().map(|r| &rest[r]).collect();
        let in_signature = scopes.iter().any(|(k, _)| *k == Scope::Signature);
        let in_section = scopes.iter().any(|(k, _)| *k == Scope::Section);
        match keyword {
            "Module" => {
                let (kind, name) = match words.as_slice() {
                    ["Type", name, ..] => (Scope::Signature, *name),
                    ["Import" | "Export", name, ..] => (Scope::Module, *name),
                    [name, ..] => (Scope::Module, *name),
                    [] => continue,
                };
                // `Module M := N.` and `Module M : T := N.` open nothing.
                if !rest.contains(":=") {
                    scopes.push((kind, name.to_string()));
                }
            }
            "Section" => {
                if let Some(n) = words.first() {
                    scopes.push((Scope::Section, n.to_string()));
                }
            }
            "End" => {
                if let Some(n) = words.first() {
                    if let Some(i) = scopes.iter().rposition(|(_, m)| m == n) {
                        scopes.truncate(i);
                    }
                }
            }
            k if in_signature => {
                let _ = k;
            }
            k if AXIOM_KEYWORDS.contains(&k) || (SECTION_KEYWORDS.contains(&k) && !in_section) => {
                out.extend(
                    declared_names(strip_inline(rest))
                        .iter()
                        .map(|n| qualify(n, &scopes)),
                );
            }
            k if THEOREM_KEYWORDS.contains(&k) => open_lemma = words.first().map(|w| w.to_string()),
            "Admitted" => {
                if let Some(n) = open_lemma.take() {
                    out.push(qualify(&n, &scopes));
                }
            }
            "Qed" | "Defined" | "Save" | "Abort" => open_lemma = None,
            _ => {}
        }
    }
    out
}

/// `name` inside the open modules (sections do not qualify names).
fn qualify(name: &str, scopes: &[(Scope, String)]) -> String {
    scopes
        .iter()
        .filter(|(k, _)| *k == Scope::Module)
        .map(|(_, n)| n.as_str())
        .chain(std::iter::once(name))
        .collect::<Vec<_>>()
        .join(".")
}

/// An assumption's text without the `Inline` / `Inline(n)` flag in front of its names.
fn strip_inline(rest: &str) -> &str {
    let Some(after) = rest.strip_prefix("Inline") else {
        return rest;
    };
    if after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '\'') {
        return rest;
    }
    let after = after.trim_start();
    match after.strip_prefix('(') {
        Some(r) => r
            .split_once(')')
            .map_or(after, |(_, tail)| tail.trim_start()),
        None => after,
    }
}

/// The names an assumption declares: `a b : T` or `(a b : T) (c : U)`.
fn declared_names(rest: &str) -> Vec<String> {
    let mut names = vec![];
    // Identifiers before the first `:` of each group (or of the sentence).
    let mut group = String::new();
    let mut depth = 0usize;
    for c in rest.chars() {
        match c {
            '(' => {
                depth += 1;
                group.clear();
            }
            ')' => {
                depth = depth.saturating_sub(1);
                group.clear();
            }
            ':' => {
                names.extend(
                    group
                        .split_whitespace()
                        .filter(|w| crate::lexer::is_identifier(w))
                        .map(str::to_string),
                );
                group.clear();
                if depth == 0 {
                    break;
                }
                // Skip the rest of this group: its type.
                group.push('\0');
            }
            _ if group.starts_with('\0') => {}
            _ => group.push(c),
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::admitted_constants;

    #[test]
    fn what_a_context_admits() {
        let text = "Axiom a b : False.\nParameters (p : nat) (q r : bool).\n\
                    Module M.\nConjecture c : True.\nLemma l : False.\nAdmitted.\n\
                    Lemma ok : True.\nProof. exact I. Qed.\nEnd M.\n\
                    Section S.\nVariable v : nat.\nHypothesis h : v = 0.\nLemma s : True.\nAdmitted.\nEnd S.\n\
                    Hypothesis top : False.\nModule Type T.\nParameter t : Type.\nAxiom sig : t.\nEnd T.\nModule N := M.\n\
                    Module Import I.\nParameter Inline(10) inl : nat.\nEnd I.\nModule F (X : T) : T.\nDefinition t := nat.\nAxiom sig : t.\nEnd F.\n";
        assert_eq!(
            admitted_constants(text),
            ["a", "b", "p", "q", "r", "M.c", "M.l", "s", "top", "I.inl", "F.sig"]
        );
        assert!(admitted_constants("Lemma x : True.\nProof. exact I. Qed.").is_empty());
        assert_eq!(admitted_constants("Axiom x : False. Lemma y :"), ["x"]);
    }
}

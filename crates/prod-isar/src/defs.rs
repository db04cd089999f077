//! Names a theory defines, to intersect with [`crate::refs::fact_references`].
//!
//! Covered: named statements (`lemma foo: …`, `theorem (in loc) bar[simp]: …`), fact lists
//! (`lemmas foo = …`), and the facts Isabelle generates for common definition commands
//! (`definition f` gives `f_def`; `fun`/`function`/`primrec f` give `f.simps`, `f.induct`, …;
//! `inductive p` gives `p.intros`, `p.induct`, `p.cases`, …). Datatypes, records, locales and
//! AFP-specific commands generate many more facts; their names are not listed here, and the
//! caller matches references by their first component (`foo.bar` against `foo`) when needed.

use crate::header::name_text;
use crate::lexer::TokenKind;
use crate::segment::{statement_name, Theory};

/// One name defined by a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedName {
    /// The fact name (`foo`, `f_def`, `f.simps`).
    pub name: String,
    /// Index of the defining command span.
    pub span: usize,
    /// Whether the name is a generated fact (`f_def`) rather than one written by the author.
    pub generated: bool,
}

const FUN_FACTS: &[&str] = &[
    "simps", "induct", "cases", "elims", "pelims", "psimps", "pinduct",
];
const INDUCTIVE_FACTS: &[&str] = &["intros", "induct", "cases", "simps", "inducts"];

/// Fact names defined by the commands of `th` (the theory's text is `text`), in order.
pub fn defined_names(text: &str, th: &Theory) -> Vec<DefinedName> {
    let mut out = Vec::new();
    for (i, span) in th.spans.iter().enumerate() {
        let Some(kind) = span.kind else { continue };
        let name = span.name.as_deref().unwrap_or("");
        let mut push = |n: String, generated: bool| {
            out.push(DefinedName {
                name: n,
                span: i,
                generated,
            })
        };
        if kind.is_theory_goal() && !matches!(name, "function" | "nominal_function") {
            if let (_, Some(n)) = statement_name(text, &th.tokens, span) {
                push(n, false);
            }
            continue;
        }
        // First proper token after the keyword (skipping a `(in loc)` target).
        let toks: Vec<_> = th
            .tokens
            .get(span.tokens.clone())
            .unwrap_or(&[])
            .iter()
            .filter(|t| !t.is_improper() && t.range.start >= span.keyword.end)
            .collect();
        let mut j = 0;
        if toks.first().is_some_and(|t| t.text(text) == "(")
            && toks.get(1).is_some_and(|t| t.text(text) == "in")
        {
            j = 4;
        }
        let Some(first) = toks.get(j) else { continue };
        if !matches!(first.kind, TokenKind::Ident | TokenKind::String) && name != "definition" {
            continue;
        }
        let first_name = name_text(first, text);
        match name {
            "lemmas" | "theorems" | "named_theorems" => push(first_name, false),
            // `definition f :: τ where …`; an unnamed `definition "f x = …"` names its constant
            // only inside the term. Abbreviations generate no fact.
            "definition" if first.kind == TokenKind::Ident => {
                push(format!("{first_name}_def"), true);
            }
            "fun" | "function" | "primrec" | "primcorec" | "partial_function"
            | "nominal_function" => {
                // `function (sequential) f`: skip the option group.
                let mut k = j;
                if toks.get(k).is_some_and(|t| t.text(text) == "(") {
                    while toks.get(k).is_some_and(|t| t.text(text) != ")") {
                        k += 1;
                    }
                    k += 1;
                }
                if let Some(t) = toks.get(k).filter(|t| t.kind == TokenKind::Ident) {
                    let f = t.text(text);
                    for suffix in FUN_FACTS {
                        push(format!("{f}.{suffix}"), true);
                    }
                }
            }
            "inductive" | "coinductive" | "inductive_set" | "coinductive_set" => {
                for suffix in INDUCTIVE_FACTS {
                    push(format!("{first_name}.{suffix}"), true);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{segment_theory, KeywordTable};

    #[test]
    fn names_of_statements_and_definitions() {
        let src = "theory T imports Main begin\ndefinition f :: \"nat\" where \"f = 0\"\nfun g where \"g 0 = 0\" | \"g (Suc n) = g n\"\nlemma (in loc) a[simp]: \"f = 0\" by (simp add: f_def)\nlemmas b = a g.simps\ninductive p where \"p 0\"\nlemma \"True\" by simp\nend\n";
        let th = segment_theory(src, &KeywordTable::hol());
        let names: Vec<(String, bool)> = defined_names(src, &th)
            .into_iter()
            .map(|d| (d.name, d.generated))
            .collect();
        let plain: Vec<&str> = names
            .iter()
            .filter(|n| !n.1)
            .map(|n| n.0.as_str())
            .collect();
        assert_eq!(plain, vec!["a", "b"]);
        let all: Vec<&str> = names.iter().map(|n| n.0.as_str()).collect();
        for n in ["f_def", "g.simps", "g.induct", "p.intros", "p.induct"] {
            assert!(all.contains(&n), "{n} missing from {all:?}");
        }
    }
}

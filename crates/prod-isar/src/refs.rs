//! Candidate fact references in a command's text.
//!
//! Fact names occur after `using`/`unfolding`/`from`/`with`/`note`/`lemmas … =`/`supply`/`declare`,
//! inside method arguments (`simp add: a`, `intro: b`, `rule c`, `metis d e`, `induct x rule: f`)
//! and inside attributes (`a[OF b, THEN c]`). This module collects identifier tokens in those
//! positions and leaves out method names, modifier names (`add:`), attribute names (`OF`),
//! minor keywords and term arguments (`[of x]`, `[where x = t]`, `arbitrary: x`, the variables
//! of `induct x`). The result is a *candidate* list: intersecting it with the names the theory and
//! its imports define is the caller's job (isabelle-query and PISA do the same).

use crate::lexer::{lex, Token, TokenKind};

/// Words that are never fact names here: Pure's minor keywords and the command words that
/// take facts.
const NOT_FACTS: &[&str] = &[
    "and",
    "in",
    "is",
    "for",
    "if",
    "where",
    "when",
    "of",
    "OF",
    "THEN",
    "using",
    "unfolding",
    "from",
    "with",
    "note",
    "supply",
    "declare",
    "lemmas",
    "by",
    "apply",
    "proof",
    "then",
    "hence",
    "thus",
    "have",
    "show",
    "also",
    "moreover",
    "finally",
    "ultimately",
    "this",
    "thesis",
    "includes",
    "including",
    "include",
    "begin",
    "open",
    "structure",
    "fixes",
    "assumes",
    "shows",
    "obtains",
    "defines",
    "notes",
    "rewrites",
    "unbundle",
];

/// Methods whose plain (modifier-less) arguments are terms, not facts.
const TERM_ARG_METHODS: &[&str] = &[
    "induct",
    "induction",
    "cases",
    "coinduct",
    "coinduction",
    "induct_tac",
    "case_tac",
    "ind_cases",
    "nominal_induct",
    "rename_tac",
    "subgoal_tac",
    "cut_tac",
    "thin_tac",
    "rule_tac",
    "erule_tac",
    "drule_tac",
    "frule_tac",
    "res_inst_tac",
    "eval",
    "atomize",
    "transfer",
    "descending",
    "lifting",
    "approximation",
    "sos",
    "tactic",
    "ML_val",
];

/// Modifiers (`name:`) whose arguments are terms (`arbitrary: x`, `taking: t`).
const TERM_MODIFIERS: &[&str] = &["arbitrary", "taking", "for", "type", "pred", "set"];

/// Proof commands whose arguments are only variables, terms and binding names.
const NO_FACT_COMMANDS: &[&str] = &[
    "fix", "define", "let", "obtain", "consider", "case", "write", "assume", "presume",
];

/// Statement parts whose arguments are terms (`fixes x :: nat`, `… for x`).
const TERM_PARTS: &[&str] = &["fixes", "for", "obtains", "defines", "constrains"];

/// Statement parts that end a term part.
const FACT_PARTS: &[&str] = &["assumes", "shows", "notes", "includes", "if", "when"];

/// Candidate fact names referenced by one command's text (its first token is the command
/// keyword, which is skipped), in order of first occurrence, without duplicates. Long names
/// (`foo.induct`) are kept whole.
pub fn fact_references(text: &str) -> Vec<String> {
    let (tokens, _) = lex(text);
    let mut toks: Vec<&Token> = tokens.iter().filter(|t| !t.is_improper()).collect();
    while toks
        .first()
        .is_some_and(|t| matches!(t.text(text), "private" | "qualified"))
    {
        toks.remove(0);
    }
    if let Some(first) = toks.first() {
        if NO_FACT_COMMANDS.contains(&first.text(text)) {
            return Vec::new();
        }
        let first = first.text(text);
        toks.remove(0);
        if matches!(first, "by" | "apply" | "proof" | "qed" | "apply_end") {
            // The command is followed by a method.
            return collect(&toks, text, true);
        }
    }
    collect(&toks, text, false)
}

/// Attributes whose arguments are facts (`[OF a b]`, `[THEN c]`, `[unfolded d]`).
const FACT_ATTRIBUTES: &[&str] = &[
    "OF",
    "THEN",
    "COMP",
    "FCOMP",
    "folded",
    "unfolded",
    "simplified",
    "to_pred",
    "to_set",
];

fn collect(toks: &[&Token], text: &str, method_first: bool) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Whether the next identifier names a method (after `by`, `apply`, `(`, `,`, …).
    let mut expect_method = method_first;
    // Whether the next identifier names an attribute (after `[` or `,` inside brackets).
    let mut expect_attr = false;
    // Inside a term-argument region (after `of`, `where`, `arbitrary:`, a term-arg method).
    let mut in_terms = false;
    // Bracket stack: '[' (attributes) or '(' (methods).
    let mut stack: Vec<char> = Vec::new();
    // Skip the type after `::`.
    let mut skip_next = false;
    for (i, t) in toks.iter().enumerate() {
        let s = t.text(text);
        let next = toks.get(i + 1).map(|n| n.text(text));
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if t.kind == TokenKind::Keyword && s == "::" {
            skip_next = true;
            continue;
        }
        if t.kind == TokenKind::Ident && stack.is_empty() {
            if TERM_PARTS.contains(&s) {
                in_terms = true;
                continue;
            }
            if FACT_PARTS.contains(&s) {
                in_terms = false;
                continue;
            }
        }
        match t.kind {
            TokenKind::Keyword => {
                match s {
                    "[" => {
                        stack.push('[');
                        expect_attr = true;
                        in_terms = false;
                    }
                    "(" if i > 0
                        && toks[i - 1].kind == TokenKind::Ident
                        && toks[i - 1].range.end == t.range.start =>
                    {
                        // `foo(2)`, `assms(1-3)`: a selection, not a method.
                        stack.push('s');
                    }
                    "(" => {
                        stack.push('(');
                        // `(in loc)` / `(rule foo)`: a method name may follow.
                        expect_method = true;
                        in_terms = false;
                    }
                    "]" | ")" => {
                        stack.pop();
                        in_terms = false;
                    }
                    "," | "|" | ";" => {
                        let top = stack.last().copied();
                        expect_attr = top == Some('[');
                        expect_method = top == Some('(');
                        in_terms = false;
                    }
                    "=" if stack.last() == Some(&'(') => {
                        // `rule_tac x = t in foo`: the term runs until `in`.
                        in_terms = true;
                    }
                    _ => {}
                }
                continue;
            }
            TokenKind::SymIdent if s == "+" || s == "?" => continue,
            TokenKind::Ident => {}
            _ => {
                // Strings and cartouches are terms or literal facts; never names.
                continue;
            }
        }
        if matches!(s, "by" | "apply" | "proof" | "qed") {
            expect_method = true;
            in_terms = false;
            continue;
        }
        if method_first && stack.is_empty() {
            // `by m1 m2`, `apply (rule x) auto`: outside parentheses only method names occur.
            continue;
        }
        if s == "in"
            && i > 0
            && toks[i - 1].text(text) == "("
            && toks.get(i + 2).is_some_and(|t| t.text(text) == ")")
        {
            // `(in loc)`: a target, not a method; skip the locale name too.
            skip_next = true;
            expect_method = false;
            continue;
        }
        if expect_attr {
            expect_attr = false;
            in_terms = !FACT_ATTRIBUTES.contains(&s);
            continue;
        }
        if next == Some("=") && stack.is_empty() {
            // `lemmas name = …`: a binding.
            continue;
        }
        if expect_method {
            expect_method = false;
            in_terms = TERM_ARG_METHODS.contains(&s);
            continue;
        }
        let next2 = toks.get(i + 2).map(|n| n.text(text));
        if next == Some("[") && binding_with_attributes(toks, i + 1, text) {
            // `name[attrs]:` binds a name; the attributes are read as usual.
            continue;
        }
        if next2 == Some(":")
            && matches!(next, Some("add" | "del" | "only"))
            && matches!(
                s,
                "simp" | "split" | "cong" | "iff" | "intro" | "elim" | "dest"
            )
        {
            // `simp add:`, `split del:`, `cong only:`: a two-word modifier.
            continue;
        }
        if next == Some(":") || (matches!(next, Some("!" | "?")) && next2 == Some(":")) {
            // A modifier (`add:`, `rule:`, `arbitrary:`) or a binding name (`have x:`).
            in_terms = TERM_MODIFIERS.contains(&s);
            continue;
        }
        if s == "in" {
            in_terms = false;
            continue;
        }
        if in_terms || NOT_FACTS.contains(&s) {
            continue;
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    }
    out
}

/// Whether the `[` at `open` closes with a `]` that is followed by `:`.
fn binding_with_attributes(toks: &[&Token], open: usize, text: &str) -> bool {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match (t.kind, t.text(text)) {
            (TokenKind::Keyword, "[") => depth += 1,
            (TokenKind::Keyword, "]") => {
                depth -= 1;
                if depth == 0 {
                    return toks.get(j + 1).is_some_and(|n| n.text(text) == ":");
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_facts_in_common_positions() {
        assert_eq!(
            fact_references("using foo bar(2) baz by simp"),
            vec!["foo", "bar", "baz"]
        );
        assert_eq!(
            fact_references("by (simp add: a b.simps del: c)"),
            vec!["a", "b.simps", "c"]
        );
        assert_eq!(
            fact_references("by (auto intro!: d elim: e simp: f_def)"),
            vec!["d", "e", "f_def"]
        );
        assert_eq!(fact_references("by (metis g h)"), vec!["g", "h"]);
        assert_eq!(
            fact_references("apply (induct xs arbitrary: y rule: list_induct2)"),
            vec!["list_induct2"]
        );
        assert_eq!(
            fact_references("from i[OF j, THEN k] have x: \"P\" by (rule l[of x \"y\"])"),
            vec!["i", "j", "k", "l"]
        );
        assert_eq!(
            fact_references("apply (rule_tac x = \"n\" in exI)"),
            vec!["exI"]
        );
        assert_eq!(
            fact_references("by (smt (z3) m n) (* not_me *)"),
            vec!["m", "n"]
        );
        assert_eq!(
            fact_references("lemma foo[simp, OF bar]: fixes n :: nat assumes a: \"P\" shows \"Q\""),
            vec!["bar"]
        );
        assert!(fact_references("fix x :: nat").is_empty());
        assert!(fact_references("obtain x where a: \"P x\"").is_empty());
        assert_eq!(
            fact_references("lemmas foo = bar[symmetric] baz"),
            vec!["bar", "baz"]
        );
        assert_eq!(fact_references("declare qux[simp del]"), vec!["qux"]);
        assert_eq!(
            fact_references("by (auto simp add: r1 split del: r2 intro!: r3)"),
            vec!["r1", "r2", "r3"]
        );
    }
}

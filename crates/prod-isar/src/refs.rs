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

/// The candidate fact names among `toks`, read left to right by a [`RefScan`]; with
/// `method_first`, the tokens follow a command that takes a method (`by`, `apply`, …).
fn collect(toks: &[&Token], text: &str, method_first: bool) -> Vec<String> {
    let mut scan = RefScan {
        toks,
        text,
        method_first,
        out: Vec::new(),
        expect_method: method_first,
        expect_attr: false,
        in_terms: false,
        stack: Vec::new(),
        skip_next: false,
    };
    for i in 0..toks.len() {
        scan.token(i);
    }
    scan.out
}

/// The state of [`collect`]'s walk through one command's tokens.
struct RefScan<'a> {
    toks: &'a [&'a Token],
    text: &'a str,
    /// The command is followed by a method: outside parentheses only method names occur.
    method_first: bool,
    /// The names found so far, in order of first occurrence.
    out: Vec<String>,
    /// Whether the next identifier names a method (after `by`, `apply`, `(`, `,`, …).
    expect_method: bool,
    /// Whether the next identifier names an attribute (after `[` or `,` inside brackets).
    expect_attr: bool,
    /// Inside a term-argument region (after `of`, `where`, `arbitrary:`, a term-arg method).
    in_terms: bool,
    /// Bracket stack: '[' (attributes), '(' (methods) or 's' (a selection `foo(2)`).
    stack: Vec<char>,
    /// Skip the type after `::`.
    skip_next: bool,
}

impl<'a> RefScan<'a> {
    /// The text of the token at `i`, if there is one.
    fn text_at(&self, i: usize) -> Option<&'a str> {
        self.toks.get(i).map(|n| n.text(self.text))
    }

    /// Token `i`: skipped, a statement part, punctuation, or an identifier to classify.
    fn token(&mut self, i: usize) {
        let t = self.toks[i];
        let s = t.text(self.text);
        if std::mem::take(&mut self.skip_next) {
            return;
        }
        if t.kind == TokenKind::Keyword && s == "::" {
            self.skip_next = true;
            return;
        }
        if t.kind == TokenKind::Ident && self.stack.is_empty() && self.statement_part(s) {
            return;
        }
        match t.kind {
            TokenKind::Keyword => self.punctuation(i, s),
            TokenKind::SymIdent if s == "+" || s == "?" => {}
            TokenKind::Ident => self.identifier(i, s),
            // Strings and cartouches are terms or literal facts; never names.
            _ => {}
        }
    }

    /// A statement part at the top level (`fixes`, `assumes`, …) opens or ends a term part;
    /// whether `s` was one.
    fn statement_part(&mut self, s: &str) -> bool {
        if TERM_PARTS.contains(&s) {
            self.in_terms = true;
            return true;
        }
        if FACT_PARTS.contains(&s) {
            self.in_terms = false;
            return true;
        }
        false
    }

    /// Brackets and separators: attribute lists, method parentheses, selections, `,`/`|`/`;`
    /// and the `=` of `rule_tac x = t in foo`.
    fn punctuation(&mut self, i: usize, s: &str) {
        let toks = self.toks;
        match s {
            "[" => {
                self.stack.push('[');
                self.expect_attr = true;
                self.in_terms = false;
            }
            "(" if i > 0
                && toks[i - 1].kind == TokenKind::Ident
                && toks[i - 1].range.end == toks[i].range.start =>
            {
                // `foo(2)`, `assms(1-3)`: a selection, not a method.
                self.stack.push('s');
            }
            "(" => {
                self.stack.push('(');
                // `(in loc)` / `(rule foo)`: a method name may follow.
                self.expect_method = true;
                self.in_terms = false;
            }
            "]" | ")" => {
                self.stack.pop();
                self.in_terms = false;
            }
            "," | "|" | ";" => {
                let top = self.stack.last().copied();
                self.expect_attr = top == Some('[');
                self.expect_method = top == Some('(');
                self.in_terms = false;
            }
            "=" if self.stack.last() == Some(&'(') => {
                // `rule_tac x = t in foo`: the term runs until `in`.
                self.in_terms = true;
            }
            _ => {}
        }
    }

    /// Identifier `s` at `i`: a method, attribute, binding or modifier word is passed over;
    /// anything else outside terms and [`NOT_FACTS`] is a candidate.
    fn identifier(&mut self, i: usize, s: &str) {
        if self.method_or_attribute(i, s) || self.binding_or_modifier(i, s) {
            return;
        }
        if self.in_terms || NOT_FACTS.contains(&s) {
            return;
        }
        if !self.out.iter().any(|o| o == s) {
            self.out.push(s.to_string());
        }
    }

    /// Whether `s` at `i` is a method-taking command word, a method name, the target of
    /// `(in loc)`, an attribute name or a `lemmas name =` binding (updating the state).
    fn method_or_attribute(&mut self, i: usize, s: &str) -> bool {
        if matches!(s, "by" | "apply" | "proof" | "qed") {
            self.expect_method = true;
            self.in_terms = false;
            return true;
        }
        if self.method_first && self.stack.is_empty() {
            // `by m1 m2`, `apply (rule x) auto`: outside parentheses only method names occur.
            return true;
        }
        if s == "in"
            && i > 0
            && self.text_at(i - 1) == Some("(")
            && self.text_at(i + 2) == Some(")")
        {
            // `(in loc)`: a target, not a method; skip the locale name too.
            self.skip_next = true;
            self.expect_method = false;
            return true;
        }
        if self.expect_attr {
            self.expect_attr = false;
            self.in_terms = !FACT_ATTRIBUTES.contains(&s);
            return true;
        }
        if self.text_at(i + 1) == Some("=") && self.stack.is_empty() {
            // `lemmas name = …`: a binding.
            return true;
        }
        if self.expect_method {
            self.expect_method = false;
            self.in_terms = TERM_ARG_METHODS.contains(&s);
            return true;
        }
        false
    }

    /// Whether `s` at `i` binds a name (`name[attrs]:`, `have x:`), is a modifier (`add:`,
    /// `simp add:`, `arbitrary:`) or the `in` that ends a term (updating the state).
    fn binding_or_modifier(&mut self, i: usize, s: &str) -> bool {
        let next = self.text_at(i + 1);
        let next2 = self.text_at(i + 2);
        if next == Some("[") && binding_with_attributes(self.toks, i + 1, self.text) {
            // `name[attrs]:` binds a name; the attributes are read as usual.
            return true;
        }
        if next2 == Some(":")
            && matches!(next, Some("add" | "del" | "only"))
            && matches!(
                s,
                "simp" | "split" | "cong" | "iff" | "intro" | "elim" | "dest"
            )
        {
            // `simp add:`, `split del:`, `cong only:`: a two-word modifier.
            return true;
        }
        if next == Some(":") || (matches!(next, Some("!" | "?")) && next2 == Some(":")) {
            // A modifier (`add:`, `rule:`, `arbitrary:`) or a binding name (`have x:`).
            self.in_terms = TERM_MODIFIERS.contains(&s);
            return true;
        }
        if s == "in" {
            self.in_terms = false;
            return true;
        }
        false
    }
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

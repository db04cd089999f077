//! [`IsarLanguage`]: the Isabelle/Isar implementation of `prod_core::ProofLanguage`.
//!
//! # Statements
//! A statement is `[private|qualified] KW [(in loc)] [name[attrs]:] REST` with `KW` one of
//! [`THEOREM_KEYWORDS`]. In Isar the proof follows the statement as separate commands
//! (`by …`, `proof … qed`, `apply … done`), so `render_proved` just puts them one after the other.
//!
//! # Statement normalisation (the "same lemma" key)
//! For a statement of that form the key is `(in loc)` (kept: the locale changes the meaning),
//! then the attributes and `REST`, token by token, joined by single spaces: comments and formal
//! comments are dropped and layout between tokens does not matter (Isar outer tokens never merge
//! across a space). Inside a term (`"…"` or a cartouche) runs of blanks become one space and
//! blanks right inside the delimiters are removed, except inside inner string literals
//! `''…''` and nested cartouches, which are copied verbatim (blanks there are data). Nothing
//! else is touched: `"x=y"` and `"x = y"` keep different keys (a missed merge, never a wrong one),
//! and a term written as `"…"` never shares a key with the same term as a cartouche. The keyword
//! and the name are dropped. Any other text gets `#raw ` + its tokens joined the same way; `#`
//! cannot start the key of a statement.

use prod_core::ProofLanguage;

use crate::keywords::KeywordTable;
use crate::lexer::{lex, Token, TokenKind};

/// Keywords of statements ProD treats as the same kind of lemma.
pub const THEOREM_KEYWORDS: &[&str] = &[
    "lemma",
    "theorem",
    "corollary",
    "proposition",
    "schematic_goal",
];

/// Isabelle/Isar for ProD's core. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct IsarLanguage;

/// Positions in the proper-token list of a statement.
struct Parts {
    /// Index of the theorem keyword.
    keyword: usize,
    /// Index of the first token after the keyword and the `(in loc)` target.
    after_target: usize,
    /// Index of the name token, if named.
    name: Option<usize>,
    /// Index of the first token of the key (attributes, then the rest), after `name` (and
    /// after the `:` of an attribute-only binding `[simp]:`, which is kept).
    key_start: usize,
}

fn proper(tokens: &[Token]) -> Vec<&Token> {
    tokens.iter().filter(|t| !t.is_improper()).collect()
}

fn parts(text: &str, toks: &[&Token]) -> Option<Parts> {
    let mut k = 0;
    while toks
        .get(k)
        .is_some_and(|t| matches!(t.text(text), "private" | "qualified"))
    {
        k += 1;
    }
    let kw = toks.get(k)?;
    if kw.kind != TokenKind::Ident || !THEOREM_KEYWORDS.contains(&kw.text(text)) {
        return None;
    }
    let mut i = k + 1;
    if toks.get(i).is_some_and(|t| t.text(text) == "(")
        && toks.get(i + 1).is_some_and(|t| t.text(text) == "in")
        && toks.get(i + 3).is_some_and(|t| t.text(text) == ")")
    {
        i += 4;
    }
    let after_target = i;
    let mut name = None;
    if toks.get(i).is_some_and(|t| t.kind == TokenKind::Ident) {
        // `name:` or `name[attrs]:`.
        let j = crate::segment::skip_attributes(text, toks, i + 1);
        if toks.get(j).is_some_and(|t| t.text(text) == ":") {
            name = Some(i);
        }
    }
    if toks.len() <= after_target {
        return None;
    }
    Some(Parts {
        keyword: k,
        after_target,
        name,
        // `name:` drops the colon too, so named and unnamed statements share keys;
        // `name[attrs]:` keeps `[attrs] :` as `lemma [attrs]: …` does.
        key_start: match name {
            Some(n) if toks.get(n + 1).is_some_and(|t| t.text(text) == ":") => n + 2,
            Some(n) => n + 1,
            None => after_target,
        },
    })
}

/// Layout normalisation of one term token (see the module documentation).
fn normalize_term(tok: &str, kind: TokenKind) -> String {
    let (open, inner, close) = match kind {
        TokenKind::String | TokenKind::AltString if tok.len() >= 2 => {
            (&tok[..1], &tok[1..tok.len() - 1], &tok[tok.len() - 1..])
        }
        TokenKind::Cartouche => {
            let (o, rest) = if let Some(r) = tok.strip_prefix("\\<open>") {
                ("\\<open>", r)
            } else if let Some(r) = tok.strip_prefix('\u{2039}') {
                ("\u{2039}", r)
            } else {
                return tok.to_string();
            };
            let (inner, c) = if let Some(r) = rest.strip_suffix("\\<close>") {
                (r, "\\<close>")
            } else if let Some(r) = rest.strip_suffix('\u{203a}') {
                (r, "\u{203a}")
            } else {
                return tok.to_string();
            };
            (o, inner, c)
        }
        _ => return tok.to_string(),
    };
    let mut out = String::with_capacity(tok.len());
    out.push_str(open);
    let b = inner.as_bytes();
    let mut i = 0;
    let mut pending_space = false;
    while i < b.len() {
        // Verbatim regions: inner strings `''…''` and nested cartouches.
        let verbatim_end = if inner[i..].starts_with("''") {
            inner[i + 2..].find("''").map(|e| i + 2 + e + 2)
        } else if inner[i..].starts_with("\\<open>") || inner[i..].starts_with('\u{2039}') {
            nested_cartouche_end(inner, i)
        } else {
            None
        };
        if let Some(end) = verbatim_end {
            if pending_space && out.len() > open.len() {
                out.push(' ');
            }
            pending_space = false;
            out.push_str(&inner[i..end]);
            i = end;
            continue;
        }
        let c = b[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            pending_space = true;
            i += 1;
            continue;
        }
        if pending_space && out.len() > open.len() {
            out.push(' ');
        }
        pending_space = false;
        let len = inner[i..].chars().next().map(char::len_utf8).unwrap_or(1);
        out.push_str(&inner[i..i + len]);
        i += len;
    }
    out.push_str(close);
    out
}

/// End of the (nested) cartouche starting at `i` in `s`, if it closes.
fn nested_cartouche_end(s: &str, i: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = i;
    while j < s.len() {
        let rest = &s[j..];
        if rest.starts_with("\\<open>") {
            depth += 1;
            j += "\\<open>".len();
        } else if rest.starts_with('\u{2039}') {
            depth += 1;
            j += '\u{2039}'.len_utf8();
        } else if rest.starts_with("\\<close>") || rest.starts_with('\u{203a}') {
            j += if rest.starts_with('\\') {
                "\\<close>".len()
            } else {
                '\u{203a}'.len_utf8()
            };
            depth -= 1;
            if depth == 0 {
                return Some(j);
            }
        } else {
            j += rest.chars().next().map(char::len_utf8).unwrap_or(1);
        }
    }
    None
}

fn key_of(text: &str, toks: &[&Token]) -> String {
    toks.iter()
        .map(|t| normalize_term(t.text(text), t.kind))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Removes fact `name` from fact lists; see [`IsarLanguage::remove_references`].
fn remove_fact(text: &str, name: &str) -> String {
    let (tokens, _) = lex(text);
    let n = tokens.len();
    let mut r = FactRemoval {
        text,
        tokens: &tokens,
        drop: vec![false; n],
        then_instead: vec![false; n],
    };
    r.drop_references(name);
    r.drop_emptied_fact_lists();
    r.render()
}

/// [`remove_fact`]'s marks on a command's tokens: those dropped, and the `with`s that
/// become `then`.
struct FactRemoval<'a> {
    text: &'a str,
    tokens: &'a [Token],
    drop: Vec<bool>,
    then_instead: Vec<bool>,
}

impl FactRemoval<'_> {
    /// Marks each reference to `name` (with its selection, attributes and the blanks before it).
    fn drop_references(&mut self, name: &str) {
        let (text, tokens, n) = (self.text, self.tokens, self.tokens.len());
        let is_name = |t: &Token| t.kind == TokenKind::Ident && t.text(text) == name;
        let mut i = 0;
        while i < n {
            if !is_name(&tokens[i]) {
                i += 1;
                continue;
            }
            self.drop[i] = true;
            let end = self.reference_end(i);
            for d in self.drop.iter_mut().take(end).skip(i) {
                *d = true;
            }
            // The blanks before the removed name go too, so `a name b` becomes `a b`.
            let mut s = i;
            while s > 0
                && tokens[s - 1].kind == TokenKind::Space
                && !tokens[s - 1].text(text).contains('\n')
            {
                s -= 1;
                self.drop[s] = true;
            }
            i = end;
        }
    }

    /// Where the reference whose name is token `i` ends (exclusive): after a glued selection
    /// (`name(1)`, `name(2-3)`) and attributes (`name [OF a]`).
    fn reference_end(&self, i: usize) -> usize {
        let (text, tokens, n) = (self.text, self.tokens, self.tokens.len());
        let next_proper = |from: usize| (from..n).find(|&j| !tokens[j].is_improper());
        let mut end = i + 1;
        // A selection glued to the name: `name(1)`, `name(2-3)`.
        if tokens.get(end).is_some_and(|t| t.text(text) == "(") {
            if let Some(close) = (end..n).find(|&j| tokens[j].text(text) == ")") {
                end = close + 1;
            }
        }
        // Attributes after the name: `name [OF a]`.
        if let Some(j) = next_proper(end) {
            if tokens[j].text(text) == "[" {
                let mut depth = 0usize;
                let mut k = j;
                while k < n {
                    match tokens[k].text(text) {
                        "[" => depth += 1,
                        "]" => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                end = (k + 1).min(n);
            }
        }
        end
    }

    /// Fact-list commands left without facts lose their keyword: `using name by simp` becomes
    /// `by simp`, `with name show` becomes `then show`.
    fn drop_emptied_fact_lists(&mut self) {
        let (text, tokens, n) = (self.text, self.tokens, self.tokens.len());
        for i in 0..n {
            let w = tokens[i].text(text);
            if self.drop[i] || tokens[i].kind != TokenKind::Ident {
                continue;
            }
            if !matches!(w, "using" | "unfolding" | "from" | "with" | "note") {
                continue;
            }
            if !self.emptied(i) {
                continue;
            }
            if w == "with" {
                // `with a` = `from a this`: without facts it is `then`.
                self.then_instead[i] = true;
            } else {
                self.drop[i] = true;
                // Also drop the blanks after the keyword (not line breaks).
                let mut j = i + 1;
                while j < n
                    && (self.drop[j]
                        || (tokens[j].kind == TokenKind::Space
                            && !tokens[j].text(text).contains('\n')))
                {
                    self.drop[j] = true;
                    j += 1;
                }
            }
        }
    }

    /// Whether the fact-list keyword at `i` lost facts and has none left: what remains after
    /// it starts another command or block (or nothing does).
    fn emptied(&self, i: usize) -> bool {
        let (text, tokens, n) = (self.text, self.tokens, self.tokens.len());
        let drop = &self.drop;
        let had_removed = (i + 1..n)
            .take_while(|&j| drop[j] || tokens[j].is_improper())
            .any(|j| drop[j]);
        let next = (i + 1..n).find(|&j| !drop[j] && !tokens[j].is_improper());
        let empty = next.is_none_or(|j| {
            let t = &tokens[j];
            t.kind == TokenKind::Ident
                && matches!(
                    t.text(text),
                    "by" | "apply"
                        | "have"
                        | "show"
                        | "hence"
                        | "thus"
                        | "obtain"
                        | "proof"
                        | "using"
                        | "unfolding"
                        | "then"
                        | "from"
                        | "with"
                        | "note"
                        | "done"
                        | "qed"
                        | "next"
                        | "also"
                        | "finally"
                        | "moreover"
                        | "ultimately"
                        | "consider"
                        | "interpret"
                        | "subgoal"
                        | "sorry"
                )
                || matches!(t.text(text), "." | ".." | "}" | "{")
        });
        had_removed && empty
    }

    /// The text without the dropped tokens, `then` for each marked `with`.
    fn render(&self) -> String {
        let mut out = String::with_capacity(self.text.len());
        for (i, t) in self.tokens.iter().enumerate() {
            if self.then_instead[i] {
                out.push_str("then");
            } else if !self.drop[i] {
                out.push_str(t.text(self.text));
            }
        }
        out
    }
}

impl ProofLanguage for IsarLanguage {
    fn name(&self) -> &'static str {
        "isabelle"
    }

    fn literals(&self, text: &str) -> Vec<prod_core::Literal> {
        crate::lexer::literals(text)
    }

    fn lemma_name(&self, statement: &str) -> Option<String> {
        let (tokens, _) = lex(statement);
        let toks = proper(&tokens);
        let p = parts(statement, &toks)?;
        p.name.map(|n| toks[n].text(statement).to_string())
    }

    fn normalize_statement(&self, statement: &str) -> String {
        let (tokens, errors) = lex(statement);
        let toks = proper(&tokens);
        match parts(statement, &toks).filter(|_| errors.is_empty()) {
            Some(p) => {
                let target = key_of(statement, &toks[p.keyword + 1..p.after_target]);
                let rest = key_of(statement, &toks[p.key_start..]);
                if target.is_empty() {
                    rest
                } else {
                    format!("{target} {rest}")
                }
            }
            None => format!("#raw {}", key_of(statement, &toks)),
        }
    }

    fn rename_statement(&self, statement: &str, new_name: &str) -> String {
        let (tokens, _) = lex(statement);
        let toks = proper(&tokens);
        let Some(p) = parts(statement, &toks) else {
            return statement.to_string();
        };
        match p.name {
            Some(n) => {
                let r = toks[n].range.clone();
                format!(
                    "{}{}{}",
                    &statement[..r.start],
                    new_name,
                    &statement[r.end..]
                )
            }
            None => {
                // Unnamed (`lemma "P"`, `lemma [simp]: "P"`): insert the name after the keyword or
                // target; an attribute-only binding `[simp]:` takes the name in front of it.
                let at = toks[p.after_target - 1].range.end;
                let binding = toks
                    .get(p.after_target)
                    .is_some_and(|t| t.text(statement) == "[");
                let sep = if binding { "" } else { ":" };
                format!("{} {new_name}{sep}{}", &statement[..at], &statement[at..])
            }
        }
    }

    fn mentions(&self, proof_text: &str, name: &str) -> bool {
        let (tokens, _) = lex(proof_text);
        tokens
            .iter()
            .any(|t| t.kind == TokenKind::Ident && t.text(proof_text) == name)
    }

    fn rename_references(&self, proof_text: &str, renames: &[(String, String)]) -> String {
        let (tokens, _) = lex(proof_text);
        let mut out = String::with_capacity(proof_text.len());
        for t in &tokens {
            let s = t.text(proof_text);
            match renames
                .iter()
                .find(|(old, _)| t.kind == TokenKind::Ident && old == s)
            {
                Some((_, new)) => out.push_str(new),
                None => out.push_str(s),
            }
        }
        out
    }

    /// Removes `name` (with a glued selection `name(1)` and following attributes `name[OF a]`)
    /// wherever it occurs as an identifier outside terms and comments: from `using`/`from`/
    /// `unfolding`/`note` lists, from method arguments (`simp add: name`, `metis name`) and from
    /// `[OF name]`. A fact command left without facts loses its keyword (`using name by simp`
    /// becomes `by simp`; `with name show` becomes `then show`). Everything else is kept: the
    /// result is re-checked by Isabelle.
    fn remove_references(&self, proof_text: &str, name: &str) -> String {
        if !self.mentions(proof_text, name) {
            return proof_text.to_string();
        }
        remove_fact(proof_text, name)
    }

    fn render_admitted(&self, statement: &str) -> String {
        format!("{}\n  sorry", statement.trim_end())
    }

    fn render_proved(&self, statement: &str, proof_text: &str) -> String {
        format!("{}\n{}", statement.trim_end(), proof_text.trim())
    }

    fn is_identifier(&self, name: &str) -> bool {
        let (tokens, errors) = lex(name);
        if !errors.is_empty() || tokens.len() != 1 || tokens[0].kind != TokenKind::Ident {
            return false;
        }
        // A short name (no dots) that is no keyword of Pure/HOL.
        let table = keyword_table();
        !name.contains('.') && !table.is_command(name) && !table.is_minor(name)
    }
}

fn keyword_table() -> &'static KeywordTable {
    static T: std::sync::OnceLock<KeywordTable> = std::sync::OnceLock::new();
    T.get_or_init(KeywordTable::hol)
}

#[cfg(test)]
mod tests {
    use super::*;
    const L: IsarLanguage = IsarLanguage;

    /// Conditional proofs as Isabelle lexes them: markers in strings, alt strings, cartouches,
    /// verbatim text and comments are text; `\"` escapes a quote (Coq's `""` does not).
    #[test]
    fn conditional_proofs_are_parsed_as_isabelle_lexes_them() {
        use prod_core::{ConditionalProof, ParseErrorKind};
        let parse = |t: &str| ConditionalProof::parse_with(t, &L);
        // (text, lemmas, proof text)
        let table: &[(&str, &[&str], &str)] = &[
            (
                r#"<no_invoke> using "x <invoke> y" by simp"#,
                &[],
                r#" using "x <invoke> y" by simp"#,
            ),
            (
                r#"<no_invoke> by (simp add: \<open></invoke>\<close>)"#,
                &[],
                r#" by (simp add: \<open></invoke>\<close>)"#,
            ),
            (
                "<no_invoke> by simp (* see </invoke> *)",
                &[],
                " by simp (* see </invoke> *)",
            ),
            (
                "<no_invoke> by simp \u{2015} \u{2039}<invoke>\u{203a}",
                &[],
                " by simp \u{2015} \u{2039}<invoke>\u{203a}",
            ),
            (
                r#"<no_invoke> using `<invoke>` by simp"#,
                &[],
                r#" using `<invoke>` by simp"#,
            ),
            (
                r#"<no_invoke> have "a\"<invoke>" by simp"#,
                &[],
                r#" have "a\"<invoke>" by simp"#,
            ),
            (
                r#"<use_invoke> <invoke> lemma a: "x < (y::nat) \<Longrightarrow> x \<le> y" </invoke> using a by simp"#,
                &[r#"lemma a: "x < (y::nat) \<Longrightarrow> x \<le> y""#],
                "  using a by simp",
            ),
        ];
        for &(text, lemmas, proof) in table {
            let cp = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(cp.lemmas().collect::<Vec<_>>(), lemmas, "{text}");
            assert_eq!(
                (cp.proof_text(), cp.to_string()),
                (proof.into(), text.into())
            );
        }
        let kind = |t: &str| parse(t).unwrap_err().kind;
        assert_eq!(
            kind(r#"<no_invoke> have "x by simp"#),
            ParseErrorKind::UnclosedString
        );
        assert_eq!(
            kind("<no_invoke> by (simp add: \\<open>x)"),
            ParseErrorKind::UnclosedString
        );
        assert_eq!(
            kind("<no_invoke> by simp (* x"),
            ParseErrorKind::UnclosedComment
        );
        assert_eq!(
            kind("<no_invoke> by simp \\<comment> \\<open>x"),
            ParseErrorKind::UnclosedComment
        );
        // Coq's doubled quote is two Isabelle strings: the marker between them is structure.
        let cp =
            parse(r#"<use_invoke> have "a""b" <invoke> lemma x: "P" </invoke> by simp"#).unwrap();
        assert_eq!(cp.lemma_count(), 1);
    }

    #[test]
    fn names_and_keys() {
        assert_eq!(
            L.lemma_name("lemma foo[simp]: \"x = x\"").as_deref(),
            Some("foo")
        );
        assert_eq!(
            L.lemma_name("private theorem (in loc) bar: \"P\"")
                .as_deref(),
            Some("bar")
        );
        assert_eq!(L.lemma_name("lemma \"P\""), None);
        assert_eq!(L.lemma_name("definition f where \"f = 0\""), None);
        let a = L.normalize_statement("lemma foo: \"x  =\n x\" (* c *)");
        assert_eq!(a, "\"x = x\"");
        assert_eq!(L.normalize_statement("theorem bar:\n  \" x = x \""), a);
        assert_eq!(L.normalize_statement("lemma \"x = x\""), a);
        assert_eq!(
            L.normalize_statement("lemma a[simp]: \"x = x\""),
            L.normalize_statement("lemma [simp]: \"x = x\"")
        );
        assert_ne!(L.normalize_statement("lemma a: \"x=x\""), a); // no spaces invented
        assert_ne!(L.normalize_statement("lemma a: \\<open>x = x\\<close>"), a);
        assert_ne!(L.normalize_statement("lemma (in loc) foo: \"x = x\""), a);
        assert_ne!(
            L.normalize_statement("lemma a: \"s = ''a  b''\""),
            L.normalize_statement("lemma a: \"s = ''a b''\"")
        );
        assert_eq!(
            L.normalize_statement("lemma a: assumes \"P\" shows \"Q\""),
            L.normalize_statement("lemma b:\n  assumes \"P\"\n  shows \"Q\"")
        );
        assert!(L.normalize_statement("foo bar").starts_with("#raw "));
    }

    #[test]
    fn renaming() {
        assert_eq!(
            L.rename_statement("lemma foo[simp]: \"P\"", "bar"),
            "lemma bar[simp]: \"P\""
        );
        assert_eq!(L.rename_statement("lemma \"P\"", "bar"), "lemma bar: \"P\"");
        assert_eq!(
            L.rename_statement("lemma (in l) \"P\"", "b"),
            "lemma (in l) b: \"P\""
        );
        assert_eq!(
            L.rename_statement("lemma [simp]: \"P\"", "b"),
            "lemma b [simp]: \"P\""
        );
        let p = "using foo foo_bar \"foo\" by (simp add: foo) (* foo *)";
        assert!(L.mentions(p, "foo") && !L.mentions("using foo_bar", "foo"));
        assert_eq!(
            L.rename_references(p, &[("foo".into(), "baz".into())]),
            "using baz foo_bar \"foo\" by (simp add: baz) (* foo *)"
        );
    }

    #[test]
    fn removing() {
        assert_eq!(
            L.remove_references("using a foo b by simp", "foo"),
            "using a b by simp"
        );
        assert_eq!(L.remove_references("using foo by simp", "foo"), "by simp");
        assert_eq!(
            L.remove_references("  using foo(2)\n  by simp", "foo"),
            "  \n  by simp"
        );
        assert_eq!(
            L.remove_references("by (simp add: a foo[OF b] c)", "foo"),
            "by (simp add: a c)"
        );
        assert_eq!(
            L.remove_references("with foo show ?thesis by auto", "foo"),
            "then show ?thesis by auto"
        );
        assert_eq!(
            L.remove_references("from a foo have x by blast", "foo"),
            "from a have x by blast"
        );
        assert_eq!(L.remove_references("by (metis foo)", "foo"), "by (metis)");
        assert_eq!(L.remove_references("by simp", "foo"), "by simp");
    }

    #[test]
    fn identifiers_and_rendering() {
        assert!(L.is_identifier("foo_bar'") && L.is_identifier("x\\<^sub>1"));
        assert!(!L.is_identifier("lemma") && !L.is_identifier("by") && !L.is_identifier("a.b"));
        assert!(!L.is_identifier("1a") && !L.is_identifier("a b"));
        assert_eq!(
            L.render_admitted("lemma a: \"P\"\n"),
            "lemma a: \"P\"\n  sorry"
        );
        assert_eq!(
            L.render_proved("lemma a: \"P\"", "\n  by simp\n"),
            "lemma a: \"P\"\nby simp"
        );
    }
}

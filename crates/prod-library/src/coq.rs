//! The Coq segmenter: a `.v` file → [`Segments`] (blocks `c1 s1 p1 … cl sl pl`, proof steps,
//! references), using the sentence lexer of `prod-coq` (no second lexer here).
//!
//! Decisions, each conservative (a wrong peel would give a context that does not compile or a
//! conditional proof that proposes a lemma in the wrong scope):
//! * Theorem blocks start with `Theorem Lemma Fact Remark Corollary Proposition Property Example
//!   Goal`. Everything else (definitions, instances, `Add Morphism` and `Next Obligation` proofs
//!   included) is content `c_j` and stays verbatim in every later context.
//! * A theorem is *peelable* when it ends in `Qed`/`Save`, has a name, is not skipped, and is not
//!   inside a `Module Type`, a functor or a module with a signature (its lemmas may be required
//!   by the signature).
//! * A theorem is *pinned* (never peeled) when content, any statement, or a qualified name
//!   (`M.foo`) refers to it, or when it is used from outside the Section/Module it was declared in
//!   (after `End`, the statement is generalised or qualified, so it cannot be proposed verbatim).
//! * References: with a `.glob` file whose digest matches the source, proof steps use Coq's own
//!   resolution (`R` lines pointing into this file); content and statements use the union of
//!   glob and textual references (a pin is always safe). Without a glob, identifiers (from
//!   `prod_coq::identifiers`) are matched against the names of earlier theorems, the most recent
//!   declaration of a name winning. The textual fallback over-approximates (a bound variable named
//!   like a lemma counts), which only peels less and proposes a lemma that is not needed.

use std::collections::HashMap;

use prod_coq::{
    comments_stripped, identifiers, line_col, sentence_head, sentences, Head, LexError, Sentence,
    SentenceKind,
};
use serde::Serialize;

use std::path::Path;

use prod_core::ProofLanguage;

use crate::discovery::{self, DiscoveryError, Library, LibrarySpec};
use crate::glob::Glob;
use crate::imports::{qualify_requires, Resolver, Rewritten, Target};
use crate::segment::{ProofEnd, Segments, SkipReason, Step, Theorem};
use crate::source::{FileSegmenter, LibrarySource, SegmentedSource};

/// Does the command keyword `kw` open a theorem block? The lemma keywords are prod-coq's
/// [`prod_coq::THEOREM_KEYWORDS`] (the one list of the Coq lexer); a block may also be a `Goal`,
/// which opens a proof of an anonymous statement. `Goal` is not in prod-coq's list because that
/// list is of keywords that declare a *named* lemma (what a statement may start with); here a
/// `Goal` block is segmented like any theorem and is simply never peelable (it has no name).
pub fn opens_theorem_block(kw: &str) -> bool {
    prod_coq::THEOREM_KEYWORDS.contains(&kw) || kw == GOAL_KEYWORD
}

/// The keyword of an anonymous theorem block (see [`opens_theorem_block`]).
const GOAL_KEYWORD: &str = "Goal";

/// The segmenter's result for one file.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CoqFile {
    pub segments: Segments,
    /// `Require` sentences: (byte offset, text), in order.
    pub imports: Vec<(usize, String)>,
    /// Lexer errors, as messages naming line and column.
    pub lex_errors: Vec<String>,
    /// Did proof steps use `.glob` references?
    pub used_glob: bool,
}

#[derive(Clone, Debug)]
struct Scope {
    id: usize,
    name: String,
    /// Module Type, functor, or module with a signature.
    sealed: bool,
    /// A module (qualifies names) rather than a section.
    module: bool,
}

struct Open {
    theorem: Theorem,
    scope_ids: Vec<usize>,
    /// The tactic of `Proof with T`: steps ending in `...` run it after themselves.
    with_tactic: Option<String>,
}

/// The tactic `T` of a `Proof with T.` / `Proof using X with T.` header (`rest`: after `Proof`).
fn proof_with_tactic(rest: &str) -> Option<String> {
    let with = identifiers(rest)
        .into_iter()
        .find(|r| &rest[r.clone()] == "with")?;
    let t = rest[with.end..].trim();
    let t = t.strip_suffix('.').unwrap_or(t).trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A step `tac...` under `Proof with T` is `tac; T` (Coq's `Proof.solve` runs `tclTHEN tac T`
/// inside the goal selector), so `  2: tac...` becomes `  2: (tac); (T).` and no longer needs the
/// header. Other steps are unchanged; `None` for an ellipsis step with controls or attributes.
fn expand_ellipsis(step: &str, sentence: &str, with: &str) -> Option<String> {
    let Some(tac) = sentence.strip_suffix("...") else {
        return Some(step.to_string());
    };
    let head = sentence_head(tac);
    if head.has_attributes() || !head.controls.is_empty() {
        return None;
    }
    let layout = &step[..step.len() - sentence.len()];
    let selector = &tac[..tac.len() - head.body.len()];
    Some(format!("{layout}{selector}({}); ({with}).", head.body))
}

/// Per-theorem bookkeeping the segmenter needs beyond [`Theorem`].
struct Decl {
    scope_ids: Vec<usize>,
}

/// Glob references to this file's own names, sorted by offset.
fn own_glob_refs(glob: &Glob) -> Vec<(usize, usize, String)> {
    let mut v: Vec<(usize, usize, String)> = glob
        .refs
        .iter()
        .filter(|r| r.file == glob.logical)
        .map(|r| (r.start, r.end, r.name.clone()))
        .collect();
    v.sort();
    v
}

/// Is `glob` the glob of exactly this source? Coq writes the source's MD5 as `DIGEST`; we do not
/// carry an MD5 implementation, so we check that every definition span lies on a char boundary
/// and names the identifier found there — a stale glob fails this almost surely.
fn glob_matches(glob: &Glob, source: &str) -> bool {
    !glob.logical.is_empty()
        && glob
            .defs
            .iter()
            .filter(|d| d.kind == "prf")
            .all(|d| source.get(d.start..d.end).is_some_and(|s| s == d.name))
}

/// `Example e : T := t.` (or `Lemma … := t.`) defines the constant at once: no proof follows.
/// A `:=` counts as the body unless a `let`/`fix`/`cofix` in the statement accounts for it.
fn has_body(body: &str) -> bool {
    let stripped = comments_stripped(body);
    let defs = stripped.matches(":=").count();
    let binders = identifiers(&stripped)
        .into_iter()
        .filter(|r| matches!(stripped.get(r.clone()), Some("let" | "fix" | "cofix")))
        .count();
    defs > binders
}

/// Segment a Coq source file. Never panics; lexer errors end the file early (reported).
pub fn segment(source: &str, glob: Option<&Glob>) -> CoqFile {
    let lexed = sentences(source);
    let lex_errors = lexed
        .errors
        .iter()
        .map(|e: &LexError| e.message(source))
        .collect();
    let mut seg = Segmenter::new(source, glob);
    let mut open: Option<Open> = None;
    let mut prev_end = 0usize;
    for s in &lexed.sentences {
        let cur = Current::new(source, s, prev_end);
        prev_end = s.range.end;
        open = match open {
            Some(o) => seg.proof_sentence(o, &cur),
            None => seg.outside_sentence(&cur),
        };
    }
    seg.pin_modules_named_again(&lexed.sentences);
    seg.finish(open, lex_errors)
}

/// One sentence as the segmenter sees it.
struct Current<'s> {
    range: std::ops::Range<usize>,
    text: &'s str,
    /// The sentence with the layout and comments before it (since the previous sentence's end).
    step_text: String,
    head: Head<'s>,
    /// The command keyword; empty for a tactic or a bullet.
    kw: &'s str,
}

impl<'s> Current<'s> {
    fn new(source: &'s str, s: &Sentence, prev_end: usize) -> Self {
        let text = s.text(source);
        let step_text = source
            .get(prev_end..s.range.end)
            .unwrap_or(text)
            .to_string();
        let head = sentence_head(text);
        let kw = if s.kind == SentenceKind::Command {
            head.keyword.unwrap_or("")
        } else {
            ""
        };
        Current {
            range: s.range.clone(),
            text,
            step_text,
            head,
            kw,
        }
    }
}

/// How a proof-ending command ends the proof; `None` for any other keyword.
fn proof_end(kw: &str) -> Option<ProofEnd> {
    match kw {
        "Qed" | "Save" => Some(ProofEnd::Qed),
        "Defined" => Some(ProofEnd::Defined),
        "Admitted" => Some(ProofEnd::Admitted),
        "Abort" => Some(ProofEnd::Abort),
        _ => None,
    }
}

/// The second identifier of a command (`Section S`, `End S`, `Lemma foo`): the name it declares.
fn declared_name(body: &str) -> Option<&str> {
    identifiers(body).get(1).and_then(|r| body.get(r.clone()))
}

/// Does a `Module` command open a scope? `Module M := F X.` defines M at once; a `:=` inside
/// `with Module E := X` constraints does not.
fn opens_module_scope(body: &str) -> bool {
    body.matches(":=").count()
        <= identifiers(body)
            .into_iter()
            .filter(|r| body.get(r.clone()) == Some("with"))
            .count()
}

/// The segmenter's state across the sentences of one file; one method per kind of sentence.
struct Segmenter<'a> {
    source: &'a str,
    /// Glob references to this file's own names (empty without a matching glob).
    glob_refs: Vec<(usize, usize, String)>,
    used_glob: bool,
    theorems: Vec<Theorem>,
    decls: Vec<Decl>,
    /// The most recent declaration of each name.
    by_name: HashMap<String, usize>,
    scopes: Vec<Scope>,
    next_scope: usize,
    /// The 1-based line of each `Next Obligation`/`Obligation` (skipped as `program`).
    program_obligations: Vec<usize>,
    content_sentences: usize,
    /// Modules: (scope id, name, end offset; `usize::MAX` while open).
    modules: Vec<(usize, String, usize)>,
    imports: Vec<(usize, String)>,
}

impl<'a> Segmenter<'a> {
    fn new(source: &'a str, glob: Option<&Glob>) -> Self {
        let (glob_refs, used_glob) = match glob {
            Some(g) if glob_matches(g, source) => (own_glob_refs(g), true),
            _ => (vec![], false),
        };
        Segmenter {
            source,
            glob_refs,
            used_glob,
            theorems: Vec::new(),
            decls: Vec::new(),
            by_name: HashMap::new(),
            scopes: Vec::new(),
            next_scope: 0,
            program_obligations: Vec::new(),
            content_sentences: 0,
            modules: Vec::new(),
            imports: Vec::new(),
        }
    }

    /// References of a sentence: (theorem index, qualified?).
    /// Identifier tokens, plus (a safety net for tokens the identifier lexer does not return as
    /// names, e.g. the intro-pattern view `H %app_eq_app` or `x·₀lemma1`) every run of ASCII
    /// identifier characters. Over-approximation only pins or proposes more.
    fn textual_refs(&self, text: &str) -> Vec<(usize, bool)> {
        let lookup = |tok: &str| -> Option<(usize, bool)> {
            let tok = tok.trim_end_matches('.');
            let (last, qualified) = match tok.rsplit_once('.') {
                Some((_, last)) => (last, true),
                None => (tok, false),
            };
            self.by_name.get(last).map(|&i| (i, qualified))
        };
        let mut refs: Vec<(usize, bool)> = identifiers(text)
            .into_iter()
            .filter_map(|r| lookup(text.get(r)?))
            .collect();
        let stripped = comments_stripped(text);
        for piece in stripped
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '\'' || c == '.'))
        {
            if let Some(r) = lookup(piece) {
                if !refs.contains(&r) && !refs.iter().any(|x| x.0 == r.0) {
                    refs.push(r);
                }
            }
        }
        refs
    }

    /// Glob references between `range.start` and `range.end`: (theorem index, qualified?).
    fn glob_refs_in(&self, range: &std::ops::Range<usize>) -> Vec<(usize, bool)> {
        let from = self.glob_refs.partition_point(|r| r.0 < range.start);
        self.glob_refs[from..]
            .iter()
            .take_while(|r| r.0 < range.end)
            .filter_map(|(a, b, name)| {
                let qualified = self.source.get(*a..*b).is_some_and(|t| t.contains('.'));
                self.by_name.get(name.as_str()).map(|&i| (i, qualified))
            })
            .collect()
    }

    /// Statements and content always stay (in the context or inside an <invoke>): what they
    /// mention, by text or by glob, is pinned.
    fn pin_mentions(&mut self, cur: &Current) {
        let mut refs = self.textual_refs(cur.text);
        refs.extend(self.glob_refs_in(&cur.range));
        for (j, _) in refs {
            self.theorems[j].pinned = true;
        }
    }

    /// The theorems a proof step uses (glob references when there is a glob, else textual).
    /// A qualified use, or one of a theorem out of the step owner's scope, pins instead.
    fn step_uses(&mut self, scope_ids: &[usize], cur: &Current) -> Vec<usize> {
        let refs = if self.used_glob {
            self.glob_refs_in(&cur.range)
        } else {
            self.textual_refs(cur.text)
        };
        let mut uses = Vec::new();
        for (j, qualified) in refs {
            let in_scope = self
                .decls
                .get(j)
                .is_some_and(|d| scope_ids.starts_with(&d.scope_ids));
            if qualified || !in_scope {
                self.theorems[j].pinned = true;
            } else if !uses.contains(&j) {
                uses.push(j);
            }
        }
        uses
    }

    /// A theorem block is complete: record it and make its name visible to later sentences.
    fn close(&mut self, o: Open) {
        let mut th = o.theorem;
        if th.skip.is_none() && th.steps.is_empty() {
            th.skip = Some(SkipReason::EmptyProof);
        }
        th.peelable =
            th.end == ProofEnd::Qed && th.name.is_some() && th.skip.is_none() && th.peelable;
        let idx = self.theorems.len();
        if let (Some(name), true) = (th.name.clone(), th.end != ProofEnd::Abort) {
            self.by_name.insert(name, idx);
        }
        self.theorems.push(th);
        self.decls.push(Decl {
            scope_ids: o.scope_ids,
        });
    }

    /// A sentence inside theorem `o`: its end, its `Proof` header, or a step. Returns the
    /// theorem while it stays open.
    fn proof_sentence(&mut self, mut o: Open, cur: &Current) -> Option<Open> {
        if let Some(end) = proof_end(cur.kw) {
            self.end_proof(o, end, cur);
            return None;
        }
        let th = &o.theorem;
        if cur.kw == "Proof" && th.steps.is_empty() && th.header.is_none() {
            return self.proof_header(o, cur);
        }
        self.proof_step(&mut o, cur);
        Some(o)
    }

    /// `Qed`, `Save`, `Defined`, `Admitted` or `Abort`: the block is complete.
    fn end_proof(&mut self, mut o: Open, end: ProofEnd, cur: &Current) {
        let th = &mut o.theorem;
        th.end = end;
        th.end_text = cur.step_text.clone();
        th.end_byte = cur.range.end;
        if th.skip.is_none() {
            th.skip = match end {
                ProofEnd::Admitted => Some(SkipReason::Admitted),
                ProofEnd::Abort => Some(SkipReason::Aborted),
                _ if th.steps.is_empty() => Some(SkipReason::EmptyProof),
                _ => None,
            };
        }
        self.close(o);
    }

    /// The first `Proof` sentence: `Proof.`, `Proof with T.`/`Proof using X.` (a header that
    /// stays with its block), or `Proof term.` (a complete proof).
    fn proof_header(&mut self, mut o: Open, cur: &Current) -> Option<Open> {
        let rest = cur.head.body.trim_start_matches("Proof").trim_start();
        let is_word = |w: &str| {
            rest.strip_prefix(w)
                .is_some_and(|r| r.starts_with(|c: char| c.is_whitespace() || c == '.'))
        };
        if is_word("with") || is_word("using") {
            o.with_tactic = proof_with_tactic(rest);
            if is_word("with") && o.with_tactic.is_none() {
                o.theorem.skip.get_or_insert(SkipReason::ProofWith);
            }
        } else if rest != "." {
            self.proof_term(o, rest, cur);
            return None;
        }
        // The header stays with its block (`Proof with auto using foo`): what it names is pinned.
        for (j, _) in self.textual_refs(cur.text) {
            self.theorems[j].pinned = true;
        }
        o.theorem.header = Some(cur.text.to_string());
        Some(o)
    }

    /// `Proof term.` is a complete proof by itself (no `Qed`): one step `exact (term).`
    fn proof_term(&mut self, mut o: Open, rest: &str, cur: &Current) {
        let term = rest.strip_suffix('.').unwrap_or(rest).trim();
        let uses = self.step_uses(&o.scope_ids, cur);
        let th = &mut o.theorem;
        th.steps.push(Step {
            text: format!(" exact ({term})."),
            uses,
        });
        th.end = ProofEnd::Qed;
        th.end_text = String::new();
        th.end_byte = cur.range.end;
        self.close(o);
    }

    /// A proof step. References resolved now; scope checks need the step's owner scope.
    fn proof_step(&mut self, o: &mut Open, cur: &Current) {
        if opens_theorem_block(cur.kw) || cur.kw == "Proof" {
            o.theorem.skip.get_or_insert(SkipReason::Unsupported);
        }
        let uses = self.step_uses(&o.scope_ids, cur);
        let text = match &o.with_tactic {
            Some(with) => expand_ellipsis(&cur.step_text, cur.text, with),
            None => Some(cur.step_text.clone()),
        };
        match text {
            Some(text) => o.theorem.steps.push(Step { text, uses }),
            None => {
                o.theorem.skip.get_or_insert(SkipReason::ProofWith);
            }
        }
    }

    /// Outside a theorem: a statement (opens a theorem, returned), a scope command, or content.
    fn outside_sentence(&mut self, cur: &Current) -> Option<Open> {
        if opens_theorem_block(cur.kw) && !has_body(cur.head.body) {
            return Some(self.statement(cur));
        }
        self.content(cur);
        None
    }

    /// A theorem statement: the block it opens.
    fn statement(&mut self, cur: &Current) -> Open {
        let body = cur.head.body;
        let ids = identifiers(body);
        let name = if cur.kw == GOAL_KEYWORD {
            None
        } else {
            declared_name(body).map(str::to_string)
        };
        let count = |w: &str| {
            ids.iter()
                .filter(|r| body.get((*r).clone()) == Some(w))
                .count()
        };
        let skip = if cur.head.legacy_attributes.contains(&"Program") {
            Some(SkipReason::Program)
        } else if count("with") > count("match") {
            Some(SkipReason::Mutual)
        } else {
            None
        };
        self.pin_mentions(cur);
        let (line, _) = line_col(self.source, cur.range.start);
        let scopes = &self.scopes;
        Open {
            theorem: Theorem {
                name,
                statement: cur.text.to_string(),
                header: None,
                steps: Vec::new(),
                end_text: String::new(),
                end: ProofEnd::Abort,
                start: cur.range.start,
                end_byte: cur.range.end,
                line,
                peelable: !scopes.iter().any(|sc| sc.sealed),
                pinned: false,
                skip,
                scope: scopes.iter().map(|sc| sc.name.clone()).collect(),
                module_path: scopes
                    .iter()
                    .filter(|sc| sc.module)
                    .map(|sc| sc.name.clone())
                    .collect(),
            },
            scope_ids: scopes.iter().map(|sc| sc.id).collect(),
            with_tactic: None,
        }
    }

    /// Content: stays verbatim; scope commands, imports and obligations are tracked.
    fn content(&mut self, cur: &Current) {
        self.content_sentences += 1;
        let body = cur.head.body;
        match cur.kw {
            "Section" => {
                let name = declared_name(body).unwrap_or("").to_string();
                self.open_scope(name, false, false);
            }
            "Module" if opens_module_scope(body) => self.open_module(body),
            "End" => self.end_scope(declared_name(body).unwrap_or(""), cur.range.end),
            // `Include F M` inside a module checks the module so far against F's parameter:
            // every theorem of the open modules may be needed.
            "Include" => {
                let open_ids: Vec<usize> = self.scopes.iter().map(|sc| sc.id).collect();
                self.pin_in_scopes(|scope_ids| scope_ids.iter().any(|id| open_ids.contains(id)));
            }
            "Require" | "From" if body.contains("Require") => {
                self.imports.push((cur.range.start, cur.text.to_string()));
            }
            "Next" | "Obligation"
                if body.starts_with("Next Obligation") || cur.kw == "Obligation" =>
            {
                let line = line_col(self.source, cur.range.start).0;
                self.program_obligations.push(line);
            }
            _ => {}
        }
        self.pin_mentions(cur);
    }

    fn open_scope(&mut self, name: String, sealed: bool, module: bool) {
        self.next_scope += 1;
        self.scopes.push(Scope {
            id: self.next_scope,
            name,
            sealed,
            module,
        });
    }

    /// `Module [Type] [Import|Export] M …`: sealed when a Module Type, a functor or a module
    /// with a signature.
    fn open_module(&mut self, body: &str) {
        let words: Vec<&str> = identifiers(body)
            .into_iter()
            .filter_map(|r| body.get(r))
            .collect();
        let is_type = words.get(1) == Some(&"Type");
        let name = words
            .iter()
            .skip(1)
            .find(|w| !matches!(**w, "Type" | "Import" | "Export"))
            .copied()
            .unwrap_or("");
        let after_name = body.split_once(name).map(|(_, r)| r).unwrap_or("");
        let sealed = is_type || after_name.contains(':') || after_name.contains('(');
        self.open_scope(name.to_string(), sealed, true);
        self.modules
            .push((self.next_scope, name.to_string(), usize::MAX));
    }

    /// `End name` at byte `end`: closes the innermost scope so named and all inside it.
    fn end_scope(&mut self, name: &str, end: usize) {
        if let Some(pos) = self.scopes.iter().rposition(|sc| sc.name == name) {
            for sc in &self.scopes[pos..] {
                if let Some(m) = self.modules.iter_mut().find(|m| m.0 == sc.id) {
                    m.2 = end;
                }
            }
            self.scopes.truncate(pos);
        }
    }

    /// Pin every theorem whose declaration scopes satisfy `pred`.
    fn pin_in_scopes(&mut self, pred: impl Fn(&[usize]) -> bool) {
        for (t, d) in self.theorems.iter_mut().zip(&self.decls) {
            if pred(&d.scope_ids) {
                t.pinned = true;
            }
        }
    }

    /// A module named again after its `End` (functor argument `F(M)`, `Include M`,
    /// `Module N := M`, `<:` checks) may need every field it has: pin all its theorems.
    /// `Import`/`Export M` do not (out-of-scope uses of its lemmas are pinned one by one).
    fn pin_modules_named_again(&mut self, sentences: &[Sentence]) {
        let source = self.source;
        for (id, name, end) in std::mem::take(&mut self.modules) {
            if name.is_empty() || end == usize::MAX {
                continue;
            }
            let named_again = sentences
                .iter()
                .filter(|s| s.range.start >= end)
                .any(|s| names_module(s.text(source), &name));
            if named_again {
                self.pin_in_scopes(|scope_ids| scope_ids.contains(&id));
            }
        }
    }

    /// The file's segments; a theorem still open is unterminated.
    fn finish(mut self, open: Option<Open>, lex_errors: Vec<String>) -> CoqFile {
        if let Some(o) = open {
            let mut th = o.theorem;
            th.skip = Some(SkipReason::Unterminated);
            th.peelable = false;
            th.end_byte = self.source.len();
            self.theorems.push(th);
        }
        CoqFile {
            segments: Segments {
                source: self.source.to_string(),
                theorems: self.theorems,
                other_skipped: self
                    .program_obligations
                    .into_iter()
                    .map(|line| (SkipReason::Program, line))
                    .collect(),
                content_sentences: self.content_sentences,
            },
            imports: self.imports,
            lex_errors,
            used_glob: self.used_glob,
        }
    }
}

/// Does sentence `text` name module `name` (plainly or as the last part of a qualified name),
/// other than in `Import`, `Export` or `End`?
fn names_module(text: &str, name: &str) -> bool {
    let h = sentence_head(text);
    !matches!(h.keyword, Some("Import" | "Export" | "End"))
        && identifiers(text).into_iter().any(|r| {
            text.get(r).is_some_and(|t| {
                t == name || t.strip_suffix(name).is_some_and(|p| p.ends_with('.'))
            })
        })
}

/// A Coq library as a [`LibrarySource`]: discovery and dependencies from [`crate::discovery`],
/// segmentation by [`segment`] with the file's `.glob` when there is one, the `hammer.` rule of
/// [`crate::hammer`], and the dependency split.
pub struct CoqSource<'l> {
    pub library: Library,
    pub language: Option<&'l dyn ProofLanguage>,
    /// How the library's own build resolved its unqualified `Require`s ([`crate::imports`]).
    pub resolver: Resolver,
    /// The stdlib's directory: its files are never rewritten (they resolve within `Coq`).
    pub theories: std::path::PathBuf,
    /// CoqHammer tactic names the library defines itself (`Ltac sauto := …` in Coqprime): a
    /// step using one is the library's tactic, not CoqHammer's, and is not replaced by `hammer.`.
    pub own_tactics: Vec<String>,
}

impl<'l> CoqSource<'l> {
    /// Discover `spec` under `coqlib` and resolve its file dependencies.
    pub fn discover(
        spec: &LibrarySpec,
        coqlib: &Path,
        language: Option<&'l dyn ProofLanguage>,
    ) -> Result<Self, DiscoveryError> {
        let mut library = discovery::discover(spec, coqlib)?;
        discovery::resolve_dependencies(&mut library, coqlib);
        let resolver = Resolver::new(&library, coqlib);
        let own_tactics = crate::hammer::own_hammer_tactics(
            library
                .files
                .iter()
                .filter_map(|f| std::fs::read_to_string(&f.path).ok()),
        );
        Ok(CoqSource {
            library,
            language,
            resolver,
            theories: coqlib.join("theories"),
            own_tactics,
        })
    }
}

struct CoqSegmenter<'a> {
    source: &'a CoqSource<'a>,
}

impl CoqSource<'_> {
    /// `source` (file `file`) with its library-internal `Require`s qualified; the stdlib's files
    /// are left as they are.
    pub fn qualify_imports(&self, file: usize, source: &str, glob: Option<&Glob>) -> Rewritten {
        let Some(f) = self.library.files.get(file) else {
            return Rewritten::unchanged(source);
        };
        if f.path.starts_with(&self.theories) {
            return Rewritten::unchanged(source);
        }
        // The compiler's own resolution where the glob belongs to this text.
        let by_glob: HashMap<usize, &str> = glob
            .filter(|g| glob_matches(g, source))
            .map(|g| {
                g.required_at
                    .iter()
                    .map(|(a, _, l)| (*a, l.as_str()))
                    .collect()
            })
            .unwrap_or_default();
        qualify_requires(source, &|at, name| match by_glob.get(&at) {
            Some(l) => Ok(Target::of(name, l)),
            None => self
                .resolver
                .resolve(&f.logical, name)
                .map(|l| Target::of(name, &l)),
        })
    }
}

impl FileSegmenter for CoqSegmenter<'_> {
    fn segment(&mut self, file: usize, source: &str) -> SegmentedSource {
        let glob = self
            .source
            .library
            .files
            .get(file)
            .and_then(|f| f.glob.as_ref())
            .and_then(|g| std::fs::read_to_string(g).ok())
            .map(|t| crate::glob::parse(&t).0);
        let rw = self.source.qualify_imports(file, source, glob.as_ref());
        let glob = glob.map(|g| rw.shift_glob(&g));
        let mut cf = segment(&rw.text, glob.as_ref());
        cf.lex_errors.truncate(1);
        let unclosed = cf
            .segments
            .theorems
            .iter()
            .filter(|t| t.skip == Some(SkipReason::Unterminated))
            .count();
        SegmentedSource {
            goal_blocks: cf.segments.theorems.len(),
            unclosed_blocks: unclosed,
            segments: cf.segments,
            imports: cf.imports,
            // The lexer stops at its first error: the rest of the file is not seen.
            issues: cf
                .lex_errors
                .iter()
                .map(|e| (0, format!("lex_error_rest_of_file: {e}")))
                .chain(rw.unresolved.iter().map(|(at, msg)| {
                    (line_col(source, *at).0, format!("import_unresolved: {msg}"))
                }))
                .collect(),
            prover_references: cf.used_glob,
            body_start: 0,
        }
    }
}

impl LibrarySource for CoqSource<'_> {
    fn prover(&self) -> &'static str {
        "coq"
    }
    fn library(&self) -> &Library {
        &self.library
    }
    fn segmenter(&self) -> Box<dyn FileSegmenter + '_> {
        Box::new(CoqSegmenter { source: self })
    }
    fn rewrite_step(&self, steps: &[Step], k: usize) -> Option<String> {
        crate::hammer::replace_step_except(steps, k, &self.own_tactics)
    }
    fn language(&self) -> Option<&dyn ProofLanguage> {
        self.language
    }
    fn proof_language(&self) -> &dyn ProofLanguage {
        &prod_coq::CoqLanguage
    }
    fn context_axioms(&self, context: &str) -> Vec<String> {
        prod_coq::admitted_constants(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block keywords are exactly prod-coq's lemma keywords plus `Goal`.
    #[test]
    fn block_keywords_are_prod_coq_lemma_keywords_plus_goal() {
        assert!(!prod_coq::THEOREM_KEYWORDS.contains(&GOAL_KEYWORD));
        for kw in prod_coq::THEOREM_KEYWORDS {
            assert!(opens_theorem_block(kw), "{kw}");
        }
        assert!(opens_theorem_block("Goal"));
        let block_keywords: std::collections::BTreeSet<&str> = [
            "Theorem",
            "Lemma",
            "Fact",
            "Remark",
            "Corollary",
            "Proposition",
            "Property",
            "Example",
            "Goal",
        ]
        .into();
        let derived: std::collections::BTreeSet<&str> = prod_coq::THEOREM_KEYWORDS
            .iter()
            .copied()
            .chain([GOAL_KEYWORD])
            .collect();
        assert_eq!(derived, block_keywords);
        for kw in [
            "Definition",
            "Proof",
            "Qed",
            "Instance",
            "Fixpoint",
            "goal",
            "",
        ] {
            assert!(!opens_theorem_block(kw), "{kw}");
        }
    }

    #[test]
    fn basic_blocks_and_steps() {
        let src = "Require Import Arith.\nLemma a : True.\nProof. exact I. Qed.\n(* c *) Lemma b : True. Proof.\n  - apply a.\nQed.\n";
        let f = segment(src, None);
        let t = &f.segments.theorems;
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name.as_deref(), Some("a"));
        assert_eq!(
            t[1].steps
                .iter()
                .map(|s| s.text.as_str())
                .collect::<Vec<_>>(),
            ["\n  -", " apply a."]
        );
        assert_eq!(t[1].steps[1].uses, vec![0]);
        assert_eq!(f.imports.len(), 1);
        assert_eq!(
            &src[t[1].start..t[1].end_byte],
            "Lemma b : True. Proof.\n  - apply a.\nQed."
        );
    }

    /// `Next Obligation` blocks are skipped as `program`, each with its own 1-based line
    /// (`skipped.jsonl` names where it is).
    #[test]
    fn obligations_are_skipped_with_their_lines() {
        let src = "Require Import Program.\nProgram Definition f : nat := _.\nNext Obligation.\n  exact 0.\nDefined.\n\nProgram Definition g : nat := _.\nNext Obligation. exact 1. Defined.\n";
        let f = segment(src, None);
        assert_eq!(
            f.segments.other_skipped,
            [(SkipReason::Program, 3), (SkipReason::Program, 8)]
        );
    }

    #[test]
    fn example_with_body_is_content() {
        let src = "Example e : 1 = 1 := eq_refl.\nLemma l : let x := 1 in x = 1. Proof. reflexivity. Qed.\n";
        let f = segment(src, None);
        let names: Vec<_> = f
            .segments
            .theorems
            .iter()
            .map(|t| t.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["l"]);
    }

    proptest::proptest! {
        /// Any text: no panic, spans ordered and on char boundaries, examples well-formed.
        #[test]
        fn never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
            "Lemma a : True.", "Lemma b : a = a.", "Theorem c x : P x.", "Proof.", "Proof using.", "Proof a.", "Qed.",
            "Defined.", "Admitted.", "Abort.", "apply a.", "exact b.", "-", "+", "{", "}", "Section S.", "End S.",
            "Module M.", "Module N := M.", "End M.", "Include M.", "Hint Resolve a.", "(* c *)", "(* open", "\"str.",
            "Goal True.", "Example e : 1 = 1 := eq_refl.", "Proof with auto.", "é.", "Next Obligation.", "lia.", " ", "\n",
        ]), 0..40)) {
            let src = parts.join(" ");
            let f = segment(&src, None);
            crate::examples::check_segmented(
                &src,
                &f.segments,
                &crate::hammer::replace_step,
                &prod_coq::CoqLanguage,
            )?;
        }
    }

    #[test]
    fn scope_crossing_pins() {
        let src = "Section S. Variable n : nat. Lemma a : n = n. Proof. reflexivity. Qed.\nLemma b : n = n. Proof. apply a. Qed. End S.\nLemma c : forall n : nat, n = n. Proof. intro. apply a. Qed.\n";
        let f = segment(src, None);
        let t = &f.segments.theorems;
        assert!(t[0].pinned, "used after End S");
        assert_eq!(t[1].steps[0].uses, vec![0]);
        assert_eq!(t[2].steps[1].uses, Vec::<usize>::new());
    }
}

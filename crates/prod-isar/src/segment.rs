//! Command segmentation and goal blocks.
//!
//! Isabelle splits a theory into commands by its keyword table alone: every declared command
//! keyword starts a new command (outside strings, cartouches and comments, which the lexer has
//! already made single tokens). Spaces and comments after a command belong to it, as in Isabelle.
//! `private`/`qualified` attach to the command that follows them, and the theory header
//! (`theory … begin`) is one span.
//!
//! A *goal block* is a theory-level statement (kind `thy_goal`, `thy_goal_defn`, `thy_goal_stmt`)
//! plus its proof: the following command spans up to the one that closes the statement, found
//! by tracking proof depth (`have`/`show`/`obtain`/`subgoal`/`{` open; `by . .. sorry \<proof>
//! done qed }` close; `oops` closes everything; `proof` and `next` do not change the depth).

use std::ops::Range;

use crate::header::{parse_header_tokens, TheoryHeader};
use crate::keywords::{KeywordKind, KeywordTable};
use crate::lexer::{lex, line_col, Token, TokenKind};

/// One command: its keyword and the text up to the next command (trailing spaces and comments
/// included). A leading span with no keyword holds text before the first command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpan {
    /// The command keyword (`lemma`, `by`, `{`, `\<proof>`, …), `None` for leading text.
    pub name: Option<String>,
    /// Its kind in the keyword table.
    pub kind: Option<KeywordKind>,
    /// Byte range of the whole span (from `private`/`qualified` when present).
    pub range: Range<usize>,
    /// Byte range of the command keyword itself.
    pub keyword: Range<usize>,
    /// Indices into the token list of the span's tokens.
    pub tokens: Range<usize>,
}

impl CommandSpan {
    /// The span's text in `src`.
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.range.clone()).unwrap_or("")
    }

    /// The span's text without trailing spaces and comments.
    pub fn text_trimmed<'a>(&self, src: &'a str, tokens: &[Token]) -> &'a str {
        let end = tokens
            .get(self.tokens.clone())
            .and_then(|ts| ts.iter().rev().find(|t| !t.is_improper()))
            .map(|t| t.range.end)
            .unwrap_or(self.range.end);
        src.get(self.range.start..end).unwrap_or("")
    }
}

/// A theory-level statement and its proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalBlock {
    /// Index of the statement's span.
    pub statement: usize,
    /// Span indices of the whole block (statement first); the proof steps are
    /// `statement + 1 .. spans.end`.
    pub spans: Range<usize>,
    /// Byte range of the block.
    pub range: Range<usize>,
    /// Whether the proof was closed (depth back to 0); unclosed blocks are also reported as errors.
    pub closed: bool,
    /// The statement's name (`lemma foo[simp]: …` gives `foo`), if any.
    pub name: Option<String>,
    /// The locale/class target: `(in loc)` or the innermost enclosing `context loc begin`.
    pub target: Option<String>,
    /// Number of enclosing `context/locale/class/instantiation/… begin` blocks.
    pub context_depth: usize,
    /// False when the statement's keyword is not declared as a theory goal but proof commands
    /// follow it (AFP tools declared as `thy_decl` that still open a proof, e.g.
    /// `manual_protocol_security_proof`): the block was inferred, as Isabelle runs it.
    pub declared_goal: bool,
}

impl GoalBlock {
    /// Span indices of the proof steps.
    pub fn proof_steps(&self) -> Range<usize> {
        (self.statement + 1).min(self.spans.end)..self.spans.end
    }
}

/// A segmentation problem at byte `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentError {
    pub message: String,
    pub offset: usize,
}

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for SegmentError {}

/// A segmented theory.
#[derive(Debug, Clone, Default)]
pub struct Theory {
    pub tokens: Vec<Token>,
    pub header: Option<TheoryHeader>,
    pub spans: Vec<CommandSpan>,
    pub blocks: Vec<GoalBlock>,
    /// Lexer, header and segmentation problems, in order of discovery.
    pub errors: Vec<SegmentError>,
}

impl Theory {
    /// The statement of `block` (its first span, without trailing comments and spaces).
    pub fn statement_text<'a>(&self, text: &'a str, block: &GoalBlock) -> &'a str {
        self.spans
            .get(block.statement)
            .map(|s| s.text_trimmed(text, &self.tokens))
            .unwrap_or("")
    }

    /// The proof steps of `block`: one text per command span, trimmed.
    pub fn step_texts<'a>(&self, text: &'a str, block: &GoalBlock) -> Vec<&'a str> {
        block
            .proof_steps()
            .filter_map(|i| self.spans.get(i))
            .map(|s| s.text_trimmed(text, &self.tokens))
            .collect()
    }

    /// Whether the block's proof skips or abandons a goal anywhere (`sorry`, `\<proof>`,
    /// `oops`): such blocks are not proofs and must not become training targets.
    pub fn has_cheats(&self, block: &GoalBlock) -> bool {
        block.proof_steps().any(|i| {
            self.spans
                .get(i)
                .and_then(|s| s.name.as_deref())
                .is_some_and(|n| matches!(n, "sorry" | "oops" | "\\<proof>"))
        })
    }

    /// Everything before `block`: the header, definitions and earlier statements.
    pub fn context_before<'a>(&self, text: &'a str, block: &GoalBlock) -> &'a str {
        text.get(..block.range.start).unwrap_or("")
    }
}

fn err_at(text: &str, offset: usize, message: impl std::fmt::Display) -> SegmentError {
    let (line, col) = line_col(text, offset);
    SegmentError {
        message: format!("line {line}, column {col}: {message}"),
        offset,
    }
}

/// Splits `text` into command spans with `table` (extended by the theory's own `keywords`
/// header). The spans cover the text losslessly, in order.
pub fn segment(text: &str, table: &KeywordTable) -> (Vec<CommandSpan>, Vec<SegmentError>) {
    let t = segment_theory(text, table);
    (t.spans, t.errors)
}

/// Lexes, parses the header, segments and finds goal blocks.
pub fn segment_theory(text: &str, table: &KeywordTable) -> Theory {
    let (tokens, lex_errors) = lex(text);
    let mut errors: Vec<SegmentError> = lex_errors
        .into_iter()
        .map(|e| SegmentError {
            message: e.message,
            offset: e.offset,
        })
        .collect();
    let header = match parse_header_tokens(text, &tokens) {
        Ok(h) => Some(h),
        Err(e) => {
            errors.push(err_at(
                text,
                e.offset,
                format!("theory header: {}", e.message),
            ));
            None
        }
    };
    let own;
    let table = match &header {
        Some(h) => {
            // The theory's own keywords, and those of distribution sessions it imports directly.
            let mut t = table.clone();
            t.add_distribution_imports(h.imports.iter().map(String::as_str));
            t.extend_from_header(h);
            own = t;
            &own
        }
        None => table,
    };
    let spans = spans_of(text, &tokens, table, header.as_ref());
    let (blocks, block_errors) = goal_blocks(text, &tokens, &spans);
    errors.extend(block_errors);
    Theory {
        tokens,
        header,
        spans,
        blocks,
        errors,
    }
}

fn command_kind_of(tok: &Token, text: &str, table: &KeywordTable) -> Option<KeywordKind> {
    match tok.kind {
        TokenKind::Ident | TokenKind::Keyword | TokenKind::SymIdent => {
            table.command_kind(tok.text(text))
        }
        _ => None,
    }
}

/// The command keyword starting at token `i`: (index of its last token, kind). Longest match
/// over the table's multi-token names (`@proof`) and the single token, as Isabelle's scanner.
fn command_at(
    tokens: &[Token],
    i: usize,
    text: &str,
    table: &KeywordTable,
) -> Option<(usize, KeywordKind)> {
    let tok = &tokens[i];
    if !matches!(
        tok.kind,
        TokenKind::Ident | TokenKind::Keyword | TokenKind::SymIdent
    ) {
        return None;
    }
    let rest = text.get(tok.range.start..).unwrap_or("");
    for name in table.split_commands() {
        if name.len() > tok.range.len() && rest.starts_with(name.as_str()) {
            let end = tok.range.start + name.len();
            // The name must end on a token boundary, inside proper adjacent tokens.
            let mut j = i;
            while j < tokens.len() && tokens[j].range.end < end {
                j += 1;
            }
            if j < tokens.len()
                && tokens[j].range.end == end
                && !tokens[i..=j].iter().any(|t| t.is_improper())
            {
                if let Some(k) = table.command_kind(name) {
                    return Some((j, k));
                }
            }
        }
    }
    command_kind_of(tok, text, table).map(|k| (i, k))
}

fn spans_of(
    text: &str,
    tokens: &[Token],
    table: &KeywordTable,
    header: Option<&TheoryHeader>,
) -> Vec<CommandSpan> {
    // Commands: (start token, first keyword token, last keyword token, kind).
    let mut starts: Vec<(usize, usize, usize, KeywordKind)> = Vec::new();
    let mut i = 0;
    let header_end = header.map(|h| (h.range.start, h.range.end));
    while i < tokens.len() {
        let tok = &tokens[i];
        if let Some((hs, he)) = header_end {
            if tok.range.start == hs {
                // The header is one span: `theory` … `begin`.
                starts.push((i, i, i, KeywordKind::ThyBegin));
                while i < tokens.len() && tokens[i].range.end <= he {
                    i += 1;
                }
                continue;
            }
        }
        if let Some((last, kind)) = command_at(tokens, i, text, table) {
            starts.push((i, i, last, kind));
            i = last + 1;
            continue;
        } else if tok.kind == TokenKind::Ident && table.is_before_command(tok.text(text)) {
            // `private lemma …`: the span starts at `private` when a command follows.
            let next = tokens[i + 1..]
                .iter()
                .position(|t| !t.is_improper())
                .map(|p| i + 1 + p);
            if let Some(n) = next {
                if let Some((last, kind)) = command_at(tokens, n, text, table) {
                    starts.push((i, n, last, kind));
                    i = last + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    let mut spans = Vec::with_capacity(starts.len() + 1);
    let first = starts.first().map(|s| s.0).unwrap_or(tokens.len());
    if first > 0 {
        spans.push(CommandSpan {
            name: None,
            kind: None,
            range: 0..tokens[first - 1].range.end,
            keyword: 0..0,
            tokens: 0..first,
        });
    }
    for (n, &(s, k, last, kind)) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map(|x| x.0).unwrap_or(tokens.len());
        let byte_end = tokens[end - 1].range.end;
        let keyword = tokens[k].range.start..tokens[last].range.end;
        spans.push(CommandSpan {
            name: Some(text[keyword.clone()].to_string()),
            kind: Some(kind),
            range: tokens[s].range.start..byte_end,
            keyword,
            tokens: s..end,
        });
    }
    spans
}

/// Proper tokens of a span after its keyword.
fn args<'a>(span: &CommandSpan, tokens: &'a [Token]) -> Vec<&'a Token> {
    tokens
        .get(span.tokens.clone())
        .unwrap_or(&[])
        .iter()
        .filter(|t| !t.is_improper() && t.range.start >= span.keyword.end)
        .collect()
}

/// The index after a bracketed attribute list `[…]` (nested brackets included) starting at
/// `j`, or `j` when none starts there.
pub(crate) fn skip_attributes(text: &str, toks: &[&Token], mut j: usize) -> usize {
    if toks.get(j).is_some_and(|t| t.text(text) == "[") {
        let mut depth = 0usize;
        while let Some(t) = toks.get(j) {
            match t.text(text) {
                "[" => depth += 1,
                "]" => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
            j += 1;
        }
    }
    j
}

/// `(in loc) name [attrs] :` after a statement keyword: (target, name).
pub fn statement_name(
    text: &str,
    tokens: &[Token],
    span: &CommandSpan,
) -> (Option<String>, Option<String>) {
    let a = args(span, tokens);
    let mut i = 0;
    let mut target = None;
    if a.first().is_some_and(|t| t.text(text) == "(")
        && a.get(1).is_some_and(|t| t.text(text) == "in")
        && a.get(3).is_some_and(|t| t.text(text) == ")")
    {
        target = a.get(2).map(|t| crate::header::name_text(t, text));
        i = 4;
    }
    let Some(t) = a.get(i) else {
        return (target, None);
    };
    if t.kind != TokenKind::Ident {
        return (target, None);
    }
    let name = t.text(text).to_string();
    let j = skip_attributes(text, &a, i + 1);
    let named = a.get(j).is_some_and(|t| t.text(text) == ":");
    (target, named.then_some(name))
}

/// Context blocks opened by `… begin` (context, locale, class, instantiation, notepad, …).
struct OpenContext {
    name: Option<String>,
    notepad: bool,
}

/// A statement whose proof has not closed yet.
struct OpenBlock {
    /// Index of the statement's span.
    statement: usize,
    /// Proof depth: 1 right after the statement.
    depth: usize,
    name: Option<String>,
    target: Option<String>,
}

/// The proof depth after a proof command of `kind` at `depth` (see the module documentation).
fn depth_after(kind: KeywordKind, depth: usize) -> usize {
    if kind.is_qed_global() {
        0
    } else if kind.is_proof_open() {
        depth + 1
    } else if kind.is_proof_close() {
        depth - 1
    } else {
        depth
    }
}

/// Finds the goal blocks among `spans` (see the module documentation).
pub fn goal_blocks(
    text: &str,
    tokens: &[Token],
    spans: &[CommandSpan],
) -> (Vec<GoalBlock>, Vec<SegmentError>) {
    let mut scan = BlockScan {
        text,
        tokens,
        spans,
        blocks: Vec::new(),
        errors: Vec::new(),
        contexts: Vec::new(),
        open: None,
        last_theory: None,
    };
    for (idx, span) in spans.iter().enumerate() {
        let Some(kind) = span.kind else { continue };
        if scan.proof_step(idx, kind) || scan.inferred_goal(idx, kind) {
            continue;
        }
        scan.theory_command(idx, span, kind);
    }
    scan.finish()
}

/// The walk of [`goal_blocks`] over the spans, and what it has found so far.
struct BlockScan<'a> {
    text: &'a str,
    tokens: &'a [Token],
    spans: &'a [CommandSpan],
    blocks: Vec<GoalBlock>,
    errors: Vec<SegmentError>,
    contexts: Vec<OpenContext>,
    open: Option<OpenBlock>,
    /// The last theory-level command outside any block (a candidate undeclared goal).
    last_theory: Option<usize>,
}

impl BlockScan<'_> {
    /// The command at span `idx` while a block is open: a proof step (`true`), or a
    /// theory-level command, which ends the unclosed block and is then handled at theory level
    /// (`false`, as when no block is open).
    fn proof_step(&mut self, idx: usize, kind: KeywordKind) -> bool {
        let Some(mut open) = self.open.take() else {
            return false;
        };
        if kind.is_theory() {
            // A theory-level command inside an open proof: the proof never closed.
            let name = self.spans[idx].name.as_deref().unwrap_or("");
            self.unclosed(&open, &format!("before `{name}`"));
            self.close(open, idx, false);
            return false;
        }
        open.depth = depth_after(kind, open.depth);
        self.advance(open, idx);
        true
    }

    /// A proof command at span `idx` right after a theory command not declared as a goal: that
    /// command opened a proof at run time, and this one is replayed inside the inferred block
    /// (`true`).
    fn inferred_goal(&mut self, idx: usize, kind: KeywordKind) -> bool {
        if !kind.is_proof() || self.in_notepad() {
            return false;
        }
        let Some(st) = self.last_theory.take() else {
            return false;
        };
        // The statement left its proof at depth 1, as a declared goal does; this command moves
        // it on from there.
        let open = OpenBlock {
            statement: st,
            depth: depth_after(kind, 1),
            name: None,
            target: self.context_target(),
        };
        self.advance(open, idx);
        true
    }

    /// A command at theory level: a declared goal opens a block, another theory command may
    /// turn out to open one, `… begin` and `end` open and close contexts.
    fn theory_command(&mut self, idx: usize, span: &CommandSpan, kind: KeywordKind) {
        self.last_theory = None;
        let name = span.name.as_deref().unwrap_or("");
        if kind.is_theory_goal() {
            let (in_target, stmt_name) = statement_name(self.text, self.tokens, span);
            let target = in_target.or_else(|| self.context_target());
            self.open = Some(OpenBlock {
                statement: idx,
                depth: 1,
                name: stmt_name,
                target,
            });
        } else if matches!(
            kind,
            KeywordKind::ThyDecl | KeywordKind::ThyDefn | KeywordKind::ThyStmt
        ) {
            self.last_theory = Some(idx);
        } else if kind == KeywordKind::ThyDeclBlock {
            self.open_context(span, name);
        } else if kind == KeywordKind::ThyEnd {
            self.contexts.pop();
        } else if kind.is_proof() && !self.in_notepad() {
            self.errors.push(err_at(
                self.text,
                span.keyword.start,
                format!("proof command `{name}` outside a proof"),
            ));
        }
    }

    /// `context/locale/class/instantiation/notepad/… begin`: a context opens (named after
    /// its first argument for `context`, `locale` and `class`).
    fn open_context(&mut self, span: &CommandSpan, name: &str) {
        let text = self.text;
        let a = args(span, self.tokens);
        if a.last()
            .is_some_and(|t| t.kind == TokenKind::Ident && t.text(text) == "begin")
        {
            let named = a
                .first()
                .filter(|t| matches!(t.kind, TokenKind::Ident | TokenKind::String))
                .filter(|t| t.text(text) != "begin")
                .map(|t| crate::header::name_text(t, text));
            let cname = match name {
                "context" | "locale" | "class" => named,
                _ => None,
            };
            self.contexts.push(OpenContext {
                name: cname,
                notepad: name == "notepad",
            });
        }
    }

    /// The blocks and errors, once a block still open at the end of the file is closed as
    /// unclosed.
    fn finish(mut self) -> (Vec<GoalBlock>, Vec<SegmentError>) {
        if let Some(open) = self.open.take() {
            self.unclosed(&open, "at end of file");
            let end = self.spans.len();
            self.close(open, end, false);
        }
        (self.blocks, self.errors)
    }

    /// `open` after the proof command at span `idx`: closed when its depth is back to 0.
    fn advance(&mut self, open: OpenBlock, idx: usize) {
        if open.depth == 0 {
            self.close(open, idx + 1, true);
        } else {
            self.open = Some(open);
        }
    }

    /// The error for a proof of `open` that never closed, `place` saying where it ends.
    fn unclosed(&mut self, open: &OpenBlock, place: &str) {
        let st = open.statement;
        self.errors.push(err_at(
            self.text,
            self.spans[st].keyword.start,
            format!(
                "unclosed proof of `{}` (depth {}) {place}",
                self.spans[st].name.as_deref().unwrap_or("?"),
                open.depth
            ),
        ));
    }

    /// Records `open` as the block of spans `statement..end`.
    fn close(&mut self, open: OpenBlock, end: usize, closed: bool) {
        let spans = self.spans;
        let st = open.statement;
        let declared_goal = spans[st].kind.is_some_and(KeywordKind::is_theory_goal);
        let range_end = spans
            .get(end.saturating_sub(1))
            .map(|s| s.range.end)
            .unwrap_or(self.text.len());
        self.blocks.push(GoalBlock {
            statement: st,
            spans: st..end,
            range: spans[st].range.start..range_end,
            closed,
            name: open.name,
            target: open.target,
            context_depth: self.contexts.len(),
            declared_goal,
        });
    }

    /// Inside a `notepad … begin` (proof commands there belong to no goal).
    fn in_notepad(&self) -> bool {
        self.contexts.last().is_some_and(|c| c.notepad)
    }

    /// The innermost enclosing named context (`context loc begin`).
    fn context_target(&self) -> Option<String> {
        self.contexts.iter().rev().find_map(|c| c.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_cover_text_and_blocks_close() {
        let src = "theory T imports Main begin\n\nprivate lemma foo[simp]: \"x = x\"\n  by simp\n\nlemma (in loc) bar: shows \"P\"\nproof -\n  have a: \"Q\" using foo by auto\n  { fix x\n    have \"R x\" sorry }\n  then show ?thesis\n    apply simp\n    done\nqed\n\nend\n";
        let th = segment_theory(src, &KeywordTable::hol());
        assert!(th.errors.is_empty(), "{:?}", th.errors);
        let joined: String = th.spans.iter().map(|s| s.text(src)).collect();
        assert_eq!(joined, src);
        let names: Vec<&str> = th.spans.iter().filter_map(|s| s.name.as_deref()).collect();
        assert_eq!(
            names,
            vec![
                "theory", "lemma", "by", "lemma", "proof", "have", "using", "by", "{", "fix",
                "have", "sorry", "}", "then", "show", "apply", "done", "qed", "end"
            ]
        );
        assert!(th.spans[1].text(src).starts_with("private lemma"));
        assert_eq!(th.blocks.len(), 2);
        assert!(th.blocks.iter().all(|b| b.closed));
        assert_eq!(th.blocks[0].name.as_deref(), Some("foo"));
        assert_eq!(th.blocks[1].name.as_deref(), Some("bar"));
        assert_eq!(th.blocks[1].target.as_deref(), Some("loc"));
        assert_eq!(th.blocks[1].proof_steps().len(), 14);
        assert_eq!(
            th.statement_text(src, &th.blocks[0]),
            "private lemma foo[simp]: \"x = x\""
        );
        assert_eq!(th.step_texts(src, &th.blocks[0]), vec!["by simp"]);
        assert!(th
            .context_before(src, &th.blocks[1])
            .ends_with("by simp\n\n"));
    }

    #[test]
    fn unclosed_block_is_reported() {
        let src = "theory T imports Main begin\nlemma x: True\nproof\n  have y by simp\ndefinition f where \"f = 0\"\nend\n";
        let th = segment_theory(src, &KeywordTable::hol());
        assert_eq!(th.blocks.len(), 1);
        assert!(!th.blocks[0].closed);
        assert!(
            th.errors
                .iter()
                .any(|e| e.message.contains("unclosed proof")),
            "{:?}",
            th.errors
        );
    }
}

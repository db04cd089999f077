//! Coq syntax for ProD (pure: no process is ever spawned, no file is touched).
//!
//! # API (stable; other crates build on it)
//!
//! Sentences ([`lexer`]):
//! * [`sentences`]`(text) -> `[`Lexed`]` { sentences: Vec<`[`Sentence`]`>, errors: Vec<`[`LexError`]`> }` —
//!   never fails. `Sentence { range: Range<usize>, kind: `[`SentenceKind`]` }`: byte range in `text`
//!   starting at the first significant character (leading blanks/comments excluded) and ending just
//!   after the final `.`/`...`, bullet or brace; `sentence.text(input)` gives the slice. Kinds:
//!   `Command` (ends with `.`), `Bullet` (`-`, `+`, `*`, `--`, `***`, …), `BraceOpen` (`{`, `2: {`,
//!   `[x]: {`), `BraceClose` (`}`). `{|` is record syntax, not a brace. Comments nest, strings use
//!   `""` for a quote, `Nat.add_comm` / `x.(f)` / `..` never end a sentence, `auto...` does.
//!   Errors (`LexErrorKind::{UnclosedComment, UnclosedString, MissingFinalDot}`, byte `pos`) stop
//!   lexing; every complete sentence before them is returned. `err.message(text)` names line/column;
//!   [`line_col`] converts any offset.
//! * [`comments_stripped`]`(text) -> String`: each comment replaced by one space;
//!   [`comments_blanked`]`(text)`: each comment byte replaced by a space (newlines kept), so offsets
//!   are unchanged; [`comments`]`(text) -> Vec<Range<usize>>`: where the comments are. Careful:
//!   `x.(* c *)` is lexed by Coq as `.(` `*` …; removing a comment glued after a symbol can
//!   create a sentence end, so never send stripped text to Coq without re-lexing it.
//! * [`literals`]`(text) -> Vec<prod_core::Literal>`: the comments and strings as Coq lexes them
//!   (closed or not); what `CoqLanguage` gives the conditional-proof parser.
//! * [`identifiers`]`(text) -> Vec<Range<usize>>`: identifier tokens outside comments/strings.
//!   A qualified name `M.foo` is ONE token, so it is not a reference to `foo` (it may be another
//!   module's `foo`; ProD's lemmas are referred to unqualified). Scope keys (`%nat`), `_` and
//!   numbers are not identifiers. [`is_identifier`] tests one unqualified identifier.
//!
//! Classifying a sentence ([`head`]):
//! * [`first_word`]`(sentence) -> Option<&str>`: first identifier, or `#[`, or the first symbol; skips
//!   only blanks and comments.
//! * [`sentence_head`]`(sentence) -> `[`Head`]` { controls: Vec<Control{name, argument}>, attributes:
//!   Vec<&str> ("#[…]"), legacy_attributes: Vec<&str> (Local/Global/Program/Polymorphic/…), selector:
//!   Option<&str> ("2", "all", "[x]", "1-3, 5"), keyword: Option<&str>, body: &str }`. Controls are
//!   `Time`, `Timeout n`, `Redirect "f"`, `Fail`, `Succeed` (+`Instructions`, `Profile`), peeled in any
//!   order together with attributes so none can hide behind another.
//!
//! Statements and the core's language trait ([`statement`], [`language`]):
//! * [`parse_statement`]`(text) -> Result<`[`Statement`]`, `[`StatementError`]`>` for UNTRUSTED lemma
//!   statements: exactly one sentence `Keyword ident binders? : term.` with Keyword in
//!   [`THEOREM_KEYWORDS`] (Lemma Theorem Fact Remark Corollary Proposition Property Example); no
//!   control, attribute (`#[…]`, Local, Global, Program, …), goal selector, second sentence, `...`
//!   terminator or mutual `with`; comments allowed and dropped when a blank precedes them (a
//!   comment glued to the previous character is refused); the re-rendered sentence is re-lexed
//!   and must be exactly one command. `Statement { keyword, name,
//!   binders_and_type }` (text after the name, no final dot, comments dropped, blanks collapsed);
//!   `.to_sentence()` = `Keyword name binders_and_type.`, `.renamed(n)`.
//! * [`CoqLanguage`]: `prod_core::ProofLanguage`. `normalize_statement` drops keyword, name, final
//!   dot and comments, collapses blank runs outside strings and drops blanks between a letter/digit
//!   and a delimiter of [`GLUE_SAFE`] — nothing else (see [`language`]).
//!   `mentions`/`rename_references` use [`identifiers`] (exact unqualified token match);
//!   `remove_references` edits `rewrite`/`unfold` lists, `using`, `use:` and drops other sentences
//!   that mention the name; `render_admitted(s)` = `s\nAdmitted.`; `render_proved(s, p)` =
//!   `s\nProof.\np\nQed.`. [`normalize_layout`] is the layout part alone; [`collapse_layout`] keeps every blank boundary.
//!
//! See the crate's tests (`tests/data/lexer/*.v` beside `*.expected`) for the exact behaviour.

pub mod declarations;
pub mod head;
pub mod language;
pub mod layout;
pub mod lexer;
pub mod statement;

pub use declarations::admitted_constants;
pub use head::{first_word, sentence_head, Control, Head};
pub use language::{is_theorem_keyword, CoqLanguage};
pub use layout::{collapse_layout, normalize_layout, GLUE_SAFE};
pub use lexer::{
    ascii_words, code_mask, comments, comments_blanked, comments_stripped, glued_comment,
    identifiers, is_identifier, line_col, literals, long_dot_run, sentences, string_literals,
    term_quotation, LexError, LexErrorKind, Lexed, Sentence, SentenceKind, TERM_QUOTATIONS,
};
pub use statement::{
    is_locality_attribute, parse_statement, Statement, StatementError, THEOREM_KEYWORDS,
};

/// Flags every checking Coq process gets (the checker's workers, the final `coqc`) and every
/// compilation of a dataset's own copy of a project: the kernel never trusts the bytecode VM
/// (`vm_compute` still runs, but a VM cast is re-checked by the kernel's ordinary conversion,
/// since Coq 8.16.1's VM has a proof-of-False bug in `Uint63.addmuldiv`), and no native compiler
/// (Debian's 8.16 has none; saying so keeps a build that has one from loading compiled code).
pub const PROVER_FLAGS: &[&str] = &["-bytecode-compiler", "no", "-native-compiler", "no"];

/// Simple tactics that fail unless they solve the goal: a step that is exactly one of them
/// becomes `hammer.` in datasets, and the checker's `hammer.` tries each of them, so that a
/// replaced step is found again (paper Appendix A.3: replace what the hammer can find).
pub const HAMMER_CLOSING_TACTICS: &[&str] = &[
    "lia",
    "nia",
    "lra",
    "nra",
    "psatz",
    "omega",
    "easy",
    "congruence",
    "tauto",
    "firstorder",
    "ring",
    "discriminate",
    "contradiction",
    "now easy",
];

/// Simple tactics that may succeed without solving the goal (replaced only where they must
/// close it; the checker's `hammer.` tries them too).
pub const HAMMER_MAYBE_CLOSING_TACTICS: &[&str] =
    &["auto", "eauto", "trivial", "intuition", "field"];

/// CoqHammer's tactic names (the 1.3 `sauto` family, the older `y*`/`h*` ones, and `hammer`):
/// a step using one needs the Hammer plugin loaded (checker), and is replaced by `hammer.` in
/// datasets (paper Appendix A.3).
pub const COQHAMMER_TACTICS: &[&str] = &[
    "sauto",
    "hauto",
    "qauto",
    "lauto",
    "sfirstorder",
    "qfirstorder",
    "hfirstorder",
    "sintuition",
    "qintuition",
    "strivial",
    "qsimpl",
    "ssimpl",
    "scrush",
    "hcrush",
    "srun",
    "sdone",
    "seasy",
    "scongruence",
    "hecrush",
    "hfcrush",
    "hrauto",
    "hsimpl",
    "hyelles",
    "yelles",
    "ycrush",
    "yreconstr",
    "yauto",
    "hammer",
];

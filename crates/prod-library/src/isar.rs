//! Isabelle/Isar behind the [`LibrarySource`] trait: the AFP as a library, theories segmented by
//! `prod-isar` into [`Segments`], the paper's `sledgehammer` rule, and the AFP splits (the 36
//! holdout entries, the dependency sampler over entries, a date split).
//!
//! Decisions, each conservative (a wrong peel gives a context that no longer checks or a
//! proposed lemma stated in the wrong place):
//! * Theorem blocks are goal blocks whose statement is `lemma`, `theorem`, `corollary`,
//!   `proposition` or `schematic_goal`. Every other goal block (`instance`, `function`,
//!   `termination`, `interpretation`, `typedef`, undeclared goals, …) is content `c_j`.
//! * Skipped (no example, never peeled): `sorry`/`\<proof>` anywhere in the proof (`admitted`),
//!   `oops` (`aborted`), unclosed proofs (`unterminated`), `schematic_goal` (a `sorry`-admitted
//!   schematic statement proves anything), statements naming several facts
//!   (`lemma a: "A" and b: "B"`, `mutual`).
//! * Peelable: a named theorem whose attributes only transform the fact (`rule_format`,
//!   `case_names`, `OF`, …). `[simp]`, `[intro]`, `[code]`, … declare the fact to tools that
//!   later proofs use without naming it, so such a theorem is pinned.
//! * References from proof steps: `prod_isar::fact_references` (facts after `using`/`from`/…,
//!   method arguments, attributes), intersected with the names of earlier theorems of the file,
//!   the latest declaration of a name winning. A use counts only when the user is in the same
//!   `… begin … end` block and has the same locale target as the theorem; otherwise it pins.
//!   Any other mention of a theorem name in a step (identifier tokens the reference finder does
//!   not take for facts; names inside strings/cartouches with antiquotations) pins it.
//! * Content and statements pin every theorem they mention: identifier tokens, plus the words
//!   inside strings/cartouches of ML-like commands or with antiquotations (`@{thm foo}`);
//!   document text (`text ‹…›`, `section`) only through antiquotations. A theory-level `this`
//!   pins the theorem just before it.
//! * Statements drop a leading `private`/`qualified` (the checker's statements are one
//!   `lemma`-like command; the proposed lemma is only used inside the same block).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use prod_core::ProofLanguage;
use prod_isar::afp::{entries_after, Afp, KeywordResolver, HOLDOUT_ENTRIES};
use prod_isar::segment::Theory;
use prod_isar::{
    fact_references, lex, segment_theory, KeywordKind, KeywordTable, Token, TokenKind,
};

use crate::discovery::{DiscoveryError, Library, SourceFile};
use crate::schema::DatasetConfig;
use crate::segment::{ProofEnd, Segments, SkipReason, Step, Theorem};
use crate::source::{FileSegmenter, LibrarySource, SegmentedSource, SplitPlan};

/// Statement keywords that make a theorem block.
pub const THEOREM_KEYWORDS: &[&str] = &[
    "lemma",
    "theorem",
    "corollary",
    "proposition",
    "schematic_goal",
];

/// Attributes that only transform the stored fact (so a proposed `lemma … sorry` with the same
/// attributes stores the same fact) and declare it to no tool.
pub const HARMLESS_ATTRIBUTES: &[&str] = &[
    "rule_format",
    "consumes",
    "case_names",
    "case_conclusion",
    "params",
    "symmetric",
    "THEN",
    "OF",
    "of",
    "where",
    "unfolded",
    "folded",
    "simplified",
    "rotated",
    "elim_format",
    "no_vars",
    "abs_def",
    "atomize",
    "standard",
];

/// Words that start a context element or end a block header: never a context's name.
const CONTEXT_ELEMENTS: &[&str] = &[
    "begin",
    "fixes",
    "assumes",
    "includes",
    "notes",
    "defines",
    "constrains",
    "for",
];

/// The step that replaces hammer-findable steps (the checker's `prod_check_isabelle::HAMMER`).
pub const SLEDGEHAMMER: &str = "sledgehammer";

/// The paper's rule (Appendix A.4, `prod_isar::sledgehammer`), applied to terminal `by …` steps
/// only: the checker replays a `sledgehammer` step as a terminal `by` method, so `apply (metis …)`
/// (which may leave goals) and `qed (smt …)` (which also closes a block) stay as written.
pub fn replace_step(steps: &[Step], k: usize) -> Option<String> {
    let text = &steps.get(k)?.text;
    let (tokens, errors) = lex(text);
    if !errors.is_empty() {
        return None;
    }
    let first = tokens.iter().find(|t| !t.is_improper())?;
    if first.text(text) != "by" {
        return None;
    }
    let body = text.get(first.range.start..)?;
    prod_isar::sledgehammer::replaced_by_sledgehammer(body)
        .then(|| format!("{}{SLEDGEHAMMER}", &text[..first.range.start]))
}

/// Which AFP entries are held out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfpSplit {
    /// The paper's 36 holdout entries (Appendix A.3; no AFP entry depends on them).
    Holdout,
    /// The dependency sampler of the Coq path over entries (`--test-fraction`, `--seed`).
    Deps,
    /// Entries dated strictly after `YYYY-MM-DD` (metadata): an out-of-distribution set.
    After(String),
}

impl AfpSplit {
    /// `holdout`, `deps`, `after:2022-06-01`.
    pub fn parse(s: &str) -> Result<AfpSplit, String> {
        match s {
            "holdout" => Ok(AfpSplit::Holdout),
            "deps" => Ok(AfpSplit::Deps),
            _ => match s.strip_prefix("after:") {
                Some(d) if prod_isar::afp::is_iso_date(d) => Ok(AfpSplit::After(d.to_string())),
                _ => Err(format!(
                    "split {s:?}: expected holdout, deps or after:YYYY-MM-DD"
                )),
            },
        }
    }
}

/// Which entries are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntrySelection {
    All,
    /// The first N entries in dependency order (dependencies first).
    First(usize),
    /// These entries (names as in `thys/ROOTS`).
    Named(Vec<String>),
}

impl EntrySelection {
    /// `N` or `Entry1,Entry2,…`.
    pub fn parse(s: &str) -> EntrySelection {
        match s.trim().parse::<usize>() {
            Ok(n) => EntrySelection::First(n),
            Err(_) => EntrySelection::Named(
                s.split(',')
                    .map(|e| e.trim().to_string())
                    .filter(|e| !e.is_empty())
                    .collect(),
            ),
        }
    }
}

#[derive(Clone, Debug)]
pub struct AfpOptions {
    pub split: AfpSplit,
    pub entries: EntrySelection,
}

impl Default for AfpOptions {
    fn default() -> Self {
        AfpOptions {
            split: AfpSplit::Holdout,
            entries: EntrySelection::All,
        }
    }
}

/// The AFP as a [`LibrarySource`]: one unit per entry, the theory files its sessions check.
pub struct AfpSource {
    pub afp: Afp,
    pub library: Library,
    /// The AFP root (holding `thys/` and `metadata/`).
    pub root: PathBuf,
    pub options: AfpOptions,
    /// Selected entries, sorted (the units).
    pub entries: Vec<String>,
}

/// `DIR` or `DIR/thys`: the directory holding `ROOTS`.
fn thys_dir(path: &Path) -> Option<PathBuf> {
    if path.join("thys").join("ROOTS").is_file() || path.join("thys").is_dir() {
        Some(path.join("thys"))
    } else if path.join("ROOTS").is_file() {
        Some(path.to_path_buf())
    } else {
        None
    }
}

impl AfpSource {
    /// Read an unpacked AFP (`path` holds `thys/`, or is `thys/`).
    pub fn load(path: &Path, options: AfpOptions) -> Result<AfpSource, DiscoveryError> {
        let thys = thys_dir(path).ok_or_else(|| {
            DiscoveryError::Afp(format!(
                "{}: not an unpacked AFP (no thys/ROOTS)",
                path.display()
            ))
        })?;
        let root = thys
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| thys.clone());
        let afp = Afp::load(&thys).map_err(|e| DiscoveryError::Afp(e.message))?;
        let entries: Vec<String> = match &options.entries {
            EntrySelection::All => afp.entries.keys().cloned().collect(),
            EntrySelection::First(n) => {
                let mut v: Vec<String> = afp.topological_order().0.into_iter().take(*n).collect();
                v.sort();
                v
            }
            EntrySelection::Named(names) => {
                for n in names {
                    if !afp.entries.contains_key(n) {
                        return Err(DiscoveryError::Afp(format!(
                            "--entries: no AFP entry {n:?} in {}",
                            thys.display()
                        )));
                    }
                }
                let mut v = names.clone();
                v.sort();
                v.dedup();
                v
            }
        };
        let mut library = Library {
            name: "afp".into(),
            ..Default::default()
        };
        for e in &entries {
            let Some(entry) = afp.entries.get(e) else {
                continue;
            };
            for f in afp.session_theory_files(e) {
                let rel = f.strip_prefix(&entry.dir).unwrap_or(&f).with_extension("");
                let logical = format!("{e}/{}", rel.to_string_lossy());
                library.files.push(SourceFile {
                    path: f,
                    logical,
                    glob: None,
                    package: e.clone(),
                    flags: vec![],
                });
            }
        }
        let n = library.files.len();
        // The split works on the entry graph (sessions + imports), not on files.
        library.file_deps = vec![Vec::new(); n];
        library.dep_source = vec!["afp_entry_graph"; n];
        if !afp.errors.is_empty() {
            library.notes.push(format!(
                "{} problems reading the AFP (first: {})",
                afp.errors.len(),
                afp.errors[0].message
            ));
        }
        if n == 0 {
            return Err(DiscoveryError::Afp(format!(
                "{}: no theory files in the selected entries",
                path.display()
            )));
        }
        Ok(AfpSource {
            afp,
            library,
            root,
            options,
            entries,
        })
    }

    /// Entries that depend on `test` (transitively), among the selected ones, not in `test`.
    fn dependants(&self, test: &HashSet<&str>) -> Vec<String> {
        let selected: HashSet<&str> = self.entries.iter().map(String::as_str).collect();
        let mut out: HashSet<String> = HashSet::new();
        for t in test {
            for d in self.afp.dependents(t) {
                if selected.contains(d.as_str()) && !test.contains(d.as_str()) {
                    out.insert(d);
                }
            }
        }
        let mut v: Vec<String> = out.into_iter().collect();
        v.sort();
        v
    }

    /// `AfpSplit::Deps`: the dependency sampler over the selected entries.
    fn sampled_test_entries(
        &self,
        cfg: &DatasetConfig,
        sizes: &crate::split::UnitSizes,
        index: &HashMap<&str, usize>,
        unit_of: &[usize],
    ) -> Vec<String> {
        let deps: Vec<Vec<usize>> = self
            .entries
            .iter()
            .map(|e| {
                self.afp
                    .deps
                    .get(e)
                    .into_iter()
                    .flatten()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .collect()
            })
            .collect();
        let sizes = crate::source::unit_sizes(sizes, unit_of, self.entries.len());
        crate::split::test_units_sized(
            &deps,
            cfg.test_fraction,
            cfg.seed,
            &[],
            &sizes,
            &cfg.test_target(),
        )
        .into_iter()
        .map(|u| self.entries[u].clone())
        .collect()
    }

    /// `AfpSplit::After(date)`: the entries dated after `date` (metadata); unreadable dates
    /// and metadata errors are noted.
    fn dated_test_entries(&self, date: &str, notes: &mut Vec<String>) -> Vec<String> {
        let metadata = self.root.join("metadata").join("entries");
        match entries_after(&metadata, &self.entries, date) {
            Ok((after, errs)) => {
                if !errs.is_empty() {
                    notes.push(format!(
                        "{} entries without a readable date are never test entries (first: {})",
                        errs.len(),
                        errs[0].message
                    ));
                }
                after
            }
            Err(e) => {
                notes.push(e.message);
                vec![]
            }
        }
    }
}

/// `AfpSplit::Holdout`: the paper's holdout entries in this build (missing ones noted).
fn holdout_entries(index: &HashMap<&str, usize>, notes: &mut Vec<String>) -> Vec<String> {
    let missing: Vec<&str> = HOLDOUT_ENTRIES
        .iter()
        .copied()
        .filter(|e| !index.contains_key(e))
        .collect();
    if !missing.is_empty() && missing.len() < HOLDOUT_ENTRIES.len() {
        notes.push(format!(
            "{} of the 36 holdout entries are not in this build",
            missing.len()
        ));
    }
    HOLDOUT_ENTRIES
        .iter()
        .filter(|e| index.contains_key(*e))
        .map(|e| e.to_string())
        .collect()
}

struct AfpSegmenter<'a> {
    source: &'a AfpSource,
    resolver: KeywordResolver<'a>,
}

impl FileSegmenter for AfpSegmenter<'_> {
    fn segment(&mut self, file: usize, text: &str) -> SegmentedSource {
        let table = match self.source.library.files.get(file) {
            Some(f) => self.resolver.table_for(&f.path, text),
            None => KeywordTable::hol(),
        };
        segment_isar(text, &table)
    }
}

impl LibrarySource for AfpSource {
    fn prover(&self) -> &'static str {
        "isabelle"
    }
    fn library(&self) -> &Library {
        &self.library
    }
    fn segmenter(&self) -> Box<dyn FileSegmenter + '_> {
        Box::new(AfpSegmenter {
            source: self,
            resolver: KeywordResolver::new(&self.afp, KeywordTable::hol()),
        })
    }
    fn rewrite_step(&self, steps: &[Step], k: usize) -> Option<String> {
        replace_step(steps, k)
    }
    fn language(&self) -> Option<&dyn ProofLanguage> {
        Some(&prod_isar::IsarLanguage)
    }
    fn proof_language(&self) -> &dyn ProofLanguage {
        &prod_isar::IsarLanguage
    }
    fn split_plan(&self, cfg: &DatasetConfig, sizes: &crate::split::UnitSizes) -> SplitPlan {
        let index: HashMap<&str, usize> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.as_str(), i))
            .collect();
        let unit_of: Vec<usize> = self
            .library
            .files
            .iter()
            .map(|f| index.get(f.package.as_str()).copied().unwrap_or(0))
            .collect();
        let mut notes = Vec::new();
        let test_names: Vec<String> = match &self.options.split {
            AfpSplit::Holdout => holdout_entries(&index, &mut notes),
            AfpSplit::Deps => self.sampled_test_entries(cfg, sizes, &index, &unit_of),
            AfpSplit::After(date) => self.dated_test_entries(date, &mut notes),
        };
        let test_set: HashSet<&str> = test_names.iter().map(String::as_str).collect();
        let excluded_names = self.dependants(&test_set);
        if !excluded_names.is_empty() {
            notes.push(format!(
                "{} entries depend on test entries and are left out of every split",
                excluded_names.len()
            ));
        }
        let mut test: Vec<usize> = test_names
            .iter()
            .filter_map(|e| index.get(e.as_str()).copied())
            .collect();
        test.sort_unstable();
        let mut excluded: Vec<usize> = excluded_names
            .iter()
            .filter_map(|e| index.get(e.as_str()).copied())
            .collect();
        excluded.sort_unstable();
        SplitPlan {
            unit_kind: "entry".into(),
            unit_names: self.entries.clone(),
            unit_of,
            test,
            excluded,
            notes,
        }
    }
}

/// Byte offsets of line starts, for 1-based line numbers.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

fn line_of(starts: &[usize], offset: usize) -> usize {
    starts.partition_point(|&s| s <= offset)
}

/// Commands whose strings/cartouches are ML or tactic text, where facts are named by strings.
fn is_ml_like(name: &str) -> bool {
    name.starts_with("ML")
        || name.starts_with("SML")
        || name.ends_with("setup")
        || name.contains("declaration")
        || name == "oracle"
}

/// Word runs of `s` that could be fact names (`foo`, `foo.bar`, `foo'`).
fn words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\'' || c == '.'))
        .filter(|w| !w.is_empty())
}

/// The theorems a word may name: the whole word, and for a long name its first and last parts
/// (`thm.simps`, `loc.thm`), which over-approximates (only used to pin).
fn lookup_all<'m>(
    word: &str,
    by_name: &'m HashMap<String, usize>,
) -> impl Iterator<Item = usize> + 'm {
    let word = word.trim_matches('.');
    let mut v: Vec<usize> = Vec::new();
    if let Some(&i) = by_name.get(word) {
        v.push(i);
    }
    if word.contains('.') {
        for part in [word.split('.').next(), word.rsplit('.').next()]
            .into_iter()
            .flatten()
        {
            if let Some(&i) = by_name.get(part) {
                v.push(i);
            }
        }
    }
    v.into_iter()
}

/// The attributes of a statement's binding `name[a, b c]:` (their names), and the extra fact
/// names a statement binds (`lemma a: "A" and b: "B"`, `shows a: … and b: …`).
fn statement_shape(
    text: &str,
    toks: &[&Token],
    name_at: Option<usize>,
) -> (Vec<String>, Vec<String>) {
    let attrs = name_at
        .map(|n| binding_attributes(text, toks, n + 1))
        .unwrap_or_default();
    (attrs, extra_fact_names(text, toks))
}

/// The attribute names of the bracket `[a, b c]` at token `j` (none when no `[` is there).
fn binding_attributes(text: &str, toks: &[&Token], mut j: usize) -> Vec<String> {
    let mut attrs = Vec::new();
    if toks.get(j).is_none_or(|t| t.text(text) != "[") {
        return attrs;
    }
    let mut depth = 0usize;
    let mut expect = true;
    while let Some(t) = toks.get(j) {
        match t.text(text) {
            "[" => {
                depth += 1;
                expect = depth == 1;
            }
            "]" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => expect = true,
            w if expect && depth == 1 => {
                attrs.push(w.to_string());
                expect = false;
            }
            _ => {}
        }
        j += 1;
    }
    attrs
}

/// Extra names: `and NAME:` / `and NAME[…]:` while in the conclusion part.
fn extra_fact_names(text: &str, toks: &[&Token]) -> Vec<String> {
    let mut extra = Vec::new();
    let mut in_shows = true;
    let mut depth = 0usize;
    for (i, t) in toks.iter().enumerate() {
        let w = t.text(text);
        match w {
            "[" | "(" => depth += 1,
            "]" | ")" => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > 0 || t.kind != TokenKind::Ident {
            continue;
        }
        match w {
            "shows" => in_shows = true,
            "fixes" | "assumes" | "obtains" | "defines" | "includes" | "notes" | "constrains"
            | "for" | "if" | "when" => in_shows = false,
            "and" if in_shows => {
                if let Some(n) = toks.get(i + 1).filter(|n| n.kind == TokenKind::Ident) {
                    let k = after_brackets(text, toks, i + 2);
                    if toks.get(k).is_some_and(|t| t.text(text) == ":") {
                        extra.push(n.text(text).to_string());
                    }
                }
            }
            _ => {}
        }
    }
    extra
}

/// The token after the bracket `[…]` at token `k` (nested brackets included); `k` when no `[`
/// is there.
fn after_brackets(text: &str, toks: &[&Token], mut k: usize) -> usize {
    if toks.get(k).is_none_or(|t| t.text(text) != "[") {
        return k;
    }
    let mut d = 0usize;
    while let Some(t) = toks.get(k) {
        match t.text(text) {
            "[" => d += 1,
            "]" => {
                d = d.saturating_sub(1);
                if d == 0 {
                    k += 1;
                    break;
                }
            }
            _ => {}
        }
        k += 1;
    }
    k
}

/// Where the statement's name token is among its proper tokens (after the keyword and an
/// optional `(in loc)` target), if the statement is named.
fn name_position(text: &str, toks: &[&Token]) -> Option<usize> {
    let mut k = 0;
    while toks
        .get(k)
        .is_some_and(|t| matches!(t.text(text), "private" | "qualified"))
    {
        k += 1;
    }
    let mut i = k + 1;
    if toks.get(i).is_some_and(|t| t.text(text) == "(")
        && toks.get(i + 1).is_some_and(|t| t.text(text) == "in")
        && toks.get(i + 3).is_some_and(|t| t.text(text) == ")")
    {
        i += 4;
    }
    let t = toks.get(i)?;
    (t.kind == TokenKind::Ident).then_some(i)
}

struct Scan<'a> {
    text: &'a str,
    th: &'a Theory,
}

impl Scan<'_> {
    /// Theorems mentioned by span `si` (see the module documentation for what counts).
    fn mentions(&self, si: usize, by_name: &HashMap<String, usize>, idents: bool) -> Vec<usize> {
        let Some(span) = self.th.spans.get(si) else {
            return vec![];
        };
        let name = span.name.as_deref().unwrap_or("");
        let document = span.kind.is_some_and(|k| {
            matches!(
                k,
                KeywordKind::DocumentHeading | KeywordKind::DocumentBody | KeywordKind::DocumentRaw
            )
        });
        let ml = is_ml_like(name);
        let mut out = Vec::new();
        for t in self.th.tokens.get(span.tokens.clone()).unwrap_or(&[]) {
            let s = t.text(self.text);
            match t.kind {
                TokenKind::Ident if idents && !document => out.extend(lookup_all(s, by_name)),
                TokenKind::String
                | TokenKind::AltString
                | TokenKind::Cartouche
                | TokenKind::Verbatim
                    if ml || s.contains("@{") || s.contains("\\<^") =>
                {
                    for w in words(s) {
                        out.extend(lookup_all(w, by_name));
                    }
                }
                _ => {}
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Where the text of span `si` ends without its trailing spaces and comments.
fn trimmed_end(th: &Theory, text: &str, si: usize) -> usize {
    th.spans
        .get(si)
        .map(|s| s.range.start + s.text_trimmed(text, &th.tokens).len())
        .unwrap_or(text.len())
}

/// Per-theorem bookkeeping beyond [`Theorem`].
struct Decl {
    /// Ids of the enclosing `… begin` blocks and the locale target: uses must match exactly.
    scope_key: (Vec<usize>, Option<String>),
}

/// An unpacked AFP directory for `path`: the path itself, or, for a `.tar.xz`/`.tar.gz`/`.tar`
/// release tarball, its unpacked copy under the temporary directory (unpacked once by `tar`,
/// reused while its `thys/ROOTS` is there).
pub fn unpacked_afp(path: &Path) -> Result<PathBuf, String> {
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let Some(stem) = [".tar.xz", ".tar.gz", ".tgz", ".tar"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
    else {
        return Err(format!(
            "{}: neither a directory nor an AFP tarball (.tar.xz)",
            path.display()
        ));
    };
    if !path.is_file() {
        return Err(format!("{}: no such file", path.display()));
    }
    let dest = std::env::temp_dir().join(format!("prod-{stem}"));
    let ready =
        |d: &Path| d.join(stem).join("thys/ROOTS").is_file() || d.join("thys/ROOTS").is_file();
    if !ready(&dest) {
        // Unpack into a fresh directory and rename it into place: a half-unpacked tree is never reused.
        let tmp = std::env::temp_dir().join(format!("prod-{stem}.partial-{}", std::process::id()));
        let io = |e: std::io::Error| format!("{}: {e}", tmp.display());
        std::fs::create_dir_all(&tmp).map_err(io)?;
        eprintln!(
            "unpacking {} into {} (once)",
            path.display(),
            dest.display()
        );
        let status = std::process::Command::new("tar")
            .arg("-xf")
            .arg(path)
            .arg("-C")
            .arg(&tmp)
            .status()
            .map_err(|e| format!("cannot run tar: {e}"))?;
        if !status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(format!("tar -xf {} failed ({status})", path.display()));
        }
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&tmp, &dest).map_err(io)?;
    }
    // The release tarball holds one top directory (`afp-2022-12-06/`).
    Ok(if dest.join(stem).is_dir() {
        dest.join(stem)
    } else {
        dest
    })
}

/// Segment one theory into [`Segments`] (the Isabelle [`crate::source::FileSegmenter`] core).
/// `table`: the keyword table for this theory (`KeywordResolver::table_for`). Never panics.
pub fn segment_isar(text: &str, table: &KeywordTable) -> SegmentedSource {
    let th = segment_theory(text, table);
    let mut seg = IsarSegmenter::new(text, &th);
    for si in 0..th.spans.len() {
        match seg.in_block[si] {
            Some(bi) => seg.block_span(si, bi),
            None => seg.theory_span(si),
        }
    }
    seg.finish()
}

/// The segmenter's state across the spans of one theory; one method per kind of span.
struct IsarSegmenter<'a> {
    text: &'a str,
    th: &'a Theory,
    scan: Scan<'a>,
    starts: Vec<usize>,
    /// The goal block each span belongs to.
    in_block: Vec<Option<usize>>,
    theorems: Vec<Theorem>,
    decls: Vec<Decl>,
    /// The most recent declaration of each name.
    by_name: HashMap<String, usize>,
    /// Open `… begin` blocks: (id, name).
    scopes: Vec<(usize, String)>,
    next_scope: usize,
    /// The theorem block being read: (block index, theorem index, end of the previous piece).
    current: Option<(usize, usize, usize)>,
    /// The further fact names of a theorem stating several (`lemma a: … and b: …`).
    extra_names: Vec<(usize, Vec<String>)>,
    last_theorem: Option<usize>,
    content_sentences: usize,
}

impl<'a> IsarSegmenter<'a> {
    fn new(text: &'a str, th: &'a Theory) -> Self {
        let mut in_block: Vec<Option<usize>> = vec![None; th.spans.len()];
        for (bi, b) in th.blocks.iter().enumerate() {
            for si in b.spans.clone() {
                if let Some(x) = in_block.get_mut(si) {
                    *x = Some(bi);
                }
            }
        }
        IsarSegmenter {
            text,
            th,
            scan: Scan { text, th },
            starts: line_starts(text),
            in_block,
            theorems: Vec::new(),
            decls: Vec::new(),
            by_name: HashMap::new(),
            scopes: Vec::new(),
            next_scope: 0,
            current: None,
            extra_names: Vec::new(),
            last_theorem: None,
            content_sentences: 0,
        }
    }

    /// Pin every theorem span `si` mentions.
    fn pin_mentions(&mut self, si: usize) {
        for j in self.scan.mentions(si, &self.by_name, true) {
            self.theorems[j].pinned = true;
        }
    }

    /// Span `si` of goal block `bi`: its statement, a step of the theorem being read, or a
    /// step of a content block; the block's last span ends it.
    fn block_span(&mut self, si: usize, bi: usize) {
        let b = &self.th.blocks[bi];
        if si == b.statement {
            let kw = self.th.spans[si].name.as_deref().unwrap_or("");
            if THEOREM_KEYWORDS.contains(&kw) && b.declared_goal {
                self.theorem_statement(si, bi, kw);
            } else {
                self.content_sentences += 1;
                self.pin_mentions(si);
                self.current = None;
            }
        } else if let Some((_, ti, prev_end)) = self.current.filter(|c| c.0 == bi) {
            self.theorem_step(si, bi, ti, prev_end);
        } else {
            // A proof step of a content block (instance, termination, …).
            self.pin_mentions(si);
        }
        if si + 1 == b.spans.end {
            self.end_block(bi);
        }
    }

    /// The statement of a theorem block: the theorem it opens.
    fn theorem_statement(&mut self, si: usize, bi: usize, kw: &str) {
        let (th, text) = (self.th, self.text);
        let (span, b) = (&th.spans[si], &th.blocks[bi]);
        let stmt_end = trimmed_end(th, text, si);
        let full = text.get(span.range.start..stmt_end).unwrap_or("");
        let (stoks, _) = lex(full);
        let proper: Vec<&Token> = stoks.iter().filter(|t| !t.is_improper()).collect();
        let name_at = name_position(full, &proper).filter(|_| b.name.is_some());
        let (attrs, extra) = statement_shape(full, &proper, name_at);
        let skip = theorem_skip(th, bi, kw, !extra.is_empty());
        let end = match skip {
            Some(SkipReason::Aborted) => ProofEnd::Abort,
            Some(SkipReason::Admitted) => ProofEnd::Admitted,
            _ => ProofEnd::Qed,
        };
        let harmless = attrs
            .iter()
            .all(|a| HARMLESS_ATTRIBUTES.contains(&a.as_str()));
        // `context fixes x begin` is unnamed (prod-isar reports the element word as its name).
        let target = b
            .target
            .clone()
            .filter(|t| !CONTEXT_ELEMENTS.contains(&t.as_str()));
        let idx = self.theorems.len();
        // What the statement mentions always stays (in the context or an <invoke>).
        self.pin_mentions(si);
        self.theorems.push(Theorem {
            name: b.name.clone(),
            statement: without_visibility(full).to_string(),
            header: None,
            steps: Vec::new(),
            end_text: String::new(),
            end,
            start: span.range.start,
            end_byte: stmt_end,
            line: line_of(&self.starts, span.keyword.start),
            peelable: b.name.is_some() && skip.is_none() && harmless,
            pinned: false,
            skip,
            scope: self.scopes.iter().map(|s| s.1.clone()).collect(),
            module_path: target.iter().cloned().collect(),
        });
        self.decls.push(Decl {
            scope_key: (self.scopes.iter().map(|s| s.0).collect(), target),
        });
        if !extra.is_empty() {
            self.extra_names.push((idx, extra));
        }
        self.current = Some((bi, idx, stmt_end));
    }

    /// Span `si`, a proof step of theorem `ti` (block `bi`), whose text starts at `prev_end`.
    fn theorem_step(&mut self, si: usize, bi: usize, ti: usize, prev_end: usize) {
        let end = trimmed_end(self.th, self.text, si);
        let step_text = self.text.get(prev_end..end).unwrap_or("").to_string();
        let mut uses = Vec::new();
        let mentioned = self.scan.mentions(si, &self.by_name, true);
        if !mentioned.is_empty() {
            let facts = fact_references(&step_text);
            for f in &facts {
                if let Some(&j) = self.by_name.get(f.as_str()) {
                    if self.decls[j].scope_key == self.decls[ti].scope_key {
                        if !uses.contains(&j) {
                            uses.push(j);
                        }
                    } else {
                        self.theorems[j].pinned = true;
                    }
                }
            }
            for j in mentioned {
                if !uses.contains(&j) {
                    self.theorems[j].pinned = true;
                }
            }
        }
        let t = &mut self.theorems[ti];
        t.steps.push(Step {
            text: step_text,
            uses,
        });
        t.end_byte = end;
        self.current = Some((bi, ti, end));
    }

    /// The last span of block `bi`: a theorem read in it becomes visible by its names.
    fn end_block(&mut self, bi: usize) {
        if let Some((_, ti, _)) = self.current.filter(|c| c.0 == bi) {
            let t = &self.theorems[ti];
            if t.skip != Some(SkipReason::Aborted) {
                if let Some(n) = t.name.clone() {
                    self.by_name.insert(n, ti);
                }
                if let Some((_, names)) = self.extra_names.iter().find(|(i, _)| *i == ti) {
                    for n in names {
                        self.by_name.insert(n.clone(), ti);
                    }
                }
            }
            self.last_theorem = Some(ti);
        }
        self.current = None;
    }

    /// Span `si` outside every goal block: content; `this` pins the last theorem; a block
    /// header ending in `begin` opens a scope and `end` closes one.
    fn theory_span(&mut self, si: usize) {
        let (th, text) = (self.th, self.text);
        let span = &th.spans[si];
        let Some(kind) = span.kind else { return };
        if kind == KeywordKind::ThyBegin {
            return;
        }
        self.content_sentences += 1;
        self.pin_mentions(si);
        let toks = th.tokens.get(span.tokens.clone()).unwrap_or(&[]);
        let proper: Vec<&Token> = toks
            .iter()
            .filter(|t| !t.is_improper() && t.range.start >= span.keyword.end)
            .collect();
        let is_ident = |t: &Token, w: &str| t.kind == TokenKind::Ident && t.text(text) == w;
        if proper.iter().any(|t| is_ident(t, "this")) {
            if let Some(j) = self.last_theorem {
                self.theorems[j].pinned = true;
            }
        }
        let name = span.name.as_deref().unwrap_or("");
        if kind == KeywordKind::ThyDeclBlock && proper.last().is_some_and(|t| is_ident(t, "begin"))
        {
            self.next_scope += 1;
            let label = match (name, proper.first()) {
                ("context" | "locale" | "class", Some(t))
                    if !CONTEXT_ELEMENTS.contains(&t.text(text))
                        && matches!(t.kind, TokenKind::Ident | TokenKind::String) =>
                {
                    prod_isar::header::name_text(t, text)
                }
                _ => name.to_string(),
            };
            self.scopes.push((self.next_scope, label));
        } else if kind == KeywordKind::ThyEnd {
            self.scopes.pop();
        }
    }

    /// The theory's segments, imports and issues.
    fn finish(self) -> SegmentedSource {
        let th = self.th;
        let (imports, body_start) = match &th.header {
            Some(h) => (
                h.imports
                    .iter()
                    .map(|i| (h.range.start, i.clone()))
                    .collect(),
                h.range.end,
            ),
            None => (vec![], 0),
        };
        let issues = th
            .errors
            .iter()
            .filter(|e| !e.message.contains("unclosed proof"))
            .map(|e| {
                (
                    line_of(&self.starts, e.offset),
                    format!("segment_error: {}", e.message),
                )
            })
            .collect();
        SegmentedSource {
            segments: Segments {
                source: self.text.to_string(),
                theorems: self.theorems,
                other_skipped: vec![],
                content_sentences: self.content_sentences,
            },
            imports,
            issues,
            prover_references: false,
            goal_blocks: th.blocks.len(),
            unclosed_blocks: th.blocks.iter().filter(|b| !b.closed).count(),
            body_start,
        }
    }
}

/// A statement without its leading `private`/`qualified`.
fn without_visibility(full: &str) -> &str {
    let mut statement = full;
    while let Some(rest) = ["private", "qualified"].iter().find_map(|p| {
        statement
            .strip_prefix(p)
            .filter(|r| r.starts_with(char::is_whitespace))
    }) {
        statement = rest.trim_start();
    }
    statement
}

/// Why theorem block `bi` (statement keyword `kw`) gives no example, if it does not.
fn theorem_skip(th: &Theory, bi: usize, kw: &str, mutual: bool) -> Option<SkipReason> {
    let b = &th.blocks[bi];
    let cheats = th.has_cheats(b);
    let oops = b
        .proof_steps()
        .any(|i| th.spans.get(i).and_then(|s| s.name.as_deref()) == Some("oops"));
    if !b.closed {
        Some(SkipReason::Unterminated)
    } else if oops {
        Some(SkipReason::Aborted)
    } else if cheats {
        Some(SkipReason::Admitted)
    } else if kw == "schematic_goal" {
        Some(SkipReason::Schematic)
    } else if mutual {
        Some(SkipReason::Mutual)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(texts: &[&str]) -> Vec<Step> {
        texts
            .iter()
            .map(|t| Step {
                text: t.to_string(),
                uses: vec![],
            })
            .collect()
    }

    #[test]
    fn sledgehammer_rule_on_terminal_by_steps() {
        let s = steps(&[
            "\n  by (metis foo)",
            " apply (smt bar)",
            "\n  (* c *) by  simp",
            " by (simp add: x)",
            " qed (metis)",
            " by auto simp",
        ]);
        let r: Vec<_> = (0..s.len()).map(|k| replace_step(&s, k)).collect();
        assert_eq!(r[0].as_deref(), Some("\n  sledgehammer"));
        assert_eq!(r[1], None, "apply may leave goals");
        assert_eq!(r[2].as_deref(), Some("\n  (* c *) sledgehammer"));
        assert_eq!(r[3], None);
        assert_eq!(r[4], None, "qed also closes the block");
        assert_eq!(r[5], None);
    }

    proptest::proptest! {
        /// Any text: no panic, blocks ordered and on char boundaries, examples well-formed.
        #[test]
        fn never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
            "theory T imports Main begin", "lemma a: \"x = x\"", "lemma b[simp]: \"y\"", "theorem c: assumes \"P\" shows \"Q\"",
            "by simp", "by (metis a)", "using a", "apply (rule b)", "done", "proof -", "have \"P\"", "show ?thesis", "qed", "next",
            "{", "}", ".", "..", "sorry", "oops", "context begin", "locale l = fixes x begin", "end", "private", "lemmas d = a",
            "text \\<open>@{thm a}\\<close>", "ML \\<open>@{thm b}\\<close>", "(* c *)", "(* open", "\"str", "\\<open>", "schematic_goal s: \"?x\"",
            "lemma m: \"A\" and n: \"B\"", "fun f where \"f 0 = 0\"", "é", "<invoke>", " ", "\n",
        ]), 0..40)) {
            let src = parts.join(" ");
            let f = segment_isar(&src, &KeywordTable::hol());
            crate::examples::check_segmented(
                &src,
                &f.segments,
                &replace_step,
                &prod_isar::IsarLanguage,
            )?;
        }
    }

    #[test]
    fn split_and_selection_parse() {
        assert_eq!(AfpSplit::parse("holdout"), Ok(AfpSplit::Holdout));
        assert_eq!(
            AfpSplit::parse("after:2022-06-01"),
            Ok(AfpSplit::After("2022-06-01".into()))
        );
        assert!(AfpSplit::parse("after:June").is_err());
        assert_eq!(EntrySelection::parse("3"), EntrySelection::First(3));
        assert_eq!(
            EntrySelection::parse("A, B"),
            EntrySelection::Named(vec!["A".into(), "B".into()])
        );
    }
}

//! The temporary theory of one check, and how Isabelle's message positions map back to it.
//!
//! ```text
//! theory PRODCHK_Check_<nonce> imports <the context theory, or the node's imports> begin
//! oracle PRODCHK_admitted_<nonce> = ‹fn ct => ct›                  (checker)
//! method_setup PRODCHK_admit_<nonce> = ‹… resolve with that oracle …› (checker)
//! <context, when it leaves a block open and cannot live in its own theory>
//! ML ‹val PRODCHK_axioms_<nonce> = <the names of Theory.axioms_of \<^theory>>›  (checker)
//! lemma a1: "…" <its proof>                                         (final check: assembled lemmas)
//! lemma l1: "…" by PRODCHK_admit_<nonce>                            (proposed lemmas)
//! lemma PRODCHK_goal_<nonce>: "…"                                   (the statement, renamed)
//! <proof steps>
//! ML ‹()›                                                           (checker: goal closed?)
//! ML ‹… Thm_Deps.all_oracles … writeln "PRODCHK_audit_<nonce> …"›   (checker: the audit)
//! end
//! ```
//!
//! Why this shape (soundness):
//! * Proposed lemmas are admitted through an oracle of the checker's own, named with a fresh
//!   nonce, instead of `sorry`: the goal's theorem may then depend on that oracle and on
//!   nothing else, and Isabelle's own derivation record (`Thm_Deps.all_oracles`, which follows
//!   the whole dependency closure) says so. A `sorry` that slipped past the rules shows up there
//!   as `Pure.skip_proof`.
//! * The statement is renamed to `PRODCHK_goal_<nonce>`: no untrusted command can store a fact
//!   under that name (it does not know the nonce), so the audited theorem is the statement's.
//! * The axioms of the theory are listed before the lemmas and again in the audit: a proof may
//!   add none (an axiom is not an oracle, so the oracle audit alone would not see one).
//! * The verdict is read from messages whose position lies inside the checker's own commands,
//!   and which carry the nonce: PIDE attributes every message to the command that printed it,
//!   so untrusted commands cannot forge them.
//! * A final check (the cold re-check of an assembled proof) has no proposed lemmas: the lemmas
//!   below the root come with their proofs, after the axiom snapshot, so the audit of the goal
//!   follows its dependencies into them (a `sorry` there is `Pure.skip_proof` in the goal's
//!   oracles) and an axiom they add is seen.
//! * `ML ‹()›` is a theory-level command: it fails exactly when Isabelle still considers the goal
//!   open after the proof text (the rules check the structure too, but Isabelle decides).

use std::ops::Range;

/// Where a byte of the generated theory came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Region {
    /// `theory … imports … begin` (trusted imports).
    Header,
    /// The checker's oracle, method and axiom snapshot.
    Prelude,
    /// The node's context (trusted).
    Context,
    /// Assembled lemma `i` (0-based) of a final check, with its proof.
    Proved(usize),
    /// Proposed lemma `i` (0-based): its statement.
    Lemma(usize),
    /// The checker's `by PRODCHK_admit_…` after proposed lemma `i`.
    Admit(usize),
    /// The node's statement.
    Statement,
    /// Proof step `k` (1-based).
    Step(usize),
    /// The checker's theory-level `ML ‹()›`.
    CloseCheck,
    /// The checker's audit.
    Audit,
    /// `end`s written by the checker.
    End,
}

/// A generated theory: its text and the origin of every byte range.
#[derive(Clone, Debug)]
pub struct Theory {
    pub name: String,
    pub text: String,
    pub regions: Vec<(Range<usize>, Region)>,
    /// Start byte of every Isabelle symbol (for 1-based symbol offsets).
    symbol_starts: Vec<usize>,
}

/// What goes into one check's theory.
pub struct TheorySpec<'a> {
    pub nonce: &'a str,
    /// Names to put after `imports` (already validated).
    pub imports: &'a str,
    /// Context text written into this theory (empty when it lives in its own theory).
    pub inline_context: &'a str,
    /// Blocks (`context … begin`) the inline context leaves open: closed before `end`.
    pub open_blocks: usize,
    /// Final check: the assembled lemmas below the root, each with its proof, in order.
    pub proved: &'a [String],
    pub lemmas: &'a [String],
    /// The statement, already renamed to [`goal_name`].
    pub statement: &'a str,
    /// The proof steps, in order (their texts as they are to be run).
    pub steps: &'a [String],
    /// Oracles the audit accepts besides the admitted lemmas (full names).
    pub allowed_oracles: &'a [String],
}

pub fn theory_name(nonce: &str) -> String {
    format!("PRODCHK_Check_{nonce}")
}

pub fn goal_name(nonce: &str) -> String {
    format!("PRODCHK_goal_{nonce}")
}

pub fn audit_tag(nonce: &str) -> String {
    format!("PRODCHK_audit_{nonce}")
}

/// Is `s` safe to put into an ML string literal and an Isabelle long name?
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '\''))
}

impl Theory {
    /// The theory of one check, laid out as the module documentation shows.
    pub fn build(spec: &TheorySpec<'_>) -> Theory {
        let n = spec.nonce;
        let mut b = Builder::default();
        b.push(
            Region::Header,
            &format!(
                "theory {}\n  imports {}\nbegin\n\n",
                theory_name(n),
                spec.imports
            ),
        );
        b.push(Region::Prelude, &admit_prelude(n));
        if !spec.inline_context.trim().is_empty() {
            b.push(Region::Context, spec.inline_context);
            b.push(Region::Context, "\n\n");
        }
        b.push(Region::Prelude, &axiom_snapshot(n));
        b.push_lemmas(spec);
        b.push_goal(spec);
        b.push(Region::CloseCheck, "\nML \\<open>()\\<close>\n\n");
        b.push(Region::Audit, &audit(n, spec.allowed_oracles));
        for _ in 0..spec.open_blocks {
            b.push(Region::End, "end\n");
        }
        b.push(Region::End, "end\n");
        let symbol_starts = symbol_starts(&b.text);
        Theory {
            name: theory_name(n),
            text: b.text,
            regions: b.regions,
            symbol_starts,
        }
    }

    /// The region holding byte `i`.
    pub fn region_at(&self, i: usize) -> Option<&Region> {
        self.regions
            .iter()
            .find(|(r, _)| r.contains(&i))
            .map(|(_, g)| g)
    }

    /// Byte position of Isabelle's 1-based symbol offset `offset`.
    pub fn byte_of_offset(&self, offset: usize) -> Option<usize> {
        offset
            .checked_sub(1)
            .and_then(|o| self.symbol_starts.get(o).copied())
    }

    /// Byte position of the first non-blank character of 1-based line `line`.
    pub fn byte_of_line(&self, line: usize) -> Option<usize> {
        let start = if line == 1 {
            0
        } else {
            self.text
                .match_indices('\n')
                .nth(line.checked_sub(2)?)
                .map(|(i, _)| i + 1)?
        };
        let rest = &self.text[start..];
        let first = rest.find(|c: char| !matches!(c, ' ' | '\t')).unwrap_or(0);
        Some(start + first)
    }

    /// The region a message position points into: by symbol offset if there is one, else by line.
    pub fn region_of(&self, line: Option<usize>, offset: Option<usize>) -> Option<&Region> {
        if let Some(b) = offset.and_then(|o| self.byte_of_offset(o)) {
            return self.region_at(b);
        }
        line.and_then(|l| self.byte_of_line(l))
            .and_then(|b| self.region_at(b))
    }

    /// The byte range of a region's first occurrence (tests and the fake server use it).
    pub fn range_of(&self, region: &Region) -> Option<Range<usize>> {
        let mut it = self.regions.iter().filter(|(_, g)| g == region);
        let (first, _) = it.next()?;
        let end = self
            .regions
            .iter()
            .filter(|(_, g)| g == region)
            .map(|(r, _)| r.end)
            .max()
            .unwrap_or(first.end);
        Some(first.start..end)
    }

    /// Isabelle's 1-based symbol offset of byte `i` (the inverse of [`Theory::byte_of_offset`]).
    pub fn offset_of_byte(&self, i: usize) -> usize {
        self.symbol_starts.partition_point(|&s| s < i) + 1
    }
}

/// The checker's oracle `PRODCHK_admitted_<nonce>` and the method that admits a proposed lemma
/// through it, so that the audit sees every admitted lemma as that oracle and nothing else.
fn admit_prelude(n: &str) -> String {
    format!(
        "oracle PRODCHK_admitted_{n} = \\<open>fn ct => ct\\<close>\n\n\
         method_setup PRODCHK_admit_{n} = \\<open>\n  Scan.succeed (fn ctxt => SIMPLE_METHOD\n    \
         (CSUBGOAL (fn (goal, i) => resolve_tac ctxt [PRODCHK_admitted_{n} goal] i) 1))\n\\<close>\n\n"
    )
}

/// The axioms of the theory before any lemma, so that the audit can name the ones a proof adds.
fn axiom_snapshot(n: &str) -> String {
    format!(
        "ML \\<open>val PRODCHK_axioms_{n} =\n  fold (fn (a, _) => Symtab.update (a, ())) (Theory.axioms_of \\<^theory>) Symtab.empty\\<close>\n\n"
    )
}

/// The audit: prints, tagged with the nonce, how many theorems the goal's name denotes, the
/// oracles they depend on other than the admitted lemmas' and `allowed_oracles`, and the axioms
/// added since the snapshot.
fn audit(n: &str, allowed_oracles: &[String]) -> String {
    let allowed: Vec<String> = allowed_oracles
        .iter()
        .filter(|o| is_plain_name(o))
        .map(|o| format!("\"{o}\""))
        .collect();
    let goal = goal_name(n);
    let tag = audit_tag(n);
    format!(
        "ML \\<open>\nlet\n  \
         val name = \"{goal}\";\n  \
         val ctxt = \\<^context>;\n  \
         val thy = Proof_Context.theory_of ctxt;\n  \
         val local_thms = (Proof_Context.get_thms ctxt name handle ERROR _ => []);\n  \
         val thms = if null local_thms then\n      \
         map #2 (filter (fn (a, _) => Long_Name.base_name a = name) (Global_Theory.all_thms_of thy false))\n    \
         else local_thms;\n  \
         val allowed = [{allowed}];\n  \
         val oracles = map (fn ((a, _), _) => a) (Thm_Deps.all_oracles thms);\n  \
         val bad = distinct (op =) (filter (fn a => Long_Name.base_name a <> \"PRODCHK_admitted_{n}\" andalso not (member (op =) allowed a)) oracles);\n  \
         val new_axioms = filter_out (Symtab.defined PRODCHK_axioms_{n}) (map #1 (Theory.axioms_of thy));\n\
         in\n  \
         writeln (\"{tag} theorems=\" ^ string_of_int (length thms) ^ \" oracles=\" ^ space_implode \",\" bad ^ \" axioms=\" ^ space_implode \",\" new_axioms)\n\
         end\n\\<close>\n\n",
        allowed = allowed.join(", ")
    )
}

#[derive(Default)]
struct Builder {
    text: String,
    regions: Vec<(Range<usize>, Region)>,
}

impl Builder {
    fn push(&mut self, region: Region, s: &str) {
        let start = self.text.len();
        // One line ending (LF) throughout: Isabelle counts CR LF as one symbol, and a file with
        // one convention keeps our symbol count and Isabelle's equal.
        self.text
            .push_str(&s.replace("\r\n", "\n").replace('\r', "\n"));
        self.regions.push((start..self.text.len(), region));
    }

    /// The final check's assembled lemmas with their proofs, then the proposed lemmas, each
    /// admitted through the checker's oracle.
    fn push_lemmas(&mut self, spec: &TheorySpec<'_>) {
        let n = spec.nonce;
        for (i, l) in spec.proved.iter().enumerate() {
            self.push(Region::Proved(i), l);
            self.push(Region::Proved(i), "\n\n");
        }
        for (i, l) in spec.lemmas.iter().enumerate() {
            self.push(Region::Lemma(i), l);
            self.push(Region::Admit(i), &format!("\n  by PRODCHK_admit_{n}"));
            self.push(Region::Admit(i), "\n\n");
        }
    }

    /// The (renamed) statement and its proof steps, one region per step.
    fn push_goal(&mut self, spec: &TheorySpec<'_>) {
        self.push(Region::Statement, spec.statement);
        self.push(Region::Statement, "\n");
        for (k, s) in spec.steps.iter().enumerate() {
            self.push(Region::Step(k + 1), s);
            self.push(Region::Step(k + 1), "\n");
        }
    }
}

/// Start bytes of Isabelle symbols (`Symbol.explode`): `\<name>` and `\<^name>` are one symbol,
/// every other character (any UTF-8 length) is one symbol.
pub fn symbol_starts(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        out.push(i);
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'<') {
            let mut j = i + 2;
            if b.get(j) == Some(&b'^') {
                j += 1;
            }
            let name_start = j;
            if b.get(j).is_some_and(u8::is_ascii_alphabetic) {
                while b
                    .get(j)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'\'')
                {
                    j += 1;
                }
                if j > name_start && b.get(j) == Some(&b'>') {
                    i = j + 1;
                    continue;
                }
            }
        }
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_count_like_isabelle() {
        // The recorded reply `use_theories` reports `by` of isabelle-client's Example.thy at
        // offsets 59..61; this is that file's text.
        let example = "theory Example\nimports Main\nbegin\nlemma \"\\<forall> x. \\<exists> y. x = y\"\nby auto\nend\n";
        let starts = symbol_starts(example);
        let by = example.find("by auto").unwrap();
        assert_eq!(starts.partition_point(|&s| s < by) + 1, 59);
        assert_eq!(
            symbol_starts("‹a›\\<^sub>x\\<foo"),
            vec![0, 3, 4, 7, 14, 15, 16, 17, 18, 19]
        );
    }

    proptest::proptest! {
        /// Offsets and bytes convert both ways on any text, symbols included.
        #[test]
        fn offsets_round_trip(parts in proptest::collection::vec(proptest::sample::select(vec![
            "\\<forall>", "\\<^sub>", "\\<", "‹", "›", "ä", "x", "\n", ">", "\\", "\r\n", "𝔄",
        ]), 0..30)) {
            let text: String = parts.concat();
            let t = Theory::build(&TheorySpec {
                nonce: "p",
                imports: "Main",
                inline_context: &text,
                open_blocks: 0,
                proved: &[],
                lemmas: &[],
                statement: "lemma PRODCHK_goal_p: \"x\"",
                steps: &["by simp".to_string()],
                allowed_oracles: &[],
            });
            for (i, &b) in t.symbol_starts.iter().enumerate() {
                proptest::prop_assert_eq!(t.offset_of_byte(b), i + 1);
                proptest::prop_assert_eq!(t.byte_of_offset(i + 1), Some(b));
                proptest::prop_assert!(t.text.is_char_boundary(b));
            }
        }
    }

    #[test]
    fn regions_and_positions() {
        let t = Theory::build(&TheorySpec {
            nonce: "abc",
            imports: "Main",
            inline_context: "",
            open_blocks: 0,
            proved: &["lemma a1: \"R\"\nby auto".to_string()],
            lemmas: &["lemma l1: \"\\<forall>x. P x\"".to_string()],
            statement: "lemma PRODCHK_goal_abc: \"Q\"",
            steps: &["using l1".to_string(), "by simp".to_string()],
            allowed_oracles: &[
                "Code_Generator.holds_by_evaluation".to_string(),
                "bad\"name".into(),
            ],
        });
        assert!(t.text.contains("[\"Code_Generator.holds_by_evaluation\"]"));
        assert!(!t.text.contains("bad\"name"));
        let by = t.text.find("by simp").unwrap();
        let off = t.offset_of_byte(by);
        assert_eq!(t.byte_of_offset(off), Some(by));
        assert_eq!(t.region_of(None, Some(off)), Some(&Region::Step(2)));
        let line = t.text[..by].matches('\n').count() + 1;
        assert_eq!(t.region_of(Some(line), None), Some(&Region::Step(2)));
        let a1 = t.text.find("lemma a1").unwrap();
        assert_eq!(t.region_at(a1), Some(&Region::Proved(0)));
        assert!(a1 > t.text.find("PRODCHK_axioms_abc").unwrap());
        let l1 = t.text.find("lemma l1").unwrap();
        assert_eq!(t.region_at(l1), Some(&Region::Lemma(0)));
        assert_eq!(
            t.region_at(t.text.find("by PRODCHK_admit_abc").unwrap()),
            Some(&Region::Admit(0))
        );
        assert_eq!(
            t.region_at(t.text.find("ML \\<open>()").unwrap()),
            Some(&Region::CloseCheck)
        );
        assert_eq!(
            t.region_at(t.text.find("PRODCHK_audit_abc").unwrap()),
            Some(&Region::Audit)
        );
        assert!(t.text.ends_with("end\n"));
    }
}

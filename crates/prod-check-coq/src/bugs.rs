//! The known proof-of-`False` bugs of each supported prover release, as data, and the rules
//! derived from them.
//!
//! A policy trained with RL searches every corner of the checker, so a kernel bug that some
//! construct of untrusted text can reach is a reward oracle. Each entry of [`KNOWN_BUGS`] names
//! the releases it affects (measured with the reproduction files of Rocq's test suite:
//! `docs/provers.md`) and how ProD keeps it off the reward path ([`Answer`]): constructs refused
//! ([`Construct`]), the prover flags every checking process gets, or "reachable only from
//! declarations in the context" (contexts are library text; the untrusted text can declare
//! nothing). A refused construct is refused twice: as words in every piece of untrusted text
//! (a cheap first filter, `rules.rs`), and, where the kernel's term shows it, by the ProD
//! plugin's term audit of every constant an attempt creates (`plugin/prod_audit.ml`), which
//! also sees what a tactic built at run time. [`RuleSet::for_release`] is the union of the
//! constructs of the bugs that affect a release; a release the table does not know gets every
//! one.

use std::fmt;

/// A prover release the checker is tested with (`docs/provers.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProverRelease {
    /// Coq 8.16.1 (Debian 12).
    Coq8_16,
    /// Rocq 9.2.0 (Debian unstable, in its own root).
    Rocq9_2,
}

impl ProverRelease {
    pub const ALL: [ProverRelease; 2] = [ProverRelease::Coq8_16, ProverRelease::Rocq9_2];

    /// From a version string as `coqc --version` prints it (`8.16.1`, `9.2.0`, `9.2`).
    /// Other patch levels of the same minor release are the same row only where the table says
    /// so: 9.2.1 fixes several bugs of 9.2.0, so it is not 9.2.0 (and gets every rule).
    pub fn from_version(version: &str) -> Option<ProverRelease> {
        match version.trim() {
            "8.16.1" => Some(ProverRelease::Coq8_16),
            "9.2.0" | "9.2" => Some(ProverRelease::Rocq9_2),
            _ => None,
        }
    }

    /// From a checker fingerprint (`…, version 8.16.1; flags …`).
    pub fn from_fingerprint(fingerprint: &str) -> Option<ProverRelease> {
        let v = fingerprint
            .split("version")
            .nth(1)?
            .split_whitespace()
            .next()?;
        Self::from_version(v.trim_end_matches([';', ',']))
    }
}

impl fmt::Display for ProverRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProverRelease::Coq8_16 => "Coq 8.16.1",
            ProverRelease::Rocq9_2 => "Rocq 9.2.0",
        })
    }
}

/// A construct that reaches a kernel bug, refused by a token rule wherever it stands in
/// untrusted text (proof, node statement, proposed lemma) and, where the kernel's term shows it
/// ([`Construct::in_term`]), by the term audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Construct {
    /// A fixpoint or cofixpoint written by the text (`fix`, `cofix`, as a tactic or in a
    /// term, in a proposed lemma or one of its let-binders): it reaches the guard checker.
    /// Induction through the library's recursors (already checked) stays available; the
    /// reduction flags `fix`/`cofix` of `cbv`, `lazy` and `cbn` are flags, not fixpoints.
    Fixpoint,
    /// A tactic that leaves the type check to the kernel's conversion alone (`exact_no_check`
    /// & co.): every conversion bug becomes reachable, and an ill-typed term can be evaluated.
    KernelDeferring,
    /// Terms in the sort `SProp` (the sort itself, the `StrictProp` library, the `_sind`
    /// eliminators): conversion with definitional proof irrelevance.
    StrictProp,
    /// The tactic languages' ways to build a term that no rule on words can read: Ltac2's
    /// `Constr.Unsafe` constructors, `ltac2:(…)` inside a proof, Ltac2 externals, plugin
    /// loading. A first filter only: what such a term holds is decided by the term audit.
    TermBuilding,
}

impl Construct {
    pub const ALL: [Construct; 4] = [
        Construct::Fixpoint,
        Construct::KernelDeferring,
        Construct::StrictProp,
        Construct::TermBuilding,
    ];

    /// The words that are this construct (compared with [`prod_coq::ascii_words`]).
    pub fn words(self) -> &'static [&'static str] {
        match self {
            Construct::Fixpoint => &["fix", "cofix"],
            Construct::KernelDeferring => &[
                "exact_no_check",
                "vm_cast_no_check",
                "native_cast_no_check",
                "change_no_check",
            ],
            Construct::StrictProp => &[
                "SProp",
                "StrictProp",
                "Box",
                "box",
                "unbox",
                "Squash",
                "squash",
                "sEmpty",
                "sUnit",
                "stt",
                "Ssig",
                "Sexists",
                "Spr1",
                "Spr2",
            ],
            Construct::TermBuilding => &["Unsafe", "ltac2", "Ltac2", "external", "Declare"],
        }
    }

    /// The name the plugin's term audit knows this construct by, when the kernel's term shows
    /// it (a kernel-deferring tactic leaves no trace in the term; a term builder leaves the term
    /// it built, which the audit reads whole).
    pub fn in_term(self) -> Option<&'static str> {
        match self {
            Construct::Fixpoint => Some("fixpoint"),
            Construct::StrictProp => Some("sprop"),
            Construct::KernelDeferring | Construct::TermBuilding => None,
        }
    }

    /// Word prefixes, and `_`-separated parts, that are this construct too: the generated
    /// eliminators and lemmas of the `StrictProp` library, and every inductive's `_sind`
    /// eliminator into SProp (`eq_sind`, `eq_sind_r`).
    fn affixes(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Construct::StrictProp => (
                &[
                    "sEmpty_", "sUnit_", "Squash_", "Ssig_", "Box_", "Spr1_", "Spr2_",
                ],
                &["sind"],
            ),
            _ => (&[], &[]),
        }
    }

    /// Is `word` (one ASCII word) this construct?
    pub fn matches(self, word: &str) -> bool {
        let (prefixes, parts) = self.affixes();
        self.words().contains(&word)
            || prefixes.iter().any(|p| word.starts_with(p))
            || word.split('_').skip(1).any(|part| parts.contains(&part))
    }

    /// Why the construct is refused, for a rejection's message.
    pub fn reason(self) -> &'static str {
        match self {
            Construct::Fixpoint => {
                "fixpoints written in untrusted text reach the guard checker's known bugs; use `induction`"
            }
            Construct::KernelDeferring => {
                "it defers the check to the kernel's conversion alone, which has known bugs"
            }
            Construct::StrictProp => {
                "SProp terms reach the known bugs of conversion with definitional proof irrelevance"
            }
            Construct::TermBuilding => {
                "it builds terms no rule can read (the kernel's term is audited, but such builders are refused too)"
            }
        }
    }
}

impl fmt::Display for Construct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Construct::Fixpoint => "fixpoint",
            Construct::KernelDeferring => "kernel-deferring tactic",
            Construct::StrictProp => "SProp",
            Construct::TermBuilding => "term builder",
        })
    }
}

/// How a bug is kept off the reward path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Token rules: these constructs are refused in all untrusted text.
    Refuse(&'static [Construct]),
    /// The flags every checking Coq process gets ([`prod_coq::PROVER_FLAGS`]).
    ProverFlags,
    /// Reachable only through declarations (inductives, flags, universe-polymorphic
    /// definitions) that untrusted text cannot make; a context is trusted library text.
    ContextOnly,
}

/// One known bug.
#[derive(Clone, Copy, Debug)]
pub struct KnownBug {
    /// Rocq's issue number (`rocq-prover/rocq#N`).
    pub issue: u32,
    pub component: &'static str,
    pub summary: &'static str,
    /// The releases on which it proves `False` (or, where no exploit is known, is accepted).
    pub affects: &'static [ProverRelease],
    pub answer: Answer,
}

use Construct::{Fixpoint, KernelDeferring, StrictProp, TermBuilding};
use ProverRelease::{Coq8_16, Rocq9_2};

/// The bugs of Rocq's critical-bugs list (`dev/doc/critical-bugs.md`) that affect a supported
/// release, with the construct that reaches each. Reproduced on both releases as recorded in
/// `docs/provers.md`.
pub const KNOWN_BUGS: &[KnownBug] = &[
    KnownBug {
        issue: 19402,
        component: "VM",
        summary: "Uint63.addmuldiv with a shift >= 63",
        affects: &[Coq8_16],
        answer: Answer::ProverFlags,
    },
    KnownBug {
        issue: 20413,
        component: "guard",
        summary: "non-structural arguments of a fixpoint not checked",
        affects: &[Coq8_16],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 20455,
        component: "guard",
        summary: "match on match taken as returning a subterm",
        affects: &[Coq8_16],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 20555,
        component: "guard",
        summary: "reduction across an inner fixpoint",
        affects: &[Coq8_16],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 21839,
        component: "guard",
        summary: "reduction in the wrong context",
        affects: &[Coq8_16, Rocq9_2],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 22021,
        component: "guard",
        summary: "lambda domains of nested fixpoints not checked",
        affects: &[Rocq9_2],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 22389,
        component: "cofix guard",
        summary: "nested mutual cofixpoints",
        affects: &[Coq8_16, Rocq9_2],
        answer: Answer::Refuse(&[Fixpoint, TermBuilding]),
    },
    KnownBug {
        issue: 21690,
        component: "conversion, SProp",
        summary: "missing stack conversion for an irrelevant-to-relevant match",
        affects: &[Coq8_16],
        answer: Answer::Refuse(&[StrictProp, KernelDeferring, TermBuilding]),
    },
    KnownBug {
        issue: 22378,
        component: "conversion, SProp",
        summary: "conversion under contexts (let-bound SProp fields)",
        affects: &[Rocq9_2],
        answer: Answer::Refuse(&[StrictProp, KernelDeferring, TermBuilding]),
    },
    KnownBug {
        issue: 22376,
        component: "universes, SProp",
        summary: "variance inference ignores stuck irrelevant-to-relevant matches",
        affects: &[Coq8_16, Rocq9_2],
        answer: Answer::ContextOnly,
    },
    KnownBug {
        issue: 22380,
        component: "lazy reduction",
        summary: "reification of matches on universe-polymorphic inductives",
        affects: &[Rocq9_2],
        answer: Answer::ContextOnly,
    },
    KnownBug {
        issue: 22391,
        component: "conversion",
        summary: "universe substitution of let-ins in constructor types",
        affects: &[Rocq9_2],
        answer: Answer::ContextOnly,
    },
    KnownBug {
        // Not fixed in any release ("memory corruption by evaluating on ill-typed terms
        // obtained from unsafe tactics"): the reason the unsafe tactics stay refused.
        issue: 0,
        component: "reduction",
        summary: "evaluation of ill-typed terms left by unsafe tactics",
        affects: &[Coq8_16, Rocq9_2],
        answer: Answer::Refuse(&[KernelDeferring, TermBuilding]),
    },
];

/// The token rules a release needs: which constructs untrusted text may not contain.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RuleSet {
    refused: Vec<Construct>,
    release: Option<ProverRelease>,
}

impl RuleSet {
    /// The union of the token rules of the bugs that affect `release`; every rule when the
    /// release is unknown.
    pub fn for_release(release: Option<ProverRelease>) -> RuleSet {
        let mut refused: Vec<Construct> = match release {
            None => Construct::ALL.to_vec(),
            Some(r) => KNOWN_BUGS
                .iter()
                .filter(|b| b.affects.contains(&r))
                .flat_map(|b| match b.answer {
                    Answer::Refuse(cs) => cs.to_vec(),
                    _ => vec![],
                })
                .collect(),
        };
        refused.sort();
        refused.dedup();
        RuleSet { refused, release }
    }

    /// Every rule (for text whose prover release is not known, e.g. CoqHammer's output
    /// checked outside a session).
    pub fn strictest() -> RuleSet {
        Self::for_release(None)
    }

    pub fn refused(&self) -> &[Construct] {
        &self.refused
    }

    pub fn release(&self) -> Option<ProverRelease> {
        self.release
    }

    /// The term audit's list for the plugin (`fixpoint,sprop`): the refused constructs the
    /// kernel's term shows.
    pub fn term_audit(&self) -> String {
        self.refused
            .iter()
            .filter_map(|c| c.in_term())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A short form for fingerprints: `fixpoint,kernel-deferring tactic,SProp`.
    pub fn describe(&self) -> String {
        self.refused
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_from_versions() {
        assert_eq!(ProverRelease::from_version("8.16.1"), Some(Coq8_16));
        assert_eq!(ProverRelease::from_version("9.2.0"), Some(Rocq9_2));
        assert_eq!(ProverRelease::from_version("9.2.1"), None);
        assert_eq!(
            ProverRelease::from_fingerprint(
                "The Coq Proof Assistant, version 8.16.1; flags -bytecode-compiler no"
            ),
            Some(Coq8_16)
        );
    }

    #[test]
    fn rules_are_derived_from_the_table() {
        // Both releases have guard-checker bugs, SProp conversion bugs and the unsafe
        // tactics' evaluation bug: every construct is refused on both.
        for r in ProverRelease::ALL {
            assert_eq!(RuleSet::for_release(Some(r)).refused(), &Construct::ALL);
        }
        assert_eq!(RuleSet::strictest().refused(), &Construct::ALL);
        // Each refused construct has at least one bug behind it on each release it is refused on.
        for r in ProverRelease::ALL {
            for c in RuleSet::for_release(Some(r)).refused() {
                assert!(KNOWN_BUGS.iter().any(|b| b.affects.contains(&r)
                    && matches!(b.answer, Answer::Refuse(cs) if cs.contains(c))));
            }
        }
    }

    #[test]
    fn words_and_affixes() {
        assert!(Fixpoint.matches("fix") && Fixpoint.matches("cofix"));
        assert!(!Fixpoint.matches("fixed") && !Fixpoint.matches("fix'"));
        assert!(StrictProp.matches("sEmpty_rect") && StrictProp.matches("eq_sind"));
        assert!(StrictProp.matches("eq_sind_r") && StrictProp.matches("Odd_alt_Even_alt_sind"));
        assert!(!StrictProp.matches("sind") && !StrictProp.matches("eq_ind"));
        assert!(!StrictProp.matches("sindex") && !StrictProp.matches("is_kind"));
        assert!(KernelDeferring.matches("exact_no_check"));
        assert!(TermBuilding.matches("Unsafe") && TermBuilding.matches("ltac2"));
        assert!(!TermBuilding.matches("unsafe") && !TermBuilding.matches("ltac"));
    }

    #[test]
    fn the_term_audit_follows_the_table() {
        for r in ProverRelease::ALL {
            assert_eq!(RuleSet::for_release(Some(r)).term_audit(), "fixpoint,sprop");
        }
        assert_eq!(RuleSet::strictest().term_audit(), "fixpoint,sprop");
        // A construct the term shows is named; the others leave it to the text rules.
        assert_eq!(TermBuilding.in_term(), None);
        assert_eq!(KernelDeferring.in_term(), None);
    }
}

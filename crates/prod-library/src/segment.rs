//! A segmented file, prover-neutral: the blocks `c1 s1 p1 … cl sl pl` of paper §2 ("Dataset
//! construction"), with each proof split into steps and each piece's references to the file's
//! own theorems resolved (by the prover-specific segmenter: Coq's or Isabelle's).

use serde::Serialize;

/// How a proof block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProofEnd {
    /// Opaque proof (`Qed`, `Save`; Isabelle `done`/`by`/`qed`).
    Qed,
    /// Transparent proof (`Defined`): it computes, so it is never peeled.
    Defined,
    Admitted,
    Abort,
}

/// One proof step `t_j` (a sentence). `text` is verbatim and starts with the whitespace and
/// comments that precede the sentence, so concatenating the steps reproduces the proof body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub text: String,
    /// Indices (into the file's theorem list) of theorems this step uses.
    pub uses: Vec<usize>,
}

/// A theorem block `s_i p_i`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Theorem {
    /// Declared name (`None` for an anonymous `Goal`).
    pub name: Option<String>,
    /// The statement sentence `s_i`, verbatim (trimmed).
    pub statement: String,
    /// The proof opener (`Proof.`, `Proof using x.`), if any; not part of the steps.
    pub header: Option<String>,
    pub steps: Vec<Step>,
    /// Verbatim text of the closing sentence (`Qed.`), with its leading whitespace.
    pub end_text: String,
    pub end: ProofEnd,
    /// Byte range of the whole block (statement through closing sentence) in the source.
    pub start: usize,
    pub end_byte: usize,
    /// 1-based line of the statement.
    pub line: usize,
    /// May this theorem be peeled at all? (a named opaque lemma whose statement can be proposed
    /// verbatim at every use; the segmenter decides).
    pub peelable: bool,
    /// Referred to from somewhere that always stays in the file (content, a statement, a use
    /// from another scope): never peeled.
    pub pinned: bool,
    /// Why no example is built from this block (`None`: an example is built).
    pub skip: Option<SkipReason>,
    /// Enclosing Section/Module names, outermost first (for the example's position).
    pub scope: Vec<String>,
    /// The names of the enclosing *modules* (sections do not qualify names): after every scope is
    /// closed, the theorem is `module_path.join(".") + "." + name`.
    pub module_path: Vec<String>,
}

/// Why a block yields no example. Every skipped block carries one (reported in stats.json).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Ends in `Admitted`: there is no ground-truth proof.
    Admitted,
    /// Ends in `Abort`: the statement is never added to the environment.
    Aborted,
    /// `Program` statements and `Next Obligation` proofs (obligations are generated, not stated).
    Program,
    /// `Proof with tac`: the `...` steps depend on a header that a conditional proof cannot carry.
    ProofWith,
    /// Mutual statements (`Lemma a : A with b : B`).
    Mutual,
    /// The proof has no step.
    EmptyProof,
    /// A statement or proof sentence the segmenter could not classify (nested proofs, …).
    Unsupported,
    /// The file ended inside the proof.
    Unterminated,
    /// Isabelle `schematic_goal`: admitted as a proposed lemma it would prove anything.
    Schematic,
    /// The proof uses a tactic that changes how later sentences parse (none yet).
    Other,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Admitted => "admitted",
            SkipReason::Aborted => "aborted",
            SkipReason::Program => "program",
            SkipReason::ProofWith => "proof_with",
            SkipReason::Mutual => "mutual",
            SkipReason::EmptyProof => "empty_proof",
            SkipReason::Unsupported => "unsupported",
            SkipReason::Unterminated => "unterminated",
            SkipReason::Schematic => "schematic_goal",
            SkipReason::Other => "other",
        }
    }
}

/// A file split into content and theorem blocks, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Segments {
    pub source: String,
    pub theorems: Vec<Theorem>,
    /// Extra blocks not turned into theorems (e.g. `Next Obligation` proofs): one entry each,
    /// its reason and 1-based line.
    pub other_skipped: Vec<(SkipReason, usize)>,
    /// Number of content sentences (for stats).
    pub content_sentences: usize,
}

/// What peeling and example building need from a segmented file. The Coq segmenter produces
/// [`Segments`]; another prover's segmenter can produce the same or implement this itself.
pub trait SegmentedFile {
    /// The full source text (contexts are slices of it).
    fn source(&self) -> &str;
    /// The theorem blocks, in file order; content is everything between them.
    fn theorems(&self) -> &[Theorem];
}

impl SegmentedFile for Segments {
    fn source(&self) -> &str {
        &self.source
    }
    fn theorems(&self) -> &[Theorem] {
        &self.theorems
    }
}

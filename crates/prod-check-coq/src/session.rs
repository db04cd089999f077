//! A worker with a loaded context, and one local check on it (paper §2, local correctness).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use prod_check::{Replacement, Verdict};

use crate::assumptions::{parse_assumptions, Assumptions, AxiomPolicy};
use crate::config::{CoqCheckConfig, HAMMER_PLUGIN_IMPORT};
use crate::hammer_cache::{wait_limit, HammerCache, Lookup, Outcome};
use crate::protocol::{error_message, is_syntax_error, is_timeout, reports_out_of_memory, Prompt};
use crate::rules::{self, Statement, Step};
use crate::universes::{poly_context, PolyContext};
use crate::worker::{Fault, Memory, Reply, Worker};

/// Which context a worker holds: requests with equal specs share a loaded state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextSpec {
    pub imports: String,
    pub hammer: bool,
    pub context: String,
}

/// A context split into sentences (trusted text; lexed only to send it sentence by sentence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedContext {
    pub spec: ContextSpec,
    /// Imports and the hammer plugin line.
    pub prelude: Vec<String>,
    pub sentences: Vec<String>,
}

impl PreparedContext {
    pub fn new(spec: ContextSpec) -> Result<Self, String> {
        let split = |what: &str, text: &str| -> Result<Vec<String>, String> {
            let lexed = prod_coq::sentences(text);
            if let Some(e) = lexed.errors.first() {
                return Err(format!("{what}: {}", e.message(text)));
            }
            Ok(lexed
                .sentences
                .iter()
                .map(|s| s.text(text).to_string())
                .collect())
        };
        let mut prelude = split("imports", &spec.imports)?;
        if spec.hammer {
            prelude.push(HAMMER_PLUGIN_IMPORT.to_string());
        }
        let sentences = split("context", &spec.context)?
            .into_iter()
            .flat_map(|s| match expand_proof_term(&s) {
                Some(three) => three.to_vec(),
                None => vec![s],
            })
            .collect();
        Ok(PreparedContext {
            spec,
            prelude,
            sentences,
        })
    }
}

/// `Proof term.` is `exact term. Qed.` (Coq reference manual). The worker's sentence-by-sentence
/// replay does not close such a proof by itself ("Attempt to save an incomplete proof", while
/// `coqc` accepts the file), so the trusted context is sent in the spelled-out form.
fn expand_proof_term(sentence: &str) -> Option<[String; 3]> {
    let head = prod_coq::sentence_head(sentence);
    if head.keyword != Some("Proof")
        || !head.controls.is_empty()
        || head.has_attributes()
        || head.selector.is_some()
    {
        return None;
    }
    let term = head
        .body
        .trim_start()
        .strip_prefix("Proof")?
        .trim()
        .strip_suffix('.')?
        .trim();
    let first = term
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    if term.is_empty() || matches!(first, "using" | "with" | "Mode") {
        return None;
    }
    Some([
        "Proof.".to_string(),
        format!("exact ({term})."),
        "Qed.".to_string(),
    ])
}

/// What one attempt needs, already checked against the rules.
#[derive(Clone, Debug)]
pub struct Plan {
    pub lemmas: Vec<Statement>,
    pub statement: Statement,
    pub steps: Vec<Step>,
    /// The rules the plan was checked with (also applied to what CoqHammer prints).
    pub rules: rules::RuleSet,
}

struct Loaded {
    prelude: Vec<String>,
    hammer: bool,
    sentences: Vec<String>,
    base: u64,
    base_prompt: Prompt,
    /// Qualified names known to exist (or not) in the base state.
    at_base: HashMap<String, bool>,
    /// Capitalised words known to name (or not) an Ltac tactic of the context.
    ltac_names: HashMap<String, bool>,
}

/// A statement stated in the bare context under a fresh name ([`Session::state_anchors`]).
struct Anchor {
    /// What it anchors, for messages (`the statement`, `proposed lemma 2`).
    what: String,
    /// The anchor's name.
    anchor: String,
    /// The name the attempt declares the same text under.
    declared: String,
}

/// A worker plus what it has loaded.
pub struct Session {
    pub worker: Worker,
    loaded: Option<Loaded>,
    /// The environment is exactly the loaded context's base (no attempt in progress).
    at_base: bool,
    /// This attempt's text moved Coq somewhere the protocol does not allow: the process is
    /// not reused.
    suspect: bool,
    /// The address space each Coq process gets (`prlimit --as`), in MiB.
    memory_limit_mb: u64,
    /// The axioms a context may pass on ([`AxiomPolicy`]).
    axioms: AxiomPolicy,
    /// The rules of the attempt in progress (for what CoqHammer prints).
    rules: rules::RuleSet,
}

fn ok_with(reply: &Reply, name: &str, open: &[&str]) -> bool {
    reply.prompt.name == name
        && reply
            .prompt
            .open_proofs
            .iter()
            .map(String::as_str)
            .eq(open.iter().copied())
}

impl Session {
    pub fn start(cfg: &CoqCheckConfig) -> Result<Session, String> {
        Ok(Session {
            worker: Worker::start(cfg)?,
            loaded: None,
            at_base: false,
            suspect: false,
            memory_limit_mb: cfg.memory_limit_mb,
            axioms: AxiomPolicy::new(cfg),
            rules: rules::RuleSet::strictest(),
        })
    }

    /// Is this session holding exactly `ctx`?
    pub fn holds(&self, ctx: &PreparedContext) -> bool {
        self.loaded.as_ref().is_some_and(|l| {
            l.prelude == ctx.prelude && l.hammer == ctx.spec.hammer && l.sentences == ctx.sentences
        })
    }

    /// Make `ctx` the base state: nothing to do, extend the loaded context, or load afresh.
    /// `Err(Ok(msg))`: the context itself is broken; `Err(Err(fault))`: the worker failed.
    pub fn ensure(
        &mut self,
        ctx: &PreparedContext,
        cfg: &CoqCheckConfig,
    ) -> Result<(), Result<String, Fault>> {
        if self.holds(ctx) {
            return self.return_to_base(cfg).map_err(Err);
        }
        let limit = Duration::from_secs(cfg.context_timeout_s as u64);
        let extend_from = self.extends_to(ctx);
        let (first, target) = match extend_from {
            Some(n) => (
                n,
                self.loaded
                    .as_ref()
                    .map(|l| l.base)
                    .unwrap_or(self.worker.initial_state),
            ),
            None => (0, self.worker.initial_state),
        };
        self.loaded = None;
        // After every attempt the worker is back at its base; only move when elsewhere.
        let already_there = match extend_from {
            Some(_) => self.at_base,
            None => self.worker.state == self.worker.initial_state,
        };
        self.at_base = false;
        if !already_there {
            self.back_to_top_level(target, limit).map_err(Err)?;
        }
        self.load_context(ctx, cfg, extend_from, first, limit)?;
        self.keep_loaded(ctx)
    }

    /// How many of `ctx`'s sentences are already loaded, when `ctx` only adds sentences to the
    /// loaded context (same prelude, same hammer setting); `None` when it must load afresh.
    fn extends_to(&self, ctx: &PreparedContext) -> Option<usize> {
        self.loaded.as_ref().and_then(|l| {
            (l.prelude == ctx.prelude
                && l.hammer == ctx.spec.hammer
                && ctx.sentences.starts_with(&l.sentences))
            .then_some(l.sentences.len())
        })
    }

    /// `BackTo target`, which must land at the top level with no proof open (else the worker
    /// is killed): where the context is loaded from.
    fn back_to_top_level(&mut self, target: u64, limit: Duration) -> Result<(), Fault> {
        let back = self.worker.run(&format!("BackTo {target}."), limit)?;
        if back.after.name != self.worker.top_name || !back.after.open_proofs.is_empty() {
            self.worker.kill();
            return Err(Fault::Protocol(
                "BackTo did not return to a top-level state".into(),
            ));
        }
        Ok(())
    }

    /// Send the prelude (on a fresh load), `ctx`'s sentences from `first` on and the checker's
    /// settings; the first refusal breaks the worker and names the sentence that failed.
    fn load_context(
        &mut self,
        ctx: &PreparedContext,
        cfg: &CoqCheckConfig,
        extend_from: Option<usize>,
        first: usize,
        limit: Duration,
    ) -> Result<(), Result<String, Fault>> {
        let mut texts: Vec<&str> = vec![];
        if extend_from.is_none() {
            texts.extend(ctx.prelude.iter().map(String::as_str));
        } else {
            texts.push("Unset Default Timeout.");
        }
        let skip = texts.len();
        texts.extend(ctx.sentences[first..].iter().map(String::as_str));
        let ctx_end = texts.len();
        let settings = settings(cfg, ctx.spec.hammer);
        texts.extend(settings.iter().map(String::as_str));
        let replies = self.worker.run_until_refused(&texts, limit).map_err(Err)?;
        for (i, r) in replies.iter().enumerate() {
            if !r.ok() {
                let what = if i < skip && extend_from.is_none() {
                    format!("import `{}`", texts[i])
                } else if i < ctx_end {
                    format!(
                        "context sentence {} `{}`",
                        first + i - skip + 1,
                        texts[i].chars().take(80).collect::<String>()
                    )
                } else {
                    format!("checker setting `{}`", texts[i])
                };
                // Leave the worker in a clean state for the next context.
                self.worker.broken = true;
                return Err(Ok(format!("{what} fails: {}", error_message(&r.output))));
            }
        }
        Ok(())
    }

    /// Record the state the context left as the base of `ctx`, unless it leaves a proof open
    /// (then the context is broken and so is the worker).
    fn keep_loaded(&mut self, ctx: &PreparedContext) -> Result<(), Result<String, Fault>> {
        let base_prompt = self.worker.prompt.clone();
        if !base_prompt.open_proofs.is_empty() {
            self.worker.broken = true;
            return Err(Ok("the context leaves a proof open".into()));
        }
        self.loaded = Some(Loaded {
            prelude: ctx.prelude.clone(),
            hammer: ctx.spec.hammer,
            sentences: ctx.sentences.clone(),
            base: self.worker.state,
            base_prompt,
            at_base: HashMap::new(),
            ltac_names: HashMap::new(),
        });
        self.at_base = true;
        Ok(())
    }

    /// Run one attempt in the loaded context and return to the base state.
    ///
    /// The return to the base state (`BackTo`) is left for the start of the next attempt, so
    /// that the verdict is out as soon as it is known (a blown-up attempt can take a while to
    /// clean up after).
    pub fn attempt(&mut self, plan: &Plan, cfg: &CoqCheckConfig) -> Verdict {
        if !self.at_base {
            if let Err(f) = self.back_to_base(cfg) {
                self.worker.kill();
                return Verdict::infra(f.to_string());
            }
        }
        let start = Instant::now();
        self.at_base = false;
        self.suspect = false;
        self.rules = plan.rules.clone();
        // Capitalised tactic names first: only Coq knows whether `Foo` is an Ltac of the
        // context; nothing of the attempt has reached Coq yet, so a refusal keeps the worker.
        match self.confirm_ltac_heads(plan, cfg) {
            Ok(None) => {}
            Ok(Some(v)) => return v,
            Err(f) => {
                self.worker.attempts += 1;
                return Verdict::infra(f.to_string());
            }
        }
        let mut verdict = match self.attempt_inner(plan, cfg, start) {
            Ok(v) => v,
            Err(f) => Verdict::infra(f.to_string()),
        };
        self.worker.attempts += 1;
        if self.worker.signalled {
            // A SIGINT may have landed in any later sentence (the assumptions walk included):
            // an interrupted attempt is at most timed out, and the process is replaced.
            if verdict.is_proved() {
                verdict = Verdict::TimedOut {
                    step: plan.steps.len() + 1,
                };
            }
            self.worker.kill();
        }
        if self.suspect {
            // Text reached Coq that moved it somewhere unexpected: never reuse that process.
            self.worker.kill();
        }
        verdict
    }

    /// Benchmark baseline, for trusted text only: the statement, `Proof.`, the steps and `Qed.`
    /// sent to Coq in one write with a single sentinel after them, so the time is Coq's own for
    /// those sentences in this very process, without the checker's per-sentence round trips,
    /// prompt checks and `Print Assumptions`. Never a verdict on untrusted text.
    pub fn replay(&mut self, plan: &Plan, cfg: &CoqCheckConfig) -> Verdict {
        if !self.at_base {
            if let Err(f) = self.back_to_base(cfg) {
                self.worker.kill();
                return Verdict::infra(f.to_string());
            }
        }
        self.at_base = false;
        let mut text = String::new();
        for l in &plan.lemmas {
            text.push_str(&l.text);
            text.push_str("\nAdmitted.\n");
        }
        text.push_str(&plan.statement.text);
        text.push_str("\nProof.\n");
        for s in &plan.steps {
            text.push_str(&s.text);
            text.push('\n');
        }
        text.push_str("Qed.");
        let start = Instant::now();
        let limit = cfg.attempt_limit();
        let r = match self.worker.run(&text, limit) {
            Ok(r) => r,
            Err(f) => return Verdict::infra(f.to_string()),
        };
        let time = start.elapsed();
        let base_name = self.loaded.as_ref().map(|l| l.base_prompt.name.clone());
        if r.output.contains("Error") || Some(&r.after.name) != base_name.as_ref() {
            return Verdict::Failed {
                step: 0,
                message: format!("replay: {}", error_message(&r.output)),
            };
        }
        Verdict::Proved {
            axioms: vec![],
            replacements: vec![],
            time,
            universe_constraints: vec![],
        }
    }

    /// `Locate Ltac Foo.` for each capitalised step head (cached per context): a word that is not
    /// an Ltac name of the context is refused before anything else runs.
    fn confirm_ltac_heads(
        &mut self,
        plan: &Plan,
        cfg: &CoqCheckConfig,
    ) -> Result<Option<Verdict>, Fault> {
        for (i, step) in plan.steps.iter().enumerate() {
            let Some(word) = step.ltac_head.as_deref() else {
                continue;
            };
            let known = self
                .loaded
                .as_ref()
                .and_then(|l| l.ltac_names.get(word).copied());
            let is_ltac = match known {
                Some(b) => b,
                None => {
                    let r = self
                        .worker
                        .run(&format!("Locate Ltac {word}."), cfg.step_limit())?;
                    let b = r.ok() && names_ltac(&r.output, word);
                    if let Some(l) = self.loaded.as_mut() {
                        l.ltac_names.insert(word.to_string(), b);
                    }
                    b
                }
            };
            if !is_ltac {
                return Ok(Some(Verdict::rejected(format!(
                    "step {}: `{word}` is neither a tactic of the context nor a lower-case tactic",
                    i + 1
                ))));
            }
        }
        Ok(None)
    }

    /// The protocol's invariant for one untrusted sentence: Coq read exactly one sentence (one
    /// prompt before the sentinel) and its state advanced by one (accepted) or not at all
    /// (refused). Anything else means the
    /// checker and Coq disagree on where the text's sentences end: `Rejected`, and the process
    /// is not reused. A syntax error is `Rejected` too (Coq skips to the next `.` after one,
    /// which is where a disagreement would start), but leaves a process in a known state.
    fn untrusted(&mut self, r: &Reply, what: &str) -> Option<Verdict> {
        let advanced = r.prompt.state.checked_sub(r.before);
        let problem = if r.prompts != 1 {
            Some(format!(
                "Coq read {} sentences where the checker sent one",
                r.prompts
            ))
        } else if !matches!(advanced, Some(0 | 1)) {
            Some(format!(
                "Coq's state moved from {} to {} for one sentence",
                r.before, r.prompt.state
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            self.suspect = true;
            return Some(Verdict::rejected(format!("{what}: {p}")));
        }
        (!r.ok() && is_syntax_error(&r.output))
            .then(|| Verdict::rejected(format!("{what}: {}", error_message(&r.output))))
    }

    /// A rejection that also retires the process.
    fn reject(&mut self, reason: impl Into<String>) -> Verdict {
        self.suspect = true;
        Verdict::rejected(reason)
    }

    /// Return to the base state now (otherwise the next attempt does it).
    pub fn return_to_base(&mut self, cfg: &CoqCheckConfig) -> Result<(), Fault> {
        if self.at_base {
            return Ok(());
        }
        let r = self.back_to_base(cfg);
        if r.is_err() {
            self.worker.kill();
        }
        r
    }

    fn back_to_base(&mut self, cfg: &CoqCheckConfig) -> Result<(), Fault> {
        let Some(l) = self.loaded.as_ref() else {
            return Err(Fault::Protocol("no context".into()));
        };
        let (base, base_prompt) = (l.base, l.base_prompt.clone());
        let r = self.worker.run(
            &format!("BackTo {base}."),
            cfg.step_limit() + Duration::from_secs(5),
        )?;
        if r.prompt.state != base
            || r.prompt.name != base_prompt.name
            || r.prompt.open_proofs != base_prompt.open_proofs
        {
            return Err(Fault::Protocol(format!(
                "BackTo {base} landed in {:?}",
                r.prompt
            )));
        }
        self.at_base = true;
        Ok(())
    }

    /// The attempt itself (Coq's record decides every step), the protocol in order: anchors,
    /// proposals, statement (step 0), the proof's steps (1..=n), `Qed` with the kernel's
    /// comparison with the anchors and the assumptions audit (step n+1).
    fn attempt_inner(
        &mut self,
        plan: &Plan,
        cfg: &CoqCheckConfig,
        start: Instant,
    ) -> Result<Verdict, Fault> {
        let step_limit = cfg.step_limit();
        let Some(l) = self.loaded.as_ref() else {
            return Err(Fault::Protocol("no context loaded".into()));
        };
        let base_name = l.base_prompt.name.clone();
        let hammer_loaded = l.hammer;

        // Step 0: anchor what the statements mean in the bare context, admit each proposed
        // lemma, then state the goal.
        let anchors = match self.state_anchors(plan, &base_name, step_limit)? {
            Ok(a) => a,
            Err(v) => return Ok(v),
        };
        if let Some(v) = self.admit_proposals(plan, &base_name, step_limit)? {
            return Ok(v);
        }
        if let Some(v) = self.open_statement(plan, step_limit)? {
            return Ok(v);
        }

        // Steps 1..=n: the proof's own sentences; after each, Coq must still be in our proof.
        let replacements = match self.proof_steps(plan, cfg, start, hammer_loaded)? {
            Ok(r) => r,
            Err(v) => return Ok(v),
        };

        // Step n+1: our own Qed, the kernel's comparison with the anchors, the assumptions.
        let closing = Closing {
            anchors: &anchors,
            base_name: &base_name,
            replacements,
            start,
        };
        self.close_proof(plan, cfg, closing)
    }

    /// Step 0's proposals: each proposed lemma stated (one untrusted sentence that must open
    /// exactly its own proof) and `Admitted`, back at the top level. `Some(verdict)`: refused.
    fn admit_proposals(
        &mut self,
        plan: &Plan,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        for (i, lemma) in plan.lemmas.iter().enumerate() {
            let what = format!("proposed lemma {}", i + 1);
            let r = self.worker.run(&lemma.text, step_limit)?;
            if let Some(v) = self.untrusted(&r, &what) {
                return Ok(Some(v));
            }
            if let Some(v) = self.failure(&r, 0, &what, step_limit) {
                return Ok(Some(v));
            }
            if !ok_with(&r, &lemma.name, &[&lemma.name]) {
                return Ok(Some(
                    self.reject(format!("{what} is not a single lemma statement")),
                ));
            }
            let r = self.worker.run("Admitted.", step_limit)?;
            let what = format!("admitting proposed lemma {}", i + 1);
            if let Some(v) = self.failure(&r, 0, &what, step_limit) {
                return Ok(Some(v));
            }
            if !ok_with(&r, base_name, &[]) {
                return Ok(Some(self.reject(format!(
                    "proposed lemma {} did not close with Admitted",
                    i + 1
                ))));
            }
        }
        Ok(None)
    }

    /// Step 0's goal: the statement (one untrusted sentence that must open exactly one proof of
    /// its lemma), then `Proof.`. `Some(verdict)`: refused.
    fn open_statement(
        &mut self,
        plan: &Plan,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        let name = plan.statement.name.as_str();
        let r = self.worker.run(&plan.statement.text, step_limit)?;
        if let Some(v) = self.untrusted(&r, "statement") {
            return Ok(Some(v));
        }
        if let Some(v) = self.failure(&r, 0, "statement", step_limit) {
            return Ok(Some(v));
        }
        if !ok_with(&r, name, &[name]) {
            return Ok(Some(self.reject(
                "the statement did not open exactly one proof of its lemma",
            )));
        }
        let r = self.worker.run("Proof.", step_limit)?;
        Ok(self.failure(&r, 0, "Proof", step_limit))
    }

    /// Steps 1..=n within the attempt's budget: `hammer.` expanded (when CoqHammer is loaded)
    /// into its replacement, every other step run as it is. `Ok(Err(verdict))`: a step refused.
    fn proof_steps(
        &mut self,
        plan: &Plan,
        cfg: &CoqCheckConfig,
        start: Instant,
        hammer_loaded: bool,
    ) -> Result<Result<Vec<Replacement>, Verdict>, Fault> {
        let step_limit = cfg.step_limit();
        let name = plan.statement.name.as_str();
        let mut replacements = vec![];
        let budget = cfg.attempt_limit();
        for (i, step) in plan.steps.iter().enumerate() {
            let k = i + 1;
            if start.elapsed() > budget {
                return Ok(Err(Verdict::TimedOut { step: k }));
            }
            if step.hammer && hammer_loaded {
                match self.hammer(step, k, name, cfg)? {
                    Ok(rep) => replacements.push(rep),
                    Err(v) => return Ok(Err(v)),
                }
                continue;
            }
            if let Some(v) = self.proof_step(step, k, name, step_limit)? {
                return Ok(Err(v));
            }
        }
        Ok(Ok(replacements))
    }

    /// Step `k` of the proof `name` as one untrusted sentence: Coq's history only moves
    /// forward, the step succeeds, and Coq is still in exactly our proof. `Some(verdict)`:
    /// refused.
    fn proof_step(
        &mut self,
        step: &Step,
        k: usize,
        name: &str,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        let r = self.worker.run(&step.text, step_limit)?;
        if r.prompt.state < r.before {
            return Ok(Some(
                self.reject(format!("step {k} moved back in Coq's history")),
            ));
        }
        if let Some(v) = self.untrusted(&r, &format!("step {k}")) {
            return Ok(Some(v));
        }
        if let Some(v) = self.failure(&r, k, "", step_limit) {
            return Ok(Some(v));
        }
        if !ok_with(&r, name, &[name]) {
            return Ok(Some(self.reject(format!(
                "step {k} left the proof (Coq's prompt: {} {:?})",
                r.prompt.name, r.prompt.open_proofs
            ))));
        }
        Ok(None)
    }

    /// Step n+1: our own `Qed` back to the top level, the kernel's comparison with the
    /// anchors, the universe constraints and the assumptions audit; `Proved` when all hold.
    fn close_proof(
        &mut self,
        plan: &Plan,
        cfg: &CoqCheckConfig,
        closing: Closing,
    ) -> Result<Verdict, Fault> {
        let Closing {
            anchors,
            base_name,
            replacements,
            start,
        } = closing;
        let step_limit = cfg.step_limit();
        let n = plan.steps.len();
        let universes = self.proof_universes(plan, step_limit)?;
        let r = self.worker.run("Qed.", step_limit)?;
        if let Some(v) = self.failure(&r, n + 1, "Qed", step_limit) {
            return Ok(v);
        }
        if !ok_with(&r, base_name, &[]) {
            return Ok(self.reject("Qed did not return to the top level"));
        }
        if let Some(v) = self.term_audit(plan, n + 1, step_limit)? {
            return Ok(v);
        }
        if let Some(v) = self.compare_with_anchors(anchors, base_name, n + 1, step_limit)? {
            return Ok(v);
        }
        let universe_constraints =
            self.universe_constraints(plan, universes, base_name, step_limit)?;
        let axioms = match self.assumptions(plan, n + 1, cfg, step_limit)? {
            Ok(a) => a,
            Err(v) => return Ok(v),
        };
        if let Some(v) = self.audit_axioms(plan, &axioms, n + 1, cfg, step_limit)? {
            return Ok(v);
        }
        Ok(Verdict::Proved {
            axioms,
            replacements,
            time: start.elapsed(),
            universe_constraints,
        })
    }

    /// The ProD plugin's audit of the kernel's term of the proved lemma and of every constant it
    /// reaches that the context did not have (`plugin/prod_audit.ml`), refusing the constructs
    /// of the release's known kernel bugs ([`rules::RuleSet::term_audit`]). `None`: it passed,
    /// as the plugin said with this attempt's nonce; a refusal is `Rejected`; an audit that
    /// could not run is never a pass.
    fn term_audit(
        &mut self,
        plan: &Plan,
        step: usize,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        let nonce = format!("{:016x}", rand::random::<u64>());
        let r = self.worker.run(
            &format!(
                "ProdAudit {} \"{nonce}\" \"{}\".",
                plan.statement.name,
                self.rules.term_audit()
            ),
            step_limit,
        )?;
        let passed = format!("ProdAudit {nonce} ok");
        if r.ok() && !r.interrupted && r.output.lines().any(|l| l.trim() == passed) {
            return Ok(None);
        }
        if r.ok() {
            return Ok(Some(Verdict::infra("the term audit did not report")));
        }
        let refused = format!("ProdAudit {nonce} refused: ");
        Ok(Some(match self.stop(&r, step_limit) {
            Stop::TimedOut => Verdict::TimedOut { step },
            Stop::OutOfMemory => Verdict::infra(format!("out of memory at step {step}")),
            Stop::Refused => match r.output.find(&refused) {
                Some(at) => Verdict::rejected(format!(
                    "term audit: {}",
                    error_message(&r.output[at + refused.len()..])
                )),
                None => Verdict::infra(format!(
                    "the term audit failed: {}",
                    error_message(&r.output)
                )),
            },
        }))
    }

    /// The plugin's first look at the proof's universe constraints, right before the checker's
    /// `Qed` (`ProdProofUniverses`, `plugin/prod_audit.ml`): it keeps the universe graph without
    /// them, the proof's own levels and constraints and the statement, and decides at once when
    /// the statement has no level of its own. An answer it cannot read is conservative.
    fn proof_universes(
        &mut self,
        plan: &Plan,
        step_limit: Duration,
    ) -> Result<ProofUniverses, Fault> {
        let nonce = format!("{:016x}", rand::random::<u64>());
        let name = &plan.statement.name;
        let r = self
            .worker
            .run(&format!("ProdProofUniverses \"{nonce}\"."), step_limit)?;
        if !ok_with(&r, name, &[name]) {
            return Ok(ProofUniverses::Decided(vec![
                "unknown (the plugin did not look at them)".into(),
            ]));
        }
        Ok(ProofUniverses::read(
            &r.output,
            "ProdProofUniverses",
            &nonce,
        ))
    }

    /// The universe constraints the proof added to its statement's levels or to the context's,
    /// beyond what the statement itself imposes: a proposal is admitted with its levels floating
    /// and its proposer may use it at any levels the statement allows; a proof that holds only
    /// at some of them (`A = Small` in `forall A : Type, {B : Small & A = B}`) must not prove
    /// another node's proposal (Hurkens' paradox would follow), and nor may one that constrains
    /// the context's levels. For a monomorphic statement with levels of its own, the statement
    /// is restated under a fresh name and the plugin compares the two
    /// (`ProdCompareUniverses`); a universe-polymorphic lemma keeps its levels and constraints in
    /// a context of its own instead ([`Session::added_polymorphic`]).
    fn universe_constraints(
        &mut self,
        plan: &Plan,
        universes: ProofUniverses,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Vec<String>, Fault> {
        match universes {
            ProofUniverses::Decided(added) => Ok(added),
            ProofUniverses::Compare => self.compare_restated(plan, base_name, step_limit),
            ProofUniverses::Polymorphic => self.polymorphic(plan, base_name, step_limit),
        }
    }

    /// The statement restated (its proof opened, then aborted) and the plugin's comparison of
    /// the proof's constraints with it.
    fn compare_restated(
        &mut self,
        plan: &Plan,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Vec<String>, Fault> {
        let conservative = |why: &str| Ok(vec![format!("unknown ({why})")]);
        let fresh = format!("prod_univ_{:016x}", rand::random::<u64>());
        let Ok(parsed) = prod_coq::parse_statement(&plan.statement.text) else {
            return conservative("the statement does not parse");
        };
        let r = self
            .worker
            .run(&parsed.renamed(&fresh).to_sentence(), step_limit)?;
        if !ok_with(&r, &fresh, &[&fresh]) {
            if !ok_with(&r, base_name, &[]) {
                return Err(Fault::Protocol("a restated statement went astray".into()));
            }
            return conservative("the statement does not restate");
        }
        let nonce = format!("{:016x}", rand::random::<u64>());
        let r = self
            .worker
            .run(&format!("ProdCompareUniverses \"{nonce}\"."), step_limit)?;
        let added = match ProofUniverses::read(&r.output, "ProdCompareUniverses", &nonce) {
            ProofUniverses::Decided(added) if r.ok() => added,
            _ => vec!["unknown (the plugin did not compare them)".into()],
        };
        let r = self.worker.run("Abort.", step_limit)?;
        if !ok_with(&r, base_name, &[]) {
            return Err(Fault::Protocol("a restated statement did not abort".into()));
        }
        Ok(added)
    }

    /// [`Session::added_polymorphic`] on the proved lemma's universe context as `About` prints it
    /// under `Printing Universes`.
    fn polymorphic(
        &mut self,
        plan: &Plan,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Vec<String>, Fault> {
        let name = plan.statement.name.clone();
        let set = self.worker.run("Set Printing Universes.", step_limit)?;
        if !set.ok() {
            return Err(Fault::Protocol("cannot set Printing Universes".into()));
        }
        let about = self
            .worker
            .run(&format!("About {name}."), step_limit)?
            .output;
        let added = match poly_context(&about, &name) {
            Some(Ok(proved)) => self.added_polymorphic(plan, &proved, base_name, step_limit)?,
            Some(Err(why)) => vec![format!("unknown (its universe context: {why})")],
            None => vec!["unknown (no universe context printed)".into()],
        };
        self.worker.run("Unset Printing Universes.", step_limit)?;
        Ok(added)
    }

    /// The statement restated under a fresh name and admitted (after the proved lemma, so its
    /// levels are fresh): `Ok(Err(why))` when it does not restate.
    fn restate_admitted(
        &mut self,
        plan: &Plan,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Result<String, &'static str>, Fault> {
        let fresh = format!("prod_univ_{:016x}", rand::random::<u64>());
        let Ok(parsed) = prod_coq::parse_statement(&plan.statement.text) else {
            return Ok(Err("the statement does not parse"));
        };
        let r = self
            .worker
            .run(&parsed.renamed(&fresh).to_sentence(), step_limit)?;
        if !ok_with(&r, &fresh, &[&fresh]) {
            return Ok(Err("the statement does not restate"));
        }
        let r = self.worker.run("Admitted.", step_limit)?;
        if !ok_with(&r, base_name, &[]) {
            return Err(Fault::Protocol("a restated statement did not close".into()));
        }
        Ok(Ok(fresh))
    }

    /// [`Session::universe_constraints`] for a universe-polymorphic lemma whose context is
    /// `proved`: its constraints that the same statement restated fresh and admitted does not
    /// have. When some are not among the restated statement's, the kernel decides whether
    /// those imply them: a definition of the lemma at the restated levels, declared with the
    /// restated constraints and nothing more (`@{u u0 | …}`, no `+`), is accepted only then.
    /// Levels or a type that differ, or a context that cannot be read, are unknown.
    fn added_polymorphic(
        &mut self,
        plan: &Plan,
        proved: &PolyContext,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Vec<String>, Fault> {
        let conservative = |why: &str| vec![format!("unknown ({why})")];
        let fresh = match self.restate_admitted(plan, base_name, step_limit)? {
            Ok(fresh) => fresh,
            Err(why) => return Ok(conservative(why)),
        };
        let about = self
            .worker
            .run(&format!("About {fresh}."), step_limit)?
            .output;
        let stated = match poly_context(&about, &fresh) {
            Some(Ok(c)) if c.levels == proved.levels && c.type_text == proved.type_text => c,
            _ => {
                return Ok(conservative(
                    "the restated statement has another universe context",
                ))
            }
        };
        let added: Vec<String> = proved
            .constraints
            .iter()
            .filter(|c| !stated.constraints.contains(c))
            .cloned()
            .collect();
        if added.is_empty() {
            return Ok(added);
        }
        let levels = stated.levels.join(" ");
        let check = format!(
            "Definition prod_univ_implied_{:016x}@{{{levels} | {}}} := @{}@{{{levels}}}.",
            rand::random::<u64>(),
            stated.constraints.join(", "),
            plan.statement.name,
        );
        let r = self.worker.run(&check, step_limit)?;
        Ok(if r.ok() && ok_with(&r, base_name, &[]) {
            vec![]
        } else {
            added
        })
    }

    /// Is `q` a field of a functor's parameter (`X.t` inside `Module F (X : T)`)? Such a field is
    /// a hypothesis of the functor, like a section variable: the context is inside the functor
    /// and every application of it supplies the field. Coq names it after the bound module
    /// alone, and `Locate Module X` answers `Module X` (a global module is `Module Top.X`, a
    /// library's has its root; `Declare Module` makes a global one, whose fields stay axioms).
    fn is_functor_parameter(&mut self, q: &str, step_limit: Duration) -> Result<bool, Fault> {
        let Some((first, _)) = q.split_once('.') else {
            return Ok(false);
        };
        if !prod_coq::is_identifier(first) {
            return Ok(false);
        }
        let r = self
            .worker
            .run(&format!("Locate Module {first}."), step_limit)?;
        // The first line names what the bare name refers to here (others may follow: modules
        // of the same short name elsewhere, "… shorter name to refer to it …").
        let first_line = r.output.lines().map(str::trim).find(|l| !l.is_empty());
        Ok(first_line.is_some_and(|l| l.split_whitespace().eq(["Module", first])))
    }

    /// A statement elaborated after the proposed lemmas could mean something else than the
    /// same text in the bare context, where a node that proves it states it (a proposal named
    /// like a constant the statement uses). So, before any proposal, each statement that a
    /// proposal precedes is stated once more under a fresh name and admitted: its *anchor*.
    /// After `Qed`, [`Session::compare_with_anchors`] has the kernel check that each declared
    /// lemma has its anchor's type. `Ok(Err(verdict))`: an anchor does not elaborate alone.
    fn state_anchors(
        &mut self,
        plan: &Plan,
        base_name: &str,
        step_limit: Duration,
    ) -> Result<Result<Vec<Anchor>, Verdict>, Fault> {
        // The first proposal is elaborated in the bare context already; with no proposal,
        // nothing can change what the statement means.
        let anchored = plan
            .lemmas
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, l)| (format!("proposed lemma {}", i + 1), l))
            .chain(
                (!plan.lemmas.is_empty()).then(|| ("the statement".to_string(), &plan.statement)),
            );
        let mut anchors = vec![];
        for (what, st) in anchored {
            let anchor = format!(
                "prod_anchor_{:016x}_{}",
                rand::random::<u64>(),
                anchors.len()
            );
            let Ok(parsed) = prod_coq::parse_statement(&st.text) else {
                return Ok(Err(Verdict::rejected(format!("{what} does not parse"))));
            };
            let sentence = parsed.renamed(&anchor).to_sentence();
            let r = self.worker.run(&sentence, step_limit)?;
            if let Some(v) = self.untrusted(&r, &what) {
                return Ok(Err(v));
            }
            if !r.ok() {
                let stop = self.stop(&r, step_limit);
                return Ok(Err(match stop {
                    Stop::Refused => Verdict::Failed {
                        step: 0,
                        message: format!(
                            "{what} does not elaborate in the context alone (it must mean the same without the proposed lemmas): {}",
                            error_message(&r.output)
                        ),
                    },
                    Stop::TimedOut => Verdict::TimedOut { step: 0 },
                    Stop::OutOfMemory => Verdict::infra("out of memory at step 0"),
                }));
            }
            if !ok_with(&r, &anchor, &[&anchor]) {
                return Ok(Err(
                    self.reject(format!("{what} is not a single lemma statement"))
                ));
            }
            let r = self.worker.run("Admitted.", step_limit)?;
            if !ok_with(&r, base_name, &[]) {
                return Err(Fault::Protocol(
                    "an anchor did not close with Admitted".into(),
                ));
            }
            anchors.push(Anchor {
                what,
                anchor,
                declared: st.name.clone(),
            });
        }
        Ok(Ok(anchors))
    }

    /// The kernel's comparison: each anchored lemma must have its anchor's type (a checker's
    /// lemma proved by `exact @lemma`, closed by `Qed`). `Some(Failed)` when one does not.
    fn compare_with_anchors(
        &mut self,
        anchors: &[Anchor],
        base_name: &str,
        step: usize,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        for a in anchors {
            let check = format!("{}_same", a.anchor);
            let sentences = [
                format!(
                    "Lemma {check} : ltac:(let t := type of @{} in exact t).",
                    a.anchor
                ),
                format!("exact @{}.", a.declared),
                "Qed.".to_string(),
            ];
            let mut last = None;
            for s in &sentences {
                let r = self.worker.run(s, step_limit)?;
                if !r.ok() {
                    if self.stop(&r, step_limit) == Stop::TimedOut {
                        return Ok(Some(Verdict::TimedOut { step }));
                    }
                    return Ok(Some(Verdict::Failed {
                        step,
                        message: format!(
                            "{} means something else once the proposed lemmas are declared (the kernel does not identify it with the same text stated in the context alone)",
                            a.what
                        ),
                    }));
                }
                last = Some(r);
            }
            if !last.is_some_and(|r| ok_with(&r, base_name, &[])) {
                return Err(Fault::Protocol("an anchor comparison did not close".into()));
            }
        }
        Ok(None)
    }

    /// `Print Assumptions` (or the plugin's) of the proved lemma, parsed strictly.
    /// `Ok(Err(verdict))` when the output is not a clean list.
    fn assumptions(
        &mut self,
        plan: &Plan,
        step: usize,
        cfg: &CoqCheckConfig,
        step_limit: Duration,
    ) -> Result<Result<Vec<String>, Verdict>, Fault> {
        // Where the prover can print full paths, every assumption comes out by its kernel
        // name (no short name to resolve, and no infix keyword such as `lor` that `Locate`
        // cannot parse); `BackTo` undoes the flag with the attempt.
        if self.worker.fully_qualified {
            let r = self
                .worker
                .run("Set Printing Fully Qualified.", step_limit)?;
            if !r.ok() {
                return Ok(Err(Verdict::infra("cannot set Printing Fully Qualified")));
            }
        }
        let command = cfg.assumptions_command();
        let r = self
            .worker
            .run(&format!("{command} {}.", plan.statement.name), step_limit)?;
        if !r.ok() {
            // Interrupted or out of time: never a verdict on the proof, and never `Proved`.
            return Ok(Err(match self.stop(&r, step_limit) {
                Stop::TimedOut => Verdict::TimedOut { step },
                _ => Verdict::infra(format!(
                    "the assumptions check failed: {}",
                    error_message(&r.output)
                )),
            }));
        }
        if r.interrupted {
            return Ok(Err(Verdict::TimedOut { step }));
        }
        Ok(match parse_assumptions(&r.output) {
            Ok(Assumptions::Closed) => Ok(vec![]),
            Ok(Assumptions::Axioms { axioms, .. }) => Ok(axioms),
            Err(e) => Err(Verdict::Failed {
                step,
                message: format!("unsafe or unknown assumption: {e}"),
            }),
        })
    }

    /// Every assumption is matched by its qualified name, never by the short name Coq
    /// printed: a proposed lemma `h` excuses the constant the attempt declared as `h`, not an
    /// `M.h` that happens to print the same. Anything else must be an axiom the
    /// [`AxiomPolicy`] trusts that the base state (the context before this attempt) already
    /// had: an attempt can add nothing but its proposed lemmas. `Some(verdict)` refuses.
    fn audit_axioms(
        &mut self,
        plan: &Plan,
        axioms: &[String],
        step: usize,
        cfg: &CoqCheckConfig,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        if axioms.is_empty() {
            return Ok(None);
        }
        // Both are resolved in this very state (the printed names are relative to it).
        let proposed_q = match self.proposed_lemmas_qualified(plan, step_limit)? {
            Ok(q) => q,
            Err(v) => return Ok(Some(v)),
        };
        let foreign = match self.foreign_assumptions(axioms, &proposed_q, step, step_limit)? {
            Ok(foreign) => foreign,
            Err(v) => return Ok(Some(v)),
        };
        if foreign.is_empty() {
            return Ok(None);
        }
        if let Some(v) = self.untrusted_assumption(&foreign, step, step_limit)? {
            return Ok(Some(v));
        }
        self.back_to_base(cfg)?;
        self.assumption_missing_at_base(&foreign, step, step_limit)
    }

    /// The proposed lemmas' qualified names here: only the constants they declared excuse one.
    fn proposed_lemmas_qualified(
        &mut self,
        plan: &Plan,
        step_limit: Duration,
    ) -> Result<Result<Vec<String>, Verdict>, Fault> {
        let mut proposed_q: Vec<String> = vec![];
        for l in &plan.lemmas {
            let r = self
                .worker
                .run(&format!("Locate {}.", l.name), step_limit)?;
            match qualified_constant(&r.output) {
                Some(q) => proposed_q.push(q),
                None => {
                    return Ok(Err(Verdict::infra(format!(
                        "cannot resolve proposed lemma `{}`",
                        l.name
                    ))))
                }
            }
        }
        Ok(Ok(proposed_q))
    }

    /// The assumptions (short, qualified) that are no proposed lemma; an unresolved one refuses.
    fn foreign_assumptions(
        &mut self,
        axioms: &[String],
        proposed_q: &[String],
        step: usize,
        step_limit: Duration,
    ) -> Result<Result<Vec<(String, String)>, Verdict>, Fault> {
        let mut foreign = vec![];
        for a in axioms {
            let located = if self.worker.fully_qualified {
                Some(a.clone())
            } else {
                let r = self.worker.run(&format!("Locate {a}."), step_limit)?;
                qualified_constant(&r.output)
            };
            match located {
                Some(q) if proposed_q.contains(&q) => {}
                Some(q) => foreign.push((a.clone(), q)),
                None => {
                    return Ok(Err(Verdict::Failed {
                        step,
                        message: format!("cannot resolve assumption `{a}`"),
                    }))
                }
            }
        }
        Ok(Ok(foreign))
    }

    /// Refuse the first foreign assumption neither a trusted axiom nor a functor parameter.
    fn untrusted_assumption(
        &mut self,
        foreign: &[(String, String)],
        step: usize,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        for (short, q) in foreign {
            if self.axioms.trusts(q) || self.is_functor_parameter(q, step_limit)? {
                continue;
            }
            return Ok(Some(Verdict::Failed {
                step,
                message: format!(
                    "relies on `{short}` ({q}), which is neither a proposed lemma nor an axiom of the prover's library or of `allowed_axioms`"
                ),
            }));
        }
        Ok(None)
    }

    /// Refuse the first foreign assumption the base state lacks: an attempt adds no axiom.
    fn assumption_missing_at_base(
        &mut self,
        foreign: &[(String, String)],
        step: usize,
        step_limit: Duration,
    ) -> Result<Option<Verdict>, Fault> {
        for (short, q) in foreign {
            if !self.exists_at_base(q, step_limit)? {
                return Ok(Some(Verdict::Failed {
                    step,
                    message: format!("relies on `{short}` ({q}), which the context does not have"),
                }));
            }
        }
        Ok(None)
    }

    /// Does the base state (where the session is) have `q`? Remembered per loaded context.
    fn exists_at_base(&mut self, q: &str, step_limit: Duration) -> Result<bool, Fault> {
        let known = self.loaded.as_ref().and_then(|l| l.at_base.get(q).copied());
        let exists = match known {
            Some(b) => b,
            None => {
                let r = self.worker.run(&format!("Locate {q}."), step_limit)?;
                let b = qualified_constant(&r.output).as_deref() == Some(q);
                if let Some(l) = self.loaded.as_mut() {
                    l.at_base.insert(q.to_string(), b);
                }
                b
            }
        };
        Ok(exists)
    }

    /// The `hammer.` step: the fixed tactic list, then CoqHammer; the tactic that worked is
    /// re-run from the state before the step and recorded. With the pool's per-goal memory
    /// (`cfg.hammer_cache`, see [`crate::hammer_cache`]) a goal met before in the same scope is
    /// answered from it: the remembered tactic is re-run here and recorded only when Coq
    /// accepts it (otherwise the step is expanded afresh), a remembered failure fails again.
    fn hammer(
        &mut self,
        step: &Step,
        k: usize,
        name: &str,
        cfg: &CoqCheckConfig,
    ) -> Result<Result<Replacement, Verdict>, Fault> {
        let Some(handle) = cfg.hammer_cache.as_ref() else {
            let g = HammerGoal {
                step,
                k,
                name,
                cfg,
                cache: None,
            };
            return self.expand_hammer(g).map(|(r, _)| r);
        };
        let cache = &*handle.cache;
        let g = HammerGoal {
            step,
            k,
            name,
            cfg,
            cache: Some(cache),
        };
        cache.count(|c| c.calls += 1);
        let mut claim = None;
        if let Some(shown) = self.goal_in_full(g)? {
            let key = handle.key(&shown);
            match cache.lookup(key, wait_limit(cfg)) {
                Lookup::Hit(Outcome::Failed { timed_out, message }) => {
                    cache.count(|c| c.cache_failed += 1);
                    return Ok(Err(if timed_out {
                        Verdict::TimedOut { step: k }
                    } else {
                        Verdict::Failed { step: k, message }
                    }));
                }
                Lookup::Hit(Outcome::Closed { run, replacement }) => {
                    match self.replay_remembered(g, &run, replacement)? {
                        Replay::Decided(result) => return Ok(result),
                        Replay::Stale => {
                            // Refused here: expand afresh, and remember what that gives.
                            cache.count(|c| c.cache_stale += 1);
                            claim = cache.reclaim(key);
                        }
                    }
                }
                Lookup::Miss(c) => claim = c,
            }
        }
        // A fault drops the claim, which frees the goal for the next worker.
        let (result, outcome) = self.expand_hammer(g)?;
        if let (Some(c), Some(o)) = (claim, outcome) {
            c.finish(o);
        }
        Ok(result)
    }

    /// The goal in full (`Printing All`: no notation, implicit argument or coercion hides a
    /// difference between two goals), the key of the per-goal memory; `None` when Coq does
    /// not show it in our proof. These sentences only print; the provers' replacement is
    /// re-run from the state before them (`BackTo`).
    fn goal_in_full(&mut self, g: HammerGoal) -> Result<Option<String>, Fault> {
        let HammerGoal { name, cfg, .. } = g;
        let short = cfg.step_limit();
        let mut shown = None;
        if self.worker.run("Set Printing All.", short)?.ok() {
            let r = self.worker.run("Show.", short)?;
            if !self.worker.run("Unset Printing All.", short)?.ok() {
                return Err(Fault::Protocol("cannot unset Printing All".into()));
            }
            if r.ok() && ok_with(&r, name, &[name]) {
                shown = Some(r.output);
            }
        }
        Ok(shown)
    }

    /// A remembered closing sentence `run` re-run on this goal: only Coq's acceptance here
    /// makes the step closed (by the remembered `replacement`).
    fn replay_remembered(
        &mut self,
        g: HammerGoal,
        run: &str,
        replacement: String,
    ) -> Result<Replay, Fault> {
        let HammerGoal { k, name, cfg, .. } = g;
        let short = cfg.step_limit();
        let fixed_max = cfg
            .hammer
            .fixed_tactics
            .iter()
            .map(|t| t.timeout_s.max(1) as u64 + 1)
            .max()
            .unwrap_or(1);
        let r = self
            .worker
            .run(run, short.max(Duration::from_secs(fixed_max)))?;
        if r.interrupted {
            return Ok(Replay::Decided(Err(Verdict::TimedOut { step: k })));
        }
        let lim = short.max(Duration::from_secs(fixed_max));
        if !r.ok() && self.stop(&r, lim) == Stop::OutOfMemory {
            return Err(Fault::Lost("out of memory during hammer".into()));
        }
        if let Some(v) = self.untrusted(&r, &format!("step {k}: hammer's replacement")) {
            return Ok(Replay::Decided(Err(v)));
        }
        if !r.ok() {
            return Ok(Replay::Stale);
        }
        if !ok_with(&r, name, &[name]) {
            return Ok(Replay::Decided(Err(self.reject(format!(
                "step {k}: hammer's replacement left the proof"
            )))));
        }
        g.count(|c| c.cache_closed += 1);
        Ok(Replay::Decided(Ok(g.replacement(replacement))))
    }

    /// The expansion itself, and the outcome to remember (none for a rejection): the fixed
    /// tactic list, then CoqHammer, whose replacement is re-run from the state before the step.
    fn expand_hammer(&mut self, g: HammerGoal) -> Result<Expansion, Fault> {
        let before = self.worker.state;
        if let Some(done) = self.fixed_tactics(g)? {
            return Ok(done);
        }
        if !g.cfg.hammer.use_atp {
            return Ok(failed(Verdict::Failed {
                step: g.k,
                message: "hammer: no tactic of the fixed list closes the goal".into(),
            }));
        }
        let output = match self.call_atps(g)? {
            Ok(output) => output,
            Err(v) => return Ok(failed(v)),
        };
        let tactic = match atp_replacement(&self.rules, g.k, &output) {
            Ok(t) => t,
            Err(v) => return Ok(failed(v)),
        };
        self.replay_atp_replacement(g, before, tactic)
    }

    /// The fixed tactic list, each inside `solve [ timeout … ]`: the expansion by the first
    /// that closes the goal; `None` when none does.
    fn fixed_tactics(&mut self, g: HammerGoal) -> Result<Option<Expansion>, Fault> {
        let HammerGoal { k, name, cfg, .. } = g;
        let fixed_start = Instant::now();
        let fixed_s = || fixed_start.elapsed().as_secs_f64();
        for t in &cfg.hammer.fixed_tactics {
            let text = format!("solve [ timeout {} {} ].", t.timeout_s.max(1), t.tactic);
            let r = self
                .worker
                .run(&text, Duration::from_secs(t.timeout_s.max(1) as u64 + 1))?;
            let own_limit = Duration::from_secs(t.timeout_s.max(1) as u64);
            if r.interrupted || (!r.ok() && self.stop(&r, own_limit) == Stop::OutOfMemory) {
                // Our own tactic list must never leave the worker in doubt.
                return Err(Fault::Protocol(format!(
                    "fixed tactic `{}` had to be interrupted",
                    t.tactic
                )));
            }
            if r.ok() {
                let secs = fixed_s();
                g.count(|c| c.fixed_s += secs);
                if !ok_with(&r, name, &[name]) {
                    return Ok(Some((
                        Err(self.reject(format!("step {k}: hammer left the proof"))),
                        None,
                    )));
                }
                g.count(|c| c.fixed_closed += 1);
                let replacement = format!("{}.", t.tactic);
                return Ok(Some(g.closed(text, replacement)));
            }
        }
        let secs = fixed_s();
        g.count(|c| c.fixed_s += secs);
        Ok(None)
    }

    /// CoqHammer's ATPs on the goal (`Timeout … hammer.`): what it printed, or the step's
    /// verdict when it found nothing.
    fn call_atps(&mut self, g: HammerGoal) -> Result<Result<String, Verdict>, Fault> {
        let HammerGoal { k, cfg, .. } = g;
        let h = &cfg.hammer;
        let limit = Duration::from_secs(h.timeout_s as u64);
        // CoqHammer's own time limits break under a default timeout ("CoqHammer bug: …
        // Control.Timeout"), so lift it around the call and restore it right after.
        let short = cfg.step_limit();
        let unset = self.worker.run("Unset Default Timeout.", short)?;
        if !unset.ok() {
            return Err(Fault::Protocol("cannot unset the default timeout".into()));
        }
        let atp_start = Instant::now();
        g.count(|c| c.atp_calls += 1);
        let r = self
            .worker
            .run(&format!("Timeout {} hammer.", h.timeout_s), limit);
        let secs = atp_start.elapsed().as_secs_f64();
        g.count(|c| c.atp_s += secs);
        let r = r?;
        let reset = self.worker.run(
            &format!("Set Default Timeout {}.", cfg.step_timeout_s.max(1)),
            short,
        )?;
        if !reset.ok() {
            return Err(Fault::Protocol("cannot restore the default timeout".into()));
        }
        if r.ok() {
            return Ok(Ok(r.output));
        }
        // CoqHammer reports the `Timeout` around it as "CoqHammer bug: please report:
        // Control.Timeout": the call ran out of time too, if it ran its whole limit.
        let ran_out = r.output.contains("Control.Timeout") && r.elapsed + TIMEOUT_SLACK >= limit;
        match self.stop(&r, limit) {
            Stop::TimedOut => return Ok(Err(Verdict::TimedOut { step: k })),
            Stop::OutOfMemory => return Err(Fault::Lost("out of memory during hammer".into())),
            Stop::Refused if ran_out => return Ok(Err(Verdict::TimedOut { step: k })),
            Stop::Refused => {}
        }
        Ok(Err(Verdict::Failed {
            step: k,
            message: format!("hammer: {}", error_message(&r.output)),
        }))
    }

    /// CoqHammer's replacement `tactic` re-run from the state `before` the step, so the
    /// recorded proof is known to work without ATPs.
    fn replay_atp_replacement(
        &mut self,
        g: HammerGoal,
        before: u64,
        tactic: String,
    ) -> Result<Expansion, Fault> {
        let HammerGoal { k, name, cfg, .. } = g;
        let short = cfg.step_limit();
        let back = self
            .worker
            .run(&format!("BackTo {before}."), cfg.step_limit())?;
        if back.prompt.state != before || !ok_with(&back, name, &[name]) {
            return Err(Fault::Protocol("BackTo inside the proof failed".into()));
        }
        let r = self.worker.run(&tactic, cfg.step_limit())?;
        if let Some(v) = self.untrusted(&r, &format!("step {k}: hammer's replacement")) {
            return Ok((Err(v), None));
        }
        if let Some(v) = self.failure(&r, k, "hammer's replacement", short) {
            return Ok(failed(v));
        }
        if !ok_with(&r, name, &[name]) {
            return Ok((
                Err(self.reject(format!("step {k}: hammer's replacement left the proof"))),
                None,
            ));
        }
        g.count(|c| c.atp_closed += 1);
        // Remembered inside `solve [ … ]`, like the fixed tactics: a replay closes the goal
        // or fails.
        let run = format!("solve [ {} ].", tactic.trim_end().trim_end_matches('.'));
        Ok(g.closed(run, tactic))
    }
}

/// What [`Session::close_proof`] needs from the attempt's earlier steps: the anchors, the
/// context's top-level prompt name, the hammer replacements and the attempt's start.
struct Closing<'a> {
    anchors: &'a [Anchor],
    base_name: &'a str,
    replacements: Vec<Replacement>,
    start: Instant,
}

/// One `hammer.` step as the stages of [`Session::hammer`] see it: the step, `k`-th of the
/// proof `name`, the settings, and the pool's per-goal memory when there is one.
#[derive(Clone, Copy)]
struct HammerGoal<'a> {
    step: &'a Step,
    k: usize,
    name: &'a str,
    cfg: &'a CoqCheckConfig,
    cache: Option<&'a HammerCache>,
}

impl HammerGoal<'_> {
    /// Adds to the pool's hammer counts, when there is a pool memory.
    fn count(&self, f: impl FnOnce(&mut prod_check::HammerStats)) {
        if let Some(c) = self.cache {
            c.count(f);
        }
    }

    /// The step's replacement by `tactic`.
    fn replacement(&self, tactic: String) -> Replacement {
        Replacement {
            step: self.k,
            range: self.step.range.clone(),
            tactic,
        }
    }

    /// The step closed by `replacement`, remembered with `run`, the sentence a replay re-runs.
    fn closed(&self, run: String, replacement: String) -> Expansion {
        (
            Ok(self.replacement(replacement.clone())),
            Some(Outcome::Closed { run, replacement }),
        )
    }
}

/// A `hammer.` step's expansion: its result, and the outcome to remember (none for a
/// rejection).
type Expansion = (Result<Replacement, Verdict>, Option<Outcome>);

/// A failed expansion, remembered when the verdict is the hammer's answer on the goal
/// ([`Outcome::of_failure`]).
fn failed(v: Verdict) -> Expansion {
    let o = Outcome::of_failure(&v);
    (Err(v), o)
}

/// What re-running a remembered closing sentence on the goal gave.
enum Replay {
    /// Coq decided the step here: closed by the remembered replacement, or its verdict.
    Decided(Result<Replacement, Verdict>),
    /// Coq refused the sentence here: expand the step afresh.
    Stale,
}

/// The tactic CoqHammer printed in `output` for step `k`, checked against the attempt's
/// `rules`; else the step's verdict.
fn atp_replacement(rule_set: &rules::RuleSet, k: usize, output: &str) -> Result<String, Verdict> {
    let Some(tactic) = hammer_replacement(output) else {
        return Err(Verdict::Failed {
            step: k,
            message: "hammer succeeded but printed no replacement tactic".into(),
        });
    };
    match rules::check_replacement(rule_set, &tactic) {
        Ok(t) => Ok(t),
        Err(_) => Err(Verdict::Failed {
            step: k,
            message: format!("hammer printed an unusable tactic `{tactic}`"),
        }),
    }
}

/// The settings every context gets after loading: the per-step time limit (applies to `Qed`
/// too) and CoqHammer's limits; last, the term audit's mark (everything the environment holds
/// now is the trusted base; what an attempt adds is audited).
fn settings(cfg: &CoqCheckConfig, hammer: bool) -> Vec<String> {
    // `Set Silent` stops coqtop from printing the goals after every tactic (the checker never
    // reads them); errors, `Print Assumptions` and hammer's answer are still printed.
    let mut s = vec![
        crate::config::AFTER_CONTEXT.to_string(),
        "Set Silent.".to_string(),
        format!("Set Default Timeout {}.", cfg.step_timeout_s.max(1)),
    ];
    if hammer {
        s.push(format!(
            "Set Hammer ATPLimit {}.",
            cfg.hammer.atp_limit_s.max(1)
        ));
        s.push(format!("Set Hammer GSMode {}.", cfg.hammer.gs_mode.max(1)));
        s.push(format!(
            "Set Hammer SAutoLimit {}.",
            cfg.hammer.sauto_limit_s
        ));
        s.push(format!(
            "Set Hammer ReconstrLimit {}.",
            cfg.hammer.reconstr_limit_s.max(1)
        ));
        for p in &cfg.hammer.unset_provers {
            s.push(format!("Unset Hammer {p}."));
        }
    }
    if cfg.plugin.is_some() {
        s.push(crate::plugin::MARK_SENTENCE.to_string());
    }
    s
}

/// Why a sentence stopped, from what the checker itself knows: its watchdog fired, the
/// sentence ran for its whole time limit, the process held the address space it is given
/// while the sentence ran. Coq's error is only a hint that must agree with that knowledge,
/// since a tactic can print any text (`fail "x\nError: Out of memory."`, a string built at
/// run time): for an out-of-memory, Coq's own error line must be the only one
/// ([`crate::protocol::reports_out_of_memory`]) *and* this sentence must have held at least
/// half the limit ([`crate::worker::Memory::sentence_peak_mb`]; a peak left by an earlier
/// sentence or attempt does not count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Coq refused the sentence (a proof failure).
    Refused,
    /// Out of time: the watchdog's SIGINT, or Coq's own timeout after the full limit.
    TimedOut,
    /// Out of memory at the checker's limit (an infrastructure failure).
    OutOfMemory,
}

/// Coq's own timeout fires after the limit it was given; allow for the round trip measuring a
/// little less than Coq's clock.
const TIMEOUT_SLACK: Duration = Duration::from_millis(250);

impl Session {
    /// [`Stop`] of a failed sentence that was given `limit`.
    fn stop(&mut self, r: &Reply, limit: Duration) -> Stop {
        if r.interrupted {
            return Stop::TimedOut;
        }
        if is_timeout(&r.output) && r.elapsed + TIMEOUT_SLACK >= limit {
            return Stop::TimedOut;
        }
        if reports_out_of_memory(&r.output) {
            let held = Memory::sentence_peak_mb(r.memory_before, self.worker.memory());
            if crate::worker::near_memory_limit(held, self.memory_limit_mb) {
                return Stop::OutOfMemory;
            }
        }
        Stop::Refused
    }

    /// `None` if the sentence succeeded; else the verdict for a failed sentence at `step` that
    /// was given `limit`.
    fn failure(&mut self, r: &Reply, step: usize, what: &str, limit: Duration) -> Option<Verdict> {
        if r.ok() {
            return None;
        }
        Some(match self.stop(r, limit) {
            Stop::TimedOut => Verdict::TimedOut { step },
            Stop::OutOfMemory => Verdict::infra(format!("out of memory at step {step}")),
            Stop::Refused => {
                let msg = error_message(&r.output);
                Verdict::Failed {
                    step,
                    message: if what.is_empty() {
                        msg
                    } else {
                        format!("{what}: {msg}")
                    },
                }
            }
        })
    }
}

/// What the plugin said of a proof's universe constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ProofUniverses {
    /// Decided: the constraints added (`unknown (…)` when it could not tell).
    Decided(Vec<String>),
    /// The statement has levels of its own: compare with it restated.
    Compare,
    /// A universe-polymorphic lemma: compare its universe context.
    Polymorphic,
}

impl ProofUniverses {
    /// The answer line `<command> <nonce> none|added: c1; c2|unknown: why|compare|polymorphic`
    /// in `output`; anything else is an unknown.
    fn read(output: &str, command: &str, nonce: &str) -> ProofUniverses {
        let head = format!("{command} {nonce} ");
        let Some(rest) = output
            .lines()
            .find_map(|l| l.trim().strip_prefix(head.as_str()))
        else {
            return ProofUniverses::Decided(vec!["unknown (no answer)".into()]);
        };
        match rest.trim() {
            "none" => ProofUniverses::Decided(vec![]),
            "compare" => ProofUniverses::Compare,
            "polymorphic" => ProofUniverses::Polymorphic,
            r => ProofUniverses::Decided(
                match (r.strip_prefix("added: "), r.strip_prefix("unknown: ")) {
                    (Some(cs), _) => cs.split("; ").map(str::to_string).collect(),
                    (_, Some(why)) => vec![format!("unknown ({why})")],
                    _ => vec![format!("unknown ({r})")],
                },
            ),
        }
    }
}

/// `Locate Ltac Foo.` → `Ltac Some.Path.Foo` (first line) names the tactic `Foo`.
fn names_ltac(output: &str, word: &str) -> bool {
    let Some(first) = output.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return false;
    };
    let Some(q) = first.strip_prefix("Ltac ") else {
        return false;
    };
    let q = q.trim();
    q.split_whitespace().count() == 1 && q.rsplit('.').next() == Some(word)
}

/// `Locate x.` → `Constant Q` → `Q`. Coq's printer puts a long `Q` on the next line
/// (`Constant\n  Flocq.Prop.Double_rounding.Sec1.Sec2.….lemma`): the first two words.
fn qualified_constant(output: &str) -> Option<String> {
    let mut words = output.split_whitespace();
    (words.next()? == "Constant").then_some(())?;
    Some(words.next()?.to_string())
}

/// CoqHammer's `Replace the hammer tactic with:` followed by the tactic on the next line, in
/// a form that Coq parses again (see [`replayable`]).
fn hammer_replacement(output: &str) -> Option<String> {
    let i = output.rfind("Replace the hammer tactic with:")?;
    let rest = &output[i + "Replace the hammer tactic with:".len()..];
    let line = rest.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.trim_end_matches("</infomsg>").trim();
    line.ends_with('.').then(|| replayable(line))
}

/// CoqHammer 1.3 for Coq 8.16 prints `srun eauto use: l.`, which its own grammar does not
/// parse (`srun` takes a tactic, which swallows what follows: "[ltac_use_default] expected
/// after [tactic]"); `srun (eauto) use: l.` is the same tactic and parses. Every other
/// reconstruction tactic (`sauto`, `hauto`, `scongruence`, `sfirstorder`, … with `use:`,
/// `unfold:`, `inv:` …) is printed in a form that parses and is kept as it is.
fn replayable(tactic: &str) -> String {
    let Some(rest) = tactic.strip_prefix("srun ") else {
        return tactic.to_string();
    };
    let rest = rest.trim_start();
    if rest.starts_with('(') {
        return tactic.to_string();
    }
    let body = rest.strip_suffix('.').unwrap_or(rest);
    // The inner tactic runs up to the first option (a word ending in `:`).
    let words: Vec<&str> = body.split_whitespace().collect();
    let cut = words
        .iter()
        .position(|w| {
            w.len() > 1
                && w.ends_with(':')
                && w[..w.len() - 1].chars().all(|c| c.is_ascii_alphabetic())
        })
        .unwrap_or(words.len());
    if cut == 0 {
        return tactic.to_string();
    }
    let inner = words[..cut].join(" ");
    let opts = words[cut..].join(" ");
    if opts.is_empty() {
        format!("srun ({inner}).")
    } else {
        format!("srun ({inner}) {opts}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugins_universe_answers() {
        use ProofUniverses::*;
        let read = |out: &str| ProofUniverses::read(out, "ProdProofUniverses", "n1");
        assert_eq!(read("ProdProofUniverses n1 none\n"), Decided(vec![]));
        assert_eq!(read("ProdProofUniverses n1 compare\n"), Compare);
        assert_eq!(read("ProdProofUniverses n1 polymorphic\n"), Polymorphic);
        assert_eq!(
            read("ProdProofUniverses n1 added: a.1 = b.2; a.1 < c.3\n"),
            Decided(vec!["a.1 = b.2".into(), "a.1 < c.3".into()])
        );
        assert_eq!(
            read("ProdProofUniverses n1 unknown: levels moved\n"),
            Decided(vec!["unknown (levels moved)".into()])
        );
        // Another nonce, or no answer, is never "none".
        assert_ne!(read("ProdProofUniverses n2 none\n"), Decided(vec![]));
        assert_ne!(read(""), Decided(vec![]));
    }

    #[test]
    fn parse_helpers() {
        assert_eq!(
            qualified_constant("Constant Coq.Logic.Classical_Prop.classic\n"),
            Some("Coq.Logic.Classical_Prop.classic".into())
        );
        assert_eq!(qualified_constant("No object of basename x\n"), None);
        assert_eq!(
            qualified_constant("Constant\n  M.Sec_a.Sec_b.a_long_lemma_name\n"),
            Some("M.Sec_a.Sec_b.a_long_lemma_name".into())
        );
        assert_eq!(qualified_constant("Constant\n"), None);
        assert_eq!(
            hammer_replacement("<infomsg>Replace the hammer tactic with:\n\thauto use: rev_involutive.</infomsg>\n"),
            Some("hauto use: rev_involutive.".into())
        );
        assert_eq!(
            hammer_replacement(
                "Replace the hammer tactic with:\n\tsrun eauto use: rev_involutive.\n"
            ),
            Some("srun (eauto) use: rev_involutive.".into())
        );
        assert_eq!(replayable("srun (eauto) use: a."), "srun (eauto) use: a.");
        assert_eq!(
            replayable("srun eauto with arith use: a, b unfold: c."),
            "srun (eauto with arith) use: a, b unfold: c."
        );
        assert_eq!(replayable("srun eauto."), "srun (eauto).");
        assert_eq!(replayable("sauto use: a inv: b."), "sauto use: a inv: b.");
    }
}

#[cfg(test)]
mod proof_term_tests {
    use super::expand_proof_term;

    #[test]
    fn proof_term_is_spelled_out() {
        let e = expand_proof_term("Proof (fun x => x).").unwrap();
        assert_eq!(e, ["Proof.", "exact ((fun x => x)).", "Qed."]);
        assert!(expand_proof_term("Proof.").is_none());
        assert!(expand_proof_term("Proof using A B.").is_none());
        assert!(expand_proof_term("Proof with auto.").is_none());
        assert!(expand_proof_term("Proofs.").is_none());
        assert!(expand_proof_term("intros.").is_none());
    }
}

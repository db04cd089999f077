//! An adversary that keeps working: seeded scenarios that move the project's attack
//! constructs between the places untrusted text can hold them (a proof, a proposed lemma, a
//! node's statement, a let-binder of either, the context's admitted constants) and vary their
//! layout (blanks, line breaks, comments, Unicode in comments, qualified names), each run
//! through the pipeline the product runs ([`crate::judge`], as `prod serve`'s `/v1/assemble`
//! runs it): every node checked by the real Coq, the proof tree solved, a globally correct
//! root assembled and re-checked cold, the canary alarm; and again through the two-step
//! command-line path (verdict lines as `prod check --json` prints them, solved as `prod tree
//! solve --verdicts` reads them).
//!
//! Every attack's root is a *canary* (a statement that is false, or unprovable without an
//! axiom: `False`, `0 = 1`, `forall n, n = S n`, an equation between functions out of an empty
//! SProp type): it must never be globally correct nor pass the final check, and no attack node
//! may end in `infra` (text must not steer what is counted). Beside them, honest look-alikes
//! of the same shapes must be proved end to end, so the defences are not simply refusing
//! everything. Used by the test suite (a couple of minutes) and by `prod bench adversary`
//! (as long as asked).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use prod_check::{CheckRequest, Verdict, VerdictLine};
use prod_check_coq::CoqChecker;
use prod_core::tree::GlobalVerdict;
use prod_core::ConditionalProof;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::{decided_node, judge, CoqFinal, Forest, ProverKind, Tree};

/// The imports every scenario starts from.
const IMPORTS: &str = "From Coq Require Import Arith List Lia.";

/// Helpers for Coq 8.16.1's ill-guarded fixpoint (rocq#20455).
const GUARD_CONTEXT: &str = "Definition not_zero n := match n with 0 => False | S _ => True end.\n\
Definition not_one n := match n with 0 => False | S n => not_zero n end.";

/// A fixpoint of type `forall n, not_zero n -> False` that Coq 8.16.1's guard checker (and
/// `coqchk`) accept: with it, `False` is proved.
pub const ILL_GUARDED_FIX: &str = "fix issue (n : nat) : not_zero n -> False := match n as n0 return (not_zero n0 -> False) with | O => fun h => h | S subn => fun _ => \
let f := fun (b : bool) (e : b = true) (x : nat) (Hx : not_one x) => let arg := match (if b then x else subn) with O => subn | S k => k end in \
issue arg (@eq_ind_r bool true (fun b0 : bool => not_zero (match (if b0 then x else subn) with O => subn | S k => k end)) \
(match x as n0 return (not_one n0 -> not_zero (match n0 with O => subn | S k => k end)) with | O => fun Hx0 => False_ind _ Hx0 | S n0 => fun Hx0 => Hx0 end Hx) b e) \
in f true eq_refl 5 I end";

/// [`ILL_GUARDED_FIX`]'s functional: the same body under a `fun issue` that a term builder can
/// turn into the fixpoint. It holds no fixpoint itself.
pub const ILL_GUARDED_FUNCTIONAL: &str = "fun (issue : forall n : nat, not_zero n -> False) (n : nat) => match n as n0 return (not_zero n0 -> False) with | O => fun h => h | S subn => fun _ => \
let f := fun (b : bool) (e : b = true) (x : nat) (Hx : not_one x) => let arg := match (if b then x else subn) with O => subn | S k => k end in \
issue arg (@eq_ind_r bool true (fun b0 : bool => not_zero (match (if b0 then x else subn) with O => subn | S k => k end)) \
(match x as n0 return (not_one n0 -> not_zero (match n0 with O => subn | S k => k end)) with | O => fun Hx0 => False_ind _ Hx0 | S n0 => fun Hx0 => Hx0 end Hx) b e) \
in f true eq_refl 5 I end";

/// The imports of the term-builder scenarios (Ltac2, whose proof mode becomes the default).
const LTAC2_IMPORTS: &str =
    "From Coq Require Import Arith List Lia. From Ltac2 Require Import Ltac2.";

/// A context that defines a term builder: `fixify` turns `fun f => body` into `fix f := body`
/// (library text may hold such an Ltac2 function; a proof that calls it names no refused word).
const BUILDER_CONTEXT: &str = "Definition not_zero n := match n with 0 => False | S _ => True end.\n\
Definition not_one n := match n with 0 => False | S n => not_zero n end.\n\
Ltac2 fixify (f : constr) := match Constr.Unsafe.kind f with \
| Constr.Unsafe.Lambda b body => Constr.Unsafe.make (Constr.Unsafe.Fix (Array.make 1 0) 0 (Array.make 1 b) (Array.make 1 body)) \
| _ => f end.";

/// An equation between two functions out of the empty SProp type that only rocq#21690 (Coq
/// 8.16.1's conversion) proves: unprovable without functional extensionality.
const SPROP_EQUATION: &str = "(fun x : sEmpty => (match x return nat -> nat with end) 0) = (fun x : sEmpty => (match x return nat -> nat with end) 1)";

/// One node of a scenario's tree.
#[derive(Clone, Debug)]
pub struct ScenarioNode {
    pub statement: String,
    pub proof: String,
}

/// A tree to check: the root first, then the nodes that prove its proposals.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// `family/placement#seed` for messages.
    pub id: String,
    /// An honest look-alike (must be proved), or an attack (its root is a canary).
    pub honest: bool,
    pub imports: String,
    pub context: String,
    pub nodes: Vec<ScenarioNode>,
}

/// What the whole path said about a scenario.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub local: Vec<Verdict>,
    pub root: GlobalVerdict,
    /// The cold re-check, when the root was globally correct.
    pub final_check: Option<Verdict>,
    /// The root's global verdict through the two-step command-line path (verdict lines).
    pub two_step: GlobalVerdict,
    /// How many nodes raised the canary alarm.
    pub alarms: usize,
}

impl Outcome {
    /// Did the root count as proved (globally correct and through the final check)?
    pub fn proved(&self) -> bool {
        self.root == GlobalVerdict::Correct
            && self.final_check.as_ref().is_some_and(Verdict::is_proved)
    }

    /// What is wrong with this outcome for `s`, if anything.
    pub fn problem(&self, s: &Scenario) -> Option<String> {
        if s.honest {
            return (!self.proved() || self.two_step != GlobalVerdict::Correct).then(|| {
                format!(
                    "honest look-alike {} not proved: local {:?}, root {:?}, two-step root {:?}, final {:?}",
                    s.id, self.local, self.root, self.two_step, self.final_check
                )
            });
        }
        if self.root == GlobalVerdict::Correct
            || self.two_step == GlobalVerdict::Correct
            || self.final_check.as_ref().is_some_and(Verdict::is_proved)
        {
            return Some(format!(
                "ATTACK ACCEPTED {}: local {:?}, root {:?}, two-step root {:?}, final {:?}\n{:#?}",
                s.id, self.local, self.root, self.two_step, self.final_check, s.nodes
            ));
        }
        if let Some(v) = self
            .local
            .iter()
            .find(|v| matches!(v, Verdict::Infra { .. }))
        {
            return Some(format!("attack {} ended in infra: {v:?}", s.id));
        }
        None
    }
}

/// `n` scenarios from `seed`: every attack family in every placement it has, then random
/// layouts of them, with the honest look-alikes among them.
pub fn scenarios(seed: u64, n: usize) -> Vec<Scenario> {
    let mut rng = StdRng::seed_from_u64(seed);
    let base = base_scenarios();
    let mut out: Vec<Scenario> = base.clone();
    let (look_alikes, attacks): (Vec<&Scenario>, Vec<&Scenario>) =
        base.iter().partition(|s| s.honest);
    let mut i = 0u64;
    while out.len() < n {
        // A third of the variations are look-alikes: layout must not break honest proofs.
        let pool = if rng.gen_bool(1.0 / 3.0) {
            &look_alikes
        } else {
            &attacks
        };
        let s = (*pool.choose(&mut rng).expect("scenarios")).clone();
        out.push(vary(s, &mut rng, seed.wrapping_add(i)));
        i += 1;
    }
    out.truncate(n);
    out
}

fn node(statement: &str, proof: &str) -> ScenarioNode {
    ScenarioNode {
        statement: statement.to_string(),
        proof: proof.to_string(),
    }
}

fn attack(id: &str, imports: &str, context: &str, nodes: Vec<ScenarioNode>) -> Scenario {
    Scenario {
        id: id.to_string(),
        honest: false,
        imports: imports.to_string(),
        context: context.to_string(),
        nodes,
    }
}

fn honest(id: &str, imports: &str, context: &str, nodes: Vec<ScenarioNode>) -> Scenario {
    Scenario {
        honest: true,
        ..attack(id, imports, context, nodes)
    }
}

/// The canaries an attack's root states, and how a proof of `False` closes each.
const CANARIES: &[(&str, &str)] = &[
    ("Lemma root : False.", ""),
    ("Lemma root : 0 = 1.", "exfalso. "),
    (
        "Lemma root : forall n : nat, n = S n.",
        "intros n. exfalso. ",
    ),
];

// Long, and one table of data, kept whole so that every scenario reads in one place.
/// Every family in every placement, over every canary; honest look-alikes of each shape.
fn base_scenarios() -> Vec<Scenario> {
    let mut out = vec![];
    let fix_lemma = format!("Lemma l (F := {ILL_GUARDED_FIX}) : forall n, not_zero n -> False.");
    let fix_type =
        format!("Lemma l : let F := {ILL_GUARDED_FIX} in forall n, not_zero n -> False.");
    let plain_lemma = "Lemma l : forall n, not_zero n -> False.";
    let sprop_imports = "From Coq Require Import Arith StrictProp.";
    for (k, (canary, close)) in CANARIES.iter().enumerate() {
        let uses_l = format!(
            "<use_invoke> <invoke> {} </invoke> {close}exact (l 1 I).",
            "{L}"
        );
        let root = |l: &str| node(canary, &uses_l.replace("{L}", l));
        // The root uses `l`, proposed plainly; its child proves `l` with `proof`.
        let via_child = |id: String, context: &str, proof: &str| {
            attack(
                &id,
                IMPORTS,
                context,
                vec![root(plain_lemma), node(plain_lemma, proof)],
            )
        };
        // Guard: the fixpoint in a proposal's let-binder, in its type, in the child's proof,
        // in the root's own proof.
        out.push(attack(
            &format!("guard/let-binder/{k}"),
            IMPORTS,
            GUARD_CONTEXT,
            vec![root(&fix_lemma), node(&fix_lemma, "<no_invoke> exact F.")],
        ));
        out.push(attack(
            &format!("guard/let-in-type/{k}"),
            IMPORTS,
            GUARD_CONTEXT,
            vec![
                root(&fix_type),
                node(&fix_type, "<no_invoke> intros F. exact F."),
            ],
        ));
        out.push(via_child(
            format!("guard/child-proof/{k}"),
            GUARD_CONTEXT,
            &format!("<no_invoke> exact ({ILL_GUARDED_FIX})."),
        ));
        out.push(attack(
            &format!("guard/root-proof/{k}"),
            IMPORTS,
            GUARD_CONTEXT,
            vec![node(
                canary,
                &format!("<no_invoke> {close}exact (({ILL_GUARDED_FIX}) 1 I)."),
            )],
        ));
        out.push(via_child(
            format!("guard/fix-tactic/{k}"),
            GUARD_CONTEXT,
            "<no_invoke> fix IH 1. exact IH.",
        ));
        // Built at run time: the context (library text) defines an Ltac2 function that turns
        // a lambda into a fixpoint with `Constr.Unsafe`; the proof, which names no refused word,
        // builds rocq#20455's fixpoint from a fixpoint-free functional, in the root's proof and
        // in a child's. Only the term audit sees it.
        let built = format!("let f := fixify constr:({ILL_GUARDED_FUNCTIONAL}) in exact ($f 1 I).");
        // Ltac2 has no `exfalso`.
        let close2 = close.replace("exfalso.", "apply False_ind.");
        out.push(attack(
            &format!("built/context-builder-root/{k}"),
            LTAC2_IMPORTS,
            BUILDER_CONTEXT,
            vec![node(canary, &format!("<no_invoke> {close2}{built}"))],
        ));
        out.push(attack(
            &format!("built/context-builder-child/{k}"),
            LTAC2_IMPORTS,
            BUILDER_CONTEXT,
            vec![
                node(
                    canary,
                    &format!(
                        "<use_invoke> <invoke> {plain_lemma} </invoke> {close2}exact (l 1 I)."
                    ),
                ),
                node(
                    plain_lemma,
                    &format!(
                        "<no_invoke> let f := fixify constr:({ILL_GUARDED_FUNCTIONAL}) in exact $f."
                    ),
                ),
            ],
        ));
        // Kernel-deferring tactics, plain and qualified, in the root and in a child.
        out.push(attack(
            &format!("deferring/root/{k}"),
            IMPORTS,
            "",
            vec![node(
                canary,
                &format!("<no_invoke> {close}exact_no_check I."),
            )],
        ));
        out.push(via_child(
            format!("deferring/qualified-child/{k}"),
            GUARD_CONTEXT,
            "<no_invoke> Coq.Init.Ltac.exact_no_check (fun n (h : not_zero n) => I).",
        ));
        // The context's admitted constants, directly and through a child.
        for (c, ctx) in [
            ("admitted", "Lemma oracle : False.\nAdmitted."),
            ("axiom", "Axiom oracle : False."),
            ("parameter", "Parameter oracle : False."),
            (
                "module",
                "Module M.\nLemma oracle : False.\nAdmitted.\nEnd M.\nImport M.",
            ),
        ] {
            let ctx = format!("{GUARD_CONTEXT}\n{ctx}");
            out.push(attack(
                &format!("context/{c}/{k}"),
                IMPORTS,
                &ctx,
                vec![node(
                    canary,
                    &format!("<no_invoke> {close}destruct oracle."),
                )],
            ));
            out.push(via_child(
                format!("context/{c}-child/{k}"),
                &ctx,
                "<no_invoke> destruct oracle.",
            ));
        }
        // Text that names an infrastructure failure or a time-out, then fails.
        out.push(attack(
            &format!("kind/printed-oom/{k}"),
            IMPORTS,
            "",
            vec![node(
                canary,
                "<no_invoke> idtac \"Error: Out of memory.\"; fail.",
            )],
        ));
        out.push(attack(
            &format!("kind/own-timeout/{k}"),
            IMPORTS,
            "",
            vec![node(canary, "<no_invoke> timeout 1 (do 100000000 idtac).")],
        ));
        // t0 against the blocks.
        out.push(attack(
            &format!("t0/no-invoke-proposes/{k}"),
            IMPORTS,
            GUARD_CONTEXT,
            vec![node(
                canary,
                &format!("<no_invoke> <invoke> {plain_lemma} </invoke> {close}exact (l 1 I)."),
            )],
        ));
    }
    // SProp: the equation as the root, proved directly or through a proposal.
    let sprop_root = format!("Lemma root : {SPROP_EQUATION}.");
    let sprop_lemma = format!("Lemma e : {SPROP_EQUATION}.");
    for (p, proof) in [
        ("exact", "exact eq_refl."),
        ("apply", "apply eq_refl."),
        ("reflexivity", "reflexivity."),
    ] {
        out.push(attack(
            &format!("sprop/{p}"),
            sprop_imports,
            "",
            vec![node(&sprop_root, &format!("<no_invoke> {proof}"))],
        ));
        out.push(attack(
            &format!("sprop/{p}-child"),
            sprop_imports,
            "",
            vec![
                node(
                    &sprop_root,
                    &format!("<use_invoke> <invoke> {sprop_lemma} </invoke> exact e."),
                ),
                node(&sprop_lemma, &format!("<no_invoke> {proof}")),
            ],
        ));
    }
    // Name capture: a proposal named like a constant of the statement.
    out.push(attack("capture/proposal-named-false", IMPORTS, "", vec![node(
        "Lemma root : if false then True else False.",
        "<use_invoke> <invoke> Lemma false : {True} + {False}. </invoke> destruct false as [t|f]; [exact I | destruct f].",
    )]));
    out.push(attack("capture/second-proposal", IMPORTS, "", vec![node(
        "Lemma root : if negb true then True else False.",
        "<use_invoke> <invoke> Lemma aux : True. </invoke> <invoke> Lemma negb : bool -> {True} + {False}. </invoke> destruct (negb true) as [t|f]; [exact I | destruct f].",
    )]));
    // Universe levels across nodes: the child's proof needs `A ≤ B`, the parent uses the
    // proposal where `B < A` (Hurkens' paradox). Each node is locally correct.
    let hurkens = "From Coq Require Import Arith List Lia. Require Coq.Logic.Hurkens.";
    let universe_lemma = "Lemma h : forall A : Type, {B : Type & A = B}.";
    out.push(attack("universe/hurkens", hurkens, "", vec![
        node("Lemma root : False.", &format!("<use_invoke> <invoke> {universe_lemma} </invoke> destruct (h Type) as [B HB]. exact (Hurkens.TypeNeqSmallType.paradox B HB).")),
        node(universe_lemma, "<no_invoke> intros A. exists A. reflexivity."),
    ]));
    // The same where the lemma's levels and the proof's constraints live in its own universe
    // context (`Set Universe Polymorphism`).
    let polymorphic = "Set Universe Polymorphism.";
    out.push(attack("universe/hurkens-polymorphic", hurkens, polymorphic, vec![
        node("Lemma root : False.", &format!("<use_invoke> <invoke> {universe_lemma} </invoke> destruct (h Type) as [B HB]. exact (Hurkens.TypeNeqSmallType.paradox B HB).")),
        node(universe_lemma, "<no_invoke> intros A. exists A. reflexivity."),
    ]));
    // A statement with one level of its own, tied by the child's proof to a level of the
    // context (`A = Small`); and one with none, where the child's proof constrains the
    // context's levels alone (`Big <= Small`) while the parent uses the proposal where
    // `Small < Big`.
    let small = "Definition Small := Type.";
    let one_level = "Lemma h : forall A : Type, {B : Small & A = B}.";
    out.push(attack("universe/hurkens-context-level", hurkens, small, vec![
        node("Lemma root : False.", &format!("<use_invoke> <invoke> {one_level} </invoke> destruct (h Small) as [B HB]. exact (Hurkens.TypeNeqSmallType.paradox B HB).")),
        node(one_level, "<no_invoke> intros A. exists A. reflexivity."),
    ]));
    let big_small = "Definition Big := Type.\nDefinition Small := Type.";
    let no_level = "Lemma h : forall A : Big, {B : Small & A = B}.";
    out.push(attack("universe/hurkens-context-levels-only", hurkens, big_small, vec![
        node("Lemma root : False.", &format!("<use_invoke> <invoke> {no_level} </invoke> destruct (h Type) as [B HB]. exact (Hurkens.TypeNeqSmallType.paradox B HB).")),
        node(no_level, "<no_invoke> intros A. exists A. reflexivity."),
    ]));
    // Honest look-alikes of the same shapes.
    for (id, context) in [
        ("honest/universe-levels-unconstrained", ""),
        (
            "honest/universe-levels-unconstrained-polymorphic",
            polymorphic,
        ),
    ] {
        out.push(honest(id, hurkens, context, vec![
            node("Lemma root : forall (A : Type) (l : list A), rev (rev l) = l.", "<use_invoke> <invoke> Lemma rr : forall (A : Type) (l : list A), rev (rev l) = l. </invoke> exact rr."),
            node("Lemma rr : forall (A : Type) (l : list A), rev (rev l) = l.", "<no_invoke> intros A l. apply rev_involutive."),
        ]));
    }
    out.push(honest("honest/lemma-child", IMPORTS, "", vec![
        node("Lemma root : forall n : nat, n + 0 + 0 = n.", "<use_invoke> intros n. <invoke> Lemma pz : forall m : nat, m + 0 = m. </invoke> rewrite pz. rewrite pz. reflexivity."),
        node("Lemma pz : forall m : nat, m + 0 = m.", "<no_invoke> induction m as [|m IH]; simpl; [reflexivity | rewrite IH; reflexivity]."),
    ]));
    out.push(honest(
        "honest/reduction-flags",
        IMPORTS,
        "",
        vec![node(
            "Lemma root : 2 + 2 = 4.",
            "<no_invoke> cbv beta delta fix iota. reflexivity.",
        )],
    ));
    // A lemma deep in the tree named like a word of the root's statement: assembly renames it.
    out.push(honest("honest/lemma-named-length", IMPORTS, "", vec![
        node("Lemma root : forall l : list nat, length (rev (rev l)) = length l.", "<use_invoke> <invoke> Lemma rr : forall l : list nat, rev (rev l) = l. </invoke> intros l. rewrite rr. reflexivity."),
        node("Lemma rr : forall l : list nat, rev (rev l) = l.", "<use_invoke> <invoke> Lemma length : forall (A : Type) (l : list A), rev (rev l) = l. </invoke> intros l. apply length."),
        node("Lemma length : forall (A : Type) (l : list A), rev (rev l) = l.", "<no_invoke> intros A l. apply rev_involutive."),
    ]));
    out.push(honest("honest/proposal-named-like-binder", IMPORTS, "", vec![
        node("Lemma root : forall n : nat, n + 0 = n.", "<use_invoke> <invoke> Lemma n : forall m : nat, m + 0 = m. </invoke> intros k. apply n."),
        node("Lemma n : forall m : nat, m + 0 = m.", "<no_invoke> intros m. lia."),
    ]));
    out.push(honest(
        "honest/library-axiom",
        "From Coq Require Import Classical.",
        "",
        vec![node(
            "Lemma root : forall P : Prop, P \\/ ~ P.",
            "<no_invoke> exact classic.",
        )],
    ));
    out.push(honest("honest/guard-context-used", IMPORTS, GUARD_CONTEXT, vec![
        node("Lemma root : ~ not_zero 0.", "<use_invoke> <invoke> Lemma nz : forall n, not_zero n -> n <> 0. </invoke> intros h. exact (nz 0 h eq_refl)."),
        node("Lemma nz : forall n, not_zero n -> n <> 0.", "<no_invoke> intros [|n] h; [destruct h | discriminate]."),
    ]));
    out
}

/// Every attack family in every placement it has, and the honest look-alikes, each once in
/// its own layout: the first scenarios of [`scenarios`].
pub fn base() -> Vec<Scenario> {
    base_scenarios()
}

/// A quick self-check (a long-running service's canaries): every attack family once, on the
/// `False` canary, without the scenarios that wait for a time-out.
pub fn self_check_scenarios() -> Vec<Scenario> {
    base_scenarios()
        .into_iter()
        .filter(|s| {
            !s.honest
                && !s.id.starts_with("kind/own-timeout")
                && s.nodes[0].statement == CANARIES[0].0
        })
        .collect()
}

/// A random layout of `s`: blanks become other blanks and line breaks, comments (some with
/// Unicode, some mentioning the refused words or the special tokens) go between words, and
/// names become qualified. Honest scenarios keep every comment after a blank, as honest text
/// does; attacks also glue some.
fn vary(mut s: Scenario, rng: &mut StdRng, tag: u64) -> Scenario {
    s.id = format!("{}#{tag}", s.id);
    let honest = s.honest;
    for n in &mut s.nodes {
        n.proof = vary_text(&n.proof, rng, honest, true);
        n.statement = vary_text(&n.statement, rng, honest, false);
    }
    s
}

const COMMENTS: &[&str] = &[
    "(* c *)",
    "(* ∀ x, x → x *)",
    "(* fix cofix exact_no_check SProp *)",
    "(* a <invoke> b </invoke> *)",
    "(* \"quoted\" *)",
    "(*(* nested *)*)",
];

fn vary_text(text: &str, rng: &mut StdRng, honest: bool, is_proof: bool) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let mut in_string = false;
    // The special tokens stay intact: vary only the blanks between them and the Coq text.
    for (i, c) in text.char_indices() {
        if c == '"' {
            in_string = !in_string;
        }
        if c == ' ' && !in_string && i > 0 {
            match rng.gen_range(0..10) {
                0 => out.push_str("\n  "),
                1 => out.push('\t'),
                2 => out.push_str("  "),
                3 => {
                    let cm = COMMENTS.choose(rng).expect("comments");
                    // A comment right after `<…>` or inside a statement's name position is
                    // still text Coq reads as a comment when a blank precedes it.
                    let glue = !honest && rng.gen_bool(0.2);
                    if !glue {
                        out.push(' ');
                    }
                    out.push_str(cm);
                    out.push(' ');
                }
                _ => out.push(' '),
            }
        } else {
            out.push(c);
        }
    }
    if is_proof && rng.gen_bool(0.3) {
        out = out
            .replace("exact eq_refl", "exact Coq.Init.Logic.eq_refl")
            .replace("False_ind", "Coq.Init.Logic.False_ind");
    }
    out
}

/// Judge a scenario as the product does ([`judge`]: check, solve, assemble, re-check cold,
/// canaries), and again as the two-step command-line path does: each verdict written as
/// `prod check --json` writes its line, read back as `prod tree solve --verdicts` reads it
/// ([`decided_node`]), and the tree solved from those.
pub fn run(checker: &CoqChecker, s: &Scenario, final_timeout: Duration) -> Outcome {
    let kind = ProverKind::Coq;
    let requests: Vec<Result<CheckRequest, Verdict>> = s
        .nodes
        .iter()
        .map(|n| {
            ConditionalProof::parse_with(&n.proof, kind.language())
                .map(|p| CheckRequest::new(&s.imports, &s.context, &n.statement, p))
                .map_err(|e| Verdict::rejected(format!("not a conditional proof: {e}")))
        })
        .collect();
    let tree = Tree {
        nodes: &requests,
        root: Some(0),
        scope: &[],
        qualified_name: "",
        final_timeout,
    };
    let j = judge(checker, kind, &CoqFinal(checker.config().clone()), &tree);
    let two_step = two_step_root(&requests, &j.local);
    Outcome {
        root: j
            .global
            .first()
            .copied()
            .unwrap_or(GlobalVerdict::Incorrect),
        final_check: j.root.and_then(|r| r.final_check).map(|(v, _)| v),
        alarms: j.alarms.len(),
        local: j.local,
        two_step,
    }
}

/// Every scenario of `all` judged by [`run`], `lanes` scenarios at a time on the one checker
/// (its pool is shared: while one scenario is in its cold re-check or between its nodes, the
/// others keep the workers busy). `done(i, &outcome)` is called as scenario `i` finishes, in
/// whatever order they finish; the outcomes are returned in scenario order.
pub fn run_all(
    checker: &CoqChecker,
    all: &[Scenario],
    final_timeout: Duration,
    lanes: usize,
    done: &(dyn Fn(usize, &Outcome) + Sync),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; all.len()]);
    std::thread::scope(|scope| {
        for _ in 0..lanes.clamp(1, all.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(s) = all.get(i) else { break };
                let out = run(checker, s, final_timeout);
                done(i, &out);
                outcomes.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(out);
            });
        }
    });
    outcomes
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|o| o.expect("every scenario ran: a lane that panics ends the scope with its panic"))
        .collect()
}

/// The root's global verdict through verdict lines: every verdict serialized as `prod check
/// --json` prints it, parsed back, and solved as `prod tree solve --verdicts` solves it.
fn two_step_root(requests: &[Result<CheckRequest, Verdict>], local: &[Verdict]) -> GlobalVerdict {
    let kind = ProverKind::Coq;
    let mut nodes = vec![];
    let mut hammer = vec![];
    let mut root = None;
    for (i, (r, v)) in requests.iter().zip(local).enumerate() {
        let Ok(r) = r else { continue };
        let printed = VerdictLine::new(i.into(), v, Duration::ZERO, Some("coq")).to_json();
        let line = serde_json::from_str::<serde_json::Value>(&printed.to_string())
            .ok()
            .and_then(|j| VerdictLine::from_json(j).ok());
        let (node, replaced) = decided_node(
            i.to_string(),
            r.context_key(),
            r.statement.clone(),
            &r.proof,
            line.as_ref(),
            kind,
        );
        if i == 0 {
            root = Some(nodes.len());
        }
        nodes.push(node);
        hammer.push(replaced);
    }
    match root {
        Some(r) => Forest::solve_decided(nodes, hammer, kind.language()).verdict(r),
        None => GlobalVerdict::Incorrect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_self_check_has_every_family() {
        assert!(self_check_scenarios().len() >= 10);
    }

    #[test]
    fn scenarios_are_seeded_and_cover_every_family() {
        let a = scenarios(7, 120);
        let b = scenarios(7, 120);
        assert_eq!(a.len(), 120);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.id == y.id && x.nodes[0].proof == y.nodes[0].proof));
        for family in [
            "guard/",
            "deferring/",
            "context/",
            "kind/",
            "t0/",
            "sprop/",
            "capture/",
            "universe/",
            "honest/",
        ] {
            assert!(a.iter().any(|s| s.id.starts_with(family)), "{family}");
        }
        // Variations keep every special token and parse as they did.
        for s in &a {
            for n in &s.nodes {
                assert!(
                    ConditionalProof::parse_with(&n.proof, &prod_coq::CoqLanguage).is_ok(),
                    "{}: {}",
                    s.id,
                    n.proof
                );
            }
        }
    }
}

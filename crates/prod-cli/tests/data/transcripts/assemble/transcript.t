# The root's complete file: imports, context, the root's statement admitted under a fresh
# name, the lemmas child-first, the root, and the kernel's comparison of the two.
$ prod tree solve claimed.jsonl --assemble root > root.v

$ cat root.v
From Coq Require Import List.
Import ListNotations.
Definition rev2 {A : Type} (l : list A) := rev l.
Unset Default Proof Using.
Theorem prod_root_anchor_TAG : forall (A : Type) (l : list A), rev2 (rev2 l) = l.
Admitted.
Lemma rev2_rev : forall (A : Type) (l : list A), rev2 l = rev l.
Proof.
reflexivity.
Qed.

Theorem rev2_twice : forall (A : Type) (l : list A), rev2 (rev2 l) = l.
Proof.
intros A l.  rewrite !rev2_rev. apply rev_involutive.
Qed.

Definition prod_root_same_TAG : ltac:(let t := type of @prod_root_anchor_TAG in exact t) := @rev2_twice.

# coqc compiles it by itself.
$ coqc root.v

# Each node checked by the real prover, then the same through --verdicts.
$ prod check nodes.jsonl --json --workers 1 > verdicts.jsonl

$ prod tree solve nodes.jsonl --verdicts verdicts.jsonl --assemble root > checked.v

$ coqc checked.v


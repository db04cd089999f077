(* An export and a partially qualified import. *)
Require Export Base.
Require Import sub.Top.

Lemma other_a : twice 0 + 0 = 0.
Proof. rewrite twice_0. reflexivity. Qed.

Lemma other_b : twice 0 + 0 = 0 /\ True.
Proof. split. apply other_a. exact I. Qed.

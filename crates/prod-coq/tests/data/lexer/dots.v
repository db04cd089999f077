Require Import List PeanoNat.
Import ListNotations.

(* Qualified names and `..` never end a sentence; `...` does. *)
Lemma q : forall n, n + 0 = n. Proof. intros. now rewrite Nat.add_0_r. Qed.

Notation "[[ x ; .. ; y ]]" := (cons x .. (cons y nil) ..).
Check [[1; 2; 3]].

Lemma w : True /\ True.
Proof with auto.
  split...
Qed.

Record point := { px : nat; py : nat }.
Definition origin := {| px := 0; py := 0 |}.
Check origin.(px).
Check (origin.(py)).
Check 0.


(* Lemmas used by later content c_j are never peeled; skipped blocks carry a reason. *)
Require Import Arith.

Lemma used_by_hint : forall n, n <= S n.
Proof. intro n. apply Nat.le_succ_diag_r. Qed.

#[export] Hint Resolve used_by_hint : core.

Lemma used_by_definition : 2 = 2.
Proof. reflexivity. Qed.

Definition witness : 2 = 2 := used_by_definition.

Lemma not_used : 3 = 3.
Proof. reflexivity. Qed.

Lemma admitted_one : 4 = 4.
Proof. Admitted.

Lemma aborted_one : 5 = 5.
Proof. Abort.

Lemma with_header : 6 = 6.
Proof with reflexivity.
  idtac...
Qed.

Lemma user_of_hint : forall n, n <= S n.
Proof. auto. Qed.

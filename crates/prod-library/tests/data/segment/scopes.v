(* Section/Module nesting, Defined proofs, pins. *)
Require Import Arith.

Section Sec.
  Variable k : nat.

  Lemma k_plus_0 : k + 0 = k.
  Proof. apply Nat.add_0_r. Qed.

  Lemma k_twice : k + 0 + 0 = k.
  Proof. rewrite k_plus_0. apply k_plus_0. Qed.

  Lemma only_inside : k = k.
  Proof. reflexivity. Qed.

  Lemma uses_inside : k + 0 = k /\ k = k.
  Proof. split; [apply k_plus_0 | apply only_inside]. Qed.
End Sec.

(* k_plus_0 is used after `End Sec`, where its statement is generalised: pinned. *)
Lemma after_section : forall n, n + 0 = n.
Proof. intro n. apply k_plus_0. Qed.

Module M.
  Lemma in_m : 1 + 1 = 2.
  Proof. reflexivity. Qed.

  Lemma in_m_user : 1 + 1 = 2 /\ True.
  Proof. split. apply in_m. exact I. Qed.
End M.

(* A qualified use pins: M.in_m_user is not peeled. *)
Lemma outside_m : 1 + 1 = 2 /\ True.
Proof. exact M.in_m_user. Qed.

(* A Defined proof computes: it stays in the context, and so does what it uses. *)
Lemma helper_for_defined : 0 = 0.
Proof. reflexivity. Qed.

Definition pred_sig (n : nat) : {m : nat | m <= n}.
Proof. exists 0. apply Nat.le_0_l. Defined.

Lemma transparent_one : {n : nat | n = 0}.
Proof. exists 0. exact helper_for_defined. Defined.

Module Type SIG.
  Parameter t : Type.
  Lemma sig_lemma : True.
  Proof. exact I. Qed.
End SIG.

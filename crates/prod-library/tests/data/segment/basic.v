(* A small file of our own: blocks, steps, peeling, hammer replacement. *)
Require Import Arith Lia.

Definition double (n : nat) := n + n. (* a "comment." with a dot *)

Lemma double_0 : double 0 = 0.
Proof. reflexivity. Qed.

Lemma double_S n : double (S n) = S (S (double n)).
Proof.
  unfold double. lia.
Qed.

Lemma double_even n : exists k, double n = 2 * k.
Proof.
  induction n as [|n IH].
  - exists 0. apply double_0.
  - destruct IH as [k Hk]. exists (S k).
    rewrite double_S, Hk.
    lia.
Qed.

Theorem double_mono n m : n <= m -> double n <= double m.
Proof using.
  intros H. unfold double.
  { apply Nat.add_le_mono; assumption. }
Qed.

Lemma double_plus n m : double (n + m) = double n + double m.
Proof (ltac:(unfold double; lia)).

Goal double 1 = 2.
Proof. reflexivity. Qed.

Example double_2 : double 2 = 4 := eq_refl.

Lemma use_all n : double (S n) = S (S (double n)) /\ double 0 = 0.
Proof.
  split.
  - apply double_S.
  - exact double_0.
Qed.

(* An unqualified import of a project file, then stdlib ones. *)
Require Import Base.
Require Import Arith Lia.

Lemma twice_mid n : twice n = 2 * n.
Proof. unfold twice. lia. Qed.

Lemma twice_mid_S n : twice (S n) = 2 * S n.
Proof. apply twice_mid. Qed.

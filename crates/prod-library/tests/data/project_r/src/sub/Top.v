(* Two project files in one sentence, a stdlib name between them. *)
Require Import Mid Arith Base.
Require Import Lia.

Lemma top_a n : twice n + 0 = 2 * n.
Proof. rewrite Nat.add_0_r. apply twice_mid. Qed.

Lemma top_b n : twice (n + 0) = 2 * n.
Proof. rewrite Nat.add_0_r. apply twice_mid. Qed.

Lemma top_c n : twice n + twice (n + 0) = 4 * n.
Proof. rewrite top_b, twice_mid. lia. Qed.

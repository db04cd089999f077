(* The project's base: no imports. *)
Definition twice (n : nat) := n + n.

Lemma twice_0 : twice 0 = 0.
Proof. reflexivity. Qed.

Lemma twice_S n : twice (S n) = S (S (twice n)).
Proof. unfold twice. simpl. rewrite <- plus_n_Sm. reflexivity. Qed.

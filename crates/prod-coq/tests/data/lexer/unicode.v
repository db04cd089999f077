Definition αβ := 1.
Definition café' := αβ + 1.
Notation "x ⊕ y" := (x + y) (at level 50).
Lemma ℕ_lemma : café' ⊕ 0 = 2. Proof. reflexivity. Qed.

(* `Proof with T`: steps ending in `...` run T after themselves. *)
Lemma pw_and : forall A B : Prop, A -> B -> A /\ B.
Proof with auto.
  intros A B a b.
  split...
Qed.

Lemma pw_uses : forall A B : Prop, A -> B -> (A /\ B) /\ True.
Proof with (try assumption).
  intros A B a b.
  split.
  - apply pw_and...
  - exact I.
Qed.

Section S.
Variable n : nat.
Lemma pw_using : n = n /\ True.
Proof using n with trivial.
  split.
  2: idtac...
  reflexivity.
Qed.
End S.

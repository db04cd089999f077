(* Bullets, repeated bullets, braces and goal selectors. *)
Lemma and3 : True /\ (True /\ True) /\ True.
Proof.
  split; [|split].
  - exact I.
  - split.
    + exact I.
    +exact I.
  - { exact I. }
Qed.

Lemma deep : (True /\ True) /\ (True /\ True).
Proof.
  split.
  - split.
    -- exact I.
    -- exact I.
  - split.
    ** exact I.
    ** split.
Qed.

Goal True /\ True /\ True.
  split; [|split].
  2: { exact I. }
  2:{ exact I. }
  {exact I. }
Qed.

Goal True /\ True.
  refine (conj ?[left] ?[right]).
  [right]: { exact I. }
  [left] : { exact I. }
Qed.

Goal True /\ True.
  split.
  all: exact I.
Qed.

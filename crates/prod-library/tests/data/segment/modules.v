(* Modules named again after End, Include, intro-pattern views, lemmas named in a `Proof with` header. *)
Module Type HasZeroEq.
  Axiom zero_eq : 0 = 0.
End HasZeroEq.

Module UseZero (X : HasZeroEq).
  Definition it := X.zero_eq.
End UseZero.

(* Z0 is a functor argument below: its lemma is a field the functor needs, never peeled. *)
Module Z0.
  Lemma zero_eq : 0 = 0.
  Proof. reflexivity. Qed.
End Z0.

Module Applied := UseZero Z0.

(* `Include` checks the module so far against the functor's parameter. *)
Module Inc.
  Lemma zero_eq : 0 = 0.
  Proof. reflexivity. Qed.
  Include UseZero.
End Inc.

Lemma my_sym (a b : nat) : a = b -> b = a.
Proof. intro H. now symmetry. Qed.

(* `%my_sym` is a view in an intro pattern: a use of my_sym. *)
Lemma view_user n : n = 0 -> 0 = n.
Proof. intros Hn %my_sym. exact Hn. Qed.

Lemma header_helper : 1 = 1.
Proof. reflexivity. Qed.

Lemma header_user : 1 = 1 /\ 1 = 1.
Proof with apply header_helper.
  split...
Qed.

Lemma a : True.
Proof. exact I. Qed.
(* not (* closed *)
Check 1.

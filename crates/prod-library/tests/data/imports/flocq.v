(* Unqualified imports of the library's own files, as Flocq writes them. *)
From Coq Require Import ZArith Reals Psatz.
Require Import Zaux Raux Defs.
Require Export Core.
Require Import Core.Defs.
Require Import Core Relative Plus_error Zaux.
Require Flocq.Core.Ulp.
Import Zaux.
Export Raux.
Lemma l : True.
Proof. exact I. Qed.

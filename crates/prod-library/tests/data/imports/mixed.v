(* Stdlib and library names in one sentence: split into runs, order kept. *)
Require Import Reals Zaux Raux Psatz Hierarchy.
Require Import (* a comment *) Reals
  Zaux
  Raux.
Require List.
Require Import Psatz Reals.

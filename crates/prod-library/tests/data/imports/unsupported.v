(* Forms left alone: attributes, controls, import categories, unknown names. *)
#[local] Require Import Zaux.
Time Require Import Raux.
Require Import (notations) Zaux.
Require Import Unknown Zaux.
Local Require Import Psatz.
Definition Require := 1.

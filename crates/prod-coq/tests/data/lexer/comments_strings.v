Require Import String. Open Scope string_scope.
(* A (* nested *) comment. With dots. *)
Definition s := "a string with a dot. and (* a fake comment".
Definition q := "quote "" inside. ".
(* A comment with a string "*)" inside it. *)
Check s. (* trailing comment. *) Check q.
Check (* inside a sentence. *) s.
(**) Check 1. (***) Check 2.
(* "" *) Check 3.

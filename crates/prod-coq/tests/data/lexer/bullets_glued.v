(* Bullets and braces glued to what follows; checked against coqc -time. *)
Goal (True /\ True) /\ True.
split. -{ split. { exact I. }{ exact I. } } -exact I. Qed.
Goal (True /\ True) /\ True.
split. --- split. +++ exact I. +++ exact I. --- exact I. Qed.
Goal True /\ True.
split. -+ exact I. -* exact I. Qed.
Goal (True /\ True) /\ True.
split. { - split. exact I. exact I. } exact I. Qed.

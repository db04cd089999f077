Check 1.
Check 2 (* no final dot *)

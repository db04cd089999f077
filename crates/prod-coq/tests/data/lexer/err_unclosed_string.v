Check 1.
Definition s := "never closed.
Check 2.

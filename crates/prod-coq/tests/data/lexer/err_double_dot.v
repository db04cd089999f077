Check 1..
Check 2
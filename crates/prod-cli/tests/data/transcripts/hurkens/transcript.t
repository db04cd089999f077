# Each tree's child proves `h` only where `A ≤ B` (its verdict line says so in
# `universe_constraints`); the root uses `h` where `B < A` (Hurkens' paradox).
$ prod check nodes.jsonl --json --workers 1 > verdicts.jsonl

$ cat verdicts.jsonl
{"id":"mono_root","verdict":"proved","message":"assumes h","time_ms":_,"prover":_,"axioms":["h"],"replacements":[],"universe_constraints":["Top.2 <= Coq.Logic.Hurkens.87","Top.2 <= Coq.Logic.Hurkens.88","Top.1 = Coq.Logic.Hurkens.88"]}
{"id":"mono_h","verdict":"proved","message":"","time_ms":_,"prover":_,"axioms":[],"replacements":[],"universe_constraints":["Top.8 < Coq.Init.Specif.7","Top.9 = Top.8"]}
{"id":"mono_honest","verdict":"proved","message":"assumes rr","time_ms":_,"prover":_,"axioms":["rr"],"replacements":[],"universe_constraints":["Top.14 = Top.11"]}
{"id":"mono_rr","verdict":"proved","message":"","time_ms":_,"prover":_,"axioms":[],"replacements":[],"universe_constraints":[]}
{"id":"poly_root","verdict":"proved","message":"assumes h","time_ms":_,"prover":_,"axioms":["h"],"replacements":[],"universe_constraints":[]}
{"id":"poly_h","verdict":"proved","message":"","time_ms":_,"prover":_,"axioms":[],"replacements":[],"universe_constraints":["u < sigT.u0","u = u0"]}
{"id":"poly_honest","verdict":"proved","message":"assumes rr","time_ms":_,"prover":_,"axioms":["rr"],"replacements":[],"universe_constraints":[]}
{"id":"poly_rr","verdict":"proved","message":"","time_ms":_,"prover":_,"axioms":[],"replacements":[],"universe_constraints":[]}

$ prod tree solve nodes.jsonl --verdicts verdicts.jsonl
id           local          global     depth
mono_root    correct_alone  incorrect  -
mono_h       correct_alone  correct    0
mono_honest  correct_alone  correct    1
mono_rr      correct        correct    0
poly_root    correct        incorrect  -
poly_h       correct_alone  correct    0
poly_honest  correct        correct    1
poly_rr      correct        correct    0
8 nodes: 6 globally correct, 2 incorrect, 0 undetermined

# The same, as JSON.
$ prod tree solve nodes.jsonl --verdicts verdicts.jsonl --json
{"id":"mono_root","globally_correct":false}
{"id":"mono_h","globally_correct":true}
{"id":"mono_honest","globally_correct":true}
{"id":"mono_rr","globally_correct":true}
{"id":"poly_root","globally_correct":false}
{"id":"poly_h","globally_correct":true}
{"id":"poly_honest","globally_correct":true}
{"id":"poly_rr","globally_correct":true}

# Verdict lines written before they carried universe constraints: no proof in them can
# prove another node's proposal (correct alone): only the leaves, which prove their own
# statements, are globally correct.
$ prod tree solve nodes.jsonl --verdicts old-verdicts.jsonl
id           local          global     depth
mono_root    correct_alone  incorrect  -
mono_h       correct_alone  correct    0
mono_honest  correct_alone  incorrect  -
mono_rr      correct_alone  correct    0
poly_root    correct_alone  incorrect  -
poly_h       correct_alone  correct    0
poly_honest  correct_alone  incorrect  -
poly_rr      correct_alone  correct    0
8 nodes: 4 globally correct, 4 incorrect, 0 undetermined


theory Old imports Main begin
lemma stale: "True"
proof

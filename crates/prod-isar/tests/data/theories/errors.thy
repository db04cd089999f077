theory Errors imports Main begin

lemma unclosed: "True"
proof -
  have "True" by simp

definition c where "c = (0::nat)"

(* an unclosed comment (* nested *)
lemma after: "True" by simp

theory Stale
  imports Main
begin

text \<open>Not listed in the ROOT and imported by nothing: Isabelle never loads it.\<close>

lemma stale: "True"
  by simp

end

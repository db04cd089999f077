theory Base_Thy
  imports Main
begin

definition twice :: "nat \<Rightarrow> nat" where "twice n = 2 * n"

lemma twice_0: "twice 0 = 0"
  by (simp add: twice_def)

lemma twice_twice_0: "twice (twice 0) = 0"
  using twice_0 by simp

end

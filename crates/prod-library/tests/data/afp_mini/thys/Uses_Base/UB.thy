theory UB
  imports "Base.Base_Thy"
begin

lemma ub_a: "twice 2 = 4"
  by (simp add: twice_def)

lemma ub_b: "twice 2 + 0 = 4"
  using ub_a by simp

end

theory Late_Thy
  imports Main
begin

lemma late_a: "(1::nat) + 1 = 2"
  by simp

lemma late_b: "(1::nat) + 1 + 0 = 2"
  using late_a by simp

end

theory UL
  imports "Late.Late_Thy"
begin

lemma ul: "(1::nat) + 1 + 0 + 0 = 2"
  using late_b by simp

end

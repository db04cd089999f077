theory Xml
  imports "Base.Base_Thy"
begin

lemma tag_helper: "twice 1 = 2"
  by (simp add: twice_def)

theorem tag_main: "twice 1 + twice 0 = 2"
proof -
  have "twice 1 = 2"
    using tag_helper by simp
  then show ?thesis
    using twice_0 by (metis add_0_right)
qed

end

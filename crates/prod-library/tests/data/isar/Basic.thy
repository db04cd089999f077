theory Basic
  imports Main "HOL-Library.Multiset"
begin

text \<open>A chain: \<open>double_0\<close> is used by \<open>double_sum\<close>, which \<open>top\<close> uses.\<close>

definition double :: "nat \<Rightarrow> nat" where "double n = n + n"

lemma double_0: "double 0 = 0"
  by (simp add: double_def)

lemma double_sum: "double (a + b) = double a + double b"
  using double_0
  by (metis add.commute add.left_commute double_def)

(* the root of the tree *)
theorem top: "double (a + 0) = double a + double 0"
proof -
  have "double (a + 0) = double a + double 0"
    using double_sum by blast
  then show ?thesis .
qed

private lemma unused_helper [rule_format]: "\<forall>x::nat. x + 0 = x"
  by simp

lemma unnamed_user: "(2::nat) + 0 = 2"
  apply (rule unused_helper)
  done

lemma "True"
  by auto

end

theory Pins
  imports Main
begin

lemma simp_rule [simp]: "length [] = (0::nat)"
  by simp

lemma user_of_simp: "length [] + 1 = (1::nat)"
  by (simp add: simp_rule)

lemma declared_later: "(x::nat) \<le> x"
  by simp

declare declared_later [intro]

lemma in_lemmas: "(x::nat) = x"
  by simp

lemmas collected = in_lemmas

lemma ml_used: "(0::nat) \<le> 1"
  by simp

ML \<open>val _ = @{thm ml_used}\<close>

lemma doc_used: "(1::nat) \<le> 2"
  by simp

text \<open>The fact @{thm doc_used} is shown in the document.\<close>

lemma then_this: "(2::nat) \<le> 3"
  by simp

lemmas again = this

lemma statement_user [OF in_lemmas]: "P \<Longrightarrow> P"
  by assumption

lemma mutual_a: "(0::nat) = 0" and mutual_b: "(1::nat) = 1"
  by simp_all

lemma uses_mutual: "(0::nat) = 0 \<and> (1::nat) = 1"
  using mutual_a mutual_b by simp

schematic_goal sch: "?x = (1::nat)"
  by (rule refl)

lemma abandoned: "False"
  oops

lemma cheat: "(1::nat) = 2"
  sorry

lemma after_cheat: "(1::nat) = 2 \<Longrightarrow> True"
  using cheat by simp

fun f :: "nat \<Rightarrow> nat" where
  "f 0 = 0"
| "f (Suc n) = f n"

lemma f_zero: "f n = 0"
  by (induct n) simp_all

end

(* Title: basic.thy -- a small theory exercising the common proof styles *)
section \<open>Basics\<close>

theory Basic
  imports Main "HOL-Library.Multiset"
begin

text \<open>A definition and a one-step lemma.\<close>

definition double :: "nat \<Rightarrow> nat" where
  "double n = n + n"

lemma double_add[simp]: "double n = 2 * n"
  unfolding double_def by simp

lemma double_mono: "m \<le> n \<Longrightarrow> double m \<le> double n"
  apply (simp add: double_def)
  done

theorem double_even:
  fixes n :: nat
  shows "even (double n)"
proof -
  have "double n = 2 * n" by (rule double_add)
  then show ?thesis
    by (metis dvd_triv_left)
qed

corollary "even (double 3)"
  using double_even by blast

lemma isar_blocks:
  assumes a: "P" and b: "Q"
  shows "P \<and> Q"
proof (intro conjI)
  { fix x :: nat
    have "x = x" .. }
  show "P" using a by (auto intro!: a[THEN conjunct1[OF conjI]])
next
  show "Q" \<comment> \<open>a formal comment, with by inside\<close>
    using b .
qed

lemma subgoals: "A \<longrightarrow> A" "B \<longrightarrow> B"
  subgoal by simp
  subgoal
    apply (rule impI)
    apply assumption
    done
  done

lemma abandoned: "False"
  oops

end

theory Contexts
  imports Main
  keywords "my_decl" :: thy_decl and "my_goal" :: thy_goal and "with_minor"
begin

locale loc =
  fixes f :: "nat \<Rightarrow> nat"
  assumes mono: "x \<le> y \<Longrightarrow> f x \<le> f y"
begin

lemma in_loc: "f 0 \<le> f 1"
  by (rule mono) simp

end

context loc
begin

private lemma priv: "f x \<le> f x" ..

end

lemma (in loc) outside: "f 1 \<le> f 2"
  using mono[of 1 2] by simp

my_decl foo bar
my_goal baz
  by auto

instantiation nat :: zero_neq_one
begin
instance proof qed
end

notepad
begin
  have "True" by simp
end

function f :: "nat \<Rightarrow> nat" where
  "f 0 = 0" | "f (Suc n) = f n"
  by pat_completeness auto
termination by lexicographic_order

lemma sorry_me: "x = x" sorry

end

theory Scopes
  imports Main
begin

locale loc =
  fixes z :: nat
  assumes pos: "z > 0"
begin

lemma z_ne: "z \<noteq> 0"
  using pos by simp

lemma z_ge: "z \<ge> 1"
  using z_ne by simp

end

lemma (in loc) z_ge_outside: "z \<ge> 1"
  using z_ne by simp

context
  fixes y :: nat
begin

private lemma y_refl: "y = y"
  by simp

lemma y_user: "y = y \<and> True"
  using y_refl by simp

end

lemma outer: "(0::nat) = 0"
  by simp

context
  fixes w :: nat
begin

lemma inner_user: "(0::nat) = 0 \<and> w = w"
  using outer by simp

end

instantiation nat :: zero_neq_one
begin
instance proof
qed simp
end

end

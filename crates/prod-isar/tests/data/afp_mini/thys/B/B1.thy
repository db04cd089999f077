theory B1
  imports A.A1
begin
a_cmd something
a_goal "x"
  using a_fact by simp
lemma b_fact: "True" using a_fact by simp
end

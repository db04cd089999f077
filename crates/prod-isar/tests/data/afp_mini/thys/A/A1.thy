theory A1
  imports Main
  keywords "a_cmd" :: thy_decl and "a_goal" :: thy_goal
begin
lemma a_fact: "True" by simp
end

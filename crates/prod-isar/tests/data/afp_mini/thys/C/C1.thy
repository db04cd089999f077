theory C1
  imports "$AFP/B/B1" "../A/A1" C2
begin
a_goal "y" by simp
end

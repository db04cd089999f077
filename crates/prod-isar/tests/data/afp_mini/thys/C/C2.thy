theory C2 imports Main begin
definition a_goal where "a_goal = True"
end

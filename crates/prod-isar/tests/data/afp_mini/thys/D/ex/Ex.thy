theory Ex imports E.E1 begin
end

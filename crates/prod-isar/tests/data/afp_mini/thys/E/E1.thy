theory E1 imports D_Main.D1 begin
end

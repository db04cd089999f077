theory D1 imports Main begin
end

module statepipe/bench/go

go 1.21

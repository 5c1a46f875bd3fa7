module starling.invalid/starling

go 1.26.0

module github.com/patrdb/patrdb/tools/mutate

go 1.26.0

replace github.com/patrdb/patrdb => ../../

require golang.org/x/tools v0.52.0

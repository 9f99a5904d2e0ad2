//go:build !race

package tree_test

const raceEnabled = false

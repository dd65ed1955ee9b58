//go:build !race

package memtest

// raceEnabled says the race detector is on (race_on.go).
const raceEnabled = false

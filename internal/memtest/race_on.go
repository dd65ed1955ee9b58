//go:build race

package memtest

// raceEnabled says the race detector is on: its shadow memory multiplies
// a process's resident size several times, so that a peak RSS bound
// says nothing about the code.
const raceEnabled = true

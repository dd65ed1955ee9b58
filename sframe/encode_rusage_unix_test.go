//go:build unix

package sframe_test

import (
	"syscall"
	"time"
)

// encCPUTime returns the CPU time (user + system) the process has used,
// so that benchmarks on a shared machine can report it next to the wall
// time.
func encCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

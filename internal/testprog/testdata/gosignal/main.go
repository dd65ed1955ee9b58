// Command gosignal sends itself SIGUSR1, which os/signal relays to a
// goroutine, until it has run for MS milliseconds of CPU time, for the
// tests of how sframe unwinds Go's signal handling: a share of its
// samples are taken while the kernel runs rt_sigreturn for the runtime's
// trampoline (runtime.sigreturn__sigaction on amd64), on the signal stack.
//
//	gosignal MS
package main

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// cpu returns the process's CPU time, so that a loaded machine gets as
// many samples as an idle one.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	ms, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	c := make(chan os.Signal, 1024)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
		}
	}()
	pid := os.Getpid()
	for cpu() < time.Duration(ms)*time.Millisecond {
		for range 100 {
			syscall.Kill(pid, syscall.SIGUSR1)
		}
	}
}

package main

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// interruptSignals end a long command early, which then writes what it has:
// Ctrl-C, kill's default, a terminal closed under it, and Ctrl-\.
var interruptSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// interrupt catches interruptSignals for a command that writes what it has
// when one arrives: the first is kept and onSignal called (on another
// goroutine); a second one has its default action again, ending the
// program at once.
type interrupt struct {
	sig  atomic.Value // syscall.Signal
	ch   chan os.Signal
	done chan struct{}
	once sync.Once
}

// catchInterrupts starts catching interruptSignals; Stop ends it.
func catchInterrupts(onSignal func()) *interrupt {
	in := &interrupt{ch: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(in.ch, interruptSignals...)
	go func() {
		select {
		case s := <-in.ch:
			in.sig.Store(s.(syscall.Signal))
			signal.Stop(in.ch)
			if onSignal != nil {
				onSignal()
			}
		case <-in.done:
		}
	}()
	return in
}

// Signal returns the signal caught, or 0.
func (in *interrupt) Signal() syscall.Signal {
	s, _ := in.sig.Load().(syscall.Signal)
	return s
}

// Stop ends the catching: later signals have their default action.
func (in *interrupt) Stop() {
	in.once.Do(func() {
		signal.Stop(in.ch)
		close(in.done)
	})
}

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
// program at once, or, when the command has an again handler (one that
// must remove its unfinished output first), is given to it.
type interrupt struct {
	sig  atomic.Value // syscall.Signal
	ch   chan os.Signal
	done chan struct{}
	once sync.Once
}

// catchInterrupts starts catching interruptSignals; Stop ends it. again,
// if not nil, takes the signals after the first, until Stop.
func catchInterrupts(onSignal func(syscall.Signal), again func(syscall.Signal)) *interrupt {
	in := &interrupt{ch: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(in.ch, interruptSignals...)
	go func() {
		select {
		case s := <-in.ch:
			sig := s.(syscall.Signal)
			in.sig.Store(sig)
			if again == nil {
				signal.Stop(in.ch)
			}
			if onSignal != nil {
				onSignal(sig)
			}
		case <-in.done:
			return
		}
		if again == nil {
			return
		}
		select {
		case s := <-in.ch:
			again(s.(syscall.Signal))
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

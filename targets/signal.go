package targets

import (
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// CloseOnSignal arranges for SIGINT and SIGTERM (Ctrl-C, kill) to close
// every closer (typically a *Process, which then detaches from its threads)
// and then end the program with the signal's default action, so the exit
// status still tells that a signal killed it. Call the returned stop
// function once the closers are closed normally; it removes the handler.
//
//	p, err := targets.AttachProcess(pid)
//	if err != nil { ... }
//	defer p.Close()
//	defer targets.CloseOnSignal(p)()
func CloseOnSignal(closers ...io.Closer) (stop func()) {
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			for _, c := range closers {
				c.Close()
			}
			signal.Reset(sig)
			if self, err := os.FindProcess(os.Getpid()); err == nil {
				self.Signal(sig)
			}
			// The signal is delivered asynchronously (to the main thread);
			// exit with the shell's status for it only if it did not kill us.
			time.Sleep(time.Second)
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
		})
	}
}

// Command gocrash dereferences a nil pointer in main.crash, called from
// main.middle, with the traceback level "crash": the runtime's handler
// turns the fault into a panic (runtime.sigpanic, called as if from the
// faulting instruction), and the fatal panic into a SIGABRT raised
// from its handler, which dumps core: the core's crashing thread is in
// the handler, on the signal stack, above the goroutine that faulted.
// Its arguments are ignored.
package main

import (
	"os"
	"runtime/debug"
)

type point struct{ x int }

//go:noinline
func crash(p *point) int { return p.x }

//go:noinline
func middle(p *point) int { return crash(p) + 1 }

func main() {
	debug.SetTraceback("crash")
	var p *point
	if len(os.Args) > 100 {
		p = &point{}
	}
	os.Exit(middle(p))
}

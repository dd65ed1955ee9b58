package unwind_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/targets"
	"github.com/sframekit/sframekit/unwind"
)

// A whole-process capture, as `sframe stack PID` does it: stop the
// process only while unwinding, then name the functions from the files.
func ExampleTracer() {
	pid := 1234 // the process to look at
	tr := unwind.NewTracer()
	if files, err := targets.MappedFiles(pid); err == nil {
		tr.Prefetch(files) // load tables and symbols while attaching
	}
	p, err := targets.AttachProcess(pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	trace, err := tr.Capture(p)
	p.Close() // detach: the process runs again
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	tr.Symbolize(trace)
	for _, th := range trace.Threads {
		for i, f := range th.Frames {
			fmt.Printf("%d #%d %#x %s+%#x [%v]\n", th.TID, i, f.PC, f.Func, f.Offset, f.Method)
		}
	}
}

// The unwinder alone, as a profiler uses it: one Unwinder per process,
// made once from its modules (a Cache shares their tables between
// processes) and kept up to date as mappings come and go; for each sample,
// the registers and the copy of the stack from SP up that perf_event_open
// gives, walked with a Context that the sampling goroutine reuses.
func ExampleUnwinder() {
	type sample struct {
		regs  arch.Regs // the sampled thread's registers
		stack []byte    // a copy of its stack from SP up
	}
	var (
		mods    []arch.Module // the process's mappings
		memory  arch.Memory   // the rest of its memory (code), if at hand
		samples []sample
	)
	cache := unwind.NewCache() // one for every process
	u, err := unwind.New(arch.AMD64, cache.Modules(mods, memory))
	if err != nil {
		return
	}
	ctx := new(unwind.Context)          // one per goroutine
	buf := make([]unwind.Frame, 0, 128) // reused: a walk then allocates nothing
	for _, s := range samples {
		mem := &unwind.StackMemory{SP: s.regs.SP(), Stack: s.stack, Fallback: memory}
		frames, stop, err := u.Unwind(ctx, &s.regs, mem, buf[:0])
		for _, f := range frames {
			fmt.Printf("%#x %v\n", f.PC, f.Method)
		}
		if errors.Is(err, unwind.ErrOutsideStackCopy) {
			fmt.Println("stack copy too short")
		} else {
			fmt.Println(stop)
		}
	}
	// A new mapping (from an mmap event): walks running now do not see
	// it, the next ones do. RemoveModule takes away what it replaces.
	var mapped arch.Module
	for _, m := range cache.Modules([]arch.Module{mapped}, memory) {
		u.AddModule(m)
	}
}

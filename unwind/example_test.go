package unwind_test

import (
	"fmt"
	"os"

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

// The unwinder alone, over registers and memory a profiler already has
// (here a copy of a thread's stack), with modules whose tables are loaded
// once and reused for every sample.
func ExampleUnwinder() {
	var (
		regs  targets.Regs     // the sampled thread's registers
		mods  []targets.Module // its process's modules
		stack []byte           // a copy of its stack from SP up
	)
	mem := &unwind.FlatMemory{Addr: regs.SP(), Data: stack}
	cache := unwind.NewCache()
	u, err := unwind.New(regs.Arch, cache.Modules(mods, mem))
	if err != nil {
		return
	}
	buf := make([]unwind.Frame, 0, 128) // reused: a walk then allocates nothing
	frames, stop, _ := u.Unwind(nil, &regs, mem, buf)
	for _, f := range frames {
		fmt.Printf("%#x %v\n", f.PC, f.Method)
	}
	fmt.Println(stop)
}

package targets_test

import (
	"fmt"
	"log"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/targets"
)

// Open a core file and list what an unwinder starts from: each thread's
// registers and the modules with their load biases. (No output is shown:
// it depends on the core; the tests make one with gdb's gcore.)
func ExampleOpenCore() {
	c, err := targets.OpenCore("core.1234", "") // "" : the executable recorded in the core
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, w := range c.Warnings() {
		log.Print(w) // e.g. a mapped file that is gone: its text is unreadable
	}
	for _, t := range c.Threads() {
		// The word at SP: on x86-64, just after a call, the return address.
		top, err := targets.ReadUint64(c.Memory(), t.Regs.SP())
		fmt.Printf("thread %d %q: pc %#x sp %#x [sp] %#x %v\n", t.TID, t.Name, t.Regs.PC(), t.Regs.SP(), top, err)
	}
	for _, m := range c.Modules() {
		// Symbols and SFrame rows are at ELF addresses: runtime - Bias.
		fmt.Printf("%#x-%#x %s bias %#x\n", m.Start, m.End, m.Path, m.Bias)
	}
}

// Stop a live process for as long as it is inspected; Close detaches and
// lets it run on, and CloseOnSignal makes Ctrl-C detach too.
func ExampleAttachProcess() {
	p, err := targets.AttachProcess(1234)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	stop := targets.CloseOnSignal(p)
	defer stop()
	for _, t := range p.Threads() {
		if m := arch.FindModule(p.Modules(), t.Regs.PC()); m != nil {
			fmt.Printf("thread %d in %s at ELF address %#x\n", t.TID, m.Path, m.ELFAddr(t.Regs.PC()))
		}
	}
}

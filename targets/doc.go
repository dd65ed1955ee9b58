// Package targets gives uniform, read-only access to a stopped program for a
// stack unwinder: its threads with their registers, its memory, and the list
// of loaded ELF modules with their load biases.
//
// Two kinds of target exist:
//
//   - a live process, stopped with ptrace for as long as the *Process is
//     open (AttachProcess, Linux only);
//   - a core file, as written by the kernel, by gdb's gcore or by
//     qemu-user, of x86-64, AArch64 or s390x (OpenCore, OpenCoreWith).
//
// Both implement arch.Target, the model of a stopped program that the
// unwinder takes (package arch defines it, so that unwinding perf samples
// needs nothing of this package): Threads (arch.Thread: registers and
// stop signal of each thread), Modules (arch.Module, sorted by address;
// arch.FindModule finds the one holding an address) and Memory (an
// arch.Memory: an io.ReaderAt-like reader of runtime addresses, whose
// errors wrap arch.ErrUnmapped where the target has no memory;
// ReadUint64 reads a little-endian word). Their Warnings
// method says what could not be read but did not stop the opening:
//
//	c, err := targets.OpenCore("core.1234", "") // or the executable's new path
//	if err != nil { ... }
//	defer c.Close()
//	for _, t := range c.Threads() {
//		m := arch.FindModule(c.Modules(), t.Regs.PC())
//		...
//	}
//
// Addresses are runtime (virtual) addresses of the target. A module's Bias
// converts between the two address spaces:
//
//	runtime address = ELF (symbol, SFrame, .eh_frame) address + arch.Module.Bias
//
// Registers (arch.Regs) are exposed by DWARF register number through Get/Set,
// so that CFI and SFrame rules can be applied without architecture switches.
//
// A live Process must be closed: Close detaches every thread and leaves the
// process running. Callers should `defer p.Close()` right after a successful
// AttachProcess and, in command-line tools, also call CloseOnSignal so that
// Ctrl-C (SIGINT) or SIGTERM detach before the tool exits:
//
//	p, err := targets.AttachProcess(pid)
//	if err != nil { ... }
//	defer p.Close()
//	stop := targets.CloseOnSignal(p)
//	defer stop()
//
// Even without that, the process is not left stopped if the tool dies: the
// threads are attached with PTRACE_SEIZE (no SIGSTOP is ever sent), and the
// kernel detaches tracees when the tracing thread exits. What only Close
// does is deliver again a signal that arrived during the attach (an arch.Thread
// whose Signal is not 0): the kernel's detach at the tool's death drops
// it. A tool that is attached for a few milliseconds can therefore call
// CloseOnSignal only when some thread holds a signal (sframe stack does:
// the handler costs a goroutine and an OS thread).
package targets

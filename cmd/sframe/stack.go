package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/sframekit/sframekit/dump"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/stackprof"
	"github.com/sframekit/sframekit/targets"
	"github.com/sframekit/sframekit/unwind"
)

func init() {
	register("stack", "print the stack of every thread of a process or core file", runStack)
}

const stackUsage = `PID | --core CORE [--exe FILE] [--sysroot DIR]

Prints one block per thread: "Thread TID (name):", then one line per
frame, innermost first, as gdb's backtrace prints them. For a core of a
process that died of a signal, gdb's line comes first ("Program
terminated with signal SIGSEGV, Segmentation fault."), then for a fault
"Fault address: 0xADDR." (si_addr), then a blank line.

  #N  0xADDR in func+0xOFF [at FILE:LINE] (module) [method]

ADDR is the current PC of frame 0 and the return address of the other
frames; method (sframe, cfi, fp, signal) says which rules found the
frame's caller. C++ and Rust names are demangled as c++filt prints
them, unless --no-demangle is given. A signal trampoline prints as
<signal handler called>. With -s (--source), frames whose module has
DWARF line information (or a separate debug file) show the source line
of the PC, or of the call for return addresses, as gdb does. With -i
(--inlines), the calls the compiler inlined at a frame come before it as
frames of their own, as in gdb: same ADDR, the inlined function's name,
the position in it, and [inline]. When a
walk ends before the outermost frame, a last line "Backtrace stopped:
REASON" says why.

--json prints one object instead (stable; fields may be added):
  {"pid": N, "termination": {"signal": N, "name": "SIGSEGV",
     "description": S, "tid": N, "code": N, "address": "0x.."},
   "threads": [{"tid": N, "name": S, "frames": [
     {"index": N, "pc": "0x..", "sp": "0x..", "cfa": "0x..",
      "function": S, "demangled": S, "offset": N, "file": S, "line": N,
      "inlined": [{"function": S, "file": S, "line": N}], "module": PATH,
      "method": "sframe|cfi|fp|signal|none", "signal": BOOL}],
   "complete": BOOL, "stop": REASON, "error": S}]}
Addresses (pc, sp, cfa) are "0x..." strings, so that 64-bit values
survive readers that hold numbers as doubles (jq, JavaScript); indices,
ids, offsets and lines are numbers. "function" is the symbol name and
"demangled" its demangled form. With inlined calls, a frame's "file" and
"line" are the position in the innermost inlined function (inlined[0]),
not in "function"; each inlined entry's "file" and "line" are its call
site, in the next function out (inlined[k+1], or the frame's "function"
for the last). "cfa", "function", "demangled", "file", "line",
"inlined", "module", "signal" and "error" are left out when unknown or
empty; "termination" is there for a core that tells the signal, with
"code" (si_code) and "address" (si_addr, for faults only) from its
NT_SIGINFO note.

--pprof FILE writes the stacks as a pprof profile instead (go tool pprof
FILE): one sample per thread, labeled with the thread id ("thread") and
name ("thread_name"), functions named as above. With --count N it
captures a live process N times, --interval apart (default 10ms), into
one profile: a sampling profile of where the threads are, running or
blocked. A process that exits before the last capture ends the
sampling: the profile has the captures made, and a note on standard
error says how many (exit status 0). So does a signal (Ctrl-C, SIGTERM,
SIGHUP, SIGQUIT), after the capture under way, with the exit status of
a program killed by it (130 for Ctrl-C).

A live process is stopped with ptrace for each capture and detached
afterwards, also on error or Ctrl-C. With --core, warnings on standard
error name the files that are missing or are not those the process ran
(their GNU build ID differs from the one the core holds).

Cores of x86-64, AArch64 and s390x programs are read on any machine.
A core without a list of mapped files (qemu-user's) needs --exe: the
shared libraries are then found through the dynamic linker's list in
the core, and looked up under --sysroot (the directory given to qemu's
-L), as gdb's "set sysroot" does.`

func runStack(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("stack", stackUsage, stdout, stderr)
	core := fs.String("core", "", "read the threads from core file `CORE` instead of a live process")
	exe := fs.String("exe", "", "with --core: the executable's `FILE`, if it moved since the core was written (needed for cores without NT_FILE, such as qemu-user's)")
	sysroot := fs.String("sysroot", "", "with --core: look up shared libraries under `DIR`, as gdb's set sysroot (e.g. /usr/aarch64-linux-gnu for qemu-aarch64 -L /usr/aarch64-linux-gnu)")
	asJSON := fs.Bool("json", false, "print JSON (see above)")
	maxDepth := fs.Int("max-depth", unwind.DefaultMaxDepth, "stop each walk after `N` frames")
	noDemangle := fs.Bool("no-demangle", false, "print C++ and Rust symbol names as they are in the symbol table")
	source := fs.Bool("source", false, "add each frame's source file and line, from DWARF (as eu-stack -s)")
	fs.alias("s", "source")
	inlines := fs.Bool("inlines", false, "add the calls inlined at each frame, from DWARF, as frames of their own (as eu-stack -i; implies -s)")
	fs.alias("i", "inlines")
	pprofOut := fs.String("pprof", "", "write the stacks as a pprof profile to `FILE` instead of printing them")
	count := fs.Int("count", 1, "with --pprof: capture a live process `N` times")
	interval := fs.Duration("interval", 10*time.Millisecond, "with --count: the pause `D` between captures")
	operands, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(operands) == 0 && *core == "":
		return fs.fail("no process given: a PID, or --core CORE")
	case *maxDepth <= 0:
		return fs.fail("--max-depth must be positive")
	case *exe != "" && *core == "":
		return fs.fail("--exe needs --core")
	case *sysroot != "" && *core == "":
		return fs.fail("--sysroot needs --core")
	case *count < 1 || *interval < 0:
		return fs.fail("--count must be positive and --interval not negative")
	case fs.isSet("interval") && !fs.isSet("count"):
		return fs.fail("--interval needs --count")
	case *count > 1 && (*pprofOut == "" || *core != ""):
		return fs.fail("--count needs --pprof and a live process")
	case *pprofOut != "" && *asJSON:
		return fs.fail("--pprof and --json exclude each other")
	}
	// A core or executable that is not a whole ELF file is named as such
	// before any work.
	for _, path := range []string{*core, *exe} {
		if path == "" {
			continue
		}
		f, err := elffile.OpenArg(path)
		if err != nil {
			if path == *core && cutCore(path, err) {
				continue
			}
			fs.fileError(path, err)
			return 1
		}
		f.Close()
	}
	tr := unwind.NewTracer()
	tr.Demangle = !*noDemangle
	tr.Source = *source
	tr.Inlines = *inlines
	tr.MaxDepth = *maxDepth
	// One capture looks up a few addresses per file: search the symbol
	// tables for those instead of indexing every function.
	tr.Sym.Lazy = *count == 1
	var capture func() (*unwind.Trace, error)
	switch {
	case *core != "" && len(operands) == 0:
		capture = func() (*unwind.Trace, error) {
			c, err := targets.OpenCoreWith(*core, targets.CoreOptions{Exe: *exe, Sysroot: *sysroot})
			if err != nil {
				return nil, err
			}
			defer c.Close()
			// A missing or wrong executable or library gives wrong or
			// short stacks: say so.
			for _, w := range c.Warnings() {
				fmt.Fprintf(stderr, "sframe stack: warning: %v\n", w)
			}
			return tr.Capture(c)
		}
	case *core == "" && len(operands) == 1:
		pid, err := strconv.Atoi(operands[0])
		if err != nil || pid <= 0 {
			return fs.fail("bad PID %q", operands[0])
		}
		// Read the process's unwind tables before attaching to it (the
		// process is not stopped meanwhile). One capture loads them in
		// this goroutine: a goroutine of their own, overlapping the
		// attach, cost more in thread switches and page faults (40-60
		// of 360-530 a run) than the overlap saved. Several captures
		// load the symbols too, in the background.
		if files, err := targets.MappedFiles(pid); err == nil {
			if *count == 1 {
				tr.Cache.Load(files)
			} else {
				tr.Prefetch(files)
			}
		}
		capture = func() (*unwind.Trace, error) {
			// ptrace from this goroutine's thread: no tracer thread to
			// start, no thread switch per request.
			p, err := targets.AttachProcessWith(pid, targets.AttachOptions{CallerThread: true})
			if err != nil {
				return nil, err
			}
			// Ctrl-C detaches: the kernel does it when this program
			// dies, as Close would, except that it drops a signal held
			// since the attach (which Close delivers again). Only then
			// is a handler worth its goroutine and OS thread. (With
			// --pprof, stackProfile's handler lets the capture end and
			// Close detach.)
			if holdsSignal(p) && *pprofOut == "" {
				stop := targets.CloseOnSignal(p)
				defer stop()
			}
			// Detach before naming functions and printing: the
			// process need not wait for those.
			defer p.Close()
			return tr.Capture(p)
		}
	default:
		return fs.fail("one PID, or --core CORE without a PID")
	}
	if *pprofOut != "" {
		return stackProfile(tr, capture, *count, *interval, *pprofOut, stderr)
	}
	trace, err := capture()
	if err != nil {
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	}
	tr.Symbolize(trace)
	if *asJSON {
		err = dump.WriteTraceJSON(stdout, trace)
	} else {
		err = dump.WriteTraceText(stdout, trace)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	}
	return code
}

// cutCore reports whether err, of opening the core file path, says that
// the file ends early while its header is a core's: a core cut short by a
// size limit or a full disk still holds the threads' registers, and
// targets reads what memory is there and warns of the rest, as gdb does.
// Only a regular file is read again (a pipe cannot be).
func cutCore(path string, err error) bool {
	var te *elffile.TruncatedError
	if !errors.As(err, &te) {
		return false
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h, err := elffile.ReadHeader(f)
	return err == nil && elf.Type(h.Type) == elf.ET_CORE
}

// holdsSignal reports whether a thread of p was stopped at the delivery
// of a signal, which p.Close delivers again.
func holdsSignal(p *targets.Process) bool {
	for _, th := range p.Threads() {
		if th.Signal != 0 {
			return true
		}
	}
	return false
}

// stackProfile captures count times, interval apart, and writes the
// stacks as one pprof profile to path. A process that exits ends the
// captures early; the profile then has those made.
func stackProfile(tr *unwind.Tracer, capture func() (*unwind.Trace, error), count int, interval time.Duration, path string, stderr io.Writer) int {
	// A signal (Ctrl-C, a closed terminal) ends the captures after the
	// one under way; the profile has those made.
	wake := make(chan struct{})
	in := catchInterrupts(func(syscall.Signal) { close(wake) }, nil)
	defer in.Stop()
	p, n, err := stackprof.Sample(tr, capture, stackprof.Sampling{Count: count, Interval: interval, Stop: wake})
	code := 0
	switch {
	case err == nil:
	case p == nil: // the first capture's error, or the profile's
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	case errors.Is(err, targets.ErrGone):
		// The end of the process ends the sampling; what was captured
		// is the profile.
		fmt.Fprintf(stderr, "sframe stack: the process exited after %d of %d captures; the profile has those %d\n", n, count, n)
	default:
		fmt.Fprintf(stderr, "sframe stack: capture %d: %v; the profile has the first %d\n", n+1, err, n)
		code = 1
	}
	sig := in.Signal()
	if sig != 0 {
		if n == 0 {
			fmt.Fprintf(stderr, "sframe stack: interrupted by %s before the first capture: nothing written\n", signalName(sig))
			return exitSignaled(sig)
		}
		code = exitSignaled(sig)
	}
	var buf bytes.Buffer
	err = p.Write(&buf) // gzipped protobuf, what pprof reads
	if err == nil {
		err = outfile.Write(path, buf.Bytes(), 0o644, nil) // nil: - is os.Stdout
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	}
	if sig != 0 {
		fmt.Fprintf(stderr, "sframe stack: interrupted by %s after %d of %d captures; the profile has those %d\n", signalName(sig), n, count, n)
	}
	return code
}

package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/targets"
	"github.com/sframekit/sframekit/unwind"
)

func init() {
	register("stack", "print the stack of every thread of a process or core file", runStack)
}

const stackUsage = `PID | --core CORE [--exe FILE]

Prints one block per thread: "Thread TID (name):", then one line per
frame, innermost first, as gdb's backtrace prints them:

  #N  0xADDR in func+0xOFF [at FILE:LINE] (module) [method]

ADDR is the current PC of frame 0 and the return address of the other
frames; method (sframe, cfi, fp, signal) says which rules found the
frame's caller. C++ and Rust names are demangled as c++filt prints
them, unless --no-demangle is given. A signal trampoline prints as
<signal handler called>. With -s (--source), frames whose module has
DWARF line information (or a separate debug file) show the source line
of the PC, or of the call for return addresses, as gdb does. When a
walk ends before the outermost frame, a last line "Backtrace stopped:
REASON" says why.

--json prints one object instead (stable; fields may be added):
  {"pid": N, "threads": [{"tid": N, "name": S, "frames": [
     {"index": N, "pc": "0x..", "sp": "0x..", "cfa": "0x..",
      "function": S, "demangled": S, "offset": N, "file": S, "line": N,
      "module": PATH,
      "method": "sframe|cfi|fp|signal|none", "signal": BOOL}],
   "complete": BOOL, "stop": REASON, "error": S}]}
Addresses are hexadecimal strings; "function" is the symbol name and
"demangled" its demangled form; "cfa", "function", "demangled", "file",
"line", "module", "signal" and "error" are left out when unknown or
empty.

A live process is stopped with ptrace for the capture and detached
afterwards, also on error or Ctrl-C.`

func runStack(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("stack", stackUsage, stderr)
	core := fs.String("core", "", "read the threads from core file `CORE` instead of a live process")
	exe := fs.String("exe", "", "with --core: the executable's `FILE`, if it moved since the core was written")
	asJSON := fs.Bool("json", false, "print JSON (see above)")
	maxDepth := fs.Int("max-depth", unwind.DefaultMaxDepth, "stop each walk after `N` frames")
	noDemangle := fs.Bool("no-demangle", false, "print C++ and Rust symbol names as they are in the symbol table")
	source := fs.Bool("source", false, "add each frame's source file and line, from DWARF (as eu-stack -s)")
	fs.BoolVar(source, "s", false, "short for --source")
	operands, err := parseInterspersed(fs, args)
	if err != nil {
		if err == errHelp {
			return 0
		}
		return 2
	}
	if *maxDepth <= 0 {
		fmt.Fprintln(stderr, "sframe stack: --max-depth must be positive")
		return 2
	}
	if *exe != "" && *core == "" {
		fmt.Fprintln(stderr, "sframe stack: --exe needs --core")
		return 2
	}
	tr := unwind.NewTracer()
	tr.Demangle = !*noDemangle
	tr.Source = *source
	var t targets.Target
	switch {
	case *core != "" && len(operands) == 0:
		c, err := targets.OpenCore(*core, *exe)
		if err != nil {
			fmt.Fprintf(stderr, "sframe stack: %v\n", err)
			return 1
		}
		t = c
	case *core == "" && len(operands) == 1:
		pid, err := strconv.Atoi(operands[0])
		if err != nil || pid <= 0 {
			fmt.Fprintf(stderr, "sframe stack: bad PID %q\n", operands[0])
			return 2
		}
		// Read the process's files while attaching to it.
		if files, err := targets.MappedFiles(pid); err == nil {
			tr.Prefetch(files)
		}
		p, err := targets.AttachProcess(pid)
		if err != nil {
			fmt.Fprintf(stderr, "sframe stack: %v\n", err)
			return 1
		}
		stop := targets.CloseOnSignal(p)
		defer stop()
		t = p
	default:
		fs.Usage()
		return 2
	}
	tr.MaxDepth = *maxDepth
	trace, err := tr.Capture(t)
	// Detach before naming functions and printing: the process need not
	// wait for those.
	t.Close()
	if err != nil {
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	}
	tr.Symbolize(trace)
	if *asJSON {
		err = trace.WriteJSON(stdout)
	} else {
		err = trace.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe stack: %v\n", err)
		return 1
	}
	return 0
}

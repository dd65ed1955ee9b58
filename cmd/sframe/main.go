// The runtime's goroutine that follows changes of the CPU limit, to
// adjust GOMAXPROCS, costs each run of a short command a goroutine and
// thread wake-ups (sframe stack: 7 of 22 futex calls, 40 of 135 context
// switches); the commands need no such adjustment.
//
//go:debug updatemaxprocs=0

// Command sframe reads, checks, converts and prints SFrame and DWARF CFI
// data in ELF files. Each subcommand registers itself in init, in its
// file (commands of one concern share one: print.go, rewrite.go), so that
// main stays a dispatcher.
package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strings"
	"sync/atomic"

	// Maps the heap pages the command will use in one system call, before
	// the other packages' initialization allocates: page faults are what
	// a short command spends most on, on some virtual machines.
	_ "github.com/sframekit/sframekit/internal/prefault"
)

// command is one subcommand: its one-line summary and its entry point.
// run receives the arguments after the subcommand name and returns the
// process exit status.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; called from init functions.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	commands[name] = command{summary, run}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sframe COMMAND [flags] FILE...")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'sframe help COMMAND' (or 'sframe COMMAND -h') for the flags of a command,")
	fmt.Fprintln(w, "'sframe --version' for the version. A FILE of - is standard input.")
}

// version is the module version the binary was built from, as
// runtime/debug records it: a release, or for a build from a clone the
// pseudo-version Go derives from the commit; when Go recorded none,
// "devel" and the commit (with "+dirty" when the tree had changes).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(bi)
}

// versionOf is version for the build information bi.
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v, dirty := "devel", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty {
		v += "+dirty"
	}
	return v
}

func main() {
	delayGC()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// gcFirst is the heap size at which garbage is first collected, and
// gcPercent Go's GOGC from then on.
const (
	gcFirst   = 128 << 20
	gcPercent = 100
)

// delayGC leaves garbage uncollected until the heap reaches gcFirst, and
// from then on has it collected as Go does by default (GOGC 100: the heap
// at most twice what is live). Most commands touch tens of MB at most,
// and collecting every time the heap doubles from a few MB costs them a
// millisecond or more (a stack capture); but collecting only near a
// high limit let garbage take what an input's work allocates, up to that
// limit (1 GiB before, for a 600 KB recording), and a limit alone makes
// the collector run without end once what is live nears it.
func delayGC() { delayGCUntil(gcFirst) }

// delayGCUntil is delayGC with the first collection when the process's
// memory reaches first bytes. A later call replaces an earlier one's
// settings, whose first collection then changes nothing.
func delayGCUntil(first int64) {
	gen := gcGen.Add(1)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(first)
	armGC(gen, first)
}

// gcGen counts the calls of delayGCUntil: a collection ends the delay of
// the latest only.
var gcGen atomic.Int64

// armGC has the next collection end the delay of call gen if the heap
// had reached first, and otherwise (a collection forced early, as
// hugeheap's) wait for the next one.
func armGC(gen, first int64) {
	// The collection finds the sentinel unreachable and runs its
	// finalizer.
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if gcGen.Load() != gen {
			return // a later delay holds
		}
		m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(m)
		if m[0].Value.Uint64()-m[1].Value.Uint64() < uint64(first/2) {
			armGC(gen, first)
			return
		}
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(math.MaxInt64)
	})
}

// gcSentinel is an object that the first collection frees. It holds a
// pointer so that it is not one of the tiny allocator's blocks, whose
// finalizers wait for every object in the block.
type gcSentinel struct{ _ *byte }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if c, ok := commands[args[1]]; ok && len(args) == 2 {
			return c.run([]string{"-h"}, stdout, stderr)
		}
		fmt.Fprintf(stderr, "sframe help: unknown command %q (see 'sframe help')\n", strings.Join(args[1:], " "))
		return 2
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "sframe %s\n", version())
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sframe: unknown command %q (see 'sframe help')\n", args[0])
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

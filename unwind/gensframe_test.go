//go:build linux && amd64

package unwind

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// genTracer returns a Tracer whose cache compiles SFrame from CFI.
func genTracer() *Tracer {
	tr := NewTracer()
	tr.Cache.Options.SFrameFromCFI = true
	return tr
}

// genFrames counts the frames of trace that SFrame compiled from CFI
// unwound, by module name.
func genFrames(trace *Trace) map[string]int {
	n := map[string]int{}
	for i := range trace.Threads {
		for _, f := range trace.Threads[i].Frames {
			if f.Method == MethodSFrame && f.Module != nil && f.Module.SFrameGen != nil {
				n[f.Module.Name]++
			}
		}
	}
	return n
}

// TestLiveSFrameFromCFI compares with gdb, as TestLiveSFrameOmitFP does,
// with SFrame compiled from the CFI of the files that have none: libc,
// and in the other builds the program itself. Those frames must take
// the compiled SFrame, and give gdb's frames.
func TestLiveSFrameFromCFI(t *testing.T) {
	testprog.NeedTool(t, "gdb")
	for _, c := range []struct {
		name  string
		flags []string
		prog  bool // the program has no SFrame of its own
	}{
		{"sframe", cfgSFrameO2, false},
		{"cfi", []string{"-O2", "-fomit-frame-pointer"}, true},
		// The program's rows in .debug_frame, its .eh_frame covering the
		// C runtime's start files: both are compiled.
		{"debug_frame", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			exe := buildProg(t, c.flags)
			p := startProg(t, exe, "1", "100")
			pid := p.PID()
			tr := genTracer()
			var diff string
			for attempt := 0; attempt < 3; attempt++ {
				trace := captureLive(t, tr, pid)
				if attempt == 0 {
					want := MethodSFrame
					checkShape(t, trace, 100, want)
					gen := genFrames(trace)
					var libc, prog int
					for name, n := range gen {
						switch {
						case strings.Contains(name, "libc.so"):
							libc += n
						case name == exe:
							prog += n
						}
					}
					if libc == 0 {
						t.Errorf("no libc frame unwound by SFrame compiled from CFI: %v", gen)
					}
					if c.prog != (prog > 0) {
						t.Errorf("program frames by compiled SFrame: %d, want them only without SFrame of its own: %v", prog, gen)
					}
				}
				waitBlocked(t, pid)
				if diff = compareWithGDB(trace, gdbStacks(t, "-p", strconv.Itoa(pid))); diff == "" {
					break
				}
				waitBlocked(t, pid)
			}
			if diff != "" {
				t.Error(diff)
			}
			p.Ping(t, "alive")
		})
	}
}

// TestSFrameFromCFIFallsBack unwinds testdata/genprog.c's thread, blocked
// under a function whose CFA is a DWARF expression (which sframegen
// leaves out: its CFI must unwind it) and one whose CFA is based on rbx
// (compiled as a flexible FDE, which a caller's frame cannot follow
// without rbx as CFI restores it: the walk must be redone from the
// CFI). With and without compiled SFrame, the frames must be gdb's.
func TestSFrameFromCFIFallsBack(t *testing.T) {
	testprog.NeedTool(t, "gdb")
	exe := testprog.Build(t, "testdata/genprog.c", "-O2", "-fomit-frame-pointer")
	p := testprog.Start(t, exe)
	pid := p.PID()
	cfiOnly := captureLive(t, NewTracer(), pid)
	tr := genTracer()
	gen := captureLive(t, tr, pid)
	waitBlocked(t, pid)
	gdb := gdbStacks(t, "-p", strconv.Itoa(pid))
	for _, c := range []struct {
		name  string
		trace *Trace
	}{{"CFI", cfiOnly}, {"compiled SFrame", gen}} {
		if diff := compareWithGDB(c.trace, gdb); diff != "" {
			t.Errorf("%s: %s", c.name, diff)
		}
	}
	var th *ThreadTrace
	for i := range gen.Threads {
		if gen.Threads[i].Name == "gen" {
			th = &gen.Threads[i]
		}
	}
	if th == nil {
		t.Fatal("no thread gen")
	}
	f := funcs(th)
	want := []string{"block_here", "cfa_expr", "rbx_cfa", "genthread", "start_thread", "clone3"}
	if len(f) < len(want)+1 || strings.Join(f[len(f)-len(want):], " ") != strings.Join(want, " ") {
		t.Fatalf("gen: frames %v, want ... %v", f, want)
	}
	for _, fr := range th.Frames {
		// The walk was redone without the compiled SFrame: rbx_cfa's
		// caller needs rbx.
		if fr.Method == MethodSFrame && fr.Module != nil && fr.Module.SFrameGen != nil {
			t.Errorf("frame %#x (%s): by compiled SFrame, want the CFI walk", fr.PC, fr.Func)
		}
	}
	// The program's other threads used the compiled SFrame, and the
	// file's conversion left cfa_expr out.
	if n := genFrames(gen); n[exe] == 0 {
		t.Errorf("no frame of %s by compiled SFrame: %v", exe, n)
	}
	for i := range gen.Threads {
		for _, fr := range gen.Threads[i].Frames {
			if fr.Module != nil && fr.Module.Name == exe {
				if g := fr.Module.SFrameGen; g == nil || g.Skipped != 1 {
					t.Errorf("%s: compiled SFrame %+v, want one function left out (cfa_expr)", exe, g)
				}
				return
			}
		}
	}
}

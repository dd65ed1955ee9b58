//go:build linux && amd64

package unwind

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestTablesDebugFrame loads the tables of testdata/stackprog.c built
// -O2 -g -fno-asynchronous-unwind-tables: its .eh_frame covers the C
// runtime's start files, its .debug_frame its own functions. Each
// address must find its rows in the section covering it, as built and,
// stripped, in the separate debug file its .gnu_debuglink names; SFrame
// compiled from the CFI must cover both.
func TestTablesDebugFrame(t *testing.T) {
	testprog.NeedTool(t, "objcopy")
	exe := buildProg(t, []string{"-O2", "-g", "-fno-asynchronous-unwind-tables"})
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			addr[s.Name] = s.Value
		}
	}
	if addr["recurse"] == 0 || addr["_start"] == 0 {
		t.Fatalf("no recurse or _start symbol: %v", addr)
	}
	check := func(what string, tb *Tables) {
		t.Helper()
		c := tb.CFITable()
		if c == nil || tb.CFI == nil || tb.CFI.Kind() != cfi.EHFrame || tb.DebugFrame == nil || c.Debug != tb.DebugFrame {
			t.Fatalf("%s: CFI %v, .debug_frame %v (errors %v)", what, tb.CFI, tb.DebugFrame, tb.Errs)
		}
		for _, fn := range []struct {
			name string
			tab  *cfi.Table
		}{{"_start", tb.CFI}, {"recurse", tb.DebugFrame}, {"block_here", tb.DebugFrame}} {
			pc := addr[fn.name] + 1
			tab, fde, err := c.FindFDE(pc)
			if err != nil || tab != fn.tab || !fde.Contains(pc) {
				t.Errorf("%s: %s: FDE [%#x,%#x) in %v, error %v; want it in %s", what, fn.name, fde.PCBegin, fde.PCEnd, tab, err, fn.tab.Kind())
			}
			var ctx cfi.UnwindContext
			var row cfi.Row
			if _, ok, err := c.Lookup(&ctx, pc, &row); !ok || err != nil {
				t.Errorf("%s: %s: no row (%v)", what, fn.name, err)
			}
		}
	}
	check("own .debug_frame", LoadTables(f))

	// Stripped, the .debug_frame in a separate debug file.
	dir := t.TempDir()
	stripped := filepath.Join(dir, "stackprog")
	debug := stripped + ".debug"
	for _, args := range [][]string{
		{"--only-keep-debug", exe, debug},
		{"--strip-debug", "--add-gnu-debuglink=" + debug, exe, stripped},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	sf, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	if tb := LoadTables(sf); tb.DebugFrame != nil {
		t.Fatal("the stripped file has a .debug_frame of its own")
	}
	opts := LoadOptions{DebugDirs: []string{}}
	check("separate debug file", LoadFileTables(sf, stripped, opts))

	// Compiled SFrame: the functions of both sections.
	opts.SFrameFromCFI = true
	tb := LoadFileTables(sf, stripped, opts)
	if tb.SFrame == nil || tb.Gen == nil {
		t.Fatalf("no SFrame compiled: %v", tb.Errs)
	}
	for _, name := range []string{"_start", "recurse", "block_here"} {
		if tb.SFrame.FindFunc(addr[name]+1) < 0 {
			t.Errorf("compiled SFrame: no function for %s", name)
		}
	}
	// Without the debug file, only .eh_frame.
	os.Remove(debug)
	if tb := LoadFileTables(sf, stripped, LoadOptions{DebugDirs: []string{}}); tb.DebugFrame != nil {
		t.Error("a .debug_frame without a debug file")
	}
}

//go:build linux

package targets

import (
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestSharedFirstPage attaches to, and reads a gcore of, the test program
// linked by lld, whose loadable bytes fit in the file's first page: all
// four PT_LOAD segments map file offset 0. The executable must be one
// module whose bias places worker_recurse in its executable mapping;
// each mapping of offset 0 used to start a module of its own, with the
// first segment's bias, so that the code's addresses were 0x1000 off and
// every walk stopped at the program's first frame.
func TestSharedFirstPage(t *testing.T) {
	needTool(t, "ld.lld")
	needTool(t, "gdb")
	exe := testprog.Build(t, "testdata/targprog.c", "-g", "-O1", "-fuse-ld=lld")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	var loads int
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		loads++
		if p.Off >= 4096 {
			t.Fatalf("lld placed a segment at file offset %#x: the program no longer has the layout this test is about", p.Off)
		}
	}
	f.Close()
	if loads < 2 {
		t.Fatalf("%d PT_LOAD segments, want several", loads)
	}
	fn, size := elfSym(t, exe, "worker_recurse")
	check := func(what string, mods []arch.Module) {
		t.Helper()
		var mine []arch.Module
		for _, m := range mods {
			if m.Path == exe {
				mine = append(mine, m)
			}
		}
		if len(mine) != 1 {
			t.Fatalf("%s: %d modules of %s, want 1: %+v", what, len(mine), exe, mine)
		}
		m := mine[0]
		if len(m.Mappings) < loads {
			t.Errorf("%s: %d mappings in the module, want %d", what, len(m.Mappings), loads)
		}
		pc := fn + size/2 + m.Bias
		if got := arch.FindModule(mods, pc); got == nil || got.Path != exe {
			t.Fatalf("%s: worker_recurse at %#x (bias %#x) in module %v", what, pc, m.Bias, got)
		}
		for _, mp := range m.Mappings {
			if pc >= mp.Start && pc < mp.End {
				if !strings.Contains(mp.Perm, "x") {
					t.Errorf("%s: worker_recurse at %#x (bias %#x) in mapping %+v, not executable", what, pc, m.Bias, mp)
				}
				return
			}
		}
		t.Errorf("%s: worker_recurse at %#x (bias %#x) in no mapping of %+v", what, pc, m.Bias, m.Mappings)
	}

	c := testprog.StartWith(t, testprog.Options{Threads: 4}, exe)
	p, err := AttachProcess(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	live := p.Modules()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	check("live", live)

	core := filepath.Join(t.TempDir(), "core")
	if out, err := exec.Command("gdb", "-nx", "-batch", "-p", fmt.Sprint(c.PID()), "-ex", "gcore "+core).CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, out)
	}
	cr, err := OpenCore(core, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	check("core", cr.Modules())
}

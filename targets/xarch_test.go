//go:build linux

package targets

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestCrossCores opens qemu-user cores of the cross-built test program
// (internal/testprog: four threads, a signal handler, dynamic linking)
// for AArch64, s390x (big endian) and x86-64. Those cores have no
// NT_FILE: the modules come from the executable and the dynamic linker's
// list in the core. Registers must be gdb-multiarch's, register for
// register and thread for thread; every module must have the load bias
// the program itself printed (dl_iterate_phdr) and its file under the
// sysroot; text the core did not dump must read as the files' bytes.
func TestCrossCores(t *testing.T) {
	cases := []struct {
		arch  testprog.Arch
		flags []string
		qemu  []string
		regs  []string // gdb's names
	}{
		{testprog.AArch64, []string{"-O2"}, []string{"-cpu", "max,sve=off"}, append(numbered("x", 31), "sp", "pc")},
		{testprog.S390X, []string{"-O2"}, nil, append(numbered("r", 16), "pswa")},
		{testprog.X8664, []string{"-O2", "-pie", "-fpie"}, nil, []string{"rip", "rsp", "rbp", "rbx", "r12"}},
		{testprog.X8664, []string{"-O2", "-static-pie"}, nil, []string{"rip", "rsp", "rbp"}},
	}
	for _, c := range cases {
		t.Run(c.arch.Name+strings.Join(c.flags, ""), func(t *testing.T) {
			exe := testprog.BuildCross(t, c.arch, c.flags...)
			crash := testprog.CrashCore(t, c.arch, exe, c.qemu...)
			core, err := OpenCoreWith(crash.Core, CoreOptions{Exe: exe, Sysroot: c.arch.Sysroot})
			if err != nil {
				t.Fatal(err)
			}
			defer core.Close()
			for _, w := range core.Warnings() {
				t.Errorf("warning: %v", w)
			}
			if len(core.Threads()) != 4 || core.Exe() != exe {
				t.Fatalf("%d threads, exe %q; want 4, %q", len(core.Threads()), core.Exe(), exe)
			}

			// Registers, as gdb-multiarch reads them.
			want := map[int]map[string]uint64{}
			for _, th := range core.Threads() {
				if th.Regs.Arch != core.Arch() {
					t.Fatalf("thread %d registers of %v in a %v core", th.TID, th.Regs.Arch, core.Arch())
				}
				want[th.TID] = namedRegs(&th.Regs, c.regs)
			}
			out := testprog.GDBMultiarch(t, exe, crash.Core, c.arch.Sysroot, "thread apply all info registers "+strings.Join(c.regs, " "))
			compareRegs(t, "gdb-multiarch", parseGDBRegs(t, out), want)

			// Modules, as the dynamic linker placed them.
			if len(core.Modules()) != len(crash.Modules) {
				t.Errorf("%d modules, the program reported %d: %v", len(core.Modules()), len(crash.Modules), crash.Modules)
			}
			for name, bias := range crash.Modules {
				path, file := name, filepath.Join(c.arch.Sysroot, name)
				if name == "" {
					path, file = exe, exe
				}
				var m *arch.Module
				for i := range core.Modules() {
					if core.Modules()[i].Path == path {
						m = &core.Modules()[i]
					}
				}
				if m == nil {
					t.Errorf("no module %q", path)
					continue
				}
				if !m.HasBias || m.Bias != bias || m.File != file || !m.Contains(m.Start) {
					t.Errorf("module %s: bias %#x (%v), file %q; want %#x, %q", path, m.Bias, m.HasBias, m.File, bias, file)
				}
				checkTextBytes(t, core.Memory(), m)
			}
		})
	}
}

// numbered returns prefix0 .. prefix(n-1).
func numbered(prefix string, n int) []string {
	var s []string
	for i := 0; i < n; i++ {
		s = append(s, fmt.Sprintf("%s%d", prefix, i))
	}
	return s
}

// namedRegs returns r's registers under gdb's names.
func namedRegs(r *arch.Regs, names []string) map[string]uint64 {
	m := map[string]uint64{}
	for _, n := range names {
		var v uint64
		var i int
		switch {
		case r.Arch == arch.AMD64:
			v = regsOf(r)[n]
		case n == "pc" || n == "pswa":
			v = r.PC()
		case n == "sp":
			v = r.SP()
		default:
			fmt.Sscanf(n[1:], "%d", &i)
			v = r.R[i]
		}
		m[n] = v
	}
	return m
}

// parseGDBRegs parses "thread apply all info registers" output by LWP.
func parseGDBRegs(t *testing.T, out string) gdbRegs {
	t.Helper()
	regs := gdbRegs{}
	cur := -1
	for _, l := range strings.Split(out, "\n") {
		if m := gdbThreadRE.FindStringSubmatch(l); m != nil {
			fmt.Sscanf(m[1], "%d", &cur)
			regs[cur] = map[string]uint64{}
		} else if m := gdbRegRE.FindStringSubmatch(l); m != nil && cur >= 0 {
			var v uint64
			fmt.Sscanf(m[2], "0x%x", &v)
			regs[cur][m[1]] = v
		}
	}
	if len(regs) == 0 {
		t.Fatalf("no registers in gdb output:\n%s", out)
	}
	return regs
}

// TestCrossCoreWrongExe opens a qemu core with executables that are not
// its own: another architecture's, and another build (whose entry point
// differs from the core's AT_ENTRY). Neither may be placed: a warning
// says why, and there is no module.
func TestCrossCoreWrongExe(t *testing.T) {
	exe := testprog.BuildCross(t, testprog.S390X, "-O2")
	crash := testprog.CrashCore(t, testprog.S390X, exe)
	for _, other := range []string{
		testprog.BuildCross(t, testprog.AArch64, "-O2"),
		testprog.BuildCross(t, testprog.S390X, "-O0", "-static"),
	} {
		c, err := OpenCoreWith(crash.Core, CoreOptions{Exe: other, Sysroot: testprog.S390X.Sysroot})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Modules()) != 0 || len(c.Warnings()) != 1 || !strings.Contains(c.Warnings()[0].Error(), "not its executable") && !strings.Contains(c.Warnings()[0].Error(), "does not match the core") {
			t.Errorf("%s: modules %v, warnings %v", other, c.Modules(), c.Warnings())
		}
		c.Close()
	}
	c, err := OpenCoreWith(crash.Core, CoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Modules()) != 0 || len(c.Warnings()) != 1 || !strings.Contains(c.Warnings()[0].Error(), "--exe") {
		t.Errorf("no exe: modules %v, warnings %v", c.Modules(), c.Warnings())
	}
}

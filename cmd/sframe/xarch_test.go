//go:build linux && amd64

package main

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// Cross-architecture cores: crossprog.c (internal/testprog) built for
// AArch64, s390x and x86-64, run under qemu-user until it aborts, and
// `sframe stack --core` on qemu's core, which has no NT_FILE: the modules
// come from --exe and, for dynamic programs, from the dynamic linker's
// list in the core, their files from --sysroot.

// xcase is one build of the program.
type xcase struct {
	name  string
	arch  testprog.Arch
	flags []string
	qemu  []string
	// gen runs the program's `sframe gen` copy (s390x: gas makes no
	// SFrame there) instead of the program.
	gen bool
	// prog is the method that must unwind the program's own functions,
	// lib the one for the C library's (and the ends of the stacks).
	prog, lib string
	// static names the static case (same flags) whose function names a
	// dynamic case must show; gdb-multiarch cannot read qemu cores of
	// dynamic programs. Static cases compare PCs with gdb-multiarch.
	static string
	// pacNote adds the NT_ARM_PAC_MASK note the kernel writes (qemu does
	// not), without which gdb cannot unwind signed return addresses.
	pacNote bool
	// sig is the method of signal trampoline frames: "signal", or "cfi"
	// where the trampoline has CFI (x86-64's __restore_rt).
	sig string
}

// noSVE: qemu-aarch64's default CPU ("max") has SVE, and gdb-multiarch
// 13 loops forever on the SVE record of qemu's signal frames.
var noSVE = []string{"-cpu", "max,sve=off"}

var xcases = []xcase{
	{name: "aarch64-O0-sframe", arch: testprog.AArch64, flags: []string{"-O0", "-static", "-Wa,--gsframe"}, qemu: noSVE, prog: "sframe", lib: "cfi"},
	{name: "aarch64-O2-sframe", arch: testprog.AArch64, flags: []string{"-O2", "-static", "-Wa,--gsframe"}, qemu: noSVE, prog: "sframe", lib: "cfi"},
	{name: "aarch64-O0-fp", arch: testprog.AArch64, flags: []string{"-O0", "-static", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, qemu: noSVE, prog: "fp", lib: "cfi"},
	// -fomit-frame-pointer: rows that save x30 alone, two data words
	// (the section was once rejected whole and CFI used instead).
	{name: "aarch64-O2-omitfp-sframe", arch: testprog.AArch64, flags: []string{"-O2", "-static", "-Wa,--gsframe", "-fomit-frame-pointer"}, qemu: noSVE, prog: "sframe", lib: "cfi"},
	{name: "aarch64-O2-fp", arch: testprog.AArch64, flags: []string{"-O2", "-static", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, qemu: noSVE, prog: "fp", lib: "cfi"},
	{name: "aarch64-O2-pac-sframe", arch: testprog.AArch64, flags: []string{"-O2", "-static", "-Wa,--gsframe", "-mbranch-protection=standard"}, qemu: noSVE, prog: "sframe", lib: "cfi", pacNote: true},
	{name: "aarch64-O2-pac-cfi", arch: testprog.AArch64, flags: []string{"-O2", "-static", "-mbranch-protection=standard"}, qemu: noSVE, prog: "cfi", lib: "cfi", pacNote: true},
	{name: "aarch64-O2-dynamic", arch: testprog.AArch64, flags: []string{"-O2", "-Wa,--gsframe"}, qemu: noSVE, prog: "sframe", lib: "cfi", static: "aarch64-O2-sframe"},
	{name: "s390x-O0-cfi", arch: testprog.S390X, flags: []string{"-O0", "-static"}, prog: "cfi", lib: "cfi"},
	{name: "s390x-O2-cfi", arch: testprog.S390X, flags: []string{"-O2", "-static"}, prog: "cfi", lib: "cfi"},
	{name: "s390x-O2-gen", arch: testprog.S390X, flags: []string{"-O2", "-static"}, gen: true, prog: "sframe", lib: "sframe"},
	{name: "s390x-O0-backchain", arch: testprog.S390X, flags: []string{"-O0", "-static", "-mbackchain", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, prog: "fp", lib: "cfi"},
	{name: "s390x-O2-backchain", arch: testprog.S390X, flags: []string{"-O2", "-static", "-mbackchain", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, prog: "fp", lib: "cfi"},
	{name: "s390x-O2-dynamic", arch: testprog.S390X, flags: []string{"-O2"}, prog: "cfi", lib: "cfi", static: "s390x-O2-cfi"},
	{name: "x86_64-O2-static-pie", arch: testprog.X8664, flags: []string{"-O2", "-static-pie", "-Wa,--gsframe"}, prog: "sframe", lib: "cfi", sig: "cfi"},
	{name: "x86_64-O2-dynamic-pie", arch: testprog.X8664, flags: []string{"-O2", "-pie", "-fpie", "-Wa,--gsframe"}, prog: "sframe", lib: "cfi", sig: "cfi", static: "x86_64-O2-static-pie"},
}

// The program's own functions, whose frames prog's method unwinds.
var progFuncs = map[string]bool{"block_here": true, "recurse": true, "recurse_thread": true, "on_signal": true,
	"send_signal": true, "sig_thread": true, "compare": true, "do_sort": true, "sort_thread": true, "crash": true, "main": true}

// isProgFunc reports whether fn is one of the program's functions, or a
// part of one (crash.cold: gcc -O2 moves unlikely code out).
func isProgFunc(fn string) bool {
	if i := strings.IndexByte(fn, '.'); i > 0 {
		fn = fn[:i]
	}
	return progFuncs[fn]
}

// threadRole names a thread by the program function that starts it.
func threadRole(frames []xframe) string {
	for _, f := range frames {
		switch f.fn {
		case "recurse_thread", "sig_thread", "sort_thread", "main":
			return f.fn
		}
	}
	return "?"
}

type xframe struct {
	pc              uint64 // 0 for a signal trampoline
	fn, mod, method string
}

var (
	xThreadRe = regexp.MustCompile(`^Thread (\d+)(?: \(.*\))?:$`)
	xFrameRe  = regexp.MustCompile(`^#(\d+) +0x([0-9a-f]{16}) in (.+?)(?: \(([^)]+)\))? \[(sframe|cfi|fp|signal|none)\]$`)
	xGDBTh    = regexp.MustCompile(`^Thread \d+ \((?:.*)?LWP (\d+)\)`)
	xGDBFrame = regexp.MustCompile(`^#(\d+)\s+(?:0x([0-9a-f]+)(?: \[PAC\])? in (\S+)|(<signal handler called>))`)
)

// parseX parses `sframe stack` text into threads in order, with the
// reason each stopped early ("" when complete).
func parseX(t *testing.T, text string) (tids []int, th map[int][]xframe, stops map[int]string) {
	t.Helper()
	th, stops = map[int][]xframe{}, map[int]string{}
	tid := -1
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case l == "":
			tid = -1
		case xThreadRe.MatchString(l):
			tid, _ = strconv.Atoi(xThreadRe.FindStringSubmatch(l)[1])
			tids = append(tids, tid)
		case strings.HasPrefix(l, "Backtrace stopped: ") && tid >= 0:
			stops[tid] = l
		case tid < 0 && (strings.HasPrefix(l, "Program terminated with signal ") || strings.HasPrefix(l, "Fault address: ")):
			// How the process of a core died, before the threads.
		default:
			m := xFrameRe.FindStringSubmatch(l)
			if m == nil || tid < 0 {
				t.Fatalf("bad line %q", l)
			}
			f := xframe{fn: m[3], mod: m[4], method: m[5]}
			if i := strings.LastIndex(f.fn, "+0x"); i > 0 {
				f.fn = f.fn[:i]
			}
			if f.fn != "<signal handler called>" {
				f.pc, _ = strconv.ParseUint(m[2], 16, 64)
			}
			th[tid] = append(th[tid], f)
		}
	}
	return tids, th, stops
}

// gdbLimit bounds gdb's backtraces: it repeats a frame forever where its
// prologue analysis fails (main of aarch64-O2-fp).
const gdbLimit = 100

// parseGDB returns the PCs (0 for "<signal handler called>") and names
// of gdb's "thread apply all bt", by LWP.
func parseGDB(out string) map[int][]xframe {
	th := map[int][]xframe{}
	tid := -1
	for _, l := range strings.Split(out, "\n") {
		if m := xGDBTh.FindStringSubmatch(l); m != nil {
			tid, _ = strconv.Atoi(m[1])
		} else if m := xGDBFrame.FindStringSubmatch(l); m != nil && tid >= 0 {
			f := xframe{fn: "<signal handler called>"}
			if m[4] == "" {
				f.pc, _ = strconv.ParseUint(m[2], 16, 64)
				f.fn = m[3]
			}
			th[tid] = append(th[tid], f)
		}
	}
	return th
}

// xrun is a case's core and our stacks of it.
type xrun struct {
	exe   string
	crash *testprog.Crash
	tids  []int
	th    map[int][]xframe
	out   string
}

var (
	xrunsMu sync.Mutex
	xruns   = map[string]*xrun{}
)

// runX builds, crashes and unwinds case c, once per test binary.
func runX(t *testing.T, c xcase) *xrun {
	t.Helper()
	xrunsMu.Lock()
	defer xrunsMu.Unlock()
	if r := xruns[c.name]; r != nil {
		return r
	}
	exe := testprog.BuildCross(t, c.arch, c.flags...)
	if c.gen {
		g := exe + ".gen"
		if _, err := os.Stat(g); err != nil {
			if _, stderr, code := runCLI(t, "gen", "-o", g, exe); code != 0 {
				t.Fatalf("sframe gen: %s", stderr)
			}
		}
		exe = g
	}
	crash := testprog.CrashCore(t, c.arch, exe, c.qemu...)
	args := []string{"stack", "--core", crash.Core, "--exe", exe}
	if c.arch.Sysroot != "" {
		args = append(args, "--sysroot", c.arch.Sysroot)
	}
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("sframe %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	r := &xrun{exe: exe, crash: crash, out: stdout}
	r.tids, r.th, _ = parseX(t, stdout)
	xruns[c.name] = r
	return r
}

// TestStackCrossCores checks `sframe stack --core` on qemu-user cores of
// every case: four threads, complete walks, the expected method for each
// frame, and the frames of gdb-multiarch (static programs) or the
// function names of the static build (dynamic ones).
func TestStackCrossCores(t *testing.T) {
	byName := map[string]xcase{}
	for _, c := range xcases {
		byName[c.name] = c
	}
	for _, c := range xcases {
		t.Run(c.name, func(t *testing.T) {
			r := runX(t, c)
			_, _, stops := parseX(t, r.out)
			if len(r.tids) != 4 {
				t.Fatalf("%d threads, want 4:\n%s", len(r.tids), r.out)
			}
			if len(stops) != 0 {
				t.Errorf("walks stopped early: %v\n%s", stops, r.out)
			}
			roles := map[string][]xframe{}
			for _, tid := range r.tids {
				fs := r.th[tid]
				roles[threadRole(fs)] = fs
				for i, f := range fs {
					want := c.lib
					switch {
					case f.fn == "<signal handler called>":
						want = cmp.Or(c.sig, "signal")
					case isProgFunc(f.fn):
						want = c.prog
					}
					if f.method != want {
						t.Errorf("thread %d frame %d (%s): method %s, want %s", tid, i, f.fn, f.method, want)
					}
				}
			}
			if threadRole(r.th[r.tids[0]]) != "main" {
				t.Errorf("first thread is %s, want the crashing main thread", threadRole(r.th[r.tids[0]]))
			}
			if c.static != "" {
				sameFunctions(t, roles, runX(t, byName[c.static]))
				return
			}
			sameAsGDB(t, c, r)
		})
	}
}

// sameFunctions checks a dynamic program's stacks against the static
// build's: the same number of frames in each thread and, frame by frame,
// the same program function (or none, in a library).
func sameFunctions(t *testing.T, roles map[string][]xframe, static *xrun) {
	t.Helper()
	for _, tid := range static.tids {
		want := static.th[tid]
		role := threadRole(want)
		got := roles[role]
		names := func(fs []xframe) string {
			var s []string
			for _, f := range fs {
				if isProgFunc(f.fn) {
					s = append(s, f.fn)
				} else {
					s = append(s, "-")
				}
			}
			return strings.Join(s, " ")
		}
		if g, w := names(got), names(want); g != w {
			t.Errorf("%s thread:\n got %s\nwant %s (static)", role, g, w)
		}
	}
}

// sameAsGDB compares every thread's PCs with gdb-multiarch's backtrace of
// the same core.
func sameAsGDB(t *testing.T, c xcase, r *xrun) {
	t.Helper()
	core := r.crash.Core
	if c.pacNote {
		core = withPACMask(t, core)
	}
	out := testprog.GDBMultiarch(t, r.exe, core, c.arch.Sysroot, "set backtrace past-main on", fmt.Sprintf("set backtrace limit %d", gdbLimit), "thread apply all bt")
	gdb := parseGDB(out)
	if c.pacNote && !strings.Contains(out, "[PAC]") {
		t.Errorf("gdb shows no signed return address ([PAC]): the case tests nothing\n%s", out)
	}
	if len(gdb) != len(r.tids) {
		t.Fatalf("gdb shows %d threads, we %d:\n%s", len(gdb), len(r.tids), out)
	}
	// How the process died (crossprog aborts). qemu writes pr_cursig in
	// the crashing thread's NT_PRSTATUS only, and no NT_SIGINFO: the
	// signal, no fault address. gdb takes the last NT_PRSTATUS's, so it
	// says nothing of a core whose last thread is another; when it
	// speaks, it says what we do.
	gdbLine := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Program terminated with signal ") {
			gdbLine = l
		}
	}
	if first, _, _ := strings.Cut(r.out, "\n"); first != cmp.Or(gdbLine, "Program terminated with signal SIGABRT, Aborted.") {
		t.Errorf("first line %q, gdb-multiarch's %q", first, gdbLine)
	}
	for _, tid := range r.tids {
		got, want := r.th[tid], gdb[tid]
		if len(want) == gdbLimit {
			// gdb repeated a frame until the limit: compare up to
			// the first of the repeated ones.
			n := len(want) - 1
			for n > 0 && want[n-1].pc == want[len(want)-1].pc {
				n--
			}
			t.Logf("thread %d: gdb repeats frame %d (%s) until its limit; comparing the %d frames before", tid, n, want[n].fn, n+1)
			want = want[:n+1]
			got = got[:min(len(got), n+1)]
		}
		pcs := func(fs []xframe) string {
			var s []string
			for _, f := range fs {
				s = append(s, fmt.Sprintf("%#x", f.pc))
			}
			return strings.Join(s, " ")
		}
		if g, w := pcs(got), pcs(want); g != w {
			t.Errorf("thread %d:\n got %s\nwant %s (gdb-multiarch)\n%s\n%s", tid, g, w, r.out, out)
		}
	}
}

// withPACMask returns a copy of the AArch64 core path with, after each
// thread's NT_PRSTATUS, the NT_ARM_PAC_MASK note a kernel writes (bits
// 48-54, for a 48-bit address space): qemu-user writes none, and gdb,
// seeing pointer authentication in AT_HWCAP, cannot unwind a thread
// without it. The copy has the notes and the program headers moved to its
// end.
func withPACMask(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	bo := binary.LittleEndian
	const ntARMPACMask = 0x406
	pac := bo.AppendUint32(nil, 6) // "LINUX\0"
	pac = bo.AppendUint32(pac, 16)
	pac = bo.AppendUint32(pac, ntARMPACMask)
	pac = append(pac, "LINUX\x00\x00\x00"...)
	pac = bo.AppendUint64(pac, 0x007f000000000000) // data_mask
	pac = bo.AppendUint64(pac, 0x007f000000000000) // insn_mask
	out := append([]byte(nil), src...)
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	var phdrs []elf.Prog64
	for _, p := range f.Progs {
		ph := elf.Prog64{Type: uint32(p.Type), Flags: uint32(p.Flags), Off: p.Off, Vaddr: p.Vaddr,
			Paddr: p.Paddr, Filesz: p.Filesz, Memsz: p.Memsz, Align: p.Align}
		if p.Type == elf.PT_NOTE {
			notes := src[p.Off : p.Off+p.Filesz]
			start := len(out)
			for len(notes) >= 12 {
				n := 12 + (bo.Uint32(notes)+3)&^3 + (bo.Uint32(notes[4:])+3)&^3
				out = append(out, notes[:n]...)
				if bo.Uint32(notes[8:]) == uint32(elf.NT_PRSTATUS) {
					out = append(out, pac...)
				}
				notes = notes[n:]
			}
			ph.Off, ph.Filesz = uint64(start), uint64(len(out)-start)
		}
		phdrs = append(phdrs, ph)
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	phoff := uint64(len(out))
	out, err = binary.Append(out, bo, phdrs)
	if err != nil {
		t.Fatal(err)
	}
	bo.PutUint64(out[32:], phoff)
	p := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gcoreSrc recurses 20 calls deep in one thread and pauses: gdb's gcore of
// a qemu-user target dumps the stack it finds around SP of a lone
// thread (of several threads it dumps none).
//
// At -O2 gdb 13 takes the stack to be everything below SP (a sparse
// segment of 340 GB from address 0) and dumps none above it; at -O1 it
// dumps the frames' range above SP.
const gcoreSrc = `#include <unistd.h>
volatile int sink;
__attribute__((noinline)) int deep(int n) {
	if (n == 0) {
		pause();
		return 0;
	}
	int r = deep(n - 1);
	sink += r;
	return r + 1;
}
int main(void) { return deep(20); }
`

// TestStackGcoreCross checks `sframe stack --core` on AArch64 and s390x
// cores written by gdb's gcore (over qemu-user's gdb stub) rather than
// by qemu: gdb writes a segment per loaded section, not per page, and no
// NT_FILE. The frames must equal gdb-multiarch's on the same core, up to
// where both find the stack no longer in the core.
func TestStackGcoreCross(t *testing.T) {
	for _, c := range []struct {
		name  string
		arch  testprog.Arch
		flags []string
		prog  string // the method of deep's frames
	}{
		{"aarch64-sframe", testprog.AArch64, []string{"-O1", "-static", "-Wa,--gsframe"}, "sframe"},
		{"aarch64-cfi", testprog.AArch64, []string{"-O1", "-static"}, "cfi"},
		{"s390x-cfi", testprog.S390X, []string{"-O1", "-static"}, "cfi"},
	} {
		t.Run(c.name, func(t *testing.T) {
			testprog.NeedTool(t, c.arch.CC)
			dir := t.TempDir()
			src, exe := filepath.Join(dir, "deep.c"), filepath.Join(dir, "deep")
			if err := os.WriteFile(src, []byte(gcoreSrc), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(c.arch.CC, append(c.flags, "-o", exe, src)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c.arch.CC, err, out)
			}
			core := testprog.GcoreQEMU(t, c.arch, exe, "pause")
			stdout, stderr, code := runCLI(t, "stack", "--core", core, "--exe", exe)
			if code != 0 {
				t.Fatalf("sframe stack: exit %d: %s", code, stderr)
			}
			tids, th, _ := parseX(t, stdout)
			if len(tids) != 1 {
				t.Fatalf("%d threads, want 1:\n%s", len(tids), stdout)
			}
			got := th[tids[0]]
			deep := 0
			for _, f := range got {
				if f.fn == "deep" {
					deep++
					if f.method != c.prog {
						t.Errorf("deep at %#x: method %s, want %s", f.pc, f.method, c.prog)
					}
				}
			}
			if deep != 21 {
				t.Errorf("%d frames of deep, want 21:\n%s", deep, stdout)
			}
			out := testprog.GDBMultiarch(t, exe, core, "", "set backtrace past-main on", "echo BT\\n", "bt")
			_, bt, _ := strings.Cut(out, "BT\n")
			var want []string
			for _, m := range regexp.MustCompile(`(?m)^#\d+\s+(?:0x([0-9a-f]+) in )?`).FindAllStringSubmatch(bt, -1) {
				if m[1] != "" {
					v, _ := strconv.ParseUint(m[1], 16, 64)
					m[1] = strconv.FormatUint(v, 16)
				}
				want = append(want, m[1])
			}
			var pcs []string
			for _, f := range got {
				pcs = append(pcs, strconv.FormatUint(f.pc, 16))
			}
			// gdb prints no address for frame #0 when the PC is at the
			// start of a line; ours always has one.
			if len(want) > 0 && want[0] == "" {
				want[0] = pcs[0]
			}
			if g, w := strings.Join(pcs, " "), strings.Join(want, " "); g != w {
				t.Errorf("frames:\n got %s\nwant %s (gdb-multiarch)\n%s\n%s", g, w, stdout, out)
			}
		})
	}
}

// TestStackCoreSignalQEMU: qemu-user cores of a single-threaded program
// killed by a fault, on AArch64 and s390x: stack --core's first line is
// gdb-multiarch's ("Program terminated with signal SIGSEGV, ..."), with
// no fault address (qemu writes no NT_SIGINFO), and JSON says the same.
func TestStackCoreSignalQEMU(t *testing.T) {
	for _, a := range []testprog.Arch{testprog.AArch64, testprog.S390X} {
		t.Run(a.Name, func(t *testing.T) {
			testprog.NeedTool(t, a.CC)
			exe := filepath.Join(t.TempDir(), "die")
			if out, err := exec.Command(a.CC, "-O1", "-static", "-o", exe, "testdata/die.c").CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", a.CC, err, out)
			}
			crash := testprog.CrashCore(t, a, exe)
			gdb := testprog.GDBMultiarch(t, exe, crash.Core, "")
			// gdb's AArch64 code looks for memory-tagging faults in
			// the siginfo and, finding none in qemu's core, says so
			// inside the line.
			gdb = strings.ReplaceAll(gdb, "Unable to read siginfo\n", "")
			gdbLine := ""
			for _, l := range strings.Split(gdb, "\n") {
				if strings.HasPrefix(l, "Program terminated with signal ") {
					gdbLine = l
				}
			}
			if gdbLine != "Program terminated with signal SIGSEGV, Segmentation fault." {
				t.Fatalf("gdb-multiarch says %q of the core:\n%s", gdbLine, gdb)
			}
			out, errs, code := runCLI(t, "stack", "--core", crash.Core, "--exe", exe)
			lines := strings.SplitN(out, "\n", 3)
			if code != 0 || len(lines) < 3 || lines[0] != gdbLine || lines[1] != "" {
				t.Errorf("exit %d %s, first lines %q, gdb-multiarch's %q", code, errs, lines[:min(2, len(lines))], gdbLine)
			}
			out, _, _ = runCLI(t, "stack", "--json", "--core", crash.Core, "--exe", exe)
			var j struct{ Termination map[string]any }
			if err := json.Unmarshal([]byte(out), &j); err != nil || j.Termination["name"] != "SIGSEGV" || j.Termination["address"] != nil {
				t.Errorf("--json termination %v (%v)", j.Termination, err)
			}
		})
	}
}

// TestStackCrossCoreExeName reads a qemu-user core (no NT_FILE, no page
// of the executable: no build ID to check it by) with --exe at its
// program and at a copy of another name: the second gets gdb's warning
// that the core may not be that program's, the first none.
func TestStackCrossCoreExeName(t *testing.T) {
	c := xcases[0]
	r := runX(t, c)
	other := filepath.Join(t.TempDir(), "another-name")
	if err := os.WriteFile(other, mustRead(t, r.exe), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, exe := range []string{r.exe, other} {
		args := []string{"stack", "--core", r.crash.Core, "--exe", exe}
		if c.arch.Sysroot != "" {
			args = append(args, "--sysroot", c.arch.Sysroot)
		}
		_, stderr, code := runCLI(t, args...)
		warned := strings.Contains(stderr, "may not be the program the core's process ran")
		if code != 0 || warned != (exe == other) {
			t.Errorf("--exe %s: exit %d, warned %v, want %v:\n%s", exe, code, warned, exe == other, stderr)
		}
	}
}

// TestStackCrossCoreNoSysroot unwinds the dynamic AArch64 program's core
// without --sysroot: the C library is not found, so its frames are
// unwound by their frame records, and a record does not say how large
// its frame is; where the library's code (not in the core) cannot tell
// either, the caller's SP is unknown. Its SP-based CFI rows then cannot
// apply: a guessed SP (the record's address + 16) read return addresses
// from the wrong slots and printed garbage frames, then stopped in no
// module. Every frame must be the --sysroot walk's frame at the same
// depth (gdb-multiarch cannot read qemu cores of dynamic programs), and
// the walks must go on through the program's functions.
func TestStackCrossCoreNoSysroot(t *testing.T) {
	var c xcase
	for _, x := range xcases {
		if x.name == "aarch64-O2-dynamic" {
			c = x
		}
	}
	r := runX(t, c) // with --sysroot
	stdout, stderr, code := runCLI(t, "stack", "--core", r.crash.Core, "--exe", r.exe)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tids, th, _ := parseX(t, stdout)
	if len(tids) != len(r.tids) {
		t.Fatalf("%d threads, %d with --sysroot:\n%s", len(tids), len(r.tids), stdout)
	}
	for _, tid := range tids {
		got, want := th[tid], r.th[tid]
		progFrames := 0
		for i, f := range got {
			if i >= len(want) || f.pc != want[i].pc {
				t.Errorf("thread %d frame %d: %#x, not the --sysroot walk's\n%s\n%s", tid, i, f.pc, stdout, r.out)
				break
			}
			if isProgFunc(f.fn) {
				progFrames++
			}
		}
		wantProg := 0
		for _, f := range want {
			if isProgFunc(f.fn) {
				wantProg++
			}
		}
		if progFrames != wantProg {
			t.Errorf("thread %d: %d frames in the program, %d with --sysroot\n%s", tid, progFrames, wantProg, stdout)
		}
	}
	// The frames whose SP the walk could not know have no "sp" in the
	// JSON, rather than "0x0".
	js, stderr, code := runCLI(t, "stack", "--json", "--core", r.crash.Core, "--exe", r.exe)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	var doc struct {
		Threads []struct {
			Frames []map[string]any `json:"frames"`
		} `json:"threads"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for _, th := range doc.Threads {
		for _, f := range th.Frames {
			sp, ok := f["sp"]
			switch {
			case !ok:
				unknown++
			case sp == "0x0":
				t.Errorf("frame %v: sp 0x0", f)
			}
		}
	}
	if unknown == 0 {
		t.Errorf("no frame without an sp, where the walks step by frame pointers without the libraries:\n%s", js)
	}
}

//go:build linux && amd64

package unwind

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/targets"
)

// snapshot is a captured thread: registers, a copy of its stack from SP
// to the end of the stack mapping, and the process's modules with their
// tables loaded.
type snapshot struct {
	regs  arch.Regs
	stack *FlatMemory
	mods  []*Module // with SFrame where the files have it
	cfi   []*Module // the same with SFrame removed: CFI (or FP) only
}

var (
	snapOnce sync.Once
	snap     *snapshot
	snapErr  error
)

// snapDepth is the recursion depth of the captured thread.
const snapDepth = 1000

// takeSnapshot runs stackprog (SFrame v1, no frame pointers) with a thread
// blocked at recursion depth snapDepth and captures that thread.
//
// With UNWIND_BENCH_CORE=CORE,EXE,TID it takes thread TID of a core file
// instead (made by scripts/unwind-instructions.sh): no child process, no
// ptrace, so that the benchmark runs under valgrind, whose instruction
// counts do not swing with the machine's load as times do.
func takeSnapshot(tb testing.TB) *snapshot {
	tb.Helper()
	if env := os.Getenv("UNWIND_BENCH_CORE"); env != "" {
		snapOnce.Do(func() { snap, snapErr = captureCore(env) })
	} else {
		exe := buildProg(tb, cfgSFrameO2)
		snapOnce.Do(func() {
			p := startProg(tb, exe, "1", strconv.Itoa(snapDepth))
			snap, snapErr = capture(p.cmd.Process.Pid)
		})
	}
	if snapErr != nil {
		tb.Fatal(snapErr)
	}
	return snap
}

func capture(pid int) (*snapshot, error) {
	pr, err := targets.AttachProcess(pid)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	var th *arch.Thread
	ths := pr.Threads()
	for i := range ths {
		if ths[i].Name == "deep0" {
			th = &ths[i]
		}
	}
	if th == nil {
		return nil, fmt.Errorf("no deep0 thread")
	}
	sp := th.Regs.SP()
	end, err := mappingEnd(pid, sp)
	if err != nil {
		return nil, err
	}
	data := make([]byte, end-sp)
	if _, err := pr.Memory().ReadAt(data, int64(sp)); err != nil {
		return nil, err
	}
	return newSnapshot(th.Regs, sp, data, pr.Modules(), pr.Memory()), nil
}

// captureCore captures a thread of a core file; env is "CORE,EXE,TID".
func captureCore(env string) (*snapshot, error) {
	f := strings.Split(env, ",")
	if len(f) != 3 {
		return nil, fmt.Errorf("UNWIND_BENCH_CORE=%q: want CORE,EXE,TID", env)
	}
	tid, err := strconv.Atoi(f[2])
	if err != nil {
		return nil, err
	}
	c, err := targets.OpenCore(f[0], f[1])
	if err != nil {
		return nil, err
	}
	var th *arch.Thread
	ths := c.Threads()
	for i := range ths {
		if ths[i].TID == tid {
			th = &ths[i]
		}
	}
	if th == nil {
		return nil, fmt.Errorf("no thread %d in %s", tid, f[0])
	}
	// The stack: from SP up to the end of what the core holds.
	sp := th.Regs.SP()
	var data []byte
	page := make([]byte, 4096)
	for a := sp; ; a += uint64(len(page)) {
		if n := 4096 - a%4096; len(data) == 0 && n < 4096 {
			page = page[:n]
		} else {
			page = page[:4096]
		}
		if _, err := c.Memory().ReadAt(page, int64(a)); err != nil {
			break
		}
		data = append(data, page...)
	}
	return newSnapshot(th.Regs, sp, data, c.Modules(), c.Memory()), nil
}

// newSnapshot loads the modules' tables, and a copy of them without SFrame.
func newSnapshot(regs arch.Regs, sp uint64, stack []byte, mods []arch.Module, mem arch.Memory) *snapshot {
	s := &snapshot{regs: regs, stack: &FlatMemory{Addr: sp, Data: stack}}
	s.mods = NewCache().Modules(mods, mem)
	for _, m := range s.mods {
		c := *m
		c.SFrame = nil
		s.cfi = append(s.cfi, &c)
	}
	return s
}

// mappingEnd returns the end of the mapping of pid containing addr.
func mappingEnd(pid int, addr uint64) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rng, _, _ := strings.Cut(sc.Text(), " ")
		lo, hi, _ := strings.Cut(rng, "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && addr >= l && addr < h {
			return h, nil
		}
	}
	return 0, fmt.Errorf("no mapping of %d contains %#x", pid, addr)
}

func (s *snapshot) unwinder(tb testing.TB, mods []*Module) *Unwinder {
	u, err := New(s.regs.Arch, mods)
	if err != nil {
		tb.Fatal(err)
	}
	u.MaxDepth = 4 * snapDepth
	return u
}

// TestSnapshot checks the snapshot unwinds completely with either table,
// to the same frames, and that the SFrame walk does not allocate.
func TestSnapshot(t *testing.T) {
	s := takeSnapshot(t)
	us, uc := s.unwinder(t, s.mods), s.unwinder(t, s.cfi)
	fs, stop, err := unwindBothWays(t, us, &s.regs, s.stack)
	if stop != StopEnd || len(fs) != snapDepth+6 {
		t.Fatalf("sframe: %d frames, %v %v", len(fs), stop, err)
	}
	fc, stop, err := uc.Unwind(nil, &s.regs, s.stack, nil)
	if stop != StopEnd || len(fc) != len(fs) {
		t.Fatalf("cfi: %d frames, %v %v", len(fc), stop, err)
	}
	nsf := 0
	for i := range fs {
		if fs[i].PC != fc[i].PC || fs[i].SP != fc[i].SP {
			t.Fatalf("frame %d: sframe %#x/%#x, cfi %#x/%#x", i, fs[i].PC, fs[i].SP, fc[i].PC, fc[i].SP)
		}
		if fs[i].Method == MethodSFrame {
			nsf++
		}
		if fc[i].Method == MethodSFrame {
			t.Fatalf("frame %d used SFrame in the CFI-only modules", i)
		}
	}
	if nsf < snapDepth {
		t.Errorf("only %d frames used SFrame", nsf)
	}
	frames := make([]Frame, 0, 2*snapDepth)
	ctx := new(Context)
	if n := testing.AllocsPerRun(20, func() { us.Unwind(ctx, &s.regs, s.stack, frames[:0]) }); n != 0 {
		t.Errorf("SFrame walk: %v allocations", n)
	}
}

func benchUnwind(b *testing.B, cfiOnly bool) {
	s := takeSnapshot(b)
	mods := s.mods
	if cfiOnly {
		mods = s.cfi
	}
	u := s.unwinder(b, mods)
	frames := make([]Frame, 0, 2*snapDepth)
	ctx := new(Context)
	fs, stop, err := u.Unwind(ctx, &s.regs, s.stack, frames)
	if stop != StopEnd {
		b.Fatalf("%v %v", stop, err)
	}
	n := len(fs)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		u.Unwind(ctx, &s.regs, s.stack, frames[:0])
	}
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/frame")
	// CPU time (user+system, from getrusage) is steadier than wall time
	// on a shared machine.
	b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/frame")
	b.ReportMetric(float64(n), "frames")
}

// BenchmarkUnwindSFrame unwinds a captured 1,006-frame stack (SFrame for
// the program's 1,002 frames, CFI for the C library's).
func BenchmarkUnwindSFrame(b *testing.B) { benchUnwind(b, false) }

// BenchmarkUnwindCFI unwinds the same stack with the SFrame sections
// removed, so that CFI (.eh_frame) is used for every frame.
func BenchmarkUnwindCFI(b *testing.B) { benchUnwind(b, true) }

// cpuTime returns the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

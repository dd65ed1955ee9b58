package perfevent

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	testprog.Main(m)
}

// needPerf skips the test when this machine refuses perf_event_open (a
// container without it, perf_event_paranoid 3 and no capability), and
// fails it under CI, where it must work.
func needPerf(t testing.TB) {
	t.Helper()
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: attrSize, Sample: 1000000, Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("perf_event_open: %v; required under CI", err)
		}
		t.Skipf("perf_event_open refused here: %v", err)
	}
	unix.Close(fd)
}

// prog is a running spinprog.
type prog struct {
	*testprog.Proc
	exe     string
	spin    []int // the spinners' thread IDs
	syms    map[string][2]uint64
	textLo  uint64 // the executable's text, in ELF addresses
	textHi  uint64
	bias    uint64 // runtime address - ELF address, from /proc/PID/maps
	process *Process
}

// buildProg compiles spinprog with frame pointers in every function.
func buildProg(t testing.TB) string {
	return testprog.Build(t, "testdata/spinprog.c", "-O1", "-fno-omit-frame-pointer",
		"-mno-omit-leaf-frame-pointer", "-fno-optimize-sibling-calls")
}

// startProg starts spinprog and reads its symbols and load bias.
func startProg(t testing.TB) *prog {
	t.Helper()
	exe := buildProg(t)
	p := &prog{Proc: testprog.StartCmd(t, exec.Command(exe)), exe: exe}
	f := p.cmd(t, "threads")
	for _, s := range f[1:] {
		tid, _ := strconv.Atoi(s)
		p.spin = append(p.spin, tid)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	p.syms = map[string][2]uint64{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			p.syms[s.Name] = [2]uint64{s.Value, s.Value + s.Size}
		}
	}
	text := ef.Section(".text")
	p.textLo, p.textHi = text.Addr, text.Addr+text.Size
	// The bias from the executable's mapping of the segment holding .text.
	if p.process, err = ReadProcess(p.PID()); err != nil {
		t.Fatal(err)
	}
	var seg *elf.Prog
	for _, pr := range ef.Progs {
		if pr.Type == elf.PT_LOAD && pr.Vaddr <= text.Addr && text.Addr < pr.Vaddr+pr.Memsz {
			seg = pr
		}
	}
	for _, m := range p.process.Mappings {
		if m.Path == exe && m.Offset <= seg.Off && seg.Off < m.Offset+(m.End-m.Start) {
			p.bias = m.Start + (seg.Off - m.Offset) - seg.Vaddr
		}
	}
	if p.bias == 0 && ef.Type == elf.ET_DYN {
		t.Fatalf("no executable mapping of %s in %+v", exe, p.process.Mappings)
	}
	return p
}

// cmd sends a command to the program and returns the fields of its
// answer, whose first must be want.
func (p *prog) cmd(t testing.TB, line string) []string {
	t.Helper()
	if _, err := io.WriteString(p.Stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
	ans, err := testprog.ReadLine(p.Out, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return strings.Fields(ans)
}

// cmdInt sends a command whose answer is a word and a number.
func (p *prog) cmdInt(t testing.TB, line string) int {
	t.Helper()
	f := p.cmd(t, line)
	if len(f) != 2 {
		t.Fatalf("%s: answer %q", line, f)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("%s: answer %q", line, f)
	}
	return n
}

// in reports whether the runtime address pc lies in function name.
func (p *prog) in(pc uint64, name string) bool {
	r, ok := p.syms[name]
	return ok && pc-p.bias >= r[0] && pc-p.bias < r[1]
}

// collect runs s for d (after enabling it) and returns copies of its
// records.
func collect(t testing.TB, s *Session, d time.Duration, fn func(*Record)) {
	t.Helper()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, s.Stop)
	defer timer.Stop()
	if err := s.Run(func(r *Record) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
}

// copyRecord copies a record out of the ring, for checks after Run.
func copyRecord(r *Record) Record {
	c := *r
	c.Raw = append([]byte(nil), r.Raw...)
	return c
}

// Perf register numbers of the stack pointer, frame pointer and
// instruction pointer (and AArch64's link register).
func spFPIP(t testing.TB) (sp, fp, ip, lr int) {
	switch NativeArch() {
	case elf.EM_X86_64:
		return 7, 6, 8, -1
	case elf.EM_AARCH64:
		return 31, 29, 32, 30
	}
	t.Skipf("no register numbers for %s", NativeArch())
	return
}

// returnAddresses returns the return addresses of the frames above the
// sample's function, as a frame-pointer unwinder finds them in the stack
// copy: the leaf function's own (at SP on x86-64, in LR on AArch64) when
// the function has no frame record, then each frame record's.
func returnAddresses(t testing.TB, s *Sample, leafRA bool) []uint64 {
	spn, fpn, _, lrn := spFPIP(t)
	sp, ok1 := s.RegsUser.Get(spn)
	fp, ok2 := s.RegsUser.Get(fpn)
	if !ok1 || !ok2 {
		t.Fatalf("sample without SP or FP: mask %#x, %d words", s.RegsUser.Mask, s.RegsUser.Len())
	}
	stack := s.StackUser
	var rets []uint64
	if leafRA {
		if lrn >= 0 {
			lr, _ := s.RegsUser.Get(lrn)
			rets = append(rets, lr)
		} else if len(stack) >= 8 {
			rets = append(rets, ne.Uint64(stack))
		}
	}
	for range 32 {
		if fp < sp || fp%8 != 0 || fp-sp > uint64(len(stack))-16 || uint64(len(stack)) < 16 {
			break
		}
		next, ret := ne.Uint64(stack[fp-sp:]), ne.Uint64(stack[fp-sp+8:])
		rets = append(rets, ret)
		if next <= fp {
			break
		}
		fp = next
	}
	return rets
}

// checkSpinSample checks a sample of a spinner: its IP in spin_c, in the
// program's text, and the frames above it spin_b, spin_a and spinner, as
// walking the frame pointers through the stack copy finds them.
func checkSpinSample(t testing.TB, p *prog, s *Sample) {
	t.Helper()
	_, _, ipn, _ := spFPIP(t)
	ip, ok := s.RegsUser.Get(ipn)
	if !ok || ip != s.IP {
		t.Fatalf("tid %d: user IP register %#x (%v), sample IP %#x", s.Tid, ip, ok, s.IP)
	}
	if ip-p.bias < p.textLo || ip-p.bias >= p.textHi || !p.in(ip, "spin_c") {
		t.Fatalf("tid %d: IP %#x (ELF %#x) not in spin_c %#x of .text [%#x, %#x)", s.Tid, ip, ip-p.bias, p.syms["spin_c"], p.textLo, p.textHi)
	}
	if len(s.StackUser) == 0 {
		t.Fatalf("tid %d: no user stack", s.Tid)
	}
	rets := returnAddresses(t, s, false)
	if len(rets) == 0 || !p.in(rets[0], "spin_b") {
		// spin_c is a leaf that gcc may build without a frame record.
		rets = returnAddresses(t, s, true)
	}
	want := []string{"spin_b", "spin_a", "spinner"}
	if len(rets) < len(want) {
		t.Fatalf("tid %d: frame-pointer walk found %#x, want returns into %v", s.Tid, rets, want)
	}
	for i, fn := range want {
		if !p.in(rets[i], fn) {
			t.Fatalf("tid %d: frame %d returns to %#x (ELF %#x), not into %s %#x; walk %#x", s.Tid, i+1, rets[i], rets[i]-p.bias, fn, p.syms[fn], rets)
		}
	}
}

// userOpts are the options of an unwinding profiler.
func userOpts(pid int) Options {
	return Options{PIDs: []int{pid}, RegsUser: UserRegsMask(NativeArch()), StackUser: 8192}
}

func TestSamplesOfThreads(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	o := userOpts(p.PID())
	o.Freq = 997
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Warnings()) != 0 {
		t.Errorf("warnings: %q", s.Warnings())
	}
	perTID := map[uint32]int{}
	var smp Sample
	collect(t, s, 400*time.Millisecond, func(r *Record) {
		if r.Type != RecordSample {
			return
		}
		if err := r.DecodeSample(&smp); err != nil {
			t.Fatal(err)
		}
		if int(smp.Pid) != p.PID() || int(smp.CPU) != r.CPU || smp.Period == 0 || smp.Time == 0 {
			t.Fatalf("sample pid %d cpu %d period %d time %d from the ring of CPU %d; want pid %d", smp.Pid, smp.CPU, smp.Period, smp.Time, r.CPU, p.PID())
		}
		if smp.StackUserSize != 8192 || smp.RegsUser.ABI != RegsABI64 {
			t.Fatalf("user stack of %d bytes, register ABI %d", smp.StackUserSize, smp.RegsUser.ABI)
		}
		checkSpinSample(t, p, &smp)
		perTID[smp.Tid]++
	})
	// The main thread waits in read(), in the kernel, so only the spinners
	// are sampled.
	if len(perTID) != len(p.spin) {
		t.Errorf("samples per thread %v, want the spinners %v", perTID, p.spin)
	}
	for _, tid := range p.spin {
		if perTID[uint32(tid)] < 5 {
			t.Errorf("spinner %d: %d samples", tid, perTID[uint32(tid)])
		}
	}
	st := s.Stats()
	if st.Samples == 0 || st.Records < st.Samples || st.Corrupt != 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("samples per thread %v; %+v", perTID, st)
}

func TestReadProcess(t *testing.T) {
	p := startProg(t)
	pr, err := ReadProcess(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, th := range pr.Threads {
		names[th.TID] = th.Comm
	}
	want := map[int]string{p.PID(): "spinprog", p.spin[0]: "spin0", p.spin[1]: "spin1"}
	if fmt.Sprint(names) != fmt.Sprint(want) || pr.Comm != "spinprog" {
		t.Errorf("threads %v (comm %q), want %v", names, pr.Comm, want)
	}
	var exe, vdso bool
	for _, m := range pr.Mappings {
		if !strings.Contains(m.Perm, "x") {
			t.Errorf("mapping %+v is not executable", m)
		}
		if m.Path == p.exe {
			var st unix.Stat_t
			unix.Stat(p.exe, &st)
			if m.Inode != st.Ino || m.Maj != unix.Major(st.Dev) || m.Min != unix.Minor(st.Dev) {
				t.Errorf("mapping %+v: want inode %d, device %d:%d", m, st.Ino, unix.Major(st.Dev), unix.Minor(st.Dev))
			}
			exe = true
		}
		vdso = vdso || m.Path == "[vdso]"
	}
	if !exe || !vdso {
		t.Errorf("no executable mapping of %s or [vdso] in %+v", p.exe, pr.Mappings)
	}
	// A process that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProcess(cmd.Process.Pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("ReadProcess of an exited process: %v, want ErrNoProcess", err)
	}
}

// recorder keeps copies of a session's records, for checks after Run.
type recorder struct {
	mu   sync.Mutex
	recs []Record
}

func (rc *recorder) add(r *Record) {
	rc.mu.Lock()
	rc.recs = append(rc.recs, copyRecord(r))
	rc.mu.Unlock()
}

func TestInheritFollowsNewThreadsAndProcesses(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	o := userOpts(p.PID())
	o.Freq = 499
	o.Mmap, o.Comm, o.Task, o.SampleIDAll = true, true, true, true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	var rc recorder
	done := make(chan error, 1)
	go func() { done <- s.Run(func(r *Record) error { rc.add(r); return nil }) }()
	late := p.cmdInt(t, "spawn")
	forked := p.cmdInt(t, "fork")
	execed := p.cmdInt(t, "exec")
	time.Sleep(500 * time.Millisecond)
	s.Stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The exec'd child's executable mapping, for its own load bias.
	ef, err := elf.Open(p.exe)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	var childBias uint64
	var mmaps, comms, forks int
	var smp Sample
	var m Mmap
	var c Comm
	var task Task
	for i := range rc.recs {
		r := &rc.recs[i]
		switch r.Type {
		case RecordMmap2:
			if err := r.DecodeMmap(&m); err != nil {
				t.Fatal(err)
			}
			id, err := r.ID()
			if err != nil || id.Pid != m.Pid || id.Tid != m.Tid {
				t.Errorf("MMAP2 of %d/%d with identity %+v, %v", m.Pid, m.Tid, id, err)
			}
			if int(m.Pid) == execed && string(m.Filename) == p.exe && m.Executable {
				mmaps++
				for _, pr := range ef.Progs {
					if pr.Type == elf.PT_LOAD && pr.Flags&elf.PF_X != 0 && pr.Off == m.Pgoff {
						childBias = m.Addr - pr.Vaddr
					}
				}
				var st unix.Stat_t
				unix.Stat(p.exe, &st)
				if m.Ino != st.Ino || m.Prot&unix.PROT_EXEC == 0 {
					t.Errorf("MMAP2 %+v: want inode %d, PROT_EXEC", m, st.Ino)
				}
			}
		case RecordComm:
			if err := r.DecodeComm(&c); err != nil {
				t.Fatal(err)
			}
			if int(c.Pid) == execed && c.Exec && string(c.Comm) == "spinprog" {
				comms++
			}
		case RecordFork:
			if err := r.DecodeTask(&task); err != nil {
				t.Fatal(err)
			}
			if (int(task.Tid) == late && int(task.Pid) == p.PID()) || (int(task.Pid) == forked && int(task.Ppid) == p.PID()) {
				forks++
			}
		}
	}
	if mmaps == 0 || comms == 0 || forks != 2 {
		t.Fatalf("%d MMAP2 records of %s in process %d, %d exec COMM records, %d FORK records of thread %d and process %d (want 2)", mmaps, p.exe, execed, comms, forks, late, forked)
	}
	n := map[string]int{}
	for i := range rc.recs {
		r := &rc.recs[i]
		if r.Type != RecordSample {
			continue
		}
		if err := r.DecodeSample(&smp); err != nil {
			t.Fatal(err)
		}
		switch {
		case int(smp.Tid) == late:
			checkSpinSample(t, p, &smp)
			n["late thread"]++
		case int(smp.Pid) == forked:
			if !p.in(smp.IP, "child_spin") {
				t.Errorf("forked child sampled at %#x, not in child_spin", smp.IP)
			}
			n["forked child"]++
		case int(smp.Pid) == execed:
			if r, ok := p.syms["child_spin"]; ok && (smp.IP-childBias < r[0] || smp.IP-childBias >= r[1]) {
				// Before and during exec the child runs elsewhere.
				n["exec'd child elsewhere"]++
			} else {
				n["exec'd child"]++
			}
		}
	}
	for _, k := range []string{"late thread", "forked child", "exec'd child"} {
		if n[k] < 3 {
			t.Errorf("%d samples of the %s; all: %v", n[k], k, n)
		}
	}
	t.Logf("samples: %v; %+v", n, s.Stats())
}

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

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/procmaps"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper()
		return
	}
	testprog.Main(m)
}

// needPerf skips the test without perf_event_open (failing it under CI).
func needPerf(t testing.TB) {
	t.Helper()
	testprog.NeedPerfEvents(t)
}

// prog is a running spinprog.
type prog struct {
	*testprog.Proc
	exe    string
	spin   []int // the spinners' thread IDs
	syms   map[string][2]uint64
	textLo uint64 // the executable's text, in ELF addresses
	textHi uint64
	bias   uint64 // runtime address - ELF address, from /proc/PID/maps
	maps   []arch.Mapping
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
	if p.maps, err = procmaps.Read(p.PID()); err != nil {
		t.Fatal(err)
	}
	var seg *elf.Prog
	for _, pr := range ef.Progs {
		if pr.Type == elf.PT_LOAD && pr.Vaddr <= text.Addr && text.Addr < pr.Vaddr+pr.Memsz {
			seg = pr
		}
	}
	for _, m := range p.maps {
		if m.Path == exe && m.Offset <= seg.Off && seg.Off < m.Offset+(m.End-m.Start) {
			p.bias = m.Start + (seg.Off - m.Offset) - seg.Vaddr
		}
	}
	if p.bias == 0 && ef.Type == elf.ET_DYN {
		t.Fatalf("no executable mapping of %s in %+v", exe, p.maps)
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
	ans, err := testprog.ReadLine(p.Out, time.Minute)
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

// collectWhile runs s (after enabling it) until wait returns.
func collectWhile(t *testing.T, s *Session, wait func() error, fn func(*Record)) {
	t.Helper()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		err := wait()
		s.Stop()
		errc <- err
	}()
	if err := s.Run(func(r *Record) error { fn(r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// decoded decodes r, failing the test if it does not decode.
func decoded(t testing.TB, r *Record) *perfdata.Record {
	t.Helper()
	d, err := r.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sampleOf decodes a SAMPLE record, failing the test unless it is one of
// an event of the session, and returns it with its event.
func sampleOf(t testing.TB, r *Record) (*perfdata.Sample, *perfdata.Attr) {
	t.Helper()
	d := decoded(t, r)
	if d.Sample() == nil {
		t.Fatalf("%s record of no event of the session: %x", d.Type, r.Raw[:min(len(r.Raw), 32)])
	}
	return d.Sample(), d.Attr
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
	switch arch.Host() {
	case arch.AMD64:
		return 7, 6, 8, -1
	case arch.ARM64:
		return 31, 29, 32, 30
	}
	t.Skipf("no register numbers for %s", arch.Host())
	return
}

// returnAddresses returns the return addresses of the frames above the
// sample's function, as a frame-pointer unwinder finds them in the stack
// copy: the leaf function's own (at SP on x86-64, in LR on AArch64) when
// the function has no frame record, then each frame record's.
func returnAddresses(t testing.TB, s *perfdata.Sample, leafRA bool) []uint64 {
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
func checkSpinSample(t testing.TB, p *prog, s *perfdata.Sample) {
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
	return Options{PIDs: []int{pid}, RegsUser: UserRegsMask(arch.Host()), StackUser: 8192}
}

func TestSamplesOfThreads(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	for _, ev := range []Event{CPUClock, TaskClock} {
		t.Run(ev.Name, func(t *testing.T) { testSamplesOfThreads(t, p, ev) })
	}
}

func testSamplesOfThreads(t *testing.T, p *prog, ev Event) {
	o := userOpts(p.PID())
	o.Events = []Event{ev}
	o.Freq = 997
	o.Monotonic = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Warnings()) != 0 {
		t.Errorf("warnings: %q", s.Warnings())
	}
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	begin := uint64(ts.Nano())
	perTID := map[uint32]int{}
	// Until each spinner has run for 100 ms more (100 samples).
	collectWhile(t, s, func() error { return runMore(p.PID(), p.spin, 10) }, func(r *Record) {
		if r.Type != perfdata.RecordSample {
			return
		}
		smp, _ := sampleOf(t, r)
		if int(smp.Pid) != p.PID() || int(smp.CPU) != r.CPU || smp.Period == 0 {
			t.Fatalf("sample pid %d cpu %d period %d from the ring of CPU %d; want pid %d", smp.Pid, smp.CPU, smp.Period, r.CPU, p.PID())
		}
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		if smp.Time < begin || smp.Time > uint64(ts.Nano()) {
			t.Fatalf("sample time %d outside CLOCK_MONOTONIC's [%d, %d]", smp.Time, begin, ts.Nano())
		}
		if smp.StackUserSize != 8192 || smp.RegsUser.ABI != perfdata.RegsABI64 {
			t.Fatalf("user stack of %d bytes, register ABI %d", smp.StackUserSize, smp.RegsUser.ABI)
		}
		checkSpinSample(t, p, smp)
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

func TestTwoEvents(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	sleeper := p.cmdInt(t, "sleeper")
	o := userOpts(p.PID())
	o.Events = []Event{CPUClock, ContextSwitches}
	o.Freq = 499
	o.ContextSwitch, o.SampleIDAll = true, true
	s := openAllowed(t, o)
	defer s.Close()
	clock, cs := s.Attrs()[0], s.Attrs()[1]
	if clock.SampleType&perfdata.SampleIdentifier == 0 || clock.Flags&perfdata.AttrFreq == 0 || cs.SamplePeriod != 1 || cs.Flags&perfdata.AttrContextSwitch != 0 {
		t.Fatalf("attributes %s (type %v, flags %v), %s (flags %v)", clock, clock.SampleType, clock.Flags, cs, cs.Flags)
	}
	n := map[string]int{}
	collect(t, s, 400*time.Millisecond, func(r *Record) {
		switch r.Type {
		case perfdata.RecordSample:
			smp, ev := sampleOf(t, r)
			// A context-switch sample counts one switch; a cpu-clock
			// sample nanoseconds.
			switch {
			case ev == cs.Attr && smp.Period == 1:
				n["context-switches"]++
				if int(smp.Tid) == sleeper {
					n["sleeper switches"]++
				}
			case ev == clock.Attr && smp.Period > 1000:
				n["cpu-clock"]++
			default:
				t.Fatalf("sample of period %d attributed to %s (identifier %d)", smp.Period, ev.Name, smp.Identifier)
			}
		case perfdata.RecordSwitch:
			// Side records come from the first event only.
			if ev := decoded(t, r).Attr; ev != clock.Attr {
				t.Fatalf("SWITCH attributed to %+v", ev)
			}
			n["SWITCH"]++
		}
	})
	if n["sleeper switches"] == 0 || n["cpu-clock"] == 0 || n["SWITCH"] == 0 {
		t.Errorf("records %v", n)
	}
	t.Logf("records %v", n)
}

// userTime returns the clock ticks thread tid of pid has run in user
// space (/proc/PID/task/TID/stat's utime).
func userTime(pid, tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, err
	}
	// utime is the 14th field; the name (2nd) may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 12 {
		return 0, fmt.Errorf("stat of %d/%d: %q", pid, tid, b)
	}
	return strconv.Atoi(f[11])
}

// runMore waits until each of threads tids of pid has run ticks more clock
// ticks in user space than now.
func runMore(pid int, tids []int, ticks int) error {
	deadline := time.Now().Add(time.Minute)
	for _, tid := range tids {
		u0, err := userTime(pid, tid)
		if err != nil {
			return err
		}
		for {
			u, err := userTime(pid, tid)
			if err != nil {
				return err
			}
			if u >= u0+ticks {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("thread %d of %d ran %d ticks in 20 s, want %d", tid, pid, u-u0, ticks)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
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
	// Each has had time to be sampled once it has run for 100 ms; on a
	// loaded machine that takes longer.
	for _, pt := range [][2]int{{p.PID(), late}, {forked, forked}, {execed, execed}} {
		if err := runMore(pt[0], []int{pt[1]}, 10); err != nil {
			t.Fatal(err)
		}
	}
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
	for i := range rc.recs {
		r := &rc.recs[i]
		switch r.Type {
		case perfdata.RecordMmap2:
			d := decoded(t, r)
			m := d.Mmap()
			if id := d.ID; id.Present&perfdata.SampleTID == 0 || id.Pid != m.Pid || id.Tid != m.Tid {
				t.Errorf("MMAP2 of %d/%d with identity %+v", m.Pid, m.Tid, id)
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
		case perfdata.RecordComm:
			c := decoded(t, r).Comm()
			if int(c.Pid) == execed && c.Exec && string(c.Comm) == "spinprog" {
				comms++
			}
		case perfdata.RecordFork:
			task := decoded(t, r).Task()
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
		if r.Type != perfdata.RecordSample {
			continue
		}
		smp, _ := sampleOf(t, r)
		switch {
		case int(smp.Tid) == late:
			checkSpinSample(t, p, smp)
			n["late thread"]++
		case int(smp.Pid) == forked:
			if p.in(smp.IP, "child_spin") {
				n["forked child"]++
			} else {
				// On its way from fork to child_spin.
				n["forked child elsewhere"]++
			}
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
	types := map[perfdata.RecordType]int{}
	for i := range rc.recs {
		types[rc.recs[i].Type]++
	}
	t.Logf("samples: %v; records %v; %+v", n, types, s.Stats())
}

// openAllowed opens a session of o, skipping the test when this
// machine's perf_event_paranoid refuses o to a user without CAP_PERFMON
// (never under CI, which runs as root).
func openAllowed(t testing.TB, o Options) *Session {
	t.Helper()
	s, err := Open(o)
	if errors.Is(err, ErrPermission) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContextSwitchSamples(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	sleeper := p.cmdInt(t, "sleeper")
	o := userOpts(p.PID())
	o.Events = []Event{ContextSwitches}
	o.ContextSwitch, o.SampleIDAll = true, true
	s := openAllowed(t, o)
	defer s.Close()
	if a := s.Attrs()[0]; a.SamplePeriod != 1 || a.Flags&perfdata.AttrFreq != 0 || a.Flags&perfdata.AttrExcludeKernel != 0 {
		t.Fatalf("context-switches attribute %s, flags %v: want every switch, kernel included", a, a.Flags)
	}
	// Per ring, the records in order: each sample must be followed by the
	// SWITCH record of its switch-out, which the scheduler writes next,
	// unless that was dropped (a LOST record comes next then).
	type ev struct {
		sample bool
		lost   bool // a LOST record: the records dropped before it are unknown
		tid    uint32
		out    bool
		s      perfdata.Sample
	}
	rings := map[int][]ev{}
	var rc recorder
	collect(t, s, 500*time.Millisecond, rc.add)
	for i := range rc.recs {
		r := &rc.recs[i]
		switch r.Type {
		case perfdata.RecordSample:
			smp, _ := sampleOf(t, r)
			rings[r.CPU] = append(rings[r.CPU], ev{sample: true, tid: smp.Tid, s: *smp})
		case perfdata.RecordSwitch:
			d := decoded(t, r)
			rings[r.CPU] = append(rings[r.CPU], ev{tid: d.ID.Tid, out: d.Switch().Out})
		case perfdata.RecordLost:
			rings[r.CPU] = append(rings[r.CPU], ev{lost: true})
		}
	}
	n := 0
	for cpu, evs := range rings {
		for i, e := range evs {
			if !e.sample {
				continue
			}
			if i+1 < len(evs) && !evs[i+1].lost && (evs[i+1].sample || !evs[i+1].out || evs[i+1].tid != e.tid) {
				t.Fatalf("CPU %d: sample of thread %d followed by %+v, not by its switch-out", cpu, e.tid, evs[i+1])
			}
			if int(e.tid) != sleeper {
				continue
			}
			n++
			// The sleeper switches out in nanosleep, in the C library,
			// whose stack still holds the return address into sleep_b;
			// or it is preempted in sleep_b itself; or, at first, it is
			// still in the C library's mutex code that announce calls.
			_, _, ipn, _ := spFPIP(t)
			uip, _ := e.s.RegsUser.Get(ipn)
			found := p.in(uip, "sleep_b")
			for w := e.s.StackUser; len(w) >= 8 && !found; w = w[8:] {
				found = p.in(ne.Uint64(w), "sleep_b") || p.in(ne.Uint64(w), "announce")
			}
			if !found {
				t.Fatalf("sleeper's switch-out sample at user IP %#x: not in sleep_b %#x, and no return address into it (or announce) in its %d-byte stack copy", uip, p.syms["sleep_b"], len(e.s.StackUser))
			}
		}
	}
	if n < 10 {
		t.Errorf("%d switch-out samples of the sleeper in 0.5 s, which sleeps 1 ms at a time", n)
	}
	t.Logf("%d switch-out samples of the sleeper; %+v", n, s.Stats())
}

// wrapOpts are options that fill a one-page ring fast: two spinners
// sampled 4000 times a second with 2 KiB stacks.
func wrapOpts(pid int) Options {
	o := userOpts(pid)
	o.StackUser = 2048
	o.Period = 250000 // ns of cpu-clock: 4 kHz
	o.RingPages = 1
	return o
}

func TestRingWrapAround(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	s, err := Open(wrapOpts(p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.RingPages() != 1 {
		t.Fatalf("%d ring pages, want 1", s.RingPages())
	}
	wrapped, plain, wrappedAll := 0, 0, 0
	collect(t, s, 500*time.Millisecond, func(r *Record) {
		if r.Wrapped {
			wrappedAll++
		}
		if r.Type != perfdata.RecordSample {
			return
		}
		smp, _ := sampleOf(t, r)
		if len(smp.StackUser) != 2048 {
			t.Fatalf("wrapped %v: %d bytes of stack", r.Wrapped, len(smp.StackUser))
		}
		checkSpinSample(t, p, smp)
		if r.Wrapped {
			wrapped++
		} else {
			plain++
		}
	})
	st := s.Stats()
	if wrapped == 0 || plain == 0 || uint64(wrappedAll) != st.Wrapped || st.Corrupt != 0 {
		t.Errorf("%d wrapped and %d other samples; %+v", wrapped, plain, st)
	}
	t.Logf("%d wrapped and %d other samples; %+v", wrapped, plain, st)
}

func TestLostCounted(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	o := wrapOpts(p.PID())
	o.Period = 1000000 // 1 kHz, which the reader keeps up with
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	// Nobody reads: the ring fills and the kernel counts what it drops,
	// while each spinner runs for 100 ms more (100 samples each).
	if err := runMore(p.PID(), p.spin, 10); err != nil {
		t.Fatal(err)
	}
	var lost, lostRecs, firstLost uint64
	seenRing := map[int]bool{} // rings whose first LOST record was seen
	ids := map[uint64]bool{}
	for _, id := range s.Attrs()[0].IDs {
		ids[id] = true
	}
	// Then read until the LOST records have counted at least 30 lost
	// samples: the kernel writes a ring's LOST record once the reader has
	// made room, with the ring's next sample, which on a loaded machine
	// may come late. A minute without bounds the wait.
	const wantLost = 30
	timer := time.AfterFunc(time.Minute, s.Stop)
	defer timer.Stop()
	if err := s.Run(func(r *Record) error {
		if r.Type == perfdata.RecordLost {
			d, err := r.Decode()
			if err != nil {
				return err
			}
			l := d.Lost()
			if !ids[l.ID] || l.Lost == 0 {
				t.Errorf("LOST %+v: want one of the IDs %v and a count", l, s.Attrs()[0].IDs)
			}
			if !seenRing[r.CPU] {
				seenRing[r.CPU] = true
				firstLost += l.Lost
			}
			lost += l.Lost
			lostRecs++
			if firstLost >= wantLost {
				s.Stop()
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The first LOST record of each ring counts what the pause lost: most
	// of the samples of 2 x 100 ms of spinning (utime is itself sampled,
	// so allow for a loaded machine), all but the two that fit.
	if firstLost < wantLost {
		t.Errorf("the first LOST records count %d lost samples in a minute, want at least %d", firstLost, wantLost)
	}
	st := s.Stats()
	if lost == 0 || st.Lost != lost || st.LostRecords != lostRecs {
		t.Errorf("lost %d in %d LOST records; stats %+v", lost, lostRecs, st)
	}
	t.Logf("lost %d in %d LOST records, %d in the first of each ring; %+v", lost, lostRecs, firstLost, st)
}

func TestSystemWide(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	s := openAllowed(t, Options{SystemWide: true, Freq: 499, SampleIDAll: true, Comm: true})
	defer s.Close()
	ours := 0
	cpus := map[int]bool{}
	collect(t, s, 300*time.Millisecond, func(r *Record) {
		if r.Type != perfdata.RecordSample {
			return
		}
		smp, _ := sampleOf(t, r)
		if int(smp.CPU) != r.CPU {
			t.Fatalf("sample of CPU %d in the ring of CPU %d", smp.CPU, r.CPU)
		}
		cpus[r.CPU] = true
		if int(smp.Pid) == p.PID() {
			ours++
		}
	})
	if ours == 0 {
		t.Errorf("no samples of process %d among %+v", p.PID(), s.Stats())
	}
	t.Logf("%d samples of the spinners, CPUs %v; %+v", ours, cpus, s.Stats())
}

func TestHardwareEvent(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	o := userOpts(p.PID())
	o.Events = []Event{Cycles}
	s, err := Open(o)
	if err != nil {
		// Most virtual machines, this one perhaps, have no PMU.
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "use cpu-clock") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %q: want one line, ErrUnsupported, suggesting cpu-clock", err)
		}
		t.Logf("no PMU: %v", err)
		return
	}
	defer s.Close()
	n := 0
	collect(t, s, 300*time.Millisecond, func(r *Record) {
		if r.Type == perfdata.RecordSample {
			smp, _ := sampleOf(t, r)
			checkSpinSample(t, p, smp)
			n++
		}
	})
	if n == 0 {
		t.Errorf("no cycles samples: %+v", s.Stats())
	}
}

func TestNoSuchProcess(t *testing.T) {
	needPerf(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	for _, o := range []Options{{PIDs: []int{dead}}, {TIDs: []int{dead}}} {
		_, err := Open(o)
		if !errors.Is(err, ErrNoProcess) || !strings.Contains(err.Error(), strconv.Itoa(dead)) {
			t.Errorf("Open(%+v): %v, want ErrNoProcess naming %d", o, err, dead)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "nothing to profile"},
		{Options{SystemWide: true, PIDs: []int{1}}, "do not give PIDs"},
		{Options{PIDs: []int{1}, StackUser: 100}, "multiple of 8"},
		{Options{PIDs: []int{1}, StackUser: 65536}, "multiple of 8 up to 65528"},
		{Options{PIDs: []int{1}, RingPages: 3}, "power of two"},
		{Options{PIDs: []int{1}, Freq: 1 << 40}, "kernel.perf_event_max_sample_rate"},
	} {
		_, err := Open(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v): %v, want %q", tc.o, err, tc.want)
		}
	}
}

// watchdog fails the test if Run has not returned after d: the loop must
// have woken for something other than its poll interval, which the tests
// set to an hour.
func runWithWatchdog(t *testing.T, s *Session, d time.Duration, fn func(*Record) error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Run(fn) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		s.Close()
		t.Fatalf("Run did not return within %v", d)
	}
}

func TestWakeups(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	for _, tc := range []struct {
		name   string
		events uint32
		bytes  uint32
		want   int // records at least in the ring at the first wakeup
	}{
		{"every sample", 1, 0, 1},
		{"watermark", 0, 16 << 10, 16 << 10 / (2048 + 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := userOpts(p.PID())
			o.StackUser = 2048
			o.WakeupEvents, o.WakeupBytes = tc.events, tc.bytes
			o.PollInterval = time.Hour
			s, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Enable(); err != nil {
				t.Fatal(err)
			}
			n := 0
			runWithWatchdog(t, s, time.Minute, func(r *Record) error {
				n++
				s.Stop()
				return nil
			})
			if n < tc.want {
				t.Errorf("%d records at the first wakeup, want at least %d", n, tc.want)
			}
		})
	}
}

func TestStopAndClose(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	before := openFDs(t)
	o := userOpts(p.PID())
	o.PollInterval = time.Hour
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	// A Stop before Run makes it return after one pass.
	s.Stop()
	runWithWatchdog(t, s, time.Minute, func(*Record) error { return nil })
	// Stop from another goroutine wakes a Run that has nothing to read (the
	// events are disabled).
	time.AfterFunc(50*time.Millisecond, s.Stop)
	runWithWatchdog(t, s, time.Minute, func(*Record) error { return nil })
	if s.Exited() {
		t.Error("Exited after Stop")
	}
	// Close while Run runs: Run returns, then everything is released.
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(func(*Record) error { return nil }) }()
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Run(func(*Record) error { return nil }); err == nil {
		t.Error("Run after Close: no error")
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after Close, %d before Open", after, before)
	}
	// The program ran on, unharmed.
	p.Ping(t, "still there")
}

func TestRunEndsWhenTargetsExit(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	o := userOpts(p.PID())
	o.PollInterval = time.Hour
	o.Task = true
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	forked := p.cmdInt(t, "fork") // dies with its parent
	exits := map[uint32]bool{}
	time.AfterFunc(100*time.Millisecond, func() { p.Cmd.Process.Kill() })
	runWithWatchdog(t, s, time.Minute, func(r *Record) error {
		if r.Type == perfdata.RecordExit {
			d, err := r.Decode()
			if err != nil {
				return err
			}
			exits[d.Task().Tid] = true
		}
		return nil
	})
	if !s.Exited() {
		t.Error("Run returned, Exited false")
	}
	if !exits[uint32(p.PID())] || !exits[uint32(forked)] || !exits[uint32(p.spin[0])] {
		t.Errorf("EXIT records of %v; want the main thread %d, a spinner %d and the child %d", exits, p.PID(), p.spin[0], forked)
	}
}

func TestErrorFromCallback(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	s, err := Open(userOpts(p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	if err := s.Run(func(*Record) error { return stop }); err != stop {
		t.Fatalf("Run returned %v, want the callback's error", err)
	}
}

func TestCallchains(t *testing.T) {
	needPerf(t)
	p := startProg(t)
	sleeper := p.cmdInt(t, "sleeper")
	o := userOpts(p.PID())
	o.Events = []Event{CPUClock, ContextSwitches}
	o.Freq = 499
	o.Callchain, o.UserCallchain = true, true
	s := openAllowed(t, o)
	defer s.Close()
	cs := s.Attrs()[1]
	n := map[string]int{}
	var rc recorder
	collectWhile(t, s, func() error { return runMore(p.PID(), p.spin, 10) }, rc.add)
	for i := range rc.recs {
		r := &rc.recs[i]
		if r.Type != perfdata.RecordSample {
			continue
		}
		smp, ev := sampleOf(t, r)
		cc := smp.Callchain
		// The parts: [ContextKernel kernel addresses...] [ContextUser
		// user addresses...], the first user address the user IP.
		var kernel, user []uint64
		var part *[]uint64
		for i := range cc.Len() {
			switch v := cc.At(i); {
			case v == perfdata.ContextKernel:
				part = &kernel
			case v == perfdata.ContextUser:
				part = &user
			case v >= perfdata.ContextMax:
				t.Fatalf("callchain marker %#x", v)
			case part == nil:
				t.Fatalf("callchain %#x does not start with a context marker", cc.Bytes())
			default:
				*part = append(*part, v)
			}
		}
		_, _, ipn, _ := spFPIP(t)
		uip, _ := smp.RegsUser.Get(ipn)
		if len(user) == 0 || user[0] != uip {
			t.Fatalf("user callchain %#x does not start at the user IP %#x", user, uip)
		}
		for _, k := range kernel {
			if k < 1<<63 {
				t.Fatalf("kernel callchain %#x holds a user address", kernel)
			}
		}
		switch {
		case ev == cs.Attr && int(smp.Tid) == sleeper:
			// Taken in the scheduler: the kernel's part leads there.
			if len(kernel) < 2 {
				t.Fatalf("switch-out sample with kernel callchain %#x", kernel)
			}
			n["switch-outs"]++
		case ev != cs.Attr && p.in(uip, "spin_c"):
			// The kernel's frame-pointer walk of the user stack, as it
			// ran, agrees with the walk of the stack copy (when the leaf
			// spin_c has no frame record, both skip spin_b).
			rets := returnAddresses(t, smp, false)
			if len(rets) < 2 || len(user) < 3 || user[1] != rets[0] || user[2] != rets[1] || !(p.in(rets[0], "spin_a") || p.in(rets[0], "spin_b")) {
				t.Fatalf("kernel's user callchain %#x, walk of the stack copy %#x", user, rets)
			}
			n["spinner samples"]++
		}
	}
	if n["switch-outs"] == 0 || n["spinner samples"] < 10 {
		t.Errorf("samples checked: %v", n)
	}
	t.Logf("samples checked: %v", n)
}

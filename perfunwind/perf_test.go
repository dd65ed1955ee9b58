//go:build linux

package perfunwind_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
	"github.com/sframekit/sframekit/symbolize"
	"github.com/sframekit/sframekit/unwind"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// A recording is a perf record --call-graph dwarf run of a test program,
// made once per test binary with this machine's perf.
type recording struct {
	name string
	// prog builds the program and returns the command to record.
	prog func(t testing.TB) []string
	// perf options besides the defaults (-e cpu-clock -c 250000).
	opts []string
	pipe bool // perf record -o - > FILE
	// want is the share of samples whose user frames must be identical
	// to perf script's (0: no bound, perf being wrong there; see
	// comparePerf for the categories every other sample must fall in).
	want float64
}

// work is how long each program runs: its threads get a few thousand
// samples between them at -c 250000 (4,000 a CPU-second).
func work(t testing.TB) string {
	if testing.Short() {
		return "300"
	}
	return "1200"
}

func cProg(flags ...string) func(t testing.TB) []string {
	return func(t testing.TB) []string {
		return []string{testprog.Build(t, "testdata/prog.c", flags...), work(t)}
	}
}

// fpFlags build a program with frame pointers and no CFI of its own
// (without -g, which would put its CFI in .debug_frame).
func fpFlags() []string {
	f := []string{"-O2", "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}
	if runtime.GOARCH == "amd64" {
		f = append(f, "-mno-omit-leaf-frame-pointer")
	}
	return f
}

var recordings = []recording{
	{name: "sframe", prog: cProg("-O2", "-fomit-frame-pointer", "-g", "-Wa,--gsframe"), want: 0.99},
	{name: "cfi", prog: cProg("-O2", "-fomit-frame-pointer", "-g"), want: 0.99},
	{name: "fp", prog: cProg(fpFlags()...)},
	{name: "cxx", prog: func(t testing.TB) []string {
		n := "120000"
		if testing.Short() {
			n = "30000"
		}
		return []string{testprog.Build(t, "testdata/exceptions.cc", "-O2", "-g"), n}
	}, want: 0.99},
	// Names that libiberty demangles and perf chooses among aliases
	// otherwise than c++filt's defaults would (testdata/cxxnames.cc).
	{name: "cxxnames", prog: func(t testing.TB) []string {
		if runtime.GOARCH != "amd64" {
			t.Skip("cxxnames.S is x86-64 assembly")
		}
		s, err := filepath.Abs("testdata/cxxnames.S")
		if err != nil {
			t.Fatal(err)
		}
		return []string{testprog.Build(t, "testdata/cxxnames.cc", "-O2", "-g", s), work(t)}
	}, want: 0.99},
	{name: "python", prog: pythonProg},
	// With a copy of 32 KiB, deep stacks fit: perf's errors at the end
	// of the copy leave the agreement alone.
	{name: "python-32k", prog: pythonProg, opts: []string{"--call-graph", "dwarf,32768"}, want: 0.99},
	{name: "sframe-z", prog: cProg("-O2", "-fomit-frame-pointer", "-g", "-Wa,--gsframe"), opts: []string{"-z"}, want: 0.99},
	{name: "sframe-pipe", prog: cProg("-O2", "-fomit-frame-pointer", "-g", "-Wa,--gsframe"), pipe: true, want: 0.99},
	// A process that forks and executes itself: perf's unwinding of the
	// new program is often wrong (see the categories below).
	{name: "exec", prog: func(t testing.TB) []string {
		return []string{testprog.Build(t, "../perfdata/testdata/workload.c", "-O1", "-g"), work(t)}
	}},
}

// pythonProg runs testdata/work.py in python3.
func pythonProg(t testing.TB) []string {
	py := testprog.Python(t)
	sec, _ := strconv.ParseFloat(work(t), 64)
	return []string{py, "testdata/work.py", fmt.Sprint(sec / 1000)}
}

var (
	recMu   sync.Mutex
	recDone = map[string]string{}
	recErr  = map[string]error{}
)

// record makes (once) the recording rc and returns its path. A perf that
// cannot record skips the test, except under CI.
func record(t testing.TB, rc recording) string {
	t.Helper()
	testprog.NeedTool(t, "perf")
	cmd := rc.prog(t)
	recMu.Lock()
	defer recMu.Unlock()
	if p, ok := recDone[rc.name]; ok {
		return p
	}
	if err, ok := recErr[rc.name]; ok {
		skipOrFail(t, err)
	}
	path := filepath.Join(testprog.Dir(t), "rec-"+rc.name+".data")
	out := path
	if rc.pipe {
		out = "-"
	}
	// -N: leave perf's build-ID cache alone.
	args := append([]string{"record", "-q", "-N", "-o", out, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000"}, rc.opts...)
	args = append(append(args, "--"), cmd...)
	c := exec.Command("perf", args...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	var err error
	if rc.pipe {
		var f *os.File
		if f, err = os.Create(path); err == nil {
			c.Stdout = f
			err = c.Run()
			f.Close()
		}
	} else {
		err = c.Run()
	}
	if err != nil {
		err = fmt.Errorf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		recErr[rc.name] = err
		skipOrFail(t, err)
	}
	recDone[rc.name] = path
	return path
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot record with perf: %v", err)
	}
	t.Skipf("cannot record with perf: %v", err)
}

// scriptFrame is one frame line of perf script -F ip,sym,dso.
type scriptFrame struct {
	addr     uint64
	sym, dso string
}

// scriptSample is one sample of perf script -F comm,tid,time,ip,sym,dso.
type scriptSample struct {
	header string
	frames []scriptFrame
}

// user returns the sample's user frames: those after the kernel's.
func (s *scriptSample) user() []scriptFrame {
	i := 0
	for i < len(s.frames) && isKernelFrame(s.frames[i]) {
		i++
	}
	return s.frames[i:]
}

// isKernelFrame reports whether perf shows f as a kernel frame: in the
// kernel or one of its modules, at a kernel address.
func isKernelFrame(f scriptFrame) bool {
	return f.addr >= 0xffff800000000000 && f.addr != ^uint64(0) && f.dso != "[unknown]" && strings.HasPrefix(f.dso, "[")
}

// parseScript parses perf script's text (or ours).
func parseScript(t testing.TB, text []byte) []scriptSample {
	t.Helper()
	var out []scriptSample
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case line[0] != '\t':
			out = append(out, scriptSample{header: line})
		default:
			if len(out) == 0 {
				t.Fatalf("frame before any sample: %q", line)
			}
			body := strings.TrimLeft(line, "\t ")
			sp := strings.IndexByte(body, ' ')
			open := strings.LastIndex(body, " (")
			if sp < 0 || open < sp || !strings.HasSuffix(body, ")") {
				t.Fatalf("bad frame line %q", line)
			}
			addr, err := strconv.ParseUint(body[:sp], 16, 64)
			if err != nil {
				t.Fatalf("bad address in %q", line)
			}
			s := &out[len(out)-1]
			s.frames = append(s.frames, scriptFrame{addr, body[sp+1 : open], body[open+2 : len(body)-1]})
		}
	}
	return out
}

// ourSample is a sample as this package unwound it, with what explains
// its differences from perf's.
type ourSample struct {
	scriptSample
	copyEnd  bool // the walk ended where the stack copy does
	lastWord bool // the last frame's return address is the copy's last word
	notCall  int  // callers whose return address follows no call instruction
	// complete: the walk reached the outermost frame (its return
	// address undefined), every caller after a call instruction.
	complete bool
}

// ours unwinds the recording at path and returns its samples as
// stackprof's ScriptWriter prints them, checking on x86-64 that every
// caller (but signal trampolines and the frames they interrupted) follows
// a call instruction.
func ours(t testing.TB, path string, calls *callSites) []ourSample {
	t.Helper()
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var buf bytes.Buffer
	sw := stackprof.NewScriptWriter(&buf, res)
	var out []ourSample
	err := s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
		buf.Reset()
		if err := sw.Write(st); err != nil {
			return err
		}
		if err := sw.Flush(); err != nil {
			return err
		}
		ss := parseScript(t, buf.Bytes())
		if len(ss) != 1 {
			t.Fatalf("%d samples printed for one", len(ss))
		}
		o := ourSample{scriptSample: ss[0], copyEnd: st.CopyEnd()}
		if u := st.User(); runtime.GOARCH == "amd64" && len(u) >= 2 && u[len(u)-2].CFA == st.StackEnd {
			o.lastWord = true
		}
		if runtime.GOARCH == "amd64" {
			fs := o.user()
			for i, f := range st.User() {
				if i > 0 && !f.Exact && f.Map != nil && !f.Map.Kernel && !calls.afterCall(fs[i]) && !ehReturn(fs[i-1].sym) {
					o.notCall++
				}
			}
		}
		o.complete = st.Stop == unwind.StopEnd && st.Err == nil && o.notCall == 0
		out = append(out, o)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// perfScript runs perf script on the recording at path, with our depth
// limit (perf's is kernel.perf_event_max_stack, 127).
func perfScript(t testing.TB, path string) []scriptSample {
	t.Helper()
	return parseScript(t, perfScriptText(t, path, "--no-inline"))
}

// perfScriptText runs perf script -F comm,tid,time,ip,sym,dso on the
// recording at path, with our depth limit and args, and returns its text.
func perfScriptText(t testing.TB, path string, args ...string) []byte {
	t.Helper()
	c := exec.Command("perf", append([]string{"script", "-i", path, "-F", "comm,tid,time,ip,sym,dso", "--max-stack", strconv.Itoa(unwind.DefaultMaxDepth)}, args...)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("perf script: %v\n%s", err, stderr.String())
	}
	return out
}

// Categories of samples whose user frames differ from perf script's.
const (
	catSame = iota
	// catNames: the same frames, named differently (perf names a PLT
	// entry after an unsized symbol before the PLT, _init).
	catNames
	// catPerfCopyEnd: perf has our frames and then one at 0xffffffffffffffff,
	// where our walk ended at the end of the stack copy: libunwind's step
	// fails to read past the copy and perf still shows a frame.
	catPerfCopyEnd
	// catPerfLastWord: perf has one frame less, or ends with a frame in
	// no code, where our last frame's return address is the last 8 bytes
	// of the stack copy: perf's access_mem refuses them (addr + 8 >= end,
	// tools/perf/util/unwind-libunwind-local.c).
	catPerfLastWord
	// catPerfNoCode: perf's frames agree with ours up to a frame, and
	// perf's walk ends in memory that holds no code: no mapping
	// ([unknown]), the stack, the heap, anonymous memory, or the address
	// 0xffffffffffffffff. A return address cannot point there: perf's
	// walk went astray after the frames it agrees with.
	catPerfNoCode
	// catPerfNotACall: after the frames it agrees with, perf shows a
	// caller whose return address does not follow a call instruction:
	// no call returns there.
	catPerfNotACall
	// catPerfWrongCallee: after the frames it agrees with, perf shows a
	// caller whose call instruction calls a function other than the
	// callee perf shows below it (perf left a frame out): the call the
	// return address follows says which function that frame is in.
	catPerfWrongCallee
	// catPerfRepeats: perf shows our frames with one of them twice in a
	// row, where the function does not call itself (start_thread calls
	// the thread's function through a pointer).
	catPerfRepeats
	// catPerfMaxStack: perf's frames are the first of ours, as many as
	// kernel.perf_event_max_stack (127), which perf script takes for its
	// limit.
	catPerfMaxStack
	// catPerfStopsEarly: perf's frames are the first of ours, and ours
	// go on, each after a call instruction. Seen in a process that
	// executed a new program (after fork), whose CFI perf's libunwind
	// loses.
	catPerfStopsEarly
	// catPerfSkips: perf's frames are some of ours, in order, with some
	// left out; ours each follow a call instruction, and each return
	// address was read from the stack where the callee's rules say it is.
	// Seen in the same processes.
	catPerfSkips
	// catOursShorter: our walk ended where perf's found more frames.
	catOursShorter
	// catPerfOtherComplete: none of the above, and our walk is complete:
	// it reached the outermost frame (_start, clone3), each caller after
	// a call instruction. Seen once in a recording of 10,000 samples: perf
	// showed a chain no program makes (__libc_start_call_main called
	// from clock_gettime, called from rec). Neither walk is proven
	// wrong, so these are counted against a budget (maxOtherComplete),
	// not explained.
	catPerfOtherComplete
	catOther
	numCats
)

var catName = [numCats]string{"identical", "names only", "perf: 0xffffffffffffffff where the copy ends",
	"perf: refuses the copy's last word", "perf: frames in no code", "perf: caller not after a call",
	"perf: caller calls another function", "perf: a frame twice", "perf: stops at its depth limit", "perf: stops early", "perf: leaves frames out", "ours ended early",
	"other, ours complete", "other"}

// maxOtherComplete is the share of a recording's samples that may be
// catPerfOtherComplete: one in 1,000, ten times the rate seen once, a tenth
// of the 1% that may differ from perf script's at all.
const maxOtherComplete = 0.001

// noCode reports whether perf shows f in memory that holds no code.
func noCode(f scriptFrame) bool {
	switch f.dso {
	case "[unknown]", "[stack]", "[heap]", "//anon", "[vvar]", "[vvar_vclock]", "[vsyscall]":
		return true
	}
	return f.addr == ^uint64(0) || strings.HasPrefix(f.dso, "[anon")
}

// categorize compares the user frames of perf's sample p and ours o.
func categorize(calls *callSites, p []scriptFrame, o ourSample) int {
	u := o.user()
	k := 0
	for k < len(p) && k < len(u) && p[k].addr == u[k].addr && p[k].dso == u[k].dso {
		k++
	}
	switch {
	case k == len(p) && k == len(u):
		for i := range p {
			if p[i].sym != u[i].sym {
				return catNames
			}
		}
		return catSame
	case o.copyEnd && k == len(u) && k == len(p)-1 && p[k].addr == ^uint64(0):
		return catPerfCopyEnd
	case o.lastWord && k == len(u)-1 && (k == len(p) || k == len(p)-1 && noCode(p[k])):
		return catPerfLastWord
	case k < len(p) && noCode(p[len(p)-1]):
		return catPerfNoCode
	case k > 0 && k < len(p) && !calls.afterCall(p[k]):
		return catPerfNotACall
	case k > 0 && k < len(p) && calls.callsOther(p[k], p[k-1]):
		return catPerfWrongCallee
	case k > 0 && k < len(p) && p[k] == p[k-1] && len(p) == len(u)+1 && slices.Equal(p[k+1:], u[k:]):
		return catPerfRepeats
	case k == len(p) && k < len(u) && k == perfMaxStack():
		return catPerfMaxStack
	case k == len(p) && k < len(u) && o.notCall == 0:
		return catPerfStopsEarly
	case len(p) < len(u) && subsequence(p, u) && o.notCall == 0:
		return catPerfSkips
	case k == len(u) && k < len(p):
		return catOursShorter
	case o.complete:
		return catPerfOtherComplete
	}
	return catOther
}

// fmtFrames formats frames for a log: "0xADDR sym (file)" innermost first.
func fmtFrames(fs []scriptFrame) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString(" < ")
		}
		fmt.Fprintf(&b, "%#x %s (%s)", f.addr, f.sym, filepath.Base(f.dso))
	}
	return b.String()
}

// perfMaxStack returns the depth limit perf script takes from the
// kernel, kernel.perf_event_max_stack.
func perfMaxStack() int {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_max_stack")
	if err != nil {
		return 127
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 127
	}
	return n
}

// subsequence reports whether p is u with some frames left out.
func subsequence(p, u []scriptFrame) bool {
	i := 0
	for _, f := range u {
		if i < len(p) && p[i].addr == f.addr && p[i].dso == f.dso {
			i++
		}
	}
	return i == len(p)
}

// callSites reads the instructions before return addresses, from the
// files perf names (x86-64): perf shows a caller at the file offset of
// its return address minus one.
type callSites struct {
	files map[string]*os.File
	sym   *symbolize.Symbolizer
	vdso  []byte
}

func newCallSites() *callSites {
	c := &callSites{files: map[string]*os.File{}, sym: symbolize.New()}
	if img := ownVDSO(); img != nil {
		c.vdso = img
		c.sym.Register("[vdso]", bytes.NewReader(img))
	}
	return c
}

// ownVDSO returns the image of this process's vDSO (the recording's,
// made on this machine), or nil.
func ownVDSO() []byte {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.HasSuffix(line, "[vdso]") {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err != nil || hi <= lo {
			return nil
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			return nil
		}
		defer mem.Close()
		img := make([]byte, hi-lo)
		if _, err := mem.ReadAt(img, int64(lo)); err != nil {
			return nil
		}
		return img
	}
	return nil
}

func (c *callSites) close() {
	for _, f := range c.files {
		f.Close()
	}
	c.sym.Close()
}

// before returns the 8 bytes before file offset off of path.
func (c *callSites) before(path string, off uint64) ([]byte, bool) {
	if path == "[vdso]" {
		if off < 8 || off > uint64(len(c.vdso)) {
			return nil, false
		}
		return c.vdso[off-8 : off], true
	}
	f, ok := c.files[path]
	if !ok {
		f, _ = os.Open(path)
		c.files[path] = f
	}
	if f == nil || off < 8 {
		return nil, false
	}
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(off-8)); err != nil {
		return nil, false
	}
	return b[:], true
}

// callLen returns the length of an x86-64 call instruction ending at the
// end of b (e8 rel32, or ff /2 with any addressing mode, REX and notrack
// prefixes), and 0 when none ends there.
func callLen(b []byte) int {
	n := len(b)
	if n >= 5 && b[n-5] == 0xe8 {
		return 5
	}
	for l := 2; l <= 7 && l <= n; l++ {
		op, modrm := b[n-l], b[n-l+1]
		if op != 0xff || (modrm>>3)&7 != 2 {
			continue
		}
		mod, rm := modrm>>6, modrm&7
		want := 2
		switch mod {
		case 0:
			if rm == 4 {
				want = 3
				if l >= 3 && b[n-l+2]&7 == 5 {
					want = 7
				}
			} else if rm == 5 {
				want = 6
			}
		case 1:
			want = 3
			if rm == 4 {
				want = 4
			}
		case 2:
			want = 6
			if rm == 4 {
				want = 7
			}
		}
		if want == l {
			return l
		}
	}
	return 0
}

// afterCall reports whether perf's frame f, a caller, has a return
// address that follows a call instruction.
func (c *callSites) afterCall(f scriptFrame) bool {
	b, ok := c.before(f.dso, f.addr+1)
	return !ok || callLen(b) > 0 // unreadable: no evidence either way
}

// callsOther reports whether perf's caller frame f follows a direct call
// to a function other than that of callee, the frame below it: in the
// same file, a function with another start; in another file, anything
// but a PLT entry (the only way to call into another file).
func (c *callSites) callsOther(f, callee scriptFrame) bool {
	b, ok := c.before(f.dso, f.addr+1)
	if !ok || len(b) < 5 || b[len(b)-5] != 0xe8 {
		return false
	}
	rel := int32(uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24)
	target := uint64(int64(f.addr+1) + int64(rel))
	if f.dso != callee.dso {
		return !c.inPLT(f.dso, target)
	}
	// perf shows file offsets; in these files code lies at the same
	// offsets and addresses (checked: the symbol must be found, sized).
	t, ok := c.sym.LookupFunc(f.dso, target)
	if !ok || t.Size == 0 || target-t.Start >= t.Size {
		return false
	}
	e, ok := c.sym.LookupFunc(callee.dso, callee.addr)
	return ok && t.Start != e.Start
}

// inPLT reports whether addr lies in a PLT section of the file at path.
func (c *callSites) inPLT(path string, addr uint64) bool {
	if path == "[vdso]" {
		return false // the vDSO calls nothing outside itself
	}
	f, err := elf.Open(path)
	if err != nil {
		return true // no evidence
	}
	defer f.Close()
	for _, s := range f.Sections {
		if strings.HasPrefix(s.Name, ".plt") && addr >= s.Addr && addr < s.Addr+s.Size {
			return true
		}
	}
	return false
}

// ehReturn reports whether sym is one of libgcc's functions that return
// to an exception's landing pad (__builtin_eh_return): their epilogue
// stores the landing pad's address in the return-address slot before
// it returns there, so a sample taken in between has the landing pad,
// which follows no call, as the caller's address, for perf and us alike.
func ehReturn(sym string) bool {
	switch strings.TrimSuffix(strings.SplitN(sym, "+", 2)[0], "@plt") {
	case "_Unwind_RaiseException", "_Unwind_Resume", "_Unwind_Resume_or_Rethrow", "_Unwind_ForcedUnwind":
		return true
	}
	return false
}

// TestAgainstPerfScript records each test program with this machine's
// perf record --call-graph dwarf and compares, sample by sample, the user
// frames we unwind from each sample's registers and stack copy with those
// of perf script (libunwind or libdw, as perf was built) on the same
// file: address (as perf shows it), symbol and file. Every sample must be
// identical or differ in one of the categories above, each of which is
// perf's error (or a naming difference); for the programs on which perf
// is right, 99% must be identical. The agreement is logged (go test -v).
func TestAgainstPerfScript(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			calls := newCallSites()
			defer calls.close()
			ps := perfScript(t, path)
			os := ours(t, path, calls)
			if len(ps) != len(os) {
				t.Fatalf("perf script shows %d samples, we unwind %d", len(ps), len(os))
			}
			var count [numCats]int
			notCall := 0
			examples := map[int][]string{}
			for i := range ps {
				if ps[i].header != os[i].header {
					t.Fatalf("sample %d: perf %q, ours %q", i, ps[i].header, os[i].header)
				}
				c := categorize(calls, ps[i].user(), os[i])
				count[c]++
				if os[i].notCall > 0 {
					notCall++
					t.Errorf("ours: a caller not after a call: %s", fmtFrames(os[i].user()))
				}
				if c != catSame && len(examples[c]) < 2 {
					examples[c] = append(examples[c], fmt.Sprintf("%s (%d and %d frames, %d kernel)\n    perf: %s\n    ours: %s", ps[i].header, len(ps[i].user()), len(os[i].user()), len(ps[i].frames)-len(ps[i].user()), fmtFrames(ps[i].user()), fmtFrames(os[i].user())))
				}
			}
			n := len(ps)
			if n < 100 {
				t.Fatalf("only %d samples", n)
			}
			var report []string
			for c := range numCats {
				if count[c] > 0 {
					report = append(report, fmt.Sprintf("%s %d (%.2f%%)", catName[c], count[c], 100*float64(count[c])/float64(n)))
				}
			}
			t.Logf("%d samples: %s; ours with a caller not after a call: %d", n, strings.Join(report, ", "), notCall)
			cats := make([]int, 0, len(examples))
			for c := range examples {
				cats = append(cats, c)
			}
			sort.Ints(cats)
			for _, c := range cats {
				for _, e := range examples[c] {
					t.Logf("%s: %s", catName[c], e)
				}
			}
			if bad := count[catOursShorter] + count[catOther]; bad > 0 {
				t.Errorf("%d samples differ from perf script's unexplained", bad)
			}
			if c := count[catPerfOtherComplete]; float64(c) > maxOtherComplete*float64(n) {
				t.Errorf("%d samples differ from perf script's unexplained (ours complete), want at most %.0f", c, maxOtherComplete*float64(n))
			}
			if same := float64(count[catSame]) / float64(n); same < rc.want {
				t.Errorf("%.2f%% of samples identical to perf script's, want %.0f%%", 100*same, 100*rc.want)
			}
		})
	}
}

// inlinesRecording records testdata/inlines.c, built with DWARF, and on
// x86-64 with testdata/alias.S.
var inlinesRecording = recording{name: "inlines", prog: inlinesProg("-O2", "-g")}

// inlinesSymtabRecording records the same program built without DWARF.
var inlinesSymtabRecording = recording{name: "inlines-symtab", prog: inlinesProg("-O2")}

// inlinesProg builds testdata/inlines.c with flags, and on x86-64
// testdata/alias.S with it.
func inlinesProg(flags ...string) func(t testing.TB) []string {
	return func(t testing.TB) []string {
		args := slices.Clip(flags)
		if runtime.GOARCH == "amd64" {
			s, err := filepath.Abs("testdata/alias.S")
			if err != nil {
				t.Fatal(err)
			}
			args = append(args, s)
		}
		return []string{testprog.Build(t, "testdata/inlines.c", args...), work(t)}
	}
}

// inlinesTexts returns the samples of the recording rc as perf script
// shows them without --no-inline, and as we do with Resolver.Inlines,
// after checking that there are as many and that 99% are identical.
func inlinesTexts(t *testing.T, rc recording) (ps, ours []string) {
	t.Helper()
	path := record(t, rc)
	perfText := perfScriptText(t, path)
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	res.Inlines = true
	var ourText bytes.Buffer
	sw := stackprof.NewScriptWriter(&ourText, res)
	if err := s.Process(r, perfunwind.ProcessOptions{}, sw.Write); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	ps = strings.Split(strings.TrimSpace(string(perfText)), "\n\n")
	ours = strings.Split(strings.TrimSpace(ourText.String()), "\n\n")
	if len(ps) != len(ours) {
		t.Fatalf("perf script shows %d samples, we %d", len(ps), len(ours))
	}
	same := 0
	var diffs []string
	for i := range ps {
		if ps[i] == ours[i] {
			same++
		} else if len(diffs) < 3 {
			diffs = append(diffs, fmt.Sprintf("perf:\n%s\nours:\n%s", ps[i], ours[i]))
		}
	}
	t.Logf("%d of %d samples identical", same, len(ps))
	for _, d := range diffs {
		t.Log(d)
	}
	if len(ps) < 100 {
		t.Fatalf("only %d samples", len(ps))
	}
	if float64(same) < 0.99*float64(len(ps)) {
		t.Errorf("%d of %d samples identical to perf script's, want 99%%", same, len(ps))
	}
	return ps, ours
}

// TestInlinesAgainstPerfScript compares the text of a recording with its
// inlined calls (Resolver.Inlines) with perf script's without
// --no-inline, sample by sample: perf shows the frames addr2line -f -i
// gives, the function itself as inlined where its DWARF name is not its
// symbol's (a clone), names from the DWARF linkage name first, and of
// DWARF entries for one function under several names the last.
func TestInlinesAgainstPerfScript(t *testing.T) {
	ps, _ := inlinesTexts(t, inlinesRecording)
	clone, linkage, alias := 0, 0, 0
	for i := range ps {
		clone += strings.Count(ps[i], " work (inlined)\n")
		linkage += strings.Count(ps[i], " leaf_impl (")
		alias += strings.Count(ps[i], " churn_second (")
	}
	t.Logf("perf shows the clone as inlined work %d times, leaf_impl %d, churn_second %d", clone, linkage, alias)
	// What the comparison must cover: the rule for the function itself
	// (a clone of work, shown as inlined), and the linkage name.
	if clone < len(ps)/10 || linkage < len(ps)/10 || runtime.GOARCH == "amd64" && alias < len(ps)/20 {
		t.Errorf("perf shows work (inlined) %d times, leaf_impl %d and churn_second %d in %d samples: the program's frames are not those the test is for", clone, linkage, alias, len(ps))
	}
}

// TestInlinesSymtabAgainstPerfScript is TestInlinesAgainstPerfScript for
// the program built without DWARF, where addr2line names functions from
// the symbol table: of alias.S's two names, equal in size, the first in
// the table (churn_first), which perf, naming the code by the longer
// (churn_second), shows as inlined. We showed churn_second as the symbol
// itself, in half the samples. On the vDSO, perf runs no addr2line: its
// frames keep perf's name (__vdso_clock_gettime, where addr2line gives
// its alias clock_gettime).
func TestInlinesSymtabAgainstPerfScript(t *testing.T) {
	ps, ours := inlinesTexts(t, inlinesSymtabRecording)
	alias, vdso, vdsoDiff := 0, 0, 0
	for i := range ps {
		alias += strings.Count(ps[i], " churn_first (inlined)\n")
		if strings.Contains(ps[i], " ([vdso])\n") {
			vdso++
			if ps[i] != ours[i] {
				vdsoDiff++
			}
		}
	}
	t.Logf("perf shows churn_first (inlined) %d times, the vDSO in %d samples", alias, vdso)
	if vdsoDiff > 0 {
		t.Errorf("%d of the %d samples in the vDSO differ from perf script's", vdsoDiff, vdso)
	}
	if runtime.GOARCH == "amd64" && alias < len(ps)/20 || vdso == 0 {
		t.Errorf("perf shows churn_first (inlined) %d times and the vDSO in %d of %d samples: the program's frames are not those the test is for", alias, vdso, len(ps))
	}
}

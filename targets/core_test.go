//go:build linux

package targets

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/procmaps"
	"github.com/sframekit/sframekit/internal/testprog"
)

// coreFixture is a gcore of the test program plus what a live attach saw
// just before, while the threads were blocked in the same place.
type coreFixture struct {
	exe, core string
	pid       int
	maps      []arch.Mapping
	threads   []arch.Thread
	modules   []arch.Module
	stacks    map[int][]byte // 512 bytes at each thread's SP
}

var (
	coreOnce sync.Once
	coreFix  *coreFixture
	coreErr  error
)

// sharedCore makes the core once per test binary.
func sharedCore(t testing.TB) *coreFixture {
	t.Helper()
	needTool(t, "gdb")
	exe := testProgram(t)
	coreOnce.Do(func() {
		coreFix, coreErr = makeCore(t, exe)
	})
	if coreErr != nil {
		t.Fatal(coreErr)
	}
	return coreFix
}

func makeCore(t testing.TB, exe string) (*coreFixture, error) {
	c := startChild(t)
	defer func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}()
	fx := &coreFixture{exe: exe, pid: c.pid, core: filepath.Join(testprog.Dir(t), "core"), stacks: map[int][]byte{}}
	mapsText, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", c.pid))
	if err != nil {
		return nil, err
	}
	if fx.maps, err = procmaps.Parse(mapsText); err != nil {
		return nil, err
	}
	p, err := AttachProcess(c.pid)
	if err != nil {
		return nil, err
	}
	fx.threads, fx.modules = p.Threads(), p.Modules()
	for _, th := range fx.threads {
		b := make([]byte, 512)
		if _, err := p.Memory().ReadAt(b, int64(th.Regs.SP())); err != nil {
			p.Close()
			return nil, err
		}
		fx.stacks[th.TID] = b
	}
	if err := p.Close(); err != nil {
		return nil, err
	}
	out, err := exec.Command("gdb", "-nx", "-batch", "-p", fmt.Sprint(c.pid), "-ex", "gcore "+fx.core).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gcore: %v\n%s", err, out)
	}
	return fx, nil
}

func TestOpenCore(t *testing.T) {
	fx := sharedCore(t)
	c, err := OpenCore(fx.core, "")
	if err != nil {
		t.Fatalf("OpenCore: %v", err)
	}
	defer c.Close()
	for _, w := range c.Warnings() {
		t.Logf("warning: %v", w)
	}
	if c.PID() != fx.pid || c.Arch() != hostArch {
		t.Errorf("pid %d arch %v, want %d %v", c.PID(), c.Arch(), fx.pid, hostArch)
	}
	if c.Exe() != fx.exe {
		t.Errorf("Exe() = %q, want %q", c.Exe(), fx.exe)
	}

	// Registers: identical to the live attach, register for register.
	threads := c.Threads()
	if len(threads) != len(fx.threads) || len(threads) != 4 {
		t.Fatalf("core has %d threads, live %d, want 4", len(threads), len(fx.threads))
	}
	live := map[int]arch.Thread{}
	for _, th := range fx.threads {
		live[th.TID] = th
	}
	for _, th := range threads {
		lt, ok := live[th.TID]
		if !ok {
			t.Errorf("core thread %d not in live process", th.TID)
			continue
		}
		if th.Regs.R != lt.Regs.R || th.Regs.Valid != lt.Regs.Valid {
			t.Errorf("thread %d registers:\ncore %v\nlive %v", th.TID, th.Regs, lt.Regs)
		}
		if th.TID == fx.pid && th.Name != "targprog" {
			t.Errorf("main thread name %q, want targprog", th.Name)
		}
		// Stack memory equals what the live process had.
		b := make([]byte, 512)
		if _, err := c.Memory().ReadAt(b, int64(th.Regs.SP())); err != nil {
			t.Errorf("thread %d: reading core stack: %v", th.TID, err)
		} else if !bytes.Equal(b, fx.stacks[th.TID]) {
			t.Errorf("thread %d: stack at %#x differs between core and live process", th.TID, th.Regs.SP())
		}
	}

	// Registers: as gdb reads them from the core.
	if runtime.GOARCH == "amd64" {
		want := map[int]map[string]uint64{}
		for _, th := range threads {
			want[th.TID] = regsOf(&th.Regs)
		}
		got := runGDB(t, fx.exe, fx.core, "-ex", "thread apply all info registers rip rsp rbp rbx r12")
		compareRegs(t, "gdb core", got, want)
	}

	// Modules: start at the first mapping of their file in the maps taken
	// from the live process, with the bias the live attach computed.
	firstStart := map[string]uint64{}
	for _, l := range fx.maps {
		if _, ok := firstStart[l.Path]; !ok {
			firstStart[l.Path] = l.Start
		}
	}
	liveBias := map[string]uint64{}
	for _, m := range fx.modules {
		liveBias[m.Path] = m.Bias
	}
	var exeMod, libcMod, vdso *arch.Module
	for i := range c.Modules() {
		m := &c.Modules()[i]
		t.Logf("module %#x-%#x off %#x bias %#x ok %v %s", m.Start, m.End, m.Offset, m.Bias, m.HasBias, m.Path)
		if fs, ok := firstStart[m.Path]; !ok || fs != m.Start {
			t.Errorf("module %s starts at %#x; maps say %#x (found %v)", m.Path, m.Start, fs, ok)
		}
		if b, ok := liveBias[m.Path]; !ok || !m.HasBias || b != m.Bias {
			t.Errorf("module %s bias %#x (ok %v), live %#x (found %v)", m.Path, m.Bias, m.HasBias, b, ok)
		}
		switch {
		case m.Path == fx.exe:
			exeMod = m
		case strings.Contains(filepath.Base(m.Path), "libc.so"):
			libcMod = m
		case m.IsVDSO():
			vdso = m
		}
	}
	if exeMod == nil || libcMod == nil || vdso == nil {
		t.Fatalf("missing modules: exe %v libc %v vdso %v", exeMod != nil, libcMod != nil, vdso != nil)
	}
	if len(c.Modules()) != len(fx.modules) {
		t.Errorf("core has %d modules, live process %d", len(c.Modules()), len(fx.modules))
	}

	// Text is not dumped by gcore: these reads come from the files.
	checkTextBytes(t, c.Memory(), exeMod)
	checkTextBytes(t, c.Memory(), libcMod)
	if a, _ := elfSym(t, fx.exe, "worker_recurse"); true {
		got := make([]byte, 16)
		if _, err := c.Memory().ReadAt(got, int64(a+exeMod.Bias)); err != nil {
			t.Errorf("reading worker_recurse: %v", err)
		}
	}

	// The vDSO image is dumped and parses.
	img, err := arch.ReadImage(c.Memory(), vdso)
	if err != nil {
		t.Fatalf("vdso: %v", err)
	}
	vf, err := elffile.NewFile(img)
	if err != nil {
		t.Fatalf("vdso: %v", err)
	}
	dsyms, _ := vf.DynamicSymbols()
	vf.Close()
	if !hasSym(dsyms, "__vdso_clock_gettime") {
		t.Errorf("vdso from core lacks __vdso_clock_gettime")
	}

	// Unmapped memory fails cleanly.
	if _, err := ReadUint64(c.Memory(), 8); err == nil {
		t.Error("read at address 8 succeeded")
	}
	// A read straddling dumped data (.data) and file-backed text works.
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestOpenCoreExeOverride(t *testing.T) {
	fx := sharedCore(t)
	moved := filepath.Join(t.TempDir(), "moved-exe")
	data, err := os.ReadFile(fx.exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, data, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCore(fx.core, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Exe() != moved {
		t.Errorf("Exe() = %q, want %q", c.Exe(), moved)
	}
	var exeMod *arch.Module
	for i := range c.Modules() {
		if c.Modules()[i].Path == moved {
			exeMod = &c.Modules()[i]
		}
	}
	if exeMod == nil || exeMod.File != moved {
		t.Fatalf("no module for the moved executable: %+v", exeMod)
	}
	checkTextBytes(t, c.Memory(), exeMod)
}

// TestOpenCoreChecksFiles: a core opened with its executable gives no
// warning; with another build of the program, or a path where nothing
// is, a warning names the executable and says what is wrong: the build
// ID in the core (from the first page gcore dumps) differs from the
// file's, or the file is missing.
func TestOpenCoreChecksFiles(t *testing.T) {
	fx := sharedCore(t)
	other := testprog.Build(t, "testdata/targprog.c", "-g", "-O2") // another build: another build ID
	check := func(exe, want string) {
		t.Helper()
		c, err := OpenCore(fx.core, exe)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ws []string
		for _, w := range c.Warnings() {
			ws = append(ws, w.Error())
		}
		all := strings.Join(ws, "\n")
		switch {
		case want == "" && len(ws) != 0:
			t.Errorf("--exe %s: warnings\n%s", exe, all)
		case want != "" && !strings.Contains(all, want):
			t.Errorf("--exe %s: warnings\n%s\nwant %q", exe, all, want)
		}
	}
	check("", "")
	check(fx.exe, "")
	id, err := readBuildID(mustOpen(t, fx.exe), ^uint64(0))
	if err != nil || len(id) == 0 {
		t.Fatalf("build ID of %s: %x, %v", fx.exe, id, err)
	}
	otherID, _ := readBuildID(mustOpen(t, other), ^uint64(0))
	check(other, fmt.Sprintf("executable %s is not the file the process ran: its build ID is %x, the core's %x", other, otherID, id))
	missing := filepath.Join(t.TempDir(), "targprog")
	check(missing, fmt.Sprintf("executable %s (build ID %x) not found", missing, id))
}

func mustOpen(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// noteSegment returns the contents of the core's first PT_NOTE segment.
func noteSegment(t testing.TB, core string) []byte {
	f, err := elf.Open(core)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatal("no PT_NOTE")
	return nil
}

// TestOpenCoreMalformed truncates and corrupts a real core: OpenCore may
// fail but must not panic, and what it returns must be usable.
func TestOpenCoreMalformed(t *testing.T) {
	fx := sharedCore(t)
	data, err := os.ReadFile(fx.core)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var noteOff, noteSize uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			noteOff, noteSize = p.Off, p.Filesz
		}
	}
	use := func(c *Core) {
		for _, th := range c.Threads() {
			ReadUint64(c.Memory(), th.Regs.SP())
		}
		for i := range c.Modules() {
			ReadUint64(c.Memory(), c.Modules()[i].Start)
		}
		c.Close()
	}
	// Truncations, including inside the headers and the notes.
	cuts := []uint64{0, 10, 63, 64, 100, 64 + 56*3, noteOff, noteOff + 20, noteOff + noteSize/2, noteOff + noteSize - 1, uint64(len(data)) / 2}
	for _, n := range cuts {
		if n > uint64(len(data)) {
			continue
		}
		if c, err := openCore(bytes.NewReader(data[:n]), "cut", ""); err == nil {
			use(c)
		}
	}
	// Random corruption of the notes and of the headers.
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		// Corrupt in place (the core is tens of MiB) and restore after.
		b := data
		saved := map[uint64]byte{}
		for k := 0; k < 1+rng.Intn(8); k++ {
			var at uint64
			if rng.Intn(4) == 0 {
				at = uint64(rng.Intn(int(64 + 56*uint64(len(f.Progs)))))
			} else {
				at = noteOff + uint64(rng.Intn(int(noteSize)))
			}
			for j := at; j < at+4 && j < uint64(len(b)); j++ {
				if _, ok := saved[j]; !ok {
					saved[j] = b[j]
				}
			}
			b[at] = byte(rng.Intn(256))
			if rng.Intn(3) == 0 && at+4 <= uint64(len(b)) {
				binary.LittleEndian.PutUint32(b[at:], rng.Uint32())
			}
		}
		if c, err := openCore(bytes.NewReader(b), "corrupt", ""); err == nil {
			use(c)
		}
		for j, v := range saved {
			b[j] = v
		}
	}
}

// FuzzCoreNotes fuzzes the note parser, seeded with the notes of a real
// core (made with gdb when available) and a synthetic AArch64 note set.
func FuzzCoreNotes(f *testing.F) {
	if _, err := exec.LookPath("gdb"); err == nil {
		if _, err := exec.LookPath("gcc"); err == nil {
			f.Add(noteSegment(f, sharedCore(f).core))
		}
	}
	f.Add(synthNotes(elf.EM_AARCH64, binary.LittleEndian, nil))
	f.Add(synthNotes(elf.EM_X86_64, binary.LittleEndian, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []arch.Arch{arch.AMD64, arch.ARM64, arch.S390X} {
			var n coreNotes
			var bo binary.ByteOrder = binary.LittleEndian
			if m == arch.S390X {
				bo = binary.BigEndian
			}
			if err := n.parse(data, m, bo); err != nil {
				continue
			}
			if len(n.threads) > len(data)/300 {
				t.Fatalf("%d threads from %d bytes", len(n.threads), len(data))
			}
			for _, fe := range n.files {
				if fe.end < fe.start {
					t.Fatalf("bad file entry %+v", fe)
				}
			}
			if len(n.files)*24 > len(data) {
				t.Fatalf("%d files from %d bytes", len(n.files), len(data))
			}
		}
	})
}

// FuzzOpenCore fuzzes the whole core reader on small synthetic cores.
func FuzzOpenCore(f *testing.F) {
	f.Add(synthCore(elf.EM_AARCH64))
	f.Add(synthCore(elf.EM_X86_64))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := openCore(bytes.NewReader(data), "fuzz", "")
		if err != nil {
			return
		}
		for _, th := range c.Threads() {
			ReadUint64(c.Memory(), th.Regs.SP())
		}
		c.Close()
	})
}

// TestOpenKernelCore makes the kernel write a core (core_pattern "core"
// in the working directory, RLIMIT_CORE raised for the child only) and
// compares it with a live attach made just before the fatal signal.
func TestOpenKernelCore(t *testing.T) {
	pattern, err := os.ReadFile("/proc/sys/kernel/core_pattern")
	if err != nil || strings.TrimSpace(string(pattern)) != "core" {
		t.Skipf("core_pattern is %q, not \"core\"; not changing it", strings.TrimSpace(string(pattern)))
	}
	exe := testProgram(t)
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "ulimit -c unlimited && exec "+exe)
	cmd.Dir = dir
	tp := testprog.StartCmd(t, cmd)
	c := &child{cmd: cmd, stdin: tp.Stdin, out: tp.Out, pid: tp.PID()}
	waitAllSleeping(t, c.pid)
	p, err := AttachProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	live := map[int]arch.Regs{}
	for _, th := range p.Threads() {
		live[th.TID] = th.Regs
	}
	liveMods := p.Modules()
	p.Close()
	cmd.Process.Signal(syscall.SIGSEGV)
	cmd.Wait()
	corePath := filepath.Join(dir, "core")
	if _, err := os.Stat(corePath); err != nil {
		t.Skipf("kernel wrote no core: %v", err)
	}
	k, err := OpenCore(corePath, "")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for _, w := range k.Warnings() {
		t.Logf("warning: %v", w)
	}
	if len(k.Threads()) != 4 || k.PID() != c.pid {
		t.Fatalf("%d threads, pid %d", len(k.Threads()), k.PID())
	}
	if k.Threads()[0].Signal != int(syscall.SIGSEGV) {
		t.Errorf("first thread's signal %d, want SIGSEGV", k.Threads()[0].Signal)
	}
	for _, th := range k.Threads() {
		want, ok := live[th.TID]
		if !ok {
			t.Errorf("thread %d unknown", th.TID)
			continue
		}
		if th.Regs.R != want.R && !restartedSyscall(th.Regs, want) {
			t.Errorf("thread %d:\ncore %v\nlive %v", th.TID, th.Regs, want)
		}
	}
	if len(k.Modules()) != len(liveMods) {
		t.Errorf("%d modules, live %d", len(k.Modules()), len(liveMods))
	}
	for i := range k.Modules() {
		m := &k.Modules()[i]
		var lm *arch.Module
		for j := range liveMods {
			if liveMods[j].Path == m.Path {
				lm = &liveMods[j]
			}
		}
		if lm == nil || lm.Start != m.Start || lm.End != m.End || lm.Bias != m.Bias || !m.HasBias {
			t.Errorf("module %s [%#x,%#x) bias %#x; live %+v", m.Path, m.Start, m.End, m.Bias, lm)
			continue
		}
		if m.IsVDSO() {
			continue
		}
		// The kernel records the segment flags: the text mapping is "r-x".
		hasX := false
		for _, mp := range m.Mappings {
			hasX = hasX || strings.Contains(mp.Perm, "x")
		}
		if !hasX {
			t.Errorf("module %s: no executable mapping in %+v", m.Path, m.Mappings)
		}
		checkTextBytes(t, k.Memory(), m)
	}
}

// restartedSyscall reports whether core holds the registers of live as
// the kernel rewinds them to restart an interrupted system call: a thread
// stopped in pause() shows rax = -ERESTARTNOHAND (or another -ERESTART*)
// and rip after the syscall instruction; if the fatal signal's delivery
// already prepared the restart when the core was written, rax holds the
// system call number again (or restart_syscall's) and rip is back on
// the 2-byte syscall instruction. Every other register must be equal.
func restartedSyscall(core, live arch.Regs) bool {
	if core.Arch != arch.AMD64 || live.Arch != arch.AMD64 {
		return false
	}
	const raxReg = arch.AMD64RAX
	ret := int64(live.R[raxReg])
	if ret > -512 || ret < -516 {
		return false
	}
	if core.R[arch.AMD64RIP] != live.R[arch.AMD64RIP]-2 {
		return false
	}
	if rax := core.R[raxReg]; rax != live.OrigRAX && rax != 219 { // __NR_restart_syscall
		return false
	}
	c, l := core.R, live.R
	c[raxReg], l[raxReg] = 0, 0
	c[arch.AMD64RIP], l[arch.AMD64RIP] = 0, 0
	return c == l
}

// TestCoreMemOverlaps checks overlaps at the edges of a segment and across
// a gap, as placeObject relies on it to refuse a library placed where the
// core has no memory.
func TestCoreMemOverlaps(t *testing.T) {
	m := &coreMem{segs: []coreSeg{{vaddr: 0x1000, memsz: 0x1000}, {vaddr: 0x4000, memsz: 0x2000}}}
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{
		{0, 0x1000, false},
		{0, 0x1001, true},
		{0x1fff, 0x2000, true},
		{0x2000, 0x4000, false},
		{0x2000, 0x4001, true},
		{0x5000, 0x9000, true},
		{0x6000, 0x9000, false},
	} {
		if got := m.overlaps(c.lo, c.hi); got != c.want {
			t.Errorf("overlaps(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

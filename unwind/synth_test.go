package unwind

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// Synthetic stacks: a chain of functions from corpus files of other
// architectures, a stack memory image fabricated by following each
// function's SFrame row at a chosen PC, and the frames the unwinder must
// find, planted beforehand. The rows used are checked against the
// corpus's objdump dumps, so the fabricated stacks follow the reference
// reading of the sections, not only this module's.

// loadCorpusModule loads the SFrame section of a corpus file as a module
// loaded at bias.
func loadCorpusModule(t *testing.T, rel string, bias uint64) *Module {
	t.Helper()
	path := filepath.Join(corpus.Dir(t), rel)
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tabs := LoadTables(f)
	if tabs.SFrame == nil {
		t.Fatalf("%s: no usable SFrame section: %v", rel, tabs.Errs)
	}
	return sframeModule(t, rel, tabs.SFrame, bias)
}

func sframeModule(t *testing.T, name string, s *sframe.Section, bias uint64) *Module {
	t.Helper()
	lo, hi := ^uint64(0), uint64(0)
	for i := 0; i < s.NumFuncs(); i++ {
		fn, err := s.Func(i)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi = min(lo, fn.Start), max(hi, fn.End())
	}
	return &Module{Name: name, Start: lo + bias, End: hi + bias, Bias: bias, SFrame: s}
}

// fmtRule formats an SFrame rule as objdump --sframe prints it.
func fmtRule(r sframe.Rule, abi sframe.ABI, cfa bool) string {
	reg := func(b arch.Reg) string {
		switch {
		case b == abi.Arch().SP():
			return "sp"
		case b == abi.Arch().FP():
			return "fp"
		}
		return fmt.Sprintf("r%d", b)
	}
	switch r.Kind {
	case sframe.RuleUnspecified:
		return "u"
	case sframe.RuleNotSaved:
		return "U"
	}
	if r.Padding {
		return "U" // the fixed RA, spelled as a padding word
	}
	if r.Fixed {
		return "f"
	}
	if cfa && r.Kind == sframe.RuleValue {
		return fmt.Sprintf("%s+%d", reg(r.Base), r.Offset)
	}
	var s string
	if r.Base == sframe.RegCFA {
		s = fmt.Sprintf("c%+d", r.Offset)
	} else {
		s = fmt.Sprintf("%s%+d", reg(r.Base), r.Offset)
	}
	if r.Kind == sframe.RuleDeref {
		s = "(" + s + ")"
		if r.Base == sframe.RegCFA {
			s = fmt.Sprintf("c%+d", r.Offset) // objdump: saved at CFA+off
		}
	}
	return s
}

// checkRowInDump checks that the row covering elfPC in m prints in the
// corpus dump of m as the unwinder reads it.
func checkRowInDump(t *testing.T, m *Module, elfPC uint64) {
	t.Helper()
	s := m.SFrame
	fn, fre, err := s.FindFRE(elfPC)
	if err != nil {
		t.Fatalf("%s: no row at %#x: %v", m.Name, elfPC, err)
	}
	row, err := s.Rules(&fn, &fre)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if row.RAUndefined {
		want = []string{"RA", "undefined"}
	} else {
		ra := fmtRule(row.RA, s.Header().ABI, false)
		if row.RASigned {
			ra += "[s]"
		}
		want = []string{fmtRule(row.CFA, s.Header().ABI, true), fmtRule(row.FP, s.Header().ABI, false), ra}
	}
	b, err := os.ReadFile(filepath.Join(corpus.Dir(t), m.Name+".sframe.txt"))
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("func idx [%d]:", fn.Index)
	text := string(b)
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("%s: %q not in dump", m.Name, head)
	}
	addr := fmt.Sprintf("%016x", fn.Start+uint64(fre.StartOff))
	if fn.PCType() == sframe.PCMask {
		addr = fmt.Sprintf("%016x", fre.StartOff) // objdump prints the offset
	}
	for _, l := range strings.Split(text[i:], "\n")[2:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			break
		}
		if f[0] == addr {
			if strings.Join(f[1:], " ") != strings.Join(want, " ") {
				t.Fatalf("%s row %s: dump says %v, unwinder reads %v", m.Name, addr, f[1:], want)
			}
			return
		}
	}
	t.Fatalf("%s: row %s of function %d not in dump", m.Name, addr, fn.Index)
}

// synthFrame describes one frame to plant.
type synthFrame struct {
	mod *Module
	pc  uint64 // runtime PC: current PC, return address, or interrupted PC
	// signal makes the frame a signal trampoline: the next frame's
	// registers are saved in a signal context at its SP.
	signal bool
}

// planter builds a stack image.
type planter struct {
	t       *testing.T
	arch    arch.Arch
	order   binary.ByteOrder
	lo      uint64 // address of stack[0]
	stack   []byte
	pac     uint64 // bits set in the top of signed return addresses
	pacUsed bool
}

func (p *planter) put(addr, v uint64) {
	p.t.Helper()
	if addr < p.lo || addr+8 > p.lo+uint64(len(p.stack)) {
		p.t.Fatalf("planting at %#x: outside the stack", addr)
	}
	p.order.PutUint64(p.stack[addr-p.lo:], v)
}

// want is one expected frame.
type want struct {
	pc, sp, cfa uint64
	method      Method
	signal      bool
}

// plant fabricates the stack for frames (innermost first) with the
// innermost SP at sp0, and returns the thread's registers and the frames
// the unwinder must find. The outermost frame's row must say "RA
// undefined", or its caller's RA is planted as 0.
func (p *planter) plant(frames []synthFrame, sp0 uint64) (arch.Regs, []want) {
	t := p.t
	t.Helper()
	n := len(frames)
	rows := make([]sframe.Row, n)
	sp := make([]uint64, n+1)
	cfa := make([]uint64, n)
	fpForced := make([]bool, n)
	fpv := make([]uint64, n+1)
	// Register sets of "top" frames: frame 0 and those after signal
	// frames. Their registers are the thread's or a signal context's.
	ctx := make([]*arch.Regs, n+1)
	ctx[0] = &arch.Regs{Arch: p.arch}
	spOff := uint64(0)
	if p.arch == arch.S390X {
		spOff = ^uint64(159)
	}
	abiSP, abiFP := p.arch.SP(), p.arch.FP()
	sp[0] = sp0
	for i := 0; i < n; i++ {
		fr := &frames[i]
		if fr.signal {
			cfa[i] = sp[i]
			sp[i+1] = sp[i] + 0x400
			ctx[i+1] = &arch.Regs{Arch: p.arch}
			continue
		}
		lookup := fr.pc
		if i > 0 && ctx[i] == nil {
			lookup--
		}
		elfPC := lookup - fr.mod.Bias
		checkRowInDump(t, fr.mod, elfPC)
		fn, fre, err := fr.mod.SFrame.FindFRE(elfPC)
		if err != nil {
			t.Fatal(err)
		}
		if rows[i], err = fr.mod.SFrame.Rules(&fn, &fre); err != nil {
			t.Fatal(err)
		}
		r := &rows[i]
		if r.RAUndefined {
			if i != n-1 {
				t.Fatalf("frame %d: RA undefined before the last frame", i)
			}
			break
		}
		switch r.CFA.Base {
		case abiFP:
			if r.CFA.Kind == sframe.RuleDeref { // DRAP: CFA saved at FP+off
				cfa[i] = sp[i] + 0x200
				fpv[i], fpForced[i] = sp[i]+0x100, true
				p.put(fpv[i]+uint64(r.CFA.Offset), cfa[i])
				break
			}
			cfa[i] = sp[i] + 0x200
			fpv[i], fpForced[i] = cfa[i]-uint64(r.CFA.Offset), true
		case abiSP:
			cfa[i] = sp[i] + uint64(r.CFA.Offset)
		default: // another register: only in a top frame
			if ctx[i] == nil {
				t.Fatalf("frame %d: CFA based on r%d outside a top frame", i, r.CFA.Base)
			}
			cfa[i] = sp[i] + 0x200
			ctx[i].Set(r.CFA.Base, cfa[i]-uint64(r.CFA.Offset))
		}
		sp[i+1] = cfa[i] + spOff
	}
	// Frame pointers, outermost first: a frame that does not save the
	// FP leaves its caller's value in place.
	for i := n - 1; i >= 0; i-- {
		if frames[i].signal {
			fpv[i] = 0x5a5a0000 + uint64(i)*0x10
			continue
		}
		saves := rows[i].FP.Kind == sframe.RuleDeref || rows[i].FP.Kind == sframe.RuleValue
		switch {
		case fpForced[i]:
			if !saves && i+1 < n && !frames[i+1].signal && ctx[i+1] == nil && fpv[i+1] != fpv[i] {
				t.Fatalf("frame %d: FP-based CFA, FP not saved, caller needs another FP", i)
			}
		case !saves && i+1 < n && !frames[i+1].signal:
			fpv[i] = fpv[i+1]
		default:
			fpv[i] = 0x5a5a0000 + uint64(i)*0x10
		}
	}
	// Return addresses and saved frame pointers.
	var out []want
	for i := 0; i < n; i++ {
		fr := &frames[i]
		w := want{pc: fr.pc, sp: sp[i], cfa: cfa[i], method: MethodSFrame, signal: fr.signal}
		if ctx[i] != nil {
			ctx[i].Set(p.arch.PC(), fr.pc)
			ctx[i].Set(abiSP, sp[i])
			if _, ok := ctx[i].Get(abiFP); !ok {
				ctx[i].Set(abiFP, fpv[i])
			}
		}
		if fr.signal {
			w.method = MethodSignal
			out = append(out, w)
			continue
		}
		r := &rows[i]
		if r.RAUndefined {
			w.cfa = 0
			out = append(out, w)
			break
		}
		var ra uint64
		if i+1 < n {
			ra = frames[i+1].pc
		}
		if r.RASigned && ra != 0 {
			ra |= p.pac
			p.pacUsed = true
		}
		if p.arch == arch.AMD64 && (r.RA.Kind == sframe.RuleNotSaved || r.RA.Kind == sframe.RuleUnspecified) {
			p.put(cfa[i]-8, ra) // an RA padding word: the fixed place
		} else {
			p.plantRule(r.RA, p.arch.RA(), cfa[i], ctx[i], fpv[i], ra, i, "RA") // the link register
		}
		if r.FP.Kind != sframe.RuleUnspecified && r.FP.Kind != sframe.RuleNotSaved {
			p.plantRule(r.FP, abiFP, cfa[i], ctx[i], fpv[i], fpv[i+1], i, "FP")
		}
		out = append(out, w)
	}
	// Signal contexts.
	for i := 1; i <= n; i++ {
		if ctx[i] == nil || !frames[i-1].signal {
			continue
		}
		p.putSigContext(sp[i-1], ctx[i])
	}
	return *ctx[0], out
}

// plantRule stores v where rule r of frame i says the caller's value is.
// fp is the frame's own FP value.
func (p *planter) plantRule(r sframe.Rule, inReg arch.Reg, cfa uint64, ctx *arch.Regs, fp, v uint64, i int, what string) {
	t := p.t
	t.Helper()
	switch {
	case r.Kind == sframe.RuleDeref && r.Base == sframe.RegCFA:
		p.put(cfa+uint64(r.Offset), v)
	case r.Kind == sframe.RuleDeref && r.Base == p.arch.FP():
		p.put(fp+uint64(r.Offset), v)
	case r.Kind == sframe.RuleUnspecified || r.Kind == sframe.RuleNotSaved:
		if ctx == nil {
			t.Fatalf("frame %d: %s in a register outside a top frame", i, what)
		}
		ctx.Set(inReg, v)
	case r.Kind == sframe.RuleValue && r.Base != sframe.RegCFA && r.Offset == 0:
		if ctx == nil {
			t.Fatalf("frame %d: %s in r%d outside a top frame", i, what, r.Base)
		}
		ctx.Set(r.Base, v)
	default:
		t.Fatalf("frame %d: cannot plant %s rule %+v", i, what, r)
	}
}

// putSigContext writes the registers a signal handler's return restores,
// as the kernel lays them out (see stepSignal).
func (p *planter) putSigContext(sp uint64, r *arch.Regs) {
	switch p.arch {
	case arch.ARM64:
		for i := 0; i < 33; i++ {
			v, ok := r.Get(arch.Reg(i))
			if !ok {
				v = 0xdead0000 + uint64(i)
			}
			p.put(sp+arm64RegsOff+uint64(8*i), v)
		}
	case arch.AMD64:
		for i, d := range amd64Gregs {
			v, ok := r.Get(d)
			if !ok {
				v = 0xdead0000 + uint64(i)
			}
			p.put(sp+amd64GregsOff+uint64(8*i), v)
		}
	default:
		p.t.Fatalf("no signal context for %s", p.arch)
	}
}

// runSynth plants frames and checks the unwinder finds exactly them and
// stops with wantStop.
func runSynth(t *testing.T, a arch.Arch, mods []*Module, frames []synthFrame, code *FlatMemory, wantStop Stop) []Frame {
	t.Helper()
	p := &planter{t: t, arch: a, order: binary.LittleEndian, lo: 0x7ff000000000, stack: make([]byte, 512<<10), pac: 0x002b << 48}
	if a == arch.S390X {
		p.order = binary.BigEndian
	}
	regs, wants := p.plant(frames, p.lo+0x1000)
	var next arch.Memory
	if code != nil {
		next = code
	}
	mem := &FlatMemory{Addr: p.lo, Data: p.stack, Next: next}
	u, err := New(a, mods)
	if err != nil {
		t.Fatal(err)
	}
	got, stop, err := unwindBothWays(t, u, &regs, mem)
	if stop != wantStop {
		t.Errorf("stop = %v (%v), want %v", stop, err, wantStop)
	}
	checkStackCopies(t, u, &regs, p.lo, p.stack, next, got, stop)
	if len(got) != len(wants) {
		t.Errorf("%d frames, want %d", len(got), len(wants))
	}
	for i := 0; i < len(got) && i < len(wants); i++ {
		g, w := &got[i], &wants[i]
		if g.PC != w.pc || g.SP != w.sp || g.Signal != w.signal || (w.cfa != 0 && g.CFA != w.cfa) || (i < len(wants)-1 && g.Method != w.method) {
			t.Errorf("frame %d: pc %#x sp %#x cfa %#x %v signal=%v; want pc %#x sp %#x cfa %#x %v signal=%v",
				i, g.PC, g.SP, g.CFA, g.Method, g.Signal, w.pc, w.sp, w.cfa, w.method, w.signal)
		}
	}
	return got
}

const (
	exeBias = 0x555500000000
	libBias = 0x7f1200000000
)

// TestSynthAArch64 walks a chain through basic-pacb.elf (return
// addresses signed with the B key, PAC bits planted in their top bits)
// and edge-aarch64.o, starting in a function's first instructions (RA
// still in x30, signed) and ending at an "RA undefined" row.
func TestSynthAArch64(t *testing.T) {
	exe := loadCorpusModule(t, "aarch64/v3/basic-pacb.elf", exeBias)
	lib := loadCorpusModule(t, "aarch64/v3/edge-aarch64.o", libBias)
	mods := []*Module{exe, lib}
	frames := []synthFrame{
		{mod: exe, pc: exeBias + 0x7c4},    // after paciasp: sp+0, RA in x30, signed
		{mod: exe, pc: exeBias + 0x9c0},    // sp+16, c-16, c-8[s]
		{mod: exe, pc: exeBias + 0xa20},    // fp+32, c-32, c-24[s]
		{mod: exe, pc: exeBias + 0xa90},    // sp+640, c-640, c-632[s]
		{mod: exe, pc: exeBias + 0xb18},    // sp+70032
		{mod: lib, pc: libBias + 0x5c + 4}, // sp+66576, not signed
		{mod: lib, pc: libBias + 0x0c},     // fp+32 (edge func 0)
		{mod: lib, pc: libBias + 0x71},     // RA undefined (looked up at 0x70)
	}
	p := runSynth(t, arch.ARM64, mods, frames, nil, StopEnd)
	if len(p) > 1 && p[1].PC>>48 != 0 {
		t.Errorf("signed return address not stripped: %#x", p[1].PC)
	}
}

// TestSynthAArch64EndsAtZero ends the chain with a planted RA of 0.
func TestSynthAArch64EndsAtZero(t *testing.T) {
	exe := loadCorpusModule(t, "aarch64/v3/basic-O2.elf", exeBias)
	frames := []synthFrame{
		{mod: exe, pc: exeBias + 0x9b0},     // entry: sp+0, RA in x30
		{mod: exe, pc: exeBias + 0x9b4 + 8}, // sp+16, c-16, c-8
		{mod: exe, pc: exeBias + 0xa10},     // fp+32
	}
	runSynth(t, arch.ARM64, []*Module{exe}, frames, nil, StopEnd)
}

// TestSynthS390X walks s390x code: a flexible leaf function keeping the
// RA and the FP in floating-point registers (edge-s390x.o, function 1),
// functions with the RA and FP saved in the register save area, an
// FP-based CFA, and the caller's SP at CFA-160, ending at "RA undefined".
func TestSynthS390X(t *testing.T) {
	exe := loadCorpusModule(t, "s390x/v3/basic-O2.elf", exeBias)
	edge := loadCorpusModule(t, "s390x/v3/edge-s390x.o", libBias)
	frames := []synthFrame{
		{mod: edge, pc: libBias + 0x22},     // flex: sp+160, FP in r17, RA in r16
		{mod: exe, pc: exeBias + 0x7a0},     // sp+320, c-72, c-48
		{mod: exe, pc: exeBias + 0x980},     // fp+320
		{mod: exe, pc: exeBias + 0xac0},     // sp+70320
		{mod: edge, pc: libBias + 0x3c},     // fp+160 (edge func 2)
		{mod: edge, pc: libBias + 0x0a + 2}, // sp+320 (edge func 0)
		{mod: edge, pc: libBias + 0x4c},     // RA undefined
	}
	runSynth(t, arch.S390X, []*Module{exe, edge}, frames, nil, StopEnd)
}

// TestSynthS390XLeaf starts in a function's first instruction, with the
// return address still in r14.
func TestSynthS390XLeaf(t *testing.T) {
	exe := loadCorpusModule(t, "s390x/v3/basic-O2.elf", exeBias)
	edge := loadCorpusModule(t, "s390x/v3/edge-s390x.o", libBias)
	frames := []synthFrame{
		{mod: exe, pc: exeBias + 0x908}, // sp+160, RA in r14
		{mod: exe, pc: exeBias + 0x930}, // sp+320
		{mod: edge, pc: libBias + 0x4c}, // RA undefined
	}
	runSynth(t, arch.S390X, []*Module{exe, edge}, frames, nil, StopEnd)
}

// TestSynthS390XFlexNotTop: a flexible row based on a floating-point
// register is not trusted in a caller frame, where that register no longer
// holds the callee's value: the walk stops there instead of inventing a
// frame.
func TestSynthS390XFlexNotTop(t *testing.T) {
	exe := loadCorpusModule(t, "s390x/v3/basic-O2.elf", exeBias)
	edge := loadCorpusModule(t, "s390x/v3/edge-s390x.o", libBias)
	p := &planter{t: t, arch: arch.S390X, order: binary.BigEndian, lo: 0x7ff000000000, stack: make([]byte, 64<<10)}
	// Frame 0 in exe function 2 (sp+320, RA at c-48) returning into the
	// flexible function's body.
	regs, _ := p.plant([]synthFrame{{mod: exe, pc: exeBias + 0x930}, {mod: exe, pc: exeBias + 0x930}}, p.lo+0x1000)
	// Redirect the RA to edge function 1 at 0x22 (RA in r16 there).
	cfa := regs.SP() + 320
	p.put(cfa-48, libBias+0x22+1)
	regs.Set(16, 0x1234) // a stale value the unwinder must not use
	u, err := New(arch.S390X, []*Module{exe, edge})
	if err != nil {
		t.Fatal(err)
	}
	got, stop, _ := unwindBothWays(t, u, &regs, &FlatMemory{Addr: p.lo, Data: p.stack})
	if stop != StopNoRule || len(got) != 2 || got[1].PC != libBias+0x23 {
		t.Fatalf("stop %v after %d frames (%+v), want StopNoRule after 2", stop, len(got), got)
	}
}

// trampModule makes a one-function module around a signal trampoline at
// runtime address tramp: an SFrame v3 signal FDE starting one instruction
// before it (as the kernel's and glibc's unwind info do, so that a lookup
// at the return address minus 1 finds it), with one row or none.
func trampModule(t *testing.T, abi sframe.ABI, tramp uint64, rows bool) *Module {
	t.Helper()
	const start, secAddr = 0xffc, 0x2000
	fn := sframe.EncFunc{Start: start, Size: 16, Signal: true}
	if rows {
		sp := abi.Arch().SP()
		fn.Rows = []sframe.EncRow{{Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sp}}}}
	}
	data, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: abi, Addr: secAddr}, []sframe.EncFunc{fn})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sframe.Parse(data, secAddr)
	if err != nil {
		t.Fatal(err)
	}
	bias := tramp - 0x1000
	return &Module{Name: "[vdso]", Start: bias + start, End: bias + start + 16, Bias: bias, SFrame: s}
}

// testSignalAArch64 plants a stack through a signal trampoline in mod:
// the handler, the trampoline, then the interrupted function at its very
// first instruction (RA still in x30, which only the signal context
// holds; found only if the PC is looked up exactly), and its callers.
func testSignalAArch64(t *testing.T, tramp uint64, tmod *Module, code *FlatMemory) {
	exe := loadCorpusModule(t, "aarch64/v3/basic-pacb.elf", exeBias)
	edge := loadCorpusModule(t, "aarch64/v3/edge-aarch64.o", libBias)
	frames := []synthFrame{
		{mod: exe, pc: exeBias + 0x9c0},      // handler: sp+16, c-16, c-8[s]
		{mod: tmod, pc: tramp, signal: true}, // __kernel_rt_sigreturn
		{mod: exe, pc: exeBias + 0x7c0},      // interrupted at entry: sp+0, RA in x30
		{mod: exe, pc: exeBias + 0xa90},      // sp+640, c-640, c-632[s]
		{mod: edge, pc: libBias + 0x71},      // RA undefined
	}
	got := runSynth(t, arch.ARM64, []*Module{exe, edge, tmod}, frames, code, StopEnd)
	if len(got) == len(frames) && (!got[1].Exact || !got[2].Exact || got[3].Exact) {
		t.Errorf("exactness: trampoline %v, interrupted %v, its caller %v; want true true false", got[1].Exact, got[2].Exact, got[3].Exact)
	}
}

// TestSynthSignalAArch64SFrame: the trampoline has an SFrame v3 signal FDE.
func TestSynthSignalAArch64SFrame(t *testing.T) {
	const tramp = 0x7fff12341000
	testSignalAArch64(t, tramp, trampModule(t, sframe.ABIAArch64LE, tramp, true), nil)
}

// TestSynthSignalAArch64NoRows: a signal FDE without rows.
func TestSynthSignalAArch64NoRows(t *testing.T) {
	const tramp = 0x7fff12341000
	testSignalAArch64(t, tramp, trampModule(t, sframe.ABIAArch64LE, tramp, false), nil)
}

// TestSynthSignalAArch64Code: no unwind information at all; the
// trampoline is recognized by its code (mov x8, #139; svc #0).
func TestSynthSignalAArch64Code(t *testing.T) {
	const tramp = 0x7fff12341000
	mod := &Module{Name: "[vdso]", Start: tramp - 0x1000, End: tramp + 0x1000, Bias: tramp - 0x1000}
	code := &FlatMemory{Addr: tramp, Data: append([]byte(nil), arm64Sigreturn...)}
	testSignalAArch64(t, tramp, mod, code)
}

// TestSynthAMD64 walks x86-64 rows the live tests do not reach: a PLT
// entry (PC-mask FDE), a DRAP frame (flexible FDE: CFA = *(rbp-8), FP =
// *rbp, RA at its fixed place), the corpus's SFrame v3 signal FDE, a
// flexible row keeping the RA in r11 (trusted in the frame a signal
// interrupted, whose registers are all known) and a large frame.
func TestSynthAMD64(t *testing.T) {
	exe := loadCorpusModule(t, "x86_64/v3/basic-O2.elf", exeBias)
	edge := loadCorpusModule(t, "x86_64/v3/edge-x86_64.o", libBias)
	frames := []synthFrame{
		{mod: exe, pc: exeBias + 0x1030 + 2*16 + 0xc}, // PLT entry 2 at +0xc: sp+16
		{mod: edge, pc: libBias + 0x70},               // DRAP: (fp-8), (fp+0), U
		{mod: edge, pc: libBias + 0x20},               // fp+16, c-16
		{mod: edge, pc: libBias + 0x11, signal: true}, // signal FDE (attr "S")
		{mod: edge, pc: libBias + 0x82},               // flex: sp+0, RA in r11
		{mod: edge, pc: libBias + 0x3c},               // sp+40016
		{mod: edge, pc: libBias + 0x1},                // RA undefined
	}
	got := runSynth(t, arch.AMD64, []*Module{exe, edge}, frames, nil, StopEnd)
	if len(got) > 4 && !got[4].Exact {
		t.Errorf("frame after the signal frame not exact")
	}
}

// TestSynthAMD64FlexNotTop: the same flexible row (RA in r11) in a caller
// frame stops the walk.
func TestSynthAMD64FlexNotTop(t *testing.T) {
	edge := loadCorpusModule(t, "x86_64/v3/edge-x86_64.o", libBias)
	p := &planter{t: t, arch: arch.AMD64, order: binary.LittleEndian, lo: 0x7ff000000000, stack: make([]byte, 64<<10)}
	regs, _ := p.plant([]synthFrame{{mod: edge, pc: libBias + 0x2c}, {mod: edge, pc: libBias + 0x1}}, p.lo+0x1000)
	// Frame 0 (sp+16, RA at CFA-8) returns into edge function 6 at 0x82
	// (RA in r11).
	p.put(regs.SP()+8, libBias+0x83)
	regs.Set(11, libBias+0x1) // must not be used
	u, err := New(arch.AMD64, []*Module{edge})
	if err != nil {
		t.Fatal(err)
	}
	got, stop, _ := unwindBothWays(t, u, &regs, &FlatMemory{Addr: p.lo, Data: p.stack})
	if stop != StopNoRule || len(got) != 2 {
		t.Fatalf("stop %v after %d frames, want StopNoRule after 2", stop, len(got))
	}
}

// TestAddRemoveModule builds an Unwinder's modules one at a time and
// takes them away again, walking a planted x86-64 stack (a PLT entry of
// one module called from another) with one Context throughout: each walk
// must use exactly the modules present.
func TestAddRemoveModule(t *testing.T) {
	exe := loadCorpusModule(t, "x86_64/v3/basic-O2.elf", exeBias)
	edge := loadCorpusModule(t, "x86_64/v3/edge-x86_64.o", libBias)
	p := &planter{t: t, arch: arch.AMD64, order: binary.LittleEndian, lo: 0x7ff000000000, stack: make([]byte, 64<<10)}
	regs, wants := p.plant([]synthFrame{
		{mod: exe, pc: exeBias + 0x1030 + 2*16 + 0xc}, // PLT entry 2 at +0xc: sp+16
		{mod: edge, pc: libBias + 0x20},               // fp+16, c-16
		{mod: edge, pc: libBias + 0x1},                // RA undefined
	}, p.lo+0x1000)
	mem := &FlatMemory{Addr: p.lo, Data: p.stack}
	ctx := new(Context)
	all, err := New(arch.AMD64, []*Module{edge, exe})
	if err != nil {
		t.Fatal(err)
	}
	full, stop, err := all.Unwind(ctx, &regs, mem, nil)
	if stop != StopEnd || len(full) != len(wants) {
		t.Fatalf("all modules: %d frames, %v %v; want %d", len(full), stop, err, len(wants))
	}
	u, err := New(arch.AMD64, nil)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(what string, wantMods ...*Module) {
		t.Helper()
		got, gstop, err := u.Unwind(ctx, &regs, mem, nil)
		if len(wantMods) == len(full) {
			if gstop != StopEnd || len(got) != len(full) {
				t.Fatalf("%s: %d frames, %v %v; want %d", what, len(got), gstop, err, len(full))
			}
		} else if gstop != StopNoModule || len(got) != len(wantMods)+1 || got[len(got)-1].Module != nil {
			t.Fatalf("%s: %d frames, %v %v; want %d and StopNoModule", what, len(got), gstop, err, len(wantMods)+1)
		}
		for i, m := range wantMods {
			g := got[i]
			if g.Module != m {
				t.Fatalf("%s: frame %d in %v, want %s", what, i, g.Module, m.Name)
			}
			g.Module = full[i].Module
			if g != full[i] {
				t.Fatalf("%s: frame %d is %+v, want %+v", what, i, got[i], full[i])
			}
		}
	}
	walk("no module")
	u.AddModule(nil)
	u.AddModule(edge)
	walk("edge only") // frame 0 is in exe
	u.AddModule(exe)
	var mods []*Module
	for _, in := range u.mods.Load().All() {
		mods = append(mods, (*in).m)
	}
	if len(mods) != 2 || mods[0] != exe || mods[1] != edge {
		t.Fatalf("Modules: %v", mods)
	}
	walk("both", exe, edge, edge)
	// A module added at the same start as another hides it.
	shadow := *edge
	shadow.Name = "shadow"
	u.AddModule(&shadow)
	if m := moduleAt(u, libBias+0x20); m != &shadow {
		t.Fatalf("Module after adding a shadow: %v", m)
	}
	walk("shadowed", exe, &shadow, &shadow)
	if !u.RemoveModule(&shadow) || u.RemoveModule(&shadow) || u.RemoveModule(nil) {
		t.Fatal("RemoveModule: removed the shadow twice, or nil")
	}
	walk("shadow removed", exe, edge, edge)
	u.RemoveModule(exe)
	walk("exe removed")
	if m := moduleAt(u, exeBias+0x1030); m != nil {
		t.Fatalf("Module of a removed module: %v", m)
	}
}

// moduleAt returns u's module containing the runtime address pc, or nil.
func moduleAt(u *Unwinder, pc uint64) *Module {
	if in := findModule(u.mods.Load(), pc); in != nil {
		return in.m
	}
	return nil
}

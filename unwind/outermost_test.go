//go:build linux && amd64

package unwind

import (
	"debug/elf"
	"encoding/binary"
	"os/exec"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// funcSyms returns the function symbols of f by name (".abi0" kept).
func funcSyms(t *testing.T, f *elf.File) map[string]elf.Symbol {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]elf.Symbol{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			m[s.Name] = s
		}
	}
	return m
}

// TestGoOutermost walks stacks of a Go program, goprog, from a
// function entered from runtime.goexit (as every goroutine's first
// function is) and from runtime.systemstack (a function it runs on the
// scheduler's stack): each walk must end there, at the outermost frame,
// though the Go linker's CFI gives both an ordinary caller (the next word
// of the stack, here the address of a function, as garbage often looks),
// by CFI and by SFrame compiled from it, the fast path giving what the
// general one gives, without allocating.
func TestGoOutermost(t *testing.T) {
	exe := testprog.BuildGo(t, "../internal/testprog/testdata/goprog")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms := funcSyms(t, f)
	fn := func(name string) elf.Symbol {
		s, ok := syms[name]
		if !ok {
			t.Fatalf("%s: no symbol %s", exe, name)
		}
		return s
	}
	goexit, sysstack, callee := fn("runtime.goexit.abi0"), fn("runtime.systemstack.abi0"), fn("runtime.gcStart")
	inner := fn("main.main") // the walks' first frame, at its entry
	tabs := LoadTablesWith(f, LoadOptions{SFrameFromCFI: true})
	if tabs.CFI == nil || tabs.SFrame == nil {
		t.Fatalf("%s: tables %v", exe, tabs.Errs)
	}
	for _, s := range []elf.Symbol{goexit, sysstack, fn("runtime.mstart.abi0"), fn("runtime.mcall"), fn("runtime.morestack.abi0")} {
		if !tabs.outer.has(s.Value) || !tabs.outer.has(s.Value+s.Size-1) || tabs.outer.has(s.Value+s.Size) {
			t.Errorf("%s [%#x, %#x): not outermost, or more than it", s.Name, s.Value, s.Value+s.Size)
		}
	}
	if tabs.outer.has(inner.Value) || tabs.outer.has(callee.Value) {
		t.Errorf("main.main or runtime.gcStart outermost: %v", tabs.outer)
	}
	const sp = 0x7ffd00001000
	for _, c := range []struct {
		name string
		ra   uint64 // main.main's return address
	}{
		// newproc sets a goroutine up as if goexit had called its
		// function: the return address is goexit+1.
		{"goexit", goexit.Value + 1},
		{"systemstack", sysstack.Value + sysstack.Size/2},
	} {
		var stack [64]byte
		binary.LittleEndian.PutUint64(stack[0:], c.ra)
		for i := 8; i < len(stack); i += 8 {
			binary.LittleEndian.PutUint64(stack[i:], callee.Value+16)
		}
		for _, method := range []Method{MethodCFI, MethodSFrame} {
			m := &Module{Name: exe, Start: 0x400000, End: 1 << 40, CFI: tabs.cfi, outer: tabs.outer}
			if method == MethodSFrame {
				m.SFrame, m.sfx = tabs.SFrame, tabs.sfx
			}
			u, err := New(arch.AMD64, []*Module{m})
			if err != nil {
				t.Fatal(err)
			}
			regs := arch.Regs{Arch: arch.AMD64}
			regs.Set(arch.AMD64RIP, inner.Value)
			regs.Set(arch.AMD64RSP, sp)
			mem := &StackMemory{SP: sp, Stack: stack[:]}
			frames, stop, err := unwindBothWays(t, u, &regs, mem)
			if len(frames) != 2 || stop != StopEnd || err != nil || frames[1].PC != c.ra || frames[0].Method != method {
				t.Errorf("%s, %v: %d frames %+v, %v %v; want main.main by %v, then %s, the end", c.name, method, len(frames), frames, stop, err, method, c.name)
			}
			ctx := new(Context)
			if n := testing.AllocsPerRun(20, func() { u.Unwind(ctx, &regs, mem, frames[:0]) }); n != 0 {
				t.Errorf("%s, %v: %v allocations a walk", c.name, method, n)
			}
		}
	}
}

// TestEntryOutermost walks, with the CFI of this machine's dynamic
// linker, from the first instruction of _dl_start, which ld.so's entry
// point, _start, calls first: _start has no CFI, and no frame pointer (0,
// as the kernel starts a program): the walk ends there, at the outermost
// frame, not for want of a rule.
func TestEntryOutermost(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	ef, err := elf.Open(sh)
	if err != nil {
		t.Fatal(err)
	}
	interp := ""
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	ef.Close()
	if interp == "" {
		t.Skipf("%s: no dynamic linker", sh)
	}
	f, err := elf.Open(interp)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tabs := LoadTables(f)
	if tabs.CFI == nil {
		t.Fatalf("%s: no CFI: %v", interp, tabs.Errs)
	}
	// _start: mov %rsp,%rdi; call _dl_start (glibc's RTLD_START).
	var code [16]byte
	for _, s := range f.Sections {
		if f.Entry >= s.Addr && f.Entry-s.Addr+uint64(len(code)) <= s.Size && s.Type == elf.SHT_PROGBITS {
			if _, err := s.ReadAt(code[:], int64(f.Entry-s.Addr)); err != nil {
				t.Fatal(err)
			}
		}
	}
	call := strings.IndexByte(string(code[:11]), 0xe8)
	if call < 0 {
		t.Skipf("%s: no call at the entry point: % x", interp, code)
	}
	ra := f.Entry + uint64(call) + 5
	dlStart := ra + uint64(int64(int32(binary.LittleEndian.Uint32(code[call+1:]))))
	if !tabs.outer.has(f.Entry) || !tabs.outer.has(ra) {
		t.Errorf("%s: entry %#x, return address %#x: not outermost (%v)", interp, f.Entry, ra, tabs.outer)
	}
	if tabs.outer.has(dlStart) {
		t.Errorf("%s: _dl_start %#x outermost", interp, dlStart)
	}
	const bias = 0x7f0000000000
	const sp = 0x7ffd00001000
	var stack [16]byte
	binary.LittleEndian.PutUint64(stack[:], bias+ra)
	m := &Module{Name: interp, Start: bias, End: bias + 1<<30, Bias: bias, CFI: tabs.cfi, outer: tabs.outer}
	u, err := New(arch.AMD64, []*Module{m})
	if err != nil {
		t.Fatal(err)
	}
	regs := arch.Regs{Arch: arch.AMD64}
	regs.Set(arch.AMD64RIP, bias+dlStart)
	regs.Set(arch.AMD64RSP, sp)
	regs.Set(arch.AMD64RBP, 0)
	frames, stop, err := unwindBothWays(t, u, &regs, &StackMemory{SP: sp, Stack: stack[:]})
	if len(frames) != 2 || stop != StopEnd || err != nil || frames[1].PC != bias+ra {
		t.Errorf("%d frames %+v, %v %v; want _dl_start, then _start, the end", len(frames), frames, stop, err)
	}
}

//go:build linux && amd64

package unwind

import (
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

// loadEpilogue builds testdata/epilogue.s and returns the library, its
// tables and its symbols' addresses.
func loadEpilogue(t *testing.T) (string, *Tables, map[string]uint64) {
	t.Helper()
	so := testprog.Build(t, "testdata/epilogue.s", "-shared", "-nostdlib", "-Wa,--gsframe")
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tabs := LoadTables(f)
	if tabs.SFrame == nil || tabs.CFI == nil {
		t.Fatalf("tables: %v", tabs.Errs)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
	}
	return so, tabs, addr
}

// epilogueUnwinder returns an unwinder of the library so loaded at bias,
// with its SFrame or its CFI only, as method says.
func epilogueUnwinder(t *testing.T, so string, tabs *Tables, bias uint64, method Method) *Unwinder {
	t.Helper()
	m := &Module{Name: so, Start: bias, End: bias + 0x2000, Bias: bias}
	if method == MethodSFrame {
		m.SFrame = tabs.SFrame
	} else {
		m.CFI = &CFITable{T: tabs.CFI}
	}
	u, err := New(arch.AMD64, []*Module{m})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestEpilogueSavedBelowSP stops on the return instruction of functions
// whose rules, after the epilogue's pops, still say where the popped
// registers were saved (glibc's CFI does, and gas's SFrame after it): 8
// bytes below the stack pointer, outside a sample's stack copy. The walk
// must not need those registers to find the caller: the step succeeds
// (the registers, popped already, keep their values:
// TestEpiloguePoppedFP).
func TestEpilogueSavedBelowSP(t *testing.T) {
	so, tabs, addr := loadEpilogue(t)
	const bias = 0x7f0000000000
	const sp = 0x7ffd00001000
	const caller = 0x400123 // in no module: the walk stops there
	var stack [16]byte
	binary.LittleEndian.PutUint64(stack[:], caller)
	for _, c := range []struct {
		method Method
		fn     string
	}{
		{MethodCFI, "cfi_epilogue_ret"},
		{MethodCFI, "fp_epilogue_ret"},
		{MethodSFrame, "fp_epilogue_ret"},
	} {
		u := epilogueUnwinder(t, so, tabs, bias, c.method)
		regs := arch.Regs{Arch: arch.AMD64}
		regs.Set(arch.AMD64RIP, bias+addr[c.fn])
		regs.Set(arch.AMD64RSP, sp)
		regs.Set(arch.AMD64RBP, 0x1111)
		regs.Set(3, 0x2222) // rbx
		mem := &StackMemory{SP: sp, Stack: stack[:]}
		frames, stop, err := u.Unwind(nil, &regs, mem, nil)
		if len(frames) != 2 || stop != StopNoModule || frames[0].Method != c.method || frames[1].PC != caller {
			t.Errorf("%v %s: %d frames, %v %v; want 2, the caller %#x found by %v, then %v", c.method, c.fn, len(frames), stop, err, uint64(caller), c.method, StopNoModule)
		}
	}
}

// TestEpiloguePoppedFP stops fp_epilogue on its return instruction, after
// its pop %rbp, where its rules still say the caller's rbp is saved at
// CFA-16, below the stack pointer: the caller, fp_caller, finds its CFA
// from rbp. The slot was popped, so rbp holds the caller's value again,
// and the walk must go on through fp_caller to its caller, by CFI and by
// SFrame alike.
func TestEpiloguePoppedFP(t *testing.T) {
	so, tabs, addr := loadEpilogue(t)
	const bias = 0x7f0000000000
	const sp = 0x7ffd00001000
	const rbp = sp + 0x20  // fp_caller's frame record
	const outer = 0x400123 // fp_caller's caller, in no module: the walk stops there
	var stack [0x40]byte
	binary.LittleEndian.PutUint64(stack[0:], bias+addr["fp_caller_ret"]) // fp_epilogue's return address
	binary.LittleEndian.PutUint64(stack[rbp-sp:], 0x3333)                // the outer frame's rbp
	binary.LittleEndian.PutUint64(stack[rbp-sp+8:], outer)
	for _, method := range []Method{MethodCFI, MethodSFrame} {
		u := epilogueUnwinder(t, so, tabs, bias, method)
		regs := arch.Regs{Arch: arch.AMD64}
		regs.Set(arch.AMD64RIP, bias+addr["fp_epilogue_ret"])
		regs.Set(arch.AMD64RSP, sp)
		regs.Set(arch.AMD64RBP, rbp)
		mem := &StackMemory{SP: sp, Stack: stack[:]}
		frames, stop, err := u.Unwind(nil, &regs, mem, nil)
		if len(frames) != 3 || stop != StopNoModule || frames[1].Method != method || frames[1].CFA != rbp+16 || frames[2].PC != outer {
			t.Errorf("%v: %d frames %+v, %v %v; want 3, fp_caller's CFA %#x by %v, then %#x and %v", method, len(frames), frames, stop, err, uint64(rbp+16), method, uint64(outer), StopNoModule)
		}
	}
}

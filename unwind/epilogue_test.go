//go:build linux && amd64

package unwind

import (
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/targets"
)

// TestEpilogueSavedBelowSP stops on the return instruction of functions
// whose rules, after the epilogue's pops, still say where the popped
// registers were saved (glibc's CFI does, and gas's SFrame after it): 8
// bytes below the stack pointer, outside a sample's stack copy. The walk
// must not need those registers to find the caller: the step succeeds
// and the register becomes unknown, as libunwind, which reads saved
// registers only when a rule needs them, has it.
func TestEpilogueSavedBelowSP(t *testing.T) {
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
		m := &Module{Name: so, Start: bias, End: bias + 0x2000, Bias: bias}
		if c.method == MethodSFrame {
			m.SFrame = tabs.SFrame
		} else {
			m.CFI = &CFITable{T: tabs.CFI}
		}
		u, err := New(arch.AMD64, []*Module{m})
		if err != nil {
			t.Fatal(err)
		}
		regs := targets.Regs{Arch: arch.AMD64}
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

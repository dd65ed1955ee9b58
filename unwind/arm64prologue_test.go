package unwind

import (
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// TestARM64CFA checks the frame sizes read from AArch64 prologues, in the
// shapes gcc emits (as objdump shows them in the cross-built test
// programs), including instructions scheduled into the prologue, and the
// ends of the scan: an earlier function's return, a prologue that is not
// one of them, a PC before x29 was set.
func TestARM64CFA(t *testing.T) {
	const (
		nop        = 0xd503201f
		ret        = 0xd65f03c0
		paciasp    = 0xd503233f
		movX29SP   = 0x910003fd
		adrp       = 0x90000001 // adrp x1, ...
		bl         = 0x94000000
		movi       = 0x4f000400 // movi v0.4s, #0
		stpPre48   = 0xa9bd7bfd // stp x29, x30, [sp, #-48]!
		stpPre272  = 0xa9af7bfd // stp x29, x30, [sp, #-272]!
		subSP340   = 0xd10d03ff // sub sp, sp, #0x340
		stpSP0     = 0xa9007bfd // stp x29, x30, [sp]
		subSP64    = 0xd10103ff // sub sp, sp, #64
		stpSP16    = 0xa9017bfd // stp x29, x30, [sp, #16]
		addX29SP16 = 0x910043fd // add x29, sp, #16
		addSP16    = 0x910043ff // add sp, sp, #16
	)
	const fp = 0x7fff0000
	for _, c := range []struct {
		name string
		code []uint32 // from 0x1000; the PC is the address after the last
		want uint64   // CFA - fp, 0 for none
	}{
		{"O0", []uint32{ret, stpPre48, movX29SP, nop, bl}, 48},
		{"O2 scheduled", []uint32{ret, stpPre272, adrp, movi, movX29SP, nop, bl}, 272},
		{"PAC", []uint32{ret, paciasp, stpPre48, movX29SP, bl}, 48},
		{"sub then record", []uint32{ret, subSP340, adrp, movi, stpSP0, movX29SP, nop, bl}, 0x340},
		{"record in the middle", []uint32{ret, subSP64, stpSP16, addX29SP16, bl}, 64 - 16},
		{"earlier function", []uint32{stpPre272, ret, movX29SP, bl}, 0},
		{"SP up", []uint32{ret, addSP16, stpPre48, movX29SP, bl}, 0},
		{"no record", []uint32{ret, nop, nop, bl}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := make([]byte, 4*len(c.code))
			for i, insn := range c.code {
				binary.LittleEndian.PutUint32(data[4*i:], insn)
			}
			u, err := New(arch.ARM64, nil)
			if err != nil {
				t.Fatal(err)
			}
			var w Context
			w.begin(u, &FlatMemory{Addr: 0x1000, Data: data})
			cfa, ok := w.arm64CFA(0x1000+uint64(len(data)), fp)
			if got := cfa - fp; ok != (c.want != 0) || (ok && got != c.want) {
				t.Errorf("CFA fp+%d (ok %v), want fp+%d", int64(got), ok, c.want)
			}
		})
	}
}

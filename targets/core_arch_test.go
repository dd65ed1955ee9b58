package targets

import (
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// TestS390XPrstatus decodes a big-endian s390x NT_PRSTATUS and
// NT_PRFPREG as the kernel lays them out: pr_reg is psw.mask, psw.addr,
// r0-r15, ...; the FPRs follow fpc and its padding, f0-f15, and take the
// ABI's interleaved DWARF numbers (f2 is 17, f1 is 20).
func TestS390XPrstatus(t *testing.T) {
	bo := binary.BigEndian
	desc := make([]byte, prstatusReg+8*s390xNumUser)
	for i := 0; i < s390xNumUser; i++ {
		bo.PutUint64(desc[prstatusReg+8*i:], 0x1000+uint64(i))
	}
	r, err := prstatusRegs(arch.S390X, desc, bo)
	if err != nil {
		t.Fatal(err)
	}
	if r.PC() != 0x1001 || r.Flags != 0x1000 || r.SP() != 0x1000+2+15 || r.R[0] != 0x1002 || r.R[arch.S390XRA] != 0x1000+2+14 {
		t.Errorf("registers %v flags %#x", r, r.Flags)
	}
	if _, ok := r.Get(16); ok {
		t.Error("an FPR is valid without NT_PRFPREG")
	}
	if _, err := prstatusRegs(arch.S390X, desc[:len(desc)-1], bo); err == nil {
		t.Error("short NT_PRSTATUS accepted")
	}
	fp := make([]byte, 8+16*8)
	for i := 0; i < 16; i++ {
		bo.PutUint64(fp[8+8*i:], 0xf00+uint64(i))
	}
	if err := addS390XFPRs(&r, fp, bo); err != nil {
		t.Fatal(err)
	}
	for dwarf, f := range map[arch.Reg]uint64{16: 0, 17: 2, 20: 1, 24: 8, 28: 9, 31: 15} {
		if v, ok := r.Get(dwarf); !ok || v != 0xf00+f {
			t.Errorf("DWARF %d = %#x (%v), want f%d = %#x", dwarf, v, ok, f, 0xf00+f)
		}
	}
}

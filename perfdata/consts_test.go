package perfdata

import (
	"encoding/binary"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

func TestStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{RecordMmap2.String(), "MMAP2"},
		{RecordFinishedRound.String(), "FINISHED_ROUND"},
		{RecordType(999).String(), "RecordType(999)"},
		{(SampleIP | SampleTID | SampleWeightStruct).String(), "IP|TID|WEIGHT_STRUCT"},
		{SampleType(1 << 40).String(), "0x10000000000"},
		{(FormatID | FormatLost).String(), "ID|LOST"},
		{(AttrDisabled | AttrFreq | 3<<15).String(), "disabled|freq|precise_ip=3"},
		{AttrFlags(2 << 15).String(), "precise_ip=2"},
		{FeatBuildID.String(), "BUILD_ID"},
		{FeatPMUCaps.String(), "PMU_CAPS"},
		{TypeSoftware.String(), "software"},
		{ErrTruncated.String(), "truncated"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestDWARFRegister checks the perf-to-DWARF register mapping against the
// psABI numbers an unwinder uses (package targets keeps rip under 16 and
// the AArch64 pc under 32).
func TestDWARFRegister(t *testing.T) {
	x86 := map[int]arch.Reg{PerfRegX86AX: 0, PerfRegX86DX: 1, PerfRegX86CX: 2, PerfRegX86BX: 3,
		PerfRegX86SI: 4, PerfRegX86DI: 5, PerfRegX86BP: 6, PerfRegX86SP: 7, PerfRegX86R8: 8,
		PerfRegX86R15: 15, PerfRegX86IP: 16, PerfRegX86Flags: 49, PerfRegX86ES: 50, PerfRegX86CS: 51,
		PerfRegX86SS: 52, PerfRegX86DS: 53, PerfRegX86FS: 54, PerfRegX86GS: 55}
	for p, d := range x86 {
		if got, ok := DWARFRegister(arch.AMD64, p); !ok || got != d {
			t.Errorf("x86-64 perf %d (%s): DWARF %d, want %d", p, PerfRegisterName(arch.AMD64, p), got, d)
		}
	}
	for _, c := range []struct {
		a arch.Arch
		n int
	}{{arch.AMD64, PerfRegX86XMM0}, {arch.AMD64, -1}, {arch.ARM64, PerfRegARM64PC + 1}, {arch.S390X, 0}} {
		if d, ok := DWARFRegister(c.a, c.n); ok {
			t.Errorf("%s perf register %d mapped to %d", c.a, c.n, d)
		}
	}
	arm := map[int]arch.Reg{0: 0, 28: 28, PerfRegARM64FP: 29, PerfRegARM64LR: 30, PerfRegARM64SP: 31, PerfRegARM64PC: 32, PerfRegARM64VG: 46}
	for p, d := range arm {
		if got, ok := DWARFRegister(arch.ARM64, p); !ok || got != d {
			t.Errorf("AArch64 perf %d: DWARF %d, want %d", p, got, d)
		}
	}
	// A dump of SP, IP and R8 (perf numbers 7, 8, 16), in that order.
	var b []byte
	for _, v := range []uint64{0x7ff0, 0x401000, 8} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	r := Regs{ABI: RegsABI64, Mask: 1<<PerfRegX86SP | 1<<PerfRegX86IP | 1<<PerfRegX86R8, Words: Words{b, binary.LittleEndian}}
	got := map[arch.Reg]uint64{}
	r.DWARFRegs(arch.AMD64, func(d arch.Reg, v uint64) { got[d] = v })
	if len(got) != 3 || got[7] != 0x7ff0 || got[16] != 0x401000 || got[8] != 8 {
		t.Errorf("DWARFRegs: %v", got)
	}
}

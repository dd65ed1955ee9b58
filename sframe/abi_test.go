package sframe_test

import (
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/sframe"
)

// TestABIArch checks the ABI byte against the architecture both ways, and
// the registers default rows are based on (SP- or FP-based CFA), which
// the corpus dumps print as "sp" and "fp".
func TestABIArch(t *testing.T) {
	for _, c := range []struct {
		abi    sframe.ABI
		a      arch.Arch
		be     bool
		sp, fp arch.Reg
	}{
		{sframe.ABIAMD64LE, arch.AMD64, false, 7, 6},
		{sframe.ABIAArch64LE, arch.ARM64, false, 31, 29},
		{sframe.ABIAArch64BE, arch.ARM64, true, 31, 29},
		{sframe.ABIS390XBE, arch.S390X, true, 15, 11},
	} {
		if got := c.abi.Arch(); got != c.a || got.SP() != c.sp || got.FP() != c.fp || c.abi.BigEndian() != c.be {
			t.Errorf("%s: Arch %s (SP %d, FP %d), big-endian %v", c.abi, got, got.SP(), got.FP(), c.abi.BigEndian())
		}
		if back, ok := sframe.ABIFor(c.a, c.be); !ok || back != c.abi {
			t.Errorf("ABIFor(%s, %v) = %s, %v; want %s", c.a, c.be, back, ok, c.abi)
		}
	}
	if a := sframe.ABI(5).Arch(); a != arch.Unknown {
		t.Errorf("ABI 5: %s", a)
	}
	for _, a := range []arch.Arch{arch.Unknown, arch.I386} {
		if abi, ok := sframe.ABIFor(a, false); ok {
			t.Errorf("ABIFor(%s) = %s", a, abi)
		}
	}
}

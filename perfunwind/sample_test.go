package perfunwind

import (
	"slices"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
)

// TestFromCallchain: a Sample reused for a stack walked elsewhere keeps
// nothing of the sample it held before (registers, stack copy, the
// call-graph flags), takes the callchain as it is, and its IP is the
// first user frame's.
func TestFromCallchain(t *testing.T) {
	var s Sample
	s.Regs.Arch, s.Regs.Valid = arch.AMD64, 1
	s.Stack, s.StackSize, s.NoCallGraph, s.IPKernel, s.IP = []byte{1, 2, 3}, 16384, true, true, 0x99
	chain := []uint64{perfdata.ContextKernel, 0xffffffff81000000, perfdata.ContextUser, 0x401000, 0x402000}
	s.FromCallchain(7, 8, 100, 1001001, 2, chain)
	if s.Pid != 7 || s.Tid != 8 || s.Time != 100 || s.Period != 1001001 || s.Event != 2 {
		t.Errorf("identity %d/%d time %d period %d event %d", s.Pid, s.Tid, s.Time, s.Period, s.Event)
	}
	if s.Regs.Arch != arch.Unknown || s.Stack != nil || s.StackSize != 0 || s.NoCallGraph || s.IPKernel {
		t.Errorf("kept the last sample's registers, stack or flags: %+v", s)
	}
	if s.IP != 0x401000 || !slices.Equal(s.Callchain, chain) {
		t.Errorf("IP %#x, callchain %x", s.IP, s.Callchain)
	}
	s.FromCallchain(7, 8, 100, 1, 0, chain[:2])
	if s.IP != 0 {
		t.Errorf("IP %#x for a kernel-only callchain, want 0", s.IP)
	}
}

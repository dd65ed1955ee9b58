package perfevent

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"golang.org/x/sys/unix"
)

func TestAttrFlagsAreTheKernels(t *testing.T) {
	for f, want := range map[perfdata.AttrFlags]uint64{
		perfdata.AttrDisabled: unix.PerfBitDisabled, perfdata.AttrInherit: unix.PerfBitInherit,
		perfdata.AttrExcludeUser: unix.PerfBitExcludeUser, perfdata.AttrExcludeKernel: unix.PerfBitExcludeKernel,
		perfdata.AttrExcludeHV: unix.PerfBitExcludeHv, perfdata.AttrMmap: unix.PerfBitMmap, perfdata.AttrComm: unix.PerfBitComm,
		perfdata.AttrFreq: unix.PerfBitFreq, perfdata.AttrTask: unix.PerfBitTask, perfdata.AttrWatermark: unix.PerfBitWatermark,
		perfdata.AttrSampleIDAll: unix.PerfBitSampleIDAll, perfdata.AttrExcludeCallchainKernel: unix.PerfBitExcludeCallchainKernel,
		perfdata.AttrExcludeCallchainUser: unix.PerfBitExcludeCallchainUser, perfdata.AttrMmap2: unix.PerfBitMmap2,
		perfdata.AttrCommExec: unix.PerfBitCommExec, perfdata.AttrUseClockID: unix.PerfBitUseClockID,
		perfdata.AttrContextSwitch: unix.PerfBitContextSwitch,
	} {
		if cBits(f) != want {
			t.Errorf("flag %v: bit-field word %#x, x/sys/unix says %#x", f, cBits(f), want)
		}
	}
}

// The struct given to the kernel is Attr.Bytes, and package perfdata
// reads in those bytes what x/sys/unix's struct of its fields holds.
func TestAttrBytes(t *testing.T) {
	o := Options{PIDs: []int{1}, Events: []Event{CPUClock, ContextSwitches}, RegsUser: UserRegsMask(arch.Host()),
		StackUser: 4096, Callchain: true, Mmap: true, Comm: true, Task: true, ContextSwitch: true,
		SampleIDAll: true, Monotonic: true, WakeupBytes: 8192}
	for _, a := range buildAttrs(t, o) {
		u := a.unix()
		given := unsafe.Slice((*byte)(unsafe.Pointer(u)), unsafe.Sizeof(*u))
		if !bytes.Equal(a.Bytes(), given[:attrSize]) || !bytes.Equal(given[attrSize:], make([]byte, len(given)-attrSize)) {
			t.Errorf("%s: Bytes\n%x\nthe struct given to the kernel (%d bytes)\n%x", a, a.Bytes(), len(given), given)
		}
		want := unix.PerfEventAttr{Type: uint32(a.Type), Size: a.Size, Config: a.Config, Sample: a.SamplePeriod,
			Sample_type: uint64(a.SampleType), Bits: cBits(a.Flags), Wakeup: a.WakeupEvents,
			Sample_regs_user: a.SampleRegsUser, Sample_stack_user: a.SampleStackUser, Clockid: a.ClockID}
		if *u != want || a.Size != attrSize || a.Name != a.Event.Name || a.SampleStackUser != o.StackUser ||
			a.SampleRegsUser != o.RegsUser || a.WakeupEvents != o.WakeupBytes || a.ClockID != clockMonotonic {
			t.Errorf("%s: perfdata reads %+v (size %d, name %q) in the bytes %+v", a, want, a.Size, a.Name, *u)
		}
	}
}

package perfevent

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAttrFlagsAreTheKernels(t *testing.T) {
	for f, want := range map[AttrFlags]uint64{
		AttrDisabled: unix.PerfBitDisabled, AttrInherit: unix.PerfBitInherit,
		AttrExcludeUser: unix.PerfBitExcludeUser, AttrExcludeKernel: unix.PerfBitExcludeKernel,
		AttrExcludeHV: unix.PerfBitExcludeHv, AttrMmap: unix.PerfBitMmap, AttrComm: unix.PerfBitComm,
		AttrFreq: unix.PerfBitFreq, AttrTask: unix.PerfBitTask, AttrWatermark: unix.PerfBitWatermark,
		AttrSampleIDAll: unix.PerfBitSampleIDAll, AttrExcludeCallchainKernel: unix.PerfBitExcludeCallchainKernel,
		AttrExcludeCallchainUser: unix.PerfBitExcludeCallchainUser, AttrMmap2: unix.PerfBitMmap2,
		AttrCommExec: unix.PerfBitCommExec, AttrUseClockID: unix.PerfBitUseClockID,
		AttrContextSwitch: unix.PerfBitContextSwitch,
	} {
		if f.cBits() != want {
			t.Errorf("flag %#x: bit-field word %#x, x/sys/unix says %#x", uint64(f), f.cBits(), want)
		}
	}
}

// Attr.Bytes is the very struct the kernel is given.
func TestAttrBytes(t *testing.T) {
	o := Options{PIDs: []int{1}, Events: []Event{CPUClock, ContextSwitches}, RegsUser: UserRegsMask(NativeArch()),
		StackUser: 4096, Callchain: true, Mmap: true, Comm: true, Task: true, ContextSwitch: true,
		SampleIDAll: true, Monotonic: true, WakeupBytes: 8192}
	for _, a := range o.buildAttrs() {
		u := a.unix()
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&u)), unsafe.Sizeof(u))
		if len(raw) != attrSize || !bytes.Equal(a.Bytes(), raw) {
			t.Errorf("%s: Bytes\n%x\nthe struct given to the kernel (%d bytes)\n%x", a, a.Bytes(), len(raw), raw)
		}
	}
}

package perfevent

import "fmt"

// The names and values below are the kernel's (include/uapi/linux/
// perf_event.h) and the same as package perfdata's, so that code written
// against one reads the other.

// RecordType is the type field of a record header (PERF_RECORD_*).
type RecordType uint32

// Record types the kernel writes into a ring buffer.
const (
	RecordMmap          RecordType = 1
	RecordLost          RecordType = 2
	RecordComm          RecordType = 3
	RecordExit          RecordType = 4
	RecordThrottle      RecordType = 5
	RecordUnthrottle    RecordType = 6
	RecordFork          RecordType = 7
	RecordRead          RecordType = 8
	RecordSample        RecordType = 9
	RecordMmap2         RecordType = 10
	RecordAux           RecordType = 11
	RecordItraceStart   RecordType = 12
	RecordLostSamples   RecordType = 13
	RecordSwitch        RecordType = 14
	RecordSwitchCPUWide RecordType = 15
	RecordNamespaces    RecordType = 16
	RecordKsymbol       RecordType = 17
	RecordBPFEvent      RecordType = 18
	RecordCgroup        RecordType = 19
	RecordTextPoke      RecordType = 20
	RecordAuxOutputHWID RecordType = 21
)

var recordTypeNames = [...]string{
	RecordMmap: "MMAP", RecordLost: "LOST", RecordComm: "COMM", RecordExit: "EXIT",
	RecordThrottle: "THROTTLE", RecordUnthrottle: "UNTHROTTLE", RecordFork: "FORK",
	RecordRead: "READ", RecordSample: "SAMPLE", RecordMmap2: "MMAP2", RecordAux: "AUX",
	RecordItraceStart: "ITRACE_START", RecordLostSamples: "LOST_SAMPLES",
	RecordSwitch: "SWITCH", RecordSwitchCPUWide: "SWITCH_CPU_WIDE",
	RecordNamespaces: "NAMESPACES", RecordKsymbol: "KSYMBOL", RecordBPFEvent: "BPF_EVENT",
	RecordCgroup: "CGROUP", RecordTextPoke: "TEXT_POKE", RecordAuxOutputHWID: "AUX_OUTPUT_HW_ID",
}

// String returns perf's name without the PERF_RECORD_ prefix ("MMAP2"), or
// "RecordType(N)".
func (t RecordType) String() string {
	if int(t) < len(recordTypeNames) && recordTypeNames[t] != "" {
		return recordTypeNames[t]
	}
	return fmt.Sprintf("RecordType(%d)", uint32(t))
}

// SampleType is an event's sample_type (PERF_SAMPLE_*): the fields of its
// SAMPLE records and, with sample_id_all, of the identity trailing its
// other records.
type SampleType uint64

// Sample type bits.
const (
	SampleIP          SampleType = 1 << 0
	SampleTID         SampleType = 1 << 1
	SampleTime        SampleType = 1 << 2
	SampleAddr        SampleType = 1 << 3
	SampleRead        SampleType = 1 << 4
	SampleCallchain   SampleType = 1 << 5
	SampleID          SampleType = 1 << 6
	SampleCPU         SampleType = 1 << 7
	SamplePeriod      SampleType = 1 << 8
	SampleStreamID    SampleType = 1 << 9
	SampleRaw         SampleType = 1 << 10
	SampleBranchStack SampleType = 1 << 11
	SampleRegsUser    SampleType = 1 << 12
	SampleStackUser   SampleType = 1 << 13
	SampleIdentifier  SampleType = 1 << 16
)

// Misc is the misc field of a record header: the CPU mode in the low three
// bits and flags whose meaning depends on the record type.
type Misc uint16

// Misc bits and CPU modes.
const (
	MiscCPUModeMask Misc = 7
	MiscKernel      Misc = 1
	MiscUser        Misc = 2
	// MiscMmapData (MMAP, MMAP2) marks a mapping that is not executable.
	MiscMmapData Misc = 1 << 13
	// MiscCommExec (COMM) marks a name change caused by exec.
	MiscCommExec Misc = 1 << 13
	// MiscSwitchOut (SWITCH, SWITCH_CPU_WIDE) marks a switch away from the
	// thread; without it the record is a switch in.
	MiscSwitchOut Misc = 1 << 13
	// MiscMmapBuildID (MMAP2) says the record carries a build ID instead of
	// device and inode.
	MiscMmapBuildID Misc = 1 << 14
	// MiscSwitchOutPreempt (SWITCH*) marks a thread preempted while
	// runnable, not one that blocked.
	MiscSwitchOutPreempt Misc = 1 << 14
)

// Register dump ABIs (PERF_SAMPLE_REGS_ABI_*) of a sample's REGS_USER.
const (
	RegsABINone = 0 // no user registers: a kernel thread
	RegsABI32   = 1
	RegsABI64   = 2
)

// Callchain context markers (PERF_CONTEXT_*): entries of a callchain that
// say whether the addresses after them are kernel or user addresses.
const (
	ContextKernel uint64 = 1<<64 - 128
	ContextUser   uint64 = 1<<64 - 512
	// ContextMax is the lowest marker value: callchain entries at or above
	// it are markers, not addresses.
	ContextMax uint64 = 1<<64 - 4095
)

// EventType is perf_event_attr's type (PERF_TYPE_*).
type EventType uint32

// Event types.
const (
	TypeHardware EventType = 0
	TypeSoftware EventType = 1
)

// Hardware and software event numbers (perf_event_attr's config).
const (
	countHWCPUCycles       = 0
	countHWInstructions    = 1
	countSWCPUClock        = 0
	countSWTaskClock       = 1
	countSWContextSwitches = 3
)

// AttrFlags are perf_event_attr's one-bit fields, bit 0 being disabled.
type AttrFlags uint64

// Attribute flags.
const (
	AttrDisabled               AttrFlags = 1 << 0
	AttrInherit                AttrFlags = 1 << 1
	AttrExcludeUser            AttrFlags = 1 << 4
	AttrExcludeKernel          AttrFlags = 1 << 5
	AttrExcludeHV              AttrFlags = 1 << 6
	AttrMmap                   AttrFlags = 1 << 8
	AttrComm                   AttrFlags = 1 << 9
	AttrFreq                   AttrFlags = 1 << 10
	AttrTask                   AttrFlags = 1 << 13
	AttrWatermark              AttrFlags = 1 << 14
	AttrSampleIDAll            AttrFlags = 1 << 18
	AttrExcludeCallchainKernel AttrFlags = 1 << 21
	AttrExcludeCallchainUser   AttrFlags = 1 << 22
	AttrMmap2                  AttrFlags = 1 << 23
	AttrCommExec               AttrFlags = 1 << 24
	AttrUseClockID             AttrFlags = 1 << 25
	AttrContextSwitch          AttrFlags = 1 << 26
)

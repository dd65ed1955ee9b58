package perfdata

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/sframekit/sframekit/internal/enumstr"
)

// RecordType is the type field of a record header (PERF_RECORD_*). Types
// below 64 come from the kernel; 64 and above are written by perf itself.
type RecordType uint32

// Record types the kernel writes.
const (
	RecordMmap           RecordType = 1
	RecordLost           RecordType = 2
	RecordComm           RecordType = 3
	RecordExit           RecordType = 4
	RecordThrottle       RecordType = 5
	RecordUnthrottle     RecordType = 6
	RecordFork           RecordType = 7
	RecordRead           RecordType = 8
	RecordSample         RecordType = 9
	RecordMmap2          RecordType = 10
	RecordAux            RecordType = 11
	RecordItraceStart    RecordType = 12
	RecordLostSamples    RecordType = 13
	RecordSwitch         RecordType = 14
	RecordSwitchCPUWide  RecordType = 15
	RecordNamespaces     RecordType = 16
	RecordKsymbol        RecordType = 17
	RecordBPFEvent       RecordType = 18
	RecordCgroup         RecordType = 19
	RecordTextPoke       RecordType = 20
	RecordAuxOutputHWID  RecordType = 21
	RecordUserTypeStart  RecordType = 64 // first type perf writes itself
	RecordHeaderAttr     RecordType = 64
	RecordHeaderEvent    RecordType = 65 // deprecated event-type record
	RecordTracingData    RecordType = 66
	RecordHeaderBuildID  RecordType = 67
	RecordFinishedRound  RecordType = 68
	RecordIDIndex        RecordType = 69
	RecordAuxtraceInfo   RecordType = 70
	RecordAuxtrace       RecordType = 71
	RecordAuxtraceError  RecordType = 72
	RecordThreadMap      RecordType = 73
	RecordCPUMap         RecordType = 74
	RecordStatConfig     RecordType = 75
	RecordStat           RecordType = 76
	RecordStatRound      RecordType = 77
	RecordEventUpdate    RecordType = 78
	RecordTimeConv       RecordType = 79
	RecordHeaderFeature  RecordType = 80
	RecordCompressed     RecordType = 81
	RecordFinishedInit   RecordType = 82
	RecordCompressed2    RecordType = 83
	recordTypeNamesLimit            = 84
)

var recordTypeNames = [recordTypeNamesLimit]string{
	RecordMmap: "MMAP", RecordLost: "LOST", RecordComm: "COMM", RecordExit: "EXIT",
	RecordThrottle: "THROTTLE", RecordUnthrottle: "UNTHROTTLE", RecordFork: "FORK",
	RecordRead: "READ", RecordSample: "SAMPLE", RecordMmap2: "MMAP2", RecordAux: "AUX",
	RecordItraceStart: "ITRACE_START", RecordLostSamples: "LOST_SAMPLES",
	RecordSwitch: "SWITCH", RecordSwitchCPUWide: "SWITCH_CPU_WIDE",
	RecordNamespaces: "NAMESPACES", RecordKsymbol: "KSYMBOL", RecordBPFEvent: "BPF_EVENT",
	RecordCgroup: "CGROUP", RecordTextPoke: "TEXT_POKE", RecordAuxOutputHWID: "AUX_OUTPUT_HW_ID",
	RecordHeaderAttr: "HEADER_ATTR", RecordHeaderEvent: "HEADER_EVENT_TYPE",
	RecordTracingData: "HEADER_TRACING_DATA", RecordHeaderBuildID: "HEADER_BUILD_ID",
	RecordFinishedRound: "FINISHED_ROUND", RecordIDIndex: "ID_INDEX",
	RecordAuxtraceInfo: "AUXTRACE_INFO", RecordAuxtrace: "AUXTRACE",
	RecordAuxtraceError: "AUXTRACE_ERROR", RecordThreadMap: "THREAD_MAP",
	RecordCPUMap: "CPU_MAP", RecordStatConfig: "STAT_CONFIG", RecordStat: "STAT",
	RecordStatRound: "STAT_ROUND", RecordEventUpdate: "EVENT_UPDATE",
	RecordTimeConv: "TIME_CONV", RecordHeaderFeature: "HEADER_FEATURE",
	RecordCompressed: "COMPRESSED", RecordFinishedInit: "FINISHED_INIT",
	RecordCompressed2: "COMPRESSED2",
}

// String returns perf's name without the PERF_RECORD_ prefix, such as
// "MMAP2", or "RecordType(N)" for a type this package does not know.
func (t RecordType) String() string {
	if t < recordTypeNamesLimit && recordTypeNames[t] != "" {
		return recordTypeNames[t]
	}
	return fmt.Sprintf("RecordType(%d)", uint32(t))
}

// SampleType is the sample_type bit set of an event (PERF_SAMPLE_*): which
// fields a SAMPLE record carries, and, with sample_id_all, which identity
// fields trail the other records.
type SampleType uint64

// Sample type bits.
const (
	SampleIP           SampleType = 1 << 0
	SampleTID          SampleType = 1 << 1
	SampleTime         SampleType = 1 << 2
	SampleAddr         SampleType = 1 << 3
	SampleRead         SampleType = 1 << 4
	SampleCallchain    SampleType = 1 << 5
	SampleID           SampleType = 1 << 6
	SampleCPU          SampleType = 1 << 7
	SamplePeriod       SampleType = 1 << 8
	SampleStreamID     SampleType = 1 << 9
	SampleRaw          SampleType = 1 << 10
	SampleBranchStack  SampleType = 1 << 11
	SampleRegsUser     SampleType = 1 << 12
	SampleStackUser    SampleType = 1 << 13
	SampleWeight       SampleType = 1 << 14
	SampleDataSrc      SampleType = 1 << 15
	SampleIdentifier   SampleType = 1 << 16
	SampleTransaction  SampleType = 1 << 17
	SampleRegsIntr     SampleType = 1 << 18
	SamplePhysAddr     SampleType = 1 << 19
	SampleAux          SampleType = 1 << 20
	SampleCgroup       SampleType = 1 << 21
	SampleDataPageSize SampleType = 1 << 22
	SampleCodePageSize SampleType = 1 << 23
	SampleWeightStruct SampleType = 1 << 24

	// sampleKnown is every bit this package decodes. A SAMPLE of an event
	// with other bits set cannot be laid out and is reported as an error.
	sampleKnown = 1<<25 - 1
)

var sampleTypeNames = [...]string{
	"IP", "TID", "TIME", "ADDR", "READ", "CALLCHAIN", "ID", "CPU", "PERIOD",
	"STREAM_ID", "RAW", "BRANCH_STACK", "REGS_USER", "STACK_USER", "WEIGHT",
	"DATA_SRC", "IDENTIFIER", "TRANSACTION", "REGS_INTR", "PHYS_ADDR", "AUX",
	"CGROUP", "DATA_PAGE_SIZE", "CODE_PAGE_SIZE", "WEIGHT_STRUCT",
}

// String lists the bits as perf report --header-only does: "IP|TID|TIME".
func (t SampleType) String() string { return bitNames(uint64(t), sampleTypeNames[:]) }

// Has reports whether every bit of b is set in t.
func (t SampleType) Has(b SampleType) bool { return t&b == b }

// ReadFormat is the read_format bit set of an event (PERF_FORMAT_*): the
// layout of the counter values in READ records and PERF_SAMPLE_READ.
type ReadFormat uint64

// Read format bits.
const (
	FormatTotalTimeEnabled ReadFormat = 1 << 0
	FormatTotalTimeRunning ReadFormat = 1 << 1
	FormatID               ReadFormat = 1 << 2
	FormatGroup            ReadFormat = 1 << 3
	FormatLost             ReadFormat = 1 << 4
)

var readFormatNames = [...]string{"TOTAL_TIME_ENABLED", "TOTAL_TIME_RUNNING", "ID", "GROUP", "LOST"}

// String lists the bits as perf does: "ID|LOST".
func (f ReadFormat) String() string { return bitNames(uint64(f), readFormatNames[:]) }

// Has reports whether every bit of b is set in f.
func (f ReadFormat) Has(b ReadFormat) bool { return f&b == b }

func bitNames(v uint64, names []string) string {
	if v == 0 {
		return "0"
	}
	var sb strings.Builder
	for v != 0 {
		i := bits.TrailingZeros64(v)
		v &^= 1 << i
		if sb.Len() > 0 {
			sb.WriteByte('|')
		}
		if i < len(names) {
			sb.WriteString(names[i])
		} else {
			fmt.Fprintf(&sb, "0x%x", uint64(1)<<i)
		}
	}
	return sb.String()
}

// AttrFlags is the bit-field word of perf_event_attr (disabled, inherit,
// ..., sample_id_all, ...), normalized so that bit 0 is "disabled" whatever
// the byte order of the file.
type AttrFlags uint64

// Attribute flag bits.
const (
	AttrDisabled               AttrFlags = 1 << 0
	AttrInherit                AttrFlags = 1 << 1
	AttrPinned                 AttrFlags = 1 << 2
	AttrExclusive              AttrFlags = 1 << 3
	AttrExcludeUser            AttrFlags = 1 << 4
	AttrExcludeKernel          AttrFlags = 1 << 5
	AttrExcludeHV              AttrFlags = 1 << 6
	AttrExcludeIdle            AttrFlags = 1 << 7
	AttrMmap                   AttrFlags = 1 << 8
	AttrComm                   AttrFlags = 1 << 9
	AttrFreq                   AttrFlags = 1 << 10
	AttrInheritStat            AttrFlags = 1 << 11
	AttrEnableOnExec           AttrFlags = 1 << 12
	AttrTask                   AttrFlags = 1 << 13
	AttrWatermark              AttrFlags = 1 << 14
	AttrPreciseIPMask          AttrFlags = 3 << 15 // two bits: the skid constraint
	AttrMmapData               AttrFlags = 1 << 17
	AttrSampleIDAll            AttrFlags = 1 << 18
	AttrExcludeHost            AttrFlags = 1 << 19
	AttrExcludeGuest           AttrFlags = 1 << 20
	AttrExcludeCallchainKernel AttrFlags = 1 << 21
	AttrExcludeCallchainUser   AttrFlags = 1 << 22
	AttrMmap2                  AttrFlags = 1 << 23
	AttrCommExec               AttrFlags = 1 << 24
	AttrUseClockID             AttrFlags = 1 << 25
	AttrContextSwitch          AttrFlags = 1 << 26
	AttrWriteBackward          AttrFlags = 1 << 27
	AttrNamespaces             AttrFlags = 1 << 28
	AttrKsymbol                AttrFlags = 1 << 29
	AttrBPFEvent               AttrFlags = 1 << 30
	AttrAuxOutput              AttrFlags = 1 << 31
	AttrCgroup                 AttrFlags = 1 << 32
	AttrTextPoke               AttrFlags = 1 << 33
	AttrBuildID                AttrFlags = 1 << 34
	AttrInheritThread          AttrFlags = 1 << 35
	AttrRemoveOnExec           AttrFlags = 1 << 36
	AttrSigtrap                AttrFlags = 1 << 37
)

var attrFlagNames = [...]string{
	"disabled", "inherit", "pinned", "exclusive", "exclude_user", "exclude_kernel",
	"exclude_hv", "exclude_idle", "mmap", "comm", "freq", "inherit_stat",
	"enable_on_exec", "task", "watermark", "precise_ip", "precise_ip", "mmap_data",
	"sample_id_all", "exclude_host", "exclude_guest", "exclude_callchain_kernel",
	"exclude_callchain_user", "mmap2", "comm_exec", "use_clockid", "context_switch",
	"write_backward", "namespaces", "ksymbol", "bpf_event", "aux_output", "cgroup",
	"text_poke", "build_id", "inherit_thread", "remove_on_exec", "sigtrap",
}

// String lists the set flags by their perf_event_attr names, with
// precise_ip as a number: "disabled|freq|precise_ip=3".
func (f AttrFlags) String() string {
	s := bitNames(uint64(f&^AttrPreciseIPMask), attrFlagNames[:])
	if p := f.PreciseIP(); p != 0 {
		if f&^AttrPreciseIPMask == 0 {
			return fmt.Sprintf("precise_ip=%d", p)
		}
		s += fmt.Sprintf("|precise_ip=%d", p)
	}
	return s
}

// Has reports whether every bit of b is set in f.
func (f AttrFlags) Has(b AttrFlags) bool { return f&b == b }

// PreciseIP returns the precise_ip field (0-3).
func (f AttrFlags) PreciseIP() int { return int(f>>15) & 3 }

// EventType is the type field of perf_event_attr (PERF_TYPE_*); dynamic
// PMUs have numbers of their own, listed by the PMU_MAPPINGS feature.
type EventType uint32

// Event types with fixed numbers.
const (
	TypeHardware   EventType = 0
	TypeSoftware   EventType = 1
	TypeTracepoint EventType = 2
	TypeHWCache    EventType = 3
	TypeRaw        EventType = 4
	TypeBreakpoint EventType = 5
)

var eventTypeNames = [...]string{"hardware", "software", "tracepoint", "hw-cache", "raw", "breakpoint"}

// String names the fixed types and gives the number of the others.
func (t EventType) String() string { return enumstr.Name(eventTypeNames[:], t, "EventType") }

// Misc is the misc field of a record header: the CPU mode in the low three
// bits, then flags whose meaning depends on the record type.
type Misc uint16

// Misc bits and CPU modes.
const (
	MiscCPUModeMask    Misc = 7
	MiscCPUModeUnknown Misc = 0
	MiscKernel         Misc = 1
	MiscUser           Misc = 2
	MiscHypervisor     Misc = 3
	MiscGuestKernel    Misc = 4
	MiscGuestUser      Misc = 5

	// MiscProcMapParseTimeout marks synthesized MMAP records of a
	// /proc/PID/maps that perf stopped reading.
	MiscProcMapParseTimeout Misc = 1 << 12
	// MiscMmapData (MMAP, MMAP2) marks a mapping that is not executable.
	MiscMmapData Misc = 1 << 13
	// MiscCommExec (COMM) marks a name change caused by exec.
	MiscCommExec Misc = 1 << 13
	// MiscForkExec (FORK) is perf's internal mark of a fork done by exec.
	MiscForkExec Misc = 1 << 13
	// MiscSwitchOut (SWITCH, SWITCH_CPU_WIDE) marks a switch away from the
	// thread (clear: a switch to it).
	MiscSwitchOut Misc = 1 << 13
	// MiscExactIP (SAMPLE) marks an IP that is the instruction that caused
	// the event.
	MiscExactIP Misc = 1 << 14
	// MiscSwitchOutPreempt (SWITCH*) marks a thread preempted while
	// runnable.
	MiscSwitchOutPreempt Misc = 1 << 14
	// MiscMmapBuildID (MMAP2) marks the form that carries a build ID in
	// place of device and inode numbers.
	MiscMmapBuildID Misc = 1 << 14
	// MiscBuildIDSize (HEADER_BUILD_ID and the BUILD_ID feature) marks an
	// entry whose build-ID length is stored in it (else it is 20 bytes,
	// or shorter when zero-padded).
	MiscBuildIDSize Misc = 1 << 15
)

// CPUMode returns the CPU mode bits (MiscKernel, MiscUser, ...).
func (m Misc) CPUMode() Misc { return m & MiscCPUModeMask }

// Feature is a bit of the header's feature bitmap (HEADER_*): an optional
// section of metadata.
type Feature int

// Features.
const (
	FeatTracingData    Feature = 1
	FeatBuildID        Feature = 2
	FeatHostname       Feature = 3
	FeatOSRelease      Feature = 4
	FeatVersion        Feature = 5
	FeatArch           Feature = 6
	FeatNrCPUs         Feature = 7
	FeatCPUDesc        Feature = 8
	FeatCPUID          Feature = 9
	FeatTotalMem       Feature = 10
	FeatCmdline        Feature = 11
	FeatEventDesc      Feature = 12
	FeatCPUTopology    Feature = 13
	FeatNUMATopology   Feature = 14
	FeatBranchStack    Feature = 15
	FeatPMUMappings    Feature = 16
	FeatGroupDesc      Feature = 17
	FeatAuxtrace       Feature = 18
	FeatStat           Feature = 19
	FeatCache          Feature = 20
	FeatSampleTime     Feature = 21
	FeatMemTopology    Feature = 22
	FeatClockID        Feature = 23
	FeatDirFormat      Feature = 24
	FeatBPFProgInfo    Feature = 25
	FeatBPFBTF         Feature = 26
	FeatCompressed     Feature = 27
	FeatCPUPMUCaps     Feature = 28
	FeatClockData      Feature = 29
	FeatHybridTopology Feature = 30
	FeatPMUCaps        Feature = 31
	FeatCPUDomainInfo  Feature = 32

	// NumFeatureBits is the size of the feature bitmap.
	NumFeatureBits = 256
)

var featureNames = [...]string{
	"RESERVED", "TRACING_DATA", "BUILD_ID", "HOSTNAME", "OSRELEASE", "VERSION",
	"ARCH", "NRCPUS", "CPUDESC", "CPUID", "TOTAL_MEM", "CMDLINE", "EVENT_DESC",
	"CPU_TOPOLOGY", "NUMA_TOPOLOGY", "BRANCH_STACK", "PMU_MAPPINGS", "GROUP_DESC",
	"AUXTRACE", "STAT", "CACHE", "SAMPLE_TIME", "MEM_TOPOLOGY", "CLOCKID",
	"DIR_FORMAT", "BPF_PROG_INFO", "BPF_BTF", "COMPRESSED", "CPU_PMU_CAPS",
	"CLOCK_DATA", "HYBRID_TOPOLOGY", "PMU_CAPS", "CPU_DOMAIN_INFO",
}

// String returns perf's name without the HEADER_ prefix, as perf report
// --header-only lists missing features: "BUILD_ID".
func (f Feature) String() string {
	if f >= 0 && int(f) < len(featureNames) {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", int(f))
}

// FeatureSet is the 256-bit feature bitmap of a header.
type FeatureSet [NumFeatureBits / 64]uint64

// Has reports whether feature f is present.
func (s *FeatureSet) Has(f Feature) bool {
	if f < 0 || f >= NumFeatureBits {
		return false
	}
	return s[f/64]&(1<<(f%64)) != 0
}

func (s *FeatureSet) set(f Feature) {
	if f >= 0 && f < NumFeatureBits {
		s[f/64] |= 1 << (f % 64)
	}
}

// Callchain context markers: entries of a callchain at or above
// ContextMax are not addresses but say whose addresses follow.
const (
	ContextHV          uint64 = 1<<64 - 32
	ContextKernel      uint64 = 1<<64 - 128
	ContextUser        uint64 = 1<<64 - 512
	ContextGuest       uint64 = 1<<64 - 2048
	ContextGuestKernel uint64 = 1<<64 - 2176
	ContextGuestUser   uint64 = 1<<64 - 2560
	ContextMax         uint64 = 1<<64 - 4095
)

// Register-dump ABIs of REGS_USER and REGS_INTR (PERF_SAMPLE_REGS_ABI_*).
const (
	RegsABINone uint64 = 0
	RegsABI32   uint64 = 1
	RegsABI64   uint64 = 2
)

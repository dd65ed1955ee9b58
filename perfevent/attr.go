package perfevent

import (
	"bytes"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
)

// Event is what a sampling event counts.
type Event struct {
	// Name is perf's name of the event, as ParseEvent accepts it.
	Name   string
	Type   perfdata.EventType
	Config uint64
	// Freq and Period, when not 0, replace Options.Freq and Options.Period
	// for this event, so that one session can sample cpu-clock by time and
	// context switches one by one.
	Freq, Period uint64
}

// Event numbers (perf_event_attr's config) of the hardware and software
// events this package knows.
const (
	countHWCPUCycles       = 0
	countHWInstructions    = 1
	countSWCPUClock        = 0
	countSWTaskClock       = 1
	countSWContextSwitches = 3
)

// The events this package knows by name. cycles and instructions need a
// hardware PMU, which most virtual machines do not offer; cpu-clock and
// task-clock are timers that work everywhere.
var (
	// CPUClock samples on a per-CPU timer while a profiled thread runs.
	CPUClock = Event{Name: "cpu-clock", Type: perfdata.TypeSoftware, Config: countSWCPUClock}
	// TaskClock samples on the profiled thread's own clock.
	TaskClock = Event{Name: "task-clock", Type: perfdata.TypeSoftware, Config: countSWTaskClock}
	// Cycles counts CPU cycles (hardware).
	Cycles = Event{Name: "cycles", Type: perfdata.TypeHardware, Config: countHWCPUCycles}
	// Instructions counts retired instructions (hardware).
	Instructions = Event{Name: "instructions", Type: perfdata.TypeHardware, Config: countHWInstructions}
	// ContextSwitches counts switches away from a profiled thread: with a
	// period of 1 every switch-out is a sample, taken where the thread
	// blocked or was preempted, the basis of off-CPU profiles. Its samples
	// are taken in the kernel (the scheduler), so it needs Options.Kernel.
	ContextSwitches = Event{Name: "context-switches", Type: perfdata.TypeSoftware, Config: countSWContextSwitches, Period: 1}
)

// ParseEvent returns the event of one of perf's names: cpu-clock,
// task-clock, cycles (cpu-cycles), instructions, context-switches (cs).
func ParseEvent(name string) (Event, error) {
	switch name {
	case "cpu-clock":
		return CPUClock, nil
	case "task-clock":
		return TaskClock, nil
	case "cycles", "cpu-cycles":
		return Cycles, nil
	case "instructions":
		return Instructions, nil
	case "context-switches", "cs":
		return ContextSwitches, nil
	}
	return Event{}, fmt.Errorf("unknown event %q (want cpu-clock, task-clock, cycles, instructions or context-switches)", name)
}

// Perf register masks for REGS_USER. perf numbers registers per
// architecture (arch/*/include/uapi/asm/perf_regs.h); package perfdata
// maps them to DWARF numbers.
const (
	// RegsAMD64 selects AX, BX, CX, DX, SI, DI, BP, SP, IP and R8-R15
	// (perf numbers 0-8 and 16-23): every general register, which is all
	// an unwinder may be asked for. FLAGS, CS and SS are left out; DS, ES,
	// FS and GS the kernel refuses on x86-64.
	RegsAMD64 uint64 = 0x1ff | 0xff<<16
	// RegsARM64 selects x0-x30 (x29 the frame pointer, x30 the link
	// register), sp and pc (perf numbers 0-32).
	RegsARM64 uint64 = 1<<33 - 1
)

// UserRegsMask returns the REGS_USER mask of every general register of
// a (arch.AMD64, arch.ARM64), or 0 for another. The samples of any
// process this program profiles are of arch.Host() (64-bit processes; a
// 32-bit process's registers come with RegsABI32).
func UserRegsMask(a arch.Arch) uint64 {
	switch a {
	case arch.AMD64:
		return RegsAMD64
	case arch.ARM64:
		return RegsARM64
	}
	return 0
}

// Defaults of Options.
const (
	// DefaultFreq is the sampling frequency when neither Freq nor Period
	// is given: 99 Hz, off the 100 Hz of periodic activity, so that
	// samples do not fall in lockstep with it.
	DefaultFreq = 99
	// DefaultRingPages is the number of data pages of each ring buffer:
	// 128 pages (512 KiB with 4 KiB pages) plus the header page fit in the
	// kernel's default per-CPU locked-memory allowance
	// (kernel.perf_event_mlock_kb = 516).
	DefaultRingPages = 128
	// DefaultPollInterval bounds how long records wait in a ring that has
	// not reached its wakeup watermark.
	DefaultPollInterval = 100 * time.Millisecond
	// MaxStackUser is the largest StackUser the kernel accepts (below
	// 65535 and a multiple of 8); a sample is at most 64 KiB in all.
	MaxStackUser = 65528
)

// Options say what to sample and how. The zero value, given a target
// (PIDs, TIDs or SystemWide), samples cpu-clock at DefaultFreq with the
// instruction pointer, thread, time, CPU and period of each sample.
type Options struct {
	// Events are the events to sample; none means CPUClock.
	Events []Event
	// Freq is the sampling frequency in Hz (perf record -F), adjusted by
	// the kernel to the event's rate; Period, if not 0, samples every
	// Period events instead (nanoseconds for the clocks). Neither given:
	// DefaultFreq. They apply to the events without a Freq or Period of
	// their own (ContextSwitches has a Period of 1: every switch).
	Freq, Period uint64

	// PIDs are processes to profile: every thread of each, as listed in
	// /proc/PID/task when Open runs, and, unless NoInherit, the threads
	// and child processes they create afterwards.
	PIDs []int
	// TIDs are single threads to profile (and, unless NoInherit, what
	// they create).
	TIDs []int
	// SystemWide samples everything that runs on the CPUs (perf record
	// -a) instead of PIDs and TIDs.
	SystemWide bool
	// CPUs are the CPUs to open events on; none means every online CPU.
	// Per-thread events are opened on every CPU too (the kernel does not
	// allow ring buffers on inherited events that follow a thread from CPU
	// to CPU), so a thread is not sampled while it runs on a CPU left out.
	CPUs []int
	// NoInherit stops following the threads and processes that profiled
	// threads create after Open.
	NoInherit bool
	// EnableOnExec leaves the events disabled until a profiled thread
	// executes a new program, and starts them then, at its first
	// instruction (perf record -- COMMAND): open them on a thread that is
	// about to start the command (its child inherits them), or on a
	// child that waits to exec, and do not call Enable.
	EnableOnExec bool

	// Kernel samples while threads run in the kernel too (system calls,
	// page faults), instead of only in user space. It needs
	// kernel.perf_event_paranoid <= 1 or CAP_PERFMON; Callchain and
	// ContextSwitches imply it.
	Kernel bool
	// KernelIfPermitted samples in the kernel too, as Kernel does, when
	// kernel.perf_event_paranoid or the profiler's capabilities allow it,
	// and only in user space when they do not (perf record's fallback), so
	// that a profile has the time spent in system calls and page faults
	// wherever it can: Session.UserOnly says which it was.
	KernelIfPermitted bool
	// RegsUser is the mask of user registers to record in each sample
	// (PERF_SAMPLE_REGS_USER): UserRegsMask(arch.Host()) for unwinding;
	// 0 records none.
	RegsUser uint64
	// StackUser is the number of bytes of user stack, from the stack
	// pointer up, to copy into each sample (PERF_SAMPLE_STACK_USER): a
	// multiple of 8, at most MaxStackUser; 0 copies none. The kernel copies
	// less when the stack is smaller.
	StackUser uint32
	// Callchain records the kernel's part of each sample's call chain
	// (PERF_SAMPLE_CALLCHAIN): the kernel frames of a sample taken in the
	// kernel. The user part is left to the unwinder unless UserCallchain
	// asks for the kernel's frame-pointer walk of it too.
	Callchain, UserCallchain bool

	// Mmap records MMAP2 for each executable mapping made after the
	// events are enabled; Comm records COMM for thread name changes and
	// exec; Task records FORK and EXIT; ContextSwitch records SWITCH at
	// every switch in and out of a profiled thread (SWITCH_CPU_WIDE when
	// SystemWide). They are requested on the first event only, so that
	// each happens once.
	Mmap, Comm, Task, ContextSwitch bool
	// SampleIDAll appends the thread, time, CPU (and event ID) to every
	// record, not only to samples, to order them with the samples.
	SampleIDAll bool
	// Monotonic timestamps records with CLOCK_MONOTONIC (use_clockid),
	// comparable with other programs' clocks, instead of the kernel's
	// perf clock.
	Monotonic bool

	// RingPages is the number of data pages of each CPU's ring buffer, a
	// power of two; 0 means DefaultRingPages. When the locked-memory limit
	// refuses it, Open halves it down to what holds two samples and says
	// so in Session.Warnings.
	RingPages int
	// WakeupEvents wakes the reader every that many samples; otherwise
	// WakeupBytes wakes it when that many bytes wait in a ring (0: half
	// the ring).
	WakeupEvents, WakeupBytes uint32
	// PollInterval is how long Run waits for a wakeup before it reads the
	// rings anyway, so that records never wait longer; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// FinishedRound makes Run hand out a FINISHED_ROUND record (perf's own
	// type, a bare header; CPU -1) after each pass over every ring, as perf
	// record writes one into perf.data: records of any CPU timestamped
	// before the last record of one round are all read by the end of the
	// next, which is how a reader orders the records of different CPUs by
	// time as it goes (perf's ordered events).
	FinishedRound bool
}

// needsKernel reports whether the options sample in the kernel.
func (o *Options) needsKernel() bool {
	return o.Kernel || o.Callchain || o.hasContextSwitches()
}

// hasContextSwitches reports whether ContextSwitches is among the events:
// its samples are taken in the scheduler, in the kernel, and the kernel
// drops them all when the event excludes the kernel.
func (o *Options) hasContextSwitches() bool {
	for _, e := range o.events() {
		if e.Type == perfdata.TypeSoftware && e.Config == countSWContextSwitches {
			return true
		}
	}
	return false
}

// events returns the events, CPUClock when none.
func (o *Options) events() []Event {
	if len(o.Events) == 0 {
		return []Event{CPUClock}
	}
	return o.Events
}

// paranoidNeeded returns the highest kernel.perf_event_paranoid value
// that allows what o asks for without CAP_PERFMON, and what that is.
func (o *Options) paranoidNeeded() (int, string) {
	switch {
	case o.SystemWide:
		return 0, "system-wide (per-CPU) sampling"
	case o.needsKernel():
		what := "sampling in the kernel"
		switch {
		case o.Callchain:
			what = "kernel callchains"
		case o.hasContextSwitches():
			what = "context-switch samples (taken in the kernel)"
		}
		return 1, what
	}
	return 2, "per-thread user-space sampling"
}

// check validates o before anything is opened.
func (o *Options) check(maxRate uint64) error {
	if !o.SystemWide && len(o.PIDs) == 0 && len(o.TIDs) == 0 {
		return fmt.Errorf("nothing to profile: give PIDs, TIDs or SystemWide")
	}
	if o.SystemWide && (len(o.PIDs) > 0 || len(o.TIDs) > 0) {
		return fmt.Errorf("SystemWide samples every process; do not give PIDs or TIDs with it")
	}
	if o.StackUser%8 != 0 || o.StackUser > MaxStackUser {
		return fmt.Errorf("user stack size %d: must be a multiple of 8 up to %d", o.StackUser, MaxStackUser)
	}
	if o.RingPages < 0 || o.RingPages&(o.RingPages-1) != 0 {
		return fmt.Errorf("%d ring pages: must be a power of two", o.RingPages)
	}
	for _, e := range o.events() {
		freq, period := o.sampling(e)
		if period == 0 && maxRate != 0 && freq > maxRate {
			return fmt.Errorf("%s at %d Hz exceeds kernel.perf_event_max_sample_rate (%d); lower the frequency or raise the sysctl", e.Name, freq, maxRate)
		}
	}
	return nil
}

// sampling returns the frequency or (if not 0) the period of event e.
func (o *Options) sampling(e Event) (freq, period uint64) {
	switch {
	case e.Period != 0:
		return 0, e.Period
	case e.Freq != 0:
		return e.Freq, 0
	case o.Period != 0:
		return 0, o.Period
	case o.Freq != 0:
		return o.Freq, 0
	}
	return DefaultFreq, 0
}

// Attr is one event of a session: the struct perf_event_attr given to
// perf_event_open (Bytes), and those very bytes as package perfdata reads
// them (the embedded *perfdata.Attr, whose Name is the event's, Index its
// position in Session.Attrs and IDs the sample IDs of its instances, one
// per thread and CPU for per-thread events or per CPU). Decoded records
// (Record.Decode) point to the *perfdata.Attr as their event. Attrs are
// shared by every record of the event and must not be modified.
type Attr struct {
	*perfdata.Attr
	// Event is the event counted.
	Event Event

	raw []byte // the perf_event_attr: attrSize bytes in this machine's order
}

// attrSize is the size of the perf_event_attr this package passes to the
// kernel (PERF_ATTR_SIZE_VER7, which every kernel since 4.x accepts).
const attrSize = perfdata.AttrSizeVer7

// Bytes returns the attribute as the kernel's struct perf_event_attr, in
// this machine's byte order: the bytes given to perf_event_open, which a
// perf.data file stores for the event.
func (a *Attr) Bytes() []byte { return bytes.Clone(a.raw) }

// encodeAttr writes the perf_event_attr of the fields of s that this
// package sets.
func encodeAttr(s *perfdata.Attr) []byte {
	b := make([]byte, attrSize)
	ne.PutUint32(b[0:], uint32(s.Type))
	ne.PutUint32(b[4:], attrSize)
	ne.PutUint64(b[8:], s.Config)
	ne.PutUint64(b[16:], s.SamplePeriod)
	ne.PutUint64(b[24:], uint64(s.SampleType))
	ne.PutUint64(b[40:], cBits(s.Flags))
	ne.PutUint32(b[48:], s.WakeupEvents)
	ne.PutUint64(b[80:], s.SampleRegsUser)
	ne.PutUint32(b[88:], s.SampleStackUser)
	ne.PutUint32(b[92:], uint32(s.ClockID))
	return b
}

// cBits returns the flags as the kernel's bit-field word: C allocates
// bit-fields from the least significant bit on little-endian machines and
// from the most significant on big-endian ones.
func cBits(f perfdata.AttrFlags) uint64 {
	if ne.Uint16([]byte{1, 0}) == 1 {
		return uint64(f)
	}
	return bits.Reverse64(uint64(f))
}

// clockMonotonic is CLOCK_MONOTONIC.
const clockMonotonic = 1

// buildAttrs makes the attribute of each event of o: its perf_event_attr
// bytes, and what package perfdata reads in them.
func (o *Options) buildAttrs() ([]*Attr, error) {
	evs := o.events()
	st := perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU | perfdata.SamplePeriod
	if len(evs) > 1 {
		// Several events share each ring; the identifier, first in a
		// sample and last in other records, says whose a record is.
		st |= perfdata.SampleIdentifier
	}
	if o.RegsUser != 0 {
		st |= perfdata.SampleRegsUser
	}
	if o.StackUser != 0 {
		st |= perfdata.SampleStackUser
	}
	if o.Callchain || o.UserCallchain {
		st |= perfdata.SampleCallchain
	}
	var attrs []*Attr
	for i, e := range evs {
		a := perfdata.Attr{Type: e.Type, Config: e.Config, SampleType: st,
			SampleRegsUser: o.RegsUser, SampleStackUser: o.StackUser}
		a.Flags = perfdata.AttrDisabled | perfdata.AttrExcludeHV
		if !o.NoInherit && !o.SystemWide {
			a.Flags |= perfdata.AttrInherit
		}
		if o.EnableOnExec {
			a.Flags |= perfdata.AttrEnableOnExec
		}
		if !o.needsKernel() && !o.KernelIfPermitted {
			a.Flags |= perfdata.AttrExcludeKernel
		}
		if a.SampleType&perfdata.SampleCallchain != 0 {
			if !o.Callchain {
				a.Flags |= perfdata.AttrExcludeCallchainKernel
			}
			if !o.UserCallchain {
				a.Flags |= perfdata.AttrExcludeCallchainUser
			}
		}
		freq, period := o.sampling(e)
		if period != 0 {
			a.SamplePeriod = period
		} else {
			a.SamplePeriod = freq
			a.Flags |= perfdata.AttrFreq
		}
		if o.WakeupEvents != 0 {
			a.WakeupEvents = o.WakeupEvents
		} else {
			a.Flags |= perfdata.AttrWatermark
			a.WakeupEvents = o.WakeupBytes // 0: the kernel's default, half the ring
		}
		if i == 0 {
			if o.Mmap {
				a.Flags |= perfdata.AttrMmap | perfdata.AttrMmap2
			}
			if o.Comm {
				a.Flags |= perfdata.AttrComm | perfdata.AttrCommExec
			}
			if o.Task {
				a.Flags |= perfdata.AttrTask
			}
			if o.ContextSwitch {
				a.Flags |= perfdata.AttrContextSwitch
			}
		}
		if o.SampleIDAll {
			a.Flags |= perfdata.AttrSampleIDAll
		}
		if o.Monotonic {
			a.Flags |= perfdata.AttrUseClockID
			a.ClockID = clockMonotonic
		}
		raw := encodeAttr(&a)
		pa, err := perfdata.ParseAttr(raw, ne)
		if err != nil {
			return nil, fmt.Errorf("the attribute of %s: %w", e.Name, err)
		}
		pa.Name, pa.Index = e.Name, i
		attrs = append(attrs, &Attr{Attr: pa, Event: e, raw: raw})
	}
	return attrs, nil
}

// String describes the attribute briefly, as in error messages: the
// event's name and its sampling ("cpu-clock at 99 Hz").
func (a *Attr) String() string {
	var b strings.Builder
	b.WriteString(a.Event.Name)
	if a.Flags&perfdata.AttrFreq != 0 {
		fmt.Fprintf(&b, " at %d Hz", a.SamplePeriod)
	} else {
		fmt.Fprintf(&b, " every %d", a.SamplePeriod)
	}
	return b.String()
}

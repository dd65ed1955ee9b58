// Package recorder is a live profiler, the engine of sframe record: it
// samples running programs with perf events (package perfevent), unwinds
// each sample's user stack as soon as it is read, with SFrame, then CFI,
// then frame pointers per frame (package perfunwind), keeps only the
// stack's program counters, merged with those of equal stacks, and drops
// the copy of the stack at once. Names are looked up at the end, once per
// distinct address, when the stacks are written as a pprof profile or
// folded stacks (package stackprof, as sframe report writes them).
//
//	p, err := recorder.Record(ctx, recorder.Options{PIDs: []int{pid}, Duration: 10 * time.Second})
//	if err != nil {
//		return err // one line: perf_event_paranoid, no such process, ...
//	}
//	defer p.Close()
//	err = p.WritePprof(w)
//	p.WriteSummary(os.Stderr)
//
// # Order of records
//
// Each CPU has its own ring, and the records of different rings come out
// of order: a new thread's or process's first samples may be read before
// the FORK, COMM or MMAP records, written on another CPU, that name it and
// give its mappings. Those records are applied in time order, as perf
// orders them: after each pass over the rings, what is older than the
// latest record of the pass before is final (every CPU's earlier records
// have been read by then). A sample is unwound at once when nothing about
// its process or thread is waiting and its address is in a known mapping;
// otherwise it is copied and unwound in its place in time, up to about
// two rings' worth of samples per CPU (beyond, at once). While samples
// wait, and for a command until its first sample comes (a new command's
// first samples always wait, for its exec's records), the rings are read
// every few milliseconds rather than when one is half full, so that only
// a few samples wait; their copies are reused.
//
// # Off-CPU time
//
// With OffCPU, every switch of a profiled thread off its CPU is a sample
// too (the software event context-switches, taken in the scheduler, with
// the thread's user registers and stack), weighted by the time until the
// thread runs again, which the kernel's SWITCH records tell (matched
// with the switch-outs in time order, as above). The
// profile then has the sample type off-cpu/nanoseconds beside
// cpu/nanoseconds: one profile shows where threads run and where they
// wait. A thread still off its CPU when recording stops is counted up to
// then; a switch-out whose thread exits before running again, or whose
// switch-in was lost, is dropped (and counted in Stats).
//
// # Commands
//
// A command (Options.Command) is profiled from its first instruction
// without being stopped: the events are opened, disabled, on the thread
// that starts it, which the child inherits and the kernel enables when
// the child executes the command (perfevent.Options.EnableOnExec). That
// thread then waits for the child, so that the child's parent thread
// lives as long as it does. Recording ends when the command exits, after
// Duration, or when the context is done; the command is never signalled.
//
// The profiled programs are never stopped, traced or signalled.
//
// Linux only, as package perfevent: on other systems Record fails with an
// error saying so.
package recorder

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
)

// Defaults of Options.
const (
	// DefaultFreq is the sampling frequency: 999 Hz, off the 1000 Hz of
	// periodic activity.
	DefaultFreq = 999
	// DefaultStackSize is the number of bytes of stack copied per sample:
	// 16 KiB, which holds the deep stacks of most programs (the walk ends
	// cleanly where the copy does).
	DefaultStackSize = 16 << 10
)

// Options say what to record.
type Options struct {
	// The target: PIDs (every thread of these processes, and the threads
	// and processes they start), SystemWide (every process), or Command
	// (started by Record, with what it starts); exactly one.
	PIDs       []int
	SystemWide bool
	// Command is the command to start and profile, prepared by the caller
	// (path, arguments, environment, standard files); Record starts it.
	Command *exec.Cmd

	// Event is the event sampled: perfevent.CPUClock when zero.
	Event perfevent.Event
	// Freq is the sampling frequency in Hz; 0 means DefaultFreq.
	Freq uint64
	// StackSize is the number of bytes of user stack copied per sample, a
	// multiple of 8 up to perfevent.MaxStackUser; 0 means
	// DefaultStackSize.
	StackSize uint32
	// Kernel adds the kernel's frames of samples taken in the kernel
	// (its callchain), named from /proc/kallsyms, and fails where
	// kernel.perf_event_paranoid forbids samples in the kernel. Without
	// it, time in the kernel (system calls, page faults) is sampled still
	// wherever that is allowed, each sample with the user stack of the
	// thread that entered the kernel (Profile.UserOnly says when not).
	Kernel bool
	// OffCPU also records where threads wait: see the package comment.
	OffCPU bool
	// Duration, if not 0, ends the recording after that long.
	Duration time.Duration
	// MaxDepth bounds the user frames of a stack (unwind.DefaultMaxDepth
	// when 0).
	MaxDepth int
	// RingPages is the number of data pages of each CPU's ring buffer (a
	// power of two); 0 sizes them for a quarter of a second of samples.
	// When the locked-memory limit refuses that much, smaller rings are
	// used and Profile.Warnings says so.
	RingPages int
	// Started, if not nil, is called once sampling has begun: the events
	// are enabled and the processes' earlier mappings read (or the
	// command started).
	Started func()
	// Period, with OnPeriod, cuts the recording into periods, as a
	// continuous profiler does: about every Period (at the first pass
	// over the rings after it ends, at most a second later), OnPeriod is
	// given a Profile of the stacks sampled since the last cut, and the
	// recorder forgets them, so that its memory does not grow with the
	// recording's length. The last period is cut when recording stops;
	// the Profile that Record then returns has the whole recording's
	// Stats and no stacks. OnPeriod runs on the goroutine that reads the
	// rings, which is what lets it name frames without locks: it may name
	// and encode, but must not wait (for a network, say), or samples are
	// lost.
	Period   time.Duration
	OnPeriod func(*Profile)
	// BPF walks the user stacks in the kernel, in a BPF program attached
	// to the sampling events (package bpfunwind), from each file's SFrame
	// rows (its own, or compiled from its CFI), instead of copying
	// StackSize bytes of stack per sample and walking the copy here: no
	// copy, and no limit but MaxDepth (bpfunwind.DefaultMaxDepth, 4,096
	// frames, when 0). Without the privileges BPF needs (CAP_BPF and
	// CAP_PERFMON), or on a kernel that refuses the program,
	// Profile.Warnings says so and the stacks are walked here. With
	// OffCPU, the switch-outs are walked in the kernel too. The first
	// samples of a new program, library or process, taken before the
	// recorder has read its records and loaded its tables into the
	// kernel, come with their stack copy (StackSize) and are walked here.
	BPF bool
}

// check validates o.
func (o *Options) check() error {
	n := 0
	if len(o.PIDs) > 0 {
		n++
	}
	if o.SystemWide {
		n++
	}
	if o.Command != nil {
		n++
	}
	switch {
	case n == 0:
		return errors.New("nothing to profile: give PIDs, SystemWide or a Command")
	case n > 1:
		return errors.New("give one of PIDs, SystemWide and Command")
	case o.StackSize%8 != 0 || o.StackSize > perfevent.MaxStackUser:
		return fmt.Errorf("stack size %d: must be a multiple of 8 up to %d", o.StackSize, perfevent.MaxStackUser)
	case o.Duration < 0:
		return errors.New("negative duration")
	case (o.Period > 0) != (o.OnPeriod != nil):
		return errors.New("Period and OnPeriod go together")
	case o.Period < 0:
		return errors.New("negative period")
	}
	if o.Event.Type == perfdata.TypeSoftware && o.Event.Config == perfevent.ContextSwitches.Config && o.Event.Name != "" {
		return errors.New("context-switches is the off-CPU event: use OffCPU")
	}
	return nil
}

// freq returns the sampling frequency.
func (o *Options) freq() uint64 {
	if o.Freq == 0 {
		return DefaultFreq
	}
	return o.Freq
}

// stackSize returns the stack bytes per sample.
func (o *Options) stackSize() uint32 {
	if o.StackSize == 0 {
		return DefaultStackSize
	}
	return o.StackSize
}

// ringPages returns the pages of each ring: a quarter of a second of
// samples of one busy thread per CPU, rounded up to a power of two (the
// reader, woken when a ring is half full, then has an eighth of a second
// or more to come before samples are lost), at least 128 pages (512 KiB)
// and, past that, at most 64 MiB for all the CPUs.
func (o *Options) ringPages() int {
	if o.RingPages != 0 {
		return o.RingPages
	}
	page := uint64(os.Getpagesize())
	sample := uint64(o.stackSize()) + 512 // registers, header, fields
	want := o.freq() * sample / 4 / page
	limit := uint64(64<<20) / page / uint64(max(runtime.NumCPU(), 1))
	pages := uint64(128)
	for pages < want && pages*2 <= limit {
		pages *= 2
	}
	return int(pages)
}

// event returns the sampled event.
func (o *Options) event() perfevent.Event {
	if o.Event.Name == "" {
		return perfevent.CPUClock
	}
	return o.Event
}

// perfOptions returns the events to open, for samples that an unwinder
// of arch reads, without the target; cs is the index of the
// context-switches event, -1 without OffCPU.
func (o *Options) perfOptions(a arch.Arch) (po perfevent.Options, cs int) {
	events := []perfevent.Event{o.event()}
	cs = -1
	if o.OffCPU {
		cs = len(events)
		events = append(events, perfevent.ContextSwitches)
	}
	return perfevent.Options{Events: events, Freq: o.freq(), Kernel: o.Kernel, KernelIfPermitted: true, Callchain: o.Kernel,
		RegsUser: perfevent.UserRegsMask(a), StackUser: o.stackSize(),
		Mmap: true, Comm: true, Task: true, ContextSwitch: o.OffCPU, SampleIDAll: true,
		// The clock of clock_gettime: the end of recording is a time of
		// the records' clock, up to which threads still off the CPU count.
		Monotonic:     true,
		FinishedRound: true, RingPages: o.ringPages(),
		// Rings are read at their wakeup watermark (half full) and at
		// Stop; waking up more often only costs the profiler CPU time.
		// With BPF, the program's stacks come through its own ring
		// buffer, read at each pass; the events' own samples, with
		// their stack copies, only when it passes them on
		// (bpfunwind.Options.Fallback).
		PollInterval: time.Second}, cs
}

// TimeBased reports whether the periods of event e's samples are
// nanoseconds (cpu-clock, task-clock).
func TimeBased(e perfevent.Event) bool {
	return e.Type == perfdata.TypeSoftware && (e.Config == perfevent.CPUClock.Config || e.Config == perfevent.TaskClock.Config)
}

// Stats count what a recording gave, beside the unwinding statistics of
// Profile.Unwinding.
type Stats struct {
	// Samples is the number of samples read: of the sampled event
	// (OnCPU) and switch-outs (SwitchOuts).
	Samples, OnCPU, SwitchOuts uint64
	// OffCPU is the number of switch-outs weighted by the time until
	// their thread ran again; AtEnd those of them whose thread was still
	// off its CPU when recording stopped (weighted up to then); Dropped
	// those left out: their thread exited first, or their switch-in, or
	// another switch-out came first (records lost).
	OffCPU, AtEnd, Dropped uint64
	// OffCPUTime is the sum of the off-CPU weights.
	OffCPUTime time.Duration
	// Lost is the number of records the kernel dropped because a ring
	// was full.
	Lost uint64
	// Deferred counts the samples kept until the records before them
	// that describe their process or thread were applied: records still
	// in another CPU's ring, or read and queued to be applied in time
	// order (a program that maps and unmaps libraries all along has
	// such records at nearly every sample).
	Deferred uint64
	// Undecodable counts records that did not decode (it should stay 0).
	Undecodable uint64
	// Stacks is the number of distinct stacks kept; Processes and
	// Threads the number of processes and threads sampled.
	Stacks, Processes, Threads int
	// Wall is how long the recording ran.
	Wall time.Duration
	// CPU is the profiler's own CPU time (user and system, every thread)
	// while recording: reading, unwinding and merging samples, following
	// processes, loading unwind tables.
	CPU time.Duration
	// RingBytes is the size of each CPU's ring buffer.
	RingBytes int
	// BPF says the stacks were walked in the kernel (Options.BPF); then
	// BPFCounters are the program's counts and run time, BPFTables what
	// its tables held, and BPFTruncated the stacks whose record did not
	// decode whole (the samples the program passed on, walked here, are
	// BPFCounters.Fallback).
	BPF          bool
	BPFCounters  bpfunwind.Counters
	BPFTables    bpfunwind.TableStats
	BPFTruncated uint64
}

// CPUPerSample returns Stats.CPU per sample read, 0 without samples.
func (s *Stats) CPUPerSample() time.Duration {
	if s.Samples == 0 {
		return 0
	}
	return s.CPU / time.Duration(s.Samples)
}

package bpfunwind

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sframekit/sframekit/internal/enumstr"
)

// Bounds of the maps (Options), each stated with its memory.
const (
	// DefaultMaxDepth is the deepest user stack walked: 4,096 frames.
	DefaultMaxDepth = 4096
	// MaxDepth is the most Options.MaxDepth may be (the program's
	// buffer: 4,096 user frames and 128 kernel frames, beside the 4 KiB
	// stack window and the caches, 103 KiB per CPU).
	MaxDepth = 4096
	// DefaultMaxRows is the size of the rows map: 2 Mi rows of 16 bytes,
	// 32 MiB, about a hundred libc-sized files; and of the buckets map
	// (at most a bucket per row, 8 bytes each: 16 MiB).
	DefaultMaxRows = 2 << 20
	// DefaultMaxFiles bounds the file tables loaded: 4,096 (each one's
	// rows in the rows map, its buckets in the buckets map); past it, the
	// idle ones are evicted, and a file with no room is walked by frame
	// pointers.
	DefaultMaxFiles = 4096
	// DefaultMaxProcesses bounds the process tables: 1,024 of 28 KiB
	// (MaxMappings mappings of 56 bytes), 28 MiB at most, allocated as
	// processes are added.
	DefaultMaxProcesses = 1024
	// MaxMappings is the most executable mappings a process's table
	// holds; frames in those beyond follow frame pointers.
	MaxMappings = 512
	// DefaultStackRing is the stacks ring buffer's size per CPU: 4 MiB, about
	// 7,500 stacks of up to 64 frames (a 552-byte record each, with the ring's
	// 8-byte header), seconds of samples at 999 Hz. MaxStackRing bounds the
	// whole ring: 256 MiB.
	DefaultStackRing = 4 << 20
	MaxStackRing     = 256 << 20
)

// Options size the walker's maps and say what it records.
type Options struct {
	// MaxDepth bounds the user frames of a stack: DefaultMaxDepth when 0,
	// at most MaxDepth.
	MaxDepth int
	// Kernel adds the kernel's frames of samples taken in the kernel.
	Kernel bool
	// Fallback passes on, unwalked, the samples whose walk met a process
	// or an address without a table yet: the program returns 1 and
	// writes nothing, and the sampled event writes its own sample (with
	// its user registers and stack copy, when it records them), to walk
	// in user space. Without it, such walks end there.
	Fallback bool
	// Events is the number of sampled events, each with its own copy of
	// the program (Unwinder.Programs): 1 when 0, at most 256.
	Events int
	// MaxRows, MaxFiles and MaxProcesses size the maps (the defaults
	// above when 0).
	MaxRows, MaxFiles, MaxProcesses int
	// StackRing is the size of the ring buffer of stacks, rounded up to
	// a power of two: DefaultStackRing per CPU when 0, at most
	// MaxStackRing. Stacks that find it full are lost
	// (Counters.OutputErrors).
	StackRing int
	// TableCache is a directory where the files' tables are kept, by
	// build ID, for the next runs (DefaultTableCache, say): "" for none.
	// At most 128 tables and 64 MiB are kept there, the least recently
	// written removed first; each is checked when read (DecodeTable).
	TableCache string
}

func (o *Options) defaults() {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	o.MaxDepth = min(o.MaxDepth, MaxDepth)
	o.Events = min(max(o.Events, 1), 256)
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = DefaultMaxProcesses
	}
}

// Stop says why a walk ended (the program's STOP_ values).
type Stop uint16

// Stops.
const (
	StopEnd    Stop = iota // an outermost frame, or a zero return address
	StopDepth              // MaxDepth frames
	StopRead               // a read of the stack failed
	StopLoop               // the stack pointer did not move up
	StopNoRegs             // no user registers (a kernel thread)
	NumStops
)

var stopNames = [NumStops]string{"end", "depth", "read", "loop", "no-regs"}

// String names the stop.
func (s Stop) String() string {
	return enumstr.Name(stopNames[:], s, "Stop")
}

// Counters are the program's own counts, summed over the CPUs, and its
// run time from the kernel's BPF statistics.
type Counters struct {
	// Samples is the number of samples walked; KernelMode those taken in
	// the kernel (walked from the task's saved user registers).
	Samples, KernelMode uint64
	// SFrameFrames and FPFrames count frames by what found their caller:
	// a row of the file's table, or the frame pointer.
	SFrameFrames, FPFrames uint64
	// NoProcess counts samples of processes without a table yet; NoMapping
	// frames at addresses in no mapping of the table; OutputErrors stacks
	// lost because the stacks ring was full; Fallback samples passed on unwalked
	// (Options.Fallback).
	NoProcess, NoMapping, OutputErrors, Fallback uint64
	// Stops counts walks by why they ended.
	Stops [NumStops]uint64
	// Reads counts the program's reads of user memory: windows of the
	// stack (up to 4 KiB, within a page) and single slots outside them.
	Reads uint64
	// RunTime and Runs are the kernel's statistics of the program (0
	// where the kernel keeps none).
	RunTime time.Duration
	Runs    uint64
}

// The program's counter indices (enum of bpf/walk.c).
const (
	cSamples = iota
	cKernelMode
	cFramesSFrame
	cFramesFP
	cNoProc
	cNoMap
	cOutputErr
	cFallback
	cStop
	cReads      = cStop + 8
	numCounters = cReads + 1
)

// set sets the field of the program's counter i to v.
func (c *Counters) set(i uint32, v uint64) {
	if i >= cStop && i-cStop < uint32(NumStops) {
		c.Stops[i-cStop] = v
		return
	}
	fields := [numCounters]*uint64{
		cSamples: &c.Samples, cKernelMode: &c.KernelMode,
		cFramesSFrame: &c.SFrameFrames, cFramesFP: &c.FPFrames,
		cNoProc: &c.NoProcess, cNoMap: &c.NoMapping,
		cOutputErr: &c.OutputErrors, cFallback: &c.Fallback,
		cReads: &c.Reads,
	}
	if i < numCounters && fields[i] != nil {
		*fields[i] = v
	}
}

// RunTimePerSample returns the program's mean run time, 0 without runs.
func (c *Counters) RunTimePerSample() time.Duration {
	if c.Runs == 0 {
		return 0
	}
	return c.RunTime / time.Duration(c.Runs)
}

// TableStats count the tables loaded into the kernel.
type TableStats struct {
	// Files is the number of file tables loaded (ever), Evicted those
	// dropped since no process mapped them any more; Rows the rows loaded
	// (ever), Full the files left without rows because the rows map was
	// full, Failed those whose tables did not load (their frames follow
	// frame pointers).
	Files, Evicted, Rows, Full, Failed int
	// Skipped counts SFrame rows left to frame pointers, by reason.
	Skipped [NumReasons]int
	// Truncated counts process tables cut at MaxMappings.
	Truncated int
	// Idle is the number of tables kept loaded that no process maps now
	// (evicted, oldest first, when room is needed or beyond 64).
	Idle int
}

// DefaultTableCache returns the directory of the tables kept for the
// next runs (Options.TableCache) in the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache: sframekit/bpf-tables), "" when there is
// none.
func DefaultTableCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "sframekit", "bpf-tables")
}

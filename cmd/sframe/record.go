package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/hugeheap"
	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/recorder"
	"github.com/sframekit/sframekit/unwind"
)

func init() {
	register("record", "profile running programs: stacks unwound live, written as pprof or folded", runRecord)
}

const recordUsage = `(-p PID[,PID...] | -a | [--] COMMAND [ARGS...])

Samples the processes PID (every thread, and the threads and processes
they start), every process (-a), or COMMAND, which it starts and samples
from its first instruction, with perf events, and unwinds each sample's
user stack as soon as it is read: SFrame, then CFI, then frame pointers,
per frame, over the files the processes map. Only the stacks' addresses
are kept, merged; functions are named at the end, once per address.
Code that a JIT compiler made is named from the perf map it writes
(node --perf-basic-prof, python3 -X perf, Java agents: /tmp/perf-PID.map,
read in the process's own mount namespace while it runs) or the jitdump
file it maps (node --perf-prof), as perf names it.
Recording ends when the processes or the command exit, after --duration,
or on Ctrl-C (which the command, in the same terminal, gets too),
SIGTERM, SIGHUP or SIGQUIT, and the profile is written all the same; a
second signal ends sframe at once. The profiled programs are never
stopped, traced or signalled: when recording ends before COMMAND, sframe
waits for it to exit after writing the profile, and exits with its exit
status (128+N when signal N killed it), as perf record does.

Time in the kernel (system calls, page faults) is sampled wherever
kernel.perf_event_paranoid (1 or lower) or CAP_PERFMON allow it, with
the user stack of the thread in the kernel; --kernel adds the kernel's
frames. The summary says when it was not allowed.

The output file is opened before sampling starts, so that a path that
cannot be written fails at once, and filled atomically at the end.

With --bpf, the stacks are walked in the kernel instead, by a BPF program
attached to the sampling events, from each file's SFrame rows (its own
.sframe, or compiled from its CFI) and frame pointers where no row
applies: no stack is copied, and deep stacks are walked whole (up to
--max-depth, 4096 by default). It needs CAP_BPF and CAP_PERFMON (root);
without them, a line says so and the stacks are walked in user space.

With --off-cpu, every switch of a thread off its CPU is a sample too,
taken where it blocked (or was preempted), weighted by the time until it
ran again: the profile's off-cpu/nanoseconds beside cpu/nanoseconds, or
in folded stacks a last frame [off-cpu], the counts then in microseconds
for both.

Formats (--format):
  pprof   (default) a pprof profile, -o FILE (default profile.pb.gz):
          sample types samples/count, cpu/nanoseconds (or EVENT/count)
          and with --off-cpu off-cpu/nanoseconds; labels pid, thread
          (the thread id) and thread_name; go tool pprof reads it
  folded  one line per distinct stack, "comm;outer;...;inner count", as
          flamegraph.pl, inferno and speedscope read, to standard output
          unless -o is given (the command's own output goes there too)

A summary goes to standard error: samples taken and lost, how stacks
were unwound (SFrame only, some CFI, some frame pointers), why and where
walks ended, and the profiler's own CPU time per sample. Sampling needs
kernel.perf_event_paranoid 2 or lower for processes of one's own user
(1 or lower for --kernel and --off-cpu, 0 or lower for -a), or
CAP_PERFMON.`

func runRecord(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("record", recordUsage, stdout, stderr)
	fs.stopAtOperand = true
	pids := fs.String("pid", "", "profile the processes `PIDS` (comma-separated)")
	fs.alias("p", "pid")
	all := fs.Bool("all-cpus", false, "profile every process, on every CPU")
	fs.alias("a", "all-cpus")
	freq := fs.Uint64("freq", recorder.DefaultFreq, "sample `HZ` times a second")
	fs.alias("F", "freq")
	event := fs.String("event", "cpu-clock", "sample `EVENT`: cpu-clock, task-clock, cycles or instructions (the last two need hardware counters, which most virtual machines lack)")
	fs.alias("e", "event")
	var duration durationValue
	fs.Var(&duration, "duration", "stop after `D` (10s, 1m30s; a number is seconds)")
	stackSize := fs.Uint("stack-size", recorder.DefaultStackSize, "copy `BYTES` of user stack per sample (a multiple of 8, at most 65528)")
	kernel := fs.Bool("kernel", false, "add kernel frames to samples taken in the kernel (which are taken without it too, where permitted)")
	offCPU := fs.Bool("off-cpu", false, "also record where threads wait, weighted by the time off the CPU")
	format := fs.String("format", "pprof", "output `FORMAT`: pprof or folded")
	output := fs.String("output", "", "write to `FILE` (- for standard output; default profile.pb.gz for pprof, else standard output)")
	fs.alias("o", "output")
	maxDepth := fs.Int("max-depth", unwind.DefaultMaxDepth, "unwind at most `N` user frames")
	source := fs.Bool("source", false, "add each frame's source file and line, from DWARF")
	fs.alias("s", "source")
	inlines := fs.Bool("inlines", false, "add the calls inlined at each frame, from DWARF (implies -s)")
	fs.alias("i", "inlines")
	noDemangle := fs.Bool("no-demangle", false, "keep C++ and Rust symbol names as they are in the symbol table")
	useBPF := fs.Bool("bpf", false, "walk the user stacks in the kernel, in a BPF program, from the files' SFrame rows: no stack copy, up to --max-depth frames (default 4096 with --bpf)")
	quiet := fs.Bool("quiet", false, "print no summary")
	fs.alias("q", "quiet")
	operands, code, ok := fs.parse(args)
	if !ok {
		return code
	}

	opts := recorder.Options{Freq: *freq, Kernel: *kernel, OffCPU: *offCPU, Duration: time.Duration(duration), MaxDepth: *maxDepth, SystemWide: *all}
	targets := 0
	if *pids != "" {
		targets++
		var err error
		if opts.PIDs, err = parsePIDs(*pids); err != nil {
			return fs.fail("bad --pid: %v", err)
		}
	}
	if *all {
		targets++
	}
	if len(operands) > 0 {
		targets++
	}
	ev, err := perfevent.ParseEvent(*event)
	switch {
	case targets == 0:
		return fs.fail("nothing to record: give -p PID, -a or a command")
	case targets > 1:
		return fs.fail("give one of -p PID, -a and a command")
	case err != nil:
		return fs.fail("unknown event %q (cpu-clock, task-clock, cycles or instructions)", *event)
	case ev.Name == perfevent.ContextSwitches.Name:
		return fs.fail("context-switches is what --off-cpu samples; give it instead of -e")
	case *format != "pprof" && *format != "folded":
		return fs.fail("unknown format %q (pprof or folded)", *format)
	case *freq == 0:
		return fs.fail("--freq must be positive")
	case *stackSize == 0 || *stackSize%8 != 0 || *stackSize > perfevent.MaxStackUser:
		return fs.fail("--stack-size must be a positive multiple of 8 up to %d", perfevent.MaxStackUser)
	case *maxDepth <= 0:
		return fs.fail("--max-depth must be positive")
	case *offCPU && *format == "folded" && !recorder.TimeBased(ev):
		return fs.fail("--off-cpu with --format folded needs a time-based event (cpu-clock or task-clock): the counts are microseconds")
	}
	opts.Event, opts.StackSize = ev, uint32(*stackSize)
	if *useBPF {
		opts.BPF = true
		if !fs.isSet("max-depth") {
			opts.MaxDepth = 0 // the BPF walker's default
		}
	}
	if len(operands) > 0 {
		cmd := exec.Command(operands[0], operands[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		opts.Command = cmd
	}
	out := *output
	if out == "" {
		out = "-" // folded stacks to standard output, as perf script's habits expect
		if *format == "pprof" {
			out = "profile.pb.gz"
		}
	}
	// The output is opened before sampling starts, so that a path that
	// cannot be written fails now, not after the recording; it is filled
	// (a temporary file renamed over it) once the profile is made.
	file, err := outfile.Create(out, 0o644, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "sframe record: %v\n", err)
		return 1
	}
	sig := newRecordSignals(file, stderr)
	defer sig.stop() // and the output dropped, unless committed

	// The heap the profiler touches first (the files' tables and symbols,
	// the profile: a few MB) in 2 MiB pages, as sframe report does:
	// faulting it in 4 KiB at a time cost 300-500 page faults of 15-40 us
	// each on a virtual machine, a fifth of a short recording's CPU time.
	// Not where the host takes free memory back (hugeheap): there a huge
	// page was fresh host memory, and the reservation cost a compiler's
	// recording a quarter of the profiler's CPU.
	hugeheap.Reserve(32 << 20)
	// A recording may run for long: collect garbage as usual, not only
	// at main's memory limit, but from recordGCFirst on. Below it (the
	// reservation above and 32 MiB of heap: a C++ compiler's 10,000
	// samples and its files' tables take half of that) the collections
	// as the heap doubled from a few MB, and sweeping after them, were a
	// tenth of the recording's CPU, for garbage that is a few MB.
	delayGCUntil(recordGCFirst)
	prof, err := recorder.Record(sig.ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "sframe record: %s\n", recordError(err, operands))
		return 1
	}
	defer prof.Close()
	// What is live now is the stacks, little more: the recording's unwind
	// tables were let go (perfunwind's DropTables) and the rest is its
	// garbage. Collected now, for about a millisecond, that memory is
	// what naming allocates first, where fresh pages cost a page fault
	// each (a C++ compilation: 2,400 fewer faults of 15,000, naming 52
	// against 58 ms).
	runtime.GC()
	// Naming the frames and building the profile allocate what lives
	// until it is written (tens of MB for a compiler's 10,000 stacks):
	// collecting while the heap doubles from the recording's few MB cost
	// about a quarter of that phase's CPU. The command's start-up
	// settings again: no collection below gcFirst, Go's default above.
	delayGC()
	for _, w := range prof.Warnings {
		fmt.Fprintf(stderr, "sframe record: warning: %s\n", w)
	}
	res := prof.Resolver()
	res.Demangle, res.Source, res.Inlines = !*noDemangle, *source || *inlines, *inlines
	// A pprof profile names functions by Name only.
	res.NameOnly = *format != "folded"
	var buf bytes.Buffer
	if *format == "folded" {
		err = prof.WriteFolded(&buf)
	} else {
		err = prof.WritePprof(&buf)
	}
	if err == nil {
		err = sig.commit(buf.Bytes())
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe record: %v\n", err)
		return 1
	}
	if s := sig.received(); s != nil {
		fmt.Fprintf(stderr, "sframe record: %s: recording stopped, profile written to %s\n", signalName(s), outName(out))
	}
	if !*quiet {
		prof.WriteSummary(stderr)
	}
	if prof.Command() == nil {
		return 0
	}
	if !prof.Exited() {
		fmt.Fprintf(stderr, "sframe record: profile written; waiting for %s (process %d) to exit\n", operands[0], prof.Command().Pid)
	}
	// The command's exit status is sframe's, as perf record and shells
	// give it: 128+N for a command killed by signal N.
	return exitStatus(prof.Wait())
}

// recordGCFirst is the process's memory at which a recording first
// collects garbage (delayGCUntil).
const recordGCFirst = 64 << 20

// recordSignals stops a recording on a signal (interruptSignals), so
// that the profile is written all the same; a second one, or one after
// the profile is written (while the command is waited for), ends sframe
// at once, its output file removed (or left as it was). A first one that
// comes once the recording has ended but before the profile is written
// lets it be written: a signal sent to the process group (Ctrl-C, a
// closed terminal) ends the command too, and sframe may see the
// command's end before its own signal.
type recordSignals struct {
	in     *interrupt
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // held while the output is committed or aborted
	file   *outfile.File
	// written says that the profile is in place (guarded by mu).
	written bool
	stderr  io.Writer
}

// newRecordSignals starts catching the signals, for the output file.
func newRecordSignals(file *outfile.File, stderr io.Writer) *recordSignals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &recordSignals{ctx: ctx, cancel: cancel, file: file, stderr: stderr}
	s.in = catchInterrupts(func(sig syscall.Signal) {
		s.mu.Lock() // not while the output is being put in place
		written := s.written
		s.mu.Unlock()
		if written {
			s.exit(sig)
		}
		cancel()
	}, s.exit)
	return s
}

// exit ends sframe on signal sig, the output dropped.
func (s *recordSignals) exit(sig syscall.Signal) {
	s.mu.Lock() // not while the output is being put in place
	s.file.Abort()
	fmt.Fprintf(s.stderr, "sframe record: %s: stopped\n", signalName(sig))
	os.Exit(exitSignaled(sig))
}

// commit writes data to the output file and puts it in place.
func (s *recordSignals) commit(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.file.Write(data); err != nil {
		return err
	}
	err := s.file.Commit()
	s.written = err == nil
	return err
}

// received returns the signal that stopped the recording, or nil.
func (s *recordSignals) received() os.Signal {
	if sig := s.in.Signal(); sig != 0 {
		return sig
	}
	return nil
}

// stop stops catching the signals and drops the output if it was not
// committed.
func (s *recordSignals) stop() {
	s.in.Stop()
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file.Abort()
}

// signalName names a signal as kill -l does (SIGINT).
func signalName(sig os.Signal) string {
	if n, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(n); name != "" {
			return name
		}
	}
	return sig.String()
}

// exitSignaled returns the exit status a shell gives a command killed by
// sig: 128+N.
func exitSignaled(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// exitStatus returns sframe's exit status for the command's Wait error:
// its exit status, or 128+N when signal N killed it.
func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case !errors.As(err, &ee):
		return 1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignaled(ws.Signal())
	}
	return ee.ExitCode()
}

// outName is the output's name in messages.
func outName(path string) string {
	if path == "-" {
		return "standard output"
	}
	return path
}

// recordError words an error of recorder.Record in one line: a command
// that cannot be started by its name.
func recordError(err error, command []string) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return command[0] + ": command not found"
	case len(command) > 0 && errors.As(err, &pe) && pe.Op != "open":
		return command[0] + ": " + pe.Err.Error()
	}
	return err.Error()
}

// durationValue is a flag of a duration: Go's form (10s, 1m30s) or a
// number of seconds.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 {
			return errors.New("negative")
		}
		*d = durationValue(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (10s, 1m30s, or seconds)")
	}
	if v < 0 {
		return errors.New("negative")
	}
	*d = durationValue(v)
	return nil
}

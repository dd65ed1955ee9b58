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
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

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
Recording ends when the processes or the command exit, after --duration,
or on Ctrl-C (which the command, in the same terminal, gets too). The
profiled programs are never stopped, traced or signalled: when recording
ends before COMMAND, sframe waits for it to exit after writing the
profile.

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
          unless -o is given

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
	kernel := fs.Bool("kernel", false, "add kernel frames to samples taken in the kernel")
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
		for _, f := range strings.Split(*pids, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return fs.fail("bad --pid: %q is not a process id", f)
			}
			opts.PIDs = append(opts.PIDs, n)
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
	if out == "" && *format == "pprof" {
		out = "profile.pb.gz"
	}

	// The heap the profiler touches first (the files' tables and symbols,
	// the profile: a few MB) in 2 MiB pages, as sframe report does:
	// faulting it in 4 KiB at a time cost 300-500 page faults of 15-40 us
	// each on a virtual machine, a fifth of a short recording's CPU time.
	hugeheap.Reserve(32 << 20)
	// A recording runs for long: collect garbage as usual, not only at
	// main's memory limit.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	prof, err := recorder.Record(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "sframe record: %s\n", recordError(err, operands))
		return 1
	}
	defer prof.Close()
	// A second Ctrl-C ends sframe while it writes or waits.
	stopSignals()
	for _, w := range prof.Warnings {
		fmt.Fprintf(stderr, "sframe record: warning: %s\n", w)
	}
	res := prof.Resolver()
	res.Demangle, res.Source, res.Inlines = !*noDemangle, *source || *inlines, *inlines
	var buf bytes.Buffer
	if *format == "folded" {
		err = prof.WriteFolded(&buf)
	} else {
		err = prof.WritePprof(&buf)
	}
	if err == nil {
		err = outfile.Write(out, buf.Bytes(), 0o644, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe record: %v\n", err)
		return 1
	}
	if !*quiet {
		prof.WriteSummary(stderr)
	}
	if prof.Command() != nil && !prof.Exited() {
		fmt.Fprintf(stderr, "sframe record: profile written; waiting for %s (process %d) to exit\n", operands[0], prof.Command().Pid)
		prof.Wait()
	}
	return 0
}

// recordError words an error of recorder.Record in one line: perfevent's
// errors without their package prefix, a command that cannot be started
// by its name.
func recordError(err error, command []string) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return command[0] + ": command not found"
	case len(command) > 0 && errors.As(err, &pe) && pe.Op != "open":
		return command[0] + ": " + pe.Err.Error()
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "perfevent: ")
	return strings.TrimPrefix(msg, "recorder: ")
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

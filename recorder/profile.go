package recorder

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// Profile is what a recording gave: its merged stacks, to write as a
// pprof profile or folded stacks, and statistics. It keeps the files the
// stacks' frames are in open until Close.
type Profile struct {
	// Stats count what was recorded.
	Stats Stats
	// Warnings are what the recording had to give up, one line each
	// (smaller ring buffers than asked for).
	Warnings []string
	// UserOnly says why time in the kernel was not sampled, when
	// kernel.perf_event_paranoid and the profiler's capabilities forbade
	// it; "" when it was.
	UserOnly string

	opts    Options
	event   perfevent.Event
	start   time.Time
	sess    *perfunwind.Session
	res     *perfunwind.Resolver
	attrs   []*perfdata.Attr
	csEvent int
	stacks  []*stack
	maps    []*perfunwind.Mapping // the stacks' mappings, by ID - 1

	// The command's end: its Wait error, once it has exited.
	cmd     *os.Process
	waited  <-chan error
	cmdErr  error
	cmdDone bool

	// Time spent writing: the profiler's CPU time and the addresses named.
	writeCPU time.Duration
	wrote    bool

	// part says the Profile is one period of a recording (Options.Period),
	// sharing the recording's session and Resolver.
	part bool
}

// cutPeriod hands the stacks of one period to Options.OnPeriod as a
// Profile of their own.
func (p *Profile) cutPeriod(stacks []*stack, maps []*perfunwind.Mapping, start, end time.Time) {
	q := &Profile{opts: p.opts, event: p.event, start: start, sess: p.sess, res: p.res, attrs: p.attrs, csEvent: p.csEvent,
		stacks: stacks, maps: maps, part: true, Warnings: p.Warnings}
	q.Stats.Wall = end.Sub(start)
	q.Stats.Stacks = len(stacks)
	for _, s := range stacks {
		q.Stats.Samples += uint64(s.n)
	}
	p.opts.OnPeriod(q)
	// The next period reads the JIT files again, with what the JITs made
	// since; the memory they took is not kept for the whole recording.
	p.sess.ForgetJIT()
}

// Period reports whether p is one period of a recording cut by
// Options.Period; its Close does nothing (the recording's files stay
// open until the Profile Record returned is closed).
func (p *Profile) Period() bool { return p.part }

// Start returns when the recording, or the period, began.
func (p *Profile) Start() time.Time { return p.start }

// Unwinding returns the statistics of how the samples were unwound.
func (p *Profile) Unwinding() *perfunwind.Stats { return &p.sess.Stats }

// Session returns the unwinding session, which knows the processes and
// files of the recording.
func (p *Profile) Session() *perfunwind.Session { return p.sess }

// Resolver returns the Resolver that names the stacks' frames when they
// are written; set its fields (source lines, inlined calls) before.
func (p *Profile) Resolver() *perfunwind.Resolver { return p.res }

// Close releases the files of the recording.
func (p *Profile) Close() error {
	if p.part {
		return nil
	}
	if p.res != nil {
		p.res.Close()
	}
	return p.sess.Close()
}

// Command returns the started command's process, nil when Options had
// none.
func (p *Profile) Command() *os.Process { return p.cmd }

// Wait waits until the command has exited, if it has not yet (recording
// stopped before it did), and returns what exec.Cmd.Wait returned: nil,
// or an *exec.ExitError for a failure exit status or death by signal.
// It returns nil at once without a command.
func (p *Profile) Wait() error {
	if p.waited == nil {
		return nil
	}
	if !p.cmdDone {
		p.cmdErr, p.cmdDone = <-p.waited, true
	}
	return p.cmdErr
}

// Exited reports whether the command has exited (Wait returns at once).
func (p *Profile) Exited() bool {
	if p.waited == nil || p.cmdDone {
		return p.cmdDone
	}
	select {
	case err := <-p.waited:
		p.cmdErr, p.cmdDone = err, true
	default:
	}
	return p.cmdDone
}

// Each calls fn with each merged stack that has samples, as a
// perfunwind.Stack with their number and summed periods (st.Period); st
// is reused between calls. With NewPerfBuilder, it lets a caller make
// profiles of its own choosing of the stacks (one per service, periods
// merged).
func (p *Profile) Each(fn func(st *perfunwind.Stack, n int64) error) error { return p.each(fn) }

// NewPerfBuilder returns a stackprof.PerfBuilder for the stacks of p (and
// of the recording's other periods), naming frames with its Resolver,
// its sample types as WritePprof's.
func (p *Profile) NewPerfBuilder() *stackprof.PerfBuilder {
	b := stackprof.NewPerfBuilder(p.res, &perfdata.Header{Attrs: p.attrs})
	if p.csEvent >= 0 {
		b.SetEventType(p.csEvent, "off-cpu", "nanoseconds")
	}
	return b
}

// each calls fn with each merged stack that has samples, as a
// perfunwind.Stack with their number and summed periods (st.Period).
func (p *Profile) each(fn func(st *perfunwind.Stack, n int64) error) error {
	var st perfunwind.Stack
	var frames []perfunwind.Frame
	for _, s := range p.stacks {
		if s.n == 0 {
			continue
		}
		frames = s.appendFrames(frames[:0], p.maps)
		st = perfunwind.Stack{Pid: s.pid, Tid: s.tid, Period: s.period, Event: s.event, Comm: s.comm, Exec: s.exec, Frames: frames, Kernel: s.kernel}
		if err := fn(&st, s.n); err != nil {
			return err
		}
	}
	return nil
}

// measure adds the profiler's CPU time that fn takes to writeCPU.
func (p *Profile) measure(fn func() error) error {
	before := cpuTime()
	err := fn()
	p.writeCPU += cpuTime() - before
	p.wrote = true
	return err
}

// WritePprof writes the profile in pprof's format (gzipped protocol
// buffers), as stackprof.PerfBuilder makes it from sframe report's
// stacks: sample types samples/count, cpu/nanoseconds (or the event's
// count), and with OffCPU off-cpu/nanoseconds; labels pid, thread and
// thread_name; the recording's start time and duration.
func (p *Profile) WritePprof(w io.Writer) error {
	return p.measure(func() error {
		b := p.NewPerfBuilder()
		if err := p.each(b.AddSamples); err != nil {
			return err
		}
		prof, err := b.Profile()
		if err != nil {
			return err
		}
		prof.TimeNanos = p.start.UnixNano()
		prof.DurationNanos = int64(p.Stats.Wall)
		return stackprof.WritePprof(w, prof)
	})
}

// ErrFoldedOffCPU is the error of WriteFolded for an off-CPU recording of
// an event whose periods are not times: its samples and the off-CPU
// nanoseconds have no common unit.
var ErrFoldedOffCPU = errors.New("folded stacks of off-CPU time need a time-based event (cpu-clock or task-clock)")

// WriteFolded writes folded stacks, as sframe report --format folded does:
// "comm;outer;...;inner count" lines, the count being the number of
// samples. With OffCPU, on-CPU and off-CPU stacks share one unit, the
// count is microseconds (the summed periods of cpu-clock or task-clock
// samples, the weights of switch-outs), and off-CPU stacks end with a
// frame "[off-cpu]".
func (p *Profile) WriteFolded(w io.Writer) error {
	if p.csEvent >= 0 && !TimeBased(p.event) {
		return ErrFoldedOffCPU
	}
	return p.measure(func() error {
		f := stackprof.NewFolded(p.res)
		if p.csEvent >= 0 {
			f.SetEventFrame(p.csEvent, "[off-cpu]")
		}
		err := p.each(func(st *perfunwind.Stack, n int64) error {
			if p.csEvent < 0 {
				return f.AddWeight(st, uint64(n))
			}
			if us := st.Period / 1000; us > 0 {
				return f.AddWeight(st, us)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return f.Write(w)
	})
}

// WriteSummary prints what the recording gave, for a person: samples
// taken and lost, how their stacks were unwound and why walks ended
// (perfunwind.WriteSummary), off-CPU switches, the command's exit, and the
// profiler's own CPU time per sample.
func (p *Profile) WriteSummary(w io.Writer) error {
	st := &p.Stats
	var b strings.Builder
	what := fmt.Sprintf("%s at %d Hz", p.event.Name, p.opts.freq())
	if p.csEvent >= 0 {
		what += " and every switch off the CPU"
	}
	if p.UserOnly != "" {
		what += " in user space only (" + p.UserOnly + ": the time in system calls and page faults is missing)"
	}
	fmt.Fprintf(&b, "recorded %s for %.2f s: %s, %s, %s; %d KiB of stack per sample, rings of %d KiB per CPU\n",
		what, st.Wall.Seconds(), plural(st.Processes, "process", "processes"), plural(st.Threads, "thread", "threads"),
		plural(st.Stacks, "distinct stack", "distinct stacks"), p.opts.stackSize()>>10, st.RingBytes>>10)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if err := perfunwind.WriteSummary(w, p.sess); err != nil {
		return err
	}
	b.Reset()
	if st.BPF {
		c := &st.BPFCounters
		fmt.Fprintf(&b, "walked in the kernel (--bpf): %d samples (%d taken in the kernel, walked from the saved user registers), %s per sample in the BPF program (the kernel's BPF statistics: %d runs)\n",
			c.Samples, c.KernelMode, c.RunTimePerSample(), c.Runs)
		fmt.Fprintf(&b, "  callers found by the files' rows %d, by frame pointers %d; reads of user memory %d; frames in no mapping %d, samples of processes without a table yet %d; samples passed on to the user-space walk %d\n",
			c.SFrameFrames, c.FPFrames, c.Reads, c.NoMapping, c.NoProcess, c.Fallback)
		fmt.Fprintf(&b, "  walks ended:")
		for i, n := range c.Stops {
			fmt.Fprintf(&b, " %s %d", bpfunwind.Stop(i), n)
		}
		if c.OutputErrors > 0 || st.BPFTruncated > 0 {
			fmt.Fprintf(&b, "; stacks lost (their ring full) %d, cut short %d", c.OutputErrors, st.BPFTruncated)
		}
		t := &st.BPFTables
		fmt.Fprintf(&b, "\n  tables: %d files, %d rows (%d idle, %d evicted, %d failed, %d without room)", t.Files, t.Rows, t.Idle, t.Evicted, t.Failed, t.Full)
		for i, n := range t.Skipped {
			if n > 0 {
				fmt.Fprintf(&b, "; rows left to frame pointers, %s: %d", bpfunwind.Reason(i), n)
			}
		}
		b.WriteString("\n")
	}
	if st.Lost > 0 {
		fmt.Fprintf(&b, "lost: %d samples dropped by the kernel (rings full: a larger ring, --stack-size or -F helps)\n", st.Lost)
	}
	if st.Deferred > 0 {
		fmt.Fprintf(&b, "samples that waited for earlier records of their process or thread (mappings, forks, names: still in another CPU's ring, or queued to be applied in time order), then unwound: %d\n", st.Deferred)
	}
	if st.Undecodable > 0 {
		fmt.Fprintf(&b, "records that did not decode: %d\n", st.Undecodable)
	}
	if p.csEvent >= 0 {
		fmt.Fprintf(&b, "off-CPU: %d switch-outs, %d weighted (%.3f s off the CPU; %d still off at the end), %d dropped (thread exited, or a switch lost)\n",
			st.SwitchOuts, st.OffCPU, st.OffCPUTime.Seconds(), st.AtEnd, st.Dropped)
	}
	if p.waited != nil && p.Exited() {
		var ee *exec.ExitError
		switch {
		case p.cmdErr == nil:
			fmt.Fprintf(&b, "command exited with status 0\n")
		case errors.As(p.cmdErr, &ee):
			fmt.Fprintf(&b, "command %s\n", ee.ProcessState)
		default:
			fmt.Fprintf(&b, "command: %v\n", p.cmdErr)
		}
	}
	fmt.Fprintf(&b, "profiler CPU: %s while recording, %.2f µs per sample (reading, unwinding, merging, and loading the files' tables)",
		roundDur(st.CPU), float64(st.CPUPerSample().Nanoseconds())/1000)
	if p.wrote {
		fmt.Fprintf(&b, "; %s to name the frames and write the profile", roundDur(p.writeCPU))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// plural returns "1 thing" or "N things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// roundDur rounds d for the summary.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

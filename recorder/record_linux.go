//go:build linux

package recorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/perfunwind"
)

// testBPFLoaded, set by tests, is given the loaded BPF unwinder, whose
// counters say when a recording has walked enough in the kernel (how
// long a new process's tables take to load depends on the machine's
// load, so a fixed length cannot).
var testBPFLoaded func(*bpfunwind.Unwinder)

// Record records the target of opts until it exits (every thread of the
// processes given, or the command), opts.Duration passes or ctx is done,
// and returns the merged stacks. Errors are one line, saying what to do:
// perf_event_paranoid forbids it (and which value is needed), the
// locked-memory limit, no such process, a command that cannot be started
// (exec.ErrNotFound when it is not found).
func Record(ctx context.Context, opts Options) (*Profile, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	host := arch.Host()
	if perfevent.UserRegsMask(host) == 0 {
		return nil, fmt.Errorf("no unwinder for %s", runtime.GOARCH)
	}
	ev := opts.event()
	var warnings []string
	var bu *bpfunwind.Unwinder
	if opts.BPF {
		var err error
		switch {
		case !bpfunwind.Supported:
			warnings = append(warnings, fmt.Sprintf("--bpf: no BPF walker for %s; walking the stacks in user space", runtime.GOARCH))
			opts.BPF = false
		default:
			events := 1
			if opts.OffCPU {
				events = 2
			}
			depth := opts.MaxDepth
			if depth == 0 {
				depth = bpfunwind.DefaultMaxDepth
				opts.MaxDepth = depth
			}
			if bu, err = bpfunwind.Load(bpfunwind.Options{MaxDepth: depth, Kernel: opts.Kernel, Fallback: true, Events: events,
				TableCache: bpfunwind.DefaultTableCache()}); err != nil {
				// Without the privilege, or on a kernel without what the
				// program needs (BTF, bpf_loop: Linux 5.17), the stacks
				// are walked here.
				why := err
				if errors.Is(err, bpfunwind.ErrPermission) {
					why = bpfunwind.ErrPermission
				}
				warnings = append(warnings, fmt.Sprintf("--bpf: %v; walking the stacks in user space", why))
				opts.BPF = false
			} else {
				defer bu.Close()
			}
		}
	}
	po, cs := opts.perfOptions(host)
	// Without SFrame compiled from the CFI of files that have none
	// (perfunwind.Options.NoSFrameFromCFI): the unwinder's Context keeps
	// the CFI rows it applied to return addresses in the fast path's
	// form, which costs less. Compiling, again for every new batch of
	// functions, took more than it saved on the thousands of functions
	// of a C++ compiler's stacks (cc1plus: 4.8-5.8 µs of unwinding per
	// sample with it, 3.5-4.5 without).
	sopts := perfunwind.Options{Arch: host, MaxDepth: opts.MaxDepth, SameKernel: true, SameMachine: true, Live: true, NoSFrameFromCFI: true}
	if opts.Kernel {
		sopts.Kallsyms = "/proc/kallsyms"
	}
	if bu != nil {
		sopts.CallchainSource = "the BPF walker"
	}
	sess, err := perfunwind.NewSession(sopts)
	if err != nil {
		return nil, err
	}
	p := &Profile{opts: opts, event: ev, sess: sess, csEvent: cs}
	// attach gives the program the session's events, before they start.
	attach := func(s *perfevent.Session) error {
		if bu == nil {
			return nil
		}
		if err := s.WakeOn(bu.WakeFD()); err != nil {
			return err
		}
		if err := s.WakeOn(bu.StackFD()); err != nil {
			return err
		}
		return s.SetBPF(bu.Programs())
	}
	mirror := bpfunwind.NewMirror()
	seed := func(pid int) {
		sess.SeedProcess(pid)
		if bu != nil {
			mirror.Set(uint32(pid), sess.Mappings(uint32(pid)))
			bu.SyncProcess(uint32(pid), mirror.Mappings(uint32(pid)))
		}
	}
	ok := false
	defer func() {
		if !ok {
			sess.Close()
		}
	}()

	cpu0 := cpuTime()
	var s *perfevent.Session
	var waited <-chan error
	if opts.Command != nil {
		if s, waited, err = startCommand(po, opts.Command, attach); err != nil {
			return nil, err
		}
		p.cmd, p.waited = opts.Command.Process, waited
	} else {
		po.PIDs, po.SystemWide = opts.PIDs, opts.SystemWide
		if s, err = perfevent.Open(po); err != nil {
			return nil, err
		}
		if err := attach(s); err != nil {
			s.Close()
			return nil, err
		}
		// What the processes mapped before: from /proc. For given
		// processes, read after Enable, so that nothing falls between
		// /proc and the records (a process that exited since Open is not
		// an error: its events hang up). For every process, before:
		// reading them all takes long enough to fill the rings, and what
		// starts in between is missed, as with perf record -a.
		if opts.SystemWide {
			for _, pid := range allProcesses() {
				seed(pid)
			}
		} else if bu != nil {
			// The walker's tables, before the first samples: seeded again
			// below for what changes in between.
			for _, pid := range opts.PIDs {
				seed(pid)
			}
		}
		if err := s.Enable(); err != nil {
			s.Close()
			return nil, err
		}
		for _, pid := range opts.PIDs {
			seed(pid)
		}
	}
	defer s.Close()
	p.start = time.Now()
	var attrs []*perfdata.Attr
	for _, a := range s.Attrs() {
		attrs = append(attrs, a.Attr)
	}
	p.attrs = attrs
	p.Warnings, p.UserOnly = append(warnings, s.Warnings()...), s.UserOnly()
	p.Stats.RingBytes = s.RingPages() * os.Getpagesize()
	// Samples wait for the records before them at most two passes over
	// the rings: about two rings' worth per CPU.
	r := newRecorder(sess, host, attrs, cs, max(2*p.Stats.RingBytes*runtime.NumCPU(), 16<<20))
	if bu != nil {
		r.bpf, r.mirror = bu, mirror
		if testBPFLoaded != nil {
			testBPFLoaded(bu)
		}
	}
	r.poll = s.SetPollInterval
	if opts.OnPeriod != nil {
		// Periods name their frames as they are cut.
		p.res = perfunwind.NewResolver(sess)
		r.onCut, r.period, r.periodStart = p.cutPeriod, opts.Period, p.start
	}
	if opts.Command != nil {
		r.waitFirst, r.fast = true, true
		s.SetPollInterval(fastPoll)
	}
	if opts.Started != nil {
		opts.Started()
	}

	// Whatever comes first stops the recording.
	runDone, stopped := make(chan struct{}), make(chan struct{})
	var cmdErr error
	var cmdDone bool
	go func() {
		defer close(stopped)
		var timeout <-chan time.Time
		if opts.Duration > 0 {
			t := time.NewTimer(opts.Duration)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		case cmdErr = <-waited: // nil channel without a command
			cmdDone = true
		case <-runDone:
			return
		}
		s.Stop()
	}()
	err = s.Run(r.handle)
	close(runDone)
	<-stopped
	end := monotonicNow()
	p.Stats.Wall = time.Since(p.start)
	if err != nil {
		return nil, err
	}
	r.finish(end)
	if r.onCut != nil {
		r.cut(time.Now())
	}
	p.cmdErr, p.cmdDone = cmdErr, cmdDone
	st := s.Stats()
	r.stats.Lost = st.Lost
	r.stats.Wall, r.stats.RingBytes = p.Stats.Wall, p.Stats.RingBytes
	p.Stats = r.stats
	if bu != nil {
		p.Stats.BPF, p.Stats.BPFCounters, p.Stats.BPFTables = true, bu.Counters(), bu.Tables
	}
	sess.Stats.Read = r.stats.Samples
	if r.onCut == nil {
		p.stacks, p.maps = r.order, r.maps
		// Unwinding is over: naming needs the mappings and files, not
		// their tables, which may go to the next collection.
		sess.DropTables(r.maps)
		p.res = perfunwind.NewResolver(sess)
	}
	p.Stats.CPU = cpuTime() - cpu0
	ok = true
	return p, nil
}

// startCommand opens the events on a thread of this process locked for
// the purpose, starts the command from that thread (the child inherits
// the events, which start when it executes the command) and leaves the
// thread waiting for the child: it is the child's parent, whose death
// would fire a PR_SET_PDEATHSIG the command may have asked for, and no
// other goroutine may fork from it while it holds the events. The thread
// ends with the goroutine (it is never unlocked). attach is called on
// the session before the command starts. The returned channel receives
// the command's Wait error when it exits.
func startCommand(po perfevent.Options, cmd *exec.Cmd, attach func(*perfevent.Session) error) (*perfevent.Session, <-chan error, error) {
	type started struct {
		s   *perfevent.Session
		err error
	}
	ch := make(chan started)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		po.TIDs = []int{unix.Gettid()}
		po.EnableOnExec = true
		s, err := perfevent.Open(po)
		if err != nil {
			ch <- started{err: err}
			return
		}
		if err := attach(s); err != nil {
			s.Close()
			ch <- started{err: err}
			return
		}
		if err := cmd.Start(); err != nil {
			s.Close()
			ch <- started{err: err}
			return
		}
		ch <- started{s: s}
		waited <- cmd.Wait()
	}()
	st := <-ch
	return st.s, waited, st.err
}

// allProcesses lists the processes in /proc.
func allProcesses() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// monotonicNow returns CLOCK_MONOTONIC in nanoseconds, the clock of the
// records.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// cpuTime returns this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package perfunwind

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/sframekit/sframekit/perfdata"
)

// Filter selects samples: by process, by thread, by thread name. An empty
// set selects all; a sample passes when it passes every set.
type Filter struct {
	Pids, Tids map[uint32]bool
	Comms      map[string]bool
}

// pass reports whether a sample of pid and tid, of the thread named comm,
// passes f.
func (f *Filter) pass(pid, tid uint32, comm string) bool {
	return (len(f.Pids) == 0 || f.Pids[pid]) && (len(f.Tids) == 0 || f.Tids[tid]) && (len(f.Comms) == 0 || f.Comms[comm])
}

// ProcessOptions adjust Process.
type ProcessOptions struct {
	// Filter selects the samples passed on.
	Filter Filter
	// Progress, if not nil, is called now and then with the input offset
	// reached (perfdata.Record.Offset).
	Progress func(off int64)
	// Pipeline calls fn on a goroutine of its own, in the order of the
	// samples, while Process reads and unwinds the ones after: the
	// formatting of the stacks takes another processor. fn must then
	// not use the Session itself while Process runs; Resolvers, the
	// stacks' Mappings and Files can be used, not Session's methods.
	// Each stack is still valid only until fn returns.
	Pipeline bool
	// Stop, if not nil, ends Process when it is set (by a signal
	// handler): Process returns ErrStopped before the next record, once
	// fn has had the stacks unwound before.
	Stop *atomic.Bool
}

// ErrStopped is Process's error when ProcessOptions.Stop ended it.
var ErrStopped = errors.New("stopped")

// Process reads the records of r (set to time order, as perf script
// reads them, before its first record) to the end: it applies those that
// describe processes (Record), unwinds each sample that passes the filter
// and calls fn with its stack, which is valid until fn returns. It
// returns the first error of fn, or of r after every record before it
// was processed; nil at the end of the input.
func (s *Session) Process(r *perfdata.Reader, opts ProcessOptions, fn func(*Stack) error) error {
	if opts.Pipeline {
		return s.processPipelined(r, opts, fn)
	}
	var st Stack
	return s.process(r, opts, func() *Stack { return &st }, fn)
}

// process is Process's loop: each sample is unwound into the stack next
// returns, then given to emit.
func (s *Session) process(r *perfdata.Reader, opts ProcessOptions, next func() *Stack, emit func(*Stack) error) error {
	r.SetTimeOrder(true)
	defer func() { s.Stats.Unordered = r.Unordered() }()
	var smp Sample
	for n := 0; ; n++ {
		if opts.Stop != nil && opts.Stop.Load() {
			return ErrStopped
		}
		rec, err := r.Next()
		if err == io.EOF {
			s.forgetExited(^uint64(0)) // no sample comes after them now
			return nil
		}
		if err != nil {
			return err
		}
		if opts.Progress != nil && n&4095 == 0 {
			opts.Progress(rec.Offset)
		}
		if rec.Type < perfdata.RecordUserTypeStart && !s.adopted {
			if s.opts.RecordingEnd.IsZero() {
				s.opts.RecordingEnd = r.ModTime()
			}
			if err := s.adopt(r.Header()); err != nil {
				return err
			}
		}
		if rec.Type != perfdata.RecordSample {
			s.Record(rec)
			continue
		}
		ps := rec.Sample()
		if ps == nil {
			continue
		}
		s.Stats.Read++
		var changes []readChange
		if rec.Attr.SampleType&perfdata.SampleRead != 0 && ps.Read.Format&perfdata.FormatID != 0 {
			// Before the filter, as perf script takes them: a
			// counter's change since its last sample of any thread.
			changes = s.readChanges(r, rec.Attr, ps)
		}
		if !opts.Filter.pass(ps.Pid, ps.Tid, s.ThreadName(ps.Tid)) {
			continue
		}
		smp.FromPerf(ps, s.opts.Arch)
		smp.Event = rec.Attr.Index
		smp.NoCallGraph = rec.Attr.SampleType&(perfdata.SampleCallchain|perfdata.SampleRegsUser|perfdata.SampleStackUser) == 0
		if i := rec.Attr.Index; smp.NoCallGraph && (i >= len(s.noCallGraph) || s.noCallGraph[i] == nil) {
			if i >= len(s.noCallGraph) {
				s.noCallGraph = append(s.noCallGraph, make([]*perfdata.Attr, i+1-len(s.noCallGraph))...)
			}
			s.noCallGraph[i] = rec.Attr
		}
		smp.IPKernel = rec.Misc&perfdata.MiscCPUModeMask == perfdata.MiscKernel
		st := next()
		s.Unwind(&smp, st)
		if changes != nil {
			err = emitRead(changes, st, next, emit)
		} else {
			err = emit(st)
		}
		if err != nil {
			return err
		}
	}
}

// readKey names a counter whose samples read it: its sample ID, and the
// thread for an inherited event's (readChanges).
type readKey struct {
	id  uint64
	tid uint32
}

// readChange is a counter's change at a sample: its event and by how much.
type readChange struct {
	event  int
	period uint64
}

// readChanges returns the changes of the counters that sample ps of event
// a read (PERF_SAMPLE_READ: perf record -e '{a,b}:S', whose leader's
// samples read the group) since their last sample, as perf script and
// perf report take them: those that changed, each of its counter's event;
// a counter of no known event is left out, as perf leaves it. An
// inherited event's samples read the counter of their own thread, under
// the ID of the event perf opened (kernels 6.12 on): its changes are per
// thread, as perf (6.12 on) takes them, where perf 6.1 subtracts one
// thread's count from another's and prints periods of 2^64 less a little.
// The slice is reused by the next call; it is not nil.
func (s *Session) readChanges(r *perfdata.Reader, a *perfdata.Attr, ps *perfdata.Sample) []readChange {
	if s.readLast == nil {
		s.readLast = map[readKey]uint64{}
	}
	var tid uint32
	if a.Flags&perfdata.AttrInherit != 0 && a.SampleType&perfdata.SampleTID != 0 {
		tid = ps.Tid
	}
	ch := s.readScratch[:0]
	for i := range ps.Read.Len() {
		c := ps.Read.Counter(i)
		ca := r.AttrByID(c.ID)
		if ca == nil {
			continue
		}
		k := readKey{c.ID, tid}
		last := s.readLast[k]
		s.readLast[k] = c.Value
		if c.Value != last {
			ch = append(ch, readChange{ca.Index, c.Value - last})
		}
	}
	s.readScratch = ch
	return ch
}

// emitRead passes on the stack st of a sample that read counters once
// for each of their changes, as a sample of the change's event and
// period, the same stack copied for each after the first; not at all
// when no counter changed.
func emitRead(changes []readChange, st *Stack, next func() *Stack, emit func(*Stack) error) error {
	var prev *Stack
	for _, c := range changes {
		cur := st
		if prev != nil {
			// The next stack to fill; in a pipeline, prev is only
			// read by fn, in a loop without one cur is prev.
			if cur = next(); cur != prev {
				frames := cur.Frames[:0]
				*cur = *prev
				cur.Frames = append(frames, prev.Frames...)
			}
		}
		cur.Event, cur.Period = c.event, c.period
		if err := emit(cur); err != nil {
			return err
		}
		prev = cur
	}
	return nil
}

// pipeBatch is the number of stacks handed to the goroutine of
// ProcessOptions.Pipeline at once, and pipeBatches the number of batches
// in flight (1,024 stacks, about 300 KB of frames): enough that the
// unwinding rarely waits for fn's bursts (a file's symbols loaded at
// its first frame), few enough that a batch's frames are still in the
// cache when it comes back to be filled (with 16 batches, the stores of
// the frames missed, a tenth of the unwinding's time).
const (
	pipeBatch   = 128
	pipeBatches = 8
)

// processPipelined is Process with fn on a goroutine of its own: stacks
// go to it in batches, which come back, with their frames' memory, to
// be filled again.
func (s *Session) processPipelined(r *perfdata.Reader, opts ProcessOptions, fn func(*Stack) error) error {
	type batch struct {
		st []Stack
		n  int
	}
	full := make(chan *batch, pipeBatches)
	free := make(chan *batch, pipeBatches)
	for range pipeBatches {
		free <- &batch{st: make([]Stack, pipeBatch)}
	}
	var fnErr error
	var failed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range full {
			for i := range b.st[:b.n] {
				if fnErr != nil {
					break
				}
				if err := fn(&b.st[i]); err != nil {
					fnErr = err
					failed.Store(true)
				}
			}
			free <- b
		}
	}()
	cur := <-free
	errFailed := errors.New("fn failed")
	err := s.process(r, opts, func() *Stack { return &cur.st[cur.n] }, func(*Stack) error {
		if cur.n++; cur.n < len(cur.st) {
			return nil
		}
		if failed.Load() {
			return errFailed
		}
		full <- cur
		cur = <-free
		cur.n = 0
		return nil
	})
	if cur.n > 0 {
		full <- cur
	}
	close(full)
	<-done
	if fnErr != nil {
		return fnErr
	}
	return err
}

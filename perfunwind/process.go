package perfunwind

import (
	"io"

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
}

// Process reads the records of r (set to time order, as perf script
// reads them, before its first record) to the end: it applies those that
// describe processes (Record), unwinds each sample that passes the filter
// and calls fn with its stack, which is valid until fn returns. It
// returns the first error of fn, or of r after every record before it
// was processed; nil at the end of the input.
func (s *Session) Process(r *perfdata.Reader, opts ProcessOptions, fn func(*Stack) error) error {
	r.SetTimeOrder(true)
	var smp Sample
	var st Stack
	for n := 0; ; n++ {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if opts.Progress != nil && n&4095 == 0 {
			opts.Progress(rec.Offset)
		}
		if rec.Type < perfdata.RecordUserTypeStart && !s.adopted {
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
		if !opts.Filter.pass(ps.Pid, ps.Tid, s.ThreadName(ps.Tid)) {
			continue
		}
		smp.FromPerf(ps, s.opts.Arch)
		smp.Event = rec.Attr.Index
		s.Unwind(&smp, &st)
		if err := fn(&st); err != nil {
			return err
		}
	}
}

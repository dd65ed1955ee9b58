package stackprof

import (
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/unwind"
)

// Sampling says how Sample captures: Count times, Interval apart; closing
// Stop (a signal's doing) ends the captures after the one under way, and
// the profile has those made.
type Sampling struct {
	Count    int
	Interval time.Duration
	Stop     <-chan struct{}
}

// Sample captures the stacks of a program (capture attaches, unwinds and
// detaches) as often as s says, names their frames with tr, and returns
// the captures made as one profile (nil when none was), their number,
// and the error of the capture that failed, which ends the sampling: a
// process that exits (targets.ErrGone) or fails after the first capture
// still leaves a profile of those before.
func Sample(tr *unwind.Tracer, capture func() (*unwind.Trace, error), s Sampling) (*profile.Profile, int, error) {
	b := NewBuilder()
	n := 0
	var err error
captures:
	for ; n < s.Count && !closed(s.Stop); n++ {
		if n > 0 {
			select {
			case <-time.After(s.Interval):
			case <-s.Stop:
				break captures
			}
		}
		var trace *unwind.Trace
		if trace, err = capture(); err != nil {
			break
		}
		tr.Symbolize(trace)
		b.Add(trace)
	}
	if n == 0 {
		return nil, 0, err
	}
	p, perr := b.Profile()
	if perr != nil {
		return nil, n, perr
	}
	return p, n, err
}

// closed reports whether c (nil: never) is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

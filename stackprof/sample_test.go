package stackprof

import (
	"errors"
	"testing"

	"github.com/sframekit/sframekit/unwind"
)

// TestSample checks the sampling loop's ends: all the captures asked
// for; a failed capture, which ends it with the profile of those before
// (none, and no profile, when the first fails); a stop before the first.
func TestSample(t *testing.T) {
	tr := unwind.NewTracer()
	errFail := errors.New("attach failed")
	calls := 0
	failAt := 0
	capture := func() (*unwind.Trace, error) {
		calls++
		if calls == failAt {
			return nil, errFail
		}
		return &unwind.Trace{PID: 1}, nil // no threads: the loop is what is tested
	}
	for _, c := range []struct {
		count, failAt, want int
		err                 error
		profile             bool
	}{
		{count: 3, want: 3, profile: true},
		{count: 3, failAt: 2, want: 1, err: errFail, profile: true},
		{count: 3, failAt: 1, want: 0, err: errFail},
	} {
		calls, failAt = 0, c.failAt
		p, n, err := Sample(tr, capture, Sampling{Count: c.count})
		if n != c.want || !errors.Is(err, c.err) || (p != nil) != c.profile {
			t.Errorf("count %d, failing at %d: %d captures, error %v, profile %v; want %d, %v, %v", c.count, c.failAt, n, err, p != nil, c.want, c.err, c.profile)
		}
	}
	stop := make(chan struct{})
	close(stop)
	calls, failAt = 0, 0
	if p, n, err := Sample(tr, capture, Sampling{Count: 3, Stop: stop}); p != nil || n != 0 || err != nil || calls != 0 {
		t.Errorf("stopped before: profile %v, %d captures (%d calls), error %v", p != nil, n, calls, err)
	}
}

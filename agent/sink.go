package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// shipment is one service's profile of one period, encoded once and
// shared by every sink.
type shipment struct {
	service    string
	labels     map[string]string
	start, end time.Time
	pprof      []byte // gzipped pprof
	prof       *profile.Profile
}

// decorate gives each sample of a period's profile its process's string
// labels (pid and container_id: Pyroscope makes series of string labels,
// not of numeric ones) and the profile its period's time.
func decorate(prof *profile.Profile, procs map[uint32]*procInfo, start, end time.Time) {
	prof.TimeNanos = start.UnixNano()
	prof.DurationNanos = int64(end.Sub(start))
	labels := map[int64]map[string][]string{}
	for _, s := range prof.Sample {
		pids := s.NumLabel["pid"]
		if len(pids) != 1 {
			continue
		}
		l := labels[pids[0]]
		if l == nil {
			l = map[string][]string{"pid": {strconv.FormatInt(pids[0], 10)}}
			for k, v := range s.Label {
				l[k] = v
			}
			if pi := procs[uint32(pids[0])]; pi != nil && pi.container != "" {
				l["container_id"] = []string{pi.container}
			}
			labels[pids[0]] = l
		}
		if name := s.Label["thread_name"]; len(name) == 1 && (len(l["thread_name"]) != 1 || l["thread_name"][0] != name[0]) {
			// Threads of a process differ in name: a map of their own.
			m := make(map[string][]string, len(l))
			for k, v := range l {
				m[k] = v
			}
			m["thread_name"] = name
			s.Label = m
			continue
		}
		s.Label = l
	}
}

// encode returns prof in pprof's gzipped encoding.
func encode(prof *profile.Profile) ([]byte, error) {
	var buf bytes.Buffer
	if err := prof.Write(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sender ships one profile to a destination; an error that is final
// (the destination refuses this profile, for good) is errRefused.
type sender interface {
	send(ctx context.Context, s *shipment) error
}

// errRefused marks a send error in which the destination refused the
// profile (an HTTP 4xx answer): it is retried up to maxRefusals times,
// then dropped. Pyroscope refuses with 422 both what it cannot take and,
// for a few seconds after it starts or while it stops, everything ("at
// least 1 live replicas required"), so one refusal is not final.
var errRefused = errors.New("refused")

// maxRefusals bounds the refusals of one profile: with the back-off,
// about a minute of them.
const maxRefusals = 8

// sink is a destination with its queue: a goroutine sends the queued
// profiles oldest first, retrying with back-off, while the agent keeps
// sampling. The queue holds at most max profiles; past that the oldest is
// dropped and counted.
type sink struct {
	name string
	to   sender
	max  int
	log  io.Writer

	mu       sync.Mutex
	queue    []*shipment
	closed   bool
	wake     chan struct{}
	st       SinkStats
	failing  bool
	refused  int       // refusals of the profile at the head of the queue
	inflight *shipment // being sent: the head of the queue, kept there
	// Drops for a full queue are logged when they start, then summed
	// up at most once a dropLogEvery and when the sink sends again: one
	// line a period would flood the log while a sink is down. dropLogged
	// is when the last line was written (zero: none since the sink last
	// sent); unlogged counts the drops since.
	dropLogged time.Time
	unlogged   uint64
}

// dropLogEvery is how often, at most, drops for a full queue are logged
// while they go on.
const dropLogEvery = time.Minute

func newSink(name string, to sender, max int, log io.Writer) *sink {
	return &sink{name: name, to: to, max: max, log: log, wake: make(chan struct{}, 1)}
}

// push queues one period's profiles, dropping the oldest queued ones
// of earlier periods while more than max wait: a period of more services
// than max is queued whole, so that a sink that keeps up loses nothing
// (-a makes a profile for each program that ran, dozens a period), and
// at most max profiles of earlier periods wait with it. It never blocks.
func (k *sink) push(batch []*shipment) {
	if len(batch) == 0 {
		return
	}
	k.mu.Lock()
	old := len(k.queue)
	k.queue = append(k.queue, batch...)
	dropped := 0
	for len(k.queue) > max(k.max, len(batch)) && old > 0 {
		// The oldest not being sent right now.
		i := 0
		if k.queue[0] == k.inflight {
			if old == 1 {
				break
			}
			i = 1
		}
		k.queue = append(k.queue[:i], k.queue[i+1:]...)
		old--
		dropped++
	}
	if dropped > 0 {
		k.st.Dropped += uint64(dropped)
		k.noteDropped(uint64(dropped), time.Now())
	}
	k.mu.Unlock()
	k.signal()
}

// noteDropped logs n profiles dropped for a full queue at now: at once
// if they are the first since the sink last sent, else in the summary
// written a dropLogEvery after the last line. k.mu is held.
func (k *sink) noteDropped(n uint64, now time.Time) {
	if k.dropLogged.IsZero() {
		k.dropLogged = now
		fmt.Fprintf(k.log, "sframe agent: %s: queue full (%d profiles): dropped %d of the oldest (%d dropped in all); further drops are logged once a minute and when it sends again\n", k.name, k.max, n, k.st.Dropped)
		return
	}
	k.unlogged += n
	if now.Sub(k.dropLogged) >= dropLogEvery {
		k.logDrops(now)
	}
}

// logDrops writes the summary of the drops not logged yet, if any. k.mu
// is held.
func (k *sink) logDrops(now time.Time) {
	if k.unlogged > 0 {
		fmt.Fprintf(k.log, "sframe agent: %s: queue full: dropped %d more of the oldest in %s (%d dropped in all)\n", k.name, k.unlogged, now.Sub(k.dropLogged).Round(time.Second), k.st.Dropped)
	}
	k.unlogged, k.dropLogged = 0, now
}

func (k *sink) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// close says nothing more will be pushed: run returns once the queue is
// empty (or its context ends).
func (k *sink) close() {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.signal()
}

func (k *sink) stats() SinkStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.st
	st.Queued = uint64(len(k.queue))
	return st
}

// Back-off between failed attempts: doubling from minBackoff to
// maxBackoff; each attempt is bounded by sendTimeout.
const (
	minBackoff  = 500 * time.Millisecond
	maxBackoff  = 30 * time.Second
	sendTimeout = 10 * time.Second
)

// run sends queued profiles until ctx ends, or the sink is closed and
// its queue empty.
func (k *sink) run(ctx context.Context) {
	defer func() {
		// Drops not logged yet are, as the agent stops.
		k.mu.Lock()
		k.logDrops(time.Now())
		k.mu.Unlock()
	}()
	backoff := minBackoff
	for {
		k.mu.Lock()
		var s *shipment
		if len(k.queue) > 0 {
			s = k.queue[0]
		}
		k.inflight = s
		closed := k.closed
		k.mu.Unlock()
		if s == nil {
			if closed {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-k.wake:
			}
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, sendTimeout)
		err := k.to.send(sctx, s)
		cancel()
		k.mu.Lock()
		k.inflight = nil
		final := false
		if errors.Is(err, errRefused) {
			k.refused++
			final = k.refused >= maxRefusals
		}
		switch {
		case err == nil || final:
			k.refused = 0
			k.queue[0] = nil // s: push keeps the head in flight
			k.queue = k.queue[1:]
			if err == nil {
				k.st.Sent++
				k.st.LastError = ""
				if !k.dropLogged.IsZero() {
					k.logDrops(time.Now())
					k.dropLogged = time.Time{}
				}
				if k.failing {
					fmt.Fprintf(k.log, "sframe agent: %s: sending again (%d queued)\n", k.name, len(k.queue))
				}
				k.failing = false
			} else {
				k.st.Dropped++
				k.st.LastError = err.Error()
				fmt.Fprintf(k.log, "sframe agent: %s: %v: profile of %s dropped after %d refusals\n", k.name, err, s.service, maxRefusals)
			}
			backoff = minBackoff
		default:
			k.st.Retries++
			k.st.LastError = err.Error()
			if !k.failing {
				fmt.Fprintf(k.log, "sframe agent: %s: %v (retrying; %d queued)\n", k.name, err, len(k.queue))
			}
			k.failing = true
		}
		k.mu.Unlock()
		if err != nil && !final {
			if closed && ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

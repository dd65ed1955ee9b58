package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// MaxProfileSeconds bounds /debug/pprof/profile?seconds=N: each waiting
// request holds a builder that grows with the stacks of its seconds.
const MaxProfileSeconds = 600

// maxWaiting bounds the profile requests waiting at once; more get 503.
const maxWaiting = 16

// request is one /debug/pprof/profile request: its stacks are those of
// the ticks after the one it was taken at (takeRequests), as many as its
// seconds.
type request struct {
	sec   time.Duration
	end   time.Time // set when taken: the tick at or after it ends it
	start time.Time // when taken
	b     *stackprof.PerfBuilder
	done  chan []byte // the encoded profile, nil on failure
}

// handler returns the agent's HTTP handler.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", a.serveProfile)
	mux.HandleFunc("/healthz", a.serveHealth)
	return mux
}

// serveProfile answers as Go's net/http/pprof does: a pprof profile of
// the next seconds (default 30), attached as "profile".
func (a *Agent) serveProfile(w http.ResponseWriter, r *http.Request) {
	sec := int64(30)
	if s := r.FormValue("seconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n > MaxProfileSeconds {
			http.Error(w, fmt.Sprintf("seconds: want 1 to %d", MaxProfileSeconds), http.StatusBadRequest)
			return
		}
		sec = n
	}
	req := &request{sec: time.Duration(sec) * time.Second, done: make(chan []byte, 1)}
	a.mu.Lock()
	if len(a.waiting)+len(a.active) >= maxWaiting {
		a.mu.Unlock()
		http.Error(w, "too many profile requests waiting", http.StatusServiceUnavailable)
		return
	}
	a.waiting = append(a.waiting, req)
	a.mu.Unlock()
	select {
	case data := <-req.done:
		if data == nil {
			http.Error(w, "profile could not be made", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
		w.Write(data)
	case <-r.Context().Done():
		a.mu.Lock()
		a.cancel(req)
		a.mu.Unlock()
	}
}

// cancel forgets req (its client went away); a.mu is held.
func (a *Agent) cancel(req *request) {
	for _, list := range []*[]*request{&a.waiting, &a.active} {
		for i, q := range *list {
			if q == req {
				*list = append((*list)[:i], (*list)[i+1:]...)
				return
			}
		}
	}
}

// takeRequests makes the waiting requests active at the end of the tick
// at now, each with a builder (on the reader goroutine, which owns the
// builders): the next ticks' stacks are theirs, until the tick within
// half a tick of their seconds' end. Counted from their first tick, not
// from when they came, so that a request gets as many ticks as seconds
// however late ticks come.
func (a *Agent) takeRequests(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.waiting {
		r.b = a.builder()
		r.start, r.end = now, now.Add(r.sec-tick/2)
		a.active = append(a.active, r)
	}
	a.waiting = a.waiting[:0]
}

// answer hands their profiles to the active requests whose seconds have
// passed by now.
func (a *Agent) answer(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := a.active[:0]
	for _, r := range a.active {
		if now.Before(r.end) {
			kept = append(kept, r)
			continue
		}
		a.finish(r, now)
	}
	clear(a.active[len(kept):])
	a.active = kept
}

// answerAll answers every request with what it has, the agent stopping.
func (a *Agent) answerAll() {
	now := time.Now()
	a.takeRequests(now)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.active {
		a.finish(r, now)
	}
	clear(a.active)
	a.active = a.active[:0]
}

// finish encodes r's profile and hands it over.
func (a *Agent) finish(r *request, now time.Time) {
	prof, err := r.b.Profile()
	if err != nil {
		r.done <- nil
		return
	}
	decorate(prof, a.procs, r.start, now)
	data, err := encode(prof)
	if err != nil {
		data = nil
	}
	r.done <- data
}

// health is what /healthz answers, as JSON.
type health struct {
	Status   string               `json:"status"`
	Hostname string               `json:"hostname"`
	Periods  uint64               `json:"periods"`
	Profiles uint64               `json:"profiles"`
	Samples  uint64               `json:"samples"`
	Bytes    uint64               `json:"bytes"`
	Session  perfunwind.Sizes     `json:"session"`
	Sinks    map[string]SinkStats `json:"sinks"`
}

// serveHealth answers 200 with the agent's counts; status is "ok", or
// "degraded" while a sink fails.
func (a *Agent) serveHealth(w http.ResponseWriter, r *http.Request) {
	st := a.Stats()
	h := health{Status: "ok", Hostname: a.hostname, Periods: st.Periods, Profiles: st.Profiles, Samples: st.Samples, Bytes: st.Bytes, Session: st.Session, Sinks: st.Sinks}
	for _, s := range st.Sinks {
		if s.LastError != "" {
			h.Status = "degraded"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(h)
}

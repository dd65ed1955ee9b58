// Package agent is sframe agent: a continuous profiler for a fleet. It
// samples processes all the time at a low rate with the same unwinding as
// sframe record (package recorder: SFrame, then CFI, then frame pointers,
// per frame, as each sample is read), cuts the samples into periods, and
// ships each period as pprof profiles, one per service, to the engines
// fleets already run: Grafana Pyroscope (its HTTP ingest API), scrapers of
// pprof over HTTP (go tool pprof, Parca, Grafana Alloy's pyroscope.scrape)
// and OpenTelemetry collectors. It stores nothing of its own.
//
// # Periods
//
// The recorder hands the agent a tick of stacks every second
// (recorder.Options.Period); the agent adds each tick's stacks to one
// stackprof.PerfBuilder per service, which names each address once, and
// at the end of each period (Options.Period, 15 s by default) makes and
// encodes their profiles, all on the goroutine that reads the perf rings:
// naming and encoding take a few milliseconds a period, while the rings
// hold seconds of samples at the agent's rate. Shipping happens on
// goroutines of its own, from bounded queues: sampling never waits for a
// network.
//
// # Services and labels
//
// A service is an executable's name (the base name of /proc/PID/exe, else
// the process's name), or with Options.ServiceLabel the value of another
// label of the process (container_id, or the cgroup path). Every sample
// carries the labels pid, thread (number), thread_name and, in a
// container, container_id (the 64-hex-digit id in its cgroup path); each
// profile's mappings carry the files' build IDs, and Pyroscope's series
// also get service_name and hostname.
//
// # Bounds
//
// Everything the agent keeps is bounded and released: a period's builders
// are dropped once encoded; what it knows of a process (service, labels)
// is forgotten after a period without its samples; the queue of unsent
// periods holds at most Options.QueueLen profiles of earlier periods
// besides the last period's (the oldest dropped and counted past that); the recorder forgets each tick's stacks once handed
// over, and processes at their exit; at each period's end the files no
// process maps any more are forgotten with their unwind tables and
// symbols (perfunwind.Session.Sweep).
//
// The profiled programs are never stopped, traced or signalled.
//
// Linux only, as package recorder: on other systems the agent fails at
// start with an error saying so.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/recorder"
	"github.com/sframekit/sframekit/stackprof"
)

// Defaults of Options.
const (
	// DefaultFreq is the sampling frequency: 99 Hz, low enough to run all
	// the time (a sample every 10 ms of CPU), off the 100 Hz of periodic
	// activity.
	DefaultFreq = 99
	// DefaultPeriod is how much time each shipped profile covers, as
	// Pyroscope's own agents ship.
	DefaultPeriod = 15 * time.Second
	// DefaultQueueLen is the number of profiles kept for a sink that
	// cannot take them now: at one service, four minutes of periods.
	DefaultQueueLen = 16
	// tick is how often the recorder hands over its stacks; it is the
	// resolution of periods and of /debug/pprof/profile?seconds=N.
	tick = time.Second
)

// Options say what the agent profiles and where its profiles go.
type Options struct {
	// Record says what to sample and how: PIDs or SystemWide (a Command
	// is sframe record's), Freq (DefaultFreq when 0), Event, Kernel,
	// OffCPU, StackSize, MaxDepth, BPF (stacks walked in the kernel,
	// where it is permitted; else in user space, with a warning). Its
	// Period and OnPeriod are the agent's.
	Record recorder.Options
	// Cgroup, if not "", keeps only the processes of this cgroup (a path
	// under /sys/fs/cgroup, or as /proc/PID/cgroup names it) and of the
	// cgroups below it, with system-wide sampling.
	Cgroup string
	// Period is how much time each profile covers: DefaultPeriod when 0.
	Period time.Duration
	// ServiceLabel chooses what names a service: "" or "executable" (the
	// executable's name), "container_id" (the process's container, its
	// executable's name outside containers) or "cgroup" (its cgroup path).
	ServiceLabel string
	// Hostname labels every profile; os.Hostname when "".
	Hostname string
	// Pyroscope is the base URL of a Grafana Pyroscope server
	// (http://host:4040) that each period's profiles are pushed to.
	Pyroscope string
	// OTLP is an OpenTelemetry collector's OTLP endpoint that each
	// period's profiles are exported to as OpenTelemetry profiles:
	// http://HOST:PORT for OTLP/HTTP (its /v1development/profiles), or
	// HOST:PORT for OTLP/gRPC.
	OTLP string
	// Listen, if not "", is the address (host:port) of the agent's HTTP
	// server: /debug/pprof/profile?seconds=N and /healthz.
	Listen string
	// QueueLen bounds the profiles waiting for each sink: DefaultQueueLen
	// when 0. The last period's profiles are always queued, however many
	// services it had; past QueueLen in all, the oldest of earlier periods
	// are dropped.
	QueueLen int
	// Log receives one line per event worth knowing (a period shipped, a
	// sink failing or back, profiles dropped: drops for a full queue when
	// they start, then summed up once a minute and when the sink sends
	// again); nil discards them.
	Log io.Writer
}

// Stats count what the agent did. They are read while it runs
// (Agent.Stats, /healthz).
type Stats struct {
	// Periods is the number of periods cut; Profiles the profiles made
	// of them (one per service with samples); Samples the samples in
	// them.
	Periods, Profiles, Samples uint64
	// Bytes is the size of the profiles made, gzipped pprof.
	Bytes uint64
	// Session is what the unwinding session keeps, as of the last
	// period's end.
	Session perfunwind.Sizes
	// Sinks has each sink's counts, by name ("pyroscope", "otlp").
	Sinks map[string]SinkStats
}

// SinkStats count what one sink did with the profiles given to it.
type SinkStats struct {
	// Sent were accepted; Queued wait now; Dropped were dropped because
	// the queue was full (the oldest first) or the sink refused them for
	// good (a 4xx answer); Retries counts failed attempts.
	Sent    uint64 `json:"sent"`
	Queued  uint64 `json:"queued"`
	Dropped uint64 `json:"dropped"`
	Retries uint64 `json:"retries"`
	// LastError is the last failure, "" since the last success.
	LastError string `json:"last_error,omitempty"`
}

// An Agent profiles until its context ends. Make one with New, then Run
// it.
type Agent struct {
	opts     Options
	hostname string
	ln       net.Listener
	srv      *http.Server
	sinks    []*sink

	// State of the reader goroutine (OnPeriod): the period being filled,
	// per service, and what is known of each process seen.
	services    map[string]*service
	procs       map[uint32]*procInfo
	gone        map[uint32]string // names of processes gone within the tick (noteGone)
	periodStart time.Time
	periodNum   uint64
	builder     func() *stackprof.PerfBuilder
	sess        *perfunwind.Session
	res         *perfunwind.Resolver

	// HTTP profile requests waiting for their seconds to pass.
	mu      sync.Mutex
	waiting []*request
	active  []*request
	reqs    []*request // a copy of active, for the reader goroutine

	periods, profiles, samples, bytes atomic.Uint64
	sizes                             atomic.Pointer[perfunwind.Sizes]
	ticks                             atomic.Uint64 // the recorder's, so far
}

// service is one service's samples of the current period.
type service struct {
	b       *stackprof.PerfBuilder
	samples int64
	labels  map[string]string // service-level labels
}

// New checks opts and opens the agent's listener, if any (so that a
// port in use fails now, and ":0" gets its port: Addr).
func New(opts Options) (*Agent, error) {
	if opts.Record.Command != nil {
		return nil, errors.New("sframe agent: profiles running processes, not a command (use sframe record)")
	}
	if opts.Record.OnPeriod != nil || opts.Record.Period != 0 {
		return nil, errors.New("sframe agent: the recorder's periods are the agent's")
	}
	if opts.Cgroup != "" {
		if len(opts.Record.PIDs) > 0 {
			return nil, errors.New("sframe agent: give a cgroup or PIDs, not both")
		}
		opts.Record.SystemWide = true
		opts.Cgroup = cgroupOf(opts.Cgroup)
	}
	if !opts.Record.SystemWide && len(opts.Record.PIDs) == 0 {
		opts.Record.SystemWide = true
	}
	if opts.Record.Freq == 0 {
		opts.Record.Freq = DefaultFreq
	}
	if opts.Period == 0 {
		opts.Period = DefaultPeriod
	}
	if opts.Period < tick {
		return nil, fmt.Errorf("sframe agent: period %s: at least %s", opts.Period, tick)
	}
	if opts.QueueLen <= 0 {
		opts.QueueLen = DefaultQueueLen
	}
	switch opts.ServiceLabel {
	case "", "executable", "container_id", "cgroup":
	default:
		return nil, fmt.Errorf("sframe agent: service label %q: executable, container_id or cgroup", opts.ServiceLabel)
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	// Lines come from the reader goroutine and each sink's.
	opts.Log = &lockedWriter{w: opts.Log}
	a := &Agent{opts: opts, hostname: opts.Hostname, services: map[string]*service{}, procs: map[uint32]*procInfo{}}
	if a.hostname == "" {
		a.hostname, _ = os.Hostname()
	}
	if opts.Pyroscope != "" {
		s, err := newPyroscope(opts.Pyroscope, a.hostname)
		if err != nil {
			return nil, err
		}
		a.sinks = append(a.sinks, newSink("pyroscope", s, opts.QueueLen, opts.Log))
	}
	if opts.OTLP != "" {
		s, err := newOTLP(opts.OTLP)
		if err != nil {
			return nil, err
		}
		a.sinks = append(a.sinks, newSink("otlp", s, opts.QueueLen, opts.Log))
	}
	if opts.Listen != "" {
		ln, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("sframe agent: listen: %w", err)
		}
		a.ln = ln
		a.srv = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	}
	return a, nil
}

// Addr returns the address the HTTP server listens on, nil without one.
func (a *Agent) Addr() net.Addr {
	if a.ln == nil {
		return nil
	}
	return a.ln.Addr()
}

// Stats returns what the agent has done so far.
func (a *Agent) Stats() Stats {
	st := Stats{Periods: a.periods.Load(), Profiles: a.profiles.Load(), Samples: a.samples.Load(), Bytes: a.bytes.Load(), Sinks: map[string]SinkStats{}}
	for _, s := range a.sinks {
		st.Sinks[s.name] = s.stats()
	}
	if sz := a.sizes.Load(); sz != nil {
		st.Session = *sz
	}
	return st
}

// Run profiles until ctx is done (SIGTERM or SIGINT, for sframe agent),
// then cuts the last period, ships it (waiting at most a few seconds for
// the sinks) and returns. Errors are the recorder's (perf_event_paranoid,
// no such process) and the HTTP server's.
func (a *Agent) Run(ctx context.Context) error {
	if a.srv != nil {
		go a.srv.Serve(a.ln)
		defer a.srv.Close()
	}
	sinkCtx, stopSinks := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range a.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(sinkCtx)
		}()
	}
	defer func() {
		// Whatever is queued gets a last chance, bounded.
		for _, s := range a.sinks {
			s.close()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(shutdownWait):
			stopSinks()
			<-done
		}
		stopSinks()
	}()

	ro := a.opts.Record
	ro.Period, ro.OnPeriod = tick, a.onTick
	a.periodStart = time.Now()
	p, err := recorder.Record(ctx, ro)
	if err != nil {
		return err
	}
	defer p.Close()
	a.cutPeriod(time.Now())
	a.answerAll()
	fmt.Fprintf(a.opts.Log, "sframe agent: stopped after %d periods, %d profiles, %d samples\n", a.periods.Load(), a.profiles.Load(), a.samples.Load())
	return nil
}

// shutdownWait bounds how long Run waits for the sinks to send what is
// queued when it stops.
const shutdownWait = 10 * time.Second

// onTick takes one tick of the recorder's stacks (on the reader
// goroutine).
func (a *Agent) onTick(p *recorder.Profile) {
	a.ticks.Add(1)
	if a.builder == nil {
		a.builder, a.sess, a.res = p.NewPerfBuilder, p.Session(), p.Resolver()
		for _, w := range p.Warnings {
			fmt.Fprintf(a.opts.Log, "sframe agent: warning: %s\n", w)
		}
	}
	sess := p.Session()
	a.noteGone(p, sess)
	// The requests active before this tick: those that came during it
	// start with the next one, whose samples all follow them (this
	// tick's were taken up to a second before).
	a.mu.Lock()
	reqs := append(a.reqs[:0], a.active...)
	a.mu.Unlock()
	a.reqs = reqs
	p.Each(func(st *perfunwind.Stack, n int64) error {
		pi := a.proc(st, sess)
		if !pi.keep {
			return nil
		}
		pi.period = a.periodNum
		svc := a.services[pi.service]
		if svc == nil {
			svc = &service{b: a.builder(), labels: map[string]string{"service_name": pi.service, "hostname": a.hostname}}
			a.services[pi.service] = svc
		}
		svc.b.AddSamples(st, n)
		svc.samples += n
		for _, r := range reqs {
			r.b.AddSamples(st, n)
		}
		return nil
	})
	clear(a.reqs)
	now := time.Now()
	a.answer(now)
	a.takeRequests(now)
	if now.Sub(a.periodStart) >= a.opts.Period-tick/2 {
		a.cutPeriod(now)
	}
}

// cutPeriod makes the profiles of the period that ends at end, one per
// service, and queues them for every sink.
func (a *Agent) cutPeriod(end time.Time) {
	start := a.periodStart
	a.periodStart = end
	a.periodNum++
	a.periods.Add(1)
	var batch []*shipment
	for name, svc := range a.services {
		prof, err := svc.b.Profile()
		if err != nil {
			fmt.Fprintf(a.opts.Log, "sframe agent: profile of %s: %v\n", name, err)
			continue
		}
		decorate(prof, a.procs, start, end)
		data, err := encode(prof)
		if err != nil {
			fmt.Fprintf(a.opts.Log, "sframe agent: profile of %s: %v\n", name, err)
			continue
		}
		a.profiles.Add(1)
		a.samples.Add(uint64(svc.samples))
		a.bytes.Add(uint64(len(data)))
		batch = append(batch, &shipment{service: name, labels: svc.labels, start: start, end: end, pprof: data, prof: prof})
	}
	for _, s := range a.sinks {
		s.push(batch)
	}
	clear(a.services)
	if a.sess != nil {
		// Files no process maps any more, and their tables and symbols.
		a.sess.Sweep(a.res)
		sz := a.sess.Sizes()
		a.sizes.Store(&sz)
	}
	// What the period freed goes back to the system now, not when the
	// runtime's scavenger gets to it: an agent's memory should be what
	// it holds, flat over days, not its high-water mark. One collection
	// a period costs a few milliseconds of CPU at most.
	debug.FreeOSMemory()
	// Processes without a sample for a whole period are forgotten.
	for pid, pi := range a.procs {
		if a.periodNum-pi.period > 1 {
			delete(a.procs, pid)
		}
	}
}

// lockedWriter serializes the writes of the agent's goroutines to its log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

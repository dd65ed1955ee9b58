package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/sframekit/sframekit/agent"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/recorder"
	"github.com/sframekit/sframekit/unwind"
)

func init() {
	register("agent", "profile continuously and ship profiles to Pyroscope, pprof scrapers and OTLP", runAgent)
}

const agentUsage = `[-a | -p PID[,PID...] | --cgroup PATH]

Profiles all the time, at a low rate (-F, 99 Hz by default), every
process (-a, the default), the processes PID, or those of a cgroup, with
the unwinding of sframe record, and every --period (15 s) makes one pprof
profile per service (the executable's name, or --service-label), which it
ships:

  --pyroscope URL   pushed to Grafana Pyroscope (POST URL/ingest), with
                    retries; up to --queue profiles wait while it is down
  --otlp ENDPOINT   exported as OpenTelemetry profiles (v1development) to
                    a collector: http://HOST:PORT for OTLP/HTTP, HOST:PORT
                    for OTLP/gRPC
  --listen ADDR     served over HTTP: GET /debug/pprof/profile?seconds=N
                    (as Go's net/http/pprof: go tool pprof, Parca, Grafana
                    Alloy's pyroscope.scrape read it) and GET /healthz

Samples carry the labels pid, thread, thread_name and container_id;
Pyroscope's series also service_name and hostname. It runs until SIGTERM,
SIGINT, SIGHUP or SIGQUIT, then ships the last period and exits (a second
signal ends it at once). Each event worth knowing
(a sink failing or back, profiles dropped) is one line on standard error.
It needs kernel.perf_event_paranoid 0 or lower for -a (or CAP_PERFMON);
the profiled programs are never stopped, traced or signalled.`

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agent", agentUsage, stdout, stderr)
	pids := fs.String("pid", "", "profile the processes `PIDS` (comma-separated)")
	fs.alias("p", "pid")
	all := fs.Bool("all-cpus", false, "profile every process, on every CPU (the default)")
	fs.alias("a", "all-cpus")
	cgroup := fs.String("cgroup", "", "profile the processes of the cgroup `PATH` (and below it)")
	freq := fs.Uint64("freq", agent.DefaultFreq, "sample `HZ` times a second")
	fs.alias("F", "freq")
	event := fs.String("event", "cpu-clock", "sample `EVENT`: cpu-clock, task-clock, cycles or instructions")
	fs.alias("e", "event")
	var period durationValue = durationValue(agent.DefaultPeriod)
	fs.Var(&period, "period", "ship a profile every `D` (at least 1s)")
	serviceLabel := fs.String("service-label", "executable", "name services by `LABEL`: executable, container_id or cgroup")
	hostname := fs.String("hostname", "", "label profiles with `NAME` (default: this machine's name)")
	pyroscope := fs.String("pyroscope", "", "push profiles to the Grafana Pyroscope server at `URL`")
	otlpEndpoint := fs.String("otlp", "", "export OpenTelemetry profiles to the collector at `ENDPOINT` (http://HOST:PORT for OTLP/HTTP, HOST:PORT for OTLP/gRPC)")
	listen := fs.String("listen", "", "serve /debug/pprof/profile and /healthz on `ADDR` (e.g. 127.0.0.1:6060)")
	queue := fs.Int("queue", agent.DefaultQueueLen, "keep at most `N` unsent profiles per destination")
	stackSize := fs.Uint("stack-size", recorder.DefaultStackSize, "copy `BYTES` of user stack per sample (a multiple of 8, at most 65528)")
	kernel := fs.Bool("kernel", false, "add kernel frames to samples taken in the kernel")
	offCPU := fs.Bool("off-cpu", false, "also record where threads wait, weighted by the time off the CPU")
	bpf := fs.Bool("bpf", false, "walk the stacks in the kernel, in a BPF program, from SFrame rows (falls back to user space where BPF is refused)")
	maxDepth := fs.Int("max-depth", unwind.DefaultMaxDepth, "unwind at most `N` user frames")
	operands, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(operands) > 0 {
		return fs.fail("unexpected operand %q (the agent profiles running processes: -p, -a or --cgroup)", operands[0])
	}
	opts := agent.Options{Cgroup: *cgroup, Period: time.Duration(period), ServiceLabel: *serviceLabel, Hostname: *hostname,
		Pyroscope: *pyroscope, OTLP: *otlpEndpoint, Listen: *listen, QueueLen: *queue, Log: stderr}
	opts.Record = recorder.Options{Freq: *freq, Kernel: *kernel, OffCPU: *offCPU, MaxDepth: *maxDepth, SystemWide: *all,
		StackSize: uint32(*stackSize), BPF: *bpf}
	targets := 0
	if *pids != "" {
		targets++
		var err error
		if opts.Record.PIDs, err = parsePIDs(*pids); err != nil {
			return fs.fail("bad --pid: %v", err)
		}
	}
	if *all {
		targets++
	}
	if *cgroup != "" {
		targets++
	}
	ev, err := perfevent.ParseEvent(*event)
	switch {
	case targets > 1:
		return fs.fail("give one of -p PID, -a and --cgroup")
	case err != nil || ev.Name == perfevent.ContextSwitches.Name:
		return fs.fail("unknown event %q (cpu-clock, task-clock, cycles or instructions)", *event)
	case *freq == 0:
		return fs.fail("--freq must be positive")
	case time.Duration(period) < time.Second:
		return fs.fail("--period must be at least 1s")
	case *queue <= 0:
		return fs.fail("--queue must be positive")
	case *stackSize == 0 || *stackSize%8 != 0 || *stackSize > perfevent.MaxStackUser:
		return fs.fail("--stack-size must be a positive multiple of 8 up to %d", perfevent.MaxStackUser)
	case *maxDepth <= 0:
		return fs.fail("--max-depth must be positive")
	}
	switch *serviceLabel {
	case "executable", "container_id", "cgroup":
	default:
		return fs.fail("unknown --service-label %q (executable, container_id or cgroup)", *serviceLabel)
	}
	opts.Record.Event = ev
	if *pyroscope == "" && *listen == "" && *otlpEndpoint == "" {
		fmt.Fprintln(stderr, "sframe agent: warning: no --pyroscope, --otlp nor --listen: profiles go nowhere")
	}
	// The agent runs for days: garbage is collected as usual, and the
	// heap stays near what the period needs.
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	a, err := agent.New(opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// The first of the signals that end sframe's other long commands
	// ships the last period; a second ends the agent at once.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	in := catchInterrupts(func(syscall.Signal) { stop() }, nil)
	defer in.Stop()
	if addr := a.Addr(); addr != nil {
		fmt.Fprintf(stderr, "sframe agent: serving http://%s/debug/pprof/profile and /healthz\n", addr)
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "sframe agent: %s\n", recordError(err, nil))
		return 1
	}
	return 0
}

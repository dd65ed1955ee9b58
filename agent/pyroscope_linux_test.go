package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/recorder"
)

// pyroscopeVersion is the Pyroscope server the tests start: the one
// tools/pyroscope pins, which .ci/run builds.
const pyroscopeVersion = "v1.9.0"

// pyroscopeBinary returns the Pyroscope server to start:
// $SFRAMEKIT_PYROSCOPE, or what .ci/run builds into the user's cache
// directory. Without one the test skips, except under CI.
func pyroscopeBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SFRAMEKIT_PYROSCOPE")
	if bin == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			bin = filepath.Join(dir, "sframekit", "pyroscope-"+pyroscopeVersion)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no Pyroscope server at %q: build it with (cd tools/pyroscope && go build -o %s github.com/grafana/pyroscope/cmd/pyroscope), as .ci/run does", bin, bin)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// freePort returns a TCP port of 127.0.0.1 free now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// pyroServer is a real Pyroscope server (single binary, all targets),
// every listener and ring address on 127.0.0.1.
type pyroServer struct {
	bin, dir string
	http     int
	args     []string
	cmd      *exec.Cmd
	log      *os.File
}

func newPyroServer(t *testing.T) *pyroServer {
	t.Helper()
	s := &pyroServer{bin: pyroscopeBinary(t), dir: t.TempDir(), http: freePort(t)}
	lo := "127.0.0.1"
	s.args = []string{
		"-server.http-listen-address=" + lo, "-server.http-listen-port=" + strconv.Itoa(s.http),
		"-server.grpc-listen-address=" + lo, "-server.grpc-listen-port=" + strconv.Itoa(freePort(t)),
		"-memberlist.bind-addr=" + lo, "-memberlist.advertise-addr=" + lo, "-memberlist.bind-port=" + strconv.Itoa(freePort(t)),
		"-pyroscopedb.data-path=" + filepath.Join(s.dir, "data"),
		"-self-profiling.disable-push=true",
	}
	s.args = append(s.args, instanceAddrFlags(t, s.bin, lo)...)
	t.Cleanup(s.stop)
	return s
}

// instanceAddrFlags returns -FLAG=lo for every flag of the server that
// names the address it advertises to its own rings (*.instance-addr,
// -ingester.lifecycler.addr), as `pyroscope -help-all` lists them:
// otherwise it advertises the machine's interface address and dials it.
func instanceAddrFlags(t *testing.T, bin, lo string) []string {
	t.Helper()
	out, _ := exec.Command(bin, "-help-all").CombinedOutput()
	var flags []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "-") {
			continue
		}
		name := strings.TrimPrefix(f[0], "-")
		if strings.HasSuffix(name, ".instance-addr") || name == "ingester.lifecycler.addr" {
			flags = append(flags, "-"+name+"="+lo)
		}
	}
	if len(flags) == 0 {
		t.Fatalf("%s -help-all lists no instance-addr flags:\n%.2000s", bin, out)
	}
	return flags
}

// start starts the server and waits until /ready answers "ready".
func (s *pyroServer) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(s.dir, "pyroscope.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.log = log
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.url() + "/ready")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.TrimSpace(string(body)) == "ready" {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	b, _ := os.ReadFile(log.Name())
	t.Fatalf("Pyroscope not ready in 2 minutes; its log ends:\n%s", tail(b, 3000))
}

// stop stops the server (SIGTERM, then kill after 20 s).
func (s *pyroServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
	s.log.Close()
}

func (s *pyroServer) url() string { return "http://127.0.0.1:" + strconv.Itoa(s.http) }

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// flamegraph is what /pyroscope/render?format=json answers: its
// "single" flamebearer, levels delta-encoded in fours (x, total, self,
// name index).
type flamegraph struct {
	Flamebearer struct {
		Names    []string  `json:"names"`
		Levels   [][]int64 `json:"levels"`
		NumTicks int64     `json:"numTicks"`
	} `json:"flamebearer"`
}

// render asks the server for the flame graph of query over [from, until].
func (s *pyroServer) render(t *testing.T, query string, from, until time.Time) *flamegraph {
	t.Helper()
	v := url.Values{}
	v.Set("query", query)
	v.Set("from", strconv.FormatInt(from.Unix(), 10))
	v.Set("until", strconv.FormatInt(until.Unix(), 10))
	v.Set("format", "json")
	resp, err := http.Get(s.url() + "/pyroscope/render?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("render %s: %s: %s", query, resp.Status, body)
	}
	var fg flamegraph
	if err := json.Unmarshal(body, &fg); err != nil {
		t.Fatalf("render %s: %v: %.500s", query, err, body)
	}
	return &fg
}

// chainTicks returns the ticks of fg whose stack is exactly chain
// (innermost first): the self ticks of the nodes named chain[0] whose
// path from the root ends with the chain.
func (fg *flamegraph) chainTicks(chain []string) int64 {
	type node struct{ x, total, self, name int64 }
	levels := make([][]node, len(fg.Flamebearer.Levels))
	for i, l := range fg.Flamebearer.Levels {
		prev := int64(0)
		for j := 0; j+3 < len(l); j += 4 {
			n := node{x: l[j] + prev, total: l[j+1], self: l[j+2], name: l[j+3]}
			prev = n.x + n.total
			levels[i] = append(levels[i], n)
		}
	}
	name := func(n node) string {
		if n.name < 0 || int(n.name) >= len(fg.Flamebearer.Names) {
			return ""
		}
		return fg.Flamebearer.Names[n.name]
	}
	var ticks int64
	for i, lv := range levels {
		for _, n := range lv {
			if name(n) != chain[0] || i < len(chain) {
				continue
			}
			// Walk up: the parent at each level contains the node.
			ok, x := true, n.x
			for k := 1; k < len(chain) && ok; k++ {
				ok = false
				for _, p := range levels[i-k] {
					if p.x <= x && x < p.x+p.total {
						ok, x = name(p) == chain[k], p.x
						break
					}
				}
			}
			if ok {
				ticks += n.self
			}
		}
	}
	return ticks
}

const cpuQuery = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

// TestPyroscope runs the agent on the chains program, pushing to a real
// Pyroscope server, for three periods: Pyroscope's flame graph of each
// thread shows its exact chain in as large a share of its samples as
// the agent's own profile of the same run does (within 5 points), and
// the labels service_name and pid select the program.
func TestPyroscope(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	cmd := startSpin(t)
	pid := cmd.Process.Pid
	from := time.Now().Add(-time.Minute)
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{pid}, Freq: 999}, Period: 2 * time.Second,
		Pyroscope: srv.url(), Listen: "127.0.0.1:0", Log: testLog{t}})
	// The agent's own profile over the same seconds, to compare.
	local := fetchProfile(t, "http://"+a.Addr().String(), 6)
	total, exact := shares(local, pid)
	waitSent(t, a, 3)
	until := time.Now().Add(time.Minute)
	for name, chain := range chains {
		fg := srv.render(t, fmt.Sprintf(`%s{service_name="recprog",thread_name=%q}`, cpuQuery, name), from, until)
		got := fg.chainTicks(chain)
		if fg.Flamebearer.NumTicks == 0 {
			t.Errorf("thread %s: Pyroscope has no samples", name)
			continue
		}
		pyro := 100 * float64(got) / float64(fg.Flamebearer.NumTicks)
		mine := 100 * float64(exact[name]) / float64(max(total[name], 1))
		t.Logf("thread %s: exact chain in %.1f%% of Pyroscope's ticks, %.1f%% of the agent's own profile", name, pyro, mine)
		if total[name] < 50 {
			t.Errorf("thread %s: %d samples in the agent's own profile, want 50 to judge", name, total[name])
		}
		if pyro < mine-5 || pyro > mine+5 {
			t.Errorf("thread %s: exact chain in %.1f%% of Pyroscope's ticks, %.1f%% of the agent's profile: want within 5 points", name, pyro, mine)
		}
	}
	fg := srv.render(t, fmt.Sprintf(`%s{service_name="recprog",pid="%d"}`, cpuQuery, pid), from, until)
	if fg.Flamebearer.NumTicks == 0 {
		t.Errorf("no samples for pid=%d", pid)
	}
	fg = srv.render(t, fmt.Sprintf(`%s{service_name="recprog",pid="%d"}`, cpuQuery, pid+1000000), from, until)
	if fg.Flamebearer.NumTicks != 0 {
		t.Errorf("samples for a pid that is not the program's: the label selects nothing")
	}
}

// TestPyroscopeDown stops the server for two periods and starts it
// again: no profile is lost (they waited in the queue). Then a queue of
// two overflows while the server is down: the oldest are dropped and
// counted, and sampling goes on.
func TestPyroscopeDown(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	cmd := startSpin(t)
	pid := cmd.Process.Pid
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{pid}}, Period: 2 * time.Second, Pyroscope: srv.url(),
		QueueLen: 64, Log: testLog{t}})
	waitSent(t, a, 1)
	srv.stop()
	// The period cut second after the stop began at the first cut after
	// it: all of it fell while the server was down. Its profile's time
	// is its start (the first cut, seen up to a poll late), which a query
	// from half a second before that finds and the period before it (two
	// seconds earlier, sent before the stop) does not.
	down := a.Stats().Periods
	var downFrom time.Time
	for a.Stats().Periods < down+2 {
		if downFrom.IsZero() && a.Stats().Periods == down+1 {
			downFrom = time.Now().Add(-500 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
	}
	downUntil := time.Now()
	if downFrom.IsZero() {
		downFrom = downUntil.Add(-2500 * time.Millisecond) // both cuts between two polls
	}
	if st := a.Stats().Sinks["pyroscope"]; st.Queued == 0 || st.LastError == "" {
		t.Errorf("server down for two periods: %+v, want profiles queued and an error", st)
	}
	srv.start(t)
	// Everything cut so far arrives.
	want := a.Stats().Profiles
	waitSent(t, a, want)
	st := a.Stats().Sinks["pyroscope"]
	if st.Dropped != 0 {
		t.Errorf("%d profiles dropped with room in the queue: %+v", st.Dropped, st)
	}
	// What was cut while the server was down is in it now, at its time
	// (once Pyroscope's ingester has it: queries see a push after a
	// delay).
	deadline := time.Now().Add(time.Minute)
	for {
		fg := srv.render(t, fmt.Sprintf(`%s{service_name="recprog"}`, cpuQuery), downFrom, downUntil)
		if fg.Flamebearer.NumTicks > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("Pyroscope has nothing of %s to %s, while it was down", downFrom.Format(time.TimeOnly), downUntil.Format(time.TimeOnly))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Now a small queue: the server goes away for longer than it holds.
	srv.stop()
	b := runAgent(t, Options{Record: recorder.Options{PIDs: []int{pid}}, Period: time.Second, Pyroscope: srv.url(),
		QueueLen: 2, Log: testLog{t}})
	for b.Stats().Periods < 5 {
		time.Sleep(100 * time.Millisecond)
	}
	st = b.Stats().Sinks["pyroscope"]
	if st.Dropped == 0 || st.Queued > 2 {
		t.Errorf("queue of 2, server down for 5 periods: %+v, want drops counted and at most 2 queued", st)
	}
	if b.Stats().Samples == 0 {
		t.Error("the agent stopped sampling while its sink was down")
	}
}

// waitSent waits until the agent's Pyroscope sink has sent n profiles.
func waitSent(t *testing.T, a *Agent, n uint64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for a.Stats().Sinks["pyroscope"].Sent < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d profiles sent in 2 minutes, want %d: %+v", a.Stats().Sinks["pyroscope"].Sent, n, a.Stats())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testLog writes the agent's log lines to the test's.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestPyroscopeServiceNames pushes a profile for each kind of service
// name the agent makes to a real Pyroscope server: a cgroup path
// (--service-label cgroup), a kernel-style thread name, an executable
// with '+' or ':' in its name. Pyroscope refuses (400) an application
// name of any other characters than [A-Za-z0-9_.-]: every one of these
// was refused, and with the queue's retries of a refusal, held every
// other profile back for a minute.
func TestPyroscopeServiceNames(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	p, err := newPyroscope(srv.url(), "h")
	if err != nil {
		t.Fatal(err)
	}
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10000000,
	}
	fn := &profile.Function{ID: 1, Name: "f"}
	loc := &profile.Location{ID: 1, Address: 0x1000, Line: []profile.Line{{Function: fn}}}
	prof.Function, prof.Location = []*profile.Function{fn}, []*profile.Location{loc}
	prof.Sample = []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{10000000}}}
	data, err := encode(prof)
	if err != nil {
		t.Fatal(err)
	}
	srv.waitIngest(t)
	now := time.Now()
	for _, name := range []string{"/system.slice/cron.service", "kworker/0:1", "g++", ":443", "app@2"} {
		s := &shipment{service: name, labels: map[string]string{"service_name": name, "hostname": "h"}, start: now, end: now.Add(time.Second), pprof: data, prof: prof}
		if err := p.send(context.Background(), s); err != nil {
			t.Errorf("service %q: %v", name, err)
		}
	}
}

// waitIngest waits until the server takes profiles: for a few seconds
// after it is ready it refuses every push (422, no live replicas yet).
func (s *pyroServer) waitIngest(t *testing.T) {
	t.Helper()
	p, err := newPyroscope(s.url(), "h")
	if err != nil {
		t.Fatal(err)
	}
	prof := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10000000,
	}
	data, err := encode(prof)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sh := &shipment{service: "probe", start: now, end: now.Add(time.Second), pprof: data, prof: prof}
	deadline := time.Now().Add(time.Minute)
	for {
		err := p.send(context.Background(), sh)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Pyroscope takes no profile in a minute: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPyroscopeManyServices runs the agent on three programs, three
// services, with a queue of one profile and a server that takes every
// push: each period's three profiles are queued at once, and none is
// dropped (they were: two of each period's three, the sink being
// healthy; sframe agent -a on a busy machine makes dozens of services a
// period and dropped a third of its profiles with the default queue).
func TestPyroscopeManyServices(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	srv.waitIngest(t)
	exe := testprog.Build(t, "../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe")
	dir := t.TempDir()
	var pids []int
	for _, name := range []string{"svc1", "svc2", "svc3"} {
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		copyExe := filepath.Join(dir, name)
		if err := os.WriteFile(copyExe, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(copyExe, "spin", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	a := runAgent(t, Options{Record: recorder.Options{PIDs: pids}, Period: time.Second, Pyroscope: srv.url(),
		QueueLen: 1, Log: testLog{t}})
	for a.Stats().Periods < 4 {
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st := a.Stats()
		ps := st.Sinks["pyroscope"]
		if ps.Dropped != 0 {
			t.Fatalf("%d profiles dropped by a sink that keeps up: %+v", ps.Dropped, st)
		}
		if ps.Sent >= 3*3 && ps.Queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("profiles not sent in a minute: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// labelValues returns the values of label name in the server's series
// of the last hour.
func (s *pyroServer) labelValues(t *testing.T, name string) []string {
	t.Helper()
	now := time.Now()
	body := fmt.Sprintf(`{"name":%q,"start":%d,"end":%d}`, name, now.Add(-time.Hour).UnixMilli(), now.Add(time.Minute).UnixMilli())
	resp, err := http.Post(s.url()+"/querier.v1.QuerierService/LabelValues", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("LabelValues %s: %s: %s", name, resp.Status, b)
	}
	var v struct{ Names []string }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("LabelValues %s: %v: %.500s", name, err, b)
	}
	return v.Names
}

// TestPyroscopeShortLived profiles a shell that runs a program of a
// tenth of a second over and over: most of its runs begin and end
// within a tick, gone from /proc and from the session by the time the
// agent reads their stacks. Their service is still the program's name
// (it was ":PID", one service per run, which Pyroscope refused).
func TestPyroscopeShortLived(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	srv.waitIngest(t)
	exe := testprog.Build(t, "../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe")
	cmd := exec.Command("sh", "-c", "while :; do "+exe+" work 200000000 >/dev/null; sleep 0.1; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: time.Second,
		Pyroscope: srv.url(), Log: testLog{t}})
	for a.Stats().Periods < 5 {
		time.Sleep(100 * time.Millisecond)
	}
	waitSent(t, a, a.Stats().Profiles)
	deadline := time.Now().Add(time.Minute)
	for {
		names := srv.labelValues(t, "service_name")
		var bad []string
		for _, n := range names {
			if n == "" || strings.Trim(n, "_:0123456789") == "" {
				bad = append(bad, n)
			}
		}
		if len(bad) > 0 {
			t.Fatalf("services named by PID: %q (all: %q)", bad, names)
		}
		if slices.Contains(names, "recprog") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no service recprog in a minute: %q", names)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPyroscopeExec profiles a process that executes another program,
// which starts a thread of another name: the samples of each program are
// its own service's, those of the thread started after the exec
// included. They were all the first program's, the process's service
// read once, at its first sample; then the thread's still were (only
// the main thread's name told an exec).
func TestPyroscopeExec(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	srv.waitIngest(t)
	exe := testprog.Build(t, "testdata/execprog.c", "-O2")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	after := filepath.Join(t.TempDir(), "afterexec")
	if err := os.WriteFile(after, b, 0o755); err != nil {
		t.Fatal(err)
	}
	from := time.Now().Add(-time.Minute)
	cmd := exec.Command("sh", "-c", "while :; do "+exe+" "+after+"; sleep 0.2; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: time.Second,
		Pyroscope: srv.url(), Log: testLog{t}})
	for a.Stats().Periods < 6 {
		time.Sleep(100 * time.Millisecond)
	}
	waitSent(t, a, a.Stats().Profiles)
	until := time.Now().Add(time.Minute)
	name := filepath.Base(exe)
	deadline := time.Now().Add(time.Minute)
	for {
		pre := srv.render(t, fmt.Sprintf(`%s{service_name=%q}`, cpuQuery, name), from, until)
		post := srv.render(t, fmt.Sprintf(`%s{service_name="afterexec"}`, cpuQuery), from, until)
		// Pyroscope has every profile once both programs' threads show.
		done := pre.Flamebearer.NumTicks > 0 && slices.Contains(post.Flamebearer.Names, "post_exec_spin") && slices.Contains(post.Flamebearer.Names, "post_exec_thread_spin")
		if done || time.Now().After(deadline) {
			if pre.Flamebearer.NumTicks == 0 || post.Flamebearer.NumTicks == 0 {
				t.Fatalf("services %s and afterexec: %d and %d ticks in Pyroscope, want both", name, pre.Flamebearer.NumTicks, post.Flamebearer.NumTicks)
			}
			for _, fn := range []string{"post_exec_spin", "post_exec_thread_spin"} {
				if slices.Contains(pre.Flamebearer.Names, fn) {
					t.Errorf("service %s (before the exec) has the samples of afterexec's %s", name, fn)
				}
				if !slices.Contains(post.Flamebearer.Names, fn) {
					t.Errorf("service afterexec has no sample of its %s", fn)
				}
			}
			if slices.Contains(post.Flamebearer.Names, "pre_exec_spin") {
				t.Errorf("service afterexec has the samples of %s's pre_exec_spin, before the exec", name)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestPyroscopeUnknownFrames profiles a program whose threads spin in
// code of no name, one of them with no stack to copy: its samples have
// one frame naming nothing, or none. Pyroscope's count of the service's
// samples is the agent's, and the OpenTelemetry collector has the
// frames under the names the folded stacks give them. Pyroscope dropped
// every one of those samples (a location without a function, a sample
// without locations), the service's CPU missing from its totals.
func TestPyroscopeUnknownFrames(t *testing.T) {
	srv := newPyroServer(t)
	srv.start(t)
	srv.waitIngest(t)
	collectorLog, grpcAddr, _ := startCollector(t)
	exe := testprog.Build(t, "testdata/anonprog.c", "-O2")
	cmd := exec.Command(exe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	testprog.NeedPerfEvents(t)
	from := time.Now().Add(-time.Minute)
	a, err := New(Options{Record: recorder.Options{PIDs: []int{pid}}, Period: time.Second, Pyroscope: srv.url(), OTLP: grpcAddr, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for a.Stats().Periods < 3 {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	for _, name := range []string{"pyroscope", "otlp"} {
		if s := st.Sinks[name]; s.Sent != st.Profiles || s.Dropped != 0 {
			t.Fatalf("%s: %+v, want all %d profiles sent", name, s, st.Profiles)
		}
	}
	until := time.Now().Add(time.Minute)
	service := filepath.Base(exe)
	var got [2]int64
	deadline := time.Now().Add(time.Minute)
	for {
		for i, thread := range []string{"anon", "nostack"} {
			fg := srv.render(t, fmt.Sprintf(`process_cpu:samples:count:cpu:nanoseconds{service_name=%q,thread_name=%q}`, service, thread), from, until)
			got[i] = fg.Flamebearer.NumTicks
		}
		if uint64(got[0]+got[1]) == st.Samples || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if uint64(got[0]+got[1]) != st.Samples || got[0] == 0 || got[1] == 0 {
		t.Errorf("Pyroscope has %d samples of thread anon and %d of nostack, the agent took %d in all", got[0], got[1], st.Samples)
	}
	b, _ := os.ReadFile(collectorLog)
	for _, w := range []string{fmt.Sprintf("[perf-%d.map]", pid), "[unknown]"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("the collector's output has no frame %s", w)
		}
	}
	if t.Failed() {
		t.Logf("collector output:\n%s", tail(b, 4000))
	}
}

// lineLog keeps the agent's log lines, and writes them to the test's.
type lineLog struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	s := strings.TrimSuffix(string(p), "\n")
	l.t.Log(s)
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	return len(p), nil
}

// drops returns the lines of l about profiles dropped for a full queue,
// and the profiles they say were dropped, summed.
func (l *lineLog) drops(t *testing.T) (lines []string, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	re := regexp.MustCompile(`queue full.*: dropped (?:the )?(\d+) `)
	for _, s := range l.lines {
		if !strings.Contains(s, "queue full") {
			continue
		}
		m := re.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("log line %q: no number of profiles dropped", s)
			continue
		}
		k, _ := strconv.ParseUint(m[1], 10, 64)
		lines, n = append(lines, s), n+k
	}
	return lines, n
}

// TestPyroscopeDownLog runs the agent with a queue of one profile while
// its Pyroscope server is down, then starts the server: the drops are
// logged when they start, then summed up once the server takes profiles
// again (or once a minute, if it was down longer), and the lines count
// every profile dropped once. A line was logged each period the queue
// was full: a dead server flooded the log.
func TestPyroscopeDownLog(t *testing.T) {
	srv := newPyroServer(t)
	cmd := startSpin(t)
	log := &lineLog{t: t}
	start := time.Now()
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: time.Second, Pyroscope: srv.url(),
		QueueLen: 1, Log: log})
	for a.Stats().Periods < 6 {
		time.Sleep(100 * time.Millisecond)
	}
	lines, _ := log.drops(t)
	if st := a.Stats().Sinks["pyroscope"]; st.Dropped < 3 {
		t.Fatalf("server down for 6 periods, queue of 1: %+v, want 3 drops or more", st)
	}
	if max := 1 + int(time.Since(start)/dropLogEvery); len(lines) == 0 || len(lines) > max {
		t.Errorf("server down for %s: %d lines of drops, want 1 to %d:\n%s", time.Since(start).Round(time.Second), len(lines), max, strings.Join(lines, "\n"))
	}
	srv.start(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st := a.Stats().Sinks["pyroscope"]
		lines, n := log.drops(t)
		if st.Sent > 0 && n == st.Dropped {
			if max := 2 + int(time.Since(start)/dropLogEvery); len(lines) > max {
				t.Errorf("%d lines of drops in %s, want %d at most:\n%s", len(lines), time.Since(start).Round(time.Second), max, strings.Join(lines, "\n"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server back for 2 minutes: %+v; the log's lines say %d profiles were dropped:\n%s", st, n, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

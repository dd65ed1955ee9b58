package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/recorder"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// chains are the threads of recprog spin and their exact chains,
// innermost first.
var chains = map[string][]string{
	"spin5":  chainOf("spin5", "a", 5),
	"spin20": chainOf("spin20", "b", 20),
	"spin60": chainOf("spin60", "c", 60),
}

func chainOf(start, p string, n int) []string {
	var c []string
	for i := n; i >= 1; i-- {
		c = append(c, fmt.Sprintf("%s%d", p, i))
	}
	return append(c, start)
}

// startSpin starts recprog spin (three threads spinning in their
// chains), built with SFrame, and returns its process.
func startSpin(t *testing.T) *exec.Cmd {
	t.Helper()
	exe := testprog.Build(t, "../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe")
	cmd := exec.Command(exe, "spin", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// shares returns, per thread of chains, the samples of process pid in q
// and those that show the thread's exact chain.
func shares(q *profile.Profile, pid int) (total, exact map[string]int64) {
	total, exact = map[string]int64{}, map[string]int64{}
	for _, s := range q.Sample {
		name := s.Label["thread_name"]
		if len(name) != 1 || chains[name[0]] == nil || s.NumLabel["pid"][0] != int64(pid) {
			continue
		}
		var f []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				f = append(f, ln.Function.Name)
			}
		}
		want := chains[name[0]]
		total[name[0]] += s.Value[0]
		if len(f) >= len(want) && slices.Equal(f[:len(want)], want) {
			exact[name[0]] += s.Value[0]
		}
	}
	return total, exact
}

// runAgent runs an agent with opts until the test ends.
func runAgent(t *testing.T, opts Options) *Agent {
	t.Helper()
	testprog.NeedPerfEvents(t)
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return a
}

// TestServePprof asks the agent for two seconds of profile over HTTP,
// as go tool pprof does: each chains thread's samples show its exact
// chain, labeled with the process; go tool pprof reads the profile, and
// /healthz answers.
func TestServePprof(t *testing.T) {
	for _, bpf := range []bool{false, true} {
		t.Run(fmt.Sprintf("bpf=%v", bpf), func(t *testing.T) { testServePprof(t, bpf) })
	}
}

// testServePprof is TestServePprof with the stacks walked in user space,
// or in the kernel (bpf).
func testServePprof(t *testing.T, bpf bool) {
	cmd := startSpin(t)
	var log bytes.Buffer
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}, Freq: 999, BPF: bpf}, Period: 2 * time.Second,
		Listen: "127.0.0.1:0", Log: &log})
	url := "http://" + a.Addr().String()
	// Enough samples of each thread, however loaded the machine: ask
	// again until each has 50.
	var total, exact map[string]int64
	for try := 0; try < 10; try++ {
		q := fetchProfile(t, url, 2)
		if q.DurationNanos < int64(time.Second) {
			t.Errorf("a 2-second profile says it lasted %s", time.Duration(q.DurationNanos))
		}
		total, exact = shares(q, cmd.Process.Pid)
		if total["spin5"] >= 50 && total["spin20"] >= 50 && total["spin60"] >= 50 {
			break
		}
	}
	for name := range chains {
		if total[name] < 50 {
			t.Errorf("thread %s: %d samples in 10 tries, want 50", name, total[name])
		} else if exact[name]*100 < total[name]*99 {
			t.Errorf("thread %s: %d of %d samples show its chain, want 99%%", name, exact[name], total[name])
		}
	}
	// go tool pprof reads it from the agent, as it reads Go's servers.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	out, err := exec.Command(gobin, "tool", "pprof", "-raw", url+"/debug/pprof/profile?seconds=1").CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "c60") || !strings.Contains(string(out), "spin60") {
		t.Errorf("go tool pprof -raw shows no chain:\n%s", out)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("/healthz: %s %s", resp.Status, body)
	}
	for _, bad := range []string{"0", "x", "100000"} {
		resp, err := http.Get(url + "/debug/pprof/profile?seconds=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("seconds=%s: %s, want 400", bad, resp.Status)
		}
	}
	if bpf && strings.Contains(log.String(), "warning") {
		msg := "the BPF walker was refused: " + log.String()
		if os.Getenv("CI") != "" {
			t.Error(msg)
		} else {
			t.Log(msg)
		}
	}
	if testing.Verbose() {
		os.Stderr.Write(log.Bytes())
	}
}

// TestServePprofFromRequest asks for a profile the moment a program
// leaves phase_a for phase_b: it holds phase_b's samples only. It held a
// second of phase_a too, the stacks of the tick during which the request
// came: a profile of N seconds had the samples of N+1 (seconds=1: twice
// as many as the program took).
func TestServePprofFromRequest(t *testing.T) {
	exe := testprog.Build(t, "testdata/phaseprog.c", "-O2", "-Wa,--gsframe")
	cmd := exec.Command(exe)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}, Freq: 999}, Period: 2 * time.Second,
		Listen: "127.0.0.1:0"})
	line := make([]byte, 2)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "b\n" {
		t.Fatalf("phaseprog printed %q (%v), want b", line, err)
	}
	q := fetchProfile(t, "http://"+a.Addr().String(), 2)
	funcs := map[string]int64{}
	for _, s := range q.Sample {
		for _, l := range s.Location {
			for _, ln := range l.Line {
				funcs[ln.Function.Name] += s.Value[0]
			}
		}
	}
	if funcs["phase_b"] == 0 {
		t.Errorf("no sample of phase_b: %v", funcs)
	}
	if funcs["phase_a"] != 0 {
		t.Errorf("%d samples of phase_a, which ended before the request (%d of phase_b)", funcs["phase_a"], funcs["phase_b"])
	}
}

// TestServePprofBackToBack asks for one-second profiles one after the
// other, as a scraper does: each holds a tick of samples, however late
// the ticks come (counted from when the request came, one that waited
// for its first tick for more than a second ended before it: empty).
func TestServePprofBackToBack(t *testing.T) {
	cmd := startSpin(t)
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: 2 * time.Second,
		Listen: "127.0.0.1:0"})
	url := "http://" + a.Addr().String()
	// Sampling has started once one has samples.
	for deadline := time.Now().Add(2 * time.Minute); len(fetchProfile(t, url, 1).Sample) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no sample in 2 minutes")
		}
	}
	for i := 0; i < 6; i++ {
		if q := fetchProfile(t, url, 1); len(q.Sample) == 0 {
			t.Errorf("profile %d of 6, one second of a spinning program: no sample", i+1)
		}
	}
}

// TestServePprofCancel has clients give up on their profiles while the
// agent adds stacks to them: run with -race, it found the reader
// goroutine reading the list of requests that a handler changed.
func TestServePprofCancel(t *testing.T) {
	cmd := startSpin(t)
	a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}, Freq: 999}, Period: 2 * time.Second,
		Listen: "127.0.0.1:0"})
	url := "http://" + a.Addr().String() + "/debug/pprof/profile?seconds=2"
	done := make(chan struct{})
	for c := 0; c < 8; c++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 12; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(100+97*((c*12+i)%16))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				cancel()
			}
		}()
	}
	for c := 0; c < 8; c++ {
		<-done
	}
	// The agent still answers.
	if q := fetchProfile(t, "http://"+a.Addr().String(), 1); len(q.Sample) == 0 {
		t.Error("a profile of no sample after the cancelled ones")
	}
}

// fetchProfile gets url/debug/pprof/profile?seconds=sec and parses it.
func fetchProfile(t *testing.T, url string, sec int) *profile.Profile {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", url, sec))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %s", resp.Status, raw)
	}
	q, err := profile.ParseData(raw)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestCgroup profiles the processes of one cgroup: of two spinning
// programs, the one moved into a new cgroup is profiled, the other not.
func TestCgroup(t *testing.T) {
	base := "/sys/fs/cgroup"
	if _, err := os.Stat(base + "/cgroup.procs"); err != nil {
		base += "/unified" // hybrid: the v2 hierarchy beside v1's
	}
	dir := fmt.Sprintf("%s/sframe-agent-test-%d", base, os.Getpid())
	if err := os.Mkdir(dir, 0o755); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot make a cgroup (CI runs as root): %v", err)
		}
		t.Skipf("cannot make a cgroup: %v", err)
	}
	in, out := startSpin(t), startSpin(t)
	t.Cleanup(func() {
		in.Process.Kill()
		in.Wait()
		os.Remove(dir)
	})
	if err := os.WriteFile(dir+"/cgroup.procs", []byte(fmt.Sprint(in.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := runAgent(t, Options{Record: recorder.Options{Freq: 999}, Cgroup: dir, Period: 2 * time.Second, Listen: "127.0.0.1:0"})
	url := "http://" + a.Addr().String()
	var inSamples int64
	for try := 0; try < 10 && inSamples < 50; try++ {
		q := fetchProfile(t, url, 2)
		for _, s := range q.Sample {
			switch pid := s.NumLabel["pid"][0]; pid {
			case int64(in.Process.Pid):
				inSamples += s.Value[0]
			default:
				t.Fatalf("a sample of process %d (%v), not of the cgroup's %d (the other program is %d)", pid, s.Label["thread_name"], in.Process.Pid, out.Process.Pid)
			}
		}
	}
	if inSamples < 50 {
		t.Errorf("%d samples of the cgroup's process, want 50", inSamples)
	}
}

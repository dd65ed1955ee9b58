package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/recorder"
)

// collectorVersion is the OpenTelemetry Collector release tools/otelcol
// assembles, which .ci/run builds.
const collectorVersion = "v0.165.0"

// collectorBinary returns the collector to start: $SFRAMEKIT_OTELCOL,
// or what .ci/run builds into the user's cache directory. Without one
// the test skips, except under CI.
func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SFRAMEKIT_OTELCOL")
	if bin == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			bin = filepath.Join(dir, "sframekit", "otelcol-"+collectorVersion)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("no OpenTelemetry Collector at %q: build it with (cd tools/otelcol && go build -o %s .), as .ci/run does", bin, bin)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// startCollector starts a real collector whose profiles pipeline takes
// OTLP/gRPC and OTLP/HTTP on 127.0.0.1 and prints every profile it gets
// (the debug exporter, detailed) into its log, which it returns with the
// two endpoints.
func startCollector(t *testing.T) (log string, grpcAddr, httpURL string) {
	t.Helper()
	bin := collectorBinary(t)
	dir := t.TempDir()
	grpcAddr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  debug:
    verbosity: detailed
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug]
`, grpcAddr, httpAddr)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(dir, "collector.log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--feature-gates=service.profilesSupport")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		out.Close()
	})
	// Ready when the HTTP receiver answers.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + httpAddr + "/v1development/profiles")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(log)
			t.Fatalf("the collector exited:\n%s", tail(b, 3000))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("collector not listening in a minute:\n%s", tail(b, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return log, grpcAddr, "http://" + httpAddr
}

// TestOTLP exports the chains program's periods to a real OpenTelemetry
// Collector, over OTLP/gRPC and OTLP/HTTP: the collector takes every
// period, and what it prints of them holds the chains' functions, the
// service and the process.
func TestOTLP(t *testing.T) {
	for _, proto := range []string{"grpc", "http"} {
		t.Run(proto, func(t *testing.T) {
			log, grpcAddr, httpURL := startCollector(t)
			endpoint := grpcAddr
			if proto == "http" {
				endpoint = httpURL
			}
			cmd := startSpin(t)
			a := runAgent(t, Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: 2 * time.Second,
				OTLP: endpoint, Log: testLog{t}})
			deadline := time.Now().Add(2 * time.Minute)
			for a.Stats().Sinks["otlp"].Sent < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("2 periods not exported in 2 minutes: %+v", a.Stats())
				}
				time.Sleep(100 * time.Millisecond)
			}
			if st := a.Stats().Sinks["otlp"]; st.Dropped != 0 {
				t.Errorf("profiles dropped: %+v", st)
			}
			// The debug exporter prints as it receives; give it a moment.
			var b []byte
			want := []string{"c60", "spin60", "b20", "a5", "service.name: Str(recprog)", "process.pid: Str(" + fmt.Sprint(cmd.Process.Pid) + ")",
				"thread.name: Str(spin20)", "cpu", "nanoseconds"}
			for try := 0; try < 50; try++ {
				b, _ = os.ReadFile(log)
				missing := false
				for _, w := range want {
					missing = missing || !bytes.Contains(b, []byte(w))
				}
				if !missing {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			for _, w := range want {
				if !bytes.Contains(b, []byte(w)) {
					t.Errorf("the collector's output has no %q", w)
				}
			}
			if n := strings.Count(string(b), "ResourceProfiles #0"); n < 2 {
				t.Errorf("the collector printed %d batches of profiles, want 2 or more", n)
			}
			if t.Failed() {
				t.Logf("collector output:\n%s", tail(b, 4000))
			}
		})
	}
}

// TestStopFlushes stops the agent in the middle of a long period: the
// period so far is exported before Run returns, and the profiled
// program runs on.
func TestStopFlushes(t *testing.T) {
	_, grpcAddr, _ := startCollector(t)
	cmd := startSpin(t)
	testprog.NeedPerfEvents(t)
	a, err := New(Options{Record: recorder.Options{PIDs: []int{cmd.Process.Pid}}, Period: time.Hour, OTLP: grpcAddr, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for a.ticks.Load() < 3 {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if st.Periods != 1 || st.Profiles != 1 || st.Sinks["otlp"].Sent != 1 {
		t.Errorf("stopped within its first period: %+v, want that period cut, made and sent", st)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the profiled program is gone: %v", err)
	}
}

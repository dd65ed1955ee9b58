package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestAgentSIGTERM runs sframe agent on a spinning program and sends it
// SIGTERM in the middle of its first period: it ships that period (the
// log says one period, one profile, with samples), exits 0, and the
// program runs on.
func TestAgentSIGTERM(t *testing.T) {
	needPerf(t)
	prog := exec.Command(recprog(t), "spin", "120")
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { prog.Process.Kill(); prog.Wait() }()
	var stdout bytes.Buffer
	var stderr testprog.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"agent", "-p", strconv.Itoa(prog.Process.Pid), "--listen", "127.0.0.1:0", "--period", "1h"}, &stdout, &stderr)
	}()
	// Its signal handler is in place once it says where it serves.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stderr.String(), "serving http://") {
		if time.Now().After(deadline) {
			t.Fatalf("sframe agent did not start in a minute:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Samples flow once a one-second profile from its server has some:
	// a fixed sleep is not enough on a loaded machine, where starting
	// to sample can take seconds.
	addr := stderr.String()
	addr = addr[strings.Index(addr, "http://"):]
	addr = addr[:strings.Index(addr, " ")]
	for {
		if n := serverSamples(t, addr+"?seconds=1"); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no samples from sframe agent's server in a minute:\n%s", stderr.String())
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("exit status %d after SIGTERM:\n%s", c, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("sframe agent still running a minute after SIGTERM:\n%s", stderr.String())
	}
	if log := stderr.String(); !strings.Contains(log, "stopped after 1 periods, 1 profiles,") || strings.Contains(log, " 0 samples") {
		t.Errorf("SIGTERM in the first period did not ship it:\n%s", log)
	}
	if err := prog.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the profiled program is gone: %v", err)
	}
}

// serverSamples fetches a profile from the agent's server and counts
// its samples.
func serverSamples(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return len(p.Sample)
}

// TestAgentSignals runs sframe agent and ends it with each signal that
// ends sframe's other long commands (a terminal closed under it: SIGHUP;
// Ctrl-\: SIGQUIT): it ships the period it was in and exits 0. SIGHUP and
// SIGQUIT killed it at once, the period's samples lost, without a line.
func TestAgentSignals(t *testing.T) {
	needPerf(t)
	bin := cliBinary(t)
	prog := exec.Command(recprog(t), "spin", "600")
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { prog.Process.Kill(); prog.Wait() }()
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGINT} {
		var stderr testprog.Buffer
		cmd := exec.Command(bin, "agent", "-p", strconv.Itoa(prog.Process.Pid), "--listen", "127.0.0.1:0", "--period", "1h")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(stderr.String(), "serving http://") {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("sframe agent did not start in a minute:\n%s", stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		addr := stderr.String()
		addr = addr[strings.Index(addr, "http://"):]
		addr = addr[:strings.Index(addr, " ")]
		// Starting to sample can take a while on a loaded machine.
		deadline = time.Now().Add(2 * time.Minute)
		for serverSamples(t, addr+"?seconds=1") == 0 {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no samples from sframe agent's server in 2 minutes:\n%s", stderr.String())
			}
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		if log := stderr.String(); err != nil || !strings.Contains(log, "stopped after 1 periods, 1 profiles,") || strings.Contains(log, " 0 samples") {
			t.Errorf("%v in the first period: %v, want it shipped and exit status 0:\n%s", sig, err, log)
		}
	}
}

// TestAgentUsage: usage errors are one line and exit status 2.
func TestAgentUsage(t *testing.T) {
	for _, args := range [][]string{
		{"agent", "-p", "1", "-a"},
		{"agent", "--period", "100ms"},
		{"agent", "--service-label", "colour"},
		{"agent", "--queue", "0"},
		{"agent", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if c := run(args, &stdout, &stderr); c != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "sframe agent: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, c, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if c := run([]string{"agent", "-h"}, &stdout, &stderr); c != 0 || !strings.Contains(stdout.String(), "--pyroscope") {
		t.Errorf("agent -h: exit %d:\n%s", c, stdout.String())
	}
}

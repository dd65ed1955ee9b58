package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/internal/testprog"
)

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// cliBinary builds the sframe command once per test binary, for the
// tests that signal it.
func cliBinary(t *testing.T) string {
	t.Helper()
	dir := testprog.Dir(t)
	cliOnce.Do(func() {
		bin := filepath.Join(dir, "sframe")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			cliErr = err
			t.Logf("go build: %s", out)
			return
		}
		cliBin = bin
	})
	if cliErr != nil {
		t.Fatalf("go build: %v", cliErr)
	}
	return cliBin
}

// waitExit waits for cmd and returns its exit status; a command that
// does not end within a minute fails the test (it is killed).
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s did not end after the signal", cmd.Args)
		return -1
	}
}

// readProfile reads the pprof profile at path.
func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// onlyFile checks that dir holds only the file name: no temporary file
// left beside the output.
func onlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != name {
			t.Errorf("%s left in %s", e.Name(), dir)
		}
	}
}

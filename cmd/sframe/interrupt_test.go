//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestReportInterrupted feeds half a pipe-mode recording to sframe
// report, on standard input or through a FIFO, then signals it while it
// waits for the rest (as Ctrl-C does to perf record -o - | sframe report
// -): it writes the samples read (a pprof profile or folded stacks to a
// file), says so, exits with 128 + the signal's number, and leaves no
// temporary file; for each of SIGINT, SIGTERM, SIGHUP and SIGQUIT.
func TestReportInterrupted(t *testing.T) {
	_, _, pipeRec := reportRecording(t)
	bin := cliBinary(t)
	data, err := os.ReadFile(pipeRec)
	if err != nil {
		t.Fatal(err)
	}
	half := len(data) / 2
	if half < 256<<10 {
		t.Fatalf("%s: %d bytes, want at least 512 KiB", pipeRec, len(data))
	}
	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		fifo := i%2 == 1
		format, name := "pprof", "profile.pb.gz"
		if i >= 2 {
			format, name = "folded", "out.folded"
		}
		dir := t.TempDir()
		out := filepath.Join(dir, name)
		in := "-"
		cmd := exec.Command(bin, "report", "-q", "--format", format, "-o", out, in)
		var w *os.File
		if fifo {
			in = filepath.Join(t.TempDir(), "fifo")
			if err := unix.Mkfifo(in, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd.Args[len(cmd.Args)-1] = in
		} else {
			r, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin, w = r, pw
			defer r.Close()
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if fifo {
			if w, err = os.OpenFile(in, os.O_WRONLY, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Write(data[:half]); err != nil {
			t.Fatal(err)
		}
		// Signal once sframe has read all there is and waits for
		// more: every sample before has been unwound.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			// TIOCINQ (FIONREAD): the bytes in the pipe.
			if n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ); err != nil || n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: sframe report did not read its input", sig)
			}
		}
		testprog.WaitBlocked(t, cmd.Process.Pid, 0)
		cmd.Process.Signal(sig)
		code := waitExit(t, cmd)
		w.Close()
		what := signalName(sig) + " (" + format + ", " + cmd.Args[len(cmd.Args)-1] + ")"
		m := regexp.MustCompile(`(?m)^sframe report: interrupted by ` + signalName(sig) + `: the output has the (\d+) samples read before$`).FindStringSubmatch(stderr.String())
		if code != 128+int(sig) || m == nil {
			t.Fatalf("%s: exit %d, stderr %q", what, code, stderr.String())
		}
		n, _ := strconv.Atoi(m[1])
		got := 0
		if format == "pprof" {
			for _, s := range readProfile(t, out).Sample {
				got += int(s.Value[0])
			}
		} else {
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				k, _ := strconv.Atoi(l[strings.LastIndexByte(l, ' ')+1:])
				got += k
			}
		}
		if n == 0 || got != n {
			t.Errorf("%s: %d samples read, %d in the output", what, n, got)
		}
		onlyFile(t, dir, name)
	}
}

//go:build linux && amd64

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
)

// buildFPJunk builds testdata/fpjunk.S as a shared library and
// testdata/fpjunkmain.c linked with it, in a directory of their own.
func buildFPJunk(t *testing.T) (exe, lib string) {
	t.Helper()
	testprog.NeedTool(t, "gcc")
	dir := t.TempDir()
	exe, lib = filepath.Join(dir, "fpjunkmain"), filepath.Join(dir, "libfpjunk.so")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", lib, "testdata/fpjunk.S"},
		{"-O2", "-g", "-o", exe, "testdata/fpjunkmain.c", "-L" + dir, "-lfpjunk", "-Wl,-rpath," + dir, "-Wl,-z,now"},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return exe, lib
}

// checkNoFileStops checks the summary's places where walks ended in lib,
// whose file was not used: one, for the true reason, whatever failure
// the frame-pointer fallback met there (the library's code leaves an
// address of no memory in the frame-pointer register).
func checkNoFileStops(t *testing.T, summary, lib string) {
	t.Helper()
	places := regexp.MustCompile(`(?m)^  (\d+): (.*), in `+regexp.QuoteMeta(lib)+`$`).FindAllStringSubmatch(summary, -1)
	if len(places) != 1 || places[0][2] != "no unwind tables (file not used)" {
		t.Errorf("places in %s: %q, want one, \"no unwind tables (file not used)\"; summary:\n%s", lib, places, summary)
	}
	if n, _ := strconv.Atoi(places[0][1]); len(places) == 1 && n < 10 {
		t.Errorf("%d walks ended in %s: too few to judge; summary:\n%s", n, lib, summary)
	}
}

// TestStopNoFile: walks that reach code whose file cannot be read end
// there for that reason, in sframe report's summary (the library deleted
// after perf record) as in sframe record's (the library's ELF header
// overwritten while the program runs), not "stack not readable" or "no
// unwind rule for PC" as the frame-pointer fallback happened to fail.
func TestStopNoFile(t *testing.T) {
	t.Run("report", func(t *testing.T) {
		exe, lib := buildFPJunk(t)
		data := filepath.Join(t.TempDir(), "perf.data")
		perfRecord(t, data, 999, exe, "1000")
		if err := os.Remove(lib); err != nil {
			t.Fatal(err)
		}
		_, errs, code := runCLI(t, "report", "--format", "folded", "-o", filepath.Join(t.TempDir(), "out.folded"), data)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
		checkNoFileStops(t, errs, lib)
	})
	t.Run("record", func(t *testing.T) {
		needPerf(t)
		exe, lib := buildFPJunk(t)
		cmd := exec.Command(exe, "1000000000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		// Once the library is mapped, its file is made unreadable as
		// ELF: the mapping keeps the pages it read.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if maps, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/maps"); strings.Contains(string(maps), lib) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the program did not map its library in 30 s")
			}
		}
		f, err := os.OpenFile(lib, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 16), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, errs, code := runCLI(t, "record", "-p", strconv.Itoa(cmd.Process.Pid), "--duration", "1s", "--format", "folded", "-o", filepath.Join(t.TempDir(), "out.folded"))
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, errs)
		}
		checkNoFileStops(t, errs, lib)
	})
}

package perfevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/perfdata"
)

// The test binary runs itself as an unprivileged user to meet the limits
// that root does not: kernel.perf_event_paranoid and the locked-memory
// limit. TestMain runs runHelper instead of the tests when helperEnv
// names what to try.
const helperEnv = "PERFEVENT_TEST_HELPER"

// helperResult is what the helper reports, as JSON on stdout.
type helperResult struct {
	Err        string
	Permission bool // errors.Is(err, ErrPermission)
	Pages      int
	Warnings   []string
	// UserOnly is Session.UserOnly; ExcludeKernel says the event
	// excludes the kernel.
	UserOnly      string
	ExcludeKernel bool
}

// helperOptions are the options each helper mode opens.
var helperOptions = map[string]Options{
	"user":       {PIDs: []int{os.Getpid()}},
	"callchain":  {PIDs: []int{os.Getpid()}, Callchain: true},
	"systemwide": {SystemWide: true},
	"mlock":      {PIDs: []int{os.Getpid()}, RingPages: 1024},
	"kernelif":   {PIDs: []int{os.Getpid()}, KernelIfPermitted: true},
}

func runHelper() {
	mode := os.Getenv(helperEnv)
	if mode == "mlock" {
		// No locked memory beyond the kernel's own per-CPU allowance.
		unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{})
	}
	var res helperResult
	s, err := Open(helperOptions[mode])
	if err != nil {
		res.Err = err.Error()
		res.Permission = errors.Is(err, ErrPermission)
	} else {
		res.Pages, res.Warnings = s.RingPages(), s.Warnings()
		res.UserOnly, res.ExcludeKernel = s.UserOnly(), s.Attrs()[0].Flags.Has(perfdata.AttrExcludeKernel)
		s.Close()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// runAsNobody runs the test binary as user nobody without capabilities,
// in helper mode.
func runAsNobody(t *testing.T, mode string) helperResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary's own directory is private to root.
	dir, err := os.MkdirTemp("", "perfevent-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "helper")
	copyFile(t, self, bin)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("setpriv %s: %v\n%s", bin, err, out)
	}
	var res helperResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	return res
}

func copyFile(t *testing.T, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// needRootAndSetpriv skips the test unless it can switch to another user.
func needRootAndSetpriv(t *testing.T) {
	t.Helper()
	needPerf(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the helper as another user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("setpriv (util-linux) not found; required under CI")
		}
		t.Skip("setpriv not found")
	}
}

func TestParanoidErrors(t *testing.T) {
	needRootAndSetpriv(t)
	paranoid, ok := readSysctl("kernel/perf_event_paranoid")
	if !ok {
		t.Skip("no kernel.perf_event_paranoid")
	}
	for _, tc := range []struct {
		mode, what string
		need       int
	}{
		{"user", "per-thread user-space sampling", 2},
		{"callchain", "kernel callchains", 1},
		{"systemwide", "system-wide (per-CPU) sampling", 0},
	} {
		res := runAsNobody(t, tc.mode)
		if paranoid <= tc.need {
			if res.Err != "" {
				t.Errorf("%s at perf_event_paranoid %d: %s", tc.mode, paranoid, res.Err)
			}
			continue
		}
		want := fmt.Sprintf("kernel.perf_event_paranoid is %d; for %s it must be %d or lower (sysctl kernel.perf_event_paranoid=%d), or the profiler needs CAP_PERFMON", paranoid, tc.what, tc.need, tc.need)
		if !res.Permission || !strings.Contains(res.Err, want) || strings.Contains(res.Err, "\n") {
			t.Errorf("%s at perf_event_paranoid %d: error %q (ErrPermission %v), want one line with %q", tc.mode, paranoid, res.Err, res.Permission, want)
		}
		t.Logf("%s: %s", tc.mode, res.Err)
	}
}

// TestKernelIfPermitted opens an event that samples the kernel where that
// is allowed: as root it does; as user nobody, whom
// kernel.perf_event_paranoid 2 allows user space only, Open falls back to
// user space and UserOnly says why.
func TestKernelIfPermitted(t *testing.T) {
	needPerf(t)
	s, err := Open(Options{PIDs: []int{os.Getpid()}, KernelIfPermitted: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.UserOnly() != "" || s.Attrs()[0].Flags.Has(perfdata.AttrExcludeKernel) {
		t.Errorf("as user %d: the kernel excluded (%q)", os.Geteuid(), s.UserOnly())
	}
	s.Close()
	needRootAndSetpriv(t)
	paranoid, ok := readSysctl("kernel/perf_event_paranoid")
	if !ok || paranoid > 2 {
		t.Skipf("perf_event_paranoid %d: an unprivileged user cannot sample", paranoid)
	}
	res := runAsNobody(t, "kernelif")
	want := ""
	if paranoid == 2 {
		want = "kernel.perf_event_paranoid is 2; samples in the kernel need 1 or lower, or CAP_PERFMON"
	}
	if res.Err != "" || res.UserOnly != want || res.ExcludeKernel != (want != "") {
		t.Errorf("as nobody at perf_event_paranoid %d: error %q, user only %q (kernel excluded %v), want %q", paranoid, res.Err, res.UserOnly, res.ExcludeKernel, want)
	}
}

func TestLockedMemoryLimit(t *testing.T) {
	needRootAndSetpriv(t)
	paranoid, _ := readSysctl("kernel/perf_event_paranoid")
	mlockKB, ok := readSysctl("kernel/perf_event_mlock_kb")
	if !ok || paranoid > 2 || paranoid < 0 {
		t.Skipf("perf_event_paranoid %d: an unprivileged user cannot sample, or has no limit", paranoid)
	}
	res := runAsNobody(t, "mlock")
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	// Each CPU may lock perf_event_mlock_kb, ring and header page; the
	// helper has no RLIMIT_MEMLOCK beyond it.
	page := os.Getpagesize()
	want := 1024
	for want > 1 && (want+1)*page > mlockKB*1024 {
		want /= 2
	}
	if res.Pages != want {
		t.Errorf("%d ring pages under perf_event_mlock_kb %d, want %d", res.Pages, mlockKB, want)
	}
	msg := fmt.Sprintf("ring buffers reduced from %d KiB to %d KiB per CPU: the locked-memory limit", 1024*page/1024, want*page/1024)
	if want < 1024 && (len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], msg)) {
		t.Errorf("warnings %q, want %q...", res.Warnings, msg)
	}
	t.Logf("%d pages: %q", res.Pages, res.Warnings)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestMmapRetry(t *testing.T) {
	needPerf(t)
	real := mmapRing
	defer func() { mmapRing = real }()
	page := os.Getpagesize()
	// A limit that admits rings of 16 data pages.
	mmapRing = func(fd, size int) ([]byte, error) {
		if size > 17*page {
			return nil, unix.EPERM
		}
		return real(fd, size)
	}
	s, err := Open(Options{PIDs: []int{os.Getpid()}, RingPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	if s.RingPages() != 16 || len(s.Warnings()) != 1 || !strings.Contains(s.Warnings()[0], fmt.Sprintf("reduced from %d KiB to %d KiB", 256*page/1024, 16*page/1024)) {
		t.Errorf("%d pages, warnings %q", s.RingPages(), s.Warnings())
	}
	s.Close()

	// A limit that admits nothing: Open fails and leaves nothing open.
	mmapRing = func(fd, size int) ([]byte, error) { return nil, unix.EPERM }
	before := openFDs(t)
	_, err = Open(Options{PIDs: []int{os.Getpid()}, StackUser: 8192})
	if !errors.Is(err, ErrLockedMemory) || !strings.Contains(err.Error(), "kernel.perf_event_mlock_kb is") {
		t.Errorf("error %v, want ErrLockedMemory naming perf_event_mlock_kb", err)
	}
	// The smallest ring tried holds two samples of 8 KiB stacks.
	if !strings.Contains(err.Error(), fmt.Sprintf("map a ring buffer of %d KiB per CPU", 8*page/1024)) {
		t.Errorf("error %v: want the smallest ring, %d KiB", err, 8*page/1024)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after the failed Open, %d before", after, before)
	}
}

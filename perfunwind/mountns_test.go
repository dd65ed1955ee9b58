//go:build linux

package perfunwind_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// TestMountNamespace: a recording of a process whose files are at their
// paths only in its own mount namespace (a tmpfs mounted there, the
// program chrooted into it), read while the process still runs, is
// unwound and named from the files the process maps, as perf script does
// (it reads them in the process's namespace): its synthesized records
// (perf record -p) name the files by their paths on this machine, which
// hold nothing, the kernel's (perf record -- COMMAND) by their paths in
// the chroot. Before, the program's and the libraries' frames were
// [unknown] and the walks stopped in the first of them.
func TestMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tmpfs in a mount namespace and chroots")
	}
	for _, tool := range []string{"perf", "unshare", "chroot", "mount", "ldd"} {
		testprog.NeedTool(t, tool)
	}
	exe := testprog.Build(t, "testdata/nsloop.c", "-O1", "-g")
	root := t.TempDir()
	if err := copyFile(exe, filepath.Join(root, "nsloop")); err != nil {
		t.Fatal(err)
	}
	ldd, err := exec.Command("ldd", exe).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", exe, err)
	}
	for _, m := range regexp.MustCompile(`(?m)(?:=> |^\s*)(/\S+)`).FindAllStringSubmatch(string(ldd), -1) {
		if err := copyFile(m[1], filepath.Join(root, m[1])); err != nil {
			t.Fatal(err)
		}
	}
	// The namespace's shell mounts a tmpfs at $0 (empty on this
	// machine), copies the root file system $1 into it and runs nsloop
	// there, until killed with its process group.
	const run = `unshare -m --propagation private --fork sh -c 'mount -t tmpfs none "$0" && cp -a "$1/." "$0" && exec chroot "$0" /nsloop' "$0" "$1"`
	for _, c := range []struct {
		name string
		// start runs nsloop in the namespace and records it into
		// data, once it runs as pid (find).
		start func(t *testing.T, mnt, data string) *exec.Cmd
	}{
		{"attached", func(t *testing.T, mnt, data string) *exec.Cmd {
			cmd := exec.Command("sh", "-c", run, mnt, root)
			startGroup(t, cmd)
			pid := findChrooted(t, mnt)
			perfRun(t, "record", "-q", "-N", "-o", data, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000", "-p", strconv.Itoa(pid), "--", "sleep", "1")
			return cmd
		}},
		{"started", func(t *testing.T, mnt, data string) *exec.Cmd {
			// perf record ends with its command, the shell, while
			// nsloop runs on in the background (its output not
			// perf's: perf would wait for it).
			cmd := exec.Command("perf", "record", "-q", "-N", "-o", data, "--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000", "--",
				"sh", "-c", run+` >/dev/null 2>&1 & sleep 1`, mnt, root)
			startGroup(t, cmd)
			if err := cmd.Wait(); err != nil {
				t.Skipf("perf record: %v", err)
			}
			return cmd
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mnt, data := filepath.Join(dir, "mnt"), filepath.Join(dir, "perf.data")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			c.start(t, mnt, data)
			pid := findChrooted(t, mnt)
			if _, err := os.Stat(filepath.Join(mnt, "nsloop")); err == nil {
				t.Fatal("the tmpfs is mounted on this machine too: this test tells nothing")
			}
			want := perfScriptText(t, data, "--no-inline", "--pid", strconv.Itoa(pid))
			// An empty build-ID cache: a copy there would name the
			// program whatever the process maps.
			got := scriptOfPid(t, data, uint32(pid), perfunwind.Options{BuildIDDir: t.TempDir()})
			ps, os_ := parseScript(t, want), parseScript(t, got)
			if len(ps) < 100 || len(ps) != len(os_) {
				t.Fatalf("perf script: %d samples of nsloop, ours %d", len(ps), len(os_))
			}
			same, named := 0, 0
			for i := range ps {
				if fmtFrames(ps[i].frames) == fmtFrames(os_[i].frames) {
					same++
				}
				if strings.Contains(fmtFrames(os_[i].frames), "main (") {
					named++
				}
			}
			if same < len(ps)*95/100 || named < len(ps)*95/100 {
				i := 0
				for i < len(ps)-1 && fmtFrames(ps[i].frames) == fmtFrames(os_[i].frames) {
					i++
				}
				t.Errorf("%d of %d samples as perf script has them, %d with main named; sample %d, perf:\n%s\nours:\n%s",
					same, len(ps), named, i, fmtFrames(ps[i].frames), fmtFrames(os_[i].frames))
			}
		})
	}
}

// scriptOfPid returns our perf script text of the samples of process pid
// in the recording at path.
func scriptOfPid(t *testing.T, path string, pid uint32, opts perfunwind.Options) []byte {
	t.Helper()
	r, s := openSession(t, path, opts)
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var buf bytes.Buffer
	sw := stackprof.NewScriptWriter(&buf, res)
	err := s.Process(r, perfunwind.ProcessOptions{}, func(st *perfunwind.Stack) error {
		if st.Pid != pid {
			return nil
		}
		return sw.Write(st)
	})
	if err == nil {
		err = sw.Flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// startGroup starts cmd in a process group of its own, killed at the
// end of the test.
func startGroup(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		cmd.Wait()
	})
}

// findChrooted returns the process of nsloop chrooted into mnt, waiting
// for it to start (a minute at most, on a loaded machine).
func findChrooted(t *testing.T, mnt string) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			root, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", pid))
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if root == mnt && string(comm) == "nsloop\n" {
				return pid
			}
		}
	}
	t.Fatalf("no nsloop chrooted into %s", mnt)
	return 0
}

// perfRun runs perf with args; a perf that fails skips the test (fails
// under CI).
func perfRun(t *testing.T, args ...string) {
	t.Helper()
	if b, err := exec.Command("perf", args...).CombinedOutput(); err != nil {
		skipOrFail(t, fmt.Errorf("perf %s: %v\n%s", strings.Join(args, " "), err, b))
	}
}

// copyFile copies the file at src to dst, making dst's directories.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
	}
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	return err
}

package agent

import (
	"os"
	"testing"
)

// Cgroup paths as systemd, Docker, containerd and Kubernetes write them
// in /proc/PID/cgroup.
func TestContainerID(t *testing.T) {
	const id = "3f2c7e1b9a8d4c6e5f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a"
	for path, want := range map[string]string{
		"/system.slice/docker-" + id + ".scope": id,
		"/docker/" + id:                         id,
		"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-" + id + ".scope": id,
		"/kubepods/besteffort/pod7a0f/" + id:       id,
		"/user.slice/user-0.slice/session-3.scope": "",
		"/":                                "",
		"/system.slice/x" + id + "0.scope": "", // 65 digits: not an id
	} {
		if got := containerID(path); got != want {
			t.Errorf("containerID(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	v2 := "0::/user.slice/user-0.slice/session-3.scope\n"
	if got := cgroupPath([]byte(v2)); got != "/user.slice/user-0.slice/session-3.scope" {
		t.Errorf("cgroup v2: %q", got)
	}
	v1 := "12:pids:/docker/abc\n11:memory:/docker/abc\n0::/\n"
	if got := cgroupPath([]byte(v1)); got != "/" {
		t.Errorf("hybrid: %q, want the unified hierarchy's /", got)
	}
	if got := cgroupPath([]byte("4:cpu,cpuacct:/docker/abc\n")); got != "/docker/abc" {
		t.Errorf("cgroup v1: %q", got)
	}
	if got := cgroupPath([]byte("garbage")); got != "" {
		t.Errorf("garbage: %q", got)
	}
}

func TestInCgroup(t *testing.T) {
	for _, c := range []struct {
		path, want string
		in         bool
	}{
		{"/system.slice/a.service", "/system.slice", true},
		{"/system.slice/a.service", "/system.slice/a.service", true},
		{"/system.slice/ab.service", "/system.slice/a", false},
		{"/user.slice", "/system.slice", false},
		{"/anything", "/", true},
	} {
		if got := inCgroup(c.path, c.want); got != c.in {
			t.Errorf("inCgroup(%q, %q) = %v", c.path, c.want, got)
		}
	}
}

// TestCgroupOf converts --cgroup directories as this machine mounts its
// hierarchies.
func TestCgroupOf(t *testing.T) {
	if got := cgroupOf("/system.slice/x/"); got != "/system.slice/x" {
		t.Errorf("a cgroup path: %q", got)
	}
	_, err := os.Stat("/sys/fs/cgroup/cgroup.procs")
	unified := err == nil
	for arg, want := range map[bool]map[string]string{
		true:  {"/sys/fs/cgroup": "/", "/sys/fs/cgroup/system.slice/x": "/system.slice/x"},
		false: {"/sys/fs/cgroup/unified": "/", "/sys/fs/cgroup/cpu/x/y": "/x/y", "/sys/fs/cgroup/unified/x": "/x"},
	}[unified] {
		if got := cgroupOf(arg); got != want {
			t.Errorf("cgroupOf(%q) = %q, want %q (unified hierarchy at /sys/fs/cgroup: %v)", arg, got, want, unified)
		}
	}
}

// Names come from the profiled programs: none reaches a series key or a
// log with the characters of Pyroscope's key syntax or control bytes.
func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"gofmt":              "gofmt",
		"my app{x=1,y}":      "my_app_x_1_y_",
		"\x1b[31mred\x1b[0m": "_[31mred_[0m",
		"café":               "caf__",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'x'
	}
	if got := sanitize(string(long)); len(got) != 128 {
		t.Errorf("a 1000-byte name becomes %d bytes, want 128", len(got))
	}
}

func TestPyroscopeKey(t *testing.T) {
	p, err := newPyroscope("http://127.0.0.1:4040", "h")
	if err != nil {
		t.Fatal(err)
	}
	s := &shipment{service: "recprog", labels: map[string]string{"service_name": "recprog", "hostname": "vm,1", "b": "x"}}
	if got, want := p.key(s), "recprog{b=x,hostname=vm_1}"; got != want {
		t.Errorf("key = %q, want %q", got, want)
	}
	if got := p.ingest.String(); got != "http://127.0.0.1:4040/ingest" {
		t.Errorf("ingest URL %q", got)
	}
	for _, bad := range []string{"", "127.0.0.1:4040", "ftp://x", "http://"} {
		if _, err := newPyroscope(bad, "h"); err == nil {
			t.Errorf("newPyroscope(%q) accepted", bad)
		}
	}
}

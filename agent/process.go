package agent

import (
	"bytes"
	"cmp"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/internal/sysfile"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/recorder"
)

// procInfo is what the agent knows of a process: its service and labels,
// read from /proc once, at its first sample, and kept while it has
// samples (see Agent.cutPeriod).
type procInfo struct {
	service   string
	container string
	cgroup    string
	keep      bool   // in Options.Cgroup, when one is given
	period    uint64 // the last period with a sample
	// exec is the program of the samples it was read at (their
	// perfunwind.Stack.Exec): after an exec, every thread of the
	// process runs another program, another service, whose procInfo
	// execs holds by that name. comm is the main thread's name in the
	// first sample of it ("" while only other threads had samples).
	exec  string
	comm  string
	execs map[string]*procInfo
	last  string // the key of the last procInfo added to execs
}

// maxExecs bounds procInfo.execs: a process that executes more programs
// than that keeps the last one's service for the rest.
const maxExecs = 8

// proc returns what is known of the process of st, reading it the first
// time, and again when st was taken under another program than the one
// it was read at (st.Exec: the process executed another).
func (a *Agent) proc(st *perfunwind.Stack, sess *perfunwind.Session) *procInfo {
	pi := a.procs[st.Pid]
	if pi == nil {
		pi = a.readProc(st, sess)
		a.procs[st.Pid] = pi
		return pi
	}
	pi.period = a.periodNum
	q := pi
	if st.Exec != pi.exec {
		q = pi.execs[st.Exec]
		if q == nil {
			if len(pi.execs) >= maxExecs {
				return pi.execs[pi.last]
			}
			q = a.readProc(st, sess)
			if pi.execs == nil {
				pi.execs = map[string]*procInfo{}
			}
			pi.execs[st.Exec], pi.last = q, st.Exec
		}
	}
	if q.comm == "" && st.Tid == st.Pid {
		q.comm = st.Comm // read at another thread's sample
	}
	return q
}

// readProc reads what is known of the process of st from /proc: its
// service is its executable's name, unless st was taken under another
// program than the one the process runs now. Then the program's name
// at its exec (st.Exec) names it when the recording saw that exec,
// else the main thread's name in st, else the thread's.
func (a *Agent) readProc(st *perfunwind.Stack, sess *perfunwind.Session) *procInfo {
	pid := st.Pid
	pi := &procInfo{keep: true, period: a.periodNum, exec: st.Exec}
	if st.Tid == st.Pid {
		pi.comm = st.Comm
	}
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	exe := ""
	if target, err := os.Readlink(dir + "/exe"); err == nil {
		exe = filepath.Base(strings.TrimSuffix(target, " (deleted)"))
	}
	if exe != "" {
		// Whether the process runs st's program still: the recording
		// knows when it saw the exec; else the main thread's name
		// tells, when st has it.
		switch {
		case st.Exec != "" || sess.Exec(pid) != "":
			// The process may have executed another program since st,
			// before the session read that exec's record (it names a
			// period's samples as the period ends, while records wait
			// in the rings): its name now, other than st's program's,
			// tells (a program executed through a symbolic link keeps
			// the link's name there, as in st.Exec).
			if sess.Exec(pid) != st.Exec || !sess.Known(pid) || (st.Exec != "" && procComm(dir) != st.Exec) {
				exe = cmp.Or(st.Exec, pi.comm, st.Comm)
			}
		case pi.comm != "":
			if now := procComm(dir); now != "" && now != pi.comm {
				exe = pi.comm
			}
		}
	}
	if exe == "" || exe == "." || exe == "/" {
		// Gone already, or a kernel thread: the program's name at the
		// exec st followed, else the process's name as the recording
		// knows it, else (the session forgot it at its exit, as it
		// does a process that lived less than a tick) the name its
		// main thread's samples were taken under (see Agent.noteGone),
		// else its thread's.
		switch name, ok := a.gone[pid]; {
		case st.Exec != "":
			exe = st.Exec
		case pi.comm != "":
			exe = pi.comm
		case sess.KnownThread(pid):
			exe = sess.ThreadName(pid)
		case ok:
			exe = name
		default:
			exe = st.Comm
		}
	}
	var all []string
	if cg, err := sysfile.ReadFileMax(dir+"/cgroup", maxProcFile); err == nil {
		pi.cgroup = cgroupPath(cg)
		all = cgroupPaths(cg)
		for _, p := range all {
			if pi.container = containerID(p); pi.container != "" {
				break
			}
		}
	}
	if a.opts.Cgroup != "" {
		pi.keep = false
		for _, p := range all {
			pi.keep = pi.keep || inCgroup(p, a.opts.Cgroup)
		}
	}
	pi.service = exe
	switch a.opts.ServiceLabel {
	case "container_id":
		if pi.container != "" {
			pi.service = pi.container
		}
	case "cgroup":
		if pi.cgroup != "" {
			pi.service = pi.cgroup
		}
	}
	pi.service = sanitize(pi.service)
	if pi.service == "" {
		pi.service = "unknown"
	}
	return pi
}

// procComm returns the name of the process whose /proc directory is dir
// (its main thread's), "" when it cannot be read.
func procComm(dir string) string {
	b, err := sysfile.ReadFileMax(dir+"/comm", maxProcFile)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// noteGone notes the name of each process of p new to the agent that the
// session forgot already (it exited within the tick): its main thread's
// name in its samples, which names its service better than the name of
// whichever of its threads proc sees first.
func (a *Agent) noteGone(p *recorder.Profile, sess *perfunwind.Session) {
	clear(a.gone)
	p.Each(func(st *perfunwind.Stack, n int64) error {
		if st.Tid == st.Pid && a.procs[st.Pid] == nil && !sess.KnownThread(st.Pid) {
			if a.gone == nil {
				a.gone = map[uint32]string{}
			}
			a.gone[st.Pid] = st.Comm
		}
		return nil
	})
}

// maxProcFile bounds what is read of a process's cgroup file: one line
// per hierarchy, 4 KiB holds every real one (a longer one gives no
// labels).
const maxProcFile = 4 << 10

// cgroupPath returns the cgroup v2 path of a /proc/PID/cgroup file (the
// "0::PATH" line), else the first hierarchy's path.
func cgroupPath(b []byte) string {
	first := ""
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.SplitN(line, []byte(":"), 3)
		if len(f) != 3 {
			continue
		}
		if string(f[0]) == "0" && len(f[1]) == 0 {
			return string(f[2])
		}
		if first == "" {
			first = string(f[2])
		}
	}
	return first
}

// cgroupPaths returns the path of every hierarchy of a /proc/PID/cgroup
// file: a process belongs to one cgroup in each.
func cgroupPaths(b []byte) []string {
	var paths []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.SplitN(line, []byte(":"), 3); len(f) == 3 {
			paths = append(paths, string(f[2]))
		}
	}
	return paths
}

// containerID returns the container id in a cgroup path: the last path
// element holding 64 hexadecimal digits (docker-ID.scope,
// cri-containerd-ID.scope, /docker/ID, kubepods/.../ID), or "".
func containerID(path string) string {
	for path != "" && path != "/" {
		elem := filepath.Base(path)
		path = filepath.Dir(path)
		for i := 0; i+64 <= len(elem); i++ {
			if isHex64(elem[i:i+64]) && (i == 0 || !isHexDigit(elem[i-1])) && (i+64 == len(elem) || !isHexDigit(elem[i+64])) {
				return elem[i : i+64]
			}
		}
	}
	return ""
}

func isHex64(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// cgroupOf returns the cgroup path (as /proc/PID/cgroup writes it) of
// the --cgroup argument: such a path, or a directory under
// /sys/fs/cgroup, where either the unified hierarchy is mounted (cgroup
// v2) or each hierarchy has a directory of its own (v1 and hybrid: cpu,
// memory, ..., unified), whose name is not part of the cgroup's path.
func cgroupOf(want string) string {
	want = filepath.Clean(want)
	rest, ok := strings.CutPrefix(want, "/sys/fs/cgroup")
	if !ok {
		return want
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err != nil {
		// One directory per hierarchy: drop its name.
		rest = strings.TrimPrefix(rest, "/")
		_, rest, _ = strings.Cut(rest, "/")
		rest = "/" + rest
	}
	return filepath.Clean("/" + rest)
}

// inCgroup reports whether a process in cgroup path (of one hierarchy)
// is in the cgroup want (see cgroupOf) or below it.
func inCgroup(path, want string) bool {
	path = filepath.Clean(path)
	return want == "/" || path == want || strings.HasPrefix(path, want+"/")
}

// sanitize makes s fit as a label value and a Pyroscope application
// name: printable ASCII without the characters of its key syntax
// ({}=,") and spaces, at most 128 bytes. Names come from the profiled
// programs; nothing they choose reaches a log or a URL raw.
func sanitize(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 128; i++ {
		c := s[i]
		switch {
		case c <= ' ' || c >= 0x7f, strings.IndexByte("{}=,\"'\\", c) >= 0:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

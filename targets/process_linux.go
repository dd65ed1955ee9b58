//go:build linux

package targets

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/elffile"
)

// StopTimeout bounds how long AttachProcess waits for one thread to stop
// (a thread in uninterruptible sleep, state D, stops only when it wakes).
var StopTimeout = 10 * time.Second

// maxAttachRounds bounds the re-reads of /proc/PID/task while threads keep
// appearing during the attach.
const maxAttachRounds = 100

// Process is a live process stopped with ptrace. All its threads stay
// stopped until Close, which detaches them and lets the process continue.
// Its methods are safe for concurrent use.
type Process struct {
	pid      int
	arch     elf.Machine
	exe      string
	threads  []Thread
	modules  []Module
	warnings []error
	mem      *procMem

	mu       sync.Mutex
	tr       *tracer
	attached []stopped // threads to detach, with signals to re-deliver
	closed   bool
	closeErr error
}

// stopped is an attached, stopped thread.
type stopped struct {
	tid int
	sig int // signal to deliver again on detach (signal-delivery-stop), or 0
}

// tracer runs functions on one goroutine locked to its OS thread: Linux
// accepts ptrace requests for a tracee only from the thread that attached
// it. The goroutine never unlocks, so its thread exits with it, and the
// kernel detaches any tracee left behind.
type tracer struct {
	reqs chan func()
	tid  int // the OS thread's id
}

func newTracer() *tracer {
	t := &tracer{reqs: make(chan func())}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		t.tid = unix.Gettid()
		close(ready)
		for f := range t.reqs {
			f()
		}
	}()
	<-ready
	return t
}

// do runs f on the tracer thread and waits for it.
func (t *tracer) do(f func()) {
	done := make(chan struct{})
	t.reqs <- func() { f(); close(done) }
	<-done
}

// stop ends the tracer goroutine (and its thread).
func (t *tracer) stop() { close(t.reqs) }

// AttachProcess stops every thread of process pid with ptrace and captures
// their registers and names, the module list and access to the memory.
//
// Threads are attached with PTRACE_SEIZE and stopped with
// PTRACE_INTERRUPT; /proc/PID/task is read again until no new thread
// appears, so threads created during the attach are caught. Threads that
// exit during the attach are left out. All ptrace requests run on one
// dedicated OS thread. On error every thread attached so far is detached.
//
// Do not call wait4(-1, ...) (syscall.Wait4 with pid -1) elsewhere in the
// program while a Process is open: it could consume the tracees' stops.
func AttachProcess(pid int) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("targets: attach: bad pid %d", pid)
	}
	if pid == os.Getpid() {
		return nil, fmt.Errorf("targets: attach %d: cannot trace the calling process", pid)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr != nil {
			return nil, fmt.Errorf("targets: attach %d: no such process", pid)
		}
		return nil, fmt.Errorf("targets: attach %d: reading executable link (kernel thread?): %w", pid, err)
	}
	if err := checkExeClass(pid); err != nil {
		return nil, fmt.Errorf("targets: attach %d: %w", pid, err)
	}

	p := &Process{pid: pid, arch: hostArch, exe: exe, tr: newTracer()}
	var attachErr error
	p.tr.do(func() { attachErr = p.attachAll() })
	if attachErr != nil {
		p.Close()
		return nil, attachErr
	}
	if err := p.loadState(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// checkExeClass refuses 32-bit processes, whose registers this package does
// not decode.
func checkExeClass(pid int) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fmt.Errorf("opening executable: %w", err)
	}
	defer f.Close()
	h, err := elffile.ReadHeader(f)
	switch {
	case errors.Is(err, elffile.ErrNotELF):
		return nil
	case err != nil:
		return fmt.Errorf("reading executable header: %w", err)
	case h.Class != elf.ELFCLASS64:
		return fmt.Errorf("32-bit process not supported")
	}
	return nil
}

// listTasks returns the thread ids in /proc/PID/task.
func listTasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// taskState returns the state letter of /proc/PID/task/TID/stat, or 0.
func taskState(pid, tid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// permissionHint explains an EPERM from PTRACE_SEIZE of thread tid;
// self is the tracer thread's id, not worth reporting as another tracer.
func permissionHint(pid, tid, self int) string {
	var hints []string
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
				if v = strings.TrimSpace(v); v != "0" && v != strconv.Itoa(self) {
					hints = append(hints, "already traced by pid "+v)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		if v := strings.TrimSpace(string(b)); v != "0" {
			hints = append(hints, "kernel.yama.ptrace_scope="+v)
		}
	}
	if len(hints) == 0 {
		hints = append(hints, "need CAP_SYS_PTRACE or the same uid")
	}
	return strings.Join(hints, "; ")
}

// attachAll runs on the tracer thread: it seizes and interrupts every task
// until the task list is stable, and waits for each stop.
func (p *Process) attachAll() error {
	seen := map[int]bool{}
	for round := 0; ; round++ {
		if round == maxAttachRounds {
			return fmt.Errorf("targets: attach %d: threads still appearing after %d rounds", p.pid, round)
		}
		tids, err := listTasks(p.pid)
		if err != nil {
			return fmt.Errorf("targets: attach %d: listing threads: %w", p.pid, err)
		}
		var fresh []int
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid] = true
			if err := p.seize(tid); err != nil {
				if err == errGone {
					continue
				}
				return err
			}
			p.attached = append(p.attached, stopped{tid: tid})
			if err := unix.PtraceInterrupt(tid); err != nil && err != unix.ESRCH {
				return fmt.Errorf("targets: attach %d: PTRACE_INTERRUPT thread %d: %w", p.pid, tid, err)
			}
			fresh = append(fresh, tid)
		}
		if len(fresh) == 0 {
			if len(p.attached) == 0 {
				return fmt.Errorf("targets: attach %d: no thread could be attached", p.pid)
			}
			return nil
		}
		if err := p.waitStops(fresh); err != nil {
			return err
		}
	}
}

// errGone reports a thread that exited before it could be attached.
var errGone = errors.New("thread gone")

// seize attaches one thread. The kernel refuses (EPERM) threads that are
// exiting (zombie or dead, state Z or X), which a busy process has at any
// time: those, and threads that vanish, yield errGone.
func (p *Process) seize(tid int) error {
	for try := 0; ; try++ {
		err := unix.PtraceSeize(tid)
		if err == nil {
			return nil
		}
		if err == unix.ESRCH {
			return errGone
		}
		if err != unix.EPERM {
			return fmt.Errorf("targets: attach %d: PTRACE_SEIZE thread %d: %w", p.pid, tid, err)
		}
		switch taskState(p.pid, tid) {
		case 'Z', 'X', 0:
			return errGone
		}
		if try == 3 || tid == p.pid {
			return fmt.Errorf("targets: attach %d: PTRACE_SEIZE thread %d: %w (%s)", p.pid, tid, err, permissionHint(p.pid, tid, p.tr.tid))
		}
		time.Sleep(time.Millisecond) // an exiting thread may be between states
	}
}

// yieldFor is how long waitStops yields before it starts sleeping.
const yieldFor = 20 * time.Millisecond

// waitStops polls (WNOHANG, so a thread that never stops cannot hang the
// caller past StopTimeout) until each of tids has stopped or exited.
func (p *Process) waitStops(tids []int) error {
	pending := append([]int(nil), tids...)
	start := time.Now()
	deadline := start.Add(StopTimeout)
	delay := 5 * time.Microsecond
	for {
		rest := pending[:0]
		for _, tid := range pending {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
			for err == unix.EINTR {
				wpid, err = unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
			}
			switch {
			case err == unix.ECHILD:
				p.forget(tid)
			case err != nil:
				return fmt.Errorf("targets: attach %d: wait for thread %d: %w", p.pid, tid, err)
			case wpid == 0:
				rest = append(rest, tid)
			case ws.Exited() || ws.Signaled():
				p.forget(tid)
			case ws.Stopped():
				event := uint32(ws) >> 16
				if event != unix.PTRACE_EVENT_STOP {
					// Signal-delivery-stop: a signal arrived before the
					// interrupt. Keep it to deliver on detach.
					p.setSig(tid, int(ws.StopSignal()))
				}
			default:
				rest = append(rest, tid)
			}
		}
		pending = rest
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("targets: attach %d: thread %d did not stop within %v (state %q)", p.pid, pending[0], StopTimeout, taskState(p.pid, pending[0]))
		}
		// Threads stop only once the scheduler runs them: for the first
		// few milliseconds yield the CPU (to them, on a busy machine)
		// rather than sleep, since each sleep costs a wake-up latency
		// that on a loaded machine is far longer than the sleep.
		if time.Since(start) < yieldFor {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		time.Sleep(delay)
		if delay < 2*time.Millisecond {
			delay *= 2
		}
	}
}

func (p *Process) forget(tid int) {
	for i, s := range p.attached {
		if s.tid == tid {
			p.attached = append(p.attached[:i], p.attached[i+1:]...)
			return
		}
	}
}

func (p *Process) setSig(tid, sig int) {
	for i := range p.attached {
		if p.attached[i].tid == tid {
			p.attached[i].sig = sig
		}
	}
}

// loadState reads registers (on the tracer thread), names, modules and
// opens the memory.
func (p *Process) loadState() error {
	var regErr error
	p.tr.do(func() {
		for _, s := range p.attached {
			r, err := getRegs(s.tid)
			if err != nil {
				regErr = fmt.Errorf("targets: attach %d: registers of thread %d: %w", p.pid, s.tid, err)
				return
			}
			p.threads = append(p.threads, Thread{TID: s.tid, Regs: r, Signal: s.sig})
		}
	})
	if regErr != nil {
		return regErr
	}
	for i := range p.threads {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", p.pid, p.threads[i].TID))
		p.threads[i].Name = strings.TrimSuffix(string(b), "\n")
	}
	sort.Slice(p.threads, func(i, j int) bool {
		a, b := p.threads[i].TID, p.threads[j].TID
		if (a == p.pid) != (b == p.pid) {
			return a == p.pid
		}
		return a < b
	})
	mem, err := openProcMem(p.pid)
	if err != nil {
		return err
	}
	p.mem = mem
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.pid))
	if err != nil {
		return fmt.Errorf("targets: attach %d: reading maps: %w", p.pid, err)
	}
	p.modules, p.warnings, err = liveModules(p.pid, maps, mem)
	if err != nil {
		return fmt.Errorf("targets: attach %d: %w", p.pid, err)
	}
	return nil
}

// liveModules builds the module list from the text of /proc/PID/maps.
func liveModules(pid int, maps []byte, mem Memory) ([]Module, []error, error) {
	lines, err := parseMaps(maps)
	if err != nil {
		return nil, nil, err
	}
	pageSize := uint64(os.Getpagesize())
	var raw []rawMapping
	devs := map[uint64]string{}
	var mods []Module
	for _, l := range lines {
		mp := Mapping{Start: l.start, End: l.end, Offset: l.offset, Perm: l.perm}
		switch {
		case l.path == "[vdso]":
			mods = append(mods, Module{Path: l.path, Start: l.start, End: l.end, Perm: permUnion([]Mapping{mp}), Mappings: []Mapping{mp}})
		case l.inode != 0 && strings.HasPrefix(l.path, "/"):
			raw = append(raw, rawMapping{Mapping: mp, path: l.path, inode: l.inode})
			devs[l.inode] = l.dev
		}
	}
	mods = append(mods, groupModules(raw)...)
	var warnings []error
	out := mods[:0]
	for _, m := range mods {
		var open func() (io.ReaderAt, io.Closer, error)
		if !m.IsVDSO() {
			m.File = findModuleFile(pid, &m, devs[m.Inode])
			if m.File != "" {
				file := m.File
				open = func() (io.ReaderAt, io.Closer, error) {
					f, err := os.Open(file)
					return f, f, err
				}
			}
		}
		isELF, err := resolveBias(&m, mem, open, pageSize)
		if !isELF {
			continue // a data file the program mapped
		}
		if err != nil {
			warnings = append(warnings, err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, warnings, nil
}

// findModuleFile returns a path that opens the very file mapped (same
// device and inode): the recorded path, the path under the process's root
// (other mount namespace), or /proc/PID/map_files (deleted or replaced
// files).
func findModuleFile(pid int, m *Module, dev string) string {
	name := m.Path
	cands := []string{name, fmt.Sprintf("/proc/%d/root%s", pid, name)}
	if len(m.Mappings) > 0 {
		cands = append(cands, fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Mappings[0].Start, m.Mappings[0].End))
	}
	for _, c := range cands {
		var st unix.Stat_t
		if unix.Stat(c, &st) != nil || st.Ino != m.Inode || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if dev != "" && fmt.Sprintf("%02x:%02x", unix.Major(st.Dev), unix.Minor(st.Dev)) != dev {
			continue
		}
		return c
	}
	return ""
}

// Arch returns the architecture of the process (that of this program).
func (p *Process) Arch() elf.Machine { return p.arch }

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Exe returns the executable's path (the /proc/PID/exe link).
func (p *Process) Exe() string { return p.exe }

// Threads returns the stopped threads, main thread first, then by TID.
func (p *Process) Threads() []Thread { return p.threads }

// Modules returns the ELF modules mapped in the process, sorted by Start:
// every file-backed mapping group whose file is ELF, and the vDSO.
func (p *Process) Modules() []Module { return p.modules }

// Memory returns the process memory, read through /proc/PID/mem. It fails
// after Close.
func (p *Process) Memory() Memory { return p.mem }

// Warnings returns non-fatal problems met while attaching, such as modules
// whose load bias could not be computed.
func (p *Process) Warnings() []error { return p.warnings }

// Close detaches every thread, delivering again any signal that arrived
// during the attach, and leaves the process running. It is idempotent and
// safe to call from a signal handler goroutine while other goroutines use p.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return p.closeErr
	}
	p.closed = true
	var errs []error
	if p.tr != nil {
		p.tr.do(func() {
			for _, s := range p.attached {
				_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(s.tid), 0, uintptr(s.sig), 0, 0)
				if e != 0 && e != unix.ESRCH {
					errs = append(errs, fmt.Errorf("thread %d: %w", s.tid, e))
				}
			}
		})
		p.attached = nil
		p.tr.stop()
	}
	if p.mem != nil {
		p.mem.close()
	}
	if len(errs) > 0 {
		p.closeErr = fmt.Errorf("targets: detach %d: %w", p.pid, errors.Join(errs...))
	}
	return p.closeErr
}

// procMem reads /proc/PID/mem with pread.
type procMem struct {
	pid int
	mu  sync.RWMutex
	fd  int
}

func openProcMem(pid int) (*procMem, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/mem", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("targets: opening memory of %d: %w", pid, err)
	}
	return &procMem{pid: pid, fd: fd}, nil
}

// ReadAt reads len(p) bytes at addr; /proc/PID/mem accepts addresses above
// 1<<63 as negative offsets.
func (m *procMem) ReadAt(p []byte, addr int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.fd < 0 {
		return 0, fmt.Errorf("targets: memory of %d read after Close", m.pid)
	}
	n := 0
	for n < len(p) {
		k, err := unix.Pread(m.fd, p[n:], addr+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			if err == nil || err == unix.EIO || err == unix.EFAULT {
				err = ErrUnmapped
			}
			return n, fmt.Errorf("targets: reading %d bytes at %#x of %d: %w", len(p)-n, uint64(addr)+uint64(n), m.pid, err)
		}
		n += k
	}
	return n, nil
}

func (m *procMem) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}

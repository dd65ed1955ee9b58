//go:build linux

package targets

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/procmaps"
	"github.com/sframekit/sframekit/internal/procmem"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// StopTimeout bounds how long AttachProcess waits for one thread to stop
// (a thread in uninterruptible sleep, state D, stops only when it wakes).
var StopTimeout = 10 * time.Second

// maxAttachRounds bounds the re-reads of /proc/PID/task while threads keep
// appearing during the attach.
const maxAttachRounds = 100

// reapTimeout bounds how long the tracer waits for the exit of threads
// that died while attached, to collect them so that the process's parent
// can reap it.
const reapTimeout = time.Second

// ForeignCloseTimeout bounds how long Close, called from another
// goroutine than the one that attached with AttachOptions.CallerThread,
// waits for that goroutine's Close.
var ForeignCloseTimeout = 10 * time.Second

// Process is a live process stopped with ptrace. All its threads stay
// stopped until Close, which detaches them and lets the process continue.
// Its methods are safe for concurrent use.
type Process struct {
	pid      int
	arch     arch.Arch
	exe      string
	threads  []arch.Thread
	modules  []arch.Module
	anonCode []arch.Mapping // executable mappings of no file (AnonCode)
	warnings []error
	mem      *procmem.Reader

	mu       sync.Mutex
	tr       *tracer
	attached []stopped // threads to detach, with signals to re-deliver
	closed   bool
	closeErr error
	done     chan struct{} // closed once detached
}

// stopped is an attached, stopped thread.
type stopped struct {
	tid int
	sig int // signal to deliver again on detach (signal-delivery-stop), or 0
}

// tracer runs functions on one goroutine locked to its OS thread: Linux
// accepts ptrace requests for a tracee only from the thread that attached
// it. The goroutine never unlocks, so its thread exits with it, and the
// kernel detaches any tracee left behind. A tracer of the caller's thread
// (here) has no goroutine: the caller's goroutine is locked instead, and
// runs the requests itself.
type tracer struct {
	reqs  chan func()
	tid   int  // the OS thread's id
	here  bool // the caller's thread (AttachOptions.CallerThread)
	slack int  // with here, the thread's timer slack before the attach
}

// startTracer starts the tracer goroutine with first as its first job,
// and returns once first has run: one switch between threads for the
// start and the attach together.
func startTracer(first func(t *tracer)) *tracer {
	t := &tracer{reqs: make(chan func())}
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		t.tid = unix.Gettid()
		// Polls for thread stops sleep some microseconds: ask the kernel
		// not to stretch those sleeps (the default slack is 50 us).
		unix.Prctl(unix.PR_SET_TIMERSLACK, pollSlack, 0, 0, 0)
		first(t)
		close(done)
		for f := range t.reqs {
			f()
		}
	}()
	<-done
	return t
}

// pollSlack is the timer slack of the tracer thread, in nanoseconds.
const pollSlack = 1000

// startHere makes a tracer of the calling goroutine's thread, locked to
// it, and runs first there.
func startHere(first func(t *tracer)) *tracer {
	runtime.LockOSThread()
	t := &tracer{tid: unix.Gettid(), here: true}
	if s, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil && s > 0 {
		t.slack = s
		unix.Prctl(unix.PR_SET_TIMERSLACK, pollSlack, 0, 0, 0)
	}
	first(t)
	return t
}

// do runs f on the tracer thread and waits for it. A tracer of the
// caller's thread runs f at once: Close calls do only on that thread.
func (t *tracer) do(f func()) {
	if t.here {
		f()
		return
	}
	done := make(chan struct{})
	t.reqs <- func() { f(); close(done) }
	<-done
}

// stop ends the tracer goroutine (and its thread), or gives the caller's
// thread back: its timer slack, and its goroutine unlocked.
func (t *tracer) stop() {
	if !t.here {
		close(t.reqs)
		return
	}
	if t.slack > 0 {
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(t.slack), 0, 0, 0)
	}
	runtime.UnlockOSThread()
}

// AttachProcess stops every thread of process pid with ptrace and captures
// their registers and names, the module list and access to the memory.
//
// Threads are attached with PTRACE_SEIZE and stopped with
// PTRACE_INTERRUPT; /proc/PID/task is read again until no new thread
// appears, so threads created during the attach are caught. Threads that
// exit during the attach are left out. All ptrace requests run on one
// dedicated OS thread, the attach (seizing, waiting for the stops,
// reading the registers) in one request to it. On error every thread
// attached so far is detached.
//
// The error says what the process is when it cannot be attached: gone
// (ErrGone: no such process, a zombie, or exited during the attach, in
// which case the threads that died attached are collected, so that the
// parent can reap the process at once), a kernel thread, or not
// permitted (with what ptrace permission needs: the same user and a
// dumpable process, what kernel.yama.ptrace_scope allows, or
// CAP_SYS_PTRACE).
//
// Do not call wait4(-1, ...) (syscall.Wait4 with pid -1) elsewhere in the
// program while a Process is open: it could consume the tracees' stops.
func AttachProcess(pid int) (*Process, error) {
	return AttachProcessWith(pid, AttachOptions{})
}

// AttachProcessWith is AttachProcess with options.
func AttachProcessWith(pid int, o AttachOptions) (*Process, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("attach: bad process ID %d", pid)
	}
	if pid == os.Getpid() {
		return nil, fmt.Errorf("attach to process %d: cannot trace the calling process", pid)
	}
	exe, via, err := exeLink(pid)
	if err != nil {
		return nil, err
	}
	if err := checkExeClass(via); err != nil {
		if _, _, gone := exeLink(pid); gone != nil {
			return nil, gone // exited meanwhile
		}
		if exiting(pid) {
			return nil, &goneError{fmt.Sprintf("attach to process %d: the process is exiting", pid)}
		}
		return nil, fmt.Errorf("attach to process %d: %w", pid, err)
	}

	p := &Process{pid: pid, arch: hostArch, exe: exe, done: make(chan struct{})}
	var attachErr error
	attach := func(t *tracer) {
		p.tr = t
		if attachErr = p.attachAll(); attachErr == nil {
			attachErr = p.readRegs()
		}
	}
	if o.CallerThread {
		p.tr = startHere(attach)
	} else {
		p.tr = startTracer(attach)
	}
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

// procStat is what /proc/PID/stat says about a task.
type procStat struct {
	comm    string
	state   byte
	ppid    int
	flags   uint64
	threads int // num_threads: the tasks of the thread group, zombies included
}

// pfKthread is the kernel's PF_KTHREAD task flag.
const pfKthread = 0x00200000

// readStat parses /proc/PID/task/TID/stat (TID 0: /proc/PID/stat).
func readStat(pid, tid int) (procStat, error) {
	name := fmt.Sprintf("/proc/%d/stat", pid)
	if tid != 0 {
		name = fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid)
	}
	b, err := sysfile.ReadFile(name)
	if err != nil {
		return procStat{}, err
	}
	// "PID (COMM) S PPID PGRP SESSION TTY TPGID FLAGS ...": COMM may hold
	// spaces and parentheses, so the fields start after the last ')'.
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return procStat{}, fmt.Errorf("%s: unexpected format", name)
	}
	st := procStat{comm: string(b[i+1 : j])}
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 18 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("%s: unexpected format", name)
	}
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.flags, _ = strconv.ParseUint(f[6], 10, 64)
	st.threads, _ = strconv.Atoi(f[17])
	return st, nil
}

// exeLink returns the target's executable (the /proc/PID/exe link) and
// the task whose /proc entry gave it (pid, or a live thread's id when the
// main thread has exited and the others run on), or an error that says
// why there is none: no such process, a zombie, a kernel thread, or no
// permission.
func exeLink(pid int) (string, int, error) {
	st, serr := readStat(pid, 0)
	if serr != nil {
		return "", 0, &goneError{fmt.Sprintf("attach to process %d: no such process", pid)}
	}
	if st.flags&pfKthread != 0 {
		return "", 0, fmt.Errorf("attach to process %d: it is a kernel thread (%s), which has no user-space stack", pid, st.comm)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err == nil {
		return exe, pid, nil
	}
	if errors.Is(err, os.ErrPermission) {
		return "", 0, fmt.Errorf("attach to process %d: permission denied: %s", pid, permissionHint(pid, pid, 0))
	}
	// Gone in the meantime, or a zombie (exited, not yet reaped: its
	// executable link is gone with its memory).
	if st, serr = readStat(pid, 0); serr != nil {
		return "", 0, &goneError{fmt.Sprintf("attach to process %d: no such process (it exited)", pid)}
	}
	switch st.state {
	case 'Z', 'X':
		if tids, _ := listTasks(pid); len(tids) > 1 {
			// The main thread exited, others run on: use one of theirs.
			for _, tid := range tids[1:] {
				if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/exe", pid, tid)); err == nil {
					return exe, tid, nil
				}
			}
		}
		return "", 0, &goneError{fmt.Sprintf("attach to process %d: the process has exited: it is a zombie that its parent (PID %d) has not reaped", pid, st.ppid)}
	}
	if exiting(pid) {
		return "", 0, &goneError{fmt.Sprintf("attach to process %d: the process is exiting", pid)}
	}
	return "", 0, fmt.Errorf("attach to process %d: reading its executable link: %w", pid, err)
}

// readSmall reads the start of a small file (of /proc) into buf with
// three system calls, and returns the number of bytes read (0 on error):
// os.ReadFile spends twice as many on a file it sizes and polls.
func readSmall(name string, buf []byte) int {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	n, err := unix.Read(fd, buf)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// checkExeClass refuses 32-bit processes, whose registers this package does
// not decode; pid is a task of the process whose /proc/PID/exe is there.
func checkExeClass(pid int) error {
	f, err := sysfile.Open(fmt.Sprintf("/proc/%d/exe", pid))
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
		// Named by its machine: "not supported" alone reads as a
		// failure of this process, not the limit it is.
		name := arch.FromELF(elf.Machine(h.Machine)).String()
		if name == arch.Unknown.String() {
			name = strings.ToLower(strings.TrimPrefix(elf.Machine(h.Machine).String(), "EM_"))
		}
		return fmt.Errorf("a 32-bit (%s) process: only 64-bit processes are unwound", name)
	}
	return nil
}

// listTasks returns the thread ids in /proc/PID/task.
func listTasks(pid int) ([]int, error) {
	d, err := sysfile.Open(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
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
	st, err := readStat(pid, tid)
	if err != nil {
		return 0
	}
	return st.state
}

// permissionHint explains why ptrace is refused for thread tid of pid:
// another tracer, another user, Yama's ptrace_scope, and what would
// allow it. self is the tracer thread's id (0 if none), not worth
// reporting as another tracer.
func permissionHint(pid, tid, self int) string {
	var hints []string
	var uid string
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
				if v = strings.TrimSpace(v); v != "0" && v != strconv.Itoa(self) {
					hints = append(hints, "already traced by pid "+v+" (a debugger?)")
				}
			}
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					uid = f[0]
				}
			}
		}
	}
	me := strconv.Itoa(os.Geteuid())
	switch {
	case uid != "" && uid != me:
		hints = append(hints, fmt.Sprintf("ptrace of another user's process (process %d runs as uid %s, this program as uid %s) needs CAP_SYS_PTRACE: run as root (sudo)", pid, uid, me))
	default:
		hints = append(hints, "ptrace needs the same user and a dumpable process (not setuid), or CAP_SYS_PTRACE (root)")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		switch v := strings.TrimSpace(string(b)); v {
		case "0":
			hints = append(hints, "kernel.yama.ptrace_scope=0 (no further restriction)")
		case "1":
			hints = append(hints, "kernel.yama.ptrace_scope=1: without CAP_SYS_PTRACE only descendants can be traced (sysctl kernel.yama.ptrace_scope=0 lifts that)")
		case "2":
			hints = append(hints, "kernel.yama.ptrace_scope=2: only with CAP_SYS_PTRACE")
		default:
			hints = append(hints, "kernel.yama.ptrace_scope="+v+": ptrace is disabled")
		}
	} else {
		hints = append(hints, "kernel.yama.ptrace_scope is not set (no Yama)")
	}
	return strings.Join(hints, "; ")
}

// attachAll runs on the tracer thread: it seizes and interrupts every task
// until the task list is stable, and waits for each stop.
func (p *Process) attachAll() error {
	seen := map[int]bool{}
	for round := 0; ; round++ {
		if round == maxAttachRounds {
			return fmt.Errorf("attach to process %d: threads still appearing after %d rounds", p.pid, round)
		}
		tids, err := listTasks(p.pid)
		if err != nil {
			if len(p.attached) > 0 || os.IsNotExist(err) {
				p.reapDead()
				return &goneError{fmt.Sprintf("attach to process %d: the process exited during the attach", p.pid)}
			}
			return fmt.Errorf("attach to process %d: listing threads: %w", p.pid, err)
		}
		var fresh []int
		checked := round == 0
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid] = true
			if !checked {
				// A new thread may be one running execve, which holds
				// the lock PTRACE_SEIZE takes until the threads it
				// killed, held here, are collected: seizing it would
				// wait for ever. The held threads tell.
				checked = true
				if p.heldThreadGone(nil) {
					p.leaveExec()
					return p.execError()
				}
			}
			if err := p.seize(tid); err != nil {
				if err == errGone {
					continue
				}
				return err
			}
			p.attached = append(p.attached, stopped{tid: tid})
			if err := unix.PtraceInterrupt(tid); err != nil && err != unix.ESRCH {
				return fmt.Errorf("attach to process %d: PTRACE_INTERRUPT thread %d: %w", p.pid, tid, err)
			}
			fresh = append(fresh, tid)
		}
		if len(fresh) == 0 && len(p.attached) > 0 {
			// A listing of /proc/PID/task ends early when the thread
			// it stands on exits meanwhile (the kernel's iteration
			// stops at a dead thread), so a thread created late can be
			// missing from a listing that found nothing new. Every
			// thread listed is stopped now: none of them can create or
			// end one, so the kernel's count of the group's threads
			// exceeds the listing only when a thread was missed.
			if st, err := readStat(p.pid, 0); err == nil && st.threads > len(tids) {
				continue
			}
		}
		if len(fresh) == 0 {
			if len(p.attached) == 0 {
				if p.exited() {
					return &goneError{fmt.Sprintf("attach to process %d: the process exited during the attach", p.pid)}
				}
				return fmt.Errorf("attach to process %d: no thread could be attached", p.pid)
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
		// PTRACE_O_TRACEEXEC: a thread that runs execve during the
		// attach reports it (PTRACE_EVENT_EXEC), so that the attach
		// ends at once instead of waiting for a stop (see waitStops).
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, unix.PTRACE_O_TRACEEXEC, 0, 0)
		if e == 0 {
			return nil
		}
		err := error(e)
		if err == unix.ESRCH {
			return errGone
		}
		if err != unix.EPERM {
			return fmt.Errorf("attach to process %d: PTRACE_SEIZE thread %d: %w", p.pid, tid, err)
		}
		switch taskState(p.pid, tid) {
		case 'Z', 'X', 0:
			return errGone
		}
		if try == 3 || tid == p.pid {
			return fmt.Errorf("attach to process %d: PTRACE_SEIZE thread %d: %w (%s)", p.pid, tid, err, permissionHint(p.pid, tid, p.tr.tid))
		}
		time.Sleep(time.Millisecond) // an exiting thread may be between states
	}
}

// Polling for stops: the first sleep and the longest. Threads stop as
// soon as the scheduler runs them, usually within microseconds; the
// tracer sleeps in between (the CPU is theirs), on the locked thread
// itself, so that no goroutine switch delays the attach.
const (
	pollFirst = 5 * time.Microsecond
	pollMax   = time.Millisecond
)

// waitStops waits, polling (WNOHANG, so that a thread that never stops
// cannot hang the caller past StopTimeout), until each of tids has
// stopped or exited. It gives up at once when the process exits, and
// when it runs execve: the kernel's execve kills the other threads and
// waits until their tracer has collected them, so a thread in execve
// never stops while the others are held (it sleeps in state D); the
// threads are then collected and the new program detached, left
// running.
func (p *Process) waitStops(tids []int) error {
	pending := append([]int(nil), tids...)
	deadline := time.Now().Add(StopTimeout)
	delay := pollFirst
	for {
		rest := pending[:0]
		died, execed := false, false
		for _, tid := range pending {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
			for err == unix.EINTR {
				wpid, err = unix.Wait4(tid, &ws, unix.WALL|unix.WNOHANG, nil)
			}
			switch {
			case err == unix.ECHILD:
				p.forget(tid)
				died = true
			case err != nil:
				return fmt.Errorf("attach to process %d: wait for thread %d: %w", p.pid, tid, err)
			case wpid == 0:
				rest = append(rest, tid)
			case ws.Exited() || ws.Signaled():
				p.forget(tid)
				died = true
			case ws.Stopped():
				event := uint32(ws) >> 16
				if event == unix.PTRACE_EVENT_EXEC {
					// The new program: its stop is taken, let it run.
					p.detachExeced(tid)
					execed = true
				} else if event != unix.PTRACE_EVENT_STOP {
					// Signal-delivery-stop: a signal arrived before the
					// interrupt. Keep it to deliver on detach.
					p.setSig(tid, int(ws.StopSignal()))
				}
			default:
				rest = append(rest, tid)
			}
		}
		progress := len(rest) < len(pending)
		pending = rest
		if !execed && (died || !progress && delay >= pollMax) {
			execed = p.heldThreadGone(pending)
		}
		if execed {
			p.leaveExec()
			return p.execError()
		}
		if len(pending) == 0 {
			return nil
		}
		// A thread died, or nothing moves: is the whole process going?
		// (Killed, it would leave the waits pending until StopTimeout,
		// holding the zombie from its parent.)
		if died || (!progress && delay >= pollMax) {
			if p.exited() {
				p.reapDead()
				return &goneError{fmt.Sprintf("attach to process %d: the process exited during the attach", p.pid)}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("attach to process %d: thread %d did not stop within %v (state %q)", p.pid, pending[0], StopTimeout, taskState(p.pid, pending[0]))
		}
		if progress {
			delay = pollFirst
		}
		nanosleep(delay)
		delay = min(2*delay, pollMax)
	}
}

// heldThreadGone reports whether a thread that had stopped for the
// attach (one of p.attached not in pending) has died, changed its id or
// reported an execve since: a stopped thread does neither unless another
// thread runs execve (or the process is killed, which waitStops checks
// first). A dead one is collected and forgotten.
func (p *Process) heldThreadGone(pending []int) bool {
	gone := false
	for _, s := range slices.Clone(p.attached) {
		if slices.Contains(pending, s.tid) {
			continue
		}
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(s.tid, &ws, unix.WALL|unix.WNOHANG, nil)
		for err == unix.EINTR {
			wpid, err = unix.Wait4(s.tid, &ws, unix.WALL|unix.WNOHANG, nil)
		}
		switch {
		case err == unix.ECHILD, err == nil && wpid == s.tid && (ws.Exited() || ws.Signaled()):
			p.forget(s.tid)
			gone = true
		case err == nil && wpid == s.tid && ws.Stopped() && uint32(ws)>>16 == unix.PTRACE_EVENT_EXEC:
			p.detachExeced(s.tid)
			gone = true
		}
	}
	return gone && !p.exited()
}

// execError is the error of an attach that met an execve.
func (p *Process) execError() error {
	return fmt.Errorf("attach to process %d: the process ran execve (a new program) during the attach; nothing was read, it runs on: try again", p.pid)
}

// detachExeced detaches the thread that reported PTRACE_EVENT_EXEC (its
// stop taken by a wait, which reapDead would otherwise wait for again),
// leaving the new program running.
func (p *Process) detachExeced(tid int) {
	unix.PtraceDetach(tid)
	p.forget(tid)
}

// nanosleep sleeps the calling OS thread, without the Go scheduler.
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	unix.Nanosleep(&ts, nil)
}

// exited reports whether the process is exiting or has exited: its
// threads are gone or zombies (state Z or X), or one has SIGKILL pending,
// which kills them all (kill -9, or exit_group() of another thread).
func (p *Process) exited() bool { return exiting(p.pid) }

// exiting is Process.exited for process pid.
func exiting(pid int) bool {
	tids, err := listTasks(pid)
	if err != nil {
		return true
	}
	for _, tid := range tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		if err != nil {
			continue // gone since listed
		}
		live := true
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
					live = false
				}
			case "SigPnd", "ShdPnd":
				if m, err := strconv.ParseUint(v, 16, 64); err == nil && m&(1<<(unix.SIGKILL-1)) != 0 {
					return true
				}
			}
		}
		if live {
			return false
		}
	}
	return true
}

// reapDead runs on the tracer thread once the process is exiting: it
// collects the exit of every attached thread, so that none stays a
// traced zombie that the parent cannot reap. The main thread reports its
// exit only after the others, so they are collected first.
func (p *Process) reapDead() { p.collect(true) }

// leaveExec runs on the tracer thread once a thread ran execve during the
// attach: it collects the threads the execve killed (which the execve
// waits for) and detaches the new program at its first stop.
func (p *Process) leaveExec() { p.collect(false) }

// collect waits for every attached thread to exit or stop, detaching the
// stopped ones; with untilExit, it waits on for their exits too.
func (p *Process) collect(untilExit bool) {
	deadline := time.Now().Add(reapTimeout)
	delay := pollFirst
	for len(p.attached) > 0 && time.Now().Before(deadline) {
		var rest []stopped
		for _, s := range p.attached {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(s.tid, &ws, unix.WALL|unix.WNOHANG, nil)
			switch {
			case err == unix.ECHILD, err == nil && wpid == s.tid && (ws.Exited() || ws.Signaled()):
				// collected (or not ours any more)
			case err == nil && wpid == s.tid && ws.Stopped():
				// A stop reported before the death: detaching lets the
				// kill go on.
				unix.PtraceDetach(s.tid)
				if untilExit {
					rest = append(rest, s)
				}
			default:
				rest = append(rest, s)
			}
		}
		p.attached = rest
		if len(rest) > 0 {
			nanosleep(delay)
			delay = min(2*delay, pollMax)
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

// readRegs runs on the tracer thread: the registers of every stopped
// thread.
func (p *Process) readRegs() error {
	for _, s := range p.attached {
		r, err := getRegs(s.tid)
		if err == unix.ESRCH && p.exited() {
			p.reapDead()
			return &goneError{fmt.Sprintf("attach to process %d: the process exited during the attach", p.pid)}
		}
		if err != nil {
			return fmt.Errorf("attach to process %d: registers of thread %d: %w", p.pid, s.tid, err)
		}
		p.threads = append(p.threads, arch.Thread{TID: s.tid, Regs: r, Signal: s.sig})
	}
	return nil
}

// loadState reads the threads' names and the modules, and opens the
// memory.
func (p *Process) loadState() error {
	var buf [64]byte // comm is at most 16 bytes
	for i := range p.threads {
		n := readSmall(fmt.Sprintf("/proc/%d/task/%d/comm", p.pid, p.threads[i].TID), buf[:])
		p.threads[i].Name = strings.TrimSuffix(string(buf[:n]), "\n")
	}
	sort.Slice(p.threads, func(i, j int) bool {
		a, b := p.threads[i].TID, p.threads[j].TID
		if (a == p.pid) != (b == p.pid) {
			return a == p.pid
		}
		return a < b
	})
	// The process's memory, maps and files are those of its main
	// thread's /proc entry, or once that thread has exited (pthread_exit,
	// the others running on) of an attached thread's: a stopped thread
	// cannot exit, and the kernel finds the shared memory through any.
	mm := p.pid
	if len(p.threads) > 0 && p.threads[0].TID != p.pid {
		mm = p.threads[0].TID
	}
	p.mem = procmem.New(mm)
	maps, err := procmaps.Read(mm)
	if err != nil {
		return fmt.Errorf("attach to process %d: reading maps: %w", p.pid, err)
	}
	p.modules, p.warnings, err = liveModules(mm, maps, p.mem)
	if err != nil {
		return fmt.Errorf("attach to process %d: %w", p.pid, err)
	}
	p.anonCode = anonCode(maps)
	return nil
}

// liveModules builds the module list from the lines of /proc/PID/maps.
func liveModules(pid int, lines []arch.Mapping, mem arch.Memory) ([]arch.Module, []error, error) {
	pageSize := uint64(os.Getpagesize())
	var raw []rawMapping
	devs := map[uint64]string{}
	var mods []arch.Module
	for _, l := range lines {
		mp := arch.Mapping{Start: l.Start, End: l.End, Offset: l.Offset, Perm: l.Perm}
		switch {
		case l.Path == "[vdso]":
			mods = append(mods, arch.Module{Path: l.Path, Start: l.Start, End: l.End, Perm: permUnion([]arch.Mapping{mp}), Mappings: []arch.Mapping{mp}})
		case l.Inode != 0 && strings.HasPrefix(l.Path, "/"):
			raw = append(raw, rawMapping{Mapping: mp, path: l.Path, inode: l.Inode})
			devs[l.Inode] = l.Dev
		}
	}
	mods = append(mods, groupModules(raw)...)
	var warnings []error
	out := mods[:0]
	im := images{}
	for _, m := range mods {
		if im.join(out, &m) {
			continue
		}
		var open func() (io.ReaderAt, io.Closer, error)
		if !m.IsVDSO() {
			m.File = findModuleFile(pid, &m, devs[m.Inode])
			if m.File != "" {
				file := m.File
				open = func() (io.ReaderAt, io.Closer, error) {
					f, err := sysfile.OpenRegular(file)
					return f, f, err
				}
			}
		}
		segs, isELF, err := resolveBias(&m, mem, open, pageSize)
		if !isELF {
			continue // a data file the program mapped
		}
		if err != nil {
			warnings = append(warnings, err)
		}
		out = append(out, m)
		im.add(out, len(out)-1, segs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out, warnings, nil
}

// findModuleFile returns a path that opens the very file mapped (same
// device and inode): the recorded path, the path under the process's root
// (other mount namespace), or /proc/PID/map_files (deleted or replaced
// files).
func findModuleFile(pid int, m *arch.Module, dev string) string {
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
func (p *Process) Arch() arch.Arch { return p.arch }

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Exe returns the executable's path (the /proc/PID/exe link).
func (p *Process) Exe() string { return p.exe }

// Threads returns the stopped threads, main thread first, then by TID.
func (p *Process) Threads() []arch.Thread { return p.threads }

// AnonCode returns the executable mappings of no file, sorted by Start:
// the code JIT compilers write (node, the JVM), which the frames of a
// thread running it are in. An unwinder walks through it by frame
// pointers, as perf does, where otherwise the walk would end at its
// first such frame.
func (p *Process) AnonCode() []arch.Mapping { return p.anonCode }

// anonCode returns the executable mappings among lines (/proc/PID/maps)
// that no file backs; not the vDSO (a module) nor [vsyscall].
func anonCode(lines []arch.Mapping) []arch.Mapping {
	var out []arch.Mapping
	for _, l := range lines {
		if strings.Contains(l.Perm, "x") && (l.Inode == 0 || !strings.HasPrefix(l.Path, "/")) && l.Path != "[vdso]" && l.Path != "[vsyscall]" {
			out = append(out, l)
		}
	}
	return out
}

// Modules returns the ELF modules mapped in the process, sorted by Start:
// every file-backed mapping group whose file is ELF, and the vDSO.
func (p *Process) Modules() []arch.Module { return p.modules }

// Memory returns the process memory, read with process_vm_readv (and
// through /proc/PID/mem for what that cannot read). It fails after
// Close.
func (p *Process) Memory() arch.Memory { return p.mem }

// Warnings returns non-fatal problems met while attaching, such as modules
// whose load bias could not be computed.
func (p *Process) Warnings() []error { return p.warnings }

// Close detaches every thread, delivering again any signal that arrived
// during the attach, and leaves the process running. Threads that died
// meanwhile (the process was killed) are collected, so that the parent
// can reap the process. Close is idempotent and safe to call from a
// signal handler goroutine while other goroutines use p; with
// AttachOptions.CallerThread, such a Close waits for the attaching
// goroutine's.
func (p *Process) Close() error {
	p.mu.Lock()
	if !p.closed && p.tr != nil && p.tr.here && unix.Gettid() != p.tr.tid {
		// Only the attaching thread can detach: wait for its Close.
		p.mu.Unlock()
		select {
		case <-p.done:
		case <-time.After(ForeignCloseTimeout):
			return fmt.Errorf("detach from process %d: Close called off the attaching thread, whose Close did not come within %v", p.pid, ForeignCloseTimeout)
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.closed {
		return p.closeErr
	}
	p.closed = true
	defer close(p.done)
	var errs []error
	if p.tr != nil {
		p.tr.do(func() {
			dead := false
			for _, s := range p.attached {
				_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(s.tid), 0, uintptr(s.sig), 0, 0)
				switch {
				case e == unix.ESRCH:
					dead = true // not stopped: exiting (or gone)
				case e != 0:
					errs = append(errs, fmt.Errorf("thread %d: %w", s.tid, e))
				}
			}
			if dead && p.exited() {
				p.reapDead()
			}
		})
		p.attached = nil
		p.tr.stop()
	}
	if p.mem != nil {
		p.mem.Close()
	}
	if len(errs) > 0 {
		p.closeErr = fmt.Errorf("detach from process %d: %w", p.pid, errors.Join(errs...))
	}
	return p.closeErr
}

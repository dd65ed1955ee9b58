package perfevent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/sframekit/sframekit/perfdata"
	"golang.org/x/sys/unix"
)

// Session is a set of sampling events and the ring buffers they write:
// one ring per CPU, which every event on that CPU writes into.
//
// Open makes a session with its events disabled; Enable starts them, Run
// reads their records until Stop or until every profiled thread has
// exited, Close releases everything. The profiled threads are never
// stopped or signalled: sampling happens in the kernel, in interrupts and
// at context switches.
type Session struct {
	opts     Options
	attrs    []*Attr
	dec      *perfdata.Decoder // of attrs, made once their IDs are known
	rec      Record            // the record Run hands out, reused
	round    [headerSize]byte  // a FINISHED_ROUND record
	events   []event
	rings    []*ring
	pages    int // data pages per ring
	pageSize int
	epfd     int
	// epoll is epfd as a pollable file: Run waits for it in Go's network
	// poller, not in a blocking epoll_wait, which would have the runtime
	// hand its P over and poll the blocked thread every 20 µs.
	epoll    *os.File
	epollRaw syscall.RawConn
	stopfd   int
	warnings []string
	userOnly string // why the kernel is not sampled (KernelIfPermitted refused)

	runMu   sync.Mutex // held by Run, so that Close waits for it
	closeMu sync.Mutex
	closed  bool
	live    int // events not yet hung up
	exited  atomic.Bool

	samples, lost, lostRecords atomic.Uint64
	// poll is the current wait of Run in nanoseconds (SetPollInterval);
	// 0 until set, for Options.PollInterval.
	poll atomic.Int64
}

// event is one perf event file descriptor: one event for one thread (or
// every thread, when system-wide) on one CPU.
type event struct {
	fd       int
	attr     *Attr
	tid, cpu int
}

// Hooks for tests: the system calls whose failures are hard to provoke.
var (
	perfEventOpen = unix.PerfEventOpen
	mmapRing      = func(fd, size int) ([]byte, error) {
		return unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
)

// Open opens the events opts asks for, disabled, and maps their ring
// buffers. Errors are one line saying what failed and why, with the
// remedy: see Error. A thread that exits while Open lists its process's
// threads is left out; a process whose threads have all exited is an
// error (ErrNoProcess).
//
// A thread created while Open runs is sampled if the thread that created
// it already had its events (it inherits them), and missed otherwise, as
// with perf record -p; threads created after Open are all followed.
//
// Open needs one file descriptor per event, thread and CPU: a process of
// 100 threads on 64 CPUs takes 6400 (Go raises the soft RLIMIT_NOFILE to
// the hard limit at start).
//
// With Options.KernelIfPermitted, a refusal of samples in the kernel makes
// Open try again without them (UserOnly says why).
func Open(opts Options) (*Session, error) {
	s, err := open(opts)
	if err == nil || !opts.KernelIfPermitted || opts.needsKernel() || !errors.Is(err, ErrPermission) {
		return s, err
	}
	opts.KernelIfPermitted = false
	if s, err = open(opts); err != nil {
		return nil, err
	}
	p, ok := readSysctl("kernel/perf_event_paranoid")
	s.userOnly = "samples in the kernel need kernel.perf_event_paranoid 1 or lower, or CAP_PERFMON"
	if ok {
		s.userOnly = fmt.Sprintf("kernel.perf_event_paranoid is %d; samples in the kernel need 1 or lower, or CAP_PERFMON", p)
	}
	return s, nil
}

// open is Open without the retry in user space.
func open(opts Options) (*Session, error) {
	maxRate, _ := readSysctl("kernel/perf_event_max_sample_rate")
	if err := opts.check(uint64(max(maxRate, 0))); err != nil {
		return nil, err
	}
	s := &Session{opts: opts, pageSize: os.Getpagesize(), epfd: -1, stopfd: -1}
	ok := false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	cpus := opts.CPUs
	if len(cpus) == 0 {
		var err error
		if cpus, err = onlineCPUs(); err != nil {
			return nil, err
		}
	}
	type target struct {
		tid, pid int // pid is the process the thread was listed from, or 0
	}
	var targets []target
	if opts.SystemWide {
		targets = []target{{tid: -1}}
	}
	seen := map[int]bool{} // a thread given twice would be sampled twice
	for _, pid := range opts.PIDs {
		tids, err := Tasks(pid)
		if err != nil {
			return nil, err
		}
		for _, tid := range tids {
			if !seen[tid] {
				seen[tid] = true
				targets = append(targets, target{tid, pid})
			}
		}
	}
	for _, tid := range opts.TIDs {
		if !seen[tid] {
			seen[tid] = true
			targets = append(targets, target{tid: tid})
		}
	}
	var err error
	if s.attrs, err = opts.buildAttrs(); err != nil {
		return nil, err
	}
	opened := map[int]bool{} // processes with at least one thread opened
	for _, a := range s.attrs {
		attr := a.unix()
		for _, t := range targets {
			for _, cpu := range cpus {
				fd, err := perfEventOpen(attr, t.tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
				if err == unix.ESRCH && t.pid != 0 {
					break // the thread exited since listed
				}
				if err != nil {
					return nil, s.openError(err, a, t.tid, t.pid, cpu, len(targets), len(cpus))
				}
				s.events = append(s.events, event{fd: fd, attr: a, tid: t.tid, cpu: cpu})
				opened[t.pid] = true
				var id uint64
				if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&id))); e != 0 {
					return nil, &Error{Op: "read the ID of " + a.Event.Name, Err: e}
				}
				a.IDs = append(a.IDs, id)
			}
		}
	}
	pattrs := make([]*perfdata.Attr, len(s.attrs))
	for i, a := range s.attrs {
		pattrs[i] = a.Attr
	}
	s.dec = perfdata.NewDecoder(ne, pattrs)
	s.rec.dec = s.dec
	for _, pid := range opts.PIDs {
		if !opened[pid] {
			return nil, &Error{Op: fmt.Sprintf("open events for process %d", pid), Err: unix.ESRCH, Kind: ErrNoProcess, Hint: "every thread exited"}
		}
	}
	if err := s.mapRings(cpus); err != nil {
		return nil, err
	}
	if err := s.setupPoll(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// unix returns the attribute as x/sys/unix's struct: its very bytes, the
// ones package perfdata read (Attr.Bytes).
func (a *Attr) unix() *unix.PerfEventAttr {
	var u unix.PerfEventAttr
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&u)), unsafe.Sizeof(u)), a.raw)
	return &u
}

// x/sys/unix's struct holds the attribute whole (its size field says
// attrSize: the kernel reads that many bytes).
const _ = uint(unsafe.Sizeof(unix.PerfEventAttr{}) - attrSize)

// minRingPages returns the fewest data pages that hold two of the largest
// samples the options make, so that a full ring still passes samples on.
func (s *Session) minRingPages() int {
	sample := 512 + 8*64 + int(s.opts.StackUser) // fixed fields, registers, callchain, stack
	pages := 1
	for pages*s.pageSize < 2*sample {
		pages *= 2
	}
	return pages
}

// mapRings maps one ring per CPU, on the CPU's first event, and points
// the CPU's other events at it. When the locked-memory limit refuses the
// size asked for, it halves the rings down to minRingPages.
func (s *Session) mapRings(cpus []int) error {
	pages := s.opts.RingPages
	if pages == 0 {
		pages = DefaultRingPages
	}
	want, floor := pages, min(s.minRingPages(), pages)
	first := map[int]int{} // cpu → fd of its ring
	for {
		err := s.tryMapRings(cpus, pages, first)
		if err == nil {
			break
		}
		if (err == unix.EPERM || err == unix.ENOMEM) && pages > floor {
			pages /= 2
			continue
		}
		e := &Error{Op: fmt.Sprintf("map a ring buffer of %d KiB per CPU", pages*s.pageSize/1024), Err: err}
		if err == unix.EPERM || err == unix.ENOMEM {
			e.Kind = ErrLockedMemory
			kb, _ := readSysctl("kernel/perf_event_mlock_kb")
			e.Hint = fmt.Sprintf("the locked-memory limit refuses even that (kernel.perf_event_mlock_kb is %d per CPU, then ulimit -l); raise either, or run with CAP_IPC_LOCK", kb)
		}
		return e
	}
	s.pages = pages
	if pages < want {
		s.warnings = append(s.warnings, fmt.Sprintf("ring buffers reduced from %d KiB to %d KiB per CPU: the locked-memory limit (kernel.perf_event_mlock_kb, ulimit -l) refused more; samples may be lost at high rates", want*s.pageSize/1024, pages*s.pageSize/1024))
	}
	for _, ev := range s.events {
		out := first[ev.cpu]
		if out == ev.fd {
			continue
		}
		if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_SET_OUTPUT, out); err != nil {
			return &Error{Op: fmt.Sprintf("redirect %s on CPU %d into the CPU's ring", ev.attr.Event.Name, ev.cpu), Err: err}
		}
	}
	return nil
}

// tryMapRings maps every CPU's ring with pages data pages, or none: on
// failure it unmaps those it made and returns the mmap's errno.
func (s *Session) tryMapRings(cpus []int, pages int, first map[int]int) error {
	size := (1 + pages) * s.pageSize
	for _, cpu := range cpus {
		fd := -1
		for _, ev := range s.events {
			if ev.cpu == cpu {
				fd = ev.fd
				break
			}
		}
		if fd < 0 {
			continue
		}
		mem, err := mmapRing(fd, size)
		if err == nil {
			var r *ring
			if r, err = newRing(mem, s.pageSize); err != nil {
				unix.Munmap(mem)
				s.unmapRings()
				return err
			}
			r.cpu, r.fd = cpu, fd
			s.rings = append(s.rings, r)
			first[cpu] = fd
			continue
		}
		s.unmapRings()
		if errno, ok := err.(syscall.Errno); ok {
			return errno
		}
		return err
	}
	return nil
}

// unmapRings unmaps every ring.
func (s *Session) unmapRings() {
	for _, r := range s.rings {
		unix.Munmap(r.mem)
	}
	s.rings = nil
}

// setupPoll makes the epoll set of every event and of the stop eventfd.
// Every event is polled, not only those whose fd holds a ring: a wakeup
// of a ring reaches every event writing into it, and an event hangs up
// once its thread and all the threads that inherited it have exited.
func (s *Session) setupPoll() error {
	var err error
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return &Error{Op: "epoll_create1", Err: err}
	}
	if err := unix.SetNonblock(s.epfd, true); err != nil {
		return &Error{Op: "set the epoll descriptor non-blocking", Err: err}
	}
	s.epoll = os.NewFile(uintptr(s.epfd), "perf epoll")
	if s.epollRaw, err = s.epoll.SyscallConn(); err != nil {
		return &Error{Op: "poll the epoll descriptor", Err: err}
	}
	if s.stopfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return &Error{Op: "eventfd", Err: err}
	}
	add := func(fd int) error {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		return unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
	}
	if err := add(s.stopfd); err != nil {
		return &Error{Op: "epoll_ctl", Err: err}
	}
	for _, ev := range s.events {
		if err := add(ev.fd); err != nil {
			return &Error{Op: "epoll_ctl", Err: err}
		}
		s.live++
	}
	return nil
}

// openError words a perf_event_open failure.
func (s *Session) openError(err error, a *Attr, tid, pid, cpu, nthreads, ncpus int) error {
	who := fmt.Sprintf("thread %d", tid)
	switch {
	case tid == -1:
		who = "every thread"
	case pid != 0 && pid != tid:
		who = fmt.Sprintf("thread %d of process %d", tid, pid)
	case pid != 0:
		who = fmt.Sprintf("process %d", pid)
	}
	e := &Error{Op: fmt.Sprintf("open %s for %s on CPU %d", a.Event.Name, who, cpu), Err: err}
	switch err {
	case unix.EACCES, unix.EPERM:
		e.Kind = ErrPermission
		p, ok := readSysctl("kernel/perf_event_paranoid")
		e.Hint = paranoidHint(&s.opts, p, ok)
	case unix.ESRCH:
		e.Kind, e.Hint = ErrNoProcess, "it does not exist (it exited?)"
	case unix.ENOENT, unix.EOPNOTSUPP, unix.ENODEV:
		if a.Type == perfdata.TypeHardware {
			e.Kind, e.Hint = ErrUnsupported, fmt.Sprintf("%s is a hardware event and this machine has no PMU for it (as in most virtual machines); use cpu-clock", a.Event.Name)
		} else if err == unix.ENODEV {
			e.Hint = fmt.Sprintf("CPU %d is offline or does not exist", cpu)
		} else {
			e.Kind, e.Hint = ErrUnsupported, "the kernel does not offer this event"
		}
	case unix.EMFILE, unix.ENFILE:
		e.Hint = fmt.Sprintf("too many open files: %d events x %d threads x %d CPUs need a descriptor each; raise ulimit -n", len(s.attrs), nthreads, ncpus)
	case unix.EINVAL:
		e.Hint = fmt.Sprintf("the kernel refused the attributes (%s, user registers %#x, user stack %d bytes)", a, a.SampleRegsUser, a.SampleStackUser)
	case unix.EBUSY:
		e.Hint = "the counter is in use by another program"
	}
	return e
}

// Attrs returns the session's events, in the order of Options.Events.
func (s *Session) Attrs() []*Attr { return s.attrs }

// RingPages returns the number of data pages of each ring, which is less
// than asked for when the locked-memory limit refused it.
func (s *Session) RingPages() int { return s.pages }

// Warnings returns what Open had to give up, one line each.
func (s *Session) Warnings() []string { return s.warnings }

// UserOnly returns why the session samples in user space only, when
// Options.KernelIfPermitted asked for the kernel too and was refused
// ("kernel.perf_event_paranoid is 2; ..."); "" otherwise.
func (s *Session) UserOnly() string { return s.userOnly }

// WakeOn makes Run read the rings whenever fd polls readable (edge
// triggered: each time it becomes so), besides the rings' wakeups: a BPF
// program's signal that records it needs are waiting. Call it before
// Run.
func (s *Session) WakeOn(fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return &Error{Op: "epoll_ctl", Err: err}
	}
	return nil
}

// SetBPF attaches BPF programs (file descriptors of
// BPF_PROG_TYPE_PERF_EVENT programs) to the sampled events
// (PERF_EVENT_IOC_SET_BPF), progs[i] to the event of Attrs()[i]: it runs
// at each sample, and the sample is written only when it returns
// non-zero. Threads that inherit the events later inherit the program.
// Call it before Enable, or before the command starts.
func (s *Session) SetBPF(progs []int) error {
	for _, ev := range s.events {
		if ev.attr.Index >= len(progs) {
			return &Error{Op: fmt.Sprintf("attach a BPF program to %s", ev.attr.Event.Name), Err: unix.EINVAL}
		}
		if err := unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_SET_BPF, progs[ev.attr.Index]); err != nil {
			return &Error{Op: fmt.Sprintf("attach the BPF program to %s on CPU %d", ev.attr.Event.Name, ev.cpu), Err: err}
		}
	}
	return nil
}

// Enable starts the events.
func (s *Session) Enable() error { return s.ioctlAll(unix.PERF_EVENT_IOC_ENABLE, "enable") }

// Disable stops the events; records already written stay readable.
func (s *Session) Disable() error { return s.ioctlAll(unix.PERF_EVENT_IOC_DISABLE, "disable") }

func (s *Session) ioctlAll(req uint, what string) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return errors.New("session closed")
	}
	for _, ev := range s.events {
		// An event whose thread has exited takes the request without error.
		if err := unix.IoctlSetInt(ev.fd, req, 0); err != nil {
			return &Error{Op: fmt.Sprintf("%s %s on CPU %d", what, ev.attr.Event.Name, ev.cpu), Err: err}
		}
	}
	return nil
}

// Run reads the rings and calls fn with each record until Stop is called
// or every profiled thread has exited (Exited), then returns nil; or
// until fn returns an error, which Run returns. It waits in epoll for a
// ring's wakeup (Options.WakeupEvents or WakeupBytes), for Stop, or at
// most PollInterval, and on every wakeup reads every ring to its head.
// Records come in each ring's order; records of different CPUs are not
// ordered with each other (sort them by time when it matters).
//
// The record passed to fn, its bytes and what Record.Decode makes of
// them are valid only until fn returns: Raw is a view into the ring,
// which the kernel reuses once Run moves past it. Run allocates nothing
// per record, nor does Record.Decode.
//
// Run may be called again after it returned for Stop; one Run at a time.
func (s *Session) Run(fn func(*Record) error) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.isClosed() {
		return errors.New("session closed")
	}
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := s.wait(evs, s.pollInterval())
		if err != nil {
			return &Error{Op: "epoll_wait", Err: err}
		}
		stop := false
		for _, ev := range evs[:max(n, 0)] {
			fd := int(ev.Fd)
			switch {
			case fd == s.stopfd:
				var b [8]byte
				unix.Read(s.stopfd, b[:])
				stop = true
			case ev.Events&(unix.EPOLLHUP|unix.EPOLLERR) != 0:
				// The event's thread and every thread that inherited it
				// have exited; level-triggered epoll would report it
				// again and again.
				unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, fd, nil)
				s.live--
			}
		}
		if err := s.drain(fn); err != nil {
			return err
		}
		if stop {
			return nil
		}
		if s.live == 0 && !s.opts.SystemWide {
			s.exited.Store(true)
			return nil
		}
	}
}

// wait waits at most timeout for events of the epoll set and returns
// them: in Go's network poller, until the epoll descriptor is readable
// (some event of the set is ready) or the deadline passes (0 events).
//
// Once woken, it returns even when epoll_wait then reports nothing: a
// perf event's poll clears the ring's wakeup as it reports it, so the
// check that found the epoll descriptor readable has consumed the very
// wakeup that epoll_wait would report. The caller reads every ring on
// every return anyway.
func (s *Session) wait(evs []unix.EpollEvent, timeout time.Duration) (int, error) {
	var n int
	var werr error
	s.epoll.SetReadDeadline(time.Now().Add(timeout))
	woken := false
	err := s.epollRaw.Read(func(fd uintptr) bool {
		n, werr = epollPoll(int(fd), evs)
		if werr == unix.EINTR {
			n, werr = 0, nil
		}
		done := n > 0 || werr != nil || woken
		woken = true // the next call follows a wakeup
		return done
	})
	switch {
	case werr != nil:
		return 0, werr
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return n, nil
}

// epollPoll returns the ready events of the epoll set epfd without
// waiting (a timeout of 0). It is a raw system call: one that cannot
// block needs no hand-off of the scheduler's P, and Go's exit from an
// ordinary one wakes the runtime's monitor thread from its sleep into a
// millisecond of polling every 20 µs, each wakeup of which costs more
// than reading a ring.
func epollPoll(epfd int, evs []unix.EpollEvent) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// drain reads every ring to its head.
func (s *Session) drain(fn func(*Record) error) error {
	var ferr error
	rec := &s.rec // not a local: fn would make it escape, an allocation per drain
	var samples, lost, lostRecs uint64
	for _, r := range s.rings {
		rec.CPU = r.cpu
		r.read(func(raw []byte, wrapped bool) bool {
			rec.Type = perfdata.RecordType(ne.Uint32(raw))
			rec.Misc = perfdata.Misc(ne.Uint16(raw[4:]))
			rec.Raw = raw
			rec.Wrapped = wrapped
			switch rec.Type {
			case perfdata.RecordSample:
				samples++
			case perfdata.RecordLost:
				if len(raw) >= 24 {
					lost += ne.Uint64(raw[16:])
					lostRecs++
				}
			}
			if err := fn(rec); err != nil {
				ferr = err
				return false
			}
			return true
		})
		if ferr != nil {
			break
		}
	}
	s.samples.Add(samples)
	s.lost.Add(lost)
	s.lostRecords.Add(lostRecs)
	if ferr == nil && s.opts.FinishedRound {
		ne.PutUint32(s.round[0:], uint32(perfdata.RecordFinishedRound))
		ne.PutUint16(s.round[4:], 0)
		ne.PutUint16(s.round[6:], headerSize)
		rec.Type, rec.Misc, rec.Raw, rec.CPU, rec.Wrapped = perfdata.RecordFinishedRound, 0, s.round[:], -1, false
		ferr = fn(rec)
	}
	return ferr
}

// SetPollInterval changes how long Run waits for a wakeup before it reads
// the rings anyway, from its next wait on; 0 restores
// Options.PollInterval. A reader that holds records back until later
// passes (to order them across CPUs) shortens it while records wait, so
// that they wait milliseconds rather than until a ring is half full. It
// may be called from Run's callback or any goroutine.
func (s *Session) SetPollInterval(d time.Duration) { s.poll.Store(int64(max(d, 0))) }

// pollInterval returns Run's current wait.
func (s *Session) pollInterval() time.Duration {
	if d := time.Duration(s.poll.Load()); d > 0 {
		return d
	}
	if s.opts.PollInterval > 0 {
		return s.opts.PollInterval
	}
	return DefaultPollInterval
}

// Stop makes Run return after it has read what the rings hold. It may be
// called from any goroutine, before or during Run (a Stop before Run
// makes the next Run return after one pass).
func (s *Session) Stop() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return
	}
	var one [8]byte
	ne.PutUint64(one[:], 1)
	unix.Write(s.stopfd, one[:])
}

// Exited reports whether Run returned because every profiled thread, and
// every thread they created, had exited.
func (s *Session) Exited() bool { return s.exited.Load() }

// Stats are counts since Open.
type Stats struct {
	Records uint64 // records read
	Samples uint64 // SAMPLE records read
	Bytes   uint64 // bytes of records read
	// Wrapped counts records that wrapped around the end of their ring
	// and were copied to be handed out whole.
	Wrapped uint64
	// Lost is the number of records the kernel dropped because a ring was
	// full, as LOST records report; LostRecords is the number of those.
	Lost, LostRecords uint64
	// Corrupt counts the times a ring held a record header that could not
	// be right, after which the rest of that ring's data was dropped (it
	// should stay 0).
	Corrupt uint64
}

// Stats returns the counts so far; it may be called while Run runs.
func (s *Session) Stats() Stats {
	st := Stats{Samples: s.samples.Load(), Lost: s.lost.Load(), LostRecords: s.lostRecords.Load()}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	for _, r := range s.rings {
		st.Records += r.records.Load()
		st.Bytes += r.bytes.Load()
		st.Wrapped += r.wrapped.Load()
		st.Corrupt += r.corrupt.Load()
	}
	return st
}

func (s *Session) isClosed() bool {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return s.closed
}

// Close stops Run if it runs and waits for it to return, then disables
// the events, unmaps the rings and closes every descriptor. It is
// idempotent.
func (s *Session) Close() error {
	s.Stop()
	s.runMu.Lock()
	defer s.runMu.Unlock()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.release()
	return nil
}

// release disables and closes everything Open made.
func (s *Session) release() {
	for _, ev := range s.events {
		unix.IoctlSetInt(ev.fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	s.unmapRings()
	for _, ev := range s.events {
		unix.Close(ev.fd)
	}
	s.events = nil
	if s.epoll != nil {
		s.epoll.Close()
		s.epoll, s.epfd = nil, -1
	}
	for _, fd := range []*int{&s.epfd, &s.stopfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// readSysctl reads an integer from /proc/sys/NAME.
func readSysctl(name string) (int, bool) {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return v, err == nil
}

// onlineCPUs returns the online CPUs (/sys/devices/system/cpu/online).
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("listing CPUs: %w", err)
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
	}
	return cpus, nil
}

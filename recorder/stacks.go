package recorder

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/bpfunwind"
	"github.com/sframekit/sframekit/internal/slab"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/perfunwind"
)

// stack is one distinct stack of one thread and event, with what its
// samples add up to: their number and periods (for switch-outs, the
// nanoseconds off the CPU).
type stack struct {
	pid, tid uint32
	event    int
	comm     string
	exec     string // the process's program (perfunwind.Stack.Exec)
	// key is the stack's key in recorder.stacks, whose bytes from
	// frames on are its frames (see intern): kept once, as bytes that
	// the garbage collector does not scan, where a copy of the
	// perfunwind.Frames took four times the memory, with pointers.
	key    string
	frames int
	// next is the next stack whose key has the same hash (see intern).
	next   *stack
	kernel int
	n      int64
	period uint64
}

// appendFrames appends the frames of s, decoded from its key, whose
// mappings are numbered in maps (ID i is maps[i-1]), to fs.
func (s *stack) appendFrames(fs []perfunwind.Frame, maps []*perfunwind.Mapping) []perfunwind.Frame {
	// The key's bytes, read in place (a conversion would copy them).
	k := unsafe.Slice(unsafe.StringData(s.key), len(s.key))[s.frames:]
	var pc uint64
	for len(k) > 0 {
		d, n := binary.Varint(k)
		if n <= 0 || n >= len(k) {
			break
		}
		pc += uint64(d)
		f := perfunwind.Frame{PC: pc}
		k = k[n:]
		id, n := binary.Uvarint(k)
		if n <= 0 || n >= len(k) {
			break
		}
		if id > 0 && id <= uint64(len(maps)) {
			f.Map = maps[id-1]
		}
		f.SetFlags(k[n])
		k = k[n+1:]
		fs = append(fs, f)
	}
	return fs
}

// event is an event of the timeline, applied in time order once every
// CPU's records up to its time have been read (see round): a record that
// describes processes (MMAP, COMM, FORK, EXIT), a switch-out sample (with
// its stack) or a switch-in, or a sample kept until the records before it
// were applied.
type event struct {
	time     uint64
	kind     uint8
	pid, tid uint32
	// hold says the event changes what is known of its process (proc) or
	// of its thread: until it is applied, their samples wait too.
	hold, proc bool
	st         *stack
	raw        []byte // evRecord, evSample, evStack: a copy of the record
}

// Kinds of events.
const (
	evRecord = iota
	evSample
	evStack // a stack the BPF program walked (bpfunwind.Decode)
	evOut
	evIn
)

// pendingOut is a switch-out waiting for its thread's switch-in.
type pendingOut struct {
	time uint64
	st   *stack
}

// recorder is what Record keeps while reading records: the unwinding
// session, the merged stacks and the timeline. Its record method is the
// per-sample path, allocation-free for a stack seen before.
//
// Records of different CPUs come out of order: a new thread's samples
// may be read before the FORK and COMM records that name it and, for a
// new process or program, give its mappings. So the records that
// describe processes are applied in time order, late (see round), and a
// sample is unwound at once only when nothing about its process or thread
// is waiting, its thread is known and its address is mapped; otherwise it
// is copied and waits for its turn.
type recorder struct {
	sess    *perfunwind.Session
	arch    arch.Arch
	csEvent int // index of the context-switches event, -1 without
	smp     perfunwind.Sample
	st      perfunwind.Stack
	key     []byte
	// stacks are the merged stacks by the hash of their keys (seed),
	// those of one hash chained by stack.next: a map keyed by the keys
	// themselves hashed each again, hundreds of bytes, every time it
	// grew, which was a third of merging a C++ compiler's stacks (nearly
	// every sample a new one).
	stacks  map[uint64]*stack
	seed    maphash.Seed
	slab    slab.Slab[stack] // the next stacks' room
	keys    slab.Bytes       // the stacks' keys, never changed
	order   []*stack
	mapIDs  map[*perfunwind.Mapping]uint32
	maps    []*perfunwind.Mapping // by ID - 1
	lastMap *perfunwind.Mapping
	lastID  uint32

	queue    []event
	heldProc map[uint32]int // records waiting, by process
	heldTid  map[uint32]int // records waiting, by thread
	// nameless are the threads of known processes that no record named
	// by the time of a sample of theirs (started while /proc was read):
	// their later samples do not wait for a name that will not come.
	nameless map[uint32]struct{}
	pending  map[uint32]pendingOut
	roundMax uint64 // latest time read, up to this pass over the rings
	prevMax  uint64 // up to the pass before: what is earlier is all read

	dec     *perfdata.Decoder // for records that waited
	late    perfdata.Record
	kept    int // bytes of samples waiting
	maxKept int
	free    [][]byte // copies of samples unwound since, for reuse
	stats   Stats

	// poll, if not nil, sets how long the reader waits before its next
	// pass over the rings (perfevent.Session.SetPollInterval); rounds
	// counts the passes, and fast says the waits are short now.
	// waitFirst says the first samples will wait (a command's, for its
	// exec's records): the passes are fast until they come.
	poll      func(time.Duration)
	rounds    int
	fast      bool
	waitFirst bool

	// onCut, if not nil, takes the stacks of each period (Options.Period)
	// since periodStart; see cut.
	onCut       func(stacks []*stack, maps []*perfunwind.Mapping, start, end time.Time)
	period      time.Duration
	periodStart time.Time

	// bpf, when not nil, walks the stacks in the kernel: its stacks are
	// read at each pass over the rings, and its tables of processes are
	// mirror's. The events' own samples are those it passed on.
	bpf    *bpfunwind.Unwinder
	mirror *bpfunwind.Mirror
	// seen maps the BPF program's stacks (bpfunwind.StackKey) to their
	// merged stack while nothing the session knows changes: a stack seen
	// before is merged without mapping its frames again. Emptied when a
	// record is applied (mappings, names, exits), at each cut, and
	// beyond maxSeen stacks. Keyed by the key's hash, the key itself in
	// seenKeys (reused once emptied): a string per stack was an
	// allocation per new stack. Two keys of one hash share a place, the
	// later kept: a miss costs a walk's mapping, nothing else.
	seen     map[uint64]seenStack
	seenKey  []byte
	seenKeys slab.Bytes
}

// seenStack is a stack of r.seen and its BPF key.
type seenStack struct {
	key string
	st  *stack
}

// maxSeen and maxSeenBytes bound r.seen: 16,384 stacks, and 8 MiB of
// keys (a 32-frame stack's key is 270 bytes; a 4,096-frame one's 33 KB,
// so that the count alone would allow 550 MB).
const (
	maxSeen      = 1 << 14
	maxSeenBytes = 8 << 20
)

// forgetSeen empties r.seen, keeping its room.
func (r *recorder) forgetSeen() {
	clear(r.seen)
	r.seenKeys.Reset()
}

// Waits between passes over the rings. A sample read before the records
// of its process waits two passes (see round); at a ring's wakeup, half
// a ring later, that is hundreds of samples copied, each a fresh 16 KiB
// of heap. So while samples wait, and for a command until its first
// sample comes (a new command's first samples always wait for its
// exec's records), the reader passes every fastPoll, which bounds the
// wait to a few milliseconds of samples; otherwise at the ring's
// wakeups, for the least CPU time (a pass costs tens of microseconds
// on a virtual machine, mostly in waking up).
const (
	fastPoll = 4 * time.Millisecond
	// startRounds bounds the fast passes while no sample has come: a
	// second of them, for a target that does not run at first.
	startRounds = int(time.Second / fastPoll)
	// maxFree bounds the copies kept for reuse.
	maxFree = 64
)

// newRecorder returns a recorder of samples of the events attrs, for an
// unwinder of arch; csEvent is the index of the context-switches event,
// -1 without. At most maxKept bytes of samples wait for their turn
// (beyond, they are unwound at once).
func newRecorder(sess *perfunwind.Session, a arch.Arch, attrs []*perfdata.Attr, csEvent, maxKept int) *recorder {
	return &recorder{sess: sess, arch: a, csEvent: csEvent, dec: perfdata.NewDecoder(binary.NativeEndian, attrs), maxKept: maxKept,
		stacks: map[uint64]*stack{}, seed: maphash.MakeSeed(), mapIDs: map[*perfunwind.Mapping]uint32{}, pending: map[uint32]pendingOut{},
		heldProc: map[uint32]int{}, heldTid: map[uint32]int{}, nameless: map[uint32]struct{}{}}
}

// handle takes one record of the rings.
func (r *recorder) handle(pr *perfevent.Record) error {
	if pr.Type == perfdata.RecordFinishedRound {
		r.round()
		return nil
	}
	rec, err := pr.Decode()
	if err != nil {
		r.stats.Undecodable++
		return nil
	}
	r.record(rec)
	return nil
}

// record takes one decoded record: a sample is unwound now (or waits),
// the records that describe processes and switch-ins join the timeline.
func (r *recorder) record(rec *perfdata.Record) {
	t := rec.Time()
	if t > r.roundMax {
		r.roundMax = t
	}
	switch rec.Type {
	case perfdata.RecordSample:
		r.sample(rec, t, false)
	case perfdata.RecordMmap, perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordExit:
		if r.bpf != nil {
			r.mirrorRecord(rec)
		}
		e := event{time: t, kind: evRecord, raw: slices.Clone(rec.Raw)}
		switch {
		case rec.Mmap() != nil:
			e.pid, e.hold, e.proc = rec.Mmap().Pid, true, true
		case rec.Comm() != nil:
			c := rec.Comm()
			e.pid, e.tid, e.hold, e.proc = c.Pid, c.Tid, true, c.Exec
		case rec.Type == perfdata.RecordFork && rec.Task() != nil:
			k := rec.Task()
			e.pid, e.tid, e.hold, e.proc = k.Pid, k.Tid, true, k.Pid != k.Ppid
		}
		if e.hold {
			if e.proc {
				r.heldProc[e.pid]++
			} else {
				r.heldTid[e.tid]++
			}
		}
		r.queue = append(r.queue, e)
	case perfdata.RecordSwitch, perfdata.RecordSwitchCPUWide:
		if sw := rec.Switch(); sw != nil && !sw.Out && r.csEvent >= 0 {
			r.queue = append(r.queue, event{time: t, kind: evIn, tid: rec.ID.Tid})
		}
	default:
		r.sess.Record(rec) // LOST, LOST_SAMPLES
	}
}

// sample unwinds a sample and merges its stack, or keeps a copy of it
// for later when records about its process or thread are waiting, or its
// address is in no known mapping of its process (the records that map it
// may not have been read yet). late says it is such a sample, now in its
// place in time.
func (r *recorder) sample(rec *perfdata.Record, t uint64, late bool) {
	ps := rec.Sample()
	if ps == nil || rec.Attr == nil {
		return
	}
	r.smp.FromPerf(ps, r.arch)
	r.smp.Event = rec.Attr.Index
	r.take(t, late, evSample, rec.Raw)
}

// stack takes a stack the BPF program walked (a record of its ring,
// bpfunwind.Decode) as r.sample takes a sample; late says it waited.
func (r *recorder) stack(raw []byte, late bool) {
	chain, h, ok := bpfunwind.Decode(raw, r.smp.Callchain)
	if !ok {
		r.stats.BPFTruncated++
	}
	if h.Time > r.roundMax && !late {
		r.roundMax = h.Time
	}
	r.smp.FromCallchain(h.Pid, h.Tid, h.Time, h.Period, h.Event, chain)
	r.smp.SigFrame = h.SigFrame
	r.take(h.Time, late, evStack, raw)
}

// take unwinds the sample in r.smp (read from raw, an event of kind
// evSample or evStack, at time t) and merges its stack, or keeps a copy
// of raw to take it later in its place in time (late then).
func (r *recorder) take(t uint64, late bool, kind uint8, raw []byte) {
	if !late {
		r.stats.Samples++
		if r.mustWait(r.smp.Pid, r.smp.Tid) && r.kept+len(raw) <= r.maxKept {
			r.smp.Stack = nil
			r.kept += len(raw)
			r.stats.Deferred++
			r.queue = append(r.queue, event{time: t, kind: kind, raw: r.copyOf(raw)})
			return
		}
	}
	if late && !r.sess.KnownThread(r.smp.Tid) && r.sess.Known(r.smp.Pid) {
		r.nameless[r.smp.Tid] = struct{}{}
	}
	var st *stack
	var h uint64
	if kind == evStack {
		r.seenKey = bpfunwind.StackKey(r.seenKey[:0], raw)
		h = maphash.Bytes(r.seed, r.seenKey)
		if e := r.seen[h]; e.key == string(r.seenKey) && e.st != nil {
			st = e.st
			r.sess.CountReused(st.kernel)
		}
	}
	if st == nil {
		r.sess.Unwind(&r.smp, &r.st)
		r.smp.Stack = nil // the copy is the ring's: keep nothing of it
		st = r.intern(&r.st)
		if kind == evStack && !r.st.Unwound && len(r.st.Frames) > st.kernel {
			if r.seen == nil {
				r.seen = make(map[uint64]seenStack)
			}
			if len(r.seen) >= maxSeen || r.seenKeys.Len()+len(r.seenKey) > maxSeenBytes {
				r.forgetSeen()
			}
			r.seen[h] = seenStack{key: r.seenKeys.String(r.seenKey, 64<<10), st: st}
		}
	}
	if r.smp.Event == r.csEvent {
		r.stats.SwitchOuts++
		e := event{time: t, kind: evOut, tid: r.smp.Tid, st: st}
		if late {
			r.apply(&e) // in its place in time already
		} else {
			r.queue = append(r.queue, e)
		}
		return
	}
	r.stats.OnCPU++
	st.n++
	st.period += r.smp.Period // FromPerf's, or the walker's (r.stack)
}

// mirrorRecord applies a record that changes a process's executable
// mappings (MMAP, FORK of a process, exec) to the mirror of the kernel's
// tables as soon as it is read, and updates the process's table: the
// walker needs the tables of a new program, library or process as soon
// as it runs, while the session applies the records in time order.
func (r *recorder) mirrorRecord(rec *perfdata.Record) {
	var pid uint32
	switch {
	case rec.Mmap() != nil:
		m := rec.Mmap()
		if !m.Executable || m.Pid == ^uint32(0) || m.Len == 0 {
			return
		}
		pid = m.Pid
		r.mirror.Mmap(pid, r.sess.MappingOf(m))
	case rec.Comm() != nil && rec.Comm().Exec:
		pid = rec.Comm().Pid
		r.mirror.Exec(pid)
	case rec.Type == perfdata.RecordFork && rec.Task() != nil && rec.Task().Pid != rec.Task().Ppid:
		pid = rec.Task().Pid
		r.mirror.Fork(pid, rec.Task().Ppid)
	default:
		return
	}
	r.bpf.SyncProcess(pid, r.mirror.Mappings(pid))
}

// mustWait reports whether the sample just read into r.smp, of thread tid
// of process pid, must wait for the timeline.
func (r *recorder) mustWait(pid, tid uint32) bool {
	if len(r.heldProc) > 0 && r.heldProc[pid] > 0 || len(r.heldTid) > 0 && r.heldTid[tid] > 0 {
		return true
	}
	if !r.sess.KnownThread(tid) && r.sess.Known(pid) {
		// A new thread of a known process, whose FORK record another
		// CPU's ring may hold, not read yet: its name comes with it.
		if _, ok := r.nameless[tid]; !ok {
			return true
		}
	}
	if r.smp.Regs.Arch != 0 {
		// A sample with its user registers (with --bpf, one the program
		// passed on): its user PC, whether it was taken in the kernel or
		// not.
		return !r.sess.Mapped(pid, r.smp.Regs.PC())
	}
	// A stack of the BPF walker: its first user frame.
	return r.bpf != nil && r.smp.IP != 0 && !r.sess.Mapped(pid, r.smp.IP)
}

// intern returns the merged stack equal to st, adding it if new: equal
// means the same process, thread, thread name, program (Exec) and
// event, and frame for frame the same address in the same mapping, of
// the same kind.
func (r *recorder) intern(st *perfunwind.Stack) *stack {
	k := r.key[:0]
	k = binary.LittleEndian.AppendUint32(k, st.Pid)
	k = binary.LittleEndian.AppendUint32(k, st.Tid)
	k = binary.AppendUvarint(k, uint64(st.Event))
	k = binary.AppendUvarint(k, uint64(st.Kernel))
	k = append(k, st.Comm...)
	k = append(k, 0)
	k = append(k, st.Exec...)
	k = append(k, 0)
	frames := len(k)
	// Each address as its difference from the one before: callers lie
	// near one another, and 8 bytes each made the keys the largest part
	// of a C++ compiler's recording (3.7 MB of 15, each new page a fault).
	var prev uint64
	for i := range st.Frames {
		f := &st.Frames[i]
		k = binary.AppendVarint(k, int64(f.PC-prev))
		prev = f.PC
		k = binary.AppendUvarint(k, uint64(r.mapID(f.Map)))
		k = append(k, f.Flags())
	}
	r.key = k
	h := maphash.Bytes(r.seed, k)
	first := r.stacks[h]
	for s := first; s != nil; s = s.next {
		if s.key == string(k) {
			return s
		}
	}
	// The stack and its key come from blocks of many: two allocations
	// per stack were a quarter of merging.
	s := r.slab.New(256)
	*s = stack{pid: st.Pid, tid: st.Tid, event: st.Event, comm: st.Comm, exec: st.Exec, key: r.keys.String(k, 64<<10), frames: frames, kernel: st.Kernel, next: first}
	r.stacks[h] = s
	r.order = append(r.order, s)
	return s
}

// mapID numbers the mappings of frames, for the stacks' keys; 0 for none.
// Consecutive frames are mostly of one mapping.
func (r *recorder) mapID(m *perfunwind.Mapping) uint32 {
	if m == nil {
		return 0
	}
	if m == r.lastMap {
		return r.lastID
	}
	id, ok := r.mapIDs[m]
	if !ok {
		id = uint32(len(r.mapIDs) + 1)
		r.mapIDs[m] = id
		r.maps = append(r.maps, m)
	}
	r.lastMap, r.lastID = m, id
	return id
}

// round ends a pass over the rings: the timeline's events up to the
// latest time of the pass before are final, since every CPU's records
// written before it have been read by now (perf's rule for its
// FINISHED_ROUND records), and are applied in time order.
func (r *recorder) round() {
	if r.bpf != nil {
		r.bpf.Woken()
		// After the rings: the records its stacks need were written
		// before them, and are read by now, but for a CPU's written in
		// between (their samples wait, mustWait).
		r.bpf.ReadStacks(r.readStack)
	}
	r.flush(r.prevMax)
	r.prevMax = r.roundMax
	r.rounds++
	if r.onCut != nil {
		if now := time.Now(); now.Sub(r.periodStart) >= r.period {
			r.cut(now)
		}
	}
	if r.poll == nil {
		return
	}
	fast := r.kept > 0 || r.waitFirst && r.stats.Samples == 0 && r.rounds < startRounds
	if fast != r.fast {
		r.fast = fast
		if fast {
			r.poll(fastPoll)
		} else {
			r.poll(0)
		}
	}
}

// cut hands the stacks sampled since the last cut to onCut, as copies
// with their counts and the mappings their frames are numbered by, and
// starts a new table: the stacks' map and the numbering of mappings are
// dropped, so that neither grows with a long recording (nor keeps the
// mappings of processes long gone). A switch-out still waiting for its
// thread's switch-in keeps its stack, which joins the new table (keyed
// by the new numbering) with its counts zeroed: its off-CPU time counts
// in the period its thread runs again.
func (r *recorder) cut(end time.Time) {
	out := make([]*stack, 0, len(r.order))
	for _, s := range r.order {
		if s.n > 0 {
			c := *s
			out = append(out, &c)
			s.n, s.period = 0, 0
		}
	}
	maps := r.maps
	r.forgetSeen()
	r.stacks = map[uint64]*stack{}
	r.order = nil
	r.mapIDs = map[*perfunwind.Mapping]uint32{}
	r.maps = nil
	r.lastMap, r.lastID = nil, 0
	moved := map[*stack]*stack{}
	var frames []perfunwind.Frame
	rekey := func(s *stack) *stack {
		if s == nil {
			return nil
		}
		if t, ok := moved[s]; ok {
			return t
		}
		frames = s.appendFrames(frames[:0], maps)
		st := perfunwind.Stack{Pid: s.pid, Tid: s.tid, Event: s.event, Comm: s.comm, Exec: s.exec, Frames: frames, Kernel: s.kernel}
		t := r.intern(&st)
		moved[s] = t
		return t
	}
	for tid, p := range r.pending {
		p.st = rekey(p.st)
		r.pending[tid] = p
	}
	for i := range r.queue {
		if r.queue[i].kind == evOut {
			r.queue[i].st = rekey(r.queue[i].st)
		}
	}
	start := r.periodStart
	r.periodStart = end
	r.onCut(out, maps, start, end)
}

// copyOf returns a copy of a sample that must wait, in a buffer of one
// unwound before when there is one.
func (r *recorder) copyOf(raw []byte) []byte {
	for len(r.free) > 0 {
		b := r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		if cap(b) >= len(raw) {
			return append(b[:0], raw...)
		}
	}
	return slices.Clone(raw)
}

// flush applies, in time order, the queued events up to limit.
func (r *recorder) flush(limit uint64) {
	if len(r.queue) == 0 {
		return
	}
	sort.SliceStable(r.queue, func(i, j int) bool { return r.queue[i].time < r.queue[j].time })
	n := sort.Search(len(r.queue), func(i int) bool { return r.queue[i].time > limit })
	for i := range r.queue[:n] {
		r.apply(&r.queue[i]) // appends nothing to the queue
	}
	rest := copy(r.queue, r.queue[n:])
	clear(r.queue[rest:])
	r.queue = r.queue[:rest]
}

// apply applies one event of the timeline.
func (r *recorder) apply(e *event) {
	switch e.kind {
	case evRecord:
		r.forgetSeen() // what the stacks' frames map to may change
		if e.hold {
			held, k := r.heldTid, e.tid
			if e.proc {
				held, k = r.heldProc, e.pid
			}
			if held[k]--; held[k] <= 0 {
				delete(held, k)
			}
		}
		if err := r.dec.Decode(&r.late, e.raw); err != nil {
			r.stats.Undecodable++
			return
		}
		if r.late.Type == perfdata.RecordExit {
			t := r.late.Task()
			// The thread stays known a while, for the samples of its
			// exit path a system-wide recording takes after the record.
			r.sess.ExitAt(t.Pid, t.Tid, t.Time)
			delete(r.nameless, t.Tid)
			if r.bpf != nil && !r.sess.Alive(t.Pid) {
				r.mirror.Exit(t.Pid) // its last thread
				r.bpf.DropProcess(t.Pid)
			}
			if _, ok := r.pending[t.Tid]; ok {
				delete(r.pending, t.Tid)
				r.stats.Dropped++ // it never ran again
			}
			return
		}
		r.sess.Record(&r.late)
	case evStack:
		r.kept -= len(e.raw)
		r.stack(e.raw, true)
		if len(r.free) < maxFree {
			r.free = append(r.free, e.raw)
		}
		e.raw = nil
	case evSample:
		r.kept -= len(e.raw)
		if err := r.dec.Decode(&r.late, e.raw); err != nil {
			r.stats.Undecodable++
			return
		}
		r.sample(&r.late, e.time, true)
		if len(r.free) < maxFree {
			r.free = append(r.free, e.raw) // nothing of it is kept
		}
		e.raw = nil
	case evOut:
		if _, ok := r.pending[e.tid]; ok {
			r.stats.Dropped++ // its switch-in was lost
		}
		r.pending[e.tid] = pendingOut{time: e.time, st: e.st}
	case evIn:
		p, ok := r.pending[e.tid]
		if !ok || p.time > e.time {
			return
		}
		delete(r.pending, e.tid)
		r.weigh(p.st, e.time-p.time)
	}
}

// weigh counts a switch-out that kept its thread off the CPU for d ns.
func (r *recorder) weigh(st *stack, d uint64) {
	st.n++
	st.period += d
	r.stats.OffCPU++
	r.stats.OffCPUTime += durationOf(d)
}

// finish applies what is left of the timeline after the last record;
// threads still off their CPU at end (a time of the records' clock) are
// weighted up to it.
func (r *recorder) finish(end uint64) {
	r.flush(math.MaxUint64)
	end = max(end, r.roundMax)
	tids := make([]uint32, 0, len(r.pending))
	for tid := range r.pending {
		tids = append(tids, tid)
	}
	slices.Sort(tids)
	for _, tid := range tids {
		p := r.pending[tid]
		r.weigh(p.st, end-p.time)
		r.stats.AtEnd++
	}
	clear(r.pending)
	pids, tidset := map[uint32]bool{}, map[uint32]bool{}
	for _, s := range r.order {
		if s.n > 0 {
			r.stats.Stacks++
			pids[s.pid], tidset[s.tid] = true, true
		}
	}
	r.stats.Processes, r.stats.Threads = len(pids), len(tidset)
}

// durationOf converts nanoseconds to a Duration, saturating.
func durationOf(ns uint64) time.Duration {
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// readStack takes a stack just read from the BPF program's ring.
func (r *recorder) readStack(raw []byte) { r.stack(raw, false) }

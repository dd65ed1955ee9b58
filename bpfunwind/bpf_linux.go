//go:build linux && amd64

package bpfunwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// Supported reports whether this build has the BPF walker (x86-64 Linux).
const Supported = true

// Unwinder is the loaded BPF walker with its maps: the per-file row
// tables and the per-process mapping tables it reads. Its methods are
// called from one goroutine (the recorder's reader).
type Unwinder struct {
	opts  Options
	objs  walkObjects
	stats io.Closer // kernel BPF run-time statistics, while loaded
	// Files by the session's *File (one per file and build), with the
	// processes mapping them counted.
	files  map[*perfunwind.File]*fileEntry
	procs  map[uint32][]*fileEntry // the files each process's table names
	idle   []*fileEntry            // loaded tables no process names, oldest first
	nextID uint32
	free   []span // free ranges of the rows map, sorted
	// Tables counts what the loaded tables hold.
	Tables TableStats
	proc   walkProc // scratch for SyncProcess
	gen    uint64   // the process tables' generation (bump)
	progs  []*ebpf.Program
	misses *ringbuf.Reader
	rec    ringbuf.Record
	stacks *ringbuf.Reader
	srec   ringbuf.Record
	// The rows and buckets maps, memory-mapped.
	rowMem, bucketMem *ebpf.Memory
	// links attach walk.c's on_exec and on_unmapped_area, which keep a
	// process's table from describing code no longer there.
	links []link.Link
}

type fileEntry struct {
	f     *perfunwind.File
	id    uint32
	refs  int
	first uint32 // rows [first, first+n), buckets [first, first+nb)
	n     uint32
	nb    uint32
	shift uint32
	base  uint64 // the ELF address of row PC 0
	span  uint32 // the rows cover [base, base+span)
}

type span struct{ first, n uint32 }

// ErrPermission says the kernel refused to load the program or create
// its maps for want of privilege.
var ErrPermission = errors.New("BPF needs CAP_BPF and CAP_PERFMON (or root)")

// Load loads the walker and creates its maps, sized by opts: the
// verifier checks the program here.
func Load(opts Options) (*Unwinder, error) {
	opts.defaults()
	spec, err := loadWalk()
	if err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	spec.Maps[walkMapRows].MaxEntries = uint32(opts.MaxRows)
	spec.Maps[walkMapBuckets].MaxEntries = uint32(opts.MaxRows)
	spec.Maps[walkMapProcs].MaxEntries = uint32(opts.MaxProcesses)
	spec.Maps[walkMapScratch].MaxEntries = uint32(ncpu)
	ring := stackRingSize(opts.StackRing, ncpu)
	spec.Maps[walkMapStacks].MaxEntries = uint32(ring)
	if err := spec.Variables[walkVarMaxDepth].Set(uint32(opts.MaxDepth)); err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	// Woken by each CPU after a quarter of the ring over the CPUs: the
	// ring holds less than a quarter unread, room for what comes while
	// the profiler reads.
	wake := uint64(max(ring/4/ncpu, 1))
	if err := spec.Variables[walkVarWakeBytes].Set(wake); err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	ks := uint32(0)
	if opts.Kernel {
		ks = 1
	}
	if err := spec.Variables[walkVarKernelStack].Set(ks); err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	fb := uint32(0)
	if opts.Fallback {
		fb = 1
	}
	if err := spec.Variables[walkVarFallback].Set(fb); err != nil {
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	spec0 := spec.Copy() // for the other events' copies
	u := &Unwinder{opts: opts, files: map[*perfunwind.File]*fileEntry{}, procs: map[uint32][]*fileEntry{}, nextID: 1,
		free: []span{{0, uint32(opts.MaxRows)}}}
	if err := spec.LoadAndAssign(&u.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			// The verifier's last lines say why.
			log := ve.Log
			if len(log) > 8 {
				log = log[len(log)-8:]
			}
			return nil, fmt.Errorf("bpf unwinder: the kernel's verifier refused the program: %s", strings.Join(log, "; "))
		}
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("bpf unwinder: %w", ErrPermission)
		}
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	u.progs = []*ebpf.Program{u.objs.WalkStack}
	// The other events' copies share the maps (but their constants).
	repl := map[string]*ebpf.Map{walkMapRows: u.objs.Rows, walkMapBuckets: u.objs.Buckets, walkMapProcs: u.objs.Procs,
		walkMapScratch: u.objs.Scratch, walkMapCounters: u.objs.Counters, walkMapStacks: u.objs.Stacks, walkMapMisses: u.objs.Misses,
		walkMapGenmap: u.objs.Genmap, walkMapExecgen: u.objs.Execgen}
	for i := 1; i < opts.Events; i++ {
		sp := spec0.Copy()
		for name, v := range map[string]any{walkVarMaxDepth: uint32(opts.MaxDepth), walkVarKernelStack: ks, walkVarFallback: fb, walkVarEventIndex: uint32(i), walkVarWakeBytes: wake} {
			if err := sp.Variables[name].Set(v); err != nil {
				u.Close()
				return nil, fmt.Errorf("bpf unwinder: %w", err)
			}
		}
		var p struct {
			Prog *ebpf.Program `ebpf:"walk_stack"`
		}
		if err := sp.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
			u.Close()
			return nil, fmt.Errorf("bpf unwinder: event %d: %w", i, err)
		}
		u.progs = append(u.progs, p.Prog)
	}
	// Without them an exec, or a library loaded where another was,
	// would leave the old table in place until the profiler reads the
	// records of the change: wrong stacks.
	for _, tp := range []struct {
		group, name string
		prog        *ebpf.Program
	}{
		{"sched", "sched_process_exec", u.objs.OnExec},
		{"mmap", "vm_unmapped_area", u.objs.OnUnmappedArea},
	} {
		l, err := link.Tracepoint(tp.group, tp.name, tp.prog, nil)
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("bpf unwinder: attach to the %s tracepoint: %w", tp.name, err)
		}
		u.links = append(u.links, l)
	}
	if u.rowMem, err = u.objs.Rows.Memory(); err == nil {
		u.bucketMem, err = u.objs.Buckets.Memory()
	}
	if err != nil {
		u.Close()
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	if u.misses, err = ringbuf.NewReader(u.objs.Misses); err != nil {
		u.Close()
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	if u.stacks, err = ringbuf.NewReader(u.objs.Stacks); err != nil {
		u.Close()
		return nil, fmt.Errorf("bpf unwinder: %w", err)
	}
	// The kernel counts the program's run time while this is open.
	if c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		u.stats = c
	}
	return u, nil
}

// Programs returns the file descriptors of the program's copies, one per
// sampled event (Options.Events), to attach to them
// (perfevent.Session.SetBPF).
func (u *Unwinder) Programs() []int {
	fds := make([]int, len(u.progs))
	for i, p := range u.progs {
		fds[i] = p.FD()
	}
	return fds
}

// stackRingSize returns the size of the stacks ring buffer for want
// bytes (DefaultStackRing per CPU when 0): a power of two of at least a
// page, at most MaxStackRing.
func stackRingSize(want, ncpu int) int {
	if want <= 0 {
		want = DefaultStackRing * ncpu
	}
	want = min(max(want, unix.Getpagesize()), MaxStackRing)
	n := 1
	for n < want {
		n <<= 1
	}
	return n
}

// StackFD returns a file descriptor that polls readable when a CPU has
// written a quarter of the stacks ring divided by the CPUs since it last
// woke it (the ring then holds less than a quarter unread): the reader of
// the perf rings should read them then (perfevent.Session.WakeOn), and the
// stacks with ReadStacks.
func (u *Unwinder) StackFD() int { return u.objs.Stacks.FD() }

// ReadStacks calls fn with each stack the program has written since the
// last call, in the order written (each CPU's in time order), without
// waiting: the record (Decode) is valid until fn returns.
func (u *Unwinder) ReadStacks(fn func(raw []byte)) {
	u.stacks.SetDeadline(time.Now())
	for u.stacks.ReadInto(&u.srec) == nil {
		fn(u.srec.RawSample)
	}
}

// SyncProcess makes the kernel's table of process pid its executable
// mappings maps (perfunwind.Session.Mappings), loading the tables of the
// files not loaded yet and evicting those no process maps any more. The
// first MaxMappings executable mappings are kept.
func (u *Unwinder) SyncProcess(pid uint32, maps []*perfunwind.Mapping) error {
	p := &u.proc
	p.N = 0
	var used []*fileEntry
	for _, m := range maps {
		if !m.Exec || m.Kernel {
			continue
		}
		if int(p.N) >= MaxMappings {
			u.Tables.Truncated++
			break
		}
		e := &p.M[p.N]
		e.Start, e.End, e.Bias = m.Start, m.End, m.Bias
		e.Base, e.Span, e.First, e.N, e.Nb, e.Shift, e.File = 0, 0, 0, 0, 0, 0, 0
		if f := m.File; f != nil && f.Err == nil {
			if fe := u.file(f); fe != nil {
				if fe.n > 0 {
					e.Base, e.Span, e.First, e.N, e.Nb, e.Shift, e.File = fe.base, fe.span, fe.first, fe.n, fe.nb, fe.shift, fe.id
				}
				if !slices.Contains(used, fe) {
					fe.refs++
					used = append(used, fe)
				}
			}
		}
		p.N++
	}
	old := u.procs[pid]
	u.procs[pid] = used
	var err error
	if p.N == 0 {
		delete(u.procs, pid)
		err = u.objs.Procs.Delete(pid)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			err = nil
		}
	} else {
		err = u.objs.Procs.Put(pid, p)
	}
	if e := u.bump(); err == nil {
		err = e
	}
	u.release(old)
	if err != nil {
		return fmt.Errorf("bpf unwinder: the mappings of process %d: %w", pid, err)
	}
	return nil
}

// bump moves the process tables to a new generation after a change: the
// program's caches of mappings found in them are stale. Before their
// files' tables are released, so that no cached mapping names rows
// given to another file.
func (u *Unwinder) bump() error {
	u.gen++
	return u.objs.Genmap.Put(uint32(0), u.gen)
}

// DropProcess forgets process pid (it exited).
func (u *Unwinder) DropProcess(pid uint32) {
	if old, ok := u.procs[pid]; ok {
		delete(u.procs, pid)
		u.objs.Procs.Delete(pid)
		u.bump()
		u.release(old)
	}
}

// maxIdle bounds the tables kept loaded after the last process mapping
// them is gone: a program started again, or another that maps the same
// libraries (after an exec, say), finds them loaded. Beyond it, and
// when the rows or files maps are full, the oldest are evicted.
const maxIdle = 64

// release drops a process's references to files; the tables of those no
// process maps any more become idle.
func (u *Unwinder) release(files []*fileEntry) {
	for _, fe := range files {
		if fe.refs--; fe.refs > 0 {
			continue
		}
		u.idle = append(u.idle, fe)
		if len(u.idle) > maxIdle {
			u.evictIdle()
		}
	}
	u.Tables.Idle = len(u.idle)
}

// evictIdle evicts the oldest idle table; false when there is none.
func (u *Unwinder) evictIdle() bool {
	if len(u.idle) == 0 {
		return false
	}
	fe := u.idle[0]
	u.idle = u.idle[1:]
	delete(u.files, fe.f)
	if fe.n > 0 {
		u.freeRows(span{fe.first, fe.n})
	}
	u.Tables.Evicted++
	u.Tables.Idle = len(u.idle)
	return true
}

// file returns the loaded table of f, loading it first; nil when f
// cannot be loaded (its frames then follow frame pointers).
func (u *Unwinder) file(f *perfunwind.File) *fileEntry {
	if fe, ok := u.files[f]; ok {
		if fe.refs == 0 {
			u.idle = slices.DeleteFunc(u.idle, func(e *fileEntry) bool { return e == fe })
			u.Tables.Idle = len(u.idle)
		}
		return fe
	}
	for len(u.files) >= u.opts.MaxFiles && u.evictIdle() {
	}
	if len(u.files) >= u.opts.MaxFiles {
		u.Tables.Full++ // no room: frame pointers
		return nil
	}
	fe := &fileEntry{f: f, id: u.nextID}
	tab, err := loadTable(f, u.opts.MaxRows, u.opts.TableCache)
	if err != nil {
		u.Tables.Failed++
		return nil
	}
	for i, n := range tab.Skipped {
		u.Tables.Skipped[i] += n
	}
	if n := len(tab.Rows); n > 0 {
		first, ok := u.allocRows(uint32(n))
		for !ok && u.evictIdle() {
			first, ok = u.allocRows(uint32(n))
		}
		if !ok {
			u.Tables.Full++ // no rows: frame pointers
		} else {
			shift, idx := tab.Buckets()
			if err := u.writeTable(first, tab.Rows, idx); err != nil {
				u.freeRows(span{first, uint32(n)})
				u.Tables.Failed++
				return nil
			}
			fe.first, fe.n, fe.nb, fe.shift = first, uint32(n), uint32(len(idx)), shift
			fe.base, fe.span = tab.Base, uint32(tab.Limit-tab.Base)
			u.Tables.Rows += n
		}
	}
	u.nextID++
	u.files[f] = fe
	u.Tables.Files++
	return fe
}

// writeTable writes rows and their buckets into the maps from index
// first on.
func (u *Unwinder) writeTable(first uint32, rows []Row, idx []Bucket) error {
	le := binary.LittleEndian
	b := appendRows(make([]byte, 0, len(rows)*rowSize), rows)
	if _, err := u.rowMem.WriteAt(b, int64(first)*rowSize); err != nil {
		return err
	}
	b = b[:0]
	for _, k := range idx {
		b = le.AppendUint32(b, k.Lo)
		b = le.AppendUint32(b, k.Hi)
	}
	_, err := u.bucketMem.WriteAt(b, int64(first)*bucketSize)
	return err
}

// The sizes of a row and a bucket in their maps.
const (
	rowSize    = 16
	bucketSize = 8
)

// loadTable reads the tables of f (its .sframe, else SFrame compiled
// from its CFI) and reduces them to the walker's rows, or reads them
// from the cache directory cache ("" for none) where they were kept, and
// keeps them there otherwise. A file with more SFrame rows than the rows
// map holds (maxRows) gets none: its frames follow frame pointers, and
// what the table would cost in memory (16 bytes a row, beside unwind's
// own bounds) stays bounded.
func loadTable(f *perfunwind.File, maxRows int, cache string) (*Table, error) {
	ef, err := elffile.NewFileAt(f, f.Size())
	if err != nil {
		return nil, err
	}
	mach := uint32(ef.Machine)
	path := cachePath(cache, f.BuildID, mach, f.Size())
	if path != "" {
		if tab := readCached(path, mach, maxRows); tab != nil {
			return tab, nil
		}
	}
	t := unwind.LoadFileTables(ef.File, f.Path, unwind.LoadOptions{SFrameFromCFI: true})
	if t.SFrame != nil && int(t.SFrame.Header().NumFREs) > maxRows {
		return &Table{}, nil
	}
	tab := BuildTable(t, arch.FromELF(ef.Machine))
	if len(tab.Rows) > maxRows {
		// More than the header's count (a function's extra rows): no
		// room either, and not cached, since readCached would refuse it.
		return &Table{}, nil
	}
	if path != "" {
		writeCached(path, tab, mach)
	}
	return tab, nil
}

// allocRows takes n consecutive rows of the rows map (first fit).
func (u *Unwinder) allocRows(n uint32) (uint32, bool) {
	for i, s := range u.free {
		if s.n >= n {
			u.free[i] = span{s.first + n, s.n - n}
			if u.free[i].n == 0 {
				u.free = slices.Delete(u.free, i, i+1)
			}
			return s.first, true
		}
	}
	return 0, false
}

// freeRows gives back a range of rows, merged with its free neighbours.
func (u *Unwinder) freeRows(s span) {
	i := sort.Search(len(u.free), func(i int) bool { return u.free[i].first > s.first })
	u.free = slices.Insert(u.free, i, s)
	if i+1 < len(u.free) && u.free[i].first+u.free[i].n == u.free[i+1].first {
		u.free[i].n += u.free[i+1].n
		u.free = slices.Delete(u.free, i+1, i+2)
	}
	if i > 0 && u.free[i-1].first+u.free[i-1].n == u.free[i].first {
		u.free[i-1].n += u.free[i].n
		u.free = slices.Delete(u.free, i, i+1)
	}
}

// Counters returns the program's counters, summed over the CPUs.
func (u *Unwinder) Counters() Counters {
	var c Counters
	var per []uint64
	for i := uint32(0); i < numCounters; i++ {
		if err := u.objs.Counters.Lookup(i, &per); err != nil {
			continue
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		c.set(i, sum)
	}
	for _, p := range u.progs {
		if st, err := p.Stats(); err == nil {
			c.RunTime += st.Runtime
			c.Runs += st.RunCount
		}
	}
	return c
}

// WakeFD returns a file descriptor that polls readable when the program
// met a process or an address it has no table for: the reader of the
// rings should read them then (perfevent.Session.WakeOn), for the records
// that describe it, and call Woken.
func (u *Unwinder) WakeFD() int { return u.objs.Misses.FD() }

// Woken consumes the program's wakeups.
func (u *Unwinder) Woken() {
	u.misses.SetDeadline(time.Now())
	for u.misses.ReadInto(&u.rec) == nil {
	}
}

// Close unloads the program and frees its maps.
func (u *Unwinder) Close() error {
	for _, l := range u.links {
		l.Close()
	}
	if u.misses != nil {
		u.misses.Close()
	}
	if u.stacks != nil {
		u.stacks.Close()
	}
	for _, p := range u.progs[min(1, len(u.progs)):] {
		p.Close()
	}
	if u.stats != nil {
		u.stats.Close()
	}
	return u.objs.Close()
}

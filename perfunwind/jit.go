package perfunwind

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/procmem"
	"github.com/sframekit/sframekit/jitmap"
)

// jitSyms names the code a process's JIT compiler made, in its anonymous
// executable mappings: from the perf map the JIT wrote (/tmp/perf-PID.map,
// PID as the process sees itself) and the jitdump files it mapped. The
// files are read once, when a frame in such a mapping is first named, so
// that the JIT has written what it made by then (a recording is reported
// after the program ran; a live recording names its frames at the end).
// The Session adds jitdump files as their mappings come, while a
// pipelined writer may be naming frames on another goroutine: mu guards
// what both touch. The unwinding data of jitdump files is the CFI of the
// JIT's modules (jitSyms is their unwind.CFI): their walks read the files
// when they first reach JIT code, and read them again when they grew
// (refresh); naming reads them as they are when it starts (named).
type jitSyms struct {
	// name is the perf map's path in the process's mount namespace, the
	// name perf gives the process's JIT mappings.
	name string
	// mapPaths are the paths to read the perf map from, in order: in the
	// process's mount namespace while it lives, under SymFS, the path.
	mapPaths []string
	// budget is what the Session may still read of JIT files, shared by
	// its processes; readBytes counts the bytes the Session read of them.
	budget, readBytes *atomic.Int64
	arch              arch.Arch // of the unwinding data's CFI

	mu sync.Mutex
	// dumps are the jitdump files the process mapped, each the paths to
	// try.
	dumps  [][]string
	loaded bool
	bytes  int64           // of the files read, taken from budget
	tables []*jitmap.Table // the jitdump files' (later first), then the perf map's
	// perfMap is the perf map as read so far, kept across periods
	// (ForgetJIT), so that each reads only what the JIT appended since;
	// mapBytes is what it holds, counted in bytes.
	perfMap  jitmap.PerfMap
	mapBytes int64
	// Read lists the files read and what they gave, Errs those that could
	// not be, for the summary.
	read []string
	errs []error
	locs map[uint64]*Loc
	// sizes are the files read and their sizes then, which refresh
	// compares with theirs now; reloads counts its reads of a period,
	// missed the addresses it looked for since the last read.
	sizes   []fileSize
	reloads int
	missed  map[uint64]struct{}
	// named says resolve has made sure, in this period, that it names
	// from the files as they were when naming started.
	named bool
	// cfis are the CFI tables made of the unwinding data, per data and
	// code size (where perf inject would place it).
	cfis map[jitCFIKey]*cfi.Table
	// mem reads the live process's memory (nil in a recording), whose
	// code tells CPython's trampolines (pytramp.go);
	// pyTramps are the addresses checked, emptied when the process maps
	// new code there may be other code at them.
	mem      func(b []byte, addr int64) (int, error)
	pyTramps map[uint64]pyTrampHit
}

// fileSize is a JIT file read and its size then.
type fileSize struct {
	path string
	size int64
}

// jitCFIKey names the CFI table of unwinding data u for code of size
// bytes: its pc-relative addresses assume the .eh_frame after the code.
type jitCFIKey struct {
	u    *jitmap.Unwinding
	size uint64
}

// The bounds on reading a process's JIT files again (jitSyms.refresh):
// the reads of a period, and the addresses looked for between two reads
// that are remembered, not to stat the files again for each.
const (
	maxJITReloads = 16
	maxJITMissed  = 4096
)

// perfMapName reports whether perf names an executable mapping of this
// name after the process's perf map: anonymous memory, and areas that
// have no file (perf's is_anon_memory and is_no_dso_memory), or a
// mapping already so named.
func perfMapName(name string) bool {
	switch {
	case name == "//anon", strings.HasPrefix(name, "/dev/zero"), strings.HasPrefix(name, "/anon_hugepage"),
		strings.HasPrefix(name, "[stack"), strings.HasPrefix(name, "/SYSV"), name == "[heap]":
		return true
	}
	return strings.HasPrefix(name, "/tmp/perf-") && strings.HasSuffix(name, ".map")
}

// jit returns the JIT symbols of process pid, made on first use.
func (s *Session) jit(pid uint32) *jitSyms {
	if j := s.jits[pid]; j != nil {
		return j
	}
	nspid, root := pid, ""
	if s.opts.Live {
		nspid, root = liveNamespace(pid)
	}
	a := s.opts.Arch
	if a == arch.Unknown {
		a = arch.Host()
	}
	j := &jitSyms{name: "/tmp/perf-" + strconv.FormatUint(uint64(nspid), 10) + ".map", locs: map[uint64]*Loc{}, budget: &s.jitBudget, readBytes: &s.jitRead, arch: a}
	j.mapPaths = s.jitPaths(j.name, root)
	if s.opts.Live {
		j.mem = func(b []byte, addr int64) (int, error) { return procmem.Read(int(pid), b, addr) }
	}
	s.jits[pid] = j
	return j
}

// jitPaths returns where to read a file that a process names path: in
// its mount namespace through /proc/PID/root (root, while it lives),
// else under SymFS, else the path itself (a live process in this mount
// namespace, or one that was recorded here).
func (s *Session) jitPaths(path, root string) []string {
	var out []string
	if root != "" {
		out = append(out, filepath.Join(root, path))
	}
	if s.opts.SymFS != "" {
		out = append(out, filepath.Join(s.opts.SymFS, path))
	}
	if root == "" || root == "/" {
		out = append(out, path)
	}
	return out
}

// liveNamespace returns, for a running process, its own PID (the last
// of /proc/PID/status's NStgid, which differs in a PID namespace), and
// the root through which its files are read ("" when it shares this
// process's mount namespace, whose paths are the same). A process that
// is gone is taken for one of this namespace.
func liveNamespace(pid uint32) (uint32, string) {
	p := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	nspid := pid
	if st, err := os.ReadFile(p + "/status"); err == nil {
		for line := range bytes.Lines(st) {
			if f, ok := bytes.CutPrefix(line, []byte("NStgid:")); ok {
				if fs := strings.Fields(string(f)); len(fs) > 0 {
					if v, err := strconv.ParseUint(fs[len(fs)-1], 10, 32); err == nil {
						nspid = uint32(v)
					}
				}
				break
			}
		}
	}
	own, err1 := os.Readlink("/proc/self/ns/mnt")
	theirs, err2 := os.Readlink(p + "/ns/mnt")
	if err1 != nil || err2 != nil || own == theirs {
		return nspid, ""
	}
	return nspid, p + "/root"
}

// addDump notes that the process mapped the jitdump file path.
func (s *Session) addDump(pid uint32, path string) {
	j := s.jit(pid)
	root := ""
	if s.opts.Live {
		_, root = liveNamespace(pid)
	}
	paths := s.jitPaths(path, root)
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, d := range j.dumps {
		if d[len(d)-1] == paths[len(paths)-1] {
			return
		}
	}
	j.dumps = append(j.dumps, paths)
	j.loaded = false // read again, with it
}

// maxJITBytes bounds the bytes of JIT files (perf maps, jitdump files) a
// Session reads, over all its processes: each file is bounded by
// jitmap.MaxFileSize, and a system-wide recording may see many JITs.
// The budget counts each file's bytes (its text, which the names share)
// and its table (jitmap.EntryBytes a function), kept until the end: a
// file is read while any budget is left, so the most kept is the budget
// and one file more (jitmap.MaxFileSize and jitmap.MaxEntries' tables).
const maxJITBytes = 256 << 20

// load reads the process's jitdump files and perf map, once: the first
// readable path of each (see jitmap.ReadFile for what is refused), while
// the Session's budget (maxJITBytes) lasts; of the perf map, what the
// JIT appended since it was last read.
func (j *jitSyms) load() {
	if j.loaded {
		return
	}
	j.loaded = true
	j.budget.Add(j.bytes) // what an earlier load read is given back
	j.bytes = 0
	j.tables, j.read, j.errs, j.sizes, j.missed, j.cfis = nil, nil, nil, nil, nil, nil
	j.locs = map[uint64]*Loc{}
	for i := len(j.dumps) - 1; i >= 0; i-- {
		j.loadDump(j.dumps[i])
	}
	j.loadMap()
}

// loadDump reads a jitdump file, from the first readable of its paths,
// while the Session's budget lasts.
func (j *jitSyms) loadDump(paths []string) {
	var first error
	for _, p := range paths {
		if j.budget.Load() <= 0 {
			j.errs = append(j.errs, fmt.Errorf("%s: not read: %d bytes of JIT symbol files read already", p, maxJITBytes))
			return
		}
		data, err := jitmap.ReadFile(p)
		if err == nil {
			j.readBytes.Add(int64(len(data)))
			var t *jitmap.Table
			if t, err = jitmap.ParseJitdump(data); err == nil {
				j.took(p, t, int64(len(data)))
				return
			}
			err = fmt.Errorf("%s: %w", p, err)
		}
		if first == nil || !os.IsNotExist(err) {
			first = err
		}
	}
	if first != nil && !os.IsNotExist(first) {
		j.errs = append(j.errs, first)
	}
}

// loadMap reads the process's perf map: what the JIT appended since it
// was last read (jitmap.PerfMap), from the first readable path, while
// the Session's budget lasts.
func (j *jitSyms) loadMap() {
	j.mapBytes = 0
	var first error
	for _, p := range j.mapPaths {
		if j.budget.Load() <= 0 {
			j.perfMap = jitmap.PerfMap{}
			j.errs = append(j.errs, fmt.Errorf("%s: not read: %d bytes of JIT symbol files read already", p, maxJITBytes))
			return
		}
		t, n, err := j.perfMap.Read(p)
		j.readBytes.Add(n)
		if err == nil {
			j.mapBytes = j.took(p, t, j.perfMap.Bytes())
			return
		}
		if first == nil || !os.IsNotExist(err) {
			first = err
		}
	}
	j.perfMap = jitmap.PerfMap{} // gone: its entries are not kept
	if first != nil && !os.IsNotExist(first) {
		j.errs = append(j.errs, first)
	}
}

// took adds the table t of the file at path, size bytes of whose text
// its names share, to those the process's JIT code is named from, takes
// what they cost from the budget and returns it.
func (j *jitSyms) took(path string, t *jitmap.Table, size int64) int64 {
	cost := size + int64(t.Len())*jitmap.EntryBytes
	j.budget.Add(-cost)
	j.bytes += cost
	j.tables = append(j.tables, t)
	j.sizes = append(j.sizes, fileSize{path, size})
	note := ""
	if t.Truncated || t.Skipped > 0 {
		note = fmt.Sprintf(", %d entries not read", t.Skipped)
		if t.Truncated {
			note += ", truncated"
		}
	}
	j.read = append(j.read, fmt.Sprintf("%s (%d functions%s)", path, t.Len(), note))
	return cost
}

// resolve names the runtime address pc of the process's JIT code.
func (j *jitSyms) resolve(pc uint64) *Loc {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.named {
		// Walks may have read the files while the JIT was still writing
		// them (Python's stdio buffer reaches its jitdump file 4 KiB at a
		// time): names are read as the files are when naming starts.
		j.named = true
		if j.loaded && j.grown() {
			j.loaded = false
		}
	}
	j.load()
	if l, ok := j.locs[pc]; ok {
		return l
	}
	l := unknown
	for _, t := range j.tables {
		if sym, ok := t.Lookup(pc); ok {
			// A JIT's names carry no symbol versions: "@" is part of the name.
			// The name is copied: the table's names share the file's
			// text, which a Loc kept by a period's profile (a pprof
			// builder holds its Locs until the period ends) would keep
			// whole, one copy per read of the file (each tick's), where
			// the copies keep only the names named: a live profiler's
			// memory for a JIT is bounded by the functions its samples
			// were in, not by ticks times the size of a map that keeps
			// growing.
			name := strings.Clone(sym.Name)
			l = &Loc{Sym: name, Name: name, Short: name, Unversioned: name, Offset: pc - sym.Start}
			break
		}
	}
	j.locs[pc] = l
	return l
}

// refresh reads the process's JIT files again for a walk when one of
// those read has grown since (the JIT is still writing), and reports
// whether it did: once for each address that no function covered
// (missed), at most maxJITReloads times a period.
func (j *jitSyms) refresh(pc uint64) bool {
	if j.reloads >= maxJITReloads {
		return false
	}
	if _, ok := j.missed[pc]; ok {
		return false
	}
	if j.missed == nil || len(j.missed) >= maxJITMissed {
		j.missed = map[uint64]struct{}{}
	}
	j.missed[pc] = struct{}{}
	if !j.grown() {
		return false
	}
	j.reloads++
	j.loaded = false
	j.load()
	return true
}

// grown reports whether a file read has another size now.
func (j *jitSyms) grown() bool {
	for _, f := range j.sizes {
		if st, err := os.Lstat(f.path); err == nil && st.Size() != f.size {
			return true
		}
	}
	return false
}

// Lookup implements unwind.CFI for the process's JIT code (whose modules
// have no bias: pc is a runtime address): the rows of the unwinding data
// that its jitdump files give the function at pc (Python's -X perf_jit
// trampolines, V8's --perf-prof-unwinding-info), at the addresses perf
// inject gives them in the ELF file it writes for the function; else,
// in CPython's perf trampolines, their known rows (pyTrampRow). Other
// code is not covered: frame pointers unwind it.
func (j *jitSyms) Lookup(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool, error) {
	j.mu.Lock()
	var sym jitmap.Symbol
	var tab *cfi.Table
	if len(j.dumps) > 0 {
		j.load()
		var found bool
		sym, tab, found = j.unwinding(pc)
		if !found && j.refresh(pc) {
			sym, tab, _ = j.unwinding(pc)
		}
	}
	if tab == nil {
		cie, ok := j.pyTrampRow(ctx, pc, row)
		j.mu.Unlock()
		return cie, ok, nil
	}
	j.mu.Unlock()
	base := sym.Start - jitmap.UnwindTextAddr // runtime address = the table's + base
	f, err := tab.RowForPC(ctx, pc-base, row)
	if err != nil {
		if errors.Is(err, cfi.ErrNoFDE) {
			return nil, false, nil
		}
		return nil, false, err
	}
	// The row's range in runtime addresses, within the function: the
	// unwinder keeps rows for the addresses their range covers.
	start, end := row.Start+base, row.End+base
	if start < sym.Start || start > pc {
		start = sym.Start
	}
	if fe := sym.Start + max(sym.Size, 1); end > fe || end <= pc {
		end = max(fe, pc+1)
	}
	row.Start, row.End = start, end
	return f.CIE, true, nil
}

// unwinding returns the function at pc and the CFI table of its
// unwinding data (nil when it has none); found is false when no function
// covers pc.
func (j *jitSyms) unwinding(pc uint64) (sym jitmap.Symbol, tab *cfi.Table, found bool) {
	for _, t := range j.tables {
		s, u, ok := t.LookupUnwinding(pc)
		if !ok {
			if _, named := t.Lookup(pc); named {
				return s, nil, true
			}
			continue
		}
		k := jitCFIKey{u, s.Size}
		if tab = j.cfis[k]; tab == nil {
			addr := u.EHFrameAddr(s.Size)
			var err error
			tab, err = cfi.New(u.EHFrame, cfi.Options{Addr: addr, ByteOrder: u.Order, AddrSize: 8, Arch: j.arch,
				Hdr: u.EHFrameHdr, HdrAddr: addr + uint64(len(u.EHFrame))})
			if err != nil {
				return s, nil, true
			}
			if j.cfis == nil {
				j.cfis = map[jitCFIKey]*cfi.Table{}
			}
			j.cfis[k] = tab
		}
		return s, tab, true
	}
	return jitmap.Symbol{}, nil, false
}

// ForgetJIT drops what the Session read of JIT symbol files, so that a
// long recording cut into periods (a continuous profiler's) reads them
// again, with the code the JITs made since, when a frame in JIT code is
// next named: jitdump files whole, perf maps only what was appended
// since (each process's perf map read so far is kept: maps grow without
// end, and reading one whole every period would cost its size each
// time); and forgets the JIT symbols of processes that have exited,
// their perf maps with them. What Resolve returned stays valid. Call it
// between periods, when no frame is being named.
func (s *Session) ForgetJIT() {
	var kept int64
	for pid, j := range s.jits {
		j.mu.Lock()
		j.loaded, j.tables, j.read, j.errs = false, nil, nil, nil
		j.sizes, j.reloads, j.missed, j.cfis, j.named, j.pyTramps = nil, 0, nil, nil, false, nil
		j.locs = map[uint64]*Loc{}
		if s.procs[pid] == nil {
			j.perfMap, j.mapBytes = jitmap.PerfMap{}, 0
			delete(s.jits, pid)
		}
		j.bytes = j.mapBytes
		kept += j.bytes
		j.mu.Unlock()
	}
	// The budget is per period, less the perf maps kept: what a JIT of a
	// process that exited loads after this (for stacks of its last
	// period still to be named) is garbage with those stacks.
	s.jitBudget.Store(maxJITBytes - kept)
}

// JITBytesRead returns the bytes the Session has read of JIT symbol
// files (perf maps, jitdump files), for a profiler's statistics: a
// perf map is read a part at a time as it grows (see ForgetJIT).
func (s *Session) JITBytesRead() int64 { return s.jitRead.Load() }

package perfunwind

import (
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/cowseq"
	"github.com/sframekit/sframekit/jitmap"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/symbolize"
	"github.com/sframekit/sframekit/unwind"
)

// Options configure a Session.
type Options struct {
	// Arch is the recorded architecture: arch.AMD64 or arch.ARM64;
	// zero to take it, and the other fields left zero, from the
	// recording's header (OptionsFor) when Process reads it.
	Arch arch.Arch
	// SymFS is a directory that holds the recorded files under their
	// recorded paths (perf's --symfs): a copy of another machine's
	// files. Empty: the paths themselves.
	SymFS string
	// BuildIDDir is perf's build-ID cache, where perf record keeps a copy
	// of each file it saw (~/.debug): searched by build ID when the file
	// at its path is missing or is another build. Empty: $HOME/.debug
	// when Arch is zero too (OptionsFor, as sframe report), else none.
	BuildIDDir string
	// BuildIDs are the recorded build IDs, by file name (the recording's
	// BUILD_ID table); MMAP2 records that carry one override it.
	BuildIDs map[string][]byte
	// MaxDepth bounds the user frames of a sample
	// (unwind.DefaultMaxDepth when 0), and separately its kernel frames.
	MaxDepth int
	// Kallsyms is a kallsyms file (/proc/kallsyms) naming the kernel's
	// functions, when the recording is from the running kernel; empty
	// leaves kernel frames as addresses.
	Kallsyms string
	// SameKernel says the recording comes from the running kernel, whose
	// vDSO then stands for the recorded one when no build ID says
	// otherwise.
	SameKernel bool
	// SameMachine says the recording was made on this machine, so that
	// the inode numbers of its MMAP2 records are those of this machine's
	// files; RecordingEnd is when it ended (zero: the modification
	// time of the perf.data file Process reads, if a file). A mapped
	// file without a build ID is then refused when the file at its path now has another inode or
	// was modified after the recording: another build may be there, and
	// nothing else tells (see Session.Mmap).
	SameMachine  bool
	RecordingEnd time.Time
	// NoSFrameFromCFI turns off what the zero Options do, as sframe
	// report does: compile SFrame from the CFI of the files that have
	// none of their own, as unwind.CompileSFrame does, so that their
	// frames take the unwinder's SFrame path: for the functions the walks
	// go through, once they have taken their CFI a few hundred times,
	// again as new ones come (the whole of libc would cost 15 ms and
	// 8 MB, where a recording goes through a hundred of its functions).
	// The frames are the same either way; a live profiler whose walks
	// keep their CFI rows (sframe record) spends less without.
	NoSFrameFromCFI bool
	// Live says the recorded processes are running now (a live
	// profiler's): their JIT's perf map and jitdump files are read in
	// their own mount namespace (/proc/PID/root), and the perf map is
	// named with their PID in their PID namespace, as perf names it.
	Live bool
	// CallchainSource names, in WriteSummary, where the user frames of
	// samples without registers and stack come from: "the kernel's
	// callchain" when empty (a live profiler whose stacks a BPF program
	// walked says so).
	CallchainSource string
}

// OptionsFor returns the options for a recording with header h read on
// this machine: its architecture and build IDs, perf's build-ID cache in
// $HOME/.debug, and /proc/kallsyms when h says the recording is from the
// running kernel (same release and, when recorded, the same kernel build
// ID).
func OptionsFor(h *perfdata.Header) Options {
	o := Options{Arch: h.Machine(), BuildIDs: map[string][]byte{}}
	var kernelID []byte
	for _, b := range h.BuildIDs {
		switch {
		case b.Misc.CPUMode() == perfdata.MiscKernel && (b.Filename == "[kernel.kallsyms]" || b.Filename == "vmlinux"):
			kernelID = b.ID
		case b.Misc.CPUMode() == perfdata.MiscUser || b.Misc.CPUMode() == perfdata.MiscCPUModeUnknown:
			o.BuildIDs[b.Filename] = b.ID
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		o.BuildIDDir = filepath.Join(home, ".debug")
	}
	// A recording that does not name its machine (cut before its
	// features): as for the kernel, take it for this one's.
	host, _ := os.Hostname()
	o.SameMachine = h.Hostname == "" || h.Hostname == host
	switch rel := osRelease(); {
	case kernelID != nil:
		own := kernelBuildID()
		o.SameKernel = own != nil && sameBuildID(kernelID, own) && (h.OSRelease == "" || h.OSRelease == rel)
	case h.OSRelease != "":
		o.SameKernel = rel != "" && rel == h.OSRelease
	default:
		// A recording that does not say (cut before its features): as
		// perf, take it for this machine's.
		o.SameKernel = true
	}
	switch {
	case kernelID != nil && o.BuildIDDir != "" && fileExists(filepath.Join(o.BuildIDDir, "[kernel.kallsyms]", hex.EncodeToString(kernelID), "kallsyms")):
		// perf record's copy: the recorded kernel's, and a regular file,
		// read in milliseconds where /proc/kallsyms takes a tenth of a
		// second of kernel time.
		o.Kallsyms = filepath.Join(o.BuildIDDir, "[kernel.kallsyms]", hex.EncodeToString(kernelID), "kallsyms")
	case o.SameKernel:
		o.Kallsyms = "/proc/kallsyms"
	}
	return o
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Session follows the processes of a recording, from its MMAP, COMM, FORK
// and EXIT records (or a live profiler's equivalents), and unwinds their
// samples: per process an unwind.Unwinder holding its executable
// mappings, each file's tables loaded once for every process (an
// unwind.Cache) and its symbols once (a Resolver). A Session is not safe
// for concurrent use.
type Session struct {
	opts       Options
	buildIDDir string
	sameKernel bool

	cache   *unwind.Cache
	cfis    map[unwind.CFI]*cfiCache
	files   map[fileKey]*File
	procs   map[uint32]*process
	threads map[uint32]*thread
	jits    map[uint32]*jitSyms // by process
	gone    map[uint32]*process // gone from /proc at the last Sweep (forgetGone)
	// exited are the threads whose EXIT records came, oldest first,
	// still known for the samples taken after (exitGrace).
	exited     []exitedThread
	exitedHead int // s.exited[:exitedHead] are forgotten
	// jitBudget is what may still be read of JIT files (maxJITBytes);
	// jitRead counts the bytes read of them (JITBytesRead).
	jitBudget atomic.Int64
	jitRead   atomic.Int64

	adopted bool
	// The kernel's symbols load in the background from the start: a
	// sample that needs them waits for kernDone.
	kernStarted bool
	kernDone    chan struct{}
	kern        *kernelSyms
	kernErr     error
	kmaps       map[string]*Mapping
	kernPCs     map[uint64]*Mapping // kernel addresses seen, and their mappings

	genDue bool // a cfiCache has SFrame to compile (compileDue)

	// noCallGraph are the events Process saw samples of without a call
	// graph, by index (nil for the others): the summary names them.
	noCallGraph []*perfdata.Attr

	// depth is what the summary needs to say which stack copy would
	// have held the walks that ended where theirs did.
	depth stackDepths

	// liveMaps is /proc/PID/maps of the recorded processes that still
	// ran when openMapped looked for a file in them (nil: not running
	// or not readable), read once per process.
	liveMaps map[uint32][]arch.Mapping

	// Scratch reused by every sample.
	ctx     unwind.Context
	mem     unwind.StackMemory
	frames  []unwind.Frame
	touched byte // what prefetch loaded, so that its loads are kept

	// The samples lost by LOST records and by LOST_SAMPLES ones: two
	// counts of the same losses (Record).
	lostRecs, lostSamples uint64
	// readLast is each counter's value at the last sample that read it,
	// readScratch the changes of a sample's (readChanges).
	readLast    map[readKey]uint64
	readScratch []readChange

	// Stats counts what the samples gave.
	Stats Stats
}

// thread is what a Session knows of a thread: its name and process.
type thread struct {
	comm   string
	pid    uint32
	exited bool // its EXIT came; known for the samples after (ExitAt)
}

// NewSession returns a Session for a recording of opts.Arch (or, when
// zero, of the architecture the recording's header gives Process).
func NewSession(opts Options) (*Session, error) {
	switch opts.Arch {
	case arch.Unknown, arch.AMD64, arch.ARM64:
	default:
		return nil, fmt.Errorf("unsupported architecture %v", opts.Arch)
	}
	s := &Session{
		opts:       opts,
		buildIDDir: opts.BuildIDDir,
		sameKernel: opts.SameKernel,
		cache:      unwind.NewCache(),
		cfis:       map[unwind.CFI]*cfiCache{},
		files:      map[fileKey]*File{},
		procs:      map[uint32]*process{},
		threads:    map[uint32]*thread{},
		jits:       map[uint32]*jitSyms{},
		kmaps:      map[string]*Mapping{},
		kernPCs:    map[uint64]*Mapping{},
	}
	s.cache.Options.DebugDirs = s.debugDirs()
	s.Stats.StopWhere = map[StopPlace]uint64{}
	s.Stats.IPOnlyEvents = map[int]uint64{}
	s.jitBudget.Store(maxJITBytes)
	if opts.Arch != 0 {
		s.startKernel()
	}
	return s, nil
}

// debugDirs are the roots searched for the separate debug files of the
// recorded files (their symbols and .debug_frame): the recording
// machine's, under Options.SymFS, first.
func (s *Session) debugDirs() []string {
	dirs := []string{symbolize.DefaultDebugDir}
	if s.opts.SymFS != "" {
		dirs = append([]string{filepath.Join(s.opts.SymFS, symbolize.DefaultDebugDir)}, dirs...)
	}
	return dirs
}

// adopt completes options left zero from the recording's header h
// (OptionsFor), once, before the first record that uses them. It fails for
// a recording of an architecture the unwinder does not support.
func (s *Session) adopt(h *perfdata.Header) error {
	if s.adopted {
		return nil
	}
	s.adopted = true
	if s.opts.Arch != 0 {
		return nil
	}
	o := OptionsFor(h)
	switch o.Arch {
	case arch.AMD64, arch.ARM64:
	case arch.Unknown:
		if h.Arch != "" {
			return fmt.Errorf("recorded on %s, which this unwinder does not support", h.Arch)
		}
		o.Arch = arch.Host() // a pipe without its features: recorded here
	default:
		return fmt.Errorf("recorded on %s, which this unwinder does not support", h.Arch)
	}
	s.opts.Arch = o.Arch
	if s.opts.BuildIDs == nil {
		s.opts.BuildIDs = o.BuildIDs
	}
	if s.opts.BuildIDDir == "" {
		s.opts.BuildIDDir, s.buildIDDir = o.BuildIDDir, o.BuildIDDir
	}
	if s.opts.Kallsyms == "" {
		s.opts.Kallsyms = o.Kallsyms
	}
	s.opts.SameKernel = s.opts.SameKernel || o.SameKernel
	s.opts.SameMachine = s.opts.SameMachine || o.SameMachine
	s.sameKernel = s.opts.SameKernel
	s.startKernel()
	return nil
}

// Close releases the files the Session opened.
func (s *Session) Close() error {
	if s.kernStarted {
		<-s.kernDone
		s.kern.close()
	}
	for _, f := range s.files {
		if f.close != nil {
			f.close()
			f.close = nil
		}
	}
	return nil
}

// Files returns the files the recording's mappings named, sorted by name:
// each found (Path) or not (Err).
func (s *Session) Files() []*File {
	out := make([]*File, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// file returns the File of name with build ID id, or without one with
// device and inode fid (zero: not recorded), finding it once; at is
// where a live process maps it (nil: unknown), for the files its path
// does not give.
func (s *Session) file(name string, id []byte, fid fileID, at *liveMapping) *File {
	recID := id // the MMAP record's own: a running process's file must have it (openMapped)
	fromTable := false
	if len(id) == 0 {
		id = s.opts.BuildIDs[name]
		fromTable = len(id) > 0
	}
	k := fileKey{name: name, buildID: string(id)}
	if len(id) == 0 || fromTable && s.opts.SameMachine {
		// perf record reads the table's build IDs from the paths when
		// it ends: a mapping of another inode may be of another build.
		k.fileID = fid
	}
	lookup := name
	deleted := strings.HasSuffix(name, " (deleted)")
	if deleted {
		lookup = strings.TrimSuffix(name, " (deleted)")
	}
	if f, ok := s.files[k]; ok {
		if f.Path == "" && !s.opts.Live {
			// Not found for the processes mapping it before, which
			// may have exited: this one may still run.
			if lf := s.openMapped(name, lookup, deleted, recID, fid, at); lf != nil {
				s.files[k] = lf
				return lf
			}
		}
		return f
	}
	var f *File
	if s.opts.Live && s.opts.SymFS == "" && name != "[vdso]" {
		// The process runs now: read the very file it mapped.
		f = s.openLive(name, lookup, deleted, fid, nil, at, false)
	} else {
		if deleted && len(id) == 0 {
			// The file at the path now is not the one that was mapped.
			f = &File{Name: name, Err: fmt.Errorf("deleted while mapped, and no build ID recorded"), locs: map[uint64]*Loc{}}
		} else {
			f = s.openFile(lookup, id, k.ino, fromTable)
			f.Name = name
		}
		if f.Path == "" {
			if lf := s.openMapped(name, lookup, deleted, recID, fid, at); lf != nil {
				f = lf
			}
		}
	}
	s.files[k] = f
	return f
}

// Mapping is one mapping of a process: a range of a file, anonymous
// memory, or a special area ([vdso], [stack]); or, for kernel frames, the
// kernel or one of its modules. Mappings never change once made: a
// mapping cut by a newer one is replaced by new ones.
type Mapping struct {
	Start, End uint64 // runtime addresses [Start, End)
	Pgoff      uint64 // file offset mapped at Start
	// Name is the file name as recorded, "[vdso]", "//anon", "[stack]",
	// ..., and for kernel frames "[kernel.kallsyms]" or "[MODULE]"; as
	// perf names them, executable anonymous memory (JIT code) is named
	// after the process's perf map, "/tmp/perf-PID.map".
	Name   string
	Exec   bool
	Kernel bool
	// File is the object found for Name, nil for anonymous memory and the
	// kernel (its Path is "" when it was not found).
	File *File
	// Bias converts the file's addresses to runtime ones (runtime = ELF +
	// Bias), when File was found.
	Bias uint64

	anon   bool // addresses are shown as they are, not as file offsets
	module *unwind.Module
	jit    *jitSyms // names JIT code in anonymous executable memory
}

// PerfAddr returns the address perf script prints for the runtime address
// pc in m: the file offset for file mappings, pc itself for anonymous
// memory and the kernel.
func (m *Mapping) PerfAddr(pc uint64) uint64 {
	if m == nil || m.anon || m.Kernel {
		return pc
	}
	return pc - m.Start + m.Pgoff
}

// ELFAddr returns the address in the file's own address space (symbols,
// DWARF) of the runtime address pc.
func (m *Mapping) ELFAddr(pc uint64) uint64 { return pc - m.Bias }

// BuildID returns the build ID of the mapped file, recorded or its own.
func (m *Mapping) BuildID() []byte {
	if m.File == nil {
		return nil
	}
	return m.File.BuildID
}

// BuildIDString returns BuildID in hexadecimal, or "".
func (m *Mapping) BuildIDString() string { return hex.EncodeToString(m.BuildID()) }

// process is a process: its threads and its address space.
type process struct {
	pid     uint32
	sp      *space
	last    *Mapping // found last by find: frames come in runs of one file
	mem     procMemory
	threads map[uint32]struct{}
	// exec is the name its last exec gave it (COMM record), inherited
	// by its forks: see Stack.Exec.
	exec string
}

// space is an address space: the mappings of a process, sorted by Start
// and not overlapping, and the unwinder over their modules. A forked
// process shares its parent's until one of them changes it (copy on
// write: own); so does the unwinder's module set after that, and the
// mappings, a persistent sequence (cowseq), share all but a few KiB of
// their memory with the sequence they were changed from. A fork thus
// costs O(1), and a mapping added or cut O(64 + √(n/64)) in a process
// of n mappings, whatever the processes forked before: a chain of forks
// of a process with thousands of mappings costs no copy of them, and
// 200,000 mappings, in any order, 0.8 GB of allocations in all (not the
// 160 GB of moves of one array). A process that changes its
// forked address space keeps those few KiB of its own.
type space struct {
	maps *cowseq.Seq[*Mapping]
	u    *unwind.Unwinder
	refs int // processes using it; more than needed costs an O(1) copy, never fewer
}

func (s *Session) newProcess(pid uint32) *process {
	if s.opts.Arch == 0 {
		// Records given before any header said otherwise: this
		// machine's (a live profiler's).
		s.opts.Arch = arch.Host()
	}
	u, _ := unwind.New(s.opts.Arch, nil) // the architecture was checked
	u.MaxDepth = s.opts.MaxDepth
	p := &process{pid: pid, sp: &space{u: u, refs: 1}, threads: map[uint32]struct{}{}}
	p.mem.p = p
	return p
}

// setProc makes p the process pid, forgetting the one before.
func (s *Session) setProc(pid uint32, p *process) {
	if old := s.procs[pid]; old != nil && old != p {
		old.sp.refs--
	}
	s.procs[pid] = p
}

// proc returns the process pid, creating it.
func (s *Session) proc(pid uint32) *process {
	p := s.procs[pid]
	if p == nil {
		p = s.newProcess(pid)
		s.procs[pid] = p
	}
	return p
}

// own returns p's address space, copied first if p shares it.
func (p *process) own() *space {
	if sp := p.sp; sp.refs > 1 {
		sp.refs--
		p.sp = &space{maps: sp.maps, u: sp.u.Clone(), refs: 1}
	}
	return p.sp
}

// find returns the mapping containing addr, or nil.
func (p *process) find(addr uint64) *Mapping {
	if m := p.last; m != nil && addr-m.Start < m.End-m.Start {
		return m
	}
	if m := p.sp.maps.Floor(addr); m != nil && addr < (*m).End {
		p.last = *m
		return *m
	}
	return nil
}

// insert adds m, cutting the mappings it overlaps as the kernel does.
func (p *process) insert(m *Mapping) {
	sp := p.own()
	// The mappings m overlaps: those starting in it, and the one before
	// if it reaches into it.
	lo := m.Start
	if f := sp.maps.Floor(m.Start); f != nil && (*f).End > m.Start {
		lo = (*f).Start
	}
	var head, tail *Mapping
	for _, po := range sp.maps.From(lo) {
		o := *po
		if o.Start >= m.End {
			break
		}
		if o.module != nil {
			sp.u.RemoveModule(o.module)
		}
		if o.Start < m.Start {
			head = cut(sp, o, o.Start, m.Start)
		}
		if o.End > m.End {
			tail = cut(sp, o, m.End, o.End)
		}
	}
	keys := make([]uint64, 0, 3)
	ins := make([]*Mapping, 0, 3)
	for _, n := range []*Mapping{head, m, tail} {
		if n != nil {
			keys, ins = append(keys, n.Start), append(ins, n)
		}
	}
	sp.maps = sp.maps.Replace(lo, m.End-1, nil, keys, ins)
	p.last = nil
	if m.module != nil {
		sp.u.AddModule(m.module)
	}
}

// cut returns the part [start, end) of o, with its own module, added to
// sp's unwinder.
func cut(sp *space, o *Mapping, start, end uint64) *Mapping {
	n := *o
	n.Start, n.End = start, end
	n.Pgoff = o.Pgoff + (start - o.Start)
	if o.module != nil {
		nm := *o.module // shares the tables
		nm.Start, nm.End = start, end
		n.module = &nm
		sp.u.AddModule(n.module)
	}
	return &n
}

// clone returns p's child pid, which shares p's address space (see
// space).
func (s *Session) clone(p *process, pid uint32) *process {
	c := &process{pid: pid, sp: p.sp, threads: map[uint32]struct{}{}, exec: p.exec}
	c.mem.p = c
	p.sp.refs++
	return c
}

// stackEnd returns the end of the stack that smp's copy, from sp up, was
// taken from: the end of the mapping holding sp when the recording named
// it (perf record -d), or else, when the copy was cut short (it fills
// the size asked for), the start of the next mapping above sp, as the
// stack goes on up to there. A walk that reads that part of the stack
// then ends where the copy does, at once (StackMemory), rather than
// asking the mapped files for it and trying every other method in turn.
// 0 when neither is known: reads past the copy fail as unmapped.
func (p *process) stackEnd(sp uint64, smp *Sample) uint64 {
	m := p.find(sp)
	switch {
	case m != nil && !m.Exec:
		return m.End
	case m != nil || smp.StackSize == 0 || uint64(len(smp.Stack)) < smp.StackSize:
		return 0
	}
	// Stacks are anonymous memory, which a recording names only with
	// data mappings: up to the next mapping it knows is the stack's.
	for start := range p.sp.maps.From(sp + 1) {
		return start
	}
	return ^uint64(0)
}

// procMemory reads a process's memory outside the stack copy, for the
// unwinder (code, to recognize signal trampolines; what CFI expressions
// read): the mapped files' bytes.
type procMemory struct{ p *process }

// ReadAt implements arch.Memory.
func (m *procMemory) ReadAt(b []byte, addr int64) (int, error) {
	a := uint64(addr)
	mp := m.p.find(a)
	if mp == nil || mp.File == nil || mp.File.r == nil || uint64(len(b)) > mp.End-a {
		return 0, fmt.Errorf("reading %d bytes at %#x: %w", len(b), a, arch.ErrUnmapped)
	}
	n, err := mp.File.r.ReadAt(b, int64(a-mp.Start+mp.Pgoff))
	if n < len(b) {
		if err == nil {
			err = arch.ErrUnmapped
		}
		return n, fmt.Errorf("reading %d bytes at %#x: %w", len(b), a, err)
	}
	return n, nil
}

// Mmap records a mapping of process pid: length bytes at start, of the
// file name from offset pgoff (anonymous memory and special areas have
// names such as "//anon" and "[stack]"); exec for executable mappings;
// buildID when the record carries the file's (else the recording's
// table, Options.BuildIDs, is used). It replaces the parts of older
// mappings it overlaps. Kernel mappings (pid -1) are ignored: kernel
// frames are named from kallsyms.
func (s *Session) Mmap(pid, tid uint32, start, length, pgoff uint64, name string, exec bool, buildID []byte) {
	s.mmap(pid, tid, start, length, pgoff, name, exec, buildID, fileID{})
}

// mmap is Mmap with the device and inode an MMAP2 record gives (zero:
// none), which tell, for a file without a build ID, whether the file at
// the path is still the one mapped (see Options.SameMachine), and two
// files at one path in two mount namespaces apart.
func (s *Session) mmap(pid, tid uint32, start, length, pgoff uint64, name string, exec bool, buildID []byte, fid fileID) {
	if pid == ^uint32(0) || length == 0 || start+length < start {
		return
	}
	p := s.proc(pid)
	p.threads[tid] = struct{}{}
	m := &Mapping{Start: start, End: start + length, Pgoff: pgoff, Name: name, Exec: exec}
	m.anon = isAnon(name)
	dump := jitmap.IsJitdump(name)
	switch {
	case dump:
		// A JIT's jitdump file, mapped for perf to see: read for the
		// names of its code, not as an object file.
		s.addDump(pid, name)
	case exec && perfMapName(name):
		m.jit = s.jit(pid)
		m.Name, m.anon = m.jit.name, true
		m.jit.newCode()
	}
	if exec {
		// Only code needs its file: data mappings are named, not read.
		if !m.anon && !dump {
			m.File = s.file(name, buildID, fid, &liveMapping{pid, start, start + length})
			if m.File.Path != "" {
				m.Bias = m.File.bias(start, pgoff)
			}
		}
		m.module = s.module(m)
	}
	p.insert(m)
}

// MappingOf returns the mapping that MMAP record r of an executable
// mapping would add to its process (its file found as the session finds
// it, once and shared, and its load bias), without adding it anywhere:
// for a mirror of the processes' mappings kept by an in-kernel unwinder
// (package bpfunwind), which applies the records as soon as they are
// read, while the session applies them in time order.
func (s *Session) MappingOf(r *perfdata.Mmap) *Mapping {
	pid, start, length, pgoff, name := r.Pid, r.Addr, r.Len, r.Pgoff, string(r.Filename)
	var buildID []byte
	if r.HasBuildID {
		buildID = r.BuildID
	}
	m := &Mapping{Start: start, End: start + length, Pgoff: pgoff, Name: name, Exec: true}
	m.anon = isAnon(name)
	if !m.anon {
		m.File = s.file(name, buildID, mmapFileID(r), &liveMapping{pid, start, start + length})
		if m.File.Path != "" {
			m.Bias = m.File.bias(start, pgoff)
		}
	}
	return m
}

// module returns the unwinder module of the executable mapping m: its
// file's tables when found (loaded once per file), else none (the
// unwinder then follows frame pointers through it).
func (s *Session) module(m *Mapping) *unwind.Module {
	f := m.File
	if m.jit != nil {
		// JIT code: the unwinding data of its jitdump files, if any.
		return &unwind.Module{Name: m.Name, Start: m.Start, End: m.End, CFI: m.jit}
	}
	if f == nil || f.Path == "" {
		return &unwind.Module{Name: m.Name, Start: m.Start, End: m.End}
	}
	if f.image != nil {
		// The vDSO, read from memory: small, loaded for each mapping.
		if ef, err := elf.NewFile(bytesReaderAt(f.image)); err == nil {
			t := unwind.LoadTables(ef)
			mod := &unwind.Module{Name: m.Name, File: f.key, Start: m.Start, End: m.End, Bias: m.Bias, SFrame: t.SFrame}
			if c := t.CFITable(); c != nil {
				mod.CFI = c
			}
			return mod
		}
		return &unwind.Module{Name: m.Name, Start: m.Start, End: m.End}
	}
	mods := s.cache.Modules([]arch.Module{{Path: f.Path, File: f.Path, Start: m.Start, End: m.End, Bias: m.Bias, HasBias: true}}, nil)
	mod := mods[0]
	mod.Name = m.Name
	if c := s.cachedCFI(mod.CFI); c != nil {
		mod.CFI = c
		if !s.opts.NoSFrameFromCFI && mod.SFrame == nil {
			c.wantGen()
			mod.SFrame, mod.SFrameGen = c.gen, c.stats
		}
	}
	return mod
}

// Mapped reports whether process pid is known and has a mapping at the
// runtime address addr: whether a sample there can be unwound now. A
// live profiler reads the records of different CPUs out of order, and
// may read a new process's first samples before the FORK, COMM or MMAP
// records that describe it: it keeps such samples until it has read the
// records written before them.
func (s *Session) Mapped(pid uint32, addr uint64) bool {
	p := s.procs[pid]
	return p != nil && p.find(addr) != nil
}

// Known reports whether the session knows process pid (it has not
// exited, or its last thread's exit was not read yet).
func (s *Session) Known(pid uint32) bool { return s.procs[pid] != nil }

// KnownThread reports whether the session knows thread tid: a FORK or
// COMM record (or SeedProcess) named it, and its exit was not read. A
// live profiler may read a new thread's first samples before the FORK
// record that names it, written on another CPU: such a sample must wait
// for it, or its stack is named ":TID".
func (s *Session) KnownThread(tid uint32) bool { return s.threads[tid] != nil }

// Exec returns the name the last exec of process pid gave it in the
// recording, as its samples' Stack.Exec has it now: "" when the
// recording saw none, or knows no such process.
func (s *Session) Exec(pid uint32) string {
	if p := s.procs[pid]; p != nil {
		return p.exec
	}
	return ""
}

// Mappings returns the mappings process pid has now, sorted by Start and
// disjoint, or nil for a process the session does not know (never seen,
// or forgotten at its exit): what an in-kernel unwinder (package
// bpfunwind) mirrors. The slice is new; the mappings are the session's
// and must not be modified.
func (s *Session) Mappings(pid uint32) []*Mapping {
	p := s.procs[pid]
	if p == nil {
		return nil
	}
	ms := make([]*Mapping, 0, p.sp.maps.Len())
	for _, m := range p.sp.maps.All() {
		ms = append(ms, *m)
	}
	return ms
}

// Comm records the name of thread tid of process pid; exec says the name
// changed because the process executed a new program, whose address
// space replaces the old one.
func (s *Session) Comm(pid, tid uint32, comm string, exec bool) {
	th := s.threads[tid]
	if th == nil {
		th = &thread{}
		s.threads[tid] = th
	}
	th.comm, th.pid = comm, pid
	p := s.proc(pid)
	p.threads[tid] = struct{}{}
	if exec {
		q := s.newProcess(pid)
		q.threads, q.exec = p.threads, comm
		s.setProc(pid, q)
	}
}

// Fork records the creation of thread tid of process pid by thread ptid
// of process ppid: a new process (pid != ppid) starts with a copy of its
// parent's mappings; a thread takes its creator's name.
func (s *Session) Fork(pid, ppid, tid, ptid uint32) {
	name := fmt.Sprintf(":%d", int32(tid))
	if pt := s.threads[ptid]; pt != nil {
		name = pt.comm
	}
	s.threads[tid] = &thread{comm: name, pid: pid}
	if pid != ppid {
		if parent := s.procs[ppid]; parent != nil {
			s.setProc(pid, s.clone(parent, pid))
		} else {
			s.setProc(pid, s.newProcess(pid))
		}
	}
	s.proc(pid).threads[tid] = struct{}{}
}

// exitGrace is how long, in the recording's time, an exited thread and
// its process stay known after their EXIT record: a -a recording has
// samples of a thread after its EXIT (the kernel's exit path, tearing
// down its memory), which perf names and places as the thread's (it
// keeps exited threads until their id is reused). A second of them is
// at most the exits of a second: kept so, memory stays bounded however
// long the recording.
const exitGrace = uint64(time.Second)

// exitedThread is a thread that exited at time at.
type exitedThread struct {
	pid, tid uint32
	t        *thread
	at       uint64
}

// ExitAt records the end of thread tid of process pid at time at (an
// EXIT record's), after which the thread and its process stay known for
// exitGrace of the recording's time, unless a FORK reuses the ids, for
// the samples of its exit path taken after the record; it forgets those
// that exited longer ago. Each exited thread is queued once and leaves
// the queue once: the work is constant per record, on average.
func (s *Session) ExitAt(pid, tid uint32, at uint64) {
	s.forgetExited(at)
	t := s.threads[tid]
	if t == nil || t.pid != pid {
		s.Exit(pid, tid)
		return
	}
	t.exited = true
	s.exited = append(s.exited, exitedThread{pid, tid, t, at})
}

// Alive reports whether process pid has a known thread that has not
// exited (ExitAt). It looks at each of the process's threads.
func (s *Session) Alive(pid uint32) bool {
	p := s.procs[pid]
	if p == nil {
		return false
	}
	for id := range p.threads {
		if th := s.threads[id]; th != nil && th.pid == pid && !th.exited {
			return true
		}
	}
	return false
}

// forgetExited forgets the exited threads (and processes) whose grace
// ends before time now (all of them for the maximum time), unless a FORK
// reused their ids since.
func (s *Session) forgetExited(now uint64) {
	i := s.exitedHead
	for ; i < len(s.exited); i++ {
		e := &s.exited[i]
		if now != ^uint64(0) && e.at+exitGrace > now {
			break
		}
		if s.threads[e.tid] == e.t {
			s.Exit(e.pid, e.tid)
		}
	}
	s.exitedHead = i
	if i > len(s.exited)/2 {
		// The forgotten half leaves: each entry moves at most once
		// for each time the queue halves.
		n := copy(s.exited, s.exited[i:])
		clear(s.exited[n:])
		s.exited, s.exitedHead = s.exited[:n], 0
	}
}

// Exit records the end of thread tid of process pid. A process whose
// known threads have all exited is forgotten, so that a long recording of
// many short processes does not accumulate them.
func (s *Session) Exit(pid, tid uint32) {
	delete(s.threads, tid)
	p := s.procs[pid]
	if p == nil {
		return
	}
	delete(p.threads, tid)
	if len(p.threads) == 0 {
		p.sp.refs--
		delete(s.procs, pid)
	}
}

// Record applies a recording's MMAP, MMAP2, COMM, FORK and EXIT records
// (others are ignored) and counts the samples that LOST and LOST_SAMPLES
// ones say were lost (once: Stats.Lost). It reports
// whether the record was one of those.
func (s *Session) Record(rec *perfdata.Record) bool {
	switch rec.Type {
	case perfdata.RecordMmap, perfdata.RecordMmap2:
		if m := rec.Mmap(); m != nil {
			var id []byte
			if m.HasBuildID {
				id = m.BuildID
			}
			s.mmap(m.Pid, m.Tid, m.Addr, m.Len, m.Pgoff, string(m.Filename), m.Executable, id, mmapFileID(m))
		}
	case perfdata.RecordComm:
		if c := rec.Comm(); c != nil {
			s.Comm(c.Pid, c.Tid, string(c.Comm), c.Exec)
		}
	case perfdata.RecordFork:
		if t := rec.Task(); t != nil {
			s.Fork(t.Pid, t.Ppid, t.Tid, t.Ptid)
		}
	case perfdata.RecordExit:
		if t := rec.Task(); t != nil {
			s.ExitAt(t.Pid, t.Tid, t.Time)
		}
	case perfdata.RecordLost, perfdata.RecordLostSamples:
		// perf record (on kernels of PERF_FORMAT_LOST, 6.0 on) ends a
		// recording with LOST_SAMPLES, each event's count of what the
		// kernel lost, the same losses as its LOST records told as they
		// happened: summed, each was counted twice.
		if l := rec.Lost(); l != nil {
			if rec.Type == perfdata.RecordLost {
				s.lostRecs += l.Lost
			} else {
				s.lostSamples += l.Lost
			}
			s.Stats.Lost = max(s.lostRecs, s.lostSamples)
		}
	default:
		return false
	}
	return true
}

// ThreadName returns the name of thread tid, as perf shows it: its last
// COMM, its creator's, "swapper" for the idle task (0, which no record
// names: a system-wide recording's idle time), or ":TID".
func (s *Session) ThreadName(tid uint32) string {
	if th := s.threads[tid]; th != nil {
		return th.comm
	}
	if tid == 0 {
		return "swapper"
	}
	return fmt.Sprintf(":%d", int32(tid)) // signed, as perf prints a pid_t (-1)
}

// startKernel starts loading the kernel's symbols, once.
func (s *Session) startKernel() {
	if s.kernStarted {
		return
	}
	s.kernStarted = true
	s.kernDone = make(chan struct{})
	path := s.opts.Kallsyms
	go func() {
		defer close(s.kernDone)
		if path != "" {
			s.kern, s.kernErr = loadKallsyms(path)
		}
	}()
}

// kernelSyms returns the kernel's symbols, waiting for them to load; nil
// when there are none.
func (s *Session) kernelSyms() *kernelSyms {
	s.startKernel()
	<-s.kernDone
	return s.kern
}

// KernelErr says why kernel frames could not be named, if they could not.
func (s *Session) KernelErr() error {
	s.kernelSyms()
	return s.kernErr
}

// kernelMapping returns the pseudo-mapping of the kernel module mod ("" for
// the kernel itself).
func (s *Session) kernelMapping(mod string) *Mapping {
	m := s.kmaps[mod]
	if m == nil {
		name := "[kernel.kallsyms]"
		if mod != "" {
			name = "[" + mod + "]"
		}
		m = &Mapping{Name: name, Kernel: true, Exec: true}
		s.kmaps[mod] = m
	}
	return m
}

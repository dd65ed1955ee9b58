package perfunwind

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"github.com/sframekit/sframekit/unwind"
)

// maxNames bounds the Resolver's demangled names kept between sweeps:
// past it they are dropped (and demangled again when met), so that names
// of programs long gone do not accumulate.
const maxNames = 1 << 16

// Sweep forgets what the session keeps of files that no process maps any
// more: the files (and their open descriptors), their unwind tables in
// the session's unwind.Cache, the CFI rows and SFrame compiled for them,
// and what r (the session's Resolver, or nil) loaded to name them (their
// symbol tables, PLT names). A live profiler that runs for days calls it
// now and then (sframe agent, once a period), so that what programs that
// come and go (builds, tests, short-lived tools) leave behind does not
// pile up; the files of running processes stay, with all their caches.
// In a live session it also forgets the processes gone from /proc whose
// exits it missed (forgetGone), and their files with the others.
// Mappings already handed out stay usable. The walks' own caches
// (unwind.Context.RetainCFI) keep the rows of files still mapped only.
// Stats.StopWhere forgets the
// places in mappings that no process has any more: keyed by the
// mapping's name, it gained one for each program of a path of its own
// (a build's test binaries, a JIT's /tmp/perf-PID.map) whose walks ended
// early, for as long as the agent ran; with Sweep it holds at most the
// names of the mappings of running processes, and "no mapping". It
// returns the number of files forgotten.
func (s *Session) Sweep(r *Resolver) int {
	s.forgetExited(^uint64(0))
	s.forgetGone()
	live := map[*File]bool{}
	liveCFI, liveMods := map[unwind.CFI]bool{}, map[unwind.CFI]bool{}
	names := map[string]bool{}
	for _, p := range s.procs {
		for _, mp := range p.sp.maps.All() {
			m := *mp
			names[m.Name] = true
			if m.File != nil {
				live[m.File] = true
			}
			if m.module != nil && m.module.CFI != nil {
				liveMods[m.module.CFI] = true
				if c, ok := m.module.CFI.(*cfiCache); ok {
					liveCFI[c.t] = true
				}
			}
		}
	}
	paths, keys := map[string]bool{}, map[string]bool{}
	n := 0
	for k, f := range s.files {
		if !live[f] {
			delete(s.files, k)
			if f.close != nil {
				f.close()
				f.close, f.r = nil, nil
			}
			n++
			continue
		}
		paths[f.Path] = true
		keys[f.key] = true
	}
	s.cache.Retain(func(path string) bool { return paths[path] })
	for t := range s.cfis {
		if !liveCFI[t] {
			delete(s.cfis, t)
		}
	}
	// The walks' context keeps rows per module CFI, and with them the
	// tables; the last walk's frames, their modules.
	s.ctx.RetainCFI(func(t unwind.CFI) bool { return liveMods[t] })
	s.frames = nil
	for p := range s.Stats.StopWhere {
		if p.Module != "" && !names[p.Module] {
			delete(s.Stats.StopWhere, p)
		}
	}
	if r != nil {
		r.sym.Retain(func(key string) bool { return keys[key] })
		for f := range r.plts {
			if !live[f] {
				delete(r.plts, f)
			}
		}
		if len(r.names) > maxNames {
			clear(r.names)
		}
	}
	return n
}

// forgetGone forgets, in a live session (Options.Live), the processes
// that were gone from /proc at this Sweep and the one before: those whose
// EXIT records were lost (the rings overflowed: a burst of short-lived
// processes loses thousands) stayed known until their PID was reused,
// keeping their threads, mappings and, through them, their files'
// tables and symbols; with kernel.pid_max at 4 million, for days. The
// sweep before gives their last records time to be read: a process that
// exited just now is forgotten at its EXIT.
func (s *Session) forgetGone() {
	if !s.opts.Live {
		return
	}
	var next map[uint32]*process
	for pid, p := range s.procs {
		if _, err := os.Stat("/proc/" + strconv.FormatUint(uint64(pid), 10)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if s.gone[pid] != p {
			if next == nil {
				next = map[uint32]*process{}
			}
			next[pid] = p
			continue
		}
		for tid := range p.threads {
			if th := s.threads[tid]; th != nil && th.pid == pid {
				delete(s.threads, tid)
			}
		}
		p.sp.refs--
		delete(s.procs, pid)
	}
	s.gone = next
}

// Sizes are what a Session keeps, for a long-running caller to watch
// (sframe agent's /healthz).
type Sizes struct {
	Processes int `json:"processes"` // known, not exited
	Threads   int `json:"threads"`
	Files     int `json:"files"`      // found for mappings (Sweep forgets those unmapped)
	CFITables int `json:"cfi_tables"` // with cached rows
}

// Sizes returns what s keeps now.
func (s *Session) Sizes() Sizes {
	return Sizes{Processes: len(s.procs), Threads: len(s.threads), Files: len(s.files), CFITables: len(s.cfis)}
}

// DropTables lets go of every file's unwind tables and of what was
// cached of them (CFI rows, SFrame compiled from CFI, the walker's own
// rows), in the mappings of the session's processes and in maps (those
// the caller still holds, of processes that exited), for a caller that
// is done unwinding and goes on to name the frames, which needs the
// mappings and files only. sframe record calls it between the two: the
// tables were most of what was live then (a C++ compilation: 7 of 10
// MB), and a collection after it hands their memory to what naming
// allocates, rather than each page of that being a fresh page fault.
// Stacks unwound after it follow frame pointers through the mappings
// known before it; a mapping added after it has its tables loaded again.
func (s *Session) DropTables(maps []*Mapping) {
	s.cache.Retain(func(string) bool { return false })
	clear(s.cfis)
	s.genDue = false
	s.ctx, s.mem, s.frames = unwind.Context{}, unwind.StackMemory{}, nil
	spaces := map[*space]bool{}
	for _, p := range s.procs {
		if spaces[p.sp] {
			continue
		}
		spaces[p.sp] = true
		for _, mp := range p.sp.maps.All() {
			(*mp).module = nil
		}
		u, _ := unwind.New(s.opts.Arch, nil) // the architecture was checked
		u.MaxDepth = s.opts.MaxDepth
		p.sp.u = u
	}
	for _, m := range maps {
		if m != nil {
			m.module = nil
		}
	}
}

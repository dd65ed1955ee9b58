package arch

import (
	"fmt"
	"sort"
)

// The model of a stopped program, beside its registers and memory: what
// the targets (package targets: ptrace, cores) produce and an unwinder
// (unwind.Tracer, unwind.Cache.Modules) takes, here so that the
// unwinder imports nothing of the ptrace and core package.

// Target is a stopped program: threads, memory and modules. The values
// returned by Threads and Modules are snapshots taken when the target was
// opened; callers must not modify them.
type Target interface {
	// Arch returns AMD64, ARM64 or S390X (cores only).
	Arch() Arch
	// PID returns the process id (of the live process, or recorded in the
	// core).
	PID() int
	// Threads returns the threads; see the implementations for the order.
	Threads() []Thread
	// Modules returns the loaded ELF modules, sorted by Start.
	Modules() []Module
	// Memory returns the target's memory.
	Memory() Memory
	// Close releases the target. For a live process it detaches every
	// thread, leaving the process running. Close is idempotent.
	Close() error
}

// Thread is one stopped thread.
type Thread struct {
	// TID is the kernel thread id (equal to the PID for the main thread).
	TID int
	// Name is the thread's name (comm), when known: every thread of a live
	// process, only the main thread of a core (from NT_PRPSINFO).
	Name string
	// Regs are the registers at the stop. All of them are valid.
	Regs Regs
	// Signal is the signal the thread was stopped with, or 0: for a core,
	// pr_cursig (the fatal signal, for the crashing thread of a kernel
	// core); for a live process, a signal that arrived during the attach
	// and that will be delivered again on detach.
	Signal int
}

// Mapping is one line of /proc/PID/maps (internal/procmaps parses them),
// or one mapping of a module's file as a core describes it (package
// targets fills the fields a core has): the one mapping type of the tree.
type Mapping struct {
	// Start and End delimit the mapping, [Start, End).
	Start, End uint64
	// Offset is the file offset mapped at Start.
	Offset uint64
	// Perm is the permission string ("r-xp"). For a core it is derived
	// from the PT_LOAD segment covering the mapping and is empty when the
	// core has none; do not rely on its x bit for cores written by gdb,
	// which records all segments as non-executable.
	Perm string
	// Dev is the file's device as "major:minor" in hexadecimal ("fe:01"),
	// empty for a core.
	Dev string
	// Inode is the file's inode number, 0 for anonymous memory and cores.
	Inode uint64
	// Path is the file name, possibly ending in " (deleted)", a special
	// area such as "[vdso]" or "[stack]", or empty (anonymous memory, or
	// a module's mapping, whose Module has the name).
	Path string
}

// Exec reports whether the mapping is executable (Perm's x).
func (m *Mapping) Exec() bool { return len(m.Perm) >= 3 && m.Perm[2] == 'x' }

// Module is one loaded ELF object: the main executable, a shared library,
// or the vDSO.
type Module struct {
	// Path is the file name as the target recorded it (/proc/PID/maps or
	// NT_FILE), possibly ending in " (deleted)", or "[vdso]".
	Path string
	// File is a path at which the module's ELF file can be opened now: Path
	// itself, or for a live process /proc/PID/map_files/... or
	// /proc/PID/root/... when Path is gone or names another file. It is
	// empty for the vDSO and when no such file was found. Give File (not
	// Path) to the symbolizer.
	File string
	// Start and End span all of the module's mappings, [Start, End).
	Start, End uint64
	// Offset is the file offset of the lowest mapping.
	Offset uint64
	// Perm combines the permissions of the mappings: "r", "w" and "x" when
	// any mapping has them, "-" otherwise, then the first mapping's "p" or
	// "s".
	Perm string
	// Bias is the load bias: runtime address = ELF virtual address + Bias.
	// It is 0 for a non-PIE executable. Valid only when HasBias is true.
	Bias uint64
	// HasBias reports whether Bias could be computed from the ELF program
	// headers (found in the target's memory or in the file).
	HasBias bool
	// Inode is the inode number of the file (live processes only).
	Inode uint64
	// Mappings lists the file's mappings, sorted by Start.
	Mappings []Mapping
}

// IsVDSO reports whether m is the kernel's virtual dynamic shared object,
// whose ELF image lives only in the target's memory (see ReadImage).
func (m *Module) IsVDSO() bool { return m.Path == "[vdso]" }

// Contains reports whether addr lies in one of m's mappings.
func (m *Module) Contains(addr uint64) bool {
	if addr < m.Start || addr >= m.End {
		return false
	}
	for i := range m.Mappings {
		if addr >= m.Mappings[i].Start && addr < m.Mappings[i].End {
			return true
		}
	}
	return false
}

// ELFAddr converts a runtime address in m to an address in the ELF file's
// own virtual address space (runtime - Bias), the space of symbol values
// and of SFrame/.eh_frame PCs.
func (m *Module) ELFAddr(runtime uint64) uint64 { return runtime - m.Bias }

// FindModule returns the module among mods (sorted by Start, as
// Target.Modules returns them) whose mappings contain addr, or nil.
func FindModule(mods []Module, addr uint64) *Module {
	i := sort.Search(len(mods), func(i int) bool { return mods[i].Start > addr })
	// Modules may interleave in rare layouts; look back a little.
	for j := i - 1; j >= 0 && j >= i-4; j-- {
		if mods[j].Contains(addr) {
			return &mods[j]
		}
	}
	return nil
}

// ReadImage returns the bytes [m.Start, m.End) of m from mem. It is meant
// for the vDSO, whose memory image is a complete ELF file; parse the result
// with elf.NewFile(bytes.NewReader(img)). The size is capped at 64 MiB.
func ReadImage(mem Memory, m *Module) ([]byte, error) {
	size := m.End - m.Start
	if m.End <= m.Start || size > 64<<20 {
		return nil, fmt.Errorf("module %s: bad image size %#x", m.Path, size)
	}
	b := make([]byte, size)
	if _, err := mem.ReadAt(b, int64(m.Start)); err != nil {
		return nil, fmt.Errorf("reading image of %s at %#x: %w", m.Path, m.Start, err)
	}
	return b, nil
}

// Termination is how the process of a core ended (targets.Core.Termination):
// the signal that made it dump core, and for a fault what the kernel
// told of it.
type Termination struct {
	// TID is the thread that took the signal.
	TID int
	// Signal is the signal's number, as Linux numbers them on every
	// architecture a core is read for (11 is SIGSEGV).
	Signal int
	// Code is si_code (positive when the kernel sent the signal for a
	// fault, as SEGV_MAPERR; 0 or negative when a process did, by kill
	// or tgkill), Errno si_errno; both 0 without an NT_SIGINFO note.
	Code, Errno int
	// Addr is si_addr, the faulting address of SIGSEGV and SIGBUS and
	// the faulting instruction's of SIGILL, SIGFPE and SIGTRAP;
	// meaningful only when HasAddr says so.
	Addr uint64
}

// HasAddr reports whether Addr is a fault address: a SIGSEGV, SIGBUS,
// SIGILL, SIGFPE or SIGTRAP the kernel sent for a fault (0 < Code <
// SI_KERNEL, 0x80), not one a process sent or the kernel sent without
// fault information, with an NT_SIGINFO note.
func (t *Termination) HasAddr() bool {
	switch t.Signal {
	case 4, 5, 7, 8, 11: // SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV
		return t.Code > 0 && t.Code < 0x80
	}
	return false
}

package targets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/procmaps"
)

// Target is a stopped program: threads, memory and modules. The values
// returned by Threads and Modules are snapshots taken when the target was
// opened; callers must not modify them.
type Target interface {
	// Arch returns arch.AMD64, arch.ARM64 or arch.S390X (cores only).
	Arch() arch.Arch
	// PID returns the process id (of the live process, or recorded in the
	// core).
	PID() int
	// Threads returns the threads; see the implementations for the order.
	Threads() []Thread
	// Modules returns the loaded ELF modules, sorted by Start.
	Modules() []Module
	// Memory returns the target's memory.
	Memory() arch.Memory
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
	Regs arch.Regs
	// Signal is the signal the thread was stopped with, or 0: for a core,
	// pr_cursig (the fatal signal, for the crashing thread of a kernel
	// core); for a live process, a signal that arrived during the attach
	// and that will be delivered again on detach.
	Signal int
}

// Mapping is one memory mapping of a module's file: a line of
// /proc/PID/maps, the one mapping type of the tree. A Module's Mappings
// have Start, End, Offset and Perm (Module has the path).
type Mapping = procmaps.Mapping

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
func ReadImage(mem arch.Memory, m *Module) ([]byte, error) {
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

// OpenELF opens the ELF file of m: m.File, or for the vDSO its image read
// from mem. The caller must Close the result.
func OpenELF(mem arch.Memory, m *Module) (*elffile.File, error) {
	if m.IsVDSO() || m.File == "" {
		if !m.IsVDSO() {
			return nil, fmt.Errorf("module %s: no file available", m.Path)
		}
		img, err := ReadImage(mem, m)
		if err != nil {
			return nil, err
		}
		f, err := elffile.NewFile(img)
		if err != nil {
			return nil, fmt.Errorf("parsing vdso image: %w", err)
		}
		return f, nil
	}
	f, err := elffile.Open(m.File)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", m.Path, err)
	}
	return f, nil
}

// ErrUnmapped is wrapped by errors for memory a target does not have: not
// mapped in a live process, or neither dumped in a core nor backed by a
// readable mapped file.
var ErrUnmapped = errors.New("address not available")

// ErrGone is wrapped by the error of AttachProcess when the process does
// not exist or has exited: no such PID, a zombie, or a process that
// exited during the attach. A caller sampling a process repeatedly can
// tell its end from a failure with errors.Is(err, ErrGone).
var ErrGone = errors.New("process gone")

// goneError is an error about a process that is gone, with its own text.
type goneError struct{ msg string }

func (e *goneError) Error() string        { return e.msg }
func (e *goneError) Is(target error) bool { return target == ErrGone }

// ReadUint64 reads a little-endian 64-bit word at addr.
func ReadUint64(m arch.Memory, addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := m.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// memReader adapts an arch.Memory to an io.ReaderAt based at base, for parsing
// ELF headers out of a target's memory.
type memReader struct {
	m    arch.Memory
	base uint64
}

// ReadAt reads at offset off from the base address.
func (r memReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, io.EOF
	}
	return r.m.ReadAt(p, int64(r.base+uint64(off)))
}

// permUnion combines mapping permissions as Module.Perm documents.
func permUnion(ms []Mapping) string {
	var b [4]byte
	copy(b[:], "---p")
	for i, m := range ms {
		for j, c := range []byte("rwx") {
			if strings.IndexByte(m.Perm, c) >= 0 {
				b[j] = c
			}
		}
		if i == 0 && len(m.Perm) == 4 {
			b[3] = m.Perm[3]
		}
	}
	return string(b[:])
}

var (
	_ Target = (*Process)(nil)
	_ Target = (*Core)(nil)
)

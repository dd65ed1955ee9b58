package targets

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
)

// loadSeg is one PT_LOAD program header.
type loadSeg struct {
	off, vaddr, filesz, memsz uint64
}

// maxPhnum bounds the number of program headers read (the ELF format's own
// limit without PN_XNUM extension is 0xffff).
const maxPhnum = 0xffff

// readLoadSegs reads the PT_LOAD program headers of the ELF image readable
// through r (a file, or a target's memory at the image's base). Only the
// ELF header and the program header table are read, so it works on the
// first page of a loaded object.
func readLoadSegs(r io.ReaderAt) ([]loadSeg, error) {
	phs, _, err := readProgs(r)
	if err != nil {
		return nil, err
	}
	var segs []loadSeg
	for _, p := range phs {
		if p.typ == elf.PT_LOAD {
			segs = append(segs, p.loadSeg)
		}
	}
	if len(segs) == 0 {
		return nil, errors.New("no PT_LOAD segment")
	}
	return segs, nil
}

// prog is one program header.
type prog struct {
	typ elf.ProgType
	loadSeg
}

// readProgs reads the program headers of the ELF image readable through
// r, and its byte order, through elffile's one header parser.
func readProgs(r io.ReaderAt) ([]prog, binary.ByteOrder, error) {
	h, err := elffile.ReadHeader(r)
	if errors.Is(err, elffile.ErrNotELF) {
		return nil, nil, errNotELF
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading ELF header: %w", err)
	}
	phoff, phentsize, phnum := h.Phoff, uint64(h.Phentsize), uint64(h.Phnum)
	if phnum == 0 || phnum > maxPhnum || phentsize > 1024 || phoff > 1<<40 {
		return nil, nil, fmt.Errorf("bad program header table (phoff %#x, phentsize %d, phnum %d)", phoff, phentsize, phnum)
	}
	tab := make([]byte, phnum*phentsize) // bounded: < 64 MiB, usually < 1 KiB
	if _, err := r.ReadAt(tab, int64(phoff)); err != nil {
		return nil, nil, fmt.Errorf("reading program headers: %w", err)
	}
	progs, err := h.DecodeProgs(tab, int(phnum))
	if err != nil {
		return nil, nil, fmt.Errorf("bad program header table: %w", err)
	}
	out := make([]prog, 0, len(progs))
	for _, p := range progs {
		out = append(out, prog{typ: elf.ProgType(p.Type), loadSeg: loadSeg{off: p.Off, vaddr: p.Vaddr, filesz: p.Filesz, memsz: p.Memsz}})
	}
	return out, h.ByteOrder, nil
}

// maxBuildIDNotes bounds the bytes of PT_NOTE segments read for a build
// ID (real ones hold a few notes, under 1 KiB).
const maxBuildIDNotes = 64 << 10

// readBuildID returns the GNU build ID (NT_GNU_BUILD_ID) of the ELF
// image readable through r, or nil when it has none. r reads the file's
// bytes from offset 0, or the image's first mapping in memory (which
// maps the file from offset 0, without section headers): notes are found
// in PT_NOTE segments at their file offsets below limit, and decoded by
// elffile.NoteBuildID.
func readBuildID(r io.ReaderAt, limit uint64) ([]byte, error) {
	phs, bo, err := readProgs(r)
	if err != nil {
		return nil, err
	}
	for _, p := range phs {
		if p.typ != elf.PT_NOTE || p.filesz > maxBuildIDNotes || p.off > limit || p.filesz > limit-p.off {
			continue
		}
		buf := make([]byte, p.filesz)
		if _, err := r.ReadAt(buf, int64(p.off)); err != nil {
			return nil, fmt.Errorf("reading notes: %w", err)
		}
		if id := elffile.NoteBuildID(buf, bo); id != nil {
			return id, nil
		}
	}
	return nil, nil
}

// computeBias finds the load bias of an object given its PT_LOAD segments
// and its mappings (sorted by Start). The kernel and ld.so map a segment at
// bias + pagedown(p_vaddr) from file offset pagedown(p_offset); the first
// segment (in file order) is matched with the lowest mapping of that
// offset, which avoids the ambiguity of two segments sharing a page (the
// RELRO split maps one file page twice).
func computeBias(segs []loadSeg, maps []arch.Mapping, pageSize uint64) (uint64, bool) {
	if pageSize == 0 || pageSize&(pageSize-1) != 0 {
		pageSize = 4096
	}
	order := make([]int, len(segs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return segs[order[a]].off < segs[order[b]].off })
	for _, i := range order {
		s := segs[i]
		if s.filesz == 0 {
			continue
		}
		off := s.off &^ (pageSize - 1)
		for _, m := range maps {
			if m.Offset == off {
				return m.Start - s.vaddr&^(pageSize-1), true
			}
		}
	}
	return 0, false
}

// segSpan returns the extent [lo, hi) of the segments of an image loaded
// with bias, page-aligned.
func segSpan(segs []loadSeg, bias, pageSize uint64) (lo, hi uint64) {
	lo = ^uint64(0)
	for _, s := range segs {
		if a := s.vaddr &^ (pageSize - 1); a < lo {
			lo = a
		}
		if e := s.vaddr + s.memsz; e > hi {
			hi = e
		}
	}
	hi = (hi + pageSize - 1) &^ (pageSize - 1)
	return lo + bias, hi + bias
}

// rawMapping is one file-backed mapping before grouping into modules.
type rawMapping struct {
	arch.Mapping
	path  string
	inode uint64
}

// groupModules groups file-backed mappings (sorted by Start) into modules:
// consecutive mappings of one path form one module, and a mapping of file
// offset 0 of a path that already has a mapping at offset 0 starts a new
// module (the same file loaded or mapped twice).
func groupModules(raw []rawMapping) []arch.Module {
	type key struct {
		path  string
		inode uint64
	}
	// At most one module per mapping: one allocation, not the growth of
	// an append (which costs several times the final size in copies).
	mods := make([]arch.Module, 0, len(raw))
	hasZero := make([]bool, 0, len(raw)) // per module: it has a mapping of offset 0
	open := map[key]int{}                // index in mods of the current module of a path
	for _, r := range raw {
		k := key{r.path, r.inode}
		i, ok := open[k]
		if ok && r.Offset == 0 && hasZero[i] {
			ok = false
		}
		if !ok {
			mods = append(mods, arch.Module{Path: r.path, Inode: r.inode, Start: r.Start, Offset: r.Offset})
			hasZero = append(hasZero, false)
			i = len(mods) - 1
			open[k] = i
		}
		if r.Offset == 0 {
			hasZero[i] = true
		}
		m := &mods[i]
		m.Mappings = append(m.Mappings, r.Mapping)
		if r.End > m.End {
			m.End = r.End
		}
	}
	for i := range mods {
		mods[i].Perm = permUnion(mods[i].Mappings)
	}
	return mods
}

// errNotELF reports an image without the ELF magic.
var errNotELF = errors.New("not an ELF image")

// resolveBias fills m.Bias/HasBias, reading the program headers from the
// target's memory at the object's first page (the mapping of file offset
// 0) and, failing that, from the file opened by openFile, and returns the
// PT_LOAD segments it used. isELF reports whether either source was
// recognised as ELF; modules that are not are dropped by the callers
// (data files mapped by the program).
func resolveBias(m *arch.Module, mem arch.Memory, openFile func() (io.ReaderAt, io.Closer, error), pageSize uint64) (segs []loadSeg, isELF bool, err error) {
	var errs []error
	try := func(r io.ReaderAt) error {
		s, err := readLoadSegs(r)
		if err != nil {
			return err
		}
		isELF = true
		if b, ok := computeBias(s, m.Mappings, pageSize); ok {
			m.Bias, m.HasBias = b, true
			segs = s
			return nil
		}
		return errors.New("no mapping matches a PT_LOAD segment")
	}
	if mem != nil {
		for _, mp := range m.Mappings {
			if mp.Offset != 0 {
				continue
			}
			err := try(memReader{mem, mp.Start})
			if err == nil {
				return segs, true, nil
			}
			if errors.Is(err, errNotELF) {
				// The file's first page is mapped and is not ELF.
				return nil, false, err
			}
			errs = append(errs, fmt.Errorf("from memory at %#x: %w", mp.Start, err))
			break
		}
	}
	if openFile != nil {
		r, c, err := openFile()
		if err == nil {
			err = try(r)
			c.Close()
			if err == nil {
				return segs, true, nil
			}
		}
		errs = append(errs, fmt.Errorf("from file: %w", err))
	}
	return nil, isELF, fmt.Errorf("load bias of %s: %w", m.Path, errors.Join(errs...))
}

// images keeps, per file, the last module kept with its bias and the
// PT_LOAD segments that gave it, so that the callers of groupModules can
// join to it the modules that are part of its image (join).
type images map[imageKey]imageAt

type imageKey struct {
	path  string
	inode uint64
}

type imageAt struct {
	i    int // index of the module in the callers' list
	segs []loadSeg
}

// add records mods[i], whose bias segs gave.
func (im images) add(mods []arch.Module, i int, segs []loadSeg) {
	if mods[i].HasBias && len(segs) > 0 {
		im[imageKey{mods[i].Path, mods[i].Inode}] = imageAt{i, segs}
	}
}

// join adds m's mappings to the module before it of the same file, and
// reports so, when m starts inside that module's image (its segments'
// bytes at its bias; a second load of the file starts after them).
// groupModules starts a module at each further mapping of file offset 0,
// as of a second load; but where a file's loadable bytes fit in its first
// page, as lld lays out small programs, all its segments map that page,
// offset 0, and the module of each but the first got the first segment's
// bias: a wrong one.
func (im images) join(mods []arch.Module, m *arch.Module) bool {
	at, ok := im[imageKey{m.Path, m.Inode}]
	if !ok || len(m.Mappings) == 0 {
		return false
	}
	prev := &mods[at.i]
	// Page size 1: the image's bytes, whatever the page size of the
	// target (a core's NT_FILE note may count offsets in bytes).
	_, end := segSpan(at.segs, prev.Bias, 1)
	if m.Start < prev.End || m.Start >= end {
		return false
	}
	prev.Mappings = append(prev.Mappings, m.Mappings...)
	prev.End = max(prev.End, m.End)
	prev.Perm = permUnion(prev.Mappings)
	return true
}

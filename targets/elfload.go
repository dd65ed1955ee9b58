package targets

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"sort"

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
	h, err := elffile.ReadHeader(r)
	if errors.Is(err, elffile.ErrNotELF) {
		return nil, errNotELF
	}
	if err != nil {
		return nil, fmt.Errorf("reading ELF header: %w", err)
	}
	phoff, phentsize, phnum := h.Phoff, uint64(h.Phentsize), uint64(h.Phnum)
	if phnum == 0 || phnum > maxPhnum || phentsize > 1024 || phoff > 1<<40 {
		return nil, fmt.Errorf("bad program header table (phoff %#x, phentsize %d, phnum %d)", phoff, phentsize, phnum)
	}
	tab := make([]byte, phnum*phentsize) // bounded: < 64 MiB, usually < 1 KiB
	if _, err := r.ReadAt(tab, int64(phoff)); err != nil {
		return nil, fmt.Errorf("reading program headers: %w", err)
	}
	progs, err := h.DecodeProgs(tab, int(phnum))
	if err != nil {
		return nil, fmt.Errorf("bad program header table: %w", err)
	}
	var segs []loadSeg
	for _, p := range progs {
		if elf.ProgType(p.Type) == elf.PT_LOAD {
			segs = append(segs, loadSeg{off: p.Off, vaddr: p.Vaddr, filesz: p.Filesz, memsz: p.Memsz})
		}
	}
	if len(segs) == 0 {
		return nil, errors.New("no PT_LOAD segment")
	}
	return segs, nil
}

// computeBias finds the load bias of an object given its PT_LOAD segments
// and its mappings (sorted by Start). The kernel and ld.so map a segment at
// bias + pagedown(p_vaddr) from file offset pagedown(p_offset); the first
// segment (in file order) is matched with the lowest mapping of that
// offset, which avoids the ambiguity of two segments sharing a page (the
// RELRO split maps one file page twice).
func computeBias(segs []loadSeg, maps []Mapping, pageSize uint64) (uint64, bool) {
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
	Mapping
	path  string
	inode uint64
}

// groupModules groups file-backed mappings (sorted by Start) into modules:
// consecutive mappings of one path form one module, and a mapping of file
// offset 0 of a path that already has a mapping at offset 0 starts a new
// module (the same file loaded or mapped twice).
func groupModules(raw []rawMapping) []Module {
	type key struct {
		path  string
		inode uint64
	}
	var mods []Module
	open := map[key]int{} // index in mods of the current module of a path
	for _, r := range raw {
		k := key{r.path, r.inode}
		i, ok := open[k]
		if ok && r.Offset == 0 {
			for _, m := range mods[i].Mappings {
				if m.Offset == 0 {
					ok = false
					break
				}
			}
		}
		if !ok {
			mods = append(mods, Module{Path: r.path, Inode: r.inode, Start: r.Start, Offset: r.Offset})
			i = len(mods) - 1
			open[k] = i
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
// 0) and, failing that, from the file opened by openFile. isELF reports
// whether either source was recognised as ELF; modules that are not are
// dropped by the callers (data files mapped by the program).
func resolveBias(m *Module, mem Memory, openFile func() (io.ReaderAt, io.Closer, error), pageSize uint64) (isELF bool, err error) {
	var errs []error
	try := func(r io.ReaderAt) error {
		segs, err := readLoadSegs(r)
		if err != nil {
			return err
		}
		isELF = true
		if b, ok := computeBias(segs, m.Mappings, pageSize); ok {
			m.Bias, m.HasBias = b, true
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
				return true, nil
			}
			if errors.Is(err, errNotELF) {
				// The file's first page is mapped and is not ELF.
				return false, err
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
				return true, nil
			}
		}
		errs = append(errs, fmt.Errorf("from file: %w", err))
	}
	return isELF, fmt.Errorf("targets: load bias of %s: %w", m.Path, errors.Join(errs...))
}

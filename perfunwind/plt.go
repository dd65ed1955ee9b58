package perfunwind

import (
	"debug/elf"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/symbolize"
)

// pltTable names the entries of a file's procedure linkage table as perf
// does, "name@plt", from the PLT relocations: symbol tables do not cover
// them.
//
// The names are read on the first address inside the PLT: most files
// have no sampled address there, and the dynamic symbol table the names
// come from is large (libc's holds 3,000 entries).
type pltTable struct {
	start, end uint64 // the entries' address range
	entry      uint64 // size of one entry
	names      []string
	ef         *elf.File    // where the names come from, until read
	rela       *elf.Section // .rela.plt
}

// maxPLT bounds the PLT relocations read (a large program has a few
// thousand).
const maxPLT = 1 << 20

// plt returns the name and start of the PLT entry holding addr in f.
func (r *Resolver) plt(f *File, addr uint64) (string, uint64, bool) {
	t, ok := r.plts[f]
	if !ok {
		t = loadPLT(f, r.s.opts.Arch)
		r.plts[f] = t
	}
	if t == nil || addr < t.start || addr >= t.end {
		return "", 0, false
	}
	if t.ef != nil {
		t.readNames()
	}
	i := (addr - t.start) / t.entry
	if i >= uint64(len(t.names)) || t.names[i] == "" {
		return "", 0, false
	}
	return t.names[i], t.start + i*t.entry, true
}

// loadPLT reads the PLT of f: .plt.sec's entries when the file has one
// (x86-64 with IBT), else .plt's after its header.
func loadPLT(f *File, a arch.Arch) *pltTable {
	if f.r == nil || f.image != nil || f.size <= 0 {
		return nil
	}
	ef, err := elffile.NewFileAt(f.r, f.size)
	if err != nil {
		return nil
	}
	rela := ef.Section(".rela.plt")
	if rela == nil || rela.Type != elf.SHT_RELA || ef.Class != elf.ELFCLASS64 || rela.Size/24 > maxPLT {
		return nil
	}
	var header, entry uint64
	switch a {
	case arch.AMD64:
		header, entry = 16, 16
	case arch.ARM64:
		header, entry = 32, 16
	default:
		return nil
	}
	sec := ef.Section(".plt.sec")
	if sec != nil {
		header = 0
	} else if sec = ef.Section(".plt"); sec == nil {
		return nil
	}
	n := (sec.Size - min(header, sec.Size)) / entry
	t := &pltTable{start: sec.Addr + header, entry: entry, ef: ef.File, rela: rela}
	t.end = t.start + min(n, rela.Size/24)*entry
	return t
}

// readNames reads the names of the entries, "@plt" for those without a
// symbol; none when the tables do not read.
func (t *pltTable) readNames() {
	ef, rela := t.ef, t.rela
	t.ef, t.rela = nil, nil
	n := (t.end - t.start) / t.entry
	rels, err := elffile.Relocs(ef, rela)
	if err != nil {
		return
	}
	rels = rels[:min(uint64(len(rels)), n)]
	// Only the entries' symbols are read, not the whole table.
	idx := make([]uint32, len(rels))
	for i, r := range rels {
		idx[i] = r.Sym
	}
	syms, ok := symbolize.SymbolNames(ef, elf.SHT_DYNSYM, idx)
	if !ok {
		all, err := elffile.DynamicSymbols(ef)
		if err != nil {
			return
		}
		// Indices count from 1 in the table (0 is the null symbol,
		// which DynamicSymbols leaves out).
		syms = make([]string, len(idx))
		for i, si := range idx {
			if si >= 1 && int(si) <= len(all) {
				syms[i] = all[si-1].Name
			}
		}
	}
	// Entries without a symbol (IRELATIVE) are "@plt", as perf names
	// them.
	for _, name := range syms {
		t.names = append(t.names, name+"@plt")
	}
}

package symbolize

import (
	"debug/elf"
	"sort"
	"strings"
)

// maxLabels bounds the untyped code labels kept per object.
const maxLabels = 1 << 16

// readTextLabels returns the untyped (STT_NOTYPE) symbols of f's .symtab
// that label code: the entry points hand-written assembly defines without
// .type, such as thread_start in glibc's s390x clone.S. gdb names code by
// them, as minimal symbols; lookupFunc falls back on them where no
// function symbol covers an address. Mapping symbols ($x, $d) are left
// out. The result is sorted by address.
func readTextLabels(f *elf.File) []sym {
	var sec *elf.Section
	for _, s := range f.Sections {
		if s.Type == elf.SHT_SYMTAB {
			sec = s
			break
		}
	}
	if sec == nil || sec.Link == 0 || int(sec.Link) >= len(f.Sections) {
		return nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil
	}
	strb, err := f.Sections[sec.Link].Data()
	if err != nil {
		return nil
	}
	strs := string(strb)
	bo := f.ByteOrder
	size := 16
	if f.Class == elf.ELFCLASS64 {
		size = 24
	}
	var out []sym
	for off := size; off+size <= len(data) && len(out) < maxLabels; off += size {
		e := data[off : off+size]
		var name uint32
		var info uint8
		var shndx uint16
		var value uint64
		name = bo.Uint32(e)
		if size == 24 {
			info, shndx, value = e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:])
		} else {
			value, info, shndx = uint64(bo.Uint32(e[4:])), e[12], bo.Uint16(e[14:])
		}
		if elf.ST_TYPE(info) != elf.STT_NOTYPE || value == 0 || int(shndx) >= len(f.Sections) || shndx == 0 ||
			f.Sections[shndx].Flags&elf.SHF_EXECINSTR == 0 || int(name) >= len(strs) {
			continue
		}
		n := strings.IndexByte(strs[name:], 0)
		if n <= 0 || strs[name] == '$' || strs[name] == '.' {
			continue
		}
		out = append(out, sym{start: value, name: strs[name : int(name)+n]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// lookupLabel returns the last code label at or below addr and at or
// above after (the end of the function symbol before addr), if any.
func (m *module) lookupLabel(addr, after uint64) (Symbol, bool) {
	ls := m.labels
	i := sort.Search(len(ls), func(i int) bool { return ls[i].start > addr }) - 1
	if i < 0 || ls[i].start < after {
		return Symbol{}, false
	}
	return Symbol{Name: ls[i].name, Start: ls[i].start, Offset: addr - ls[i].start}, true
}

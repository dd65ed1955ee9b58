package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"sort"
	"strings"
)

// maxLabels bounds the untyped code labels kept per object.
const maxLabels = 1 << 16

// textLabel decodes symbol table entry e (of a 64-bit table when is64)
// as an untyped (STT_NOTYPE) symbol that labels code, names taken from
// strs: the entry points hand-written assembly defines without .type,
// such as thread_start in glibc's s390x clone.S. gdb names code by them,
// as minimal symbols; lookupFunc falls back on them where no function
// symbol covers an address. Mapping symbols ($x, $d) and assembler
// locals (.L) are left out.
func textLabel(f *elf.File, bo binary.ByteOrder, is64 bool, e []byte, strs string) (sym, bool) {
	se := decodeSym(bo, is64, e)
	name, info, shndx, value := se.name, se.info, se.shndx, se.value
	if elf.ST_TYPE(info) != elf.STT_NOTYPE || value == 0 || int(shndx) >= len(f.Sections) || shndx == 0 ||
		f.Sections[shndx].Flags&elf.SHF_EXECINSTR == 0 || int(name) >= len(strs) {
		return sym{}, false
	}
	n := strings.IndexByte(strs[name:], 0)
	if n <= 0 || strs[name] == '$' || strs[name] == '.' {
		return sym{}, false
	}
	return sym{start: value, name: strs[name : int(name)+n]}, true
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

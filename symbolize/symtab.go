package symbolize

// Function symbols from .symtab and .dynsym: the tables streamed through
// elffile's guarded readers, and one name chosen per start address (see
// better, and perfBetter for perf's choice).

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/sframekit/sframekit/elffile"
)

// cand is a function symbol competing for its start address.
type cand struct {
	sym
	bind  elf.SymBind
	label bool // an untyped symbol in code (only with PerfNames)
	// grown: a symbol of size 0 that perf's symbols__fixup_end extends
	// to the next start before choosing among equal starts, the last of
	// its start in table order (the others end at the next one, their
	// own start) when a symbol with a later start follows.
	grown bool
}

// readFuncSyms returns the function symbols of f's first section of type
// typ. It reads the table directly rather than through (*elf.File).Symbols,
// which builds a string for every symbol of every kind: a libc debug
// file's .symtab has 10,000 entries, and only its functions are wanted.
// Memory is what it costs most (each new page is a page fault, and those
// are slow in virtual machines): the table is streamed twice through one
// 64 KB buffer, to count the functions (by their entries, without
// reading their names) and then to fill a slice of at most that size,
// and the string table is read straight into the one string the names
// are substrings of.
//
// For a .symtab it also returns the table's untyped code labels (see
// textLabel), sorted by address, from the same pass.
func readFuncSyms(f *elf.File, typ elf.SectionType, labels bool) ([]cand, []sym) {
	var sec *elf.Section
	for _, s := range f.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil || int(sec.Link) >= len(f.Sections) || sec.Link == 0 {
		return nil, nil
	}
	// Compressed tables may expand to at most elffile.MaxDecompressed,
	// and to no more than their stored bytes can hold.
	strsec := f.Sections[sec.Link]
	if strsec.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	symr, err := elffile.SectionReader(sec)
	if err != nil {
		return nil, nil
	}
	strr, err := elffile.SectionReader(strsec)
	if err != nil {
		return nil, nil
	}
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	size := 16
	if is64 {
		size = 24
	}
	buf := make([]byte, 2730*size) // about 64 KB, whole entries
	var sb strings.Builder
	if strsec.Flags&elf.SHF_COMPRESSED == 0 && strsec.Size < 1<<30 {
		sb.Grow(int(strsec.Size))
	}
	if _, err := io.CopyBuffer(&sb, strr, buf); err != nil {
		return nil, nil
	}
	strs := sb.String()

	// each calls fn with every entry of the table but the null one.
	each := func(fn func(e []byte)) error {
		if _, err := symr.Seek(0, io.SeekStart); err != nil {
			return err
		}
		r := symr
		first := true
		for {
			n, err := io.ReadFull(r, buf)
			n -= n % size
			for off := 0; off < n; off += size {
				if !first {
					fn(buf[off : off+size])
				}
				first = false
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	// parse decodes an entry; ok is false for what is not a function.
	// Without named, the name is not read: ok may be true for an entry
	// whose name rules it out (the counting pass, whose count may then
	// exceed what the second pass keeps).
	parse := func(e []byte, named bool) (c cand, ok bool) {
		se := decodeSym(bo, is64, e)
		name, info, shndx, value, sz := se.name, se.info, se.shndx, se.value, se.size
		t := elf.ST_TYPE(info)
		// With labels, untyped symbols in code count too, as perf counts
		// them: _start in ld.so, entry points written in assembly.
		label := labels && t == elf.STT_NOTYPE && int(shndx) < len(f.Sections) && f.Sections[shndx].Flags&elf.SHF_EXECINSTR != 0
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC && !label) || elf.SectionIndex(shndx) == elf.SHN_UNDEF || value == 0 {
			return c, false
		}
		// A name at offset 0 is the empty one (perf's rule too).
		if name == 0 || int(name) >= len(strs) {
			return c, false
		}
		if !named {
			return c, true
		}
		// The name's end is found only when the name is used (symName):
		// finding it for each of cc1plus's 31,000 symbols, whose names
		// lie in hash order through 1.4 MB, was a quarter of reading them.
		nm := strs[name:]
		if label {
			n := strings.IndexByte(nm, 0)
			if n <= 0 || nm[0] == '$' || strings.HasPrefix(nm[:n], ".L") {
				return c, false // AArch64 and ARM mapping symbols, assembler locals
			}
			nm = nm[:n]
		}
		return cand{sym: sym{value, sz, nm}, bind: elf.ST_BIND(info), label: label}, true
	}
	count := 0
	var text []sym
	if err := each(func(e []byte) {
		if _, ok := parse(e, false); ok {
			count++
		}
		if typ == elf.SHT_SYMTAB && len(text) < maxLabels {
			if l, ok := textLabel(f, bo, is64, e, strs); ok {
				text = append(text, l)
			}
		}
	}); err != nil {
		return nil, nil
	}
	sort.Slice(text, func(i, j int) bool { return text[i].start < text[j].start })
	if count == 0 {
		return nil, text
	}
	out := make([]cand, 0, count)
	if err := each(func(e []byte) {
		if c, ok := parse(e, true); ok && len(out) < count {
			out = append(out, c)
		}
	}); err != nil {
		return nil, text
	}
	return out, text
}

// symEntry is one entry of an ELF symbol table.
type symEntry struct {
	name        uint32 // offset in the string table
	info        uint8
	shndx       uint16
	value, size uint64
}

// decodeSym decodes entry e of a symbol table of 64-bit entries (is64,
// 24 bytes) or 32-bit ones (16 bytes).
func decodeSym(bo binary.ByteOrder, is64 bool, e []byte) symEntry {
	if is64 {
		return symEntry{bo.Uint32(e), e[4], bo.Uint16(e[6:]), bo.Uint64(e[8:]), bo.Uint64(e[16:])}
	}
	return symEntry{bo.Uint32(e), e[12], bo.Uint16(e[14:]), uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))}
}

// better reports whether a should name the address rather than b (same
// start): a named symbol over one with an empty name, then a sized
// symbol over an unsized one, then global over weak over local, then the
// name with fewer leading underscores, then the shorter, then the first
// in alphabetical order.
func better(a, b *cand) bool {
	if a.label != b.label { // labels compete only with PerfNames
		return !a.label
	}
	if ea, eb := emptyName(a), emptyName(b); ea != eb {
		return eb
	}
	if (a.size > 0) != (b.size > 0) {
		return a.size > 0
	}
	if ra, rb := bindRank(a.bind), bindRank(b.bind); ra != rb {
		return ra < rb
	}
	an, bn := symName(a.name), symName(b.name)
	under := func(s string) int { return len(s) - len(strings.TrimLeft(s, "_")) }
	if ua, ub := under(an), under(bn); ua != ub {
		return ua < ub
	}
	if len(an) != len(bn) {
		return len(an) < len(bn)
	}
	return an < bn
}

// perfBetter is better as perf's choose_best_symbol decides (perf 6.1,
// util/symbol.c): a function over a label, then (a case perf's
// st_name check leaves out) a named symbol, then a sized symbol (sized
// as symbols__fixup_end left it: see grown), then a non-weak one, then a
// global one, then the name with fewer leading underscores, then the
// longer name; on a tie, the first in the table stays. perf compares the
// names it shows, demangled (DemangleShort): libclang-cpp's
// clang::Sema::SubstDecl loses to the alias
// clang::TemplateDeclInstantiator::VisitDecl, whose mangled name is the
// shorter.
func perfBetter(a, b *cand) bool {
	if a.label != b.label {
		return !a.label
	}
	if ea, eb := emptyName(a), emptyName(b); ea != eb {
		return eb
	}
	if sa, sb := a.size > 0 || a.grown, b.size > 0 || b.grown; sa != sb {
		return sa
	}
	if wa, wb := a.bind == elf.STB_WEAK, b.bind == elf.STB_WEAK; wa != wb {
		return !wa
	}
	if ga, gb := a.bind == elf.STB_GLOBAL, b.bind == elf.STB_GLOBAL; ga != gb {
		return ga
	}
	an, bn := symName(a.name), symName(b.name)
	if structorVariants(an, bn) {
		return false // they demangle alike: the first stays
	}
	an, bn = DemangleShort(an), DemangleShort(bn)
	under := func(s string) int { return len(s) - len(strings.TrimLeft(s, "_")) }
	if ua, ub := under(an), under(bn); ua != ub {
		return ua < ub
	}
	return len(an) > len(bn)
}

// structorVariants reports whether the mangled names a and b differ only
// in a constructor's or destructor's variant (C1, C2, C3, ... D0, D1,
// D2: complete, base object, allocating, deleting), which demangle
// alike: the aliases GCC makes of a class's structors, almost all of a
// C++ binary's groups of aliases (825 of cc1plus's 840, 572 of
// libstdc++'s 614), told apart without demangling both (which doubled
// the time to read cc1plus's symbols).
func structorVariants(a, b string) bool {
	if len(a) != len(b) || len(a) < 4 || a[:2] != "_Z" || b[:2] != "_Z" {
		return false
	}
	d := -1
	for i := 2; i < len(a); i++ {
		if a[i] != b[i] {
			if d >= 0 {
				return false
			}
			d = i
		}
	}
	isCode := func(c byte) bool { return c >= '0' && c <= '5' }
	return d > 2 && (a[d-1] == 'C' || a[d-1] == 'D') && isCode(a[d]) && isCode(b[d])
}

// emptyName reports whether c's name is empty: such a symbol names
// nothing, and loses to any other at its address.
func emptyName(c *cand) bool { return len(c.name) == 0 || c.name[0] == 0 }

// bindRank orders bindings for better: global, weak, then the others.
func bindRank(b elf.SymBind) int {
	switch b {
	case elf.STB_GLOBAL:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

// a2lBetter is better as addr2line decides where it names a function
// from the symbol table (binutils 2.40, bfd's elf_find_function): of
// symbols of one start, the larger (a symbol without size counting as
// 1), the first in table order of equals.
func a2lBetter(a, b *cand) bool { return max(a.size, 1) > max(b.size, 1) }

// funcSyms sorts the candidates by start and keeps the best one per
// start, as pick (better or perfBetter) says; candidates of equal start
// are offered in table order. Sorting on the address alone keeps the sort
// cheap; the full order is applied only within runs of equal starts.
// a2l holds, in order of start, the symbols addr2line names instead of
// the one kept (a2lBetter), only where the two differ.
func funcSyms(cs []cand, pick func(a, b *cand) bool) (syms, a2l []sym) {
	order := sortedByStart(cs)
	n := 0 // distinct starts: the result's exact size
	for i := range order {
		if i == 0 || cs[order[i]].start != cs[order[i-1]].start {
			n++
		}
	}
	out := make([]sym, 0, n)
	for i := 0; i < len(order); {
		best := &cs[order[i]]
		j := i + 1
		for j < len(order) && cs[order[j]].start == best.start {
			j++
		}
		if last := &cs[order[j-1]]; last.size == 0 && j < len(order) {
			last.grown = true
		}
		a := best // addr2line's
		for k := i + 1; k < j; k++ {
			c := &cs[order[k]]
			if pick(c, best) {
				best = c
			}
			if a2lBetter(c, a) {
				a = c
			}
		}
		out = append(out, best.sym)
		if a != best && symName(a.name) != symName(best.name) {
			a2l = append(a2l, a.sym)
		}
		i = j
	}
	return out, a2l
}

// sortedByStart returns the indexes of cs in order of start address.
// When starts fit in 43 bits and indexes in 20 (every user-space object),
// start and index are packed into one integer so that the sort compares
// plain integers, and the keys become the indexes in place; otherwise it
// sorts with a comparison function.
func sortedByStart(cs []cand) []int {
	const idxBits = 20
	packable := len(cs) < 1<<idxBits
	for i := range cs {
		if cs[i].start >= 1<<(63-idxBits) {
			packable = false
		}
	}
	order := make([]int, len(cs))
	if packable {
		for i := range cs {
			order[i] = int(cs[i].start<<idxBits | uint64(i))
		}
		radixSort(order) // non-negative: starts have 43 bits
		for i, k := range order {
			order[i] = k & (1<<idxBits - 1)
		}
		return order
	}
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cs[a].start, cs[b].start) })
	return order
}

// radixSort sorts the non-negative integers a, 11 bits a pass from the
// lowest, skipping the passes where every one has the same digit: a
// shared library's .dynsym lists its symbols in hash order, and sorting
// cc1plus's 31,000 by address with slices.Sort took a third of reading
// them; this takes a tenth of that.
func radixSort(a []int) {
	if len(a) < 256 {
		slices.Sort(a)
		return
	}
	const bits, size = 11, 1 << 11
	orig, tmp := a, make([]int, len(a))
	var count [size]int
	for shift := uint(0); shift < 63; shift += bits {
		clear(count[:])
		for _, v := range a {
			count[v>>shift&(size-1)]++
		}
		if count[a[0]>>shift&(size-1)] == len(a) {
			continue // one digit for all: the order stands
		}
		pos := 0
		for d, n := range count {
			count[d] = pos
			pos += n
		}
		for _, v := range a {
			d := v >> shift & (size - 1)
			tmp[count[d]] = v
			count[d]++
		}
		a, tmp = tmp, a
	}
	if &a[0] != &orig[0] { // an odd number of scatters
		copy(orig, a)
	}
}

// SymbolNames returns the names of the entries idx (indices into the
// table, 0 being the null entry) of f's first symbol table of type typ,
// "" for an entry without one, reading only those entries and names:
// perf's PLT names need a few hundred of cc1plus's 31,000 dynamic
// symbols, and decoding them all (debug/elf's DynamicSymbols) cost more
// than the rest of naming that file. The entries are read in the order
// of their indices through a chunk of entryChunk bytes, then their names
// in the order of their offsets through one of namesChunk: reading each
// entry and name alone took 1,032 reads for cc1plus's 516 PLT entries,
// two thirds of a whole recording's. ok is false when f has no such
// table, or when it is compressed (read it whole instead). The names
// read are bounded as a lazy lookup's are: at most twice the string
// table's size and 64 KiB, past which names are "".
func SymbolNames(f *elf.File, typ elf.SectionType, idx []uint32) (names []string, ok bool) {
	sec, str, err := strtabOf(f, typ)
	if sec == nil || err != nil {
		return nil, false
	}
	size := uint64(16)
	if f.Class == elf.ELFCLASS64 {
		size = 24
	}
	entries := sec.Size / size
	// The places in idx of the entries to read, by index.
	order := make([]int, 0, len(idx))
	for i, k := range idx {
		if k != 0 && uint64(k) < entries {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(idx[a], idx[b]) })
	var chunk []byte // entries read, from the one at pos on
	pos := uint64(0)
	buf := make([]byte, entryChunk-entryChunk%size)
	nameAt := make([]uint32, len(idx)) // the names' offsets, 0 for none
	for _, i := range order {
		off := uint64(idx[i]) * size
		if off < pos || off+size > pos+uint64(len(chunk)) {
			n, _ := elffile.ReadSectionAt(sec, buf[:min(uint64(len(buf)), sec.Size-off)], int64(off))
			if n < int(size) {
				chunk = nil
				continue
			}
			chunk, pos = buf[:n], off
		}
		if se := decodeSym(f.ByteOrder, size == 24, chunk[off-pos:][:size]); uint64(se.name) < str.Size {
			nameAt[i] = se.name
		}
	}
	// The names, in the order they lie in the table.
	order = order[:0]
	for i, o := range nameAt {
		if o != 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(nameAt[a], nameAt[b]) })
	nr := &nameReader{str: str, buf: make([]byte, namesChunk), left: 2*str.Size + 64<<10}
	names = make([]string, len(idx))
	for _, i := range order {
		names[i], _ = nr.read(nameAt[i])
	}
	return names, true
}

// entryChunk and namesChunk are the sizes of SymbolNames' reads of
// entries and of names.
const (
	entryChunk = 16 << 10
	namesChunk = 4 << 10
)

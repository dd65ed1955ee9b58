package targets

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// CoreOptions adjusts OpenCoreWith.
type CoreOptions struct {
	// Exe is the main executable's file. For a core with NT_FILE it
	// replaces the recorded path (a binary that moved). For a core
	// without NT_FILE (qemu-user writes none) it is the only way to find
	// the modules: the executable is placed where the auxiliary vector
	// says it was loaded (AT_PHDR, AT_ENTRY: the load bias of a PIE), and
	// the shared libraries are read from the dynamic linker's list in the
	// core's memory (the executable's DT_DEBUG → r_debug → link_map),
	// which names them and gives their load addresses.
	Exe string
	// Sysroot, if not empty, is the directory under which the shared
	// libraries' recorded paths are looked up, as gdb's "set sysroot":
	// /usr/aarch64-linux-gnu for a program that qemu-aarch64 ran with
	// -L /usr/aarch64-linux-gnu. The executable is not looked up there.
	// Without it, a library is read from its recorded path, if that file
	// is an ELF file of the core's machine.
	Sysroot string
}

// Limits on what the dynamic linker's list, read from a core's memory,
// may cost.
const (
	maxLinkMap    = 4096    // entries of the link_map list
	maxDynamic    = 1 << 20 // bytes of a dynamic section
	maxPathLen    = 4096    // bytes of a library's name
	atPAGESZ      = 6
	atBASE        = 7
	dtDEBUG       = 21
	linkMapFields = 5 // l_addr, l_name, l_ld, l_next, l_prev
)

// sysrootFiles points the NT_FILE entries of the shared libraries (every
// path but the executable exe) at their files under sysroot, where those
// exist, as gdb's "set sysroot" does.
func sysrootFiles(files []ntFileEntry, exe, sysroot string) {
	for i := range files {
		if files[i].path == exe || !strings.HasPrefix(files[i].path, "/") {
			continue
		}
		if p := sysfile.Under(sysroot, files[i].path); isRegular(p) {
			files[i].path = p
		}
	}
}

// loadedObject is one ELF object to place in a core without NT_FILE.
type loadedObject struct {
	name string // as the target recorded it (link_map's l_name, or the exe)
	file string // the file on this machine, "" if not found
	bias uint64
	ld   uint64 // runtime address of its dynamic section (l_ld), 0 if unknown
}

// addLoadedModules adds the modules of a core without NT_FILE: the
// executable given in o.Exe, placed by matching its PT_LOAD segments with
// the auxiliary vector, and the shared libraries on the dynamic linker's
// list in the core's memory, read from their files under o.Sysroot. The
// memory the core did not dump (text) is read from those files.
func (c *Core) addLoadedModules(notes *coreNotes, o CoreOptions, bo binary.ByteOrder) {
	if o.Exe == "" {
		c.warn(errors.New("the core lists no mapped files (no NT_FILE, as qemu-user writes cores): give the executable (--exe) to find the modules"))
		return
	}
	pageSize := uint64(4096)
	if v, ok := notes.auxvValue(atPAGESZ); ok && v >= 4096 && v <= 1<<20 && v&(v-1) == 0 {
		pageSize = v
	}
	ef, err := elffile.Open(o.Exe)
	if err != nil {
		c.warn(fmt.Errorf("executable %s: %w", o.Exe, err))
		return
	}
	defer ef.Close()
	if arch.FromELF(ef.Machine) != c.arch || ef.Class != elf.ELFCLASS64 {
		c.warn(fmt.Errorf("executable %s is %v %v, the core %v: not its executable", o.Exe, ef.Class, ef.Machine, c.arch))
		return
	}
	bias, err := exeBias(ef.File, notes)
	if err != nil {
		c.warn(fmt.Errorf("executable %s does not match the core: %w", o.Exe, err))
		return
	}
	// place adds obj; c.mem.files is sorted again once the executable is
	// placed and once at the end, not per object (a crafted list names
	// up to maxLinkMap of them).
	place := func(obj loadedObject) {
		m, files, err := c.placeObject(obj, pageSize)
		if err != nil {
			c.warn(err)
		}
		if m.End > m.Start {
			c.modules = append(c.modules, m)
			c.mem.files = append(c.mem.files, files...)
		}
	}
	sortFiles := func() {
		sort.Slice(c.mem.files, func(i, j int) bool { return c.mem.files[i].start < c.mem.files[j].start })
	}
	// The executable first: the link_map names may lie in its text
	// (the interpreter's is its PT_INTERP string), which only its file
	// holds.
	place(loadedObject{name: o.Exe, file: o.Exe, bias: bias})
	sortFiles()
	mem := orderedMem{c.mem, bo}
	var libs []loadedObject
	for _, p := range ef.Progs {
		if p.Type == elf.PT_DYNAMIC {
			libs, err = linkMap(p.Vaddr+bias, p.Memsz, mem)
		}
	}
	if err != nil {
		c.warn(fmt.Errorf("shared libraries: %w", err))
	}
	// A program that died before the dynamic linker set DT_DEBUG still
	// has the dynamic linker itself, at AT_BASE.
	if base, ok := notes.auxvValue(atBASE); ok && base != 0 && !hasBias(libs, base) {
		if interp := interpreter(ef.File); interp != "" {
			libs = append(libs, loadedObject{name: interp, bias: base})
		}
	}
	seen := map[string]bool{}
	for _, l := range libs {
		if seen[l.name] {
			continue // a corrupt list naming a file many times is read once
		}
		seen[l.name] = true
		if f, err := libraryFile(l.name, o.Sysroot, c.arch); err == nil {
			l.file = f
		} else {
			c.warn(err)
		}
		place(l)
	}
	sortFiles()
	sort.Slice(c.modules, func(i, j int) bool { return c.modules[i].Start < c.modules[j].Start })
}

// hasBias reports whether an object of objs is loaded with bias b.
func hasBias(objs []loadedObject, b uint64) bool {
	for _, o := range objs {
		if o.bias == b {
			return true
		}
	}
	return false
}

// exeBias returns the load bias of the executable ef in the core: 0 for
// ET_EXEC, AT_PHDR minus the program headers' address for a PIE. Either
// way AT_ENTRY must be the executable's entry point plus the bias, which
// catches a wrong --exe.
func exeBias(ef *elf.File, notes *coreNotes) (uint64, error) {
	entry, hasEntry := notes.auxvValue(atENTRY)
	var bias uint64
	if ef.Type == elf.ET_DYN {
		phdr, ok := notes.auxvValue(atPHDR)
		if !ok {
			return 0, errors.New("a PIE, and the core has no AT_PHDR to place it")
		}
		vaddr, ok := phdrVaddr(ef)
		if !ok {
			return 0, errors.New("no loaded program header table")
		}
		bias = phdr - vaddr
	} else if ef.Type != elf.ET_EXEC {
		return 0, fmt.Errorf("ELF type %v, not an executable", ef.Type)
	}
	if hasEntry && entry != ef.Entry+bias {
		return 0, fmt.Errorf("its entry point %#x (load bias %#x) is not the core's AT_ENTRY %#x", ef.Entry, bias, entry)
	}
	return bias, nil
}

// phdrVaddr returns the virtual address of ef's program header table: its
// PT_PHDR, or the place of e_phoff in the PT_LOAD segment holding it.
func phdrVaddr(ef *elf.File) (uint64, bool) {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_PHDR {
			return p.Vaddr, true
		}
	}
	// debug/elf does not keep e_phoff: the table follows the 64-byte
	// ELF header in every file a linker makes.
	const phoff = 64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= phoff && phoff-p.Off < p.Filesz {
			return p.Vaddr + phoff - p.Off, true
		}
	}
	return 0, false
}

// interpreter returns ef's PT_INTERP path, or "".
func interpreter(ef *elf.File) string {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP && p.Filesz > 0 && p.Filesz <= maxPathLen {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				return cString(b)
			}
		}
	}
	return ""
}

// linkMap reads the dynamic linker's list of loaded objects from mem:
// the executable's dynamic section (dynSize bytes at dynAddr) holds in
// DT_DEBUG the address of r_debug, whose r_map starts the link_map list.
// The executable's own entry (empty name) is left out; so is the vDSO (a
// name without '/'), which the auxiliary vector gives. At most
// maxDynamic bytes of dynamic section and maxLinkMap entries are read.
func linkMap(dynAddr, dynSize uint64, mem orderedMem) ([]loadedObject, error) {
	size := min(dynSize, maxDynamic) &^ 15
	buf := make([]byte, size)
	if _, err := mem.m.ReadAt(buf, int64(dynAddr)); err != nil {
		return nil, fmt.Errorf("reading the executable's dynamic section: %w", err)
	}
	rdebug := uint64(0)
	for i := 0; i+16 <= len(buf); i += 16 {
		tag := mem.bo.Uint64(buf[i:])
		if tag == uint64(elf.DT_NULL) {
			break
		}
		if tag == dtDEBUG {
			rdebug = mem.bo.Uint64(buf[i+8:])
		}
	}
	if rdebug == 0 {
		return nil, errors.New("DT_DEBUG not set: the dynamic linker had not started")
	}
	// struct r_debug { int r_version; struct link_map *r_map; ... }
	lm, err := mem.word(rdebug + 8)
	if err != nil {
		return nil, fmt.Errorf("reading r_debug at %#x: %w", rdebug, err)
	}
	var out []loadedObject
	seen := map[uint64]bool{}
	for n := 0; lm != 0; n++ {
		if n >= maxLinkMap || seen[lm] {
			return out, fmt.Errorf("link_map list at %#x: a loop or more than %d entries", rdebug, maxLinkMap)
		}
		seen[lm] = true
		var f [linkMapFields]uint64
		for i := range f {
			if f[i], err = mem.word(lm + 8*uint64(i)); err != nil {
				return out, fmt.Errorf("reading link_map entry at %#x: %w", lm, err)
			}
		}
		name, err := mem.cString(f[1], maxPathLen)
		if err != nil {
			return out, fmt.Errorf("reading the name of link_map entry at %#x: %w", lm, err)
		}
		if strings.Contains(name, "/") {
			out = append(out, loadedObject{name: name, bias: f[0], ld: f[2]})
		}
		lm = f[3]
	}
	return out, nil
}

// libraryFile returns the file on this machine of the library the target
// recorded as name: under sysroot when one is given, else name itself,
// and only if it is an ELF file of architecture a.
func libraryFile(name, sysroot string, a arch.Arch) (string, error) {
	p := name
	if sysroot != "" {
		p = sysfile.Under(sysroot, name)
	}
	if !isRegular(p) {
		if sysroot == "" {
			return "", fmt.Errorf("library %s: not found (give the target's root directory as the sysroot)", name)
		}
		return "", fmt.Errorf("library %s: %s not found", name, p)
	}
	f, err := elffile.Open(p)
	if err != nil {
		return "", fmt.Errorf("library %s: %w", name, err)
	}
	defer f.Close()
	if arch.FromELF(f.Machine) != a {
		return "", fmt.Errorf("library %s: %s is for %v, not %v (give the target's root directory as the sysroot)", name, p, f.Machine, a)
	}
	return p, nil
}

// placeObject makes the module of obj from its file's PT_LOAD segments,
// mapped as the kernel and ld.so map them (bias + the page-aligned
// segment), and the file ranges that back its memory. Without a file, the
// module is the core segment at its bias, with no file.
func (c *Core) placeObject(obj loadedObject, pageSize uint64) (arch.Module, []ntFileEntry, error) {
	m := arch.Module{Path: obj.name, Bias: obj.bias, HasBias: true}
	if obj.file == "" {
		if s := c.mem.segAt(obj.bias); s != nil {
			m.Start, m.End = obj.bias, s.vaddr+s.memsz
			m.Mappings = []arch.Mapping{{Start: m.Start, End: m.End, Perm: c.mem.permAt(m.Start)}}
			m.Perm = permUnion(m.Mappings)
		}
		return m, nil, nil
	}
	ef, err := elffile.Open(obj.file)
	if err != nil {
		return m, nil, fmt.Errorf("module %s: %w", obj.name, err)
	}
	defer ef.Close()
	var files []ntFileEntry
	for _, p := range ef.Progs {
		if obj.ld != 0 && p.Type == elf.PT_DYNAMIC && p.Vaddr+obj.bias != obj.ld {
			return arch.Module{}, nil, fmt.Errorf("module %s: %s has its dynamic section at %#x, the loaded one at %#x: not the same file", obj.name, obj.file, p.Vaddr+obj.bias, obj.ld-obj.bias)
		}
		if p.Type != elf.PT_LOAD || p.Memsz == 0 {
			continue
		}
		lo := (p.Vaddr &^ (pageSize - 1)) + obj.bias
		hi := (p.Vaddr+p.Memsz+pageSize-1)&^(pageSize-1) + obj.bias
		off := p.Off &^ (pageSize - 1)
		if hi <= lo || lo < obj.bias {
			return arch.Module{}, nil, fmt.Errorf("module %s: PT_LOAD at %#x+%#x does not fit at bias %#x", obj.name, p.Vaddr, p.Memsz, obj.bias)
		}
		m.Mappings = append(m.Mappings, arch.Mapping{Start: lo, End: hi, Offset: off, Perm: segPerm(p.Flags)})
		if p.Filesz > 0 {
			files = append(files, ntFileEntry{start: lo, end: p.Vaddr + p.Filesz + obj.bias, off: off, path: obj.file})
		}
	}
	if len(m.Mappings) == 0 {
		return arch.Module{}, nil, fmt.Errorf("module %s: no PT_LOAD segment", obj.name)
	}
	sort.Slice(m.Mappings, func(i, j int) bool { return m.Mappings[i].Start < m.Mappings[j].Start })
	m.File = obj.file
	m.Start, m.Offset = m.Mappings[0].Start, m.Mappings[0].Offset
	for _, mp := range m.Mappings {
		m.End = max(m.End, mp.End)
		if !c.mem.overlaps(mp.Start, mp.End) {
			return arch.Module{}, nil, fmt.Errorf("module %s: the core has no memory at %#x, where %s would be loaded", obj.name, mp.Start, obj.file)
		}
	}
	m.Perm = permUnion(m.Mappings)
	return m, files, nil
}

// segPerm is a program header's flags as a maps permission string.
func segPerm(f elf.ProgFlag) string {
	b := []byte("---p")
	if f&elf.PF_R != 0 {
		b[0] = 'r'
	}
	if f&elf.PF_W != 0 {
		b[1] = 'w'
	}
	if f&elf.PF_X != 0 {
		b[2] = 'x'
	}
	return string(b)
}

// orderedMem reads words of the target's byte order.
type orderedMem struct {
	m  arch.Memory
	bo binary.ByteOrder
}

func (o orderedMem) word(addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := o.m.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return o.bo.Uint64(b[:]), nil
}

// cString reads a NUL-terminated string of at most max bytes at addr,
// reading in small pieces, as the string may end just before unmapped
// memory.
func (o orderedMem) cString(addr uint64, max int) (string, error) {
	var s []byte
	var b [64]byte
	for len(s) < max {
		// Up to the next 64-byte boundary.
		n := 64 - int(addr%64)
		if _, err := o.m.ReadAt(b[:n], int64(addr)); err != nil {
			return "", err
		}
		if i := bytes.IndexByte(b[:n], 0); i >= 0 {
			return string(append(s, b[:i]...)), nil
		}
		s = append(s, b[:n]...)
		addr += uint64(n)
	}
	return "", fmt.Errorf("no end within %d bytes", max)
}

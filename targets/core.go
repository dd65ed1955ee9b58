package targets

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// Note types read from cores (those missing from debug/elf).
const (
	ntPRSTATUS = 1
	ntPRPSINFO = 3
	ntAUXV     = 6
	ntFILE     = 0x46494c45 // "FILE"
	ntSIGINFO  = 0x53494749 // "SIGI"
)

// Auxiliary vector keys used here.
const (
	atPHDR        = 3
	atENTRY       = 9
	atSYSINFOEHDR = 33
)

// Layout of the 64-bit elf_prstatus and elf_prpsinfo structures (the same
// on x86-64 and AArch64).
const (
	prstatusCursig = 12
	prstatusPid    = 32
	prstatusReg    = 112
	prpsinfoPid    = 24
	prpsinfoFname  = 40
	prpsinfoArgs   = 56
	prpsinfoSize   = 136
	// siginfo_t of a 64-bit process (NT_SIGINFO): si_signo, si_errno,
	// si_code, then, after padding, the union whose first member for a
	// fault is si_addr.
	siginfoSigno = 0
	siginfoErrno = 4
	siginfoCode  = 8
	siginfoAddr  = 16
	amd64NumUser = 27
	arm64NumUser = 34
)

// maxNoteSegment bounds the size of one PT_NOTE segment read into memory.
const maxNoteSegment = 256 << 20

// maxFileEntries bounds the NT_FILE mappings used: twice Linux's default
// vm.max_map_count (65,530), and more than the kernel's default 4 MiB
// NT_FILE note can list. A core listing more keeps the first ones, with
// a warning: every mapping costs memory and time (a module each, in the
// worst case), and a crafted core must not cost gigabytes.
const maxFileEntries = 1 << 17

// maxWarnings bounds the warnings a core collects; the rest are counted.
const maxWarnings = 100

// coreThread is one NT_PRSTATUS note, and the NT_SIGINFO note after it.
type coreThread struct {
	tid, sig int
	regs     arch.Regs
	info     *arch.Termination // from NT_SIGINFO: Signal, Code, Errno, Addr
}

// ntFileEntry is one mapping listed in NT_FILE; off is in bytes.
type ntFileEntry struct {
	start, end, off uint64
	path            string
}

// coreNotes is what the notes of a core describe.
type coreNotes struct {
	threads  []coreThread
	hasPS    bool
	psPid    int
	psFname  string
	psArgs   string
	auxv     [][2]uint64
	files    []ntFileEntry
	pageSize uint64
	// filesListed is the number of mappings NT_FILE lists, when it is
	// more than the maxFileEntries kept in files.
	filesListed uint64
}

// parseCoreNotes parses the contents of PT_NOTE segments of a core for
// machine. Every field is bounds-checked, and allocations are bounded by
// len(data). It appends to n so several note segments can be combined.
func (n *coreNotes) parse(data []byte, a arch.Arch, bo binary.ByteOrder) error {
	for off := 0; len(data)-off >= 12; {
		namesz := uint64(bo.Uint32(data[off:]))
		descsz := uint64(bo.Uint32(data[off+4:]))
		typ := bo.Uint32(data[off+8:])
		nameOff := uint64(off) + 12
		descOff := nameOff + (namesz+3)&^3
		end := descOff + (descsz+3)&^3
		if namesz > uint64(len(data)) || descsz > uint64(len(data)) || descOff+descsz > uint64(len(data)) {
			return fmt.Errorf("note at %#x: name size %d / desc size %d past the end of the segment (%d bytes)", off, namesz, descsz, len(data))
		}
		name := string(bytes.TrimRight(data[nameOff:nameOff+namesz], "\x00"))
		desc := data[descOff : descOff+descsz]
		if name == "CORE" {
			if err := n.parseNote(typ, desc, a, bo); err != nil {
				return fmt.Errorf("note at %#x: %w", off, err)
			}
		}
		if end > uint64(len(data)) {
			break // last note, padding missing
		}
		off = int(end)
	}
	return nil
}

func (n *coreNotes) parseNote(typ uint32, desc []byte, a arch.Arch, bo binary.ByteOrder) error {
	switch typ {
	case ntPRSTATUS:
		regs, err := prstatusRegs(a, desc, bo)
		if err != nil {
			return err
		}
		t := coreThread{
			tid:  int(int32(bo.Uint32(desc[prstatusPid:]))),
			sig:  int(int16(bo.Uint16(desc[prstatusCursig:]))),
			regs: regs,
		}
		n.threads = append(n.threads, t)
	case ntPRFPREG:
		// The floating-point registers of the thread of the last
		// NT_PRSTATUS; only s390x keeps some in Regs.
		if a == arch.S390X && len(n.threads) > 0 {
			return addS390XFPRs(&n.threads[len(n.threads)-1].regs, desc, bo)
		}
	case ntSIGINFO:
		// The siginfo of the thread of the last NT_PRSTATUS (the kernel
		// writes one, for the thread that took the fatal signal; gdb's
		// gcore one per thread).
		if len(desc) < siginfoAddr+8 || len(n.threads) == 0 {
			return nil // nothing to tell the signal by: pr_cursig does
		}
		t := &n.threads[len(n.threads)-1]
		t.info = &arch.Termination{
			TID:    t.tid,
			Signal: int(int32(bo.Uint32(desc[siginfoSigno:]))),
			Errno:  int(int32(bo.Uint32(desc[siginfoErrno:]))),
			Code:   int(int32(bo.Uint32(desc[siginfoCode:]))),
			Addr:   bo.Uint64(desc[siginfoAddr:]),
		}
	case ntPRPSINFO:
		if len(desc) < prpsinfoSize {
			return fmt.Errorf("NT_PRPSINFO: %d bytes, want %d", len(desc), prpsinfoSize)
		}
		n.hasPS = true
		n.psPid = int(int32(bo.Uint32(desc[prpsinfoPid:])))
		n.psFname = cString(desc[prpsinfoFname : prpsinfoFname+16])
		n.psArgs = strings.TrimSpace(cString(desc[prpsinfoArgs : prpsinfoArgs+80]))
	case ntAUXV:
		n.auxv = n.auxv[:0]
		for i := 0; i+16 <= len(desc); i += 16 {
			k, v := bo.Uint64(desc[i:]), bo.Uint64(desc[i+8:])
			if k == 0 {
				break
			}
			n.auxv = append(n.auxv, [2]uint64{k, v})
		}
	case ntFILE:
		if len(desc) < 16 {
			return fmt.Errorf("NT_FILE: %d bytes, too short", len(desc))
		}
		count := bo.Uint64(desc)
		pageSize := bo.Uint64(desc[8:])
		if count > uint64(len(desc)-16)/24 {
			return fmt.Errorf("NT_FILE: %d entries do not fit in %d bytes", count, len(desc))
		}
		if pageSize == 0 || pageSize&(pageSize-1) != 0 || pageSize > 1<<30 {
			return fmt.Errorf("NT_FILE: bad page size %d", pageSize)
		}
		names := desc[16+24*count:]
		keep := count
		if keep > maxFileEntries {
			keep = maxFileEntries
			n.filesListed = count
		}
		files := make([]ntFileEntry, 0, keep)
		paths := map[string]string{} // one string per distinct path
		for i := uint64(0); i < keep; i++ {
			e := desc[16+24*i:]
			f := ntFileEntry{start: bo.Uint64(e), end: bo.Uint64(e[8:])}
			pgoff := bo.Uint64(e[16:])
			if f.end < f.start || pgoff > (^uint64(0))/pageSize {
				return fmt.Errorf("NT_FILE: bad entry %d [%#x, %#x) page offset %#x", i, f.start, f.end, pgoff)
			}
			f.off = pgoff * pageSize
			j := bytes.IndexByte(names, 0)
			if j < 0 {
				if len(names) == 0 {
					return fmt.Errorf("NT_FILE: %d names for %d entries", i, count)
				}
				j = len(names) // last name without its NUL
			}
			path, ok := paths[string(names[:j])]
			if !ok {
				path = string(names[:j])
				paths[path] = path
			}
			f.path = path
			names = names[min(j+1, len(names)):]
			files = append(files, f)
		}
		n.files = files
		n.pageSize = pageSize
	}
	return nil
}

// termination is the signal the process died of (see Core.Termination).
func (n *coreNotes) termination() *arch.Termination {
	for _, t := range n.threads {
		if t.sig == 0 {
			continue
		}
		if t.info != nil && t.info.Signal == t.sig {
			return t.info
		}
		return &arch.Termination{TID: t.tid, Signal: t.sig}
	}
	return nil
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// auxvValue returns the value of key in the auxiliary vector.
func (n *coreNotes) auxvValue(key uint64) (uint64, bool) {
	for _, kv := range n.auxv {
		if kv[0] == key {
			return kv[1], true
		}
	}
	return 0, false
}

// Core is a core file opened as an arch.Target. Its methods are safe for
// concurrent use.
type Core struct {
	path     string
	f        *os.File
	arch     arch.Arch
	pid      int
	exe      string
	args     string
	threads  []arch.Thread
	term     *arch.Termination
	modules  []arch.Module
	warnings []error
	dropped  int // warnings past maxWarnings
	mem      *coreMem
}

// warn records a warning, up to maxWarnings.
func (c *Core) warn(err error) {
	if len(c.warnings) < maxWarnings {
		c.warnings = append(c.warnings, err)
	} else {
		c.dropped++
	}
}

// warnf records a warning made with fmt.Errorf, formatted only when it
// is kept.
func (c *Core) warnf(format string, args ...any) {
	if len(c.warnings) < maxWarnings {
		c.warnings = append(c.warnings, fmt.Errorf(format, args...))
	} else {
		c.dropped++
	}
}

// OpenCore opens the core file corePath (ET_CORE, 64-bit, x86-64,
// AArch64 or s390x, written by the kernel, by gdb's gcore or by
// qemu-user).
//
// Threads come from the NT_PRSTATUS notes, the main thread's name from
// NT_PRPSINFO, modules from NT_FILE (and the vDSO from the auxiliary
// vector), memory from the PT_LOAD segments and, for file-backed ranges the
// core did not dump (gdb and the kernel leave out unmodified text), from the
// mapped files themselves. exePath, if not empty, replaces the recorded
// path of the main executable (found through AT_ENTRY), for a binary that
// has moved since the core was written. OpenCoreWith takes more options.
//
// Limits, against crafted cores: a PT_NOTE segment of at most 256 MiB is
// read; of the mappings NT_FILE lists, the first 131,072 are used (twice
// Linux's default vm.max_map_count), and each file is opened and read
// once however often it is mapped, so that opening costs time and memory
// linear in those (about 1 KB per mapping); warnings stop at 100.
func OpenCore(corePath, exePath string) (*Core, error) {
	return OpenCoreWith(corePath, CoreOptions{Exe: exePath})
}

// OpenCoreWith is OpenCore with options: the executable, and a sysroot
// for the shared libraries of a core from another machine or
// architecture. Cores without NT_FILE (qemu-user's) need o.Exe to find
// their modules; see CoreOptions.
func OpenCoreWith(corePath string, o CoreOptions) (*Core, error) {
	f, err := sysfile.OpenRegular(corePath)
	if err != nil {
		return nil, fmt.Errorf("opening core: %w", err)
	}
	c, err := openCoreWith(f, corePath, o)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("core %s: %w", corePath, err)
	}
	c.f = f
	return c, nil
}

// withoutSections returns r, a 64-bit ELF file, as if its header gave no
// section header table, and whether it could: not when the program
// header count is in section 0 (PN_XNUM, a core of 65,535 mappings or
// more).
func withoutSections(r io.ReaderAt) (io.ReaderAt, bool) {
	var h [64]byte
	if n, _ := r.ReadAt(h[:], 0); n < len(h) || h[elf.EI_CLASS] != byte(elf.ELFCLASS64) {
		return nil, false
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if h[elf.EI_DATA] == byte(elf.ELFDATA2MSB) {
		bo = binary.BigEndian
	}
	if bo.Uint16(h[0x38:]) == 0xffff { // e_phnum
		return nil, false
	}
	clear(h[0x28:0x30]) // e_shoff
	clear(h[0x3a:0x40]) // e_shentsize, e_shnum, e_shstrndx
	return &headerOverlay{r, h}, true
}

// headerOverlay reads r with its first 64 bytes replaced by h.
type headerOverlay struct {
	r io.ReaderAt
	h [64]byte
}

func (o *headerOverlay) ReadAt(b []byte, off int64) (int, error) {
	n, err := o.r.ReadAt(b, off)
	if off >= 0 && off < int64(len(o.h)) {
		copy(b[:n], o.h[off:])
	}
	return n, err
}

// openCore reads a core from r.
func openCore(r io.ReaderAt, corePath, exePath string) (c *Core, err error) {
	return openCoreWith(r, corePath, CoreOptions{Exe: exePath})
}

// openCoreWith reads a core from r.
func openCoreWith(r io.ReaderAt, corePath string, o CoreOptions) (c *Core, err error) {
	exePath := o.Exe
	size, err := readerSize(r)
	if err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// A core cut short loses the section headers that gdb's gcore
		// writes at its end, which a core does not need: read it
		// without them.
		if nr, ok := withoutSections(r); ok {
			ef, err = elf.NewFile(nr)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("not an ELF file: %w", err)
	}
	if ef.Type != elf.ET_CORE {
		return nil, fmt.Errorf("ELF type %v, not a core file", ef.Type)
	}
	if ef.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("%v cores are not supported", ef.Class)
	}
	a := arch.FromELF(ef.Machine)
	if arch.NumDWARFRegs(a) == 0 {
		return nil, fmt.Errorf("unsupported machine %v", ef.Machine)
	}
	c = &Core{path: corePath, arch: a}

	var notes coreNotes
	var segs []coreSeg
	var cut, loads int  // PT_LOADs with file bytes: cut short, and in all
	var firstCut uint64 // the address where the first cut one ends
	for i, p := range ef.Progs {
		switch p.Type {
		case elf.PT_NOTE:
			if p.Off > uint64(size) || p.Filesz > uint64(size)-p.Off || p.Filesz > maxNoteSegment {
				return nil, fmt.Errorf("PT_NOTE %d [%#x+%#x] outside the file (%d bytes)", i, p.Off, p.Filesz, size)
			}
			buf := make([]byte, p.Filesz)
			if _, err := r.ReadAt(buf, int64(p.Off)); err != nil {
				return nil, fmt.Errorf("reading PT_NOTE %d: %w", i, err)
			}
			if err := notes.parse(buf, c.arch, ef.ByteOrder); err != nil {
				return nil, fmt.Errorf("PT_NOTE %d: %w", i, err)
			}
		case elf.PT_LOAD:
			s := coreSeg{vaddr: p.Vaddr, memsz: p.Memsz, filesz: p.Filesz, off: p.Off, flags: p.Flags}
			if s.filesz > s.memsz {
				s.filesz = s.memsz
			}
			if p.Vaddr+p.Memsz < p.Vaddr {
				c.warnf("PT_LOAD %d at %#x wraps around; ignored", i, p.Vaddr)
				continue
			}
			if s.filesz > 0 {
				loads++
			}
			if s.filesz > 0 && (s.off > uint64(size) || s.filesz > uint64(size)-s.off) {
				// Truncated core: keep what is there.
				avail := uint64(0)
				if s.off < uint64(size) {
					avail = uint64(size) - s.off
				}
				if cut == 0 {
					firstCut = p.Vaddr + avail
				}
				cut++
				s.filesz = avail
			}
			segs = append(segs, s)
		}
	}
	if cut > 0 {
		// One line for them all: a core cut by a size limit loses the
		// tail of one segment and all those after it.
		c.warnf("truncated core (%d bytes): %d of %d memory segments cut short or missing, from %#x on", size, cut, loads, firstCut)
	}
	if len(notes.threads) == 0 {
		return nil, errors.New("no NT_PRSTATUS note (no thread)")
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].vaddr < segs[j].vaddr })

	// The main executable: the NT_FILE mapping holding the entry point.
	exeIdx := -1
	for _, key := range []uint64{atENTRY, atPHDR} {
		if v, ok := notes.auxvValue(key); ok && exeIdx < 0 {
			for i, fm := range notes.files {
				if v >= fm.start && v < fm.end {
					exeIdx = i
					break
				}
			}
		}
	}
	if exeIdx >= 0 {
		c.exe = notes.files[exeIdx].path
		if exePath != "" {
			old := c.exe
			for i := range notes.files {
				if notes.files[i].path == old {
					notes.files[i].path = exePath
				}
			}
			c.exe = exePath
		}
	} else if exePath != "" {
		if len(notes.files) > 0 {
			c.warn(errors.New("main executable not found in NT_FILE; exe path override unused"))
		}
		c.exe = exePath
	}
	if o.Sysroot != "" {
		sysrootFiles(notes.files, c.exe, o.Sysroot)
	}

	c.mem = &coreMem{r: r, segs: segs, files: append([]ntFileEntry(nil), notes.files...), open: map[string]*os.File{}}
	sort.Slice(c.mem.files, func(i, j int) bool { return c.mem.files[i].start < c.mem.files[j].start })

	c.pid = notes.psPid
	if !notes.hasPS || c.pid == 0 {
		c.pid = notes.threads[0].tid
	}
	c.args = notes.psArgs
	c.term = notes.termination()
	for _, t := range notes.threads {
		th := arch.Thread{TID: t.tid, Regs: t.regs, Signal: t.sig}
		if notes.hasPS && t.tid == c.pid {
			th.Name = notes.psFname
		}
		c.threads = append(c.threads, th)
	}

	if notes.filesListed > 0 {
		c.warnf("NT_FILE lists %d mappings; only the first %d are used", notes.filesListed, len(notes.files))
	}
	c.modules = c.buildModules(&notes)
	if len(notes.files) == 0 {
		// qemu-user writes no NT_FILE: find the modules from the
		// executable and the dynamic linker's list.
		c.addLoadedModules(&notes, o, ef.ByteOrder)
		c.checkExeName(&notes, exePath)
	}
	c.checkFiles()
	if c.dropped > 0 {
		c.warnings = append(c.warnings, fmt.Errorf("%d more warnings left out", c.dropped))
	}
	return c, nil
}

// checkExeName warns, for a core without NT_FILE (qemu-user's, which
// holds no page of the executable either, so no build ID to check), when
// the executable given, exe, is not named as the core names its program
// (NT_PRPSINFO's pr_fname: the first 15 bytes of the name), as gdb warns
// that a core may not match its executable: another program of the same
// layout would be unwound and named without a word.
func (c *Core) checkExeName(n *coreNotes, exe string) {
	if exe == "" || !n.hasPS || n.psFname == "" {
		return
	}
	name := filepath.Base(exe)
	if len(name) > 15 {
		name = name[:15]
	}
	if name != n.psFname {
		c.warnf("executable %s may not be the program the core's process ran, named %s in the core (which holds no build ID to compare): its frames may be unwound and named wrongly", exe, n.psFname)
	}
}

// checkFiles warns about the modules whose file is missing, or is not the
// file the process ran: its GNU build ID differs from the one in the
// module's first page, which the kernel and gdb dump for ELF files.
func (c *Core) checkFiles() {
	fileIDs := map[string][]byte{}
	warned := map[string]bool{}
	for i := range c.modules {
		m := &c.modules[i]
		if m.IsVDSO() {
			continue
		}
		what := "library"
		if m.Path == c.exe {
			what = "executable"
		}
		var coreID []byte
		if c.firstPageDumped(m) {
			for _, mp := range m.Mappings {
				if mp.Offset == 0 {
					coreID, _ = readBuildID(memReader{dumpedMem{c.mem}, mp.Start}, mp.End-mp.Start)
					break
				}
			}
		}
		if m.File == "" {
			if warned[m.Path] {
				continue
			}
			warned[m.Path] = true
			id := ""
			if coreID != nil {
				id = fmt.Sprintf(" (build ID %x)", coreID)
			}
			c.warnf("%s %s%s not found: its frames can be neither unwound with its tables nor named", what, m.Path, id)
			continue
		}
		if coreID == nil {
			continue // nothing to compare with
		}
		fileID, ok := fileIDs[m.File]
		if !ok {
			if f, err := c.mem.file(m.File); err == nil {
				fileID, _ = readBuildID(f, ^uint64(0))
			}
			fileIDs[m.File] = fileID
		}
		if !bytes.Equal(fileID, coreID) {
			// Another build (the core's first page of the file holds
			// its note, so a file without one is another file too):
			// its tables, names and bytes would all be wrong, as
			// perfunwind refuses another build. Its frames are then
			// walked as a missing file's.
			if !warned[m.File] {
				warned[m.File] = true
				got := "none"
				if fileID != nil {
					got = fmt.Sprintf("%x", fileID)
				}
				c.warnf("%s %s is not the file the process ran: its build ID is %s, the core's %x; not used: its frames can be neither unwound with its tables nor named", what, m.File, got, coreID)
			}
			c.mem.refuse(m.File)
			m.File = ""
		}
	}
}

// dumpedMem reads only the bytes a core holds (no mapped file), to learn
// what the process had mapped.
type dumpedMem struct{ m *coreMem }

// ReadAt implements arch.Memory.
func (d dumpedMem) ReadAt(p []byte, addr int64) (int, error) {
	a := uint64(addr)
	s := d.m.segAt(a)
	if s == nil || a-s.vaddr >= s.filesz || uint64(len(p)) > s.filesz-(a-s.vaddr) {
		return 0, fmt.Errorf("core memory at %#x: not dumped: %w", a, arch.ErrUnmapped)
	}
	return d.m.r.ReadAt(p, int64(s.off+(a-s.vaddr)))
}

// isRegular reports whether path names a regular file (following links):
// mapped device files are never opened.
func isRegular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// readerSize returns the size of r (an *os.File, or anything with Size).
func readerSize(r io.ReaderAt) (int64, error) {
	switch v := r.(type) {
	case interface{ Size() int64 }:
		return v.Size(), nil
	case *os.File:
		st, err := v.Stat()
		if err != nil {
			return 0, err
		}
		return st.Size(), nil
	}
	return 0, errors.New("cannot determine core size")
}

// buildModules groups the NT_FILE mappings into modules and adds the vDSO.
func (c *Core) buildModules(notes *coreNotes) []arch.Module {
	raw := make([]rawMapping, 0, len(c.mem.files))
	for _, fm := range c.mem.files {
		raw = append(raw, rawMapping{Mapping: arch.Mapping{Start: fm.start, End: fm.end, Offset: fm.off, Perm: c.mem.permAt(fm.start)}, path: fm.path})
	}
	// A path mapped many times (a crafted core lists one a million times)
	// is checked, read and warned about once.
	type pathInfo struct {
		regular, warned bool
		progs           *fileProgs // read when first needed
	}
	paths := map[string]*pathInfo{}
	groups := groupModules(raw)
	mods := make([]arch.Module, 0, len(groups)+1)
	im := images{}
	for _, m := range groups {
		if im.join(mods, &m) {
			continue
		}
		pi := paths[m.Path]
		if pi == nil {
			pi = &pathInfo{regular: isRegular(m.Path)}
			paths[m.Path] = pi
		}
		if pi.regular {
			m.File = m.Path
		}
		var isELF bool
		var err error
		var segs []loadSeg
		if c.firstPageDumped(&m) {
			var open func() (io.ReaderAt, io.Closer, error)
			if m.File != "" {
				file := m.File
				open = func() (io.ReaderAt, io.Closer, error) {
					f, err := sysfile.OpenRegular(file)
					return f, f, err
				}
			}
			segs, isELF, err = resolveBias(&m, c.mem, open, notes.pageSize)
		} else {
			// The program headers come from the file (the core has not
			// got them): the same for every module of this path.
			if pi.progs == nil {
				pi.progs = &fileProgs{path: m.Path}
				if pi.regular {
					pi.progs = c.readFileProgs(m.Path)
				}
			}
			isELF, err = pi.progs.bias(&m, notes.pageSize)
			segs = pi.progs.segs
		}
		if !isELF {
			if errors.Is(err, errNotELF) {
				continue // a data file the program mapped
			}
			// Unknown: neither the core nor the file could be read. Keep
			// what looks like code, so that a missing library is still
			// listed (without a bias).
			if !strings.Contains(m.Path, ".so") && m.Path != c.exe && !strings.Contains(m.Perm, "x") {
				continue
			}
		}
		// (A missing file gets its warning from checkFiles.)
		if err != nil && m.File != "" && !pi.warned {
			pi.warned = true
			c.warn(err)
		}
		mods = append(mods, m)
		im.add(mods, len(mods)-1, segs)
	}
	if v, ok := notes.auxvValue(atSYSINFOEHDR); ok && v != 0 {
		if m, err := c.vdsoModule(v, notes.pageSize); err == nil {
			mods = append(mods, m)
		} else {
			c.warn(err)
		}
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Start < mods[j].Start })
	return mods
}

// firstPageDumped reports whether the core holds the first page of m's
// file (its mapping of offset 0), where its program headers are.
func (c *Core) firstPageDumped(m *arch.Module) bool {
	for _, mp := range m.Mappings {
		if mp.Offset == 0 {
			s := c.mem.segAt(mp.Start)
			return s != nil && mp.Start-s.vaddr < s.filesz
		}
	}
	return false
}

// fileProgs is what the program headers of a mapped file say, read once
// per path.
type fileProgs struct {
	path string
	segs []loadSeg
	err  error // why segs could not be read
}

// readFileProgs reads the PT_LOAD headers of the file mapped at path,
// through the core's memory reader (which reads mapped files).
func (c *Core) readFileProgs(path string) *fileProgs {
	fp := &fileProgs{path: path}
	f, err := c.mem.file(path)
	if err == nil {
		fp.segs, err = readLoadSegs(f)
	}
	if err != nil {
		if !errors.Is(err, errNotELF) {
			err = fmt.Errorf("load bias of %s: from file: %w", path, err)
		}
		fp.err = err
	}
	return fp
}

// bias sets m's load bias from the file's program headers, as
// resolveBias does.
func (fp *fileProgs) bias(m *arch.Module, pageSize uint64) (isELF bool, err error) {
	if fp.segs == nil {
		return false, fp.err // nil for a missing file
	}
	if b, ok := computeBias(fp.segs, m.Mappings, pageSize); ok {
		m.Bias, m.HasBias = b, true
		return true, nil
	}
	return true, fmt.Errorf("load bias of %s: no mapping matches a PT_LOAD segment", fp.path)
}

// vdsoModule describes the vDSO whose ELF header is at addr.
func (c *Core) vdsoModule(addr, pageSize uint64) (arch.Module, error) {
	if pageSize == 0 {
		pageSize = 4096
	}
	segs, err := readLoadSegs(memReader{c.mem, addr})
	if err != nil {
		return arch.Module{}, fmt.Errorf("vdso at %#x: %w", addr, err)
	}
	m := arch.Module{Path: "[vdso]", Start: addr}
	bias, ok := computeBias(segs, []arch.Mapping{{Start: addr, End: addr + pageSize}}, pageSize)
	if !ok {
		return arch.Module{}, fmt.Errorf("vdso at %#x: no PT_LOAD at offset 0", addr)
	}
	m.Bias, m.HasBias = bias, true
	_, m.End = segSpan(segs, bias, pageSize)
	if s := c.mem.segAt(addr); s != nil && s.vaddr == addr {
		m.End = s.vaddr + s.memsz // the whole mapping, section headers included
	}
	if m.End <= m.Start {
		return arch.Module{}, fmt.Errorf("vdso at %#x: empty", addr)
	}
	m.Mappings = []arch.Mapping{{Start: m.Start, End: m.End, Perm: "r-xp"}}
	m.Perm = "r-xp"
	return m, nil
}

// Arch returns the core's architecture.
func (c *Core) Arch() arch.Arch { return c.arch }

// PID returns the process id recorded in the core.
func (c *Core) PID() int { return c.pid }

// Exe returns the main executable's path (after the OpenCore override), or
// "" if the core does not tell.
func (c *Core) Exe() string { return c.exe }

// Args returns the start of the command line recorded in NT_PRPSINFO.
func (c *Core) Args() string { return c.args }

// Threads returns the threads in note order; in a core written by the
// kernel or qemu-user the first is the thread that received the fatal
// signal.
func (c *Core) Threads() []arch.Thread { return c.threads }

// Modules returns the ELF modules, sorted by Start.
func (c *Core) Modules() []arch.Module { return c.modules }

// Termination returns the signal the process died of, or nil when the
// core does not say (a core that gdb's gcore wrote of a live process).
// The signal is the first non-zero pr_cursig of the NT_PRSTATUS notes:
// the kernel writes it in every thread's, qemu-user in the crashing
// thread's only (gdb reads the last thread's, and so says nothing of a
// multithreaded program's qemu core). The NT_SIGINFO note of that
// thread, when it is of the same signal, adds si_code and si_addr.
// (gcore writes an NT_SIGINFO of the SIGSTOP that stopped each thread,
// with pr_cursig 0: not a death.)
func (c *Core) Termination() *arch.Termination {
	if c.term == nil {
		return nil
	}
	t := *c.term
	return &t
}

// Memory returns the core's memory.
func (c *Core) Memory() arch.Memory { return c.mem }

// Warnings returns non-fatal problems found while opening the core: a
// truncated core, modules whose file is missing, is not the one the
// process ran (its build ID differs from the one in the core) or whose
// bias is unknown.
func (c *Core) Warnings() []error { return c.warnings }

// Close closes the core and the mapped files opened to read memory.
func (c *Core) Close() error {
	c.mem.close()
	if c.f != nil {
		err := c.f.Close()
		c.f = nil
		return err
	}
	return nil
}

// coreSeg is one PT_LOAD segment of a core.
type coreSeg struct {
	vaddr, memsz, filesz, off uint64
	flags                     elf.ProgFlag
}

// coreMem reads memory from a core: dumped bytes first, then the bytes of
// the files NT_FILE says are mapped.
type coreMem struct {
	r     io.ReaderAt
	segs  []coreSeg     // sorted by vaddr
	files []ntFileEntry // sorted by start

	mu     sync.Mutex
	open   map[string]*os.File
	closed bool
}

// segAt returns the segment whose [vaddr, vaddr+memsz) holds addr.
func (m *coreMem) segAt(addr uint64) *coreSeg {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].vaddr > addr })
	if i > 0 && addr-m.segs[i-1].vaddr < m.segs[i-1].memsz {
		return &m.segs[i-1]
	}
	return nil
}

// permAt describes the segment holding addr as a maps permission string.
func (m *coreMem) permAt(addr uint64) string {
	s := m.segAt(addr)
	if s == nil {
		return ""
	}
	return segPerm(s.flags)
}

// overlaps reports whether any segment of the core covers part of
// [lo, hi): gdb's gcore of a remote target (qemu-user's gdbstub) writes a
// segment per section, so a mapping's first page may be missing while
// the rest of it is there.
func (m *coreMem) overlaps(lo, hi uint64) bool {
	// The segment segAt(lo) would find, else the next one: one search.
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].vaddr > lo })
	if i > 0 && lo-m.segs[i-1].vaddr < m.segs[i-1].memsz {
		return true
	}
	return i < len(m.segs) && m.segs[i].vaddr < hi
}

// nextSegStart returns the lowest vaddr of a segment with dumped bytes
// above addr, or ^0.
func (m *coreMem) nextSegStart(addr uint64) uint64 {
	i := sort.Search(len(m.segs), func(i int) bool { return m.segs[i].vaddr > addr })
	for ; i < len(m.segs); i++ {
		if m.segs[i].filesz > 0 {
			return m.segs[i].vaddr
		}
	}
	return ^uint64(0)
}

// ReadAt reads len(p) bytes at addr.
func (m *coreMem) ReadAt(p []byte, addr int64) (int, error) {
	n := 0
	for n < len(p) {
		a := uint64(addr) + uint64(n)
		want := uint64(len(p) - n)
		if s := m.segAt(a); s != nil && a-s.vaddr < s.filesz {
			k := min(want, s.filesz-(a-s.vaddr))
			got, err := m.r.ReadAt(p[n:n+int(k)], int64(s.off+(a-s.vaddr)))
			n += got
			if err != nil && got < int(k) {
				return n, fmt.Errorf("reading core at %#x: %w", a, err)
			}
			continue
		}
		k, err := m.readFile(p[n:n+int(want)], a)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readFile reads memory at a from the file mapped there, up to the end of
// the mapping or the next dumped segment, whichever comes first.
func (m *coreMem) readFile(p []byte, a uint64) (int, error) {
	i := sort.Search(len(m.files), func(i int) bool { return m.files[i].start > a })
	var fm *ntFileEntry
	for j := i - 1; j >= 0 && j >= i-8; j-- {
		if a >= m.files[j].start && a < m.files[j].end {
			fm = &m.files[j]
			break
		}
	}
	if fm == nil {
		return 0, fmt.Errorf("core memory at %#x: %w", a, arch.ErrUnmapped)
	}
	k := min(uint64(len(p)), fm.end-a, m.nextSegStart(a)-a)
	f, err := m.file(fm.path)
	if err != nil {
		return 0, fmt.Errorf("core memory at %#x (not dumped, mapped from %s): %w", a, fm.path, err)
	}
	got, err := f.ReadAt(p[:k], int64(fm.off+(a-fm.start)))
	if got < int(k) {
		if err == nil || err == io.EOF {
			err = arch.ErrUnmapped
		}
		return got, fmt.Errorf("core memory at %#x from %s: %w", a+uint64(got), fm.path, err)
	}
	return got, nil
}

// refuse makes path a file that is never read: another build than the
// one the process mapped (checkFiles).
func (m *coreMem) refuse(path string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.open[path]; f != nil {
		f.Close()
	}
	m.open[path] = nil
}

// file opens (once) a mapped file.
func (m *coreMem) file(path string) (*os.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("core closed")
	}
	if f, ok := m.open[path]; ok {
		if f == nil {
			return nil, fmt.Errorf("%s could not be opened: %w", path, arch.ErrUnmapped)
		}
		return f, nil
	}
	if !isRegular(path) {
		// Device mappings (/dev/dri/...) and missing files: never opened.
		m.open[path] = nil
		return nil, fmt.Errorf("%s is not a readable regular file: %w", path, arch.ErrUnmapped)
	}
	f, err := sysfile.OpenRegular(path)
	if err != nil {
		m.open[path] = nil
		return nil, fmt.Errorf("%w (%w)", err, arch.ErrUnmapped)
	}
	m.open[path] = f
	return f, nil
}

func (m *coreMem) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.open {
		if f != nil {
			f.Close()
		}
	}
	m.open = map[string]*os.File{}
	m.closed = true
}

package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"

	"github.com/sframekit/sframekit/elffile"
)

// lineSections are the bytes a line table header's names are read from:
// .debug_line, and the string sections only DWARF 5 headers refer to,
// read on first use (a large file's .debug_str is tens of megabytes,
// which debug/dwarf holds already).
type lineSections struct {
	line         []byte
	order        binary.ByteOrder
	f            *elf.File
	lineStr, str []byte
	strsRead     [2]bool // lineStr, str
}

// readLineSections reads f's .debug_line (relocated, as debug/dwarf
// reads it); ok is false without it.
func readLineSections(f *elf.File) (s *lineSections, ok bool) {
	s = &lineSections{f: f, order: f.ByteOrder}
	s.line = readDebugSection(f, ".debug_line")
	return s, s.line != nil
}

// readDebugSection returns the bytes of f's section name, relocated as
// debug/dwarf reads them, or nil.
func readDebugSection(f *elf.File, name string) []byte {
	sec := f.Section(name)
	if sec == nil {
		return nil
	}
	b, err := elffile.SectionData(f, sec, elffile.RelocatedLenient)
	if err != nil {
		return nil
	}
	return b
}

// strings returns .debug_line_str (which 0) or .debug_str (which 1),
// read the first time.
func (s *lineSections) strings(which int) []byte {
	if !s.strsRead[which] {
		s.strsRead[which] = true
		if which == 0 {
			s.lineStr = readDebugSection(s.f, ".debug_line_str")
		} else {
			s.str = readDebugSection(s.f, ".debug_str")
		}
	}
	if which == 0 {
		return s.lineStr
	}
	return s.str
}

// DWARF forms a line table header's entry formats may use (DWARF 5,
// 7.5.6).
const (
	formBlock2   = 0x03
	formBlock4   = 0x04
	formData2    = 0x05
	formData4    = 0x06
	formData8    = 0x07
	formString   = 0x08
	formBlock    = 0x09
	formBlock1   = 0x0a
	formData1    = 0x0b
	formSdata    = 0x0d
	formStrp     = 0x0e
	formUdata    = 0x0f
	formData16   = 0x1e
	formLineStrp = 0x1f

	lnctPath     = 1
	lnctDirIndex = 2
)

// lineFileNames returns the file names of the line table at off in s.line,
// indexed as dwarf.LineReader.Files indexes them (from 1 before DWARF 5,
// entry 0 then ""), formed as libdw forms them and so as eu-stack and
// eu-addr2line print them: an absolute name as it stands, else its
// directory entry, "/" and the name. Neither is cleaned (glibc's
// "./nptl/pthread_create.c" keeps its "./"), and a relative directory is
// not joined to DW_AT_comp_dir, which is only directory 0 before DWARF 5
// (without one, hasCompDir false, such a file keeps its bare name); Go's
// debug/dwarf does both, so that its names are not those the other tools
// show. It returns nil where it cannot read the header (cut short, a form
// it does not know): the caller keeps debug/dwarf's names.
func lineFileNames(s *lineSections, off int64, compDir string, hasCompDir bool) []string {
	if off < 0 || off >= int64(len(s.line)) {
		return nil
	}
	r := lineHdr{b: s.line[off:], order: s.order}
	n := uint64(r.u32())
	if n == 0xffffffff {
		n, r.dwarf64 = r.u64(), true
	}
	if r.bad || n > uint64(len(r.b)) {
		return nil
	}
	r.b = r.b[:n]
	version := r.u16()
	if version < 2 || version > 5 {
		return nil
	}
	if version >= 5 {
		r.skip(2) // address and segment selector sizes
	}
	hlen := r.offset()
	if r.bad || hlen > uint64(len(r.b)) {
		return nil
	}
	r.b = r.b[:hlen]
	r.skip(1) // minimum_instruction_length
	if version >= 4 {
		r.skip(1) // maximum_operations_per_instruction
	}
	r.skip(3) // default_is_stmt, line_base, line_range
	opcodeBase := r.u8()
	if opcodeBase > 0 {
		r.skip(int(opcodeBase) - 1)
	}
	if r.bad {
		return nil
	}
	join := func(dir string, hasDir bool, name string) string {
		if len(name) > 0 && name[0] == '/' || !hasDir {
			return name
		}
		return dir + "/" + name
	}
	if version < 5 {
		dirs := []string{compDir}
		for {
			d := r.cstr()
			if r.bad {
				return nil
			}
			if d == "" {
				break
			}
			dirs = append(dirs, d)
		}
		names := []string{""}
		for {
			name := r.cstr()
			if r.bad {
				return nil
			}
			if name == "" {
				return names
			}
			di, _, _ := r.uleb(), r.uleb(), r.uleb()
			if r.bad || di >= uint64(len(dirs)) {
				return nil
			}
			names = append(names, join(dirs[di], di > 0 || hasCompDir, name))
		}
	}
	dirs := r.entries(s, nil)
	if r.bad {
		return nil
	}
	var names []string
	r.entries(s, func(path string, dir uint64) {
		if dir >= uint64(len(dirs)) {
			r.bad = true
			return
		}
		names = append(names, join(dirs[dir], true, path))
	})
	if r.bad {
		return nil
	}
	return names
}

// lineHdr reads a line table header; bad records a read past its end or
// a value it cannot take, after which every read returns zero.
type lineHdr struct {
	b       []byte
	order   binary.ByteOrder
	dwarf64 bool
	bad     bool
}

func (r *lineHdr) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *lineHdr) skip(n int) { r.take(n) }

func (r *lineHdr) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *lineHdr) u16() uint16 {
	if b := r.take(2); b != nil {
		return r.order.Uint16(b)
	}
	return 0
}

func (r *lineHdr) u32() uint32 {
	if b := r.take(4); b != nil {
		return r.order.Uint32(b)
	}
	return 0
}

func (r *lineHdr) u64() uint64 {
	if b := r.take(8); b != nil {
		return r.order.Uint64(b)
	}
	return 0
}

// offset reads a section offset or length: 8 bytes in 64-bit DWARF.
func (r *lineHdr) offset() uint64 {
	if r.dwarf64 {
		return r.u64()
	}
	return uint64(r.u32())
}

// uleb reads an unsigned LEB128 number, which is what binary.Uvarint
// decodes.
func (r *lineHdr) uleb() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *lineHdr) cstr() string {
	i := bytes.IndexByte(r.b, 0)
	if r.bad || i < 0 {
		r.bad = true
		return ""
	}
	return string(r.take(i + 1)[:i])
}

// strAt returns the NUL-terminated string at off in sec.
func (r *lineHdr) strAt(sec []byte, off uint64) string {
	if off >= uint64(len(sec)) {
		r.bad = true
		return ""
	}
	s := sec[off:]
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		r.bad = true
		return ""
	}
	return string(s[:i])
}

// entries reads a DWARF 5 directory or file name table: its entry
// format, then its entries. With each nil, it returns the entries'
// paths (the directory table); else it calls each with every entry's
// path and directory index.
func (r *lineHdr) entries(s *lineSections, each func(path string, dir uint64)) []string {
	nfmt := int(r.u8())
	type pair struct{ lnct, form uint64 }
	fmts := make([]pair, 0, nfmt)
	for i := 0; i < nfmt && !r.bad; i++ {
		fmts = append(fmts, pair{r.uleb(), r.uleb()})
	}
	count := r.uleb()
	// Each entry takes a byte at least: a count beyond the bytes left
	// is a lie, not an allocation to make.
	if r.bad || (nfmt == 0 && count != 0) || (nfmt > 0 && count > uint64(len(r.b))) {
		r.bad = true
		return nil
	}
	var paths []string
	for i := uint64(0); i < count && !r.bad; i++ {
		path, hasPath, dir := "", false, uint64(0)
		for _, f := range fmts {
			var str string
			var val uint64
			isStr := false
			switch f.form {
			case formString:
				str, isStr = r.cstr(), true
			case formLineStrp:
				str, isStr = r.strAt(s.strings(0), r.offset()), true
			case formStrp:
				str, isStr = r.strAt(s.strings(1), r.offset()), true
			case formUdata:
				val = r.uleb()
			case formSdata:
				r.uleb() // the same bytes as unsigned: only skipped
			case formData1:
				val = uint64(r.u8())
			case formData2:
				val = uint64(r.u16())
			case formData4:
				val = uint64(r.u32())
			case formData8:
				val = r.u64()
			case formData16:
				r.skip(16)
			case formBlock1:
				r.skip(int(r.u8()))
			case formBlock2:
				r.skip(int(r.u16()))
			case formBlock4:
				r.skip(int(r.u32()))
			case formBlock:
				r.skip(int(min(r.uleb(), uint64(len(r.b))+1)))
			default:
				// DW_FORM_strx and the like (split DWARF) need tables
				// this reader does not have.
				r.bad = true
			}
			switch {
			case f.lnct == lnctPath && isStr:
				path, hasPath = str, true
			case f.lnct == lnctPath:
				r.bad = true
			case f.lnct == lnctDirIndex:
				dir = val
			}
		}
		if !hasPath {
			r.bad = true
		}
		if r.bad {
			return nil
		}
		if each != nil {
			each(path, dir)
		} else {
			paths = append(paths, path)
		}
	}
	return paths
}

package cfi

import (
	"debug/elf"
	"fmt"
	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/textfmt"
	"io"
	"strconv"
)

// Dump writes the CFI sections of an ELF file in the text format of
// `readelf --debug-dump=frames-interp` (binutils 2.47), byte for byte,
// so that output can be diffed against binutils. section selects one of
// ".eh_frame_hdr", ".eh_frame" or ".debug_frame"; "" prints every CFI
// section in section-header order, as readelf does.
//
// The output reproduces readelf's display conventions, including ones
// that differ from the unwinding semantics of the Table API: a row at
// every advance (even by zero), no rows for programs of only DW_CFA_nop,
// remembered states shared by all entries of a section, and "bad
// register" lines for numbers beyond the architecture's table.
//
// Sections are read with SectionData (a compressed one may expand to at
// most elffile.MaxDecompressed) and rows are printed as they are computed,
// so memory stays bounded by the section size whatever the row count.
func Dump(w io.Writer, f *elf.File, section string) error {
	found := false
	var firstErr error
	for _, s := range f.Sections {
		switch s.Name {
		case ".eh_frame", ".eh_frame_hdr", ".debug_frame", ".zdebug_frame":
		default:
			continue
		}
		if section != "" && s.Name != section && !(section == ".debug_frame" && s.Name == ".zdebug_frame") {
			continue
		}
		found = true
		if err := dumpSection(w, f, s); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if !found && section != "" {
		return fmt.Errorf("no %s section", section)
	}
	return firstErr
}

func dumpSection(w io.Writer, f *elf.File, s *elf.Section) error {
	if s.Size == 0 {
		_, err := fmt.Fprintf(w, "\nSection '%s' has no debugging data.\n", s.Name)
		return err
	}
	if s.Type == elf.SHT_NOBITS {
		_, err := fmt.Fprintf(w, "section '%s' has the NOBITS type - its contents are unreliable.\n", s.Name)
		return err
	}
	data, err := SectionData(f, s)
	if err != nil {
		return err
	}
	p := &printer{w: w, addrSize: elfAddrSize(f), arch: arch.FromELF(f.Machine), order: endianOf(f.ByteOrder)}
	// Room for what accumulates between flushes (maybeFlush at 64 KiB,
	// plus the FDE that crossed it), so that the buffer is allocated once.
	p.out = make([]byte, 0, min(len(data)*4+4096, 96<<10))
	if s.Name == ".eh_frame_hdr" {
		p.hdr(data, s.Addr)
		return p.flush()
	}
	kind := EHFrame
	if s.Name != ".eh_frame" {
		kind = DebugFrame
	}
	t, err := New(data, Options{Kind: kind, Addr: s.Addr, ByteOrder: f.ByteOrder, AddrSize: p.addrSize, Arch: p.arch})
	if err != nil {
		return err
	}
	t.name = s.Name
	p.frames(s.Name, t)
	return p.flush()
}

// compat carries readelf's display quirks into the interpreter.
type compat struct {
	keepStack bool
	arch      arch.Arch
	out       *[]byte
}

// bad reports whether readelf rejects register r ("bad register: "): its
// column table stops at the architecture's name table, or at 1024.
func (c *compat) bad(r arch.Reg) bool {
	if n := c.arch.NumRegNames(); n > 0 {
		return uint64(r) > uint64(n)
	}
	return r >= 1024
}

func (c *compat) badReg(u *interp, op Op, col arch.Reg, s slot) bool {
	if !c.bad(col) {
		return false
	}
	b := *c.out
	b = append(b, "  "...)
	b = append(b, op.String()...)
	b = append(b, ": bad register: r"...)
	b = strconv.AppendUint(b, uint64(col), 10)
	ru := s.rule(u.t.data)
	switch op {
	case OpOffset, OpOffsetExtended, OpOffsetExtendedSF, OpGNUNegativeOffsetExtended:
		b = append(b, " at cfa"...)
		b = textfmt.AppendSigned(b, ru.Offset)
	case OpValOffset, OpValOffsetSF:
		b = append(b, " is cfa"...)
		b = textfmt.AppendSigned(b, ru.Offset)
	case OpRegister:
		b = append(b, " in "...)
		b = append(b, c.arch.RegNameLong(ru.Reg)...)
	case OpExpression, OpValExpression:
		b = append(b, " ("...)
		b = appendExprText(b, ru.Expr, c.arch)
		b = append(b, ')')
	}
	b = append(b, '\n')
	*c.out = b
	return true
}

func (c *compat) mismatchedRestore() {
	*c.out = append(*c.out, "Mismatched DW_CFA_restore_state\n"...)
}

func (c *compat) unknownOp(op Op) {
	if op >= OpLoUser && op <= OpHiUser {
		*c.out = append(*c.out, "  DW_CFA_??? (User defined call frame op: 0x"...)
		*c.out = strconv.AppendUint(*c.out, uint64(op), 16)
		*c.out = append(*c.out, ")\n"...)
	}
}

// printer accumulates output in a byte slice; appending by hand is much
// faster than fmt for the hundreds of thousands of rows of a large file.
type printer struct {
	w        io.Writer
	out      []byte
	err      error
	addrSize int
	arch     arch.Arch
	order    endian
}

func (p *printer) flush() error {
	if p.err == nil && len(p.out) > 0 {
		_, p.err = p.w.Write(p.out)
	}
	p.out = p.out[:0]
	return p.err
}

func (p *printer) maybeFlush() {
	if len(p.out) > 64<<10 {
		p.flush()
	}
}

func appendHex(b []byte, v uint64, bytes int) []byte {
	if bytes <= 0 || bytes > 8 {
		bytes = 2
	}
	return textfmt.AppendHex(b, v, bytes)
}

// appendCHex formats like C's "%#x": "0" for zero, else "0x..".
func appendCHex(b []byte, v uint64) []byte {
	if v == 0 {
		return append(b, '0')
	}
	b = append(b, "0x"...)
	return strconv.AppendUint(b, v, 16)
}

// readelfEnc describes an encoding as readelf's decode_eh_encoding does
// (which has no name for the absptr format).
func readelfEnc(e PtrEnc) string { return e.String() }

// hdrValue is readelf's get_encoded_eh_value: the raw value without the
// application applied; ok is false for formats it cannot read.
func (p *printer) hdrValue(enc PtrEnc, data []byte, pos int) (uint64, int, bool) {
	b := buf{data: data, pos: pos, order: p.order}
	v, ok := b.readFormat(enc & 0x0f)
	if !ok || b.err != nil {
		return 0, 0, false
	}
	return v, b.pos - pos, true
}

func hdrOffset(enc PtrEnc, addr, secOff, v uint64) uint64 {
	switch enc & 0xf0 {
	case PEPCRel:
		return v + addr + secOff
	case PEDataRel:
		return v + addr
	}
	return v
}

// hdr prints .eh_frame_hdr like readelf's display_eh_frame_hdr.
func (p *printer) hdr(data []byte, addr uint64) {
	p.out = append(p.out, "Contents of the .eh_frame_hdr section:\n\n"...)
	if len(data) < 6 || data[0] != 1 {
		return
	}
	ptrEnc, countEnc, tableEnc := PtrEnc(data[1]), PtrEnc(data[2]), PtrEnc(data[3])
	p.out = append(p.out, "  Version:                 1\n"...)
	for _, x := range []struct {
		label string
		e     PtrEnc
	}{{"  Pointer Encoding Format: ", ptrEnc}, {"  Count Encoding Format:   ", countEnc}, {"  Table Encoding Format:   ", tableEnc}} {
		p.out = append(p.out, x.label...)
		p.out = appendCHex(p.out, uint64(x.e))
		p.out = append(p.out, " ("...)
		p.out = append(p.out, readelfEnc(x.e)...)
		p.out = append(p.out, ")\n"...)
	}
	pos := 4
	ehPtr, n, ok := p.hdrValue(ptrEnc, data, pos)
	if !ok {
		return
	}
	p.out = append(p.out, "  Start of frame section:  "...)
	p.out = appendCHex(p.out, ehPtr)
	ehOff := hdrOffset(ptrEnc, addr, 4, ehPtr)
	if ehOff != ehPtr {
		p.out = append(p.out, " (offset: "...)
		p.out = appendCHex(p.out, ehOff)
		p.out = append(p.out, ')')
	}
	p.out = append(p.out, '\n')
	pos += n
	if countEnc == PEOmit || countEnc&0xf0 != 0 {
		return
	}
	count, n, ok := p.hdrValue(countEnc, data, pos)
	if !ok {
		return
	}
	p.out = append(p.out, "  Entries in search table: "...)
	p.out = appendCHex(p.out, count)
	p.out = append(p.out, '\n')
	pos += n
	if count != 0 && tableEnc == PEOmit {
		return
	}
	for i := uint64(0); i < count; i++ {
		row := pos
		loc, n, ok := p.hdrValue(tableEnc, data, pos)
		if !ok {
			return
		}
		pos += n
		fa, n, ok := p.hdrValue(tableEnc, data, pos)
		if !ok {
			return
		}
		pos += n
		p.out = append(p.out, "  "...)
		p.out = appendCHex(p.out, loc)
		p.out = append(p.out, " (offset: "...)
		p.out = appendCHex(p.out, hdrOffset(tableEnc, addr, uint64(row), loc))
		p.out = append(p.out, ") -> "...)
		p.out = appendCHex(p.out, fa)
		p.out = append(p.out, " fde=[ "...)
		s := strconv.FormatUint(hdrOffset(tableEnc, addr, uint64(row), fa)-ehOff, 16)
		for j := len(s); j < 5; j++ {
			p.out = append(p.out, ' ')
		}
		p.out = append(p.out, s...)
		p.out = append(p.out, "]\n"...)
		p.maybeFlush()
	}
	p.out = append(p.out, '\n')
}

// shownCIE is a CIE as readelf remembers it while walking a section: its
// display columns and the state its FDEs start from.
type shownCIE struct {
	cie  *CIE
	cols []arch.Reg
	init Row
}

// frames prints .eh_frame or .debug_frame like readelf's
// display_debug_frames in frames-interp mode.
func (p *printer) frames(name string, t *Table) {
	p.out = append(p.out, "Contents of the "...)
	p.out = append(p.out, name...)
	p.out = append(p.out, " section:\n\n"...)
	data := t.data
	c := &compat{keepStack: true, arch: p.arch, out: &p.out}
	ut := &UnwindTable{keepAll: true}
	ut.u.t = t
	ut.u.compat = c
	seen := map[uint64]*shownCIE{}
	forward := map[uint64]*shownCIE{}
	var cols []arch.Reg
	// The FDEs' initial rows, one reused: a Row declared in the loop
	// escaped to the heap, 1.7 MB for a 3,000-FDE file.
	var init Row
	for off := 0; off < len(data); {
		p.maybeFlush()
		h, herr := t.readHeader(uint64(off))
		if herr == nil && h.zero {
			p.out = append(p.out, '\n')
			p.out = appendHex(p.out, uint64(off), 4)
			p.out = append(p.out, " ZERO terminator\n\n"...)
			off = h.end
			for off < len(data) && data[off] == 0 {
				off++
			}
			continue
		}
		if herr != nil && (!h.trunc || h.body == 0) {
			break
		}
		if h.isCIE {
			cie, err := t.parseCIE(&h)
			if err != nil || c.badRA(cie.RA) {
				break
			}
			sc := &shownCIE{cie: cie}
			p.entryHead(&h, int(cie.AddressSize))
			p.out = append(p.out, "CIE \""...)
			p.out = append(p.out, cie.Augmentation...)
			p.out = append(p.out, "\" cf="...)
			p.out = strconv.AppendInt(p.out, int64(int32(uint32(cie.CodeAlign))), 10)
			p.out = append(p.out, " df="...)
			p.out = strconv.AppendInt(p.out, int64(int32(cie.DataAlign)), 10)
			p.out = append(p.out, " ra="...)
			p.out = strconv.AppendInt(p.out, int64(int32(cie.RA)), 10)
			p.out = append(p.out, '\n')
			sc.cols = p.scanRegs(t, cie.Instructions, cie.instrOff, cie, nil, c)
			ut.u.reset(cie, cie.Instructions, cie.instrOff, 0, nil, 0)
			ut.end, ut.done = 0, false
			p.rows(ut, cie, sc.cols, int(cie.AddressSize))
			sc.init.copyFrom(&ut.u.state)
			seen[h.off] = sc
			off = h.end
			continue
		}
		// FDE: find its CIE the way readelf does.
		var sc *shownCIE
		var cieOff uint64
		if t.kind == EHFrame {
			id := h.id
			if h.idWidth == 4 {
				id = uint64(int64(int32(uint32(id))))
			}
			cieOff = uint64(h.idPos) - id
		} else {
			cieOff = h.id
		}
		if cieOff < uint64(len(data)) {
			if cieOff <= uint64(off) {
				sc = seen[cieOff]
			} else if sc = forward[cieOff]; sc == nil {
				ch, err := t.readHeader(cieOff)
				if err == nil && !ch.zero && ch.isCIE {
					cie, err := t.parseCIE(&ch)
					if err != nil || c.badRA(cie.RA) {
						break
					}
					// readelf reads a forward CIE without running its
					// instructions: its FDEs start from an empty state.
					sc = &shownCIE{cie: cie}
					forward[cieOff] = sc
				}
			}
		}
		cie := (*CIE)(nil)
		if sc != nil {
			cie = sc.cie
		} else {
			cie = &CIE{AddressSize: uint8(p.addrSize), FDEEncoding: PEAbsPtr, LSDAEncoding: PEOmit, PersonalityEncoding: PEOmit}
		}
		ptrSize := int(cie.AddressSize)
		begin, rng, instrPos, segment := p.fdeFields(t, &h, cie)
		p.entryHead(&h, ptrSize)
		p.out = append(p.out, "FDE "...)
		if sc != nil {
			p.out = append(p.out, "cie="...)
			p.out = appendHex(p.out, cieOff, 4)
		} else {
			p.out = append(p.out, "cie=invalid "...)
		}
		p.out = append(p.out, " pc="...)
		if cie.SegmentSize > 0 {
			s := strconv.FormatUint(segment, 16)
			for j := len(s); j < 4; j++ {
				p.out = append(p.out, '0')
			}
			p.out = append(p.out, s...)
			p.out = append(p.out, ':')
		}
		p.out = appendHex(p.out, begin, ptrSize)
		p.out = append(p.out, ".."...)
		p.out = appendHex(p.out, begin+rng, ptrSize)
		p.out = append(p.out, '\n')

		instr := data[instrPos:h.end:h.end]
		if sc != nil {
			init.copyFrom(&sc.init)
			if init.CFA.Kind == CFAExpression {
				// readelf does not copy the CIE's "CFA is an expression"
				// flag into an FDE; it shows the register and offset.
				init.CFA.Kind = CFARegOffset
			}
			cols = append(cols[:0], sc.cols...)
		} else {
			init = Row{}
			cols = cols[:0]
		}
		cols = p.scanRegs(t, instr, uint64(instrPos), cie, cols, c)
		ut.u.reset(cie, instr, uint64(instrPos), begin, &init, begin)
		ut.end, ut.done = begin+rng, false
		p.rows(ut, cie, cols, ptrSize)
		off = h.end
	}
	p.out = append(p.out, '\n')
}

func (c *compat) badRA(ra arch.Reg) bool { return c.bad(ra) }

// entryHead prints "\nOFFSET LENGTH ID ".
func (p *printer) entryHead(h *header, ptrSize int) {
	p.out = append(p.out, '\n')
	p.out = appendHex(p.out, h.off, 4)
	p.out = append(p.out, ' ')
	p.out = appendHex(p.out, h.length, ptrSize)
	p.out = append(p.out, ' ')
	p.out = appendHex(p.out, h.id, h.idWidth)
	p.out = append(p.out, ' ')
}

// sizeOfEncoded is readelf's size_of_encoded_value.
func sizeOfEncoded(e PtrEnc, addrSize int) int {
	switch e & 7 {
	case 2:
		return 2
	case 3:
		return 4
	case 4:
		return 8
	}
	return addrSize
}

// fdeFields decodes an FDE's header the way readelf does (fixed-size
// reads, only pcrel applied) and returns where the instructions start.
func (p *printer) fdeFields(t *Table, h *header, cie *CIE) (begin, rng uint64, instrPos int, segment uint64) {
	b := buf{data: t.data[:h.end], pos: h.body, order: t.end}
	ptr := int(cie.AddressSize)
	encSize := p.addrSize
	if cie.FDEEncoding != 0 {
		encSize = sizeOfEncoded(cie.FDEEncoding, ptr)
	}
	if cie.SegmentSize > 0 {
		segment = b.uint(int(cie.SegmentSize))
	}
	size := sizeOfEncoded(cie.FDEEncoding, ptr)
	if b.left() >= size {
		pos := b.pos
		v := b.uint(size)
		if cie.FDEEncoding&PESigned != 0 && size < 8 {
			sh := 64 - 8*uint(size)
			v = uint64(int64(v<<sh) >> sh)
		}
		if cie.FDEEncoding&0x70 == PEPCRel {
			v += t.addr + uint64(pos)
		}
		begin = v
	} else {
		b.pos = len(b.data)
	}
	if b.left() >= encSize {
		rng = b.uint(encSize)
	} else {
		b.pos = len(b.data)
	}
	if len(cie.Augmentation) > 0 && cie.Augmentation[0] == 'z' {
		n := b.uleb()
		if n > uint64(b.left()) {
			b.pos = len(b.data)
		} else {
			b.pos += int(n)
		}
	}
	return begin, rng, b.pos, segment
}

// scanRegs is readelf's first pass over a program: every register an
// instruction names becomes a display column (added to cols, sorted). It
// decodes as readelf does (see InstructionIter's readelf mode) and, like
// readelf, still counts the register of an instruction cut short.
func (p *printer) scanRegs(t *Table, instr []byte, off uint64, cie *CIE, cols []arch.Reg, c *compat) []arch.Reg {
	it := t.instrIter(cie, instr, off, 0)
	it.readelf = true
	it.setLocSize = p.addrSize
	if cie.FDEEncoding != 0 {
		it.setLocSize = sizeOfEncoded(cie.FDEEncoding, int(cie.AddressSize))
	}
	var ins Instruction
	for {
		ok := it.Next(&ins)
		if !ok && it.Err() == nil {
			return cols
		}
		if ins.Op.namesColumn() && ins.Reg != 0xffffffff && !c.bad(ins.Reg) {
			cols = insertReg(cols, ins.Reg)
		}
		if !ok {
			return cols
		}
	}
}

func insertReg(cols []arch.Reg, r arch.Reg) []arch.Reg {
	i := 0
	for i < len(cols) && cols[i] < r {
		i++
	}
	if i < len(cols) && cols[i] == r {
		return cols
	}
	cols = append(cols, 0)
	copy(cols[i+1:], cols[i:])
	cols[i] = r
	return cols
}

// rows prints every row of the program like readelf's frame_display_row.
func (p *printer) rows(ut *UnwindTable, cie *CIE, cols []arch.Reg, ptrSize int) {
	header := true
	for ut.Next() {
		if header {
			header = false
			start := len(p.out)
			p.out = append(p.out, "   LOC"...)
			p.out = textfmt.PadTo(p.out, start, 2*ptrSize)
			p.out = append(p.out, " CFA      "...)
			for _, r := range cols {
				start := len(p.out)
				if r == cie.RA {
					p.out = append(p.out, "ra"...)
				} else {
					p.out = append(p.out, p.arch.RegName(r)...)
				}
				p.out = textfmt.PadTo(p.out, start, 5)
				p.out = append(p.out, ' ')
			}
			p.out = append(p.out, '\n')
		}
		row := ut.Row()
		p.out = appendHex(p.out, row.Start, ptrSize)
		p.out = append(p.out, ' ')
		start := len(p.out)
		if row.CFA.Kind == CFAExpression {
			p.out = append(p.out, "exp"...)
		} else {
			p.out = append(p.out, p.arch.RegName(row.CFA.Reg)...)
			if row.CFA.signed {
				p.out = textfmt.AppendSigned(p.out, row.CFA.Offset)
			} else {
				p.out = append(p.out, '+')
				p.out = strconv.AppendUint(p.out, uint64(row.CFA.Offset), 10)
			}
		}
		p.out = textfmt.PadTo(p.out, start, 8)
		p.out = append(p.out, ' ')
		// Columns and rules are both sorted by register: walk them together.
		j := 0
		for _, r := range cols {
			start := len(p.out)
			for j < row.n && row.ptr(j).col < r {
				j++
			}
			kind, val := RuleUnspecified, int64(0)
			if j < row.n && row.ptr(j).col == r {
				s := row.ptr(j)
				kind, val = s.kind, s.val
			}
			switch kind {
			case RuleUnspecified, RuleUndefined:
				p.out = append(p.out, 'u')
			case RuleSameValue:
				p.out = append(p.out, 's')
			case RuleOffset:
				p.out = append(p.out, 'c')
				p.out = textfmt.AppendSigned(p.out, val)
			case RuleValOffset:
				p.out = append(p.out, 'v')
				p.out = textfmt.AppendSigned(p.out, val)
			case RuleRegister:
				p.out = append(p.out, p.arch.RegNameLong(arch.Reg(val))...)
			case RuleExpression:
				p.out = append(p.out, "exp"...)
			case RuleValExpression:
				p.out = append(p.out, "vexp"...)
			}
			p.out = textfmt.PadTo(p.out, start, 5)
			p.out = append(p.out, ' ')
		}
		p.out = append(p.out, '\n')
		p.maybeFlush() // one FDE may have millions of rows
	}
}

package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/byteorder"
)

// Options describe a CFI section to New: where it is loaded and how to
// read it. Only ByteOrder and AddrSize are required.
type Options struct {
	Kind      SectionKind      // EHFrame (default) or DebugFrame
	Addr      uint64           // virtual address of the section (pcrel base)
	ByteOrder binary.ByteOrder // file byte order
	AddrSize  int              // 4 or 8 (ELF class)
	Arch      arch.Arch        // register names and machine augmentations
	TextBase  uint64           // base for DW_EH_PE_textrel
	DataBase  uint64           // base for DW_EH_PE_datarel (e.g. .got on i386)
	// ReadPointer resolves DW_EH_PE_indirect pointers by reading size
	// bytes at a virtual address; nil leaves indirect pointers unresolved
	// (an error for the FDE that uses one). A Table used from several
	// goroutines calls it from several goroutines.
	ReadPointer func(addr uint64, size int) (uint64, error)
	// Hdr is the .eh_frame_hdr section and HdrAddr its address; when its
	// binary-search table is usable, lookups use it instead of an index.
	Hdr     []byte
	HdrAddr uint64 // address of Hdr (its datarel base)
}

// CIE is a Common Information Entry: what FDEs share, including the
// alignment factors, the return-address column and the initial rules.
type CIE struct {
	Offset       uint64   // section offset of the length field
	Length       uint64   // value of the length field
	Format64     bool     // 64-bit DWARF (initial length 0xffffffff)
	Version      uint8    // 1 (.eh_frame, DWARF 2), 3 or 4
	Augmentation string   // e.g. "zR", "zPLR", "zRS", "zRB"; "" in .debug_frame
	AddressSize  uint8    // pointer size for this CIE's FDEs
	SegmentSize  uint8    // DWARF 4 segment selector size (normally 0)
	CodeAlign    uint64   // code alignment factor: scales advance_loc deltas
	DataAlign    int64    // data alignment factor: scales register offsets
	RA           arch.Reg // return address column
	AugData      []byte   // raw augmentation data ('z'), a view into the section
	// FDEEncoding ('R'), LSDAEncoding ('L') and PersonalityEncoding ('P')
	// are PEOmit when the letter is absent (FDEEncoding then is PEAbsPtr).
	FDEEncoding         PtrEnc // encoding of FDE addresses ('R')
	LSDAEncoding        PtrEnc // encoding of FDE LSDA pointers ('L')
	PersonalityEncoding PtrEnc // encoding of Personality ('P')
	Personality         uint64 // personality routine address ('P'); the pointer's address if indirect and unresolvable
	SignalFrame         bool   // 'S': the frame is a signal trampoline; do not subtract 1 from the PC
	BKey                bool   // 'B' (AArch64): return address signed with the B key
	MTETagged           bool   // 'G' (AArch64): frames are MTE-tagged
	Instructions        []byte // initial instructions (view into the section)

	instrOff uint64
	owner    *Table // the Table whose cache holds the CIE; nil if none
	// The rules after the initial instructions, computed before the CIE
	// is shared (initDone), then never changed.
	init     Row
	initDone bool
	initErr  error
}

// FDE is a Frame Description Entry: the CFI program for one address range.
type FDE struct {
	Offset     uint64 // section offset of the length field
	Length     uint64 // value of the length field
	Format64   bool   // 64-bit DWARF (initial length 0xffffffff)
	CIEPointer uint64 // raw CIE pointer field
	CIE        *CIE   // the CIE the FDE refers to (shared, cached)
	PCBegin    uint64 // first address covered
	PCEnd      uint64 // PCBegin + address range
	Segment    uint64 // DWARF 4 segment selector (normally 0)
	AugData    []byte // raw augmentation data ('z'), a view into the section
	LSDA       uint64 // language-specific data area ('L'), if HasLSDA
	HasLSDA    bool   // the FDE has an LSDA pointer
	// Instructions is the CFI program (view into the section).
	Instructions []byte

	instrOff uint64
}

// Contains reports whether pc is in the FDE's range.
func (f *FDE) Contains(pc uint64) bool { return pc >= f.PCBegin && pc < f.PCEnd }

// Table gives access to one CFI section: iteration over its entries, the
// row tables of FDEs and fast PC lookups. It keeps views into the section
// bytes and never copies them.
//
// A Table does not change once made, and all its methods may be called
// from several goroutines at once. It fills two caches on first use,
// each safely: decoded CIEs (with their initial rules; a mutex guards the
// map, and a CIE is never changed once in it) and, without a usable
// .eh_frame_hdr, the sorted FDE index (built once, under a sync.Once).
// What its methods return is the caller's (FDE values, Rows) or immutable
// (*CIE). The mutable state of a walk or a lookup lives in values the
// caller owns, each for one goroutine at a time: EntryIterator,
// UnwindTable, InstructionIter and UnwindContext.
type Table struct {
	kind     SectionKind
	name     string
	data     []byte
	addr     uint64
	order    binary.ByteOrder
	end      endian
	addrSize int
	arch     arch.Arch
	text     uint64
	dataBase uint64
	deref    func(uint64, int) (uint64, error)
	hdr      *EHFrameHdr

	ciesMu sync.Mutex
	cies   map[uint64]*CIE

	indexOnce sync.Once
	index     []indexEntry
}

type indexEntry struct {
	begin, end uint64
	off        uint64
}

// New makes a Table over a CFI section's bytes. It checks only the
// options; entries are decoded as they are used, and a bad entry affects
// only itself.
func New(data []byte, o Options) (*Table, error) {
	if o.ByteOrder == nil {
		return nil, errors.New("Options.ByteOrder is required")
	}
	if uint64(len(data)) >= 1<<32 {
		return nil, errors.New("sections of 4 GiB or more are not supported")
	}
	if o.AddrSize != 4 && o.AddrSize != 8 {
		return nil, fmt.Errorf("unsupported address size %d", o.AddrSize)
	}
	t := &Table{
		kind: o.Kind, name: o.Kind.String(), data: data, addr: o.Addr, order: o.ByteOrder, end: byteorder.Of(o.ByteOrder),
		addrSize: o.AddrSize, arch: o.Arch, text: o.TextBase, dataBase: o.DataBase, deref: o.ReadPointer,
		cies: make(map[uint64]*CIE),
	}
	if o.Kind == EHFrame && len(o.Hdr) > 0 {
		if h, err := ParseEHFrameHdr(o.Hdr, o.HdrAddr, o.ByteOrder, o.AddrSize); err == nil && h.searchable() {
			t.hdr = h
		}
	}
	return t, nil
}

// Kind returns whether this is .eh_frame or .debug_frame data.
func (t *Table) Kind() SectionKind { return t.kind }

// Arch returns the architecture given at construction.
func (t *Table) Arch() arch.Arch { return t.arch }

// Addr returns the section's virtual address.
func (t *Table) Addr() uint64 { return t.addr }

// Data returns the section bytes the table reads (relocated for objects),
// shared with the Table: they must not be modified.
func (t *Table) Data() []byte { return t.data }

// AddrSize returns the default pointer size in bytes.
func (t *Table) AddrSize() int { return t.addrSize }

// ByteOrder returns the byte order of the data.
func (t *Table) ByteOrder() binary.ByteOrder { return t.order }

// Hdr returns the parsed .eh_frame_hdr used for lookups, or nil.
func (t *Table) Hdr() *EHFrameHdr { return t.hdr }

func (t *Table) errAt(kind ErrKind, off uint64, format string, args ...any) *Error {
	return &Error{Section: t.name, Offset: off, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// ptrCtx is the context for decoding pointers from a buffer whose first
// byte is at section offset secOff.
func (t *Table) ptrCtx(secOff uint64, cie *CIE) ptrCtx {
	as := t.addrSize
	if cie != nil && cie.AddressSize != 0 {
		as = int(cie.AddressSize)
	}
	return ptrCtx{secAddr: t.addr + secOff, addrSize: as, text: t.text, data: t.dataBase, deref: t.deref}
}

// header is the common start of a CIE or FDE.
type header struct {
	off     uint64
	length  uint64
	is64    bool
	idPos   int // position of the CIE id / pointer field
	id      uint64
	body    int // position after the id field
	end     int // position after the entry
	isCIE   bool
	zero    bool // a zero length word (terminator)
	trunc   bool // length runs past the section end
	idWidth int
}

func (t *Table) readHeader(off uint64) (header, error) {
	// Fast path: a 32-bit entry that fits in the section.
	if off+8 <= uint64(len(t.data)) {
		l := uint64(t.end.Uint32(t.data[off:]))
		if l >= 4 && l < 0xfffffff0 && l <= uint64(len(t.data))-off-4 {
			id := uint64(t.end.Uint32(t.data[off+4:]))
			h := header{off: off, length: l, idPos: int(off) + 4, id: id, body: int(off) + 8, end: int(off + 4 + l), idWidth: 4}
			if t.kind == EHFrame {
				h.isCIE = id == 0
			} else {
				h.isCIE = id == 0xffffffff
			}
			return h, nil
		}
	}
	h := header{off: off}
	if off >= uint64(len(t.data)) {
		return h, t.errAt(ErrBounds, off, "entry offset outside the section")
	}
	b := buf{data: t.data, pos: int(off), order: t.end}
	l := uint64(b.u32())
	if b.err != nil {
		return h, t.errAt(ErrTruncated, off, "truncated length field")
	}
	if l == 0 {
		h.zero = true
		h.end = b.pos
		return h, nil
	}
	h.idWidth = 4
	if l == 0xffffffff {
		l = b.u64()
		if b.err != nil {
			return h, t.errAt(ErrTruncated, off, "truncated 64-bit length field")
		}
		h.is64 = true
		h.idWidth = 8
	} else if l >= 0xfffffff0 {
		return h, t.errAt(ErrBadLength, off, "reserved length value %#x", l)
	}
	h.length = l
	var err error
	if l > uint64(b.left()) {
		// Still decode what is there: readelf shows such an entry up to
		// the section end, and the caller decides.
		h.trunc = true
		h.end = len(t.data)
		err = t.errAt(ErrBounds, off, "length %#x runs past the end of the section", l)
	} else {
		h.end = b.pos + int(l)
	}
	if uint64(h.end-b.pos) < uint64(h.idWidth) {
		h.idPos = b.pos
		h.body = h.end
		if err == nil {
			err = t.errAt(ErrBadLength, off, "length %#x too short for an entry", l)
		}
		return h, err
	}
	h.idPos = b.pos
	h.id = b.uint(h.idWidth)
	h.body = b.pos
	if t.kind == EHFrame {
		h.isCIE = h.id == 0
	} else {
		h.isCIE = (h.idWidth == 4 && h.id == 0xffffffff) || (h.idWidth == 8 && h.id == ^uint64(0))
	}
	return h, err
}

// EntryHeader is the start of a CIE or FDE as it is encoded: the length
// and ID fields, with where the entry's parts lie, nothing of the body
// decoded. It is for callers that walk a section their own way, such as a
// printer that shows each entry as it is (Entries is the usual walk).
type EntryHeader struct {
	Offset   uint64    // section offset of the length field
	Length   uint64    // the length field (0: a terminator)
	Format64 bool      // 64-bit DWARF: an 8-byte length after 0xffffffff, an 8-byte ID
	Kind     EntryKind // KindCIE, KindFDE or KindTerminator, from the ID field
	// ID is the ID field as stored: the CIE ID (0 in .eh_frame, all ones
	// in .debug_frame) or an FDE's CIE pointer (in .eh_frame, the distance
	// back from the field itself to the CIE; in .debug_frame, the CIE's
	// section offset).
	ID       uint64
	IDOffset uint64 // section offset of the ID field
	Body     uint64 // section offset after the ID field
	End      uint64 // section offset after the entry
	// Truncated says the length runs past the end of the section: End is
	// then the section's end. If even the ID field is cut off, Body is End
	// and the entry reads as an FDE with ID 0.
	Truncated bool
}

// EntryHeaderAt reads the header of the entry at section offset off. A
// length that runs past the section's end returns the header, Truncated,
// with an error; any other error (a length field cut off, a reserved
// length value, an entry too short for its ID) returns no usable header.
func (t *Table) EntryHeaderAt(off uint64) (EntryHeader, error) {
	// Fast path: a 32-bit entry that fits in the section (see readHeader).
	if off+8 <= uint64(len(t.data)) {
		l := uint64(t.end.Uint32(t.data[off:]))
		if l >= 4 && l < 0xfffffff0 && l <= uint64(len(t.data))-off-4 {
			e := EntryHeader{Offset: off, Length: l, Kind: KindFDE, ID: uint64(t.end.Uint32(t.data[off+4:])),
				IDOffset: off + 4, Body: off + 8, End: off + 4 + l}
			if (t.kind == EHFrame && e.ID == 0) || (t.kind != EHFrame && e.ID == 0xffffffff) {
				e.Kind = KindCIE
			}
			return e, nil
		}
	}
	h, err := t.readHeader(off)
	if err != nil && !h.trunc {
		return EntryHeader{Offset: off}, err
	}
	e := EntryHeader{Offset: h.off, Length: h.length, Format64: h.is64, ID: h.id, IDOffset: uint64(h.idPos),
		Body: uint64(h.body), End: uint64(h.end), Truncated: h.trunc, Kind: KindFDE}
	switch {
	case h.zero:
		e.Kind = KindTerminator
		e.IDOffset, e.Body = e.End, e.End
	case h.isCIE:
		e.Kind = KindCIE
	}
	return e, err
}

// header converts h back, checking what a caller may have changed.
func (t *Table) header(h *EntryHeader) (header, error) {
	if h.Kind == KindTerminator || h.Body > h.End || h.End > uint64(len(t.data)) || h.IDOffset > h.Body || h.Offset > h.IDOffset {
		return header{}, t.errAt(ErrBadEntry, h.Offset, "not an entry header of this section")
	}
	w := 4
	if h.Format64 {
		w = 8
	}
	return header{off: h.Offset, length: h.Length, is64: h.Format64, idPos: int(h.IDOffset), id: h.ID,
		body: int(h.Body), end: int(h.End), isCIE: h.Kind == KindCIE, trunc: h.Truncated, idWidth: w}, nil
}

// DecodeCIE decodes the CIE whose header EntryHeaderAt read, a Truncated
// one included (its body then ends at the section's end), as readelf shows
// such entries. Unlike CIEAt, it neither caches the CIE nor runs its
// initial instructions: every call decodes afresh.
func (t *Table) DecodeCIE(h *EntryHeader) (*CIE, error) {
	if h.Kind != KindCIE {
		return nil, t.errAt(ErrBadEntry, h.Offset, "not a CIE")
	}
	ih, err := t.header(h)
	if err != nil {
		return nil, err
	}
	return t.parseCIE(&ih)
}

// ciePointer converts an FDE's CIE pointer field to a section offset.
func (t *Table) ciePointer(h *header) (uint64, bool) {
	if t.kind == EHFrame {
		if h.id > uint64(h.idPos) {
			return 0, false
		}
		return uint64(h.idPos) - h.id, true
	}
	return h.id, true
}

// CIEAt decodes the CIE whose length field is at section offset off.
// CIEs are cached, so repeated calls are cheap and return the same *CIE,
// which must not be changed.
func (t *Table) CIEAt(off uint64) (*CIE, error) {
	t.ciesMu.Lock()
	c, ok := t.cies[off]
	t.ciesMu.Unlock()
	if ok {
		return c, nil
	}
	h, err := t.readHeader(off)
	if err != nil {
		return nil, err
	}
	if h.zero || !h.isCIE {
		return nil, t.errAt(ErrBadEntry, off, "not a CIE")
	}
	if c, err = t.parseCIE(&h); err != nil {
		return nil, err
	}
	// Complete the CIE before sharing it: from then on it is read only.
	var u interp
	c.initErr = t.runCIE(&u, c)
	c.init.CopyFrom(&u.state)
	c.initDone = true
	c.owner = t
	t.ciesMu.Lock()
	if first, ok := t.cies[off]; ok {
		c = first // another goroutine decoded it too
	} else {
		t.cies[off] = c
	}
	t.ciesMu.Unlock()
	return c, nil
}

// cachedCIE is CIEAt through a one-entry cache owned by the caller: FDEs
// mostly share one CIE, so most calls skip the lock.
func (t *Table) cachedCIE(off uint64, last **CIE) (*CIE, error) {
	if c := *last; c != nil && c.Offset == off && c.owner == t {
		return c, nil
	}
	c, err := t.CIEAt(off)
	if err == nil {
		*last = c
	}
	return c, err
}

func (t *Table) parseCIE(h *header) (*CIE, error) {
	c := &CIE{Offset: h.off, Length: h.length, Format64: h.is64,
		FDEEncoding: PEAbsPtr, LSDAEncoding: PEOmit, PersonalityEncoding: PEOmit}
	b := buf{data: t.data[:h.end], pos: h.body, order: t.end}
	c.Version = b.u8()
	aug := b.cstring()
	if b.err != nil {
		return nil, t.errAt(ErrTruncated, h.off, "truncated CIE augmentation string")
	}
	c.Augmentation = string(aug)
	switch c.Version {
	case 1, 3, 4:
	default:
		return nil, t.errAt(ErrUnsupported, h.off, "unsupported CIE version %d", c.Version)
	}
	if c.Augmentation == "eh" {
		b.bytes(uint64(t.addrSize))
	}
	c.AddressSize = uint8(t.addrSize)
	if c.Version >= 4 {
		c.AddressSize = b.u8()
		c.SegmentSize = b.u8()
		if b.err == nil && (c.AddressSize < 1 || c.AddressSize > 8 || c.SegmentSize > 8 || int(c.AddressSize)+int(c.SegmentSize) > 8) {
			return nil, t.errAt(ErrUnsupported, h.off, "invalid address size %d / segment size %d", c.AddressSize, c.SegmentSize)
		}
		if b.err == nil && c.AddressSize != 2 && c.AddressSize != 4 && c.AddressSize != 8 {
			return nil, t.errAt(ErrUnsupported, h.off, "unsupported address size %d", c.AddressSize)
		}
	}
	c.CodeAlign = b.uleb()
	c.DataAlign = b.sleb()
	if c.Version == 1 {
		c.RA = arch.Reg(b.u8())
	} else {
		ra := b.uleb()
		if ra > 0xffffffff {
			return nil, t.errAt(ErrUnsupported, h.off, "return address register %d too large", ra)
		}
		c.RA = arch.Reg(ra)
	}
	if b.err != nil {
		return nil, t.errAt(ErrTruncated, h.off, "truncated CIE")
	}
	if len(aug) > 0 && aug[0] == 'z' {
		n := b.uleb()
		c.AugData = b.bytes(n)
		if b.err != nil {
			return nil, t.errAt(ErrBounds, h.off, "augmentation data length %d runs past the CIE", n)
		}
		ab := buf{data: c.AugData, order: t.end}
		augBase := uint64(b.pos - len(c.AugData))
		ctx := t.ptrCtx(augBase, c)
	letters:
		for _, l := range aug[1:] {
			switch l {
			case 'L':
				c.LSDAEncoding = PtrEnc(ab.u8())
			case 'R':
				c.FDEEncoding = PtrEnc(ab.u8())
			case 'P':
				c.PersonalityEncoding = PtrEnc(ab.u8())
				// Decode the pointer itself; follow an indirection only
				// if it can be resolved (the routine does not matter for
				// unwinding, but the letters after 'P' do).
				pe := c.PersonalityEncoding
				if pe != PEOmit {
					pe &^= PEIndirect
				}
				v, err := ab.readEncoded(pe, &ctx)
				if err != nil {
					break letters
				}
				if c.PersonalityEncoding.Indirect() && t.deref != nil {
					if p, err := t.deref(v, int(c.AddressSize)); err == nil {
						v = p
					}
				}
				c.Personality = v
			case 'S':
				c.SignalFrame = true
			case 'B':
				c.BKey = true
				if !machAugmentation(t.arch, 'B') && t.arch != arch.Unknown {
					break letters
				}
			case 'G':
				c.MTETagged = true
				if !machAugmentation(t.arch, 'G') && t.arch != arch.Unknown {
					break letters
				}
			default:
				// Unknown letter: 'z' gave the length, so the rest of the
				// data is skipped and the instructions are still found.
				break letters
			}
			if ab.err != nil {
				return nil, t.errAt(ErrTruncated, h.off, "truncated augmentation data")
			}
		}
	} else if len(aug) > 0 && c.Augmentation != "eh" && t.kind == EHFrame {
		return nil, t.errAt(ErrUnsupported, h.off, "unsupported augmentation %q without 'z'", c.Augmentation)
	}
	c.instrOff = uint64(b.pos)
	c.Instructions = t.data[b.pos:h.end:h.end]
	return c, nil
}

// FDEAt decodes the FDE whose length field is at section offset off.
func (t *Table) FDEAt(off uint64) (FDE, error) {
	var f FDE
	var last *CIE
	err := t.fdeAt(off, &f, &last)
	return f, err
}

func (t *Table) fdeAt(off uint64, f *FDE, last **CIE) error {
	h, err := t.readHeader(off)
	if err != nil {
		return err
	}
	if h.zero || h.isCIE {
		return t.errAt(ErrBadEntry, off, "not an FDE")
	}
	return t.parseFDE(&h, f, last)
}

func (t *Table) parseFDE(h *header, f *FDE, last **CIE) error {
	co, ok := t.ciePointer(h)
	if !ok {
		return t.errAt(ErrBadEntry, h.off, "CIE pointer %#x points before the section", h.id)
	}
	if co == h.off {
		return t.errAt(ErrBadEntry, h.off, "CIE pointer points to the FDE itself")
	}
	cie, err := t.cachedCIE(co, last)
	if err != nil {
		return t.errAt(ErrBadEntry, h.off, "CIE pointer %#x: %v", co, err)
	}
	return t.parseFDEWith(h, cie, f)
}

func (t *Table) parseFDEWith(h *header, cie *CIE, f *FDE) error {
	if t.kind == EHFrame && cie.FDEEncoding == PEPCRel|PESData4 && cie.SegmentSize == 0 && cie.LSDAEncoding == PEOmit {
		// Fast path for what linkers emit: pcrel sdata4 begin, sdata4
		// range (read as the general path reads it: signed), and an empty
		// (or lengthy but unused) augmentation.
		p := h.body
		if h.end-p >= 9 {
			begin := t.addr + uint64(p) + uint64(int64(int32(t.end.Uint32(t.data[p:]))))
			end := begin + uint64(int64(int32(t.end.Uint32(t.data[p+4:]))))
			if t.addrSize == 4 {
				begin &= 0xffffffff
				end &= 0xffffffff
			}
			p += 8
			var aug []byte
			ok := true
			if len(cie.Augmentation) > 0 && cie.Augmentation[0] == 'z' {
				n := int(t.data[p])
				if n >= 0x80 || n > h.end-p-1 {
					ok = false
				} else {
					aug = t.data[p+1 : p+1+n : p+1+n]
					p += 1 + n
				}
			}
			if ok {
				*f = FDE{Offset: h.off, Length: h.length, Format64: h.is64, CIEPointer: h.id, CIE: cie,
					PCBegin: begin, PCEnd: end, AugData: aug, instrOff: uint64(p), Instructions: t.data[p:h.end:h.end]}
				return nil
			}
		}
	}
	*f = FDE{Offset: h.off, Length: h.length, Format64: h.is64, CIEPointer: h.id, CIE: cie}
	b := buf{data: t.data[:h.end], pos: h.body, order: t.end}
	if cie.SegmentSize > 0 {
		f.Segment = b.uint(int(cie.SegmentSize))
		if b.err != nil && cie.SegmentSize != 1 && cie.SegmentSize != 2 && cie.SegmentSize != 4 && cie.SegmentSize != 8 {
			return t.errAt(ErrUnsupported, h.off, "unsupported segment size %d", cie.SegmentSize)
		}
	}
	if t.kind == EHFrame {
		ctx := t.ptrCtx(0, cie)
		begin, err := b.readEncoded(cie.FDEEncoding, &ctx)
		if err != nil {
			return t.errAt(ptrErrKind(err), h.off, "initial location: %v", err)
		}
		// The range has the same format but no base and no indirection.
		rng, err := b.readEncoded(cie.FDEEncoding&0x0f, &ctx)
		if err != nil {
			return t.errAt(ptrErrKind(err), h.off, "address range: %v", err)
		}
		f.PCBegin, f.PCEnd = begin, begin+rng
		if len(cie.Augmentation) > 0 && cie.Augmentation[0] == 'z' {
			n := b.uleb()
			f.AugData = b.bytes(n)
			if b.err != nil {
				return t.errAt(ErrBounds, h.off, "augmentation data length %d runs past the FDE", n)
			}
			if cie.LSDAEncoding != PEOmit && len(f.AugData) > 0 {
				ab := buf{data: t.data[:b.pos], pos: b.pos - len(f.AugData), order: t.end}
				lctx := ctx
				lctx.funcBase = begin
				v, err := ab.readEncoded(cie.LSDAEncoding, &lctx)
				if err == nil {
					f.LSDA, f.HasLSDA = v, true
				}
			}
		}
	} else {
		as := int(cie.AddressSize)
		begin := b.uint(as)
		rng := b.uint(as)
		if b.err != nil {
			return t.errAt(ErrTruncated, h.off, "truncated FDE")
		}
		f.PCBegin, f.PCEnd = begin, begin+rng
		if as == 4 {
			f.PCEnd &= 0xffffffff
		}
	}
	if b.err != nil {
		return t.errAt(ErrTruncated, h.off, "truncated FDE")
	}
	f.instrOff = uint64(b.pos)
	f.Instructions = t.data[b.pos:h.end:h.end]
	return nil
}

// runCIE runs a CIE's initial instructions in u.
func (t *Table) runCIE(u *interp, c *CIE) error {
	u.t = t
	u.reset(c, c.Instructions, c.instrOff, 0, nil, 0)
	var ins Instruction
	for u.next(&ins) {
		u.apply(&ins)
	}
	return u.err
}

// initialRow returns the CIE's rules after its initial instructions:
// those computed when the Table cached it, or, for a CIE from elsewhere,
// computed again into scratch.
func (t *Table) initialRow(c *CIE, scratch *Row) (*Row, error) {
	if c.initDone {
		return &c.init, c.initErr
	}
	var u interp
	err := t.runCIE(&u, c)
	scratch.CopyFrom(&u.state)
	return scratch, err
}

// Entry is one item of a section walk: a CIE, an FDE or a terminator.
// Err is set when the entry could not be decoded; Offset is still valid.
type Entry struct {
	Kind   EntryKind // CIE, FDE or terminator
	Offset uint64    // section offset of the entry's length field
	CIE    *CIE      // the CIE (KindCIE) or the FDE's CIE when known
	FDE    *FDE      // KindFDE only
	Err    error     // why the entry could not be decoded, if it could not
}

// Entries walks the section's entries in order.
//
//	it := tab.Entries()
//	for it.Next() {
//		e := it.Entry()
//		...
//	}
func (t *Table) Entries() *EntryIterator { return &EntryIterator{t: t} }

// EntryIterator walks CIEs and FDEs in section order. An entry that fails
// to decode is still reported (with Err set) and the walk continues with
// the next one; only a length field that cannot be trusted ends the walk.
type EntryIterator struct {
	t    *Table
	off  uint64
	e    Entry
	fde  FDE
	last *CIE
	err  error
	done bool
}

// Next advances to the next entry; false at the end of the section.
func (it *EntryIterator) Next() bool {
	t := it.t
	if it.done || it.off >= uint64(len(t.data)) {
		it.done = true
		return false
	}
	h, err := t.readHeader(it.off)
	it.e = Entry{Offset: it.off}
	if err != nil {
		it.e.Err = err
		it.err = err
		it.done = true
		it.e.Kind = KindFDE
		if h.isCIE {
			it.e.Kind = KindCIE
		}
		return true
	}
	it.off = uint64(h.end)
	switch {
	case h.zero:
		it.e.Kind = KindTerminator
	case h.isCIE:
		it.e.Kind = KindCIE
		it.e.CIE, it.e.Err = t.cachedCIE(h.off, &it.last)
	default:
		it.e.Kind = KindFDE
		it.e.Err = t.parseFDE(&h, &it.fde, &it.last)
		it.e.FDE = &it.fde
		it.e.CIE = it.fde.CIE
	}
	return true
}

// Entry returns the current entry. Its FDE pointer is reused by Next.
func (it *EntryIterator) Entry() Entry { return it.e }

// Err returns the error that ended the walk early (a bad length field).
func (it *EntryIterator) Err() error { return it.err }

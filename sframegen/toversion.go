package sframegen

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

// ToVersionOptions control ToVersion and ToVersionRaw.
type ToVersionOptions struct {
	// Version is the SFrame version to write (2 or 3).
	Version sframe.Version
	// Section names the SFrame section; empty means FindSFrame's choice.
	Section string
	// DropUnrepresentable drops the functions the target version cannot
	// express instead of failing.
	DropUnrepresentable bool
}

// DroppedFunc is a function left out of a conversion, and why.
type DroppedFunc struct {
	Index int    // index in the input section
	Start uint64 // start address (in a relocatable object: offset in its section)
	Name  string // symbol name, when known
	Err   error
}

// String names the function: index, start and symbol when known.
func (d DroppedFunc) String() string {
	s := fmt.Sprintf("function %d at %#x", d.Index, d.Start)
	if d.Name != "" {
		s += " (" + d.Name + ")"
	}
	return s
}

// ToVersionResult is the outcome of a conversion.
type ToVersionResult struct {
	// Data is the converted file (or bare section).
	Data []byte
	// From is the input section's version; Funcs the number of functions
	// written.
	From  sframe.Version
	Funcs int
	// Dropped lists the functions left out (DropUnrepresentable).
	Dropped []DroppedFunc
	// Segment, when not nil, says the converted section of a linked file
	// did not fit in the place of the old one and went to a new loadable
	// segment, as AddSFrameSegment puts it.
	Segment *elffile.SegmentPlan
}

// UnrepresentableError reports the functions a conversion would lose.
type UnrepresentableError struct {
	Version sframe.Version // the target version
	Funcs   []DroppedFunc  // the functions it cannot express
}

// Error lists the functions (up to five) and what each cannot express.
func (e *UnrepresentableError) Error() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d function(s) cannot be expressed in %s", len(e.Funcs), e.Version)
	for i, d := range e.Funcs {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(e.Funcs)-i)
			break
		}
		msg := d.Err.Error()
		var ee *sframe.EncodeError
		if errors.As(d.Err, &ee) {
			msg = ee.Msg
			if ee.Row >= 0 {
				msg = fmt.Sprintf("row %d: %s", ee.Row, msg)
			}
		}
		fmt.Fprintf(&b, "; %s: %s", d, msg)
	}
	b.WriteString(" (drop them with --drop-unrepresentable)")
	return b.String()
}

// outputOptions turns the options that reproduce an input section into
// those of the converted one: the target version, PC-relative starts
// with their flag (what binutils writes since 2.45). A section converted
// to its own version keeps its encoding, and so its bytes.
func outputOptions(in sframe.EncodeOptions, v sframe.Version) sframe.EncodeOptions {
	if in.Version == v {
		return in
	}
	out := in
	out.Version = v
	out.Start = sframe.StartPCRel
	if v != sframe.Version2 {
		out.FramePointer = false
	}
	out.Align = 0
	return out
}

// filter checks every function against opts, dropping or reporting.
func filter(opts *sframe.EncodeOptions, funcs []sframe.EncFunc, index []int, name func(i int) string, drop bool) ([]sframe.EncFunc, []int, []DroppedFunc, error) {
	var dropped []DroppedFunc
	keptF := funcs[:0:0]
	var keptI []int
	for k := range funcs {
		if err := opts.Check(&funcs[k]); err != nil {
			d := DroppedFunc{Index: index[k], Start: funcs[k].Start, Err: err}
			if name != nil {
				d.Name = name(index[k])
			}
			dropped = append(dropped, d)
			continue
		}
		keptF = append(keptF, funcs[k])
		keptI = append(keptI, index[k])
	}
	if len(dropped) > 0 && !drop {
		return nil, nil, dropped, &UnrepresentableError{Version: opts.Version, Funcs: dropped}
	}
	return keptF, keptI, dropped, nil
}

func checkTarget(v sframe.Version) error {
	if v != sframe.Version2 && v != sframe.Version3 {
		return fmt.Errorf("can only convert to SFrame version 2 or 3, not %d", v)
	}
	return nil
}

// convertSection converts a decoded, self-contained section (no
// relocations): a bare section or the .sframe of a linked file. The
// result is laid out for the address addr.
func convertSection(s *sframe.Section, opts ToVersionOptions, name func(i int) string, addr uint64) ([]byte, []DroppedFunc, int, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, 0, fmt.Errorf("input section: %w", err)
	}
	in, funcs, err := sframe.Extract(s)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("input section: %w", err)
	}
	eo := outputOptions(in, opts.Version)
	eo.Addr = addr
	// Extract orders functions by FRE layout; map them back to the index
	// for messages.
	index := make([]int, len(funcs))
	byStart := make(map[uint64]int, s.NumFuncs())
	for i := 0; i < s.NumFuncs(); i++ {
		f, err := s.Func(i)
		if err != nil {
			return nil, nil, 0, err
		}
		byStart[f.Start] = i
	}
	for k := range funcs {
		index[k] = byStart[funcs[k].Start]
	}
	funcs, _, dropped, err := filter(&eo, funcs, index, name, opts.DropUnrepresentable)
	if err != nil {
		return nil, dropped, 0, err
	}
	out, err := sframe.Encode(eo, funcs)
	return out, dropped, len(funcs), err
}

// ToVersionRaw converts a bare SFrame section loaded at address base.
func ToVersionRaw(data []byte, base uint64, opts ToVersionOptions) (*ToVersionResult, error) {
	if err := checkTarget(opts.Version); err != nil {
		return nil, err
	}
	s, err := sframe.Parse(data, base)
	if err != nil {
		return nil, err
	}
	out, dropped, n, err := convertSection(s, opts, nil, base)
	if err != nil {
		return nil, err
	}
	return &ToVersionResult{Data: out, From: s.Version, Funcs: n, Dropped: dropped}, nil
}

// ToVersion converts the SFrame section of the ELF image src and
// returns the new image; src is not modified.
//
// In a relocatable object the section and its .rela section are
// rewritten: function starts are PC-relative relocations against the
// same symbols and addends as before, 4 bytes wide in v2 and 8 in v3,
// and the start fields themselves hold 0, as gas writes them. The
// section gets type SHT_GNU_SFRAME and, if it grew, moves to the end of
// the file; nothing else changes.
//
// In an executable or shared library the section is rewritten in place
// when the converted one fits in its file and memory space (the rest is
// zeroed, the section and PT_GNU_SFRAME sizes shrink). Otherwise it goes
// to a new loadable segment, as AddSFrameSegment puts it, and the
// result's Segment says where; the old bytes stay, unused.
//
// Converting to the version the section has keeps its encoding (start
// fields, flags, order, section type): the file comes out unchanged.
func ToVersion(src []byte, opts ToVersionOptions) (*ToVersionResult, error) {
	if err := checkTarget(opts.Version); err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		return nil, err
	}
	sec := elffile.FindSFrame(f, opts.Section)
	if sec == nil {
		n := opts.Section
		if n == "" {
			n = ".sframe"
		}
		return nil, fmt.Errorf("no %s section", n)
	}
	secIdx := elffile.SectionIndex(f, sec)
	if f.Type == elf.ET_REL {
		return convertRel(src, f, sec, secIdx, opts)
	}
	s, err := parseSection(f, sec)
	if err != nil {
		return nil, err
	}
	names := funcSymbols(f)
	name := func(i int) string {
		fn, err := s.Func(i)
		if err != nil {
			return ""
		}
		return names[symKey{addr: fn.Start}]
	}
	out, dropped, n, err := convertSection(s, opts, name, sec.Addr)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	typ := elffile.SHT_GNU_SFRAME
	if s.Version == opts.Version {
		typ = 0 // unchanged
	}
	res := &ToVersionResult{From: s.Version, Funcs: n, Dropped: dropped}
	if uint64(len(out)) <= sec.Size {
		res.Data, err = elffile.RewriteSections(src, []elffile.SectionUpdate{{Index: secIdx, Data: out, Type: typ}})
		if err != nil {
			return nil, err
		}
		return res, nil
	}
	// Loaded sections cannot move: the new one goes to a new segment,
	// laid out for its address there.
	plan, err := elffile.PlanSFrameSegment(src)
	if err != nil {
		return nil, fmt.Errorf("section %s: the %s section (%d bytes) does not fit in the %d of the old one, and no segment can be added: %w",
			sec.Name, opts.Version, len(out), sec.Size, err)
	}
	if out, _, _, err = convertSection(s, opts, name, plan.Addr); err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	if res.Data, err = elffile.AddSFrameSegment(src, plan, out); err != nil {
		return nil, err
	}
	res.Segment = plan
	return res, nil
}

// parseSection decodes the SFrame section sec of f, with its
// relocations applied in a relocatable object (elffile.Relocated).
func parseSection(f *elf.File, sec *elf.Section) (*sframe.Section, error) {
	data, err := elffile.SectionData(f, sec, elffile.Relocated)
	if err != nil {
		return nil, err
	}
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	return s, nil
}

// symKey identifies a function: by address in a linked file, by section
// and offset in a relocatable object.
type symKey struct {
	shndx int
	addr  uint64
}

// funcSymbols maps function symbols to their names.
func funcSymbols(f *elf.File) map[symKey]string {
	m := map[symKey]string{}
	syms, _ := elffile.Symbols(f)
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Name == "" {
			continue
		}
		k := symKey{addr: s.Value}
		if f.Type == elf.ET_REL {
			k.shndx = int(s.Section)
		}
		if _, ok := m[k]; !ok {
			m[k] = s.Name
		}
	}
	return m
}

// startReloc is the relocation of one function start field.
type startReloc struct {
	sym    uint32
	addend int64
}

func convertRel(src []byte, f *elf.File, sec *elf.Section, secIdx int, opts ToVersionOptions) (*ToVersionResult, error) {
	if f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("section %s: converting 32-bit relocatable objects is not supported", sec.Name)
	}
	rels := elffile.RelocSections(f, sec)
	var rs *elf.Section
	var rr []elffile.Reloc
	switch {
	case len(rels) == 1 && rels[0].Type == elf.SHT_RELA:
		rs = rels[0]
		var err error
		if rr, err = elffile.Relocs(f, rs); err != nil {
			return nil, err
		}
	case len(rels) == 0:
		// Only a section without functions needs no relocations; a
		// function without one is reported below.
	default:
		return nil, fmt.Errorf("section %s: expected one SHT_RELA relocation section, found %d relocation sections", sec.Name, len(rels))
	}
	// Decode with the relocations applied (the rows do not depend on
	// them, but validation of a sorted section does).
	s, err := parseSection(f, sec)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("section %s: input section: %w", sec.Name, err)
	}
	in, _, err := sframe.Extract(s)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	oldWidth := 4
	if s.Version == sframe.Version3 {
		oldWidth = 8
	}
	newWidth := 4
	if opts.Version == sframe.Version3 {
		newWidth = 8
	}
	oldType, ok := elffile.PCRelType(f.Machine, oldWidth)
	newType, _ := elffile.PCRelType(f.Machine, newWidth)
	if !ok {
		return nil, fmt.Errorf("section %s: relocations for %s are not supported", sec.Name, f.Machine)
	}
	order := f.ByteOrder
	relocs := make(map[uint64]startReloc, len(rr))
	for _, r := range rr {
		if r.Type != oldType {
			return nil, fmt.Errorf("section %s: relocation at %#x has type %d, expected the %d-byte PC-relative type %d", rs.Name, r.Off, r.Type, oldWidth, oldType)
		}
		relocs[r.Off] = startReloc{sym: r.Sym, addend: r.Addend}
	}
	syms, _ := elffile.Symbols(f)
	names := funcSymbols(f)
	n := s.NumFuncs()
	funcs := make([]sframe.EncFunc, n)
	index := make([]int, n)
	starts := make([]startReloc, n)
	for i := 0; i < n; i++ {
		fn, err := s.Func(i)
		if err != nil {
			return nil, err
		}
		r, ok := relocs[uint64(fn.StartFieldOff)]
		if !ok {
			return nil, fmt.Errorf("section %s: function %d has no relocation for its start field at %#x", sec.Name, i, fn.StartFieldOff)
		}
		delete(relocs, uint64(fn.StartFieldOff))
		if funcs[i], err = sframe.ExtractFunc(s, i); err != nil {
			return nil, fmt.Errorf("section %s: %w", sec.Name, err)
		}
		index[i] = i
		starts[i] = r
		// For messages: the function's offset in its section.
		funcs[i].Start = uint64(r.addend)
		if r.sym > 0 && int(r.sym) <= len(syms) {
			funcs[i].Start += syms[r.sym-1].Value
		}
	}
	if len(relocs) != 0 {
		return nil, fmt.Errorf("section %s: %d relocation(s) in %s do not apply to function starts", sec.Name, len(relocs), rs.Name)
	}
	eo := outputOptions(in, opts.Version)
	eo.KeepOrder = true
	eo.Addr = 0
	name := func(i int) string {
		r := starts[i]
		if r.sym == 0 || int(r.sym) > len(syms) {
			return ""
		}
		sym := syms[r.sym-1]
		if elf.ST_TYPE(sym.Info) == elf.STT_FUNC {
			return sym.Name
		}
		return names[symKey{shndx: int(sym.Section), addr: sym.Value + uint64(r.addend)}]
	}
	funcs, index, dropped, err := filter(&eo, funcs, index, name, opts.DropUnrepresentable)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	// Start fields are written as 0 and filled by the relocations, so
	// their values here do not matter; make them all encodable.
	for k := range funcs {
		funcs[k].Start = 0
	}
	out, err := sframe.Encode(eo, funcs)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	hdr := sframe.HeaderSize + len(eo.AuxHeader)
	fdeSize := opts.Version.FDESize()
	rela := make([]byte, 24*len(funcs))
	for k := range funcs {
		off := hdr + k*fdeSize
		clear(out[off : off+newWidth])
		r := starts[index[k]]
		e := rela[24*k:]
		order.PutUint64(e, uint64(off))
		order.PutUint64(e[8:], elf.R_INFO(r.sym, newType))
		order.PutUint64(e[16:], uint64(r.addend))
	}
	typ := elffile.SHT_GNU_SFRAME
	if s.Version == opts.Version {
		typ = 0 // unchanged
	}
	updates := []elffile.SectionUpdate{{Index: secIdx, Data: out, Type: typ}}
	if rs != nil {
		updates = append(updates, elffile.SectionUpdate{Index: elffile.SectionIndex(f, rs), Data: rela})
	} else if len(rela) != 0 {
		return nil, fmt.Errorf("section %s: no relocation section to write %d relocations to", sec.Name, len(rela)/24)
	}
	img, err := elffile.RewriteSections(src, updates)
	if err != nil {
		return nil, err
	}
	return &ToVersionResult{Data: img, From: s.Version, Funcs: len(funcs), Dropped: dropped}, nil
}

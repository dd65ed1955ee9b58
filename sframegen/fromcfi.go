package sframegen

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/enumstr"
	"github.com/sframekit/sframekit/sframe"
)

// Options control FromCFI and FromCFITable.
type Options struct {
	// Version is the SFrame version to produce: sframe.Version2 or
	// sframe.Version3 (the default when 0).
	Version sframe.Version
	// Section is the CFI section to read: ".eh_frame", ".debug_frame", or
	// "" for .eh_frame when the file has one with data and .debug_frame
	// otherwise; in a linked file with both, FromCFI then reads both, the
	// .debug_frame for the functions .eh_frame does not cover (see
	// FromCFITables).
	Section string
}

// Skip is a CFI function (FDE) that the conversion left out, and why.
type Skip struct {
	// Start and End delimit the function's code, [Start, End).
	Start, End uint64
	// FDEOffset is the offset of the FDE in the CFI section.
	FDEOffset uint64
	// Reason says what SFrame cannot express (Stats groups skips by
	// it); Detail adds the specifics (register, expression, PC).
	Reason Reason
	Detail string
}

// String formats the skip as "[start,end) FDE@off: reason (detail)".
func (s Skip) String() string {
	str := fmt.Sprintf("[%#x,%#x) FDE@%#x: %s", s.Start, s.End, s.FDEOffset, s.Reason)
	if s.Detail != "" {
		str += " (" + s.Detail + ")"
	}
	return str
}

// Result is a converted CFI section: the functions ready for
// sframe.Encode, what was left out, and coverage statistics.
type Result struct {
	// ABI and Version of the section to write.
	ABI     sframe.ABI
	Version sframe.Version
	// KeepOrder is set for relocatable objects, whose functions may share
	// start addresses (each text section starts at 0): the index is then
	// written unsorted, in CFI order, as gas does.
	KeepOrder bool
	// Funcs are the SFrame functions in CFI order. An FDE may give more
	// than one (a PLT's first entry and its PC-mask entries).
	Funcs []sframe.EncFunc
	// FDEOffsets[i] is the CFI section offset of the FDE Funcs[i] comes from.
	FDEOffsets []uint64
	// Skipped lists the FDEs left out, in CFI order.
	Skipped []Skip
	// Stats summarises the coverage.
	Stats Stats
}

// EncodeOptions returns the options for sframe.Encode that write the
// section at load address addr.
func (r *Result) EncodeOptions(addr uint64) sframe.EncodeOptions {
	return sframe.EncodeOptions{Version: r.Version, ABI: r.ABI, Addr: addr, KeepOrder: r.KeepOrder}
}

// Encode writes the section as loaded at address addr.
func (r *Result) Encode(addr uint64) ([]byte, error) {
	return sframe.Encode(r.EncodeOptions(addr), r.Funcs)
}

// ABIFor returns the SFrame ABI of an ELF file, or an error for machines
// SFrame does not describe.
func ABIFor(f *elf.File) (sframe.ABI, error) {
	a := arch.FromELF(f.Machine)
	if a != arch.ARM64 && f.Class != elf.ELFCLASS64 {
		// x32 and 31-bit s390 share their machine with the 64-bit ABI.
		a = arch.Unknown
	}
	if abi, ok := sframe.ABIFor(a, f.ByteOrder.Uint16([]byte{0, 1}) == 1); ok {
		return abi, nil
	}
	return 0, fmt.Errorf("SFrame has no ABI for %v %v", f.Class, f.Machine)
}

// FromCFI converts the CFI of an ELF file (see Options.Section).
func FromCFI(f *elf.File, opts Options) (*Result, error) {
	abi, err := ABIFor(f)
	if err != nil {
		return nil, err
	}
	tabs, _, err := cfiTables(f, opts.Section)
	if err != nil {
		return nil, err
	}
	r, err := FromCFITables(tabs, abi, opts)
	if err != nil {
		return nil, err
	}
	if f.Type == elf.ET_REL {
		r.KeepOrder = true
	} else {
		r.Dedupe()
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Flags&elf.SHF_ALLOC != 0 {
			r.Stats.TextBytes += s.Size
		}
	}
	return r, nil
}

// FromCFITable converts every FDE of a CFI table for the given ABI. The
// result keeps the FDE order; functions sharing a start address are kept
// (see Result.KeepOrder); FromCFI removes duplicates in linked files.
//
// Limits: each FDE's rows are streamed from the table, never held as CFI
// rows. Memory grows with the SFrame rows kept (about 90 bytes each),
// and rows beyond what the version allows in one function (65535 in v3;
// v2 has no such bound) are only counted, the function being left out:
// a long CFI program costs time in proportion to its length, not memory.
func FromCFITable(t *cfi.Table, abi sframe.ABI, opts Options) (*Result, error) {
	return FromCFITables([]*cfi.Table{t}, abi, opts)
}

// FromCFITables converts the FDEs of tabs, one file's CFI sections in
// the order an unwinder consults them (.eh_frame, then .debug_frame), as
// FromCFITable converts one: every FDE of the first table, and of each
// later one the FDEs whose start no earlier table covers. A program
// built with -fno-asynchronous-unwind-tables has .eh_frame rows for the
// C runtime only and its own in .debug_frame. FDEOffsets and
// Skip.FDEOffset are offsets in the section the FDE is from. Limits: as
// FromCFITable's, per table.
func FromCFITables(tabs []*cfi.Table, abi sframe.ABI, opts Options) (*Result, error) {
	if len(tabs) == 0 {
		return nil, errors.New("no CFI table to convert")
	}
	c, r, err := start(abi, opts)
	if err != nil {
		return nil, err
	}
	eachFDE(tabs, func(t *cfi.Table, fde *cfi.FDE) { c.add(r, t, *fde) }, func(err error) {
		r.Stats.BadEntries++
		if err != nil && r.Stats.WalkError == "" {
			r.Stats.WalkError = err.Error()
		}
	})
	r.computeStats()
	return r, nil
}

// eachFDE calls fn for each FDE of tabs, a file's CFI sections in the
// order an unwinder consults them, that an unwinder takes rows from:
// every FDE of the first table, and of each later one those whose start
// no earlier table covers. It calls bad for each entry that does not
// decode (err nil) and for a walk of a table that ended early (its
// error).
func eachFDE(tabs []*cfi.Table, fn func(t *cfi.Table, fde *cfi.FDE), bad func(err error)) {
	for i, t := range tabs {
		it := t.Entries()
		for it.Next() {
			e := it.Entry()
			if e.Kind != cfi.KindFDE {
				continue
			}
			if e.Err != nil || e.FDE == nil {
				bad(nil)
				continue
			}
			if !coveredBy(tabs[:i], e.FDE.PCBegin) {
				fn(t, e.FDE)
			}
		}
		if err := it.Err(); err != nil {
			bad(err)
		}
	}
}

// coveredBy reports whether an FDE of one of tabs covers pc.
func coveredBy(tabs []*cfi.Table, pc uint64) bool {
	for _, t := range tabs {
		if _, err := t.FindFDE(pc); err == nil {
			return true
		}
	}
	return false
}

// Append adds the functions, skips and counts of o, a conversion of
// another CFI table of the same file with the same options (FromFDEs on
// .debug_frame, say), to r.
func (r *Result) Append(o *Result) {
	r.Funcs = append(r.Funcs, o.Funcs...)
	r.FDEOffsets = append(r.FDEOffsets, o.FDEOffsets...)
	r.Skipped = append(r.Skipped, o.Skipped...)
	r.Stats.CFIFuncs += o.Stats.CFIFuncs
	r.Stats.CFIBytes += o.Stats.CFIBytes
	r.Stats.BadEntries += o.Stats.BadEntries
	if r.Stats.WalkError == "" {
		r.Stats.WalkError = o.Stats.WalkError
	}
	r.computeStats()
}

// FromFDEs converts the FDEs fdes of t (found with t.FindFDE, say), as
// FromCFITable converts them all, in the order given: a profiler that
// wants SFrame for the functions its samples go through pays for those,
// not for the table. Limits: as FromCFITable's.
func FromFDEs(t *cfi.Table, abi sframe.ABI, fdes []cfi.FDE, opts Options) (*Result, error) {
	c, r, err := start(abi, opts)
	if err != nil {
		return nil, err
	}
	for _, fde := range fdes {
		c.add(r, t, fde)
	}
	r.computeStats()
	return r, nil
}

// start checks the options and makes the converter and the result.
func start(abi sframe.ABI, opts Options) (*converter, *Result, error) {
	v := opts.Version
	if v == 0 {
		v = sframe.Version3
	}
	if v != sframe.Version2 && v != sframe.Version3 {
		return nil, nil, fmt.Errorf("cannot write %s (only versions 2 and 3)", v)
	}
	if abi < sframe.ABIAArch64BE || abi > sframe.ABIS390XBE {
		return nil, nil, fmt.Errorf("unknown %s", abi)
	}
	return newConverter(abi, v), &Result{ABI: abi, Version: v}, nil
}

// add converts fde of t into r.
func (c *converter) add(r *Result, t *cfi.Table, fde cfi.FDE) {
	r.Stats.CFIFuncs++
	size := fde.PCEnd - fde.PCBegin
	if fde.PCEnd < fde.PCBegin {
		size = 0
	}
	r.Stats.CFIBytes += size
	t.ResetUnwindTable(&c.ut, &fde)
	fs, sk := c.convertFDE(&fde, &c.ut)
	if sk != nil {
		r.Skipped = append(r.Skipped, *sk)
		return
	}
	for _, f := range fs {
		r.Funcs = append(r.Funcs, f)
		r.FDEOffsets = append(r.FDEOffsets, fde.Offset)
	}
}

// Dedupe drops functions whose start repeats an earlier one's (a sorted
// index needs distinct starts), recording them as skipped (ReasonDuplicate).
// FromCFI does it for linked files; a caller of FromCFITable or FromFDEs
// that builds an index does it itself.
func (r *Result) Dedupe() {
	sorted := true
	for i := 1; i < len(r.Funcs) && sorted; i++ {
		sorted = r.Funcs[i-1].Start < r.Funcs[i].Start
	}
	if sorted {
		return // no start can repeat: spare the map
	}
	seen := make(map[uint64]bool, len(r.Funcs))
	j := 0
	for i, f := range r.Funcs {
		if seen[f.Start] {
			r.Skipped = append(r.Skipped, Skip{Start: f.Start, End: f.Start + uint64(f.Size), FDEOffset: r.FDEOffsets[i],
				Reason: ReasonDuplicate})
			continue
		}
		seen[f.Start] = true
		r.Funcs[j], r.FDEOffsets[j] = f, r.FDEOffsets[i]
		j++
	}
	if j != len(r.Funcs) {
		r.Funcs, r.FDEOffsets = r.Funcs[:j], r.FDEOffsets[:j]
		slices.SortStableFunc(r.Skipped, func(a, b Skip) int { return cmp.Compare(a.FDEOffset, b.FDEOffset) })
		r.computeStats()
	}
}

// Reason says why a function was left out: what SFrame (or the chosen
// version) cannot express. It is a small enum, so that Stats can group
// skips by it; String gives the text gen prints.
type Reason uint8

// Reasons for leaving a function out; Skip.Detail gives the specifics.
const (
	ReasonCFAReg    Reason = iota + 1 // CFA based on a register other than SP/FP
	ReasonCFAExpr                     // CFA computed by a DWARF expression
	ReasonNoCFA                       // no CFA rule
	ReasonRAColumn                    // the CIE's return-address column is not the ABI's
	ReasonRA                          // return address rule not expressible
	ReasonRAFlex                      // RA needs a flexible FDE the version or ABI lacks
	ReasonFP                          // frame pointer rule not expressible
	ReasonFPFlex                      // FP needs a flexible FDE the version or ABI lacks
	ReasonSP                          // SP restored by an explicit rule
	ReasonEncode                      // rows the SFrame encoding cannot hold
	ReasonCFIError                    // malformed CFI program
	ReasonEmpty                       // empty address range
	ReasonTooLarge                    // function larger than 4 GiB
	ReasonPLTAlign                    // PLT block not aligned to its entry size
	ReasonDuplicate                   // another FDE starts at the same address
)

var reasonText = [...]string{
	ReasonCFAReg:    "CFA based on a register other than SP/FP (needs a v3 flexible FDE; AMD64 and s390x only)",
	ReasonCFAExpr:   "CFA computed by a DWARF expression",
	ReasonNoCFA:     "no CFA rule",
	ReasonRAColumn:  "return-address column is not the ABI's",
	ReasonRA:        "return address rule not expressible",
	ReasonRAFlex:    "return address in a register or unusual slot (needs a v3 flexible FDE; AMD64 and s390x only)",
	ReasonFP:        "frame pointer rule not expressible",
	ReasonFPFlex:    "frame pointer in a register or register-relative slot (needs a v3 flexible FDE; AMD64 and s390x only)",
	ReasonSP:        "stack pointer restored by an explicit rule",
	ReasonEncode:    "rows the SFrame encoding cannot hold",
	ReasonCFIError:  "malformed CFI program",
	ReasonEmpty:     "empty address range",
	ReasonTooLarge:  "function larger than 4 GiB",
	ReasonPLTAlign:  "PLT block not aligned to its entry size",
	ReasonDuplicate: "another FDE starts at the same address",
}

// String describes the reason in one short, stable sentence.
func (r Reason) String() string { return enumstr.Name(reasonText[:], r, "Reason") }

// converter holds the per-ABI facts.
type converter struct {
	abi      sframe.ABI
	a        arch.Arch // abi.Arch()
	v        sframe.Version
	sp, fp   arch.Reg
	ra       arch.Reg // the ABI's return-address column
	pc       arch.Reg // where the PC is (x86-64 rip = 16), for the PLT pattern
	fixedRA  bool     // AMD64: RA at CFA-8, not tracked per row
	flexOK   bool     // flexible FDEs can be written (v3, AMD64 or s390x)
	spValOff int64    // the SP rule SFrame assumes: SP = CFA + spValOff
	fixed    sframe.Rule
	encOpts  sframe.EncodeOptions

	// Reused from FDE to FDE: the row stream, the segments, and the
	// arena the functions' rows are cut from (rows handed out are never
	// written again; a new arena starts when one is full).
	ut    cfi.UnwindTable
	segs  []segment
	arena []sframe.EncRow
}

// arenaRows is the largest row arena: about 350 KB. The first is
// smaller, and each next one twice the last, so that converting a few
// functions (sframegen.FromFDEs) costs little memory.
const (
	arenaRows      = 4096
	firstArenaRows = 128
)

// rowSlab returns an empty slice with room for n rows, cut from the
// arena; keepSlab marks what it used.
func (c *converter) rowSlab(n int) []sframe.EncRow {
	if n > arenaRows/4 {
		return make([]sframe.EncRow, 0, n) // a long program: its own
	}
	if cap(c.arena)-len(c.arena) < n {
		size := min(max(2*cap(c.arena), firstArenaRows), arenaRows)
		for size < n {
			size *= 2
		}
		c.arena = make([]sframe.EncRow, 0, size)
	}
	l := len(c.arena)
	return c.arena[l : l : l+n]
}

// keepSlab marks the rows of slab, cut by rowSlab, as used.
func (c *converter) keepSlab(slab []sframe.EncRow) {
	if len(slab) > 0 && cap(c.arena) > len(c.arena) && &slab[0] == &c.arena[:len(c.arena)+1][len(c.arena)] {
		c.arena = c.arena[:len(c.arena)+len(slab)]
	}
}

func newConverter(abi sframe.ABI, v sframe.Version) *converter {
	a := abi.Arch()
	c := &converter{abi: abi, a: a, v: v, sp: a.SP(), fp: a.FP(), ra: a.RA(), pc: a.PC(), spValOff: a.SPOffset()}
	if abi == sframe.ABIAMD64LE {
		c.fixedRA = true
		c.fixed = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
	}
	c.flexOK = v == sframe.Version3 && (abi == sframe.ABIAMD64LE || abi == sframe.ABIS390XBE)
	c.encOpts = sframe.EncodeOptions{Version: v, ABI: abi}
	return c
}

// rowError says why a CFI row cannot be converted.
type rowError struct {
	reason Reason
	detail string
}

// mapped is one CFI row in SFrame terms.
type mapped struct {
	row     sframe.Row
	flex    Reason // non-zero: the row needs a flexible FDE, for this reason
	flexWhy string // detail for flex (only when mapRow was asked for it)
	plt     pltPattern
	isPLT   bool // the CFA is the PLT expression plt
}

func regName(r arch.Reg) string { return fmt.Sprintf("r%d", r) }

// cfiReg checks that a DWARF register fits an SFrame rule.
func sfReg(r uint64) (arch.Reg, bool) {
	if r > sframe.MaxReg {
		return 0, false
	}
	return arch.Reg(r), true
}

// mapRow converts the CFA, RA and FP rules of one CFI row. With detail
// set it also says why the row needs a flexible FDE (m.flexWhy); without,
// it formats nothing, so that long runs of such rows cost no allocation.
func (c *converter) mapRow(cr *cfi.Row, raCol arch.Reg, m *mapped, detail bool) *rowError {
	*m = mapped{}
	m.row.RASigned = cr.RASigned && c.a == arch.ARM64
	// SP: SFrame always recovers it from the CFA.
	if sp := cr.Rule(c.sp); sp.Kind == cfi.RuleValOffset && sp.Offset != c.spValOff {
		return &rowError{ReasonSP, fmt.Sprintf("SP = CFA%+d at %#x", sp.Offset, cr.Start)}
	}
	ra := cr.Rule(raCol)
	if ra.Kind == cfi.RuleUndefined {
		// Outermost frame: the trace ends here whatever the CFA is.
		m.row = sframe.Row{RAUndefined: true, RASigned: m.row.RASigned}
		return nil
	}
	// CFA.
	switch cr.CFA.Kind {
	case cfi.CFARegOffset:
		reg, ok := sfReg(uint64(cr.CFA.Reg))
		if !ok {
			return &rowError{ReasonCFAReg, fmt.Sprintf("register %d at %#x", cr.CFA.Reg, cr.Start)}
		}
		m.row.CFA = sframe.Rule{Kind: sframe.RuleValue, Base: reg, Offset: cr.CFA.Offset}
		if cr.CFA.Reg != c.sp && cr.CFA.Reg != c.fp {
			m.flex = ReasonCFAReg
			if detail {
				m.flexWhy = fmt.Sprintf("CFA = %s%+d at %#x", regName(cr.CFA.Reg), cr.CFA.Offset, cr.Start)
			}
		}
	case cfi.CFAExpression:
		if r, off, ok := derefRegPlusOffset(cr.CFA.Expr); ok {
			reg, ok := sfReg(r)
			if !ok {
				return &rowError{ReasonCFAExpr, fmt.Sprintf("register %d at %#x", r, cr.Start)}
			}
			m.row.CFA = sframe.Rule{Kind: sframe.RuleDeref, Base: reg, Offset: off}
			m.flex = ReasonCFAReg
			if detail {
				m.flexWhy = fmt.Sprintf("CFA = *(r%d%+d) at %#x", r, off, cr.Start)
			}
			break
		}
		if c.abi == sframe.ABIAMD64LE {
			if p, ok := matchPLT(cr.CFA.Expr, uint64(c.sp), uint64(c.pc)); ok {
				m.plt, m.isPLT = p, true
				return nil
			}
		}
		return &rowError{ReasonCFAExpr, fmt.Sprintf("%s at %#x", cfi.ExprString(cr.CFA.Expr, c.a), cr.Start)}
	default:
		return &rowError{ReasonNoCFA, fmt.Sprintf("at %#x", cr.Start)}
	}
	// RA.
	switch ra.Kind {
	case cfi.RuleUnspecified, cfi.RuleSameValue:
		if c.fixedRA {
			return &rowError{ReasonRA, fmt.Sprintf("RA %s at %#x", ra.Kind, cr.Start)}
		}
		// Still in the link register: nothing to recover.
	case cfi.RuleOffset:
		m.row.RA = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: ra.Offset}
		if c.fixedRA {
			if ra.Offset == int64(c.fixed.Offset) {
				m.row.RA = c.fixed
			} else {
				m.flex = ReasonRAFlex
				if detail {
					m.flexWhy = fmt.Sprintf("RA at CFA%+d at %#x", ra.Offset, cr.Start)
				}
			}
		}
	case cfi.RuleRegister, cfi.RuleExpression:
		r, err := c.savedElsewhere(ra, "RA", ReasonRA, ReasonRAFlex, true, cr.Start, m, detail)
		if err != nil {
			return err
		}
		m.row.RA = r
	default:
		return &rowError{ReasonRA, fmt.Sprintf("RA %s at %#x", ra.Kind, cr.Start)}
	}
	// FP.
	fp := cr.Rule(c.fp)
	switch fp.Kind {
	case cfi.RuleUnspecified, cfi.RuleSameValue:
	case cfi.RuleOffset:
		m.row.FP = sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: fp.Offset}
	case cfi.RuleRegister, cfi.RuleExpression:
		r, err := c.savedElsewhere(fp, "FP", ReasonFP, ReasonFPFlex, c.a != arch.ARM64, cr.Start, m, detail)
		if err != nil {
			return err
		}
		m.row.FP = r
	default:
		return &rowError{ReasonFP, fmt.Sprintf("FP %s at %#x", fp.Kind, cr.Start)}
	}
	return nil
}

// savedElsewhere converts the rule of RA or FP (named what) when CFI says
// the register is in another register (allowed only where inReg) or at a
// register plus an offset: SFrame says either only in a flexible FDE
// (flexReason), but for s390x version 2, whose FREs hold a register
// number in place of the offset. A rule SFrame cannot say fails with
// reason.
func (c *converter) savedElsewhere(rule cfi.Rule, what string, reason, flexReason Reason, inReg bool, at uint64, m *mapped, detail bool) (sframe.Rule, *rowError) {
	if rule.Kind == cfi.RuleRegister {
		reg, ok := sfReg(uint64(rule.Reg))
		if !ok || !inReg {
			return sframe.Rule{}, &rowError{reason, fmt.Sprintf("%s in register %d at %#x", what, rule.Reg, at)}
		}
		if !(c.abi == sframe.ABIS390XBE && c.v == sframe.Version2) {
			m.flex = flexReason
			if detail {
				m.flexWhy = fmt.Sprintf("%s in %s at %#x", what, regName(rule.Reg), at)
			}
		}
		return sframe.Rule{Kind: sframe.RuleValue, Base: reg}, nil
	}
	r, off, ok := regPlusOffset(rule.Expr)
	reg, ok2 := sfReg(r)
	if !ok || !ok2 {
		return sframe.Rule{}, &rowError{reason, fmt.Sprintf("%s at %s at %#x", what, cfi.ExprString(rule.Expr, c.a), at)}
	}
	m.flex = flexReason
	if detail {
		m.flexWhy = fmt.Sprintf("%s at (r%d%+d) at %#x", what, r, off, at)
	}
	return sframe.Rule{Kind: sframe.RuleDeref, Base: reg, Offset: off}, nil
}

// segment is a run of rows that becomes one SFrame function.
type segment struct {
	start uint64
	plt   pltPattern
	isPLT bool
	// The segment's rows kept (at most maxRows) start at slab[first]; n
	// counts every row kept or not, and last is the last one.
	first int
	n     int
	last  sframe.Row
	// flex is the reason the first row needing a flexible FDE needs it,
	// flexWhy the detail.
	flex    Reason
	flexWhy string
}

// convertFDE converts one FDE into SFrame functions, or says why not.
//
// The FDE's rows are streamed from ut, never held as CFI rows: memory
// grows only with the SFrame rows written, and a function with more rows
// than the version allows (65535 in v3) costs no more than that many,
// however long its CFI program.
func (c *converter) convertFDE(fde *cfi.FDE, ut *cfi.UnwindTable) ([]sframe.EncFunc, *Skip) {
	skip := func(reason Reason, detail string) *Skip {
		return &Skip{Start: fde.PCBegin, End: fde.PCEnd, FDEOffset: fde.Offset, Reason: reason, Detail: detail}
	}
	if fde.PCEnd <= fde.PCBegin {
		return nil, skip(ReasonEmpty, "")
	}
	if fde.PCEnd-fde.PCBegin > 1<<32-1 {
		return nil, skip(ReasonTooLarge, fmt.Sprintf("%d bytes", fde.PCEnd-fde.PCBegin))
	}
	cie := fde.CIE
	signal := cie != nil && cie.SignalFrame
	fail := func(reason Reason, detail string) ([]sframe.EncFunc, *Skip) {
		if signal && c.v == sframe.Version3 {
			// v3: a signal frame whose CFI cannot be translated is still
			// announced, with no rows, so that unwinders know to stop or
			// fall back to their own signal-frame handling.
			f := sframe.EncFunc{Start: fde.PCBegin, Size: uint32(fde.PCEnd - fde.PCBegin), Signal: true,
				PAuthKeyB: cie.BKey && c.a == arch.ARM64}
			return []sframe.EncFunc{f}, nil
		}
		return nil, skip(reason, detail)
	}
	if cie == nil {
		return fail(ReasonCFIError, "FDE without CIE")
	}
	if cie.RA != c.ra {
		return fail(ReasonRAColumn, fmt.Sprintf("column %d", cie.RA))
	}
	maxRows := math.MaxUint32
	if c.v == sframe.Version3 {
		maxRows = math.MaxUint16
	}
	// The rows of all segments go into one slab, in order, sized for the
	// most rows the program can give, so that it does not grow by copying
	// (which cost four times the rows for long programs): after the CIE's
	// row, each row kept needs an advance and a rule change, two bytes at
	// least, but the last, kept even when equal, needs only the advance.
	slab := c.rowSlab(min(len(fde.Instructions)/2+2, maxRows+1))
	segs, slab, e := c.segmentRows(fde, ut, maxRows, slab)
	defer func() { c.segs = segs[:0] }()
	if e != nil {
		return fail(e.reason, e.detail)
	}
	out := make([]sframe.EncFunc, 0, len(segs))
	for i := range segs {
		end := fde.PCEnd
		if i+1 < len(segs) {
			end = segs[i+1].start
		}
		f, e := c.segmentFunc(fde, &segs[i], end, slab, maxRows)
		if e != nil {
			return fail(e.reason, e.detail)
		}
		out = append(out, f)
	}
	c.keepSlab(slab)
	return out, nil
}

// segmentRows maps the rows of fde, streamed from ut, and cuts them into
// segments (a PLT block's rows, or a run of others), each one's rows kept
// appended to slab, at most maxRows; it returns the segments (in
// c.segs's array) and the slab.
func (c *converter) segmentRows(fde *cfi.FDE, ut *cfi.UnwindTable, maxRows int, slab []sframe.EncRow) ([]segment, []sframe.EncRow, *rowError) {
	raCol := fde.CIE.RA
	segs := c.segs[:0]
	var m mapped
	for ut.Next() {
		cr := ut.Row()
		if cr.Start >= fde.PCEnd {
			break
		}
		// Only the first row needing a flexible FDE in a segment is
		// described (mapped again below if it starts a new segment).
		detail := len(segs) == 0 || segs[len(segs)-1].flex == 0
		if e := c.mapRow(cr, raCol, &m, detail); e != nil {
			return segs, slab, e
		}
		var cur *segment
		if n := len(segs); n > 0 {
			cur = &segs[n-1]
		}
		if cur == nil || m.isPLT != cur.isPLT || m.plt != cur.plt {
			segs = append(segs, segment{start: cr.Start, plt: m.plt, isPLT: m.isPLT, first: len(slab)})
			cur = &segs[len(segs)-1]
		}
		if cur.isPLT {
			continue
		}
		// Same CFA, RA and FP recovery: gas does not start a new FRE,
		// except for the row of the FDE's last advance, which it always
		// links in (see the package documentation). Whether a row needs
		// a flexible FDE depends on its rules alone, so equal rows agree.
		if cur.n > 0 && cur.last == m.row && cr.End < fde.PCEnd {
			continue
		}
		if m.flex != 0 && cur.flex == 0 {
			if !detail {
				c.mapRow(cr, raCol, &m, true)
			}
			cur.flex, cur.flexWhy = m.flex, m.flexWhy
		}
		cur.n++
		cur.last = m.row
		if cur.n <= maxRows {
			slab = append(slab, sframe.EncRow{StartOff: uint32(cr.Start - cur.start), Row: m.row})
		}
	}
	if err := ut.Err(); err != nil {
		return segs, slab, &rowError{ReasonCFIError, err.Error()}
	}
	if len(segs) == 0 {
		return segs, slab, &rowError{ReasonCFIError, "no rows"}
	}
	return segs, slab, nil
}

// segmentFunc makes the SFrame function of segment s of fde, which ends
// at end, its rows in slab: a PLT block's two masked rows, or the rows
// kept in the form the encoder writes; or says why it cannot be one.
func (c *converter) segmentFunc(fde *cfi.FDE, s *segment, end uint64, slab []sframe.EncRow, maxRows int) (sframe.EncFunc, *rowError) {
	cie := fde.CIE
	f := sframe.EncFunc{Start: s.start, Size: uint32(end - s.start), PAuthKeyB: cie.BKey && c.a == arch.ARM64}
	if c.v == sframe.Version3 {
		f.Signal = cie.SignalFrame
	}
	if s.isPLT {
		p := &s.plt
		rep := p.mask + 1
		if s.start%rep != 0 {
			return f, &rowError{ReasonPLTAlign, fmt.Sprintf("block at %#x, entry size %d", s.start, rep)}
		}
		f.PCType, f.RepSize = sframe.PCMask, uint8(rep)
		f.Rows = []sframe.EncRow{
			{StartOff: 0, Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: c.sp, Offset: p.cfaAt(0)}, RA: c.fixed}},
			{StartOff: uint32(p.thresh), Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: c.sp, Offset: p.cfaAt(p.thresh)}, RA: c.fixed}},
		}
	} else {
		if s.flex != 0 && !c.flexOK {
			return f, &rowError{s.flex, s.flexWhy}
		}
		if s.n > maxRows {
			// What sframe's Check says, without holding the rows.
			msg := "too many rows"
			if c.v == sframe.Version3 {
				msg = fmt.Sprintf("%d rows; version 3 allows at most 65535 per function", s.n)
			}
			return f, &rowError{ReasonEncode, msg}
		}
		if s.flex != 0 {
			f.Type = sframe.FDEFlex
		}
		// adjust keeps distinct rows distinct (mapRow never writes
		// padding or not-saved rules), so no rows merge here.
		rows := slab[s.first : s.first+s.n : s.first+s.n]
		for j := range rows {
			c.adjust(&rows[j].Row, s.flex != 0)
		}
		f.Rows = rows
	}
	if err := c.encOpts.Check(&f); err != nil {
		var ee *sframe.EncodeError
		msg := err.Error()
		if errors.As(err, &ee) {
			msg = ee.Msg
			if ee.Row >= 0 && ee.Row < len(f.Rows) {
				msg += fmt.Sprintf(" at %#x", f.Start+uint64(f.Rows[ee.Row].StartOff))
			}
		}
		return f, &rowError{ReasonEncode, msg}
	}
	return f, nil
}

// adjust puts a row in the form the encoder writes and the decoder
// returns: a padding RA word ("not saved") before a saved FP where the
// RA itself needs no word.
func (c *converter) adjust(r *sframe.Row, flex bool) {
	if r.RAUndefined || r.FP.Kind == sframe.RuleUnspecified {
		return
	}
	switch {
	case c.fixedRA && flex && r.RA == c.fixed:
		// Flexible AMD64 rows: the RA entry precedes FP, so the fixed RA
		// is written as a padding word (still meaning the fixed slot).
		r.RA.Padding = true
	case !c.fixedRA && r.RA.Kind == sframe.RuleUnspecified:
		// RA still in its register but FP saved: pad the RA slot (s390x;
		// AArch64 the same way, keeping its 1-or-3 word layout).
		r.RA = sframe.Rule{Kind: sframe.RuleNotSaved, Base: sframe.RegCFA}
	}
}

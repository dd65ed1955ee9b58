package sframegen

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

// Disagreement is one PC at which an SFrame row and the CFI recover a
// value of the caller's frame differently.
type Disagreement struct {
	// Func names the CFI function (its symbol, when the file has one);
	// FuncStart and FuncEnd delimit it.
	Func      string `json:"func,omitempty"`
	FuncStart uint64 `json:"func_start"`
	FuncEnd   uint64 `json:"func_end"`
	// PC is where the rules differ; What is "CFA", "RA", "FP",
	// "RA signed" or "row" (no SFrame row covers PC).
	PC   uint64 `json:"pc"`
	What string `json:"what"`
	// SFrame and CFI are the two rules, as text.
	SFrame string `json:"sframe"`
	CFI    string `json:"cfi"`
	// Known, when set, explains that this is a known deviation of the
	// toolchain that wrote the section (not counted as a failure).
	Known string `json:"known,omitempty"`
}

// String formats the disagreement on one line.
func (d Disagreement) String() string {
	name := d.Func
	if name == "" {
		name = "?"
	}
	s := fmt.Sprintf("function %s [%#x,%#x) at %#x: %s: sframe %s, cfi %s", name, d.FuncStart, d.FuncEnd, d.PC, d.What, d.SFrame, d.CFI)
	if d.Known != "" {
		s += " (known: " + d.Known + ")"
	}
	return s
}

// LeftOut is a CFI function that the SFrame section does not describe.
type LeftOut struct {
	Func   string `json:"func,omitempty"`
	Start  uint64 `json:"start"`
	End    uint64 `json:"end"`
	NoRows bool   `json:"no_rows,omitempty"` // an SFrame function exists but has no rows (v3 signal frame)
}

// Report is the outcome of Verify.
type Report struct {
	// Funcs is the number of CFI functions compared, PCs the number of
	// row boundaries checked.
	Funcs int `json:"funcs"`
	PCs   int `json:"pcs"`
	// Disagreements lists every differing rule, in address order, known
	// toolchain deviations included (see Disagreement.Known); never nil,
	// so that JSON shows an empty list, not null.
	Disagreements []Disagreement `json:"disagreements"`
	// MoreDisagreements counts disagreements beyond the first 64 of a
	// function, which are not listed.
	MoreDisagreements int `json:"more_disagreements,omitempty"`
	// LeftOut lists the CFI functions SFrame does not describe; never nil.
	LeftOut []LeftOut `json:"left_out"`
	// CFIErrors counts CFI entries or programs that could not be read.
	CFIErrors int `json:"cfi_errors"`
}

// Failed reports whether the check failed: a disagreement that is not a
// known deviation, or no function compared at all (a check of nothing
// proves nothing, whatever the reason: no CFI, no SFrame rows, or an
// SFrame section describing other code).
func (r *Report) Failed() bool {
	return r.Funcs == 0 || r.Unknown() > 0
}

// Unknown counts the disagreements that are not known deviations, those
// not listed (MoreDisagreements) included.
func (r *Report) Unknown() int {
	n := r.MoreDisagreements
	for _, d := range r.Disagreements {
		if d.Known == "" {
			n++
		}
	}
	return n
}

// Known counts the disagreements that are known toolchain deviations.
func (r *Report) Known() int {
	return len(r.Disagreements) + r.MoreDisagreements - r.Unknown()
}

// Recovery kinds of a canonical rule.
const (
	locValue   = iota // Reg + Off
	locDeref          // *(Reg + Off)
	locUndef          // not recoverable: end of the stack
	locUnknown        // a DWARF expression or rule SFrame has no equal for
	locNone           // no rule (RA-undefined rows give no CFA or FP)
)

// regCFA marks a canonical rule based on the CFA.
const regCFA = -1

// loc is a canonical recovery rule, comparable between CFI and SFrame.
type loc struct {
	kind int
	reg  int64
	off  int64
	text string
}

func (l loc) String() string {
	base := "cfa"
	if l.reg != regCFA {
		base = fmt.Sprintf("r%d", l.reg)
	}
	switch l.kind {
	case locValue:
		return fmt.Sprintf("%s%+d", base, l.off)
	case locDeref:
		return fmt.Sprintf("(%s%+d)", base, l.off)
	case locUndef:
		return "undefined"
	case locNone:
		return "none"
	}
	return l.text
}

// verifier holds the per-ABI facts for comparisons.
type verifier struct {
	abi    sframe.ABI
	c      *converter
	s      *sframe.Section
	report *Report
	names  func(*cfi.FDE) string
	rel    bool     // match functions by order and size (relocatable objects)
	next   int      // rel: the next SFrame function to match
	starts []uint64 // the SFrame function starts
	// inFunc counts the disagreements found in the current function,
	// pending holds the first maxPerFunc of them and more the rest.
	inFunc  int
	pending []Disagreement
	more    int
}

// canonCFI converts CFI rules to canonical form; pc is needed for the PLT
// expression.
func (v *verifier) cfaCFI(r *cfi.Row, pc uint64) loc {
	switch r.CFA.Kind {
	case cfi.CFARegOffset:
		return loc{kind: locValue, reg: int64(r.CFA.Reg), off: r.CFA.Offset}
	case cfi.CFAExpression:
		if reg, off, ok := derefRegPlusOffset(r.CFA.Expr); ok {
			return loc{kind: locDeref, reg: int64(reg), off: off}
		}
		if v.abi == sframe.ABIAMD64LE {
			if p, ok := matchPLT(r.CFA.Expr, uint64(v.c.sp), uint64(v.c.pc)); ok {
				return loc{kind: locValue, reg: int64(v.c.sp), off: p.cfaAt(pc)}
			}
		}
		return loc{kind: locUnknown, text: "expr(" + cfi.ExprString(r.CFA.Expr, v.c.a) + ")"}
	}
	return loc{kind: locUnknown, text: "no CFA rule"}
}

func (v *verifier) ruleCFI(ru cfi.Rule, col arch.Reg, isRA bool) loc {
	switch ru.Kind {
	case cfi.RuleUnspecified:
		if isRA && v.c.fixedRA {
			return loc{kind: locUnknown, text: "unspecified"}
		}
		return loc{kind: locValue, reg: int64(col)}
	case cfi.RuleSameValue:
		return loc{kind: locValue, reg: int64(col)}
	case cfi.RuleUndefined:
		return loc{kind: locUndef}
	case cfi.RuleOffset:
		return loc{kind: locDeref, reg: regCFA, off: ru.Offset}
	case cfi.RuleValOffset:
		return loc{kind: locValue, reg: regCFA, off: ru.Offset}
	case cfi.RuleRegister:
		return loc{kind: locValue, reg: int64(ru.Reg)}
	case cfi.RuleExpression:
		if reg, off, ok := regPlusOffset(ru.Expr); ok {
			return loc{kind: locDeref, reg: int64(reg), off: off}
		}
	case cfi.RuleValExpression:
		if reg, off, ok := regPlusOffset(ru.Expr); ok {
			return loc{kind: locValue, reg: int64(reg), off: off}
		}
	}
	return loc{kind: locUnknown, text: ru.Kind.String() + "(" + cfi.ExprString(ru.Expr, v.c.a) + ")"}
}

func sfLoc(r sframe.Rule) loc {
	reg := int64(r.Base)
	if r.Base == sframe.RegCFA {
		reg = regCFA
	}
	switch r.Kind {
	case sframe.RuleValue:
		return loc{kind: locValue, reg: reg, off: r.Offset}
	case sframe.RuleDeref:
		return loc{kind: locDeref, reg: reg, off: r.Offset}
	}
	return loc{kind: locUnknown, text: r.Kind.String()}
}

// sfRA and sfFP give the canonical SFrame RA and FP rules: an absent or
// padding entry means "still in its register" (RA on AArch64 and s390x,
// FP everywhere) or, with a fixed RA offset, the fixed slot.
func (v *verifier) sfRA(r sframe.Row) loc {
	switch r.RA.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
		if v.s.HasFixedRA() {
			return loc{kind: locDeref, reg: regCFA, off: int64(v.s.CFAFixedRAOffset)}
		}
		return loc{kind: locValue, reg: int64(v.c.ra)}
	}
	return sfLoc(r.RA)
}

func (v *verifier) sfFP(r sframe.Row) loc {
	switch r.FP.Kind {
	case sframe.RuleUnspecified, sframe.RuleNotSaved:
		return loc{kind: locValue, reg: int64(v.c.fp)}
	}
	return sfLoc(r.FP)
}

// VerifyOptions control Verify.
type VerifyOptions struct {
	// Relocatable matches SFrame functions to FDEs by order and size, for
	// relocatable objects: their text sections all start at address 0,
	// and gas writes the SFrame functions in CFI order.
	Relocatable bool
	// Names, when not nil, names the function an FDE describes.
	Names func(fde *cfi.FDE) string
}

// Verify compares an SFrame section with the CFI it should describe: for
// every CFI function, at every CFI row boundary and every SFrame row
// boundary inside it, the CFA, RA and FP recovery must agree. CFI
// functions SFrame does not describe are listed, not failed.
//
// A section that does not validate (sframe.Section.Validate) is an
// error, not a report.
//
// Limits: CFI rows are streamed, never held, so memory grows with the
// SFrame rows of the functions matched to one FDE (at most 65535 per
// function in v3, and bounded by the section size in any version), not
// with the length of a CFI program. At most 65536 PCs are checked per
// PC-mask function (whose rows repeat once per entry) beyond the CFI row
// boundaries, and at most 64 disagreements are listed per function (see
// Report.MoreDisagreements).
func Verify(t *cfi.Table, s *sframe.Section, opts VerifyOptions) (*Report, error) {
	return VerifyTables([]*cfi.Table{t}, s, opts)
}

// VerifyTables is Verify against a file's CFI sections in the order an
// unwinder consults them (.eh_frame, then .debug_frame), as
// FromCFITables converts them: every FDE of the first table, and of each
// later one the FDEs whose start no earlier table covers. Limits: as
// Verify's.
func VerifyTables(tabs []*cfi.Table, s *sframe.Section, opts VerifyOptions) (*Report, error) {
	if s.ABI < sframe.ABIAArch64BE || s.ABI > sframe.ABIS390XBE {
		return nil, fmt.Errorf("convert: unknown %s", s.ABI)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	v := &verifier{abi: s.ABI, c: newConverter(s.ABI, sframe.Version3), s: s, names: opts.Names, rel: opts.Relocatable,
		report: &Report{Disagreements: []Disagreement{}, LeftOut: []LeftOut{}}}
	for i := 0; i < s.NumFuncs(); i++ {
		if f, err := s.Func(i); err == nil {
			v.starts = append(v.starts, f.Start)
		}
	}
	sort.Slice(v.starts, func(i, j int) bool { return v.starts[i] < v.starts[j] })
	if v.names == nil {
		v.names = func(*cfi.FDE) string { return "" }
	}
	eachFDE(tabs, func(t *cfi.Table, e *cfi.FDE) {
		if fde := *e; fde.PCEnd > fde.PCBegin {
			v.verifyFDE(t.NewUnwindTable(&fde), &fde)
		}
	}, func(error) { v.report.CFIErrors++ })
	sort.SliceStable(v.report.Disagreements, func(i, j int) bool {
		return v.report.Disagreements[i].PC < v.report.Disagreements[j].PC
	})
	return v.report, nil
}

// maxPoints bounds the PCs checked per function beyond the CFI row
// boundaries: PC-mask functions repeat their rows once per entry.
const maxPoints = 1 << 16

// maxPerFunc bounds the disagreements recorded per function; the rest
// are only counted (Report.MoreDisagreements).
const maxPerFunc = 64

// sfFunc is an SFrame function matched to a CFI function, with its
// start as the CFI sees it (in relocatable objects, whose functions are
// matched by order, the two may differ) and its rows.
type sfFunc struct {
	f     sframe.Func
	start uint64
	rows  []sframe.EncRow
}

func (g *sfFunc) end() uint64 { return g.start + uint64(g.f.Size) }

// rowAt returns the row of g covering pc.
func (g *sfFunc) rowAt(pc uint64) (sframe.Row, bool) {
	off := pc - g.start
	if g.f.PCType() == sframe.PCMask {
		if g.f.RepSize == 0 {
			return sframe.Row{}, false
		}
		off %= uint64(g.f.RepSize)
	}
	j := sort.Search(len(g.rows), func(i int) bool { return uint64(g.rows[i].StartOff) > off }) - 1
	if j < 0 {
		return sframe.Row{}, false
	}
	return g.rows[j].Row, true
}

// matchFuncs returns the SFrame functions covering the FDE: by address in
// linked files; in relocatable objects, whose text sections all start at
// 0, the next function (in index order) of the FDE's size.
func (v *verifier) matchFuncs(fde *cfi.FDE) []sfFunc {
	s := v.s
	var out []sfFunc
	load := func(i int, start uint64) bool {
		f, err := s.Func(i)
		if err != nil {
			return false
		}
		ef, err := sframe.ExtractFunc(s, i)
		if err != nil {
			return false
		}
		out = append(out, sfFunc{f: f, start: start, rows: ef.Rows})
		return true
	}
	if v.rel {
		for i := v.next; i < s.NumFuncs(); i++ {
			f, err := s.Func(i)
			if err != nil {
				break
			}
			if uint64(f.Size) == fde.PCEnd-fde.PCBegin {
				v.next = i + 1
				load(i, fde.PCBegin)
				break
			}
		}
		return out
	}
	for pc := fde.PCBegin; pc < fde.PCEnd; {
		i := s.FindFunc(pc)
		if i < 0 {
			// Continue at the next function starting inside the range.
			next := fde.PCEnd
			if k := sort.Search(len(v.starts), func(i int) bool { return v.starts[i] > pc }); k < len(v.starts) && v.starts[k] < next {
				next = v.starts[k]
			}
			pc = next
			continue
		}
		f, err := s.Func(i)
		if err != nil || f.End() <= pc || !load(i, f.Start) {
			break
		}
		pc = f.End()
	}
	return out
}

// verifyFDE compares one CFI function with the SFrame functions covering
// it, in one pass over its rows. What it finds is kept aside until the
// CFI program has been read to its end: a function whose CFI turns out
// malformed counts as a CFI error only.
func (v *verifier) verifyFDE(ut *cfi.UnwindTable, fde *cfi.FDE) {
	name := v.names(fde)
	next := v.next
	funcs := v.matchFuncs(fde)
	withRows := false
	for i := range funcs {
		withRows = withRows || len(funcs[i].rows) > 0
	}
	v.inFunc, v.pending, v.more = 0, v.pending[:0], 0
	pcs, maskPts, nrows := 0, 0, 0
	check := func(pc uint64, cr *cfi.Row) {
		pcs++
		var sr sframe.Row
		found := false
		for i := range funcs {
			if g := &funcs[i]; pc >= g.start && pc < g.end() {
				sr, found = g.rowAt(pc)
				break
			}
		}
		v.compare(fde, name, pc, cr, sr, found)
	}
	for ut.Next() {
		cr := ut.Row()
		if cr.Start >= fde.PCEnd {
			break
		}
		nrows++
		if !withRows {
			continue // read on only to tell a malformed program
		}
		// The row's start, then the SFrame row boundaries inside it.
		check(cr.Start, cr)
		end := min(cr.End, fde.PCEnd)
		for i := range funcs {
			g := &funcs[i]
			lo, hi := max(cr.Start+1, g.start), min(end, g.end())
			if lo >= hi {
				continue
			}
			if g.f.PCType() != sframe.PCMask {
				j := sort.Search(len(g.rows), func(k int) bool { return g.start+uint64(g.rows[k].StartOff) >= lo })
				for ; j < len(g.rows) && g.start+uint64(g.rows[j].StartOff) < hi; j++ {
					check(g.start+uint64(g.rows[j].StartOff), cr)
				}
				continue
			}
			rep := uint64(g.f.RepSize)
			if rep == 0 {
				continue
			}
			for b := g.start + (lo-g.start)/rep*rep; b < hi && maskPts < maxPoints; b += rep {
				for _, r := range g.rows {
					if pc := b + uint64(r.StartOff); pc >= lo && pc < hi && maskPts < maxPoints {
						maskPts++
						check(pc, cr)
					}
				}
			}
		}
	}
	if ut.Err() != nil || nrows == 0 {
		v.report.CFIErrors++
		v.next = next // the SFrame function may belong to the next FDE
		return
	}
	if !withRows {
		v.report.LeftOut = append(v.report.LeftOut, LeftOut{Func: name, Start: fde.PCBegin, End: fde.PCEnd, NoRows: len(funcs) > 0})
		return
	}
	v.report.Funcs++
	v.report.PCs += pcs
	v.report.Disagreements = append(v.report.Disagreements, v.pending...)
	v.report.MoreDisagreements += v.more
}

func (v *verifier) compare(fde *cfi.FDE, name string, pc uint64, cr *cfi.Row, sr sframe.Row, found bool) {
	// keep counts a disagreement and says whether to list it: only the
	// first maxPerFunc of a function are formatted and kept.
	keep := func() bool {
		if v.inFunc++; v.inFunc > maxPerFunc {
			v.more++
			return false
		}
		return true
	}
	add := func(what string, sf, c string) {
		v.pending = append(v.pending, Disagreement{Func: name, FuncStart: fde.PCBegin, FuncEnd: fde.PCEnd, PC: pc,
			What: what, SFrame: sf, CFI: c})
	}
	if !found {
		if keep() {
			add("row", "none", fmt.Sprintf("row at %#x", cr.Start))
		}
		return
	}
	raCol := v.c.ra
	if fde.CIE != nil {
		raCol = fde.CIE.RA
	}
	cra := v.ruleCFI(cr.Rule(raCol), raCol, true)
	var sra loc
	if sr.RAUndefined {
		sra = loc{kind: locUndef}
	} else {
		sra = v.sfRA(sr)
	}
	if cra != sra && keep() {
		add("RA", sra.String(), cra.String())
	}
	if cra.kind == locUndef || sr.RAUndefined {
		return // the trace ends here: CFA and FP do not matter
	}
	if c, s := v.cfaCFI(cr, pc), sfLoc(sr.CFA); c != s && keep() {
		add("CFA", s.String(), c.String())
	}
	if c, s := v.ruleCFI(cr.Rule(v.c.fp), v.c.fp, false), v.sfFP(sr); c != s && keep() {
		add("FP", s.String(), c.String())
	}
	if v.c.a == arch.ARM64 && cr.RASigned != sr.RASigned && keep() {
		add("RA signed", fmt.Sprint(sr.RASigned), fmt.Sprint(cr.RASigned))
	}
}

// KnownPLTGot explains the one known deviation of GNU ld found in the
// reference corpus: ld 2.44-2.47 describe .plt.got entries (a jmp through
// the GOT) with CFA = SP+16, while the CFI ld writes for them, and the
// code, say SP+8.
const KnownPLTGot = "GNU ld describes .plt.got entries with CFA sp+16; its CFI and the code say sp+8"

// KnownOldGasRAUndefined and KnownOldGasRARegister explain deviations of
// binutils 2.41-2.44 gas (v2 sections without
// SFRAME_F_FDE_FUNC_START_PCREL): it wrote no RA-undefined rows (added by
// v2 errata 2) and ignored .cfi_register for the AMD64 return address.
const (
	KnownOldGasRAUndefined = "binutils 2.41-2.44 gas writes no RA-undefined rows"
	KnownOldGasRARegister  = "binutils 2.41-2.44 gas ignores .cfi_register for the AMD64 return address"
)

// VerifyELFOptions select the sections VerifyELF compares.
type VerifyELFOptions struct {
	// SFrameSection names the SFrame section; "" means .sframe or the
	// section of type SHT_GNU_SFRAME.
	SFrameSection string
	// CFISection is ".eh_frame" or ".debug_frame"; "" means .eh_frame when
	// the file has one with data, .debug_frame otherwise, and in a linked
	// file with both, .debug_frame too for the functions .eh_frame does
	// not cover (see VerifyTables).
	CFISection string
}

// VerifyELF verifies the SFrame section of an ELF file against its CFI
// (see Verify), naming functions by their symbols and marking known
// toolchain deviations (MarkKnown). A missing section, or one that does
// not parse or validate, is an error.
func VerifyELF(f *elf.File, opts VerifyELFOptions) (*Report, error) {
	sec := elffile.FindSFrame(f, opts.SFrameSection)
	if sec == nil {
		if opts.SFrameSection != "" {
			return nil, fmt.Errorf("convert: no SFrame section %s", opts.SFrameSection)
		}
		return nil, errors.New("convert: no SFrame section (neither .sframe nor a section of type SHT_GNU_SFRAME)")
	}
	s, err := parseSection(f, sec)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("section %s: %w", sec.Name, err)
	}
	tabs, cfiName, err := cfiTables(f, opts.CFISection)
	if err != nil {
		return nil, err
	}
	rep, err := VerifyTables(tabs, s, VerifyOptions{Relocatable: f.Type == elf.ET_REL, Names: fdeNames(f, cfiName)})
	if err != nil {
		return nil, err
	}
	MarkKnown(f, s, rep)
	return rep, nil
}

// MarkKnown sets Disagreement.Known for the known deviations of GNU
// binutils (see KnownPLTGot, KnownOldGasRAUndefined and
// KnownOldGasRARegister) in a report on the section s of file f.
func MarkKnown(f *elf.File, s *sframe.Section, rep *Report) {
	// binutils 2.41-2.44 wrote v2 without SFRAME_F_FDE_FUNC_START_PCREL.
	old := s.Version == sframe.Version2 && s.Flags&sframe.FlagFuncStartPCRel == 0
	for i := range rep.Disagreements {
		d := &rep.Disagreements[i]
		switch {
		case !old || d.What != "RA":
		case d.CFI == "undefined":
			d.Known = KnownOldGasRAUndefined
		case s.ABI == sframe.ABIAMD64LE && d.SFrame == "(cfa-8)" && strings.HasPrefix(d.CFI, "r") && strings.HasSuffix(d.CFI, "+0"):
			d.Known = KnownOldGasRARegister
		}
	}
	if f.Type != elf.ET_REL {
		for i := range rep.Disagreements {
			d := &rep.Disagreements[i]
			if d.What == "CFA" && d.SFrame == fmt.Sprintf("r%d+16", s.ABI.Arch().SP()) && d.CFI == fmt.Sprintf("r%d+8", s.ABI.Arch().SP()) &&
				s.ABI == sframe.ABIAMD64LE && sectionName(f, d.PC) == ".plt.got" {
				d.Known = KnownPLTGot
			}
		}
	}
}

// sectionName returns the name of the allocated section holding addr.
func sectionName(f *elf.File, addr uint64) string {
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s.Name
		}
	}
	return ""
}

// symbolNames returns a lookup of function symbols by start address,
// or of the section name when no symbol starts there, for linked files.
func symbolNames(f *elf.File) func(uint64) string {
	m := map[uint64]string{}
	add := func(syms []elf.Symbol) {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" {
				if _, ok := m[s.Value]; !ok {
					m[s.Value] = s.Name
				}
			}
		}
	}
	if syms, err := elffile.Symbols(f); err == nil {
		add(syms)
	}
	if syms, err := elffile.DynamicSymbols(f); err == nil {
		add(syms)
	}
	return func(pc uint64) string {
		if n, ok := m[pc]; ok {
			return n
		}
		if sn := sectionName(f, pc); sn != "" && sn != ".text" {
			return sn
		}
		return ""
	}
}

// fdeNames returns the names of the functions the FDEs of the CFI
// section cfiName describe. In a linked file, the symbol at the FDE's
// start. In a relocatable object, where every text section starts at 0
// and STT_FUNC symbols hold offsets in their own section, the FDE's
// relocated start is such an offset: the relocation of its PC-begin
// field says in which section, and the name is that of the function
// symbol of that section at that offset.
func fdeNames(f *elf.File, cfiName string) func(*cfi.FDE) string {
	if f.Type != elf.ET_REL {
		names := symbolNames(f)
		return func(fde *cfi.FDE) string { return names(fde.PCBegin) }
	}
	syms, err := elffile.Symbols(f)
	if err != nil {
		return func(*cfi.FDE) string { return "" }
	}
	type key struct {
		sec elf.SectionIndex
		off uint64
	}
	names := map[key]string{}
	for _, s := range syms {
		k := key{s.Section, s.Value}
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" && names[k] == "" {
			names[k] = s.Name
		}
	}
	targets := relocTargets(f, f.Section(cfiName), syms)
	return func(fde *cfi.FDE) string {
		// The PC-begin field follows the length and the CIE pointer (and
		// a DWARF 4 segment selector).
		off := fde.Offset + 8
		if fde.Format64 {
			off = fde.Offset + 20
		}
		if fde.CIE != nil {
			off += uint64(fde.CIE.SegmentSize)
		}
		sec, ok := targets[off]
		if !ok {
			return ""
		}
		return names[key{sec, fde.PCBegin}]
	}
}

// relocTargets maps the offsets in sec that relocations patch to the
// section of the symbol each relocation refers to. It reads what it can
// and ignores the rest (names are a convenience).
func relocTargets(f *elf.File, sec *elf.Section, syms []elf.Symbol) map[uint64]elf.SectionIndex {
	out := map[uint64]elf.SectionIndex{}
	for _, rs := range elffile.RelocSections(f, sec) {
		rr, err := elffile.Relocs(f, rs)
		if err != nil {
			continue
		}
		for _, r := range rr {
			// debug/elf leaves out the null symbol: symbol i is syms[i-1].
			if r.Sym > 0 && uint64(r.Sym) <= uint64(len(syms)) {
				out[r.Off] = syms[r.Sym-1].Section
			}
		}
	}
	return out
}

// cfiTables reads the CFI sections of f to convert or verify against:
// section when given (cfiSection), else .eh_frame and, in a linked file
// that has both, .debug_frame after it. Code built without unwind
// tables has its rows in .debug_frame only, as an unwinder reads them
// (see FromCFITables); in an object every text section starts at 0, so
// which FDEs of the two describe the same code cannot be told. It
// returns the tables and the name of the first.
func cfiTables(f *elf.File, section string) ([]*cfi.Table, string, error) {
	name, err := cfiSection(f, section)
	if err != nil {
		return nil, "", err
	}
	t, err := cfi.FromELF(f, name)
	if err != nil {
		return nil, "", err
	}
	tabs := []*cfi.Table{t}
	if section == "" && name == ".eh_frame" && f.Type != elf.ET_REL {
		if s := f.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			d, err := cfi.FromELF(f, ".debug_frame")
			if err != nil {
				return nil, "", err
			}
			tabs = append(tabs, d)
		}
	}
	return tabs, name, nil
}

// cfiSection resolves the CFI section to read: name when given, else
// .eh_frame when the file has one with data, else .debug_frame. A file
// with neither is an error that says so.
func cfiSection(f *elf.File, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	for _, n := range []string{".eh_frame", ".debug_frame"} {
		if s := f.Section(n); s != nil && s.Type != elf.SHT_NOBITS {
			return n, nil
		}
	}
	return "", errors.New("convert: no CFI (neither .eh_frame nor .debug_frame)")
}

package dump

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/textfmt"
	"github.com/sframekit/sframekit/sframe"
)

// WriteFileHeader writes the line objdump prints before the dumps of a file.
func WriteFileHeader(w io.Writer, name, format string) error {
	_, err := fmt.Fprintf(w, "\n%s:     file format %s\n\n", name, format)
	return err
}

// WriteSFrameText writes the SFrame section of in as objdump --sframe
// prints it (the line before, with the file name and format, is
// WriteFileHeader's). Rows that cannot be decoded stop the dump with an
// error after what was printed so far, and so does a row past the
// header's FRE count (bounded by the section size), so that functions
// sharing their rows cannot make a small section print gigabytes.
func WriteSFrameText(w io.Writer, in *Input) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	err := text(bw, in.SFrame, in.Section)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

type printer struct {
	w   *bufio.Writer
	s   *sframe.Section
	buf []byte
	// rows counts the rows printed, which may not pass the header's
	// count: functions of a crafted section can all claim the same rows.
	rows uint64
}

func text(w *bufio.Writer, s *sframe.Section, secName string) error {
	p := &printer{w: w, s: s, buf: make([]byte, 0, 64)}
	fmt.Fprintf(w, "Contents of the SFrame section %s:", secName)
	p.header()
	w.WriteString("\n  Function Index :\n")
	for i := 0; i < s.NumFuncs(); i++ {
		if err := p.function(i); err != nil {
			w.WriteString("\n")
			return err
		}
		w.WriteString("\n")
	}
	return nil
}

func (p *printer) header() {
	h, w := p.s.Header(), p.w
	w.WriteString("\n  Header :\n\n")
	fmt.Fprintf(w, "    Version: %s\n", h.Version)
	if h.Version == sframe.Version1 {
		// binutils 2.40 overwrote rather than appended its flag names.
		str := ""
		switch {
		case h.Flags == 0:
			str = "NONE"
		case h.Flags&sframe.FlagFramePointer != 0:
			str = "SFRAME_F_FRAME_POINTER"
		case h.Flags&sframe.FlagFDESorted != 0:
			str = "SFRAME_F_FDE_SORTED"
		}
		fmt.Fprintf(w, "    Flags: %s\n", str)
	} else {
		p.flags()
		if h.CFAFixedFPOffset != 0 {
			fmt.Fprintf(w, "    CFA fixed FP offset: %d\n", h.CFAFixedFPOffset)
		}
		if h.CFAFixedRAOffset != 0 {
			fmt.Fprintf(w, "    CFA fixed RA offset: %d\n", h.CFAFixedRAOffset)
		}
	}
	fmt.Fprintf(w, "    Num FDEs: %d\n", int32(h.NumFDEs))
	fmt.Fprintf(w, "    Num FREs: %d\n", int32(h.NumFREs))
}

func (p *printer) flags() {
	flags := p.s.Header().Flags
	if flags == 0 {
		p.w.WriteString("    Flags: NONE\n")
		return
	}
	prefix := "Flags: "
	emit := func(bit sframe.Flags, name string) {
		if flags&bit == 0 {
			return
		}
		flags &^= bit
		comma := ""
		if flags != 0 {
			comma = ","
		}
		fmt.Fprintf(p.w, "%11s%s%s\n", prefix, name, comma)
		prefix = " "
	}
	emit(sframe.FlagFDESorted, "SFRAME_F_FDE_SORTED")
	if p.s.Header().Version == sframe.Version2 {
		emit(sframe.FlagFramePointer, "SFRAME_F_FRAME_POINTER")
	}
	emit(sframe.FlagFuncStartPCRel, "SFRAME_F_FDE_FUNC_START_PCREL")
	if flags != 0 {
		fmt.Fprintf(p.w, "%11s%d\n", prefix, flags)
	}
}

// dumpStart is the function address as libsframe's dumper computes it:
// the start field plus the section address, plus the field's position
// (header size + index * entry size, ignoring sfh_fdeoff) when the start
// is PC-relative.
func dumpStart(s *sframe.Section, f *sframe.Func) uint64 {
	a := uint64(f.StartField) + s.Addr()
	if s.Header().Version != sframe.Version1 && s.Header().Flags&sframe.FlagFuncStartPCRel != 0 {
		a += uint64(s.HeaderLen() + f.Index*s.Header().Version.FDESize())
	}
	return a
}

func (p *printer) function(i int) error {
	s, w := p.s, p.w
	f, err := s.Func(i)
	if err != nil {
		return err
	}
	start := dumpStart(s, &f)
	// By hand, not fmt: this runs once per function.
	b := append(p.buf[:0], "\n    func idx ["...)
	b = strconv.AppendInt(b, int64(int32(i)), 10)
	b = append(b, "]: pc = 0x"...)
	b = strconv.AppendUint(b, start, 16)
	b = append(b, ", size = "...)
	b = strconv.AppendInt(b, int64(int32(f.Size)), 10)
	b = append(b, " bytes"...)
	p.buf = b
	w.Write(b)
	// objdump prints attributes from v2 on; SignalBit and FDEFlex are
	// never set before.
	flex := f.FDEType() == sframe.FDEFlex
	if sig := f.SignalBit(); sig || flex {
		w.WriteString(`, attr = "`)
		if sig {
			w.WriteString("S")
		}
		if flex {
			w.WriteString("F")
		}
		w.WriteString(`"`)
	}
	if s.Header().ABI.Arch() == arch.ARM64 && f.PAuthKeyB() {
		w.WriteString(", pauth = B key")
	}
	mask := f.PCType() == sframe.PCMask
	if mask {
		w.WriteString("\n    STARTPC[m]      CFA       FP        RA           ")
	} else {
		w.WriteString("\n    STARTPC         CFA       FP        RA           ")
	}
	it := s.FREs(&f)
	for it.Next() {
		e := it.FRE()
		if err := tooManyRows(s, &p.rows, i); err != nil {
			return err
		}
		pc := uint64(e.StartOff)
		if !mask {
			pc += start
		}
		p.buf = append(p.buf[:0], "\n    "...)
		p.buf = textfmt.AppendHex(p.buf, pc, 8)
		if s.Header().Version == sframe.Version1 {
			p.rowV1(&f, e)
		} else if err := p.row(&f, e, flex); err != nil {
			w.Write(p.buf)
			return err
		}
		w.Write(p.buf)
	}
	return it.Err()
}

func (p *printer) row(f *sframe.Func, e *sframe.FRE, flex bool) error {
	r, err := p.s.Rules(f, e)
	if err != nil {
		return err
	}
	if r.RAUndefined {
		p.buf = append(p.buf, "  RA undefined"...)
		return nil
	}
	p.buf = append(p.buf, "  "...)
	// CFA
	m := len(p.buf)
	if flex {
		p.disp(r.CFA)
	} else {
		p.buf = append(p.buf, p.regName(r.CFA.Base)...)
		p.buf = append(p.buf, '+')
		p.buf = strconv.AppendInt(p.buf, int64(int32(r.CFA.Offset)), 10)
	}
	p.buf = textfmt.PadTo(p.buf, m, 10)
	// FP
	m = len(p.buf)
	p.saved(r.FP, flex)
	p.buf = textfmt.PadTo(p.buf, m, 10)
	// RA
	m = len(p.buf)
	if r.RA.Padding {
		p.buf = append(p.buf, 'U')
	} else if r.RA.Fixed {
		p.buf = append(p.buf, 'f')
	} else {
		p.saved(r.RA, flex)
	}
	if r.RASigned {
		p.buf = append(p.buf, "[s]"...)
	} else {
		p.buf = append(p.buf, "   "...)
	}
	p.buf = textfmt.PadTo(p.buf, m, 13)
	return nil
}

// saved formats an FP or RA rule.
func (p *printer) saved(r sframe.Rule, flex bool) {
	switch {
	case r.Kind == sframe.RuleUnspecified:
		p.buf = append(p.buf, 'u')
	case r.Kind == sframe.RuleNotSaved:
		p.buf = append(p.buf, 'U')
	case flex:
		p.disp(r)
	case r.Base != sframe.RegCFA:
		// v2 s390x: value held in a register.
		p.buf = append(p.buf, 'r')
		p.buf = strconv.AppendInt(p.buf, int64(r.Base), 10)
	default:
		p.buf = append(p.buf, 'c')
		p.buf = appendSigned(p.buf, r.Offset)
	}
}

// disp formats a flexible rule as "reg+off" or "(reg+off)".
func (p *printer) disp(r sframe.Rule) {
	deref := r.Kind == sframe.RuleDeref
	if deref {
		p.buf = append(p.buf, '(')
	}
	if r.Base == sframe.RegCFA {
		p.buf = append(p.buf, 'c')
	} else {
		p.buf = append(p.buf, p.regName(r.Base)...)
	}
	p.buf = appendSigned(p.buf, r.Offset)
	if deref {
		p.buf = append(p.buf, ')')
	}
}

// appendSigned appends an offset as objdump prints it: truncated to
// 32 bits, its sign always written.
func appendSigned(b []byte, v int64) []byte {
	return textfmt.AppendSigned(b, int64(int32(v)))
}

func (p *printer) regName(r arch.Reg) string {
	switch r {
	case p.s.Header().ABI.Arch().SP():
		return "sp"
	case p.s.Header().ABI.Arch().FP():
		return "fp"
	}
	return "r" + strconv.Itoa(int(r))
}

// rowV1 prints a row as objdump 2.40 did for SFrame version 1: the fixed
// RA printed as "u", and a missing RA word leaving the FP text in place.
func (p *printer) rowV1(f *sframe.Func, e *sframe.FRE) {
	s, h := p.s, p.s.Header()
	word := func(i int) (int32, bool) { return s.Word(e, i) }
	cfa, _ := word(0)
	p.buf = append(p.buf, "  "...)
	m := len(p.buf)
	if e.BaseIsSP() {
		p.buf = append(p.buf, "sp+"...)
	} else {
		p.buf = append(p.buf, "fp+"...)
	}
	p.buf = strconv.AppendInt(p.buf, int64(cfa), 10)
	p.buf = textfmt.PadTo(p.buf, m, 10)
	fpIdx, raIdx := 2, 1
	if h.HasFixedRA() {
		fpIdx = 1
	}
	var temp []byte
	if h.HasFixedFP() {
		temp = appendSigned([]byte{'c'}, int64(h.CFAFixedFPOffset))
	} else if v, ok := word(fpIdx); ok {
		temp = appendSigned([]byte{'c'}, int64(v))
	} else {
		temp = []byte{'u'}
	}
	m = len(p.buf)
	p.buf = append(p.buf, temp...)
	p.buf = textfmt.PadTo(p.buf, m, 10)
	if h.HasFixedRA() {
		temp = []byte{'u'}
	} else if v, ok := word(raIdx); ok {
		temp = appendSigned([]byte{'c'}, int64(v))
	}
	m = len(p.buf)
	p.buf = append(p.buf, temp...)
	if e.RASigned() {
		p.buf = append(p.buf, "[s]"...)
	} else {
		p.buf = append(p.buf, "   "...)
	}
	p.buf = textfmt.PadTo(p.buf, m, 13)
}

// tooManyRows counts one more row of function fn against the header's FRE
// count, returning an error when it passes it.
func tooManyRows(s *sframe.Section, rows *uint64, fn int) error {
	if *rows++; *rows > uint64(s.Header().NumFREs) {
		return &sframe.Error{Offset: 12, Func: fn, Kind: sframe.ErrCountMismatch,
			Msg: fmt.Sprintf("functions hold more than the header's %d FREs", s.Header().NumFREs)}
	}
	return nil
}

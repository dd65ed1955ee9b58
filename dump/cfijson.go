package dump

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/hexaddr"
)

// The JSON form of CFI written by WriteCFIJSON (and `sframe cfi --json`). It is
// stable: fields are only ever added. Addresses are strings "0x..." (JSON
// numbers lose precision above 2^53); offsets, sizes and factors are
// numbers; registers are objects with the DWARF number and the name.
//
//	{
//	  "file": "libc.so.6", "arch": "x86-64",
//	  "sections": [{
//	    "name": ".eh_frame", "address": "0x1a8f40", "size": 153296,
//	    "entries": [
//	      {"kind": "CIE", "offset": 0, "length": 20, "version": 1,
//	       "augmentation": "zR", "code_align": 1, "data_align": -8,
//	       "ra": {"num": 16, "name": "rip"}, "fde_encoding": "0x1b",
//	       "signal_frame": false, "rows": [ROW...]},
//	      {"kind": "FDE", "offset": 24, "length": 36, "cie": 0,
//	       "pc_begin": "0x26000", "pc_end": "0x26360",
//	       "lsda": "0x...",            (only when present)
//	       "rows": [ROW...]},
//	      {"kind": "terminator", "offset": 153292},
//	      {"kind": "FDE", "offset": 100, "error": ".eh_frame+0x..: ..."}  (bad entry)
//	    ]}]
//	}
//
// ROW is {"start": "0x26000", "end": "0x26006",
// "cfa": {"rule": "reg_offset", "reg": {"num": 7, "name": "rsp"}, "offset": 8}
// or {"rule": "expression", "expr": "770879..." (hex bytes)},
// "regs": [{"reg": {...}, "rule": "offset", "offset": -8}, ...],
// "ra_signed": true (AArch64, only when set), "args_size": N (only when set)}.
// Register rules are "undefined", "same_value", "offset" (offset),
// "val_offset" (offset), "register" (source reg), "expression" and
// "val_expression" (expr). Rows with an empty address range are omitted;
// CIE rows are those of the initial instructions alone.
type cfiJSONFile struct {
	File     string           `json:"file"`
	Arch     string           `json:"arch"`
	Sections []cfiJSONSection `json:"sections"`
}

type cfiJSONSection struct {
	Name    string         `json:"name"`
	Address string         `json:"address"`
	Size    uint64         `json:"size"`
	Entries []cfiJSONEntry `json:"entries"`
	Error   string         `json:"error,omitempty"`
}

type cfiJSONReg struct {
	Num  arch.Reg `json:"num"`
	Name string   `json:"name"`
}

type cfiJSONEntry struct {
	Kind         string       `json:"kind"`
	Offset       uint64       `json:"offset"`
	Length       uint64       `json:"length,omitempty"`
	Error        string       `json:"error,omitempty"`
	Version      uint8        `json:"version,omitempty"`
	Augmentation *string      `json:"augmentation,omitempty"`
	CodeAlign    *uint64      `json:"code_align,omitempty"`
	DataAlign    *int64       `json:"data_align,omitempty"`
	RA           *cfiJSONReg  `json:"ra,omitempty"`
	FDEEncoding  string       `json:"fde_encoding,omitempty"`
	SignalFrame  *bool        `json:"signal_frame,omitempty"`
	CIE          *uint64      `json:"cie,omitempty"`
	PCBegin      string       `json:"pc_begin,omitempty"`
	PCEnd        string       `json:"pc_end,omitempty"`
	LSDA         string       `json:"lsda,omitempty"`
	Rows         []cfiJSONRow `json:"rows,omitempty"`
	RowsError    string       `json:"rows_error,omitempty"`
}

type cfiJSONCFA struct {
	Rule   string      `json:"rule"`
	Reg    *cfiJSONReg `json:"reg,omitempty"`
	Offset *int64      `json:"offset,omitempty"`
	Expr   string      `json:"expr,omitempty"`
}

type cfiJSONRule struct {
	Reg    cfiJSONReg  `json:"reg"`
	Rule   string      `json:"rule"`
	Offset *int64      `json:"offset,omitempty"`
	Source *cfiJSONReg `json:"source,omitempty"`
	Expr   string      `json:"expr,omitempty"`
}

type cfiJSONRow struct {
	Start    string        `json:"start"`
	End      string        `json:"end"`
	CFA      cfiJSONCFA    `json:"cfa"`
	Regs     []cfiJSONRule `json:"regs"`
	RASigned bool          `json:"ra_signed,omitempty"`
	ArgsSize uint64        `json:"args_size,omitempty"`
}

func cfiJSONRegOf(a arch.Arch, r arch.Reg) *cfiJSONReg {
	return &cfiJSONReg{Num: r, Name: a.RegName(r)}
}

func cfiRowJSON(a arch.Arch, r *cfi.Row) cfiJSONRow {
	j := cfiJSONRow{Start: hexaddr.Format(r.Start), End: hexaddr.Format(r.End), RASigned: r.RASigned, ArgsSize: r.ArgsSize, Regs: []cfiJSONRule{}}
	switch r.CFA.Kind {
	case cfi.CFARegOffset:
		off := r.CFA.Offset
		j.CFA = cfiJSONCFA{Rule: r.CFA.Kind.String(), Reg: cfiJSONRegOf(a, r.CFA.Reg), Offset: &off}
	case cfi.CFAExpression:
		j.CFA = cfiJSONCFA{Rule: r.CFA.Kind.String(), Expr: hex.EncodeToString(r.CFA.Expr)}
	default:
		j.CFA = cfiJSONCFA{Rule: r.CFA.Kind.String()}
	}
	for i := 0; i < r.NumRules(); i++ {
		rr := r.RuleAt(i)
		jr := cfiJSONRule{Reg: *cfiJSONRegOf(a, rr.Column), Rule: rr.Kind.String()}
		switch rr.Kind {
		case cfi.RuleOffset, cfi.RuleValOffset:
			off := rr.Offset
			jr.Offset = &off
		case cfi.RuleRegister:
			jr.Source = cfiJSONRegOf(a, rr.Reg)
		case cfi.RuleExpression, cfi.RuleValExpression:
			jr.Expr = hex.EncodeToString(rr.Expr)
		}
		j.Regs = append(j.Regs, jr)
	}
	return j
}

// WriteCFIJSON writes the CFI of in.ELF in the documented JSON form above,
// under the name in.Path: one object per file, one section object per
// .eh_frame or .debug_frame (or only in.Section, if not ""), each entry
// with its rows.
// Entries that fail to decode carry an "error" and do not stop the rest.
//
// The document is written as it is produced, entry by entry and row by
// row, laid out as encoding/json's Encoder with SetIndent("", " ") lays
// out the whole: memory stays bounded by the section, not by the number of
// rows, and a write error ends the output.
func WriteCFIJSON(w io.Writer, in *CFIInput) error {
	f, name, section := in.ELF, in.Path, in.Section
	arch := arch.FromELF(f.Machine)
	jw := &cfiJSONWriter{w: bufio.NewWriterSize(w, 64<<10)}
	jw.str("{\n \"file\": ")
	jw.value(name, "")
	jw.str(",\n \"arch\": ")
	jw.value(arch.String(), "")
	jw.str(",\n \"sections\": ")
	secs := jw.array("  ")
	for _, s := range f.Sections {
		if s.Name != ".eh_frame" && s.Name != ".debug_frame" {
			continue
		}
		if section != "" && s.Name != section {
			continue
		}
		secs.next()
		jw.writeSection(f, s, arch)
	}
	secs.end()
	jw.str("\n}\n")
	if err := jw.w.Flush(); jw.err == nil {
		jw.err = err
	}
	return jw.err
}

// writeSection writes one section object, its entries as they are
// decoded and its rows as they are computed.
func (jw *cfiJSONWriter) writeSection(f *elf.File, s *elf.Section, arch arch.Arch) {
	const in = "   " // the section's members
	jw.str("{\n" + in + "\"name\": ")
	jw.value(s.Name, in)
	jw.str(",\n" + in + "\"address\": ")
	jw.value(hexaddr.Format(s.Addr), in)
	jw.str(",\n" + in + "\"size\": ")
	jw.str(strconv.FormatUint(s.Size, 10))
	jw.str(",\n" + in + "\"entries\": ")
	entries := jw.array(in + " ")
	secErr := ""
	tab, err := cfi.FromELF(f, s.Name)
	if err != nil {
		secErr = err.Error()
	} else {
		it := tab.Entries()
		for it.Next() && jw.err == nil {
			entries.next()
			jw.writeEntry(tab, it.Entry(), arch)
		}
		if err := it.Err(); err != nil {
			secErr = err.Error()
		}
	}
	entries.end()
	if secErr != "" {
		jw.str(",\n" + in + "\"error\": ")
		jw.value(secErr, in)
	}
	jw.str("\n  }")
}

// writeEntry writes one entry object: its fields, then its rows.
func (jw *cfiJSONWriter) writeEntry(tab *cfi.Table, e cfi.Entry, arch arch.Arch) {
	const in = "    " // the entry object
	je := cfiJSONEntry{Kind: e.Kind.String(), Offset: e.Offset}
	var ut *cfi.UnwindTable
	switch {
	case e.Kind == cfi.KindTerminator:
	case e.Err != nil:
		je.Error = e.Err.Error()
	case e.Kind == cfi.KindCIE:
		c := e.CIE
		je.Length, je.Version = c.Length, c.Version
		aug, ca, da, sf := c.Augmentation, c.CodeAlign, c.DataAlign, c.SignalFrame
		je.Augmentation, je.CodeAlign, je.DataAlign, je.SignalFrame = &aug, &ca, &da, &sf
		je.RA = cfiJSONRegOf(arch, c.RA)
		je.FDEEncoding = fmt.Sprintf("%#x", uint8(c.FDEEncoding))
		ut = tab.NewCIEUnwindTable(c)
	default:
		fd := e.FDE
		co := fd.CIE.Offset
		je.Length, je.CIE = fd.Length, &co
		je.PCBegin, je.PCEnd = hexaddr.Format(fd.PCBegin), hexaddr.Format(fd.PCEnd)
		if fd.HasLSDA {
			je.LSDA = hexaddr.Format(fd.LSDA)
		}
		ut = tab.NewUnwindTable(fd)
	}
	b := jw.marshal(&je, in)
	if ut == nil {
		jw.buf(b)
		return
	}
	// Reopen the object after its last field for "rows" and "rows_error",
	// which come last.
	jw.buf(b[:len(b)-len(in)-2])
	var rows cfiJSONArray
	for ut.Next() && jw.err == nil {
		if rows.jw == nil {
			jw.str(",\n" + in + " \"rows\": ")
			rows = jw.array(in + "  ")
		}
		rows.next()
		r := cfiRowJSON(arch, ut.Row())
		jw.value(&r, in+"  ")
	}
	if rows.jw != nil {
		rows.end()
	}
	if err := ut.Err(); err != nil {
		jw.str(",\n" + in + " \"rows_error\": ")
		jw.value(err.Error(), in)
	}
	jw.str("\n" + in + "}")
}

// cfiJSONWriter writes a JSON document piece by piece; the first write error
// is kept and later writes are dropped.
type cfiJSONWriter struct {
	w       *bufio.Writer
	err     error
	scratch bytes.Buffer // marshal's output, reused
}

func (jw *cfiJSONWriter) str(s string) {
	if jw.err == nil {
		_, jw.err = jw.w.WriteString(s)
	}
}

func (jw *cfiJSONWriter) buf(b []byte) {
	if jw.err == nil {
		_, jw.err = jw.w.Write(b)
	}
}

// marshal encodes v as encoding/json does inside a document indented by
// one space per level, v's own line starting with prefix, with names as
// they are (<stdin>, C++ templates: no HTML escaping).
func (jw *cfiJSONWriter) marshal(v any, prefix string) []byte {
	jw.scratch.Reset()
	enc := json.NewEncoder(&jw.scratch)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, " ")
	if err := enc.Encode(v); err != nil && jw.err == nil {
		jw.err = err
	}
	return bytes.TrimSuffix(jw.scratch.Bytes(), []byte("\n"))
}

func (jw *cfiJSONWriter) value(v any, prefix string) { jw.buf(jw.marshal(v, prefix)) }

// cfiJSONArray writes an array's brackets and separators around elements
// written in between, each on its own line starting with prefix: "[]"
// when there are none, as encoding/json writes an empty slice.
type cfiJSONArray struct {
	jw     *cfiJSONWriter
	prefix string
	n      int
}

func (jw *cfiJSONWriter) array(prefix string) cfiJSONArray {
	return cfiJSONArray{jw: jw, prefix: prefix}
}

// next starts an element.
func (a *cfiJSONArray) next() {
	if a.n == 0 {
		a.jw.str("[\n" + a.prefix)
	} else {
		a.jw.str(",\n" + a.prefix)
	}
	a.n++
}

// end closes the array.
func (a *cfiJSONArray) end() {
	if a.n == 0 {
		a.jw.str("[]")
		return
	}
	a.jw.str("\n" + a.prefix[:len(a.prefix)-1] + "]")
}

package cfi

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/sframekit/sframekit/arch"
)

// Helpers that assemble synthetic CFI sections for unit tests.

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(o binary.ByteOrder, v uint16) []byte { b := make([]byte, 2); o.PutUint16(b, v); return b }
func u32(o binary.ByteOrder, v uint32) []byte { b := make([]byte, 4); o.PutUint32(b, v); return b }
func u64(o binary.ByteOrder, v uint64) []byte { b := make([]byte, 8); o.PutUint64(b, v); return b }

// section builds .eh_frame or .debug_frame bytes entry by entry.
type section struct {
	kind  SectionKind
	order binary.ByteOrder
	b     []byte
	is64  bool // emit 64-bit DWARF entries
}

func newSection(kind SectionKind) *section {
	return &section{kind: kind, order: binary.LittleEndian}
}

// entry appends an entry with the given id field and body; it returns
// the entry's offset and the offset of its id field.
func (s *section) entry(id func(idPos int) uint64, body []byte) uint64 {
	off := len(s.b)
	w := 4
	if s.is64 {
		w = 8
		s.b = append(s.b, 0xff, 0xff, 0xff, 0xff)
		s.b = append(s.b, u64(s.order, uint64(w+len(body)))...)
	} else {
		s.b = append(s.b, u32(s.order, uint32(w+len(body)))...)
	}
	idPos := len(s.b)
	v := id(idPos)
	if w == 8 {
		s.b = append(s.b, u64(s.order, v)...)
	} else {
		s.b = append(s.b, u32(s.order, uint32(v))...)
	}
	s.b = append(s.b, body...)
	return uint64(off)
}

// cie appends a CIE; augData is emitted after a length when aug starts
// with 'z'.
func (s *section) cie(version byte, aug string, augData []byte, ca uint64, da int64, ra uint64, instr []byte) uint64 {
	body := []byte{version}
	body = append(body, aug...)
	body = append(body, 0)
	if version >= 4 {
		body = append(body, 8, 0)
	}
	body = append(body, uleb(ca)...)
	body = append(body, sleb(da)...)
	if version == 1 {
		body = append(body, byte(ra))
	} else {
		body = append(body, uleb(ra)...)
	}
	if strings.HasPrefix(aug, "z") {
		body = append(body, uleb(uint64(len(augData)))...)
		body = append(body, augData...)
	}
	body = append(body, instr...)
	return s.entry(func(int) uint64 {
		if s.kind == EHFrame {
			return 0
		}
		if s.is64 {
			return ^uint64(0)
		}
		return 0xffffffff
	}, body)
}

// fde appends an FDE whose fields after the CIE pointer are body.
func (s *section) fde(cieOff uint64, body []byte) uint64 {
	return s.entry(func(idPos int) uint64 {
		if s.kind == EHFrame {
			return uint64(idPos) - cieOff
		}
		return cieOff
	}, body)
}

// absFDE appends an FDE with 8-byte absolute begin and range (the
// encoding of a CIE without 'R', and of .debug_frame), 'z' data if aug.
func (s *section) absFDE(cieOff, begin, size uint64, aug bool, instr []byte) uint64 {
	body := cat(u64(s.order, begin), u64(s.order, size))
	if aug {
		body = append(body, 0)
	}
	return s.fde(cieOff, append(body, instr...))
}

func (s *section) table(addr uint64) *Table {
	t, err := New(s.b, Options{Kind: s.kind, Addr: addr, ByteOrder: s.order, AddrSize: 8, Arch: arch.AMD64})
	if err != nil {
		panic(err)
	}
	return t
}

// lookup is Table.RowForPC with a context of its own, returning a Row
// that shares nothing with later lookups.
func lookup(t *Table, pc uint64) (Row, error) {
	var ctx UnwindContext
	var r Row
	_, err := t.RowForPC(&ctx, pc, &r)
	return r, err
}

// fmtRow renders a row compactly for assertions.
func fmtRow(r *Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%x,%x) ", r.Start, r.End)
	switch r.CFA.Kind {
	case CFARegOffset:
		fmt.Fprintf(&b, "cfa=r%d%+d", r.CFA.Reg, r.CFA.Offset)
	case CFAExpression:
		fmt.Fprintf(&b, "cfa=expr(%x)", r.CFA.Expr)
	default:
		b.WriteString("cfa=?")
	}
	for i := 0; i < r.NumRules(); i++ {
		rr := r.RuleAt(i)
		fmt.Fprintf(&b, " r%d=", rr.Column)
		switch rr.Kind {
		case RuleOffset:
			fmt.Fprintf(&b, "c%+d", rr.Offset)
		case RuleValOffset:
			fmt.Fprintf(&b, "v%+d", rr.Offset)
		case RuleRegister:
			fmt.Fprintf(&b, "r%d", rr.Reg)
		case RuleExpression:
			fmt.Fprintf(&b, "exp(%x)", rr.Expr)
		case RuleValExpression:
			fmt.Fprintf(&b, "vexp(%x)", rr.Expr)
		default:
			b.WriteString(rr.Kind.String())
		}
	}
	if r.RASigned {
		b.WriteString(" signed")
	}
	if r.ArgsSize != 0 {
		fmt.Fprintf(&b, " args=%d", r.ArgsSize)
	}
	return b.String()
}

// rowsOf streams all rows of the first FDE of t.
func rowsOf(t *Table) ([]string, error) {
	it := t.Entries()
	for it.Next() {
		e := it.Entry()
		if e.Err != nil {
			return nil, e.Err
		}
		if e.Kind != KindFDE {
			continue
		}
		var out []string
		ut := t.NewUnwindTable(e.FDE)
		for ut.Next() {
			out = append(out, fmtRow(ut.Row()))
		}
		return out, ut.Err()
	}
	return nil, fmt.Errorf("no FDE")
}

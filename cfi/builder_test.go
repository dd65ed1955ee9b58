package cfi

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/cfibuild"
)

// Helpers that assemble synthetic CFI sections for unit tests.

func uleb(v uint64) []byte { return cfibuild.ULEB(v) }
func sleb(v int64) []byte  { return cfibuild.SLEB(v) }

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
type section struct{ cfibuild.Section }

func newSection(kind SectionKind) *section {
	return &section{cfibuild.Section{Debug: kind == DebugFrame, Order: binary.LittleEndian}}
}

func (s *section) kind() SectionKind {
	if s.Debug {
		return DebugFrame
	}
	return EHFrame
}

func (s *section) table(addr uint64) *Table {
	t, err := New(s.B, Options{Kind: s.kind(), Addr: addr, ByteOrder: s.Order, AddrSize: 8, Arch: arch.AMD64})
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

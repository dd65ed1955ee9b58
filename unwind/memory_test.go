package unwind

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// TestStackMemoryReadAt checks which reads a StackMemory answers from its
// copy, which it refuses as stack outside the copy, and which it passes to
// its fallback.
func TestStackMemoryReadAt(t *testing.T) {
	const sp, end = 0x7ff000001000, 0x7ff000004000
	stack := make([]byte, 64)
	for i := range stack {
		stack[i] = byte(i)
	}
	// The fallback holds other bytes at every address: a read it
	// answers is told apart from one the copy answers.
	other := bytes.Repeat([]byte{0xee}, 0x10000)
	fallback := &FlatMemory{Addr: sp - 0x8000, Data: other}
	cases := []struct {
		addr     uint64
		n        int
		end      uint64
		fallback bool
		want     []byte // nil: the read fails
		outside  bool   // ... with ErrOutsideStackCopy (else ErrUnmapped)
	}{
		{addr: sp, n: 8, want: stack[:8]},
		{addr: sp + 56, n: 8, want: stack[56:]},
		{addr: sp + 60, n: 0, want: []byte{}},
		{addr: sp + 64, n: 0, want: []byte{}},
		{addr: sp + 60, n: 8, outside: true},                           // straddles the copy's end
		{addr: sp + 60, n: 8, fallback: true, outside: true},           // ... even with a fallback
		{addr: sp - 4, n: 8, fallback: true, outside: true},            // straddles SP
		{addr: sp + 64, n: 8, fallback: true, want: other[:8]},         // End 0: past the copy is not the stack
		{addr: sp + 64, n: 8, end: end, fallback: true, outside: true}, // stack not copied
		{addr: end - 8, n: 8, end: end, fallback: true, outside: true},
		{addr: end, n: 8, end: end, fallback: true, want: other[:8]}, // past the stack
		{addr: sp - 8, n: 8, end: end, fallback: true, want: other[:8]},
		{addr: end, n: 8, end: end},                        // no fallback
		{addr: ^uint64(3), n: 8, end: end, fallback: true}, // wraps around: the fallback refuses it
	}
	for _, c := range cases {
		m := &StackMemory{SP: sp, Stack: stack, End: c.end}
		if c.fallback {
			m.Fallback = fallback
		}
		p := make([]byte, c.n)
		n, err := m.ReadAt(p, int64(c.addr))
		switch {
		case c.want != nil:
			if err != nil || n != c.n || !bytes.Equal(p, c.want) {
				t.Errorf("%+v: read %d bytes % x, %v; want % x", c, n, p[:n], err, c.want)
			}
		case c.outside:
			if !errors.Is(err, ErrOutsideStackCopy) || n != 0 {
				t.Errorf("%+v: %d bytes, %v; want ErrOutsideStackCopy", c, n, err)
			}
		default:
			if !errors.Is(err, arch.ErrUnmapped) || errors.Is(err, ErrOutsideStackCopy) {
				t.Errorf("%+v: %d bytes, %v; want ErrUnmapped", c, n, err)
			}
		}
	}
}

// recorder is a Memory that records the end of the highest read of
// [lo, hi) it passes to m. It is not a *FlatMemory: every read goes
// through it.
type recorder struct {
	m      arch.Memory
	lo, hi uint64
	top    uint64
}

func (r *recorder) ReadAt(p []byte, addr int64) (int, error) {
	if a := uint64(addr); a >= r.lo && a < r.hi {
		r.top = max(r.top, a+uint64(len(p)))
	}
	return r.m.ReadAt(p, addr)
}

// checkStackCopies walks regs again over StackMemory copies of the stack
// image (the bytes at lo) from SP up, truncated at every word up to the
// highest the walk full (which stopped with stop) read: each walk must
// give full's frames up to where its copy ends, and then stop with
// StopMemory and ErrOutsideStackCopy, without asking the fallback for the
// stack beyond the copy, though it holds the whole image. A copy up to the
// highest word read must give full.
func checkStackCopies(t *testing.T, u *Unwinder, regs *arch.Regs, lo uint64, image []byte, code arch.Memory, full []Frame, stop Stop) {
	t.Helper()
	sp := regs.SP()
	end := lo + uint64(len(image))
	if sp < lo || sp > end {
		t.Fatalf("SP %#x outside the image", sp)
	}
	stack := image[sp-lo:]
	fallback := &FlatMemory{Addr: lo, Data: image, Next: code}
	// What the walk reads of the stack.
	rec := &recorder{m: fallback, lo: sp, hi: end}
	if got, gstop, _ := u.Unwind(nil, regs, rec, nil); gstop != stop || len(got) != len(full) {
		t.Fatalf("walk through a recorder: %d frames, %v; want %d, %v", len(got), gstop, len(full), stop)
	}
	top := max(rec.top, sp)
	ctx := new(Context)
	prev := 0
	for e := sp; ; e = min(e+8, top) {
		m := &StackMemory{SP: sp, Stack: stack[:e-sp], End: end, Fallback: fallback}
		got, gstop, err := unwindBothWays(t, u, regs, m)
		if again, _, _ := u.Unwind(ctx, regs, m, nil); len(again) != len(got) {
			t.Fatalf("copy of %d bytes: a reused Context found %d frames, a new one %d", e-sp, len(again), len(got))
		}
		if len(got) > len(full) || len(got) < prev {
			t.Fatalf("copy of %d bytes: %d frames (a shorter copy gave %d, the whole stack %d)", e-sp, len(got), prev, len(full))
		}
		prev = len(got)
		for i := range got {
			g, w := &got[i], &full[i]
			if i < len(got)-1 && *g != *w || g.PC != w.PC || g.SP != w.SP {
				t.Fatalf("copy of %d bytes: frame %d is %+v, the whole stack's %+v", e-sp, i, *g, *w)
			}
		}
		if e == top {
			if gstop != stop || len(got) != len(full) || got[len(got)-1] != full[len(full)-1] {
				t.Fatalf("copy of the %d bytes read: %d frames, %v %v; the whole stack: %d frames, %v", e-sp, len(got), gstop, err, len(full), stop)
			}
			break
		}
		if gstop != StopMemory || !errors.Is(err, ErrOutsideStackCopy) {
			t.Fatalf("copy of %d bytes (of %d read): stopped after %d frames with %v %v, want StopMemory and ErrOutsideStackCopy", e-sp, top-sp, len(got), gstop, err)
		}
	}
	// Without End, the stack past the copy is read from the fallback:
	// here the whole image, so the walk is the whole one.
	m := &StackMemory{SP: sp, Stack: stack[:(top-sp)/2&^7], Fallback: fallback}
	if got, gstop, _ := u.Unwind(nil, regs, m, nil); gstop != stop || len(got) != len(full) {
		t.Errorf("half copy with a fallback: %d frames, %v; want %d, %v", len(got), gstop, len(full), stop)
	}
}

// TestOutsideCopyCheap reads past a StackMemory's copy, as a sampled walk
// that needs more stack than was copied does at its end: the error must
// wrap ErrOutsideStackCopy and say where, and cost one small allocation,
// not a formatted message (formatting it took as long as a third of the
// walk's frames).
func TestOutsideCopyCheap(t *testing.T) {
	m := &StackMemory{SP: 0x7000, Stack: make([]byte, 64), End: 0x9000}
	var buf [8]byte
	_, err := m.ReadAt(buf[:], 0x7040)
	if !errors.Is(err, ErrOutsideStackCopy) || !strings.Contains(err.Error(), "0x7040") {
		t.Fatalf("read past the copy: %v, want ErrOutsideStackCopy at 0x7040", err)
	}
	if n := testing.AllocsPerRun(100, func() { m.ReadAt(buf[:], 0x7040) }); n > 1 {
		t.Errorf("a read past the copy made %v allocations, want at most 1", n)
	}
}

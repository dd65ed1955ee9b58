package perfunwind

import (
	"bytes"
	"encoding/binary"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
)

// pyTrampoline is CPython's perf trampoline (3.12 and later, -X perf and
// -X perf_jit): Python/asm_trampoline.S, copied once for each Python
// function into anonymous executable memory and named "py::QUALNAME:FILE"
// in the perf map or jitdump file. It calls the function's evaluator
// without CFI or a frame pointer, so that walks by frame pointers or by
// a jitdump file not yet written end there; its rows are known.
type pyTrampoline struct {
	code []byte
	ret  uint64 // offset of the return address of its call
	// insns are the offsets where a walk may look up a row: each
	// instruction's start (a sampled PC) and ret-1 (a caller's).
	insns []uint64
	cfi   *cfi.Table // its rows, at addresses from 0
}

// pyTrampolines are the x86-64 trampoline as built without and with
// -fcf-protection (an endbr64 first). AArch64's keeps x29 and x30 as a
// frame record: frame pointers walk through it.
var pyTrampolines = []*pyTrampoline{
	newPyTrampoline(nil),
	newPyTrampoline([]byte{0xf3, 0x0f, 0x1e, 0xfa}), // endbr64
}

// newPyTrampoline returns the trampoline after the prefix:
// sub $8,%rsp; call *%rcx; add $8,%rsp; ret; with the rows that
// Python 3.13's -X perf_jit gives it in its jitdump file: CFA = RSP+8,
// RSP+16 from the call to the add, RA at CFA-8.
func newPyTrampoline(prefix []byte) *pyTrampoline {
	p := uint64(len(prefix))
	t := &pyTrampoline{
		code:  append(prefix[:len(prefix):len(prefix)], 0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3),
		ret:   p + 6,
		insns: []uint64{p + 5, p + 4, p + 6, p + 10},
	}
	if p > 0 {
		t.insns = append(t.insns, 0)
	}
	t.insns = append(t.insns, p)
	// .eh_frame: a CIE (code alignment 1, data alignment -8, RA column
	// 16, FDE addresses as udata4; CFA = RSP+8, RA at CFA-8) and one FDE
	// for [0, len(code)).
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x03, 0x0c, 7, 8, 0x90, 1, 0, 0}
	fde := []byte{0, 0, 0, 0, 0, 0, 0, 0, byte(len(t.code)), 0, 0, 0, 0,
		0x40 | byte(p+4), 0x0e, 16, // advance to the call: CFA = RSP+16
		0x46, 0x0e, 8, // advance to the ret: CFA = RSP+8
		0}
	eh := binary.LittleEndian.AppendUint32(nil, uint32(len(cie)))
	eh = append(eh, cie...)
	eh = binary.LittleEndian.AppendUint32(eh, uint32(len(fde)))
	binary.LittleEndian.PutUint32(fde, uint32(len(eh))) // CIE pointer: back to offset 0
	eh = append(eh, fde...)
	eh = append(eh, 0, 0, 0, 0)
	tab, err := cfi.New(eh, cfi.Options{ByteOrder: binary.LittleEndian, AddrSize: 8, Arch: arch.AMD64})
	if err != nil {
		panic("perfunwind: the trampoline's CFI: " + err.Error())
	}
	t.cfi = tab
	return t
}

// pyTrampHit is what a JIT address was found to be: at offset off of
// trampoline t (nil: none).
type pyTrampHit struct {
	t   *pyTrampoline
	off uint64
}

// maxPyTrampPCs bounds the addresses whose code a process's walks
// remember having checked (jitSyms.pyTramps): emptied when full.
const maxPyTrampPCs = 4096

// pyTrampRow gives row the rule of CPython's trampoline at pc, a runtime
// address of JIT code for which the JIT's files give no unwinding data.
// In a live process its code is read and must be the trampoline's, byte
// for byte: then the rule is what those instructions do. In a recording
// (no code bytes), the perf map or jitdump file must name the function
// at pc "py::..." with the trampoline's size, and pc must be at its
// return address or the byte before (where a caller's frame is looked
// up): CPython names only its trampolines so and gives them that size
// (perf_trampoline.c), and the return address follows the only call in
// their bytes. Elsewhere in such a function (a sampled PC only) the
// rule is not used, nor cached for. j.mu is held.
func (j *jitSyms) pyTrampRow(ctx *cfi.UnwindContext, pc uint64, row *cfi.Row) (*cfi.CIE, bool) {
	if j.arch != arch.AMD64 {
		return nil, false
	}
	var h pyTrampHit
	lo, hi := uint64(0), ^uint64(0)
	if j.mem != nil {
		var ok bool
		if h, ok = j.pyTramps[pc]; !ok {
			h = j.findPyTramp(pc)
			if j.pyTramps == nil || len(j.pyTramps) >= maxPyTrampPCs {
				j.pyTramps = map[uint64]pyTrampHit{}
			}
			j.pyTramps[pc] = h
		}
	} else {
		j.load()
		for _, t := range j.tables {
			sym, ok := t.Lookup(pc)
			if !ok {
				continue
			}
			// Entries of untrusted files: pc in the function, whose end
			// does not wrap.
			if strings.HasPrefix(sym.Name, "py::") && pc >= sym.Start && pc-sym.Start < sym.Size && sym.Start+sym.Size > sym.Start {
				for _, tr := range pyTrampolines {
					if sym.Size == uint64(len(tr.code)) && (pc-sym.Start == tr.ret || pc-sym.Start == tr.ret-1) {
						h = pyTrampHit{tr, pc - sym.Start}
						lo, hi = sym.Start+tr.ret-1, sym.Start+tr.ret+1
					}
				}
			}
			break
		}
	}
	if h.t == nil {
		return nil, false
	}
	start := pc - h.off
	f, err := h.t.cfi.RowForPC(ctx, h.off, row)
	if err != nil {
		return nil, false
	}
	row.Start, row.End = max(row.Start+start, lo), min(row.End+start, hi)
	return f.CIE, true
}

// findPyTramp reads the code around pc in the live process and reports
// the trampoline that holds pc at one of its instructions (or a call's
// return address less one), if any. The code is untrusted: only an exact
// match counts, and a read that fails is no match.
func (j *jitSyms) findPyTramp(pc uint64) pyTrampHit {
	// One read, within pc's page (each candidate holds pc: none can be
	// read if it cannot); the candidates across its ends are read alone.
	const page = 4096
	lo, hi := max(pc-pc%page, pc-16), min(pc-pc%page+page, pc+16)
	if lo > pc || hi < pc {
		return pyTrampHit{}
	}
	win := j.readMem(lo, hi-lo)
	if win == nil {
		return pyTrampHit{}
	}
	for _, t := range pyTrampolines {
		n := uint64(len(t.code))
		for _, off := range t.insns {
			s := pc - off
			if s > pc || s+n < s {
				continue
			}
			var code []byte
			if s >= lo && s+n <= hi {
				code = win[s-lo : s-lo+n]
			} else {
				code = j.readMem(s, n)
			}
			if bytes.Equal(code, t.code) {
				return pyTrampHit{t, off}
			}
		}
	}
	return pyTrampHit{}
}

// readMem reads n bytes at addr of the live process (nil when it cannot).
func (j *jitSyms) readMem(addr, n uint64) []byte {
	if addr > 1<<63-1-n {
		return nil
	}
	b := make([]byte, n)
	if k, _ := j.mem(b, int64(addr)); k != len(b) {
		return nil
	}
	return b
}

// newCode notes that the process mapped new JIT code: what its walks
// found at addresses may have changed.
func (j *jitSyms) newCode() {
	j.mu.Lock()
	j.pyTramps = nil
	j.mu.Unlock()
}

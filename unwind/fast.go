package unwind

import "github.com/sframekit/sframekit/arch"

// walkState is the part of a walk the fast path reads and advances.
type walkState struct {
	pc, sp, fp uint64
	fpOK       bool
	// top: every register is the thread's own (frame 0, or the frame a
	// signal interrupted, restored from the signal context), and pc is
	// the address of an instruction, not a return address.
	top        bool
	noProgress bool // the last frame's caller SP did not move up
	end        bool // the last frame is the outermost (fastEnd)
	depth      int
}

// modInfo is what the fast path needs of a module, in one place.
type modInfo struct {
	lo, size uint64 // the module's runtime range is [lo, lo+size)
	// The flat table of x: a return address pc is looked up as pc - rel0
	// (rel0 = bias + flatBase + 1: the call at pc-1), which misses at or
	// past relEnd.
	rel0, relEnd uint64
	keys         []uint32
	rules        []fastRule
	buckets      []uint32
	shift        uint8
	x            *sfIndex // decoded SFrame, nil if none
	m            *Module
	gen          bool // x was compiled from CFI (Module.SFrameGen)
	cfiFast      bool // frames may take cached CFI rows (cfiRules)
}

// newModInfo gathers what the fast path needs of m, of architecture a,
// whose decoded SFrame is x (nil if none).
func newModInfo(m *Module, a arch.Arch, x *sfIndex) *modInfo {
	in := &modInfo{lo: m.Start, size: m.End - m.Start, m: m, x: x, gen: m.SFrameGen != nil, cfiFast: cfiFast(m, a)}
	if x != nil {
		in.rel0, in.relEnd = m.Bias+x.flatBase+1, x.flatEnd
		in.keys, in.rules = x.flatKeys, x.flatRules
		in.buckets, in.shift = x.flatBuckets, x.flatShift
	}
	return in
}

// rule returns the fast rule for the return address pc (the rules of the
// call, at pc-1) from the flat table, or nil if pc-1 is outside it. The
// rule's flags are 0 when the general path must decide.
func (in *modInfo) rule(pc uint64) *fastRule {
	rel := pc - in.rel0
	if rel >= in.relEnd {
		return nil
	}
	// The row: the last one starting at or before rel, at most a few
	// keys past the first of rel's bucket. keys ends with a sentinel
	// above every rel, which ends the scan.
	keys, key := in.keys, uint32(rel)
	i := int(in.buckets[key>>in.shift])
	for keys[i+1] <= key {
		i++
	}
	return &in.rules[i]
}

// noModule is an empty range: the fast path's "no module yet".
var noModule modInfo

// emptyFlat stands for memory the fast path cannot read directly: every
// read misses it and goes through the wordReader.
var emptyFlat FlatMemory

// slowWord reads the word at addr through the wordReader: the fast
// path's reads outside its stack copy.
func (w *Context) slowWord(addr uint64) (uint64, bool) {
	v, err := w.mem.word(addr)
	return v, err == nil
}

// fastWalk takes steps while the frames are callers (Unwind calls it only
// when st.top is false: not the top frame nor one a signal interrupted)
// that follow SFrame rows of the common shape
// (CFA = SP or FP + offset, RA and FP saved at CFA + offsets): the bulk of
// a stack. It returns at the first frame that needs the general machinery,
// at the depth limit, when the frame buffer is full, at PC 0, or when the
// stack does not move up (st.noProgress).
//
// Everything a step needs is written out here, with no call on the common
// path and few live values, so that the loop keeps them in registers: with
// the top-frame cases, the buffer growth and the module and index state in
// locals, the compiler spilled and reloaded most of them at every frame.
func (w *Context) fastWalk(frames []Frame, st *walkState, max int) []Frame {
	pc, sp, fp, fpOK := st.pc, st.sp, st.fp, st.fpOK
	n0 := len(frames)
	// The frames up to the depth limit or the buffer's capacity, written
	// in place: a composite literal appended would be built on the stack
	// and copied, which cost more than the rest of the step.
	buf := frames[:min(cap(frames), n0+max-st.depth)]
	n := n0
	in := &noModule
	mem := &w.mem.flat
	if w.be {
		mem = &emptyFlat // the fast path reads little-endian words
	}
	for n < len(buf) && pc != 0 {
		if pc-in.lo >= in.size {
			if in = w.moduleInfo(pc); in == nil {
				break
			}
			if in.gen {
				if w.noGen {
					break
				}
				w.usedGen = true
			}
		}
		method := MethodSFrame
		r := in.rule(pc)
		if r == nil || r.flags&fastOK == 0 {
			// A function without SFrame (yet): the CFI row applied
			// there before, if any (cfiRules).
			cr, ok := w.cachedCFIRule(in, pc)
			if !ok {
				break
			}
			r, method = &cr, MethodCFI
			w.usedGen = true
		}
		fl := r.flags
		cfa := sp
		if fl&fastCFAFP != 0 {
			if !fpOK {
				break
			}
			cfa = fp
		}
		cfa += uint64(int64(r.cfaOff))
		if fl&fastEnd != 0 {
			// The outermost frame: the general step's frame, and the end.
			fr := &buf[n]
			n++
			fr.PC, fr.SP, fr.CFA, fr.Module = pc, sp, cfa, in.m
			fr.Method, fr.Signal, fr.Exact = method, false, false
			st.end = true
			break
		}
		// mem.word is inlined; the slow read is a call, off the
		// common path.
		a := cfa + uint64(int64(r.raOff))
		ra, ok := mem.word(a)
		if !ok {
			if ra, ok = w.slowWord(a); !ok {
				break
			}
		}
		if fl&fastFP != 0 {
			a := cfa + uint64(int64(r.fpOff))
			v, ok := mem.word(a)
			if !ok {
				if v, ok = w.slowWord(a); !ok {
					break
				}
			}
			fp, fpOK = v, true
		}
		if fl&fastRASigned != 0 {
			ra &= w.pacMask
		}
		fr := &buf[n]
		n++
		fr.PC, fr.SP, fr.CFA, fr.Module = pc, sp, cfa, in.m
		fr.Method, fr.Signal, fr.Exact = method, false, false
		nsp := cfa + w.spOff
		if nsp <= sp {
			st.noProgress = true
			break
		}
		pc, sp = ra, nsp
	}
	frames = buf[:n]
	st.pc, st.sp, st.fp, st.fpOK = pc, sp, fp, fpOK
	st.depth += n - n0
	return frames
}

// topStep takes the step of the top frame (st.top) with the cached CFI
// rule r of its address, as fastWalk takes a caller's, and returns its
// frame; ok is false, and st unchanged, when a read fails or the stack
// would move down: the general path then decides. Like every step with
// a cached rule it keeps only PC, SP and FP, and marks the walk as one
// to redo without them if a rule further up needs another register.
func (w *Context) topStep(in *modInfo, r *fastRule, st *walkState) (Frame, bool) {
	if r.flags&fastEnd != 0 {
		return Frame{}, false // a sample in _start itself: rare
	}
	mem := &w.mem.flat
	if w.be {
		mem = &emptyFlat
	}
	cfa := st.sp
	if r.flags&fastCFAFP != 0 {
		if !st.fpOK {
			return Frame{}, false
		}
		cfa = st.fp
	}
	cfa += uint64(int64(r.cfaOff))
	a := cfa + uint64(int64(r.raOff))
	ra, ok := mem.word(a)
	if !ok {
		if ra, ok = w.slowWord(a); !ok {
			return Frame{}, false
		}
	}
	fp, fpOK := st.fp, st.fpOK
	if r.flags&fastFP != 0 {
		a := cfa + uint64(int64(r.fpOff))
		v, ok := mem.word(a)
		if !ok {
			if v, ok = w.slowWord(a); !ok {
				return Frame{}, false
			}
		}
		fp, fpOK = v, true
	}
	if r.flags&fastRASigned != 0 {
		ra &= w.pacMask
	}
	nsp := cfa + w.spOff
	if nsp < st.sp {
		return Frame{}, false
	}
	w.usedGen = true
	f := Frame{PC: st.pc, SP: st.sp, CFA: cfa, Module: in.m, Method: MethodCFI, Exact: true}
	st.pc, st.sp, st.fp, st.fpOK, st.top = ra, nsp, fp, fpOK, false
	return f, true
}

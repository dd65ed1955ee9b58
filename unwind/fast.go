package unwind

// walkState is the part of a walk the fast path reads and advances.
type walkState struct {
	pc, sp, fp uint64
	fpOK       bool
	top        bool // every register is the thread's own
	exact      bool // pc is not a return address
	noProgress bool // the last frame's caller SP did not move up
	depth      int
}

// fastWalk takes steps while the frames follow SFrame rows of the common
// shape (CFA = SP or FP + offset, RA and FP saved at CFA + offsets), the
// bulk of a stack, and returns at the first frame that needs the general
// machinery, at the depth limit, at PC 0, or when the stack does not move
// up (st.noProgress). It is separate from Unwind so that its few live
// values stay in registers; it keeps the current module's range in locals
// so that consecutive frames in one module skip the module search.
func (u *Unwinder) fastWalk(frames []Frame, st *walkState, max int) []Frame {
	pc, sp, fp, fpOK := st.pc, st.sp, st.fp, st.fpOK
	top, exact, depth := st.top, st.exact, st.depth
	var (
		m        *Module
		x        *sfIndex
		lo, size uint64 // m's range is [lo, lo+size); size 0: no module yet
		bias     uint64
	)
	mem, spOff := &u.mem, u.spOff
	for depth < max && (pc != 0 || top) {
		if pc-lo >= size {
			mi := u.moduleIndex(pc)
			if mi < 0 || u.sfx[mi] == nil {
				break
			}
			m, x = u.modules[mi], u.sfx[mi]
			lo, size, bias = m.Start, m.End-m.Start, m.Bias
		}
		lookup := pc - bias
		if !exact {
			lookup--
		}
		f, r := x.findRow(lookup)
		if r == nil || !r.fast || f.signal || (r.cfaFP && !fpOK) {
			break
		}
		base := sp
		if r.cfaFP {
			base = fp
		}
		cfa := base + uint64(int64(r.cfaOff))
		ra, ok := mem.fastWord(cfa + uint64(int64(r.raOff)))
		if !ok {
			break
		}
		nfp, nfpOK := fp, fpOK
		if r.hasFP {
			if nfp, ok = mem.fastWord(cfa + uint64(int64(r.fpOff))); !ok {
				break
			}
			nfpOK = true
		}
		if r.raSigned {
			ra &= u.PACMask
		}
		// Append in place: a composite literal would be built on the
		// stack and copied, which costs more than the rest of the step.
		n := len(frames)
		if n < cap(frames) {
			frames = frames[:n+1]
		} else {
			frames = append(frames, Frame{})
		}
		fr := &frames[n]
		fr.PC, fr.SP, fr.CFA, fr.Module = pc, sp, cfa, m
		fr.Method, fr.Signal, fr.Exact = MethodSFrame, false, exact
		depth++
		nsp := cfa + spOff
		if nsp < sp || (nsp == sp && !top) {
			st.noProgress = true
			break
		}
		pc, sp, fp, fpOK = ra, nsp, nfp, nfpOK
		top, exact = false, false
	}
	st.pc, st.sp, st.fp, st.fpOK = pc, sp, fp, fpOK
	st.top, st.exact, st.depth = top, exact, depth
	return frames
}

package bpfunwind

import (
	"encoding/binary"

	"github.com/sframekit/sframekit/perfdata"
)

// outHeader is the size of the stack record's header (struct out of
// bpf/walk.c): period (8), user frames (4), kernel frames (2), stop and
// event (2), time (8), process and thread (4 each), CPU (4), the user
// frame a signal interrupted (4).
const outHeader = 40

// Header is what a stack record says besides its frames.
type Header struct {
	// Period is the sampled event's period; Event its index
	// (Options.Events).
	Period uint64
	Event  int
	// Time is when the stack was written, CLOCK_MONOTONIC in nanoseconds
	// (the clock of the perf records of sframe record).
	Time          uint64
	Pid, Tid, CPU uint32
	// Stop says why the walk ended.
	Stop Stop
	// SigFrame is the index among the user frames of the one whose PC a
	// signal interrupted, an instruction of its function rather than a
	// return address, the frame before it being the signal trampoline;
	// 0 for none (the first frame's PC is the sampled one anyway).
	SigFrame int
}

// Decode reads a stack the program wrote (a record of the stacks ring,
// Unwinder.ReadStacks) into a perf callchain appended to chain[:0]: the
// kernel frames after perfdata.ContextKernel, the user frames, innermost
// first, after perfdata.ContextUser. ok is false for a record too short
// for what its header says (the rest is then left out).
func Decode(raw []byte, chain []uint64) (out []uint64, h Header, ok bool) {
	chain = chain[:0]
	if len(raw) < outHeader {
		return chain, h, false
	}
	le := binary.LittleEndian
	h.Period = le.Uint64(raw)
	nu, nk := int(le.Uint32(raw[8:])), int(le.Uint16(raw[12:]))
	h.Stop, h.Event = Stop(raw[14]), int(raw[15])
	h.Time = le.Uint64(raw[16:])
	h.Pid, h.Tid, h.CPU = le.Uint32(raw[24:]), le.Uint32(raw[28:]), le.Uint32(raw[32:])
	if sf := le.Uint32(raw[36:]); int64(sf) < int64(nu) {
		h.SigFrame = int(sf)
	}
	pcs := raw[outHeader:]
	ok = nu+nk <= len(pcs)/8
	if !ok {
		nk = min(nk, len(pcs)/8)
		nu = min(nu, len(pcs)/8-nk)
	}
	if nk > 0 {
		chain = append(chain, perfdata.ContextKernel)
		for i := 0; i < nk; i++ {
			chain = append(chain, le.Uint64(pcs[8*i:]))
		}
	}
	if nu > 0 {
		chain = append(chain, perfdata.ContextUser)
		for i := nk; i < nk+nu; i++ {
			chain = append(chain, le.Uint64(pcs[8*i:]))
		}
	}
	return chain, h, ok
}

// StackKey appends to key what identifies the stack of a record of the
// stacks ring (Decode): its thread, event, frames and the frame a signal
// interrupted (named at its PC, not before it), not its time,
// period, CPU or why its walk stopped, nor the bytes after its frames (a
// record reserved for 64 frames holds older records' bytes there).
func StackKey(key, raw []byte) []byte {
	if len(raw) < outHeader {
		return append(key, raw...)
	}
	le := binary.LittleEndian
	n := outHeader + 8*(int(le.Uint32(raw[8:]))+int(le.Uint16(raw[12:])))
	key = append(key, raw[8:14]...)  // frame counts
	key = append(key, raw[15])       // event
	key = append(key, raw[24:32]...) // process, thread
	key = append(key, raw[36:40]...) // the frame a signal interrupted
	return append(key, raw[outHeader:min(n, len(raw))]...)
}

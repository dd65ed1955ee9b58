package bpfunwind

import (
	"encoding/binary"

	"github.com/sframekit/sframekit/perfdata"
)

// outHeader is the size of the stack record's header (struct out of
// bpf/walk.c): period (8), user frames (4), kernel frames (2), stop (2).
const outHeader = 16

// Decode reads a stack the program wrote (the raw data of a bpf-output
// sample) into a perf callchain appended to chain[:0]: the kernel
// frames after perfdata.ContextKernel, the user frames, innermost first,
// after perfdata.ContextUser. It returns the sampled event's period and
// index (Options.Events), and why the walk stopped; ok is false for a
// record too short for what its header says (the rest is then left
// out).
func Decode(raw []byte, chain []uint64) (out []uint64, period uint64, event int, stop Stop, ok bool) {
	chain = chain[:0]
	if len(raw) < outHeader {
		return chain, 0, 0, 0, false
	}
	le := binary.LittleEndian
	period = le.Uint64(raw)
	nu, nk := int(le.Uint32(raw[8:])), int(le.Uint16(raw[12:]))
	stop, event = Stop(raw[14]), int(raw[15])
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
	return chain, period, event, stop, ok
}

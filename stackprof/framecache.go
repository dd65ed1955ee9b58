package stackprof

import "github.com/sframekit/sframekit/perfunwind"

// frameCache remembers what a writer made of the frames it saw last (a
// frame's text, its pprof location), by mapping and address: samples
// repeat the same few hundred frames, and making them again costs a
// lookup in the Resolver's cache and, for pprof, in maps keyed by file
// names, at every frame. It is direct-mapped: a frame takes the slot its
// address hashes to, replacing the one there.
type frameCache[V any] struct {
	slots []frameSlot[V]
}

type frameSlot[V any] struct {
	m   *perfunwind.Mapping
	pc  uint64
	sig bool
	ok  bool
	v   V
}

// frameCacheBits sizes the cache: 2,048 slots, far more than the
// frames of a program's hot stacks, and few enough pages to touch.
const frameCacheBits = 11

// slot returns the slot of the frame at pc of mapping m (sig: a signal
// frame, which a location keeps apart), and whether it holds that frame.
// A slot that does not is the caller's to fill.
func (c *frameCache[V]) slot(m *perfunwind.Mapping, pc uint64, sig bool) (*frameSlot[V], bool) {
	if c.slots == nil {
		c.slots = make([]frameSlot[V], 1<<frameCacheBits)
	}
	s := &c.slots[pc*0x9e3779b97f4a7c15>>(64-frameCacheBits)]
	return s, s.ok && s.pc == pc && s.m == m && s.sig == sig
}

// appendCached appends the text of the frame at pc in m: the one c holds,
// or the one format appends, which c then holds.
func appendCached(c *frameCache[string], b []byte, m *perfunwind.Mapping, pc uint64, format func([]byte, *perfunwind.Mapping, uint64) []byte) []byte {
	s, ok := c.slot(m, pc, false)
	if ok {
		return append(b, s.v...)
	}
	at := len(b)
	b = format(b, m, pc)
	s.set(m, pc, false, string(b[at:]))
	return b
}

// set fills s with the frame and its value.
func (s *frameSlot[V]) set(m *perfunwind.Mapping, pc uint64, sig bool, v V) {
	*s = frameSlot[V]{m: m, pc: pc, sig: sig, ok: true, v: v}
}

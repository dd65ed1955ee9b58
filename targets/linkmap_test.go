package targets

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// flatMem is a Memory over data at addr, for link_map lists made up in
// tests.
type flatMem struct {
	addr uint64
	data []byte
}

func (m flatMem) ReadAt(p []byte, addr int64) (int, error) {
	a := uint64(addr)
	if a < m.addr || a-m.addr > uint64(len(m.data)) || uint64(len(m.data))-(a-m.addr) < uint64(len(p)) {
		return 0, fmt.Errorf("%#x: %w", a, arch.ErrUnmapped)
	}
	return copy(p, m.data[a-m.addr:]), nil
}

// linkMapImage lays out, big endian at 0x10000, a dynamic section with
// DT_DEBUG, r_debug and a link_map list of the entries (name, l_addr);
// next, if not nil, overrides each entry's l_next (an index, -1 for 0).
func linkMapImage(entries []loadedObject, next []int) ([]byte, uint64) {
	const base = 0x10000
	bo := binary.BigEndian
	b := make([]byte, 0x100)
	bo.PutUint64(b[0:], dtDEBUG)
	bo.PutUint64(b[8:], base+0x40) // r_debug
	bo.PutUint64(b[0x48:], base+0x100)
	for i, e := range entries {
		ent := make([]byte, 40)
		nameAt := base + 0x100 + uint64(len(entries))*40 + uint64(i)*64
		bo.PutUint64(ent[0:], e.bias)
		bo.PutUint64(ent[8:], nameAt)
		n := i + 1
		if next != nil {
			n = next[i]
		}
		if n >= 0 && n < len(entries) {
			bo.PutUint64(ent[24:], base+0x100+uint64(n)*40)
		}
		b = append(b, ent...)
	}
	for _, e := range entries {
		name := make([]byte, 64)
		copy(name, e.name)
		b = append(b, name...)
	}
	return b, base
}

// TestLinkMap reads made-up lists: the executable's and the vDSO's
// entries left out, a loop stopped, a missing DT_DEBUG reported.
func TestLinkMap(t *testing.T) {
	entries := []loadedObject{{name: "", bias: 0}, {name: "linux-vdso.so.1", bias: 0x7000}, {name: "/lib/libc.so.6", bias: 0x4000000}, {name: "/lib/ld64.so.1", bias: 0x5000000}}
	img, base := linkMapImage(entries, nil)
	got, err := linkMap(base, 0x40, orderedMem{flatMem{base, img}, binary.BigEndian})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(entries[2:]) {
		t.Errorf("got %v, %v; want %v", got, err, entries[2:])
	}
	img, base = linkMapImage(entries, []int{1, 2, 3, 2})
	if got, err := linkMap(base, 0x40, orderedMem{flatMem{base, img}, binary.BigEndian}); err == nil || len(got) != 2 {
		t.Errorf("loop: %v, %v", got, err)
	}
	clear(img[8:16]) // DT_DEBUG 0: ld.so had not started
	if _, err := linkMap(base, 0x40, orderedMem{flatMem{base, img}, binary.BigEndian}); err == nil {
		t.Error("no error for an unset DT_DEBUG")
	}
}

// FuzzLinkMap reads link_map lists from arbitrary memory: errors, never a
// panic, never more entries than the limit.
func FuzzLinkMap(f *testing.F) {
	img, _ := linkMapImage([]loadedObject{{name: ""}, {name: "/lib/libc.so.6", bias: 0x4000}}, nil)
	f.Add(img, uint64(0x40))
	f.Fuzz(func(t *testing.T, data []byte, dynSize uint64) {
		got, _ := linkMap(0x10000, dynSize, orderedMem{flatMem{0x10000, data}, binary.BigEndian})
		if len(got) > maxLinkMap {
			t.Fatalf("%d entries", len(got))
		}
	})
}

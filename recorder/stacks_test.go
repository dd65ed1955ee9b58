package recorder

import (
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfunwind"
)

// TestStacksKeptCompact merges 2,000 distinct stacks of 40 frames: each
// must come back with its frames (address, mapping, flags) as given, and
// the merged stacks must take less than 10 bytes a frame (keys with each
// address as its difference from the one before, and the stacks' and the
// map's share), where keys with whole addresses took 14.4, and a copy of
// the frames, with pointers that the garbage collector scans, took four
// times that: on a C++ compiler's stacks, nearly every sample is a new
// stack.
func TestStacksKeptCompact(t *testing.T) {
	sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	r := newRecorder(sess, arch.Host(), nil, -1, 1<<20)
	maps := []*perfunwind.Mapping{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	const nStacks, nFrames = 2000, 40
	stackOf := func(i int) *perfunwind.Stack {
		st := &perfunwind.Stack{Pid: 7, Tid: 8, Comm: "cc1plus", Kernel: 1}
		for j := range nFrames {
			f := perfunwind.Frame{PC: uint64(0x400000 + i*4096 + j*8), Kernel: j == 0, First: j <= 1, Exact: j <= 1, Signal: j == 5}
			if j == 0 {
				f.PC = 0xffffffff81000000 + uint64(i)*16 // a kernel address: the next one is far below
			}
			if j == 20 {
				f.PC = 0x7f0000000000 + uint64(i) // a library's, far above
			}
			if j > 0 && j%7 != 0 {
				f.Map = maps[j%len(maps)]
			}
			st.Frames = append(st.Frames, f)
		}
		return st
	}
	in := make([]*perfunwind.Stack, nStacks)
	for i := range in {
		in[i] = stackOf(i)
	}
	r.intern(in[0]) // the first allocations of the maps
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, st := range in[1:] {
		r.intern(st)
	}
	runtime.ReadMemStats(&m1)
	per := float64(m1.TotalAlloc-m0.TotalAlloc) / float64((nStacks-1)*nFrames)
	limit := min(10, float64(unsafe.Sizeof(perfunwind.Frame{})))
	t.Logf("%.1f bytes a frame", per)
	if per >= limit {
		t.Errorf("merging %d distinct stacks of %d frames took %.1f bytes a frame, want less than %.0f", nStacks-1, nFrames, per, limit)
	}
	if len(r.order) != nStacks {
		t.Fatalf("%d stacks merged, want %d", len(r.order), nStacks)
	}
	// Each again, as a copy: merged with the first.
	for i, st := range in {
		c := *st
		c.Frames = slices.Clone(st.Frames)
		if s := r.intern(&c); s != r.order[i] {
			t.Fatalf("stack %d interned again: a new stack, not the first", i)
		}
	}
	if len(r.order) != nStacks {
		t.Fatalf("%d stacks after merging each again, want %d", len(r.order), nStacks)
	}
	var fs []perfunwind.Frame
	for i, s := range r.order {
		fs = s.appendFrames(fs[:0], r.maps)
		want := in[i].Frames
		if len(fs) != len(want) || s.kernel != in[i].Kernel || s.comm != in[i].Comm {
			t.Fatalf("stack %d: %d frames back, want %d", i, len(fs), len(want))
		}
		for j := range fs {
			if fs[j] != want[j] {
				t.Fatalf("stack %d frame %d: %+v back, want %+v", i, j, fs[j], want[j])
			}
		}
	}
}

// BenchmarkIntern merges 10,000 distinct stacks of 36 frames in three
// mappings, in a new recorder each time: a C++ compiler's recording,
// where nearly every sample is a new stack (cc1plus: 9,400 of 10,000).
//
//	go test ./recorder -run '^$' -bench Intern
func BenchmarkIntern(b *testing.B) {
	sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	maps := []*perfunwind.Mapping{{Name: "cc1plus"}, {Name: "libc"}, {Name: "libstdc++"}}
	const nStacks, nFrames = 10000, 36
	in := make([]perfunwind.Stack, nStacks)
	for i := range in {
		st := &in[i]
		*st = perfunwind.Stack{Pid: 7, Tid: 7, Comm: "cc1plus"}
		for j := range nFrames {
			// Shared outer frames, distinct inner ones, as a compiler's.
			pc := uint64(0x65a090 + j*0x3517)
			if j < 6 {
				pc += uint64(i * 0x1d)
			}
			st.Frames = append(st.Frames, perfunwind.Frame{PC: pc, Map: maps[min(j/30, 2)], First: j == 0, Exact: j == 0})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		r := newRecorder(sess, arch.Host(), nil, -1, 1<<20)
		for i := range in {
			r.intern(&in[i])
		}
		if len(r.order) != nStacks {
			b.Fatalf("%d stacks, want %d", len(r.order), nStacks)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nStacks), "ns/stack")
}

//go:build linux && amd64

package unwind

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestSnapshotStackCopy walks the captured thread over StackMemory copies
// of its stack cut inside the return-address slot of chosen frames, with
// the whole stack as the fallback: each walk must give the frames of the
// whole stack up to the cut frame, which it keeps, and stop there with
// StopMemory and ErrOutsideStackCopy. The whole copy gives the whole walk.
func TestSnapshotStackCopy(t *testing.T) {
	s := takeSnapshot(t)
	sp, data := s.stack.Addr, s.stack.Data
	end := sp + uint64(len(data))
	for _, mods := range [][]*Module{s.mods, s.cfi} {
		u := s.unwinder(t, mods)
		full, stop, err := u.Unwind(nil, &s.regs, s.stack, nil)
		if stop != StopEnd {
			t.Fatalf("whole stack: %v %v", stop, err)
		}
		whole := &StackMemory{SP: sp, Stack: data, End: end}
		if got, gstop, err := u.Unwind(nil, &s.regs, whole, nil); gstop != stop || !slices.Equal(got, full) {
			t.Fatalf("whole copy: %d frames, %v %v; want %d, %v", len(got), gstop, err, len(full), stop)
		}
		ctx := new(Context)
		n := len(full)
		for _, k := range []int{0, 1, 2, 3, 10, n / 2, n - 4, n - 3, n - 2} {
			// x86-64: frame k's return address is the word below its
			// CFA, and every frame below it reads only below its CFA.
			cfa := full[k].CFA
			if cfa == 0 {
				t.Fatalf("frame %d: no CFA", k)
			}
			for _, cut := range []uint64{cfa - 8, cfa - 4} {
				m := &StackMemory{SP: sp, Stack: data[:cut-sp], End: end, Fallback: s.stack}
				got, gstop, err := u.Unwind(ctx, &s.regs, m, nil)
				if gstop != StopMemory || !errors.Is(err, ErrOutsideStackCopy) || len(got) != k+1 {
					t.Fatalf("cut at %#x in frame %d's RA slot: %d frames, %v %v; want %d, StopMemory and ErrOutsideStackCopy", cut, k, len(got), gstop, err, k+1)
				}
				if !slices.Equal(got[:k], full[:k]) || got[k].PC != full[k].PC || got[k].SP != full[k].SP {
					t.Fatalf("cut in frame %d's RA slot: the frames differ from the whole walk's", k)
				}
			}
		}
	}
}

// TestConcurrentWalks walks the captured thread from several goroutines
// at once over two shared Unwinders (one through SFrame, one through the
// same files' CFI, sharing their tables), each goroutine with its own
// Context, while another goroutine adds and removes a module: every walk
// must give the frames of a walk alone. Run it with -race.
func TestConcurrentWalks(t *testing.T) {
	s := takeSnapshot(t)
	us, uc := s.unwinder(t, s.mods), s.unwinder(t, s.cfi)
	unwinders := []*Unwinder{us, uc}
	want := make([][]Frame, len(unwinders))
	for i, u := range unwinders {
		fs, stop, err := u.Unwind(nil, &s.regs, s.stack, nil)
		if stop != StopEnd {
			t.Fatalf("%v %v", stop, err)
		}
		want[i] = fs
	}
	iters := 20
	if testing.Short() {
		iters = 4
	}
	errs := make(chan error, 8)
	done := make(chan struct{})
	var changer sync.WaitGroup
	changer.Go(func() {
		// A module where no frame is: walks must not notice it coming
		// and going.
		extra := &Module{Name: "extra", Start: 0x1000, End: 0x2000}
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, u := range unwinders {
				u.AddModule(extra)
				if m := moduleAt(u, 0x1800); m != extra {
					errs <- fmt.Errorf("Module after AddModule: %v", m)
					return
				}
			}
			for _, u := range unwinders {
				if !u.RemoveModule(extra) || moduleAt(u, 0x1800) != nil {
					errs <- errors.New("RemoveModule did not remove the module")
					return
				}
			}
		}
	})
	var walkers sync.WaitGroup
	for range 4 {
		walkers.Go(func() {
			ctx := new(Context)
			frames := make([]Frame, 0, 2*snapDepth)
			for range iters {
				for i, u := range unwinders {
					fs, stop, err := u.Unwind(ctx, &s.regs, s.stack, frames[:0])
					if stop != StopEnd || !slices.Equal(fs, want[i]) {
						errs <- fmt.Errorf("unwinder %d: %d frames, %v %v; alone: %d frames", i, len(fs), stop, err, len(want[i]))
						return
					}
				}
			}
		})
	}
	walkers.Wait()
	close(done)
	changer.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

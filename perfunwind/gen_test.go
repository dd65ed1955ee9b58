//go:build linux

package perfunwind_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// walk is what a sample's unwinding gave, in a comparable form.
type walk struct {
	frames string
	stop   string
}

// walks unwinds every sample of the recording at path with opts.
func walks(t *testing.T, path string, opts perfunwind.Options) ([]walk, perfunwind.Stats) {
	return walksWith(t, path, opts, perfunwind.ProcessOptions{})
}

// walksWith is walks with Process's options.
func walksWith(t *testing.T, path string, opts perfunwind.Options, popts perfunwind.ProcessOptions) ([]walk, perfunwind.Stats) {
	t.Helper()
	r, s := openSession(t, path, opts)
	var out []walk
	var b strings.Builder
	err := s.Process(r, popts, func(st *perfunwind.Stack) error {
		b.Reset()
		for i, f := range st.Frames {
			name := "-"
			if f.Map != nil {
				name = f.Map.Name
			}
			cfa := f.CFA
			if i == len(st.Frames)-1 && st.Stop == unwind.StopEnd || f.Signal {
				// The outermost frame's row says only that the RA is
				// undefined: SFrame keeps no CFA for it. A signal
				// trampoline's CFA is what its CFI expression computes
				// (the interrupted SP), where SFrame's signal frames,
				// which restore the registers from the signal context,
				// report the SP the trampoline runs at.
				cfa = 0
			}
			fmt.Fprintf(&b, "%x/%x %s %v%v%v%v\n", f.PC, cfa, name, f.Kernel, f.First, f.Exact, f.Signal)
		}
		out = append(out, walk{b.String(), fmt.Sprintf("%v %v %v", st.Unwound, st.Stop, st.Err)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, s.Stats
}

// findRecording returns the recording of recordings named name.
func findRecording(t testing.TB, name string) recording {
	for _, r := range recordings {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no recording %q", name)
	return recording{}
}

// TestSFrameFromCFI unwinds recordings with and without SFrame compiled
// from the CFI of the files that have none (libc, ld.so, the CFI-only
// program, libpython), for the functions the walks go through, as they
// go (the zero Options; NoSFrameFromCFI without): every sample must give
// the same frames, with the same canonical frame addresses (but those two
// kinds of frames say nothing about), and the same end. Compiling is due
// only after enough CFI lookups in a file: python's walks take the CFI
// at hundreds of the interpreter's addresses, and must use compiled
// SFrame; a C or C++ program's take it at a few dozen, whose rows the
// unwinder keeps after one lookup each (the outermost frames' too,
// _start's and clone3's), and may compile nothing.
func TestSFrameFromCFI(t *testing.T) {
	for _, name := range []string{"sframe", "cfi", "cxx", "python", "exec"} {
		t.Run(name, func(t *testing.T) {
			path := record(t, findRecording(t, name))
			cfi, cst := walks(t, path, perfunwind.Options{NoSFrameFromCFI: true})
			gen, gst := walks(t, path, perfunwind.Options{})
			if len(cfi) != len(gen) {
				t.Fatalf("%d samples with CFI, %d with compiled SFrame", len(cfi), len(gen))
			}
			diffs := 0
			for i := range cfi {
				if cfi[i] != gen[i] {
					if diffs++; diffs <= 3 {
						t.Errorf("sample %d differs:\nCFI (%s):\n%scompiled SFrame (%s):\n%s", i, cfi[i].stop, cfi[i].frames, gen[i].stop, gen[i].frames)
					}
				}
			}
			if diffs > 0 {
				t.Errorf("%d of %d samples differ", diffs, len(cfi))
			}
			if cst.GenFrames != 0 || name == "python" && (gst.GenFrames == 0 || gst.GenFiles == 0) {
				t.Errorf("frames by compiled SFrame: %d without, %d with (%d files)", cst.GenFrames, gst.GenFrames, gst.GenFiles)
			}
			t.Logf("%d samples; CFI frames %d without, %d with compiled SFrame (%d frames, %d files, %d functions, %d left to CFI)",
				len(cfi), cst.Frames[2], gst.Frames[2], gst.GenFrames, gst.GenFiles, gst.GenFuncs, gst.GenSkipped)
		})
	}
}

//go:build linux

package perfunwind_test

import (
	"errors"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
)

// TestPipeline checks that Process with ProcessOptions.Pipeline passes
// the same stacks, in the same order, as without, and names their frames
// the same through a Resolver used on fn's goroutine.
func TestPipeline(t *testing.T) {
	for _, name := range []string{"sframe", "cfi", "exec", "sframe-pipe", "sframe-z"} {
		t.Run(name, func(t *testing.T) {
			path := record(t, findRecording(t, name))
			opts := perfunwind.Options{}
			plain, pst := walksWith(t, path, opts, perfunwind.ProcessOptions{})
			piped, qst := walksWith(t, path, opts, perfunwind.ProcessOptions{Pipeline: true})
			if len(plain) != len(piped) || len(plain) == 0 {
				t.Fatalf("%d samples without the pipeline, %d with", len(plain), len(piped))
			}
			for i := range plain {
				if plain[i] != piped[i] {
					t.Fatalf("sample %d differs:\nwithout (%s):\n%swith (%s):\n%s", i, plain[i].stop, plain[i].frames, piped[i].stop, piped[i].frames)
				}
			}
			if pst.Samples != qst.Samples || pst.Frames != qst.Frames {
				t.Errorf("stats differ: %+v without, %+v with", pst, qst)
			}
			a, b := names(t, path, false), names(t, path, true)
			if len(a) != len(b) {
				t.Fatalf("%d named frames without the pipeline, %d with", len(a), len(b))
			}
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("frame %d: %q without the pipeline, %q with", i, a[i], b[i])
				}
			}
		})
	}
}

// openSession opens the recording at path and a session with opts to
// process it, both closed when the test ends.
func openSession(t testing.TB, path string, opts perfunwind.Options) (*perfdata.Reader, *perfunwind.Session) {
	t.Helper()
	r, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s, err := perfunwind.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return r, s
}

// names returns the symbol of every frame of every sample of the
// recording at path, resolved in fn.
func names(t *testing.T, path string, pipe bool) []string {
	t.Helper()
	r, s := openSession(t, path, perfunwind.Options{})
	res := perfunwind.NewResolver(s)
	defer res.Close()
	var out []string
	err := s.Process(r, perfunwind.ProcessOptions{Pipeline: pipe}, func(st *perfunwind.Stack) error {
		for _, f := range st.Frames {
			out = append(out, res.Resolve(f.Map, f.LookupPC()).Sym)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPipelineError checks that an error of fn ends a pipelined Process
// with that error, and that fn is not called after it.
func TestPipelineError(t *testing.T) {
	path := record(t, findRecording(t, "sframe"))
	for _, stopAt := range []int{0, 1, 127, 128, 129, 1000} {
		r, s := openSession(t, path, perfunwind.Options{})
		errStop := errors.New("stop")
		n := 0
		err := s.Process(r, perfunwind.ProcessOptions{Pipeline: true}, func(st *perfunwind.Stack) error {
			n++
			if n-1 == stopAt {
				return errStop
			}
			return nil
		})
		if err != errStop || n != stopAt+1 {
			t.Errorf("stopping at sample %d: %d calls, error %v", stopAt, n, err)
		}
	}
}

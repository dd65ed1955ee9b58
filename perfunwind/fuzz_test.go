//go:build linux

package perfunwind_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// FuzzProcess runs recordings through the whole report path: the
// session (mappings, forks, execs, unwinding over the stack copies and
// the files the mappings name), the resolver and the three writers. Any
// bytes may fail; none may panic. The seeds are the first 3 KiB of a
// small recording made with perf (when it is installed), whole and cut:
// its header, attributes, first mappings and samples. The fuzzing
// engine minimizes each input that finds new code, trying it without
// each of its bytes in turn: with seeds of 12 KiB it did little else (5
// inputs a minute).
//
//	go test ./perfunwind -run '^$' -fuzz FuzzProcess
func FuzzProcess(f *testing.F) {
	if data := smallRecording(f); data != nil {
		f.Add(data[:min(len(data), fuzzSeedSize)])
		f.Add(data[:min(len(data), fuzzSeedSize/2)])
	}
	f.Add([]byte("PERFILE2"))
	// The files the recordings name are looked for in an empty directory:
	// what is fuzzed is this package, not the loading of this machine's
	// libraries (which costs a second an input).
	empty := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		// Bytes past fuzzMaxInput only make an input slower, and its
		// minimization longer: the engine grows inputs up to 1 MB.
		data = data[:min(len(data), fuzzMaxInput)]
		r, err := perfdata.NewBytes(data)
		if err != nil {
			return
		}
		defer r.Close()
		s, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.AMD64, Kallsyms: "/dev/null", SymFS: empty})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res := perfunwind.NewResolver(s)
		defer res.Close()
		res.Inlines = true
		sw := stackprof.NewScriptWriter(io.Discard, res)
		fo := stackprof.NewFolded(res)
		pb := stackprof.NewPerfBuilder(res, r.Header())
		// Half the inputs through the pipeline sframe report uses.
		s.Process(r, perfunwind.ProcessOptions{Pipeline: len(data)%2 == 1}, func(st *perfunwind.Stack) error {
			sw.Write(st)
			fo.Add(st)
			return pb.Add(st)
		})
		perfunwind.WriteSummary(io.Discard, s)
		fo.Write(io.Discard)
		if p, err := pb.Profile(); err == nil {
			p.Write(io.Discard)
		}
	})
}

// fuzzSeedSize is the size of FuzzProcess's seeds, and fuzzMaxInput the
// part of an input it reads.
const (
	fuzzSeedSize = 3 << 10
	fuzzMaxInput = 8 << 10
)

// smallRecording returns the first 12 KiB of a recording of the test
// program with 256-byte stack copies, or nil without perf.
func smallRecording(f *testing.F) []byte { return smallRecordingT(f) }

func smallRecordingT(f testing.TB) []byte {
	if _, err := exec.LookPath("perf"); err != nil {
		return nil
	}
	exe := testprog.Build(f, "testdata/prog.c", "-O2", "-fomit-frame-pointer", "-Wa,--gsframe")
	path := filepath.Join(f.TempDir(), "small.data")
	if out, err := exec.Command("perf", "record", "-q", "-N", "-o", path, "--call-graph", "dwarf,256",
		"-e", "cpu-clock", "-c", "5000000", "--", exe, "100").CombinedOutput(); err != nil {
		f.Logf("perf record: %v\n%s", err, out)
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return bytes.Clone(data[:min(len(data), 12<<10)])
}

//go:build linux

package perfunwind_test

import (
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
)

// BenchmarkUnwindSamples measures the per-sample path of sframe report:
// for each sample of a recording (perf record --call-graph dwarf of a
// test program, made at benchmark time), unwind its user stack from its
// registers and stack copy, then name every frame (function, from the
// Resolver's cache after the first iteration, as in a long recording
// whose addresses repeat). The samples are read into memory first, and
// the session knows the program's mappings: reading the file is not
// measured. frames/s counts user and kernel frames. The "+gen" variants
// compile SFrame for the functions the walks take CFI for
// (the zero Options, as sframe report does; compiled during the
// first iteration).
//
//	go test ./perfunwind -run '^$' -bench UnwindSamples -benchtime 20x
func BenchmarkUnwindSamples(b *testing.B) {
	for _, name := range []string{"sframe", "sframe+gen", "cfi", "cfi+gen", "python", "python+gen"} {
		b.Run(name, func(b *testing.B) {
			name, gen := strings.CutSuffix(name, "+gen")
			var rc recording
			for _, r := range recordings {
				if r.name == name {
					rc = r
				}
			}
			path := record(b, rc)
			s, samples := loadSamples(b, path, gen)
			defer s.Close()
			res := perfunwind.NewResolver(s)
			defer res.Close()
			var st perfunwind.Stack
			frames := 0
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				for i := range samples {
					s.Unwind(&samples[i], &st)
					for j := range st.Frames {
						f := &st.Frames[j]
						res.Resolve(f.Map, f.LookupPC())
					}
					frames += len(st.Frames)
				}
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
			// CPU time, steadier than wall time on a shared machine.
			b.ReportMetric(float64(frames)/cpu.Seconds(), "frames/cpu-s")
			b.ReportMetric(float64(frames)/float64(b.N*len(samples)), "frames/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(samples)), "ns/sample")
		})
	}
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadSamples reads the recording at path: a session that has applied
// its records (but EXIT, so that every process stays known) and copies
// of its samples.
func loadSamples(b *testing.B, path string, gen bool) (*perfunwind.Session, []perfunwind.Sample) {
	r, err := perfdata.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.SetTimeOrder(true)
	opts := perfunwind.OptionsFor(r.Header())
	opts.NoSFrameFromCFI = !gen
	s, err := perfunwind.NewSession(opts)
	if err != nil {
		b.Fatal(err)
	}
	arch := r.Header().Machine()
	var samples []perfunwind.Sample
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		switch rec.Type {
		case perfdata.RecordExit:
		case perfdata.RecordSample:
			if ps := rec.Sample(); ps != nil {
				var smp perfunwind.Sample
				smp.FromPerf(ps, arch)
				smp.Stack = append([]byte(nil), smp.Stack...)
				samples = append(samples, smp)
			}
		default:
			s.Record(rec)
		}
	}
	return s, samples
}

// BenchmarkProcess measures what sframe report --format text does with a
// recording (made at benchmark time), from the file: read it, unwind
// every sample (SFrame compiled from CFI) and print it as perf script
// does, to io.Discard; with and without ProcessOptions.Pipeline, which
// prints on a goroutine of its own.
//
//	go test ./perfunwind -run '^$' -bench Process -benchtime 10x
func BenchmarkProcess(b *testing.B) {
	path := record(b, findRecording(b, "sframe"))
	for _, pipe := range []bool{false, true} {
		name := "plain"
		if pipe {
			name = "pipeline"
		}
		b.Run(name, func(b *testing.B) {
			samples := 0
			cpu0 := cpuTime()
			for b.Loop() {
				r, err := perfdata.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				s, err := perfunwind.NewSession(perfunwind.Options{})
				if err != nil {
					b.Fatal(err)
				}
				res := perfunwind.NewResolver(s)
				sw := stackprof.NewScriptWriter(io.Discard, res)
				if err := s.Process(r, perfunwind.ProcessOptions{Pipeline: pipe}, sw.Write); err != nil {
					b.Fatal(err)
				}
				sw.Flush()
				samples += int(s.Stats.Samples)
				res.Close()
				s.Close()
				r.Close()
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(samples), "ns/sample")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(samples), "cpu-ns/sample")
		})
	}
}

// BenchmarkCutWalks measures walks that end where their stack copy does
// against complete ones, per frame: a perf recording, with copies of 4
// KiB, of recorder/testdata/deep.c, whose thread is 13 KB deep half of
// the time (made at benchmark time; CFI only). Each iteration unwinds
// every sample; ns/frame-cut and ns/frame-whole are the wall time per
// frame of each kind of walk.
//
//	go test ./perfunwind -run '^$' -bench CutWalks -benchtime 20x
func BenchmarkCutWalks(b *testing.B) {
	exe := testprog.Build(b, "../recorder/testdata/deep.c", "-O2", "-pthread")
	path := record(b, recording{name: "deep-4k", prog: func(testing.TB) []string { return []string{exe, "1"} },
		opts: []string{"--call-graph", "dwarf,4096"}})
	s, samples := loadSamples(b, path, false)
	defer s.Close()
	var st perfunwind.Stack
	var dur [2]time.Duration
	var frames [2]int
	b.ResetTimer()
	for b.Loop() {
		for i := range samples {
			t0 := time.Now()
			s.Unwind(&samples[i], &st)
			d := time.Since(t0)
			k := 0
			if st.CopyEnd() {
				k = 1
			}
			dur[k] += d
			frames[k] += len(st.Frames)
		}
	}
	if frames[0] == 0 || frames[1] == 0 {
		b.Fatalf("%d frames of complete walks, %d of cut ones: want both", frames[0], frames[1])
	}
	b.ReportMetric(float64(dur[1].Nanoseconds())/float64(frames[1]), "ns/frame-cut")
	b.ReportMetric(float64(dur[0].Nanoseconds())/float64(frames[0]), "ns/frame-whole")
}

// BenchmarkColdCXX measures what unwinding costs a profiler on a C++
// compiler's stacks from its first sample: a perf recording (made at
// benchmark time, 16 KiB stack copies) of g++ -O2 compiling
// scripts/bench-cc1plus.cc with NUM=1 (cc1plus: no SFrame, thousands of
// functions, stacks of 30-40 frames); each iteration unwinds every sample
// once in a new Session, so that every CFI lookup, row cached and SFrame
// compiled (the "+gen" variant, the zero Options) is counted.
// cpu-us/sample is the process's CPU time per sample.
//
//	go test ./perfunwind -run '^$' -bench ColdCXX -benchtime 3x
func BenchmarkColdCXX(b *testing.B) {
	testprog.NeedTool(b, "g++")
	src, err := filepath.Abs("../scripts/bench-cc1plus.cc")
	if err != nil {
		b.Fatal(err)
	}
	obj := filepath.Join(b.TempDir(), "tu.o")
	path := record(b, recording{name: "cc1plus", prog: func(testing.TB) []string {
		return []string{"g++", "-std=c++17", "-O2", "-DNUM=1", "-c", src, "-o", obj}
	}, opts: []string{"--call-graph", "dwarf,16384"}})
	for _, gen := range []bool{false, true} {
		name := "cached"
		if gen {
			name = "cached+gen"
		}
		b.Run(name, func(b *testing.B) {
			var cpu time.Duration
			n := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s, samples := loadSamples(b, path, gen)
				var st perfunwind.Stack
				b.StartTimer()
				cpu0 := cpuTime()
				for j := range samples {
					s.Unwind(&samples[j], &st)
				}
				cpu += cpuTime() - cpu0
				n += len(samples)
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), "cpu-us/sample")
		})
	}
}

package recorder

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/perfunwind"
)

// liveRecords samples a running recprog deep (a thread spinning 32
// frames deep, SFrame build) for a while with the options Record uses,
// and returns copies of the records, the events and the process id.
func liveRecords(tb testing.TB, opts Options) ([][]byte, []*perfdata.Attr, int) {
	tb.Helper()
	needPerf(tb)
	exe := buildProg(tb, "-O2", "-Wa,--gsframe")
	prog := testprog.StartCmd(tb, exec.Command(exe, "deep", "60"))
	po, _ := opts.perfOptions(arch.Host())
	po.PIDs = []int{prog.PID()}
	s, err := perfevent.Open(po)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		tb.Fatal(err)
	}
	var recs [][]byte
	samples := 0
	deadline := time.AfterFunc(5*time.Second, s.Stop)
	defer deadline.Stop()
	err = s.Run(func(r *perfevent.Record) error {
		if r.Type == perfdata.RecordFinishedRound {
			return nil
		}
		recs = append(recs, append([]byte(nil), r.Raw...))
		if r.Type == perfdata.RecordSample {
			if samples++; samples == 400 {
				s.Stop()
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	var attrs []*perfdata.Attr
	for _, a := range s.Attrs() {
		attrs = append(attrs, a.Attr)
	}
	return recs, attrs, prog.PID()
}

// BenchmarkOnlineSample measures the per-sample path of Record: decode a
// sample of 16 KiB of stack, unwind its 32 frames (SFrame for the
// program, CFI for the C library) and merge its stack, over 400 real
// samples of a thread 32 frames deep (6.6 MB of records, taken in turn);
// the files' tables are loaded before the timing starts, as they are
// after a recording's first samples. It reports the process's CPU time
// per sample beside the wall time.
func BenchmarkOnlineSample(b *testing.B) {
	opts := Options{}
	recs, attrs, pid := liveRecords(b, opts)
	sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	if err := sess.SeedProcess(pid); err != nil {
		b.Fatal(err)
	}
	r := newRecorder(sess, arch.Host(), attrs, -1, 64<<20)
	dec := perfdata.NewDecoder(binary.NativeEndian, attrs)
	var rec perfdata.Record
	var samples [][]byte
	for _, raw := range recs {
		if err := dec.Decode(&rec, raw); err != nil {
			b.Fatal(err)
		}
		r.record(&rec)
		if rec.Type == perfdata.RecordSample {
			samples = append(samples, raw)
		}
	}
	frames := float64(sess.Stats.Frames[0]+sess.Stats.Frames[1]+sess.Stats.Frames[2]+sess.Stats.Frames[3]+sess.Stats.Frames[4]) / float64(sess.Stats.Unwound)
	if frames < 31 {
		b.Fatalf("%.1f frames per sample, want 32: %+v", frames, sess.Stats)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		dec.Decode(&rec, samples[i%len(samples)])
		r.record(&rec)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(frames, "frames/sample")
	// On a shared machine, CPU time says more than wall time.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/sample")
}

// BenchmarkWritePprofCXX measures naming a C++ compiler's frames and
// writing its profile, sframe record's phase after the recording: each
// iteration records (untimed) g++ -O2 compiling scripts/bench-cc1plus.cc
// with NUM=1 (cc1plus: thousands of distinct stacks and C++ functions),
// then writes it as pprof, every symbol table read and name demangled
// (the session's files keep what they resolved). cpu-us/stack is the
// process's CPU time per distinct stack.
//
//	go test ./recorder -run '^$' -bench WritePprofCXX -benchtime 3x
func BenchmarkWritePprofCXX(b *testing.B) {
	testprog.NeedPerfEvents(b)
	testprog.NeedTool(b, "g++")
	src, err := filepath.Abs("../scripts/bench-cc1plus.cc")
	if err != nil {
		b.Fatal(err)
	}
	obj := filepath.Join(b.TempDir(), "tu.o")
	var out bytes.Buffer
	var cpu time.Duration
	stacks := 0
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p, _ := recordCommand(b, Options{}, "g++", "-std=c++17", "-O2", "-DNUM=1", "-c", src, "-o", obj)
		if len(p.stacks) < 1000 {
			b.Fatalf("%d distinct stacks, want thousands", len(p.stacks))
		}
		p.res.NameOnly = true // as sframe record's pprof output
		out.Reset()
		b.StartTimer()
		cpu0 := cpuTime()
		if err := p.WritePprof(&out); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - cpu0
		stacks += len(p.stacks)
	}
	b.ReportMetric(float64(stacks)/float64(b.N), "stacks")
	b.ReportMetric(float64(cpu.Microseconds())/float64(stacks), "cpu-us/stack")
}

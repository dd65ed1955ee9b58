package stackprof

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/symbolize"
	"github.com/sframekit/sframekit/unwind"
)

// TestBuilder builds a profile from two captures of a made-up process and
// reads it back through pprof's parser.
func TestBuilder(t *testing.T) {
	exe := &unwind.Module{Name: "/bin/prog", Start: 0x400000, End: 0x500000}
	lib := &unwind.Module{Name: "/lib/libc.so.6", Start: 0x7f0000000000, End: 0x7f0000200000}
	frame := func(pc uint64, m *unwind.Module, fn, dem, file string, line int) unwind.SymFrame {
		return unwind.SymFrame{Frame: unwind.Frame{PC: pc, Module: m}, Func: fn, Demangled: dem, File: file, Line: line}
	}
	trace := func() *unwind.Trace {
		return &unwind.Trace{PID: 7, Threads: []unwind.ThreadTrace{
			{TID: 7, Name: "prog", Frames: []unwind.SymFrame{
				frame(0x7f0000001234, lib, "pause", "", "", 0),
				frame(0x401000, exe, "_Z4waitv", "wait()", "prog.cc", 12),
				frame(0x400800, exe, "main", "", "prog.cc", 30),
			}},
			{TID: 8, Frames: []unwind.SymFrame{
				frame(0x7f0000001234, lib, "pause", "", "", 0),
				{Frame: unwind.Frame{PC: 0x7f0000000100, Module: lib, Signal: true}},
				frame(0x405000, exe, "", "", "", 0), // unknown function
				{Frame: unwind.Frame{PC: 0x1234}},   // in no module: where a walk stopped
			}},
			{TID: 9}, // no frames: no sample
		}}
	}
	b := NewBuilder()
	b.Add(trace())
	// A second capture: new Module values for the same files.
	b.Add(trace())
	q := reparse(t, b.Profile)
	if len(q.Sample) != 4 || len(q.Mapping) != 2 || len(q.Location) != 6 {
		t.Fatalf("%d samples, %d mappings, %d locations; want 4, 2, 6\n%s", len(q.Sample), len(q.Mapping), len(q.Location), q)
	}
	if q.Mapping[0].File != "/bin/prog" || !q.Mapping[0].HasFunctions || !q.Mapping[0].HasFilenames || q.Mapping[1].HasFilenames {
		t.Errorf("mappings: %+v %+v", q.Mapping[0], q.Mapping[1])
	}
	names := func(s *profile.Sample) (out []string) {
		for _, l := range s.Location {
			if len(l.Line) == 0 {
				out = append(out, "?")
				continue
			}
			ln := l.Line[0]
			out = append(out, ln.Function.Name)
			if ln.Line != 0 {
				out[len(out)-1] += "@" + ln.Function.Filename
			}
		}
		return out
	}
	want := [][]string{{"pause", "wait()@prog.cc", "main@prog.cc"}, {"pause", "<signal handler called>", "?", "?"}}
	for i, s := range q.Sample {
		got := names(s)
		if w := want[i%2]; strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("sample %d: %v, want %v", i, got, w)
		}
		if tid := s.NumLabel["thread"]; len(tid) != 1 || tid[0] != int64(7+i%2) {
			t.Errorf("sample %d: thread label %v", i, tid)
		}
	}
	if got := q.Sample[0].Location[1].Line[0].Function.SystemName; got != "_Z4waitv" {
		t.Errorf("system name %q", got)
	}
	if q.Sample[0].Label["thread_name"][0] != "prog" || q.Sample[1].Label["thread_name"] != nil {
		t.Errorf("thread_name labels: %v %v", q.Sample[0].Label, q.Sample[1].Label)
	}
}

// TestBuilderInlines: calls inlined at a frame become the lines of its
// location, innermost first, each at the position in it, and the frame's
// own function last, at the call site of the outermost inlined call; as
// `sframe stack -i` prints them, and as pprof reads them.
func TestBuilderInlines(t *testing.T) {
	exe := &unwind.Module{Name: "/bin/prog", Start: 0x400000, End: 0x500000}
	tr := &unwind.Trace{PID: 7, Threads: []unwind.ThreadTrace{{TID: 7, Frames: []unwind.SymFrame{
		{Frame: unwind.Frame{PC: 0x401000, Module: exe}, Func: "outer", File: "inner.h", Line: 3,
			Inlined: []symbolize.Inline{{Name: "inner", File: "mid.h", Line: 20}, {Name: "", File: "prog.c", Line: 40}}},
		{Frame: unwind.Frame{PC: 0x400800, Module: exe}, Func: "main", File: "prog.c", Line: 50},
	}}}}
	b := NewBuilder()
	b.Add(tr)
	q := reparse(t, b.Profile)
	var got []string
	for _, l := range q.Sample[0].Location {
		var lines []string
		for _, ln := range l.Line {
			lines = append(lines, fmt.Sprintf("%s@%s:%d", ln.Function.Name, ln.Function.Filename, ln.Line))
		}
		got = append(got, strings.Join(lines, " "))
	}
	want := []string{"inner@inner.h:3 ??@mid.h:20 outer@prog.c:40", "main@prog.c:50"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("locations %q\nwant %q", got, want)
	}
}

// reparse makes a profile and reads it back through pprof's parser.
func reparse(t *testing.T, build func() (*profile.Profile, error)) *profile.Profile {
	t.Helper()
	p, err := build()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

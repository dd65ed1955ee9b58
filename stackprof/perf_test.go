package stackprof

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
)

// testStacks returns a Resolver over a session that names kernel frames
// from testdata/kallsyms, and two stacks: kernel frames (one in a
// module), then user frames in a file that does not exist (unknown
// functions) and in no mapping.
func testStacks(t *testing.T) (*perfunwind.Resolver, []*perfunwind.Stack) {
	t.Helper()
	s, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.AMD64, Kallsyms: "testdata/kallsyms"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := perfunwind.NewResolver(s)
	t.Cleanup(func() { r.Close() })
	kern := &perfunwind.Mapping{Name: "[kernel.kallsyms]", Kernel: true}
	lib := &perfunwind.Mapping{Name: "/nonexistent/lib.so", Start: 0x7f0000001000, End: 0x7f0000009000, Pgoff: 0x1000}
	a := &perfunwind.Stack{Pid: 7, Tid: 42, Time: 12345678901234, Period: 250000, Comm: "my prog", Kernel: 2,
		Frames: []perfunwind.Frame{
			{PC: 0xffffffff81000210, Map: kern, Kernel: true, First: true, Exact: true},
			{PC: 0xffffffff81000105, Map: kern, Kernel: true},
			{PC: 0x7f0000001234, Map: lib, First: true, Exact: true},
			{PC: 0x1234},
		}}
	b := &perfunwind.Stack{Pid: 7, Tid: 7, Time: 12345000000000, Period: 250000, Comm: "my prog", Kernel: 1,
		Frames: []perfunwind.Frame{{PC: 0xffffffffc0001004, Map: kern, Kernel: true, First: true, Exact: true}}}
	return r, []*perfunwind.Stack{a, b, a}
}

// TestScriptWriter checks perf script's layout: "COMM TID TIME: ", the
// tid in 5 columns, the time in 12 as seconds and microseconds, frames
// as a tab, the address in 16 columns, symbol and file.
func TestScriptWriter(t *testing.T) {
	r, stacks := testStacks(t)
	var buf bytes.Buffer
	w := NewScriptWriter(&buf, r)
	for _, st := range stacks[:2] {
		if err := w.Write(st); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	want := "my prog    42 12345.678901: \n" +
		"\tffffffff81000210 func_b ([kernel.kallsyms])\n" +
		"\tffffffff81000105 func_a ([kernel.kallsyms])\n" +
		"\t            1234 [unknown] (/nonexistent/lib.so)\n" +
		"\t            1234 [unknown] ([unknown])\n" +
		"\n" +
		"my prog     7 12345.000000: \n" +
		"\tffffffffc0001004 mod_func ([kernel.kallsyms])\n" +
		"\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestFolded checks the folded form: the thread's name first with spaces
// made underscores, outermost frame next, unknown functions as their
// file's base name, counts merged, lines sorted; and names as
// stackcollapse-perf tidies them.
func TestFolded(t *testing.T) {
	r, stacks := testStacks(t)
	f := NewFolded(r)
	for _, st := range stacks {
		f.Add(st)
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	want := "my_prog;[unknown];[lib.so];func_a;func_b 2\nmy_prog;mod_func 1\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
	for _, c := range []struct{ in, want string }{
		{"ns::f(int, char)", "ns::f"},
		{"(anonymous namespace)::g(int)", "(anonymous namespace)::g"},
		{"main.(*T).Method", "main.(*T).Method"},
		{"a;b", "a:b"},
	} {
		if got := string(appendFoldName(nil, c.in, false)); got != c.want {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPerfBuilder checks the profile: sample types from the events, one
// sample per distinct stack and labels with counts and periods summed,
// kernel mappings spanning their addresses, CheckValid.
func TestPerfBuilder(t *testing.T) {
	r, stacks := testStacks(t)
	h := &perfdata.Header{Attrs: []*perfdata.Attr{
		{Type: perfdata.TypeSoftware, Config: 0, Name: "cpu-clock:ppp", SamplePeriod: 4000, Flags: perfdata.AttrFreq},
		{Type: perfdata.TypeHardware, Config: 0, Name: "cycles", SamplePeriod: 100000, Index: 1},
	}}
	b := NewPerfBuilder(r, h)
	for _, st := range stacks {
		b.Add(st)
	}
	cyc := *stacks[1]
	cyc.Event, cyc.Period = 1, 100000
	b.Add(&cyc)
	q := reparse(t, b.Profile)
	var types []string
	for _, st := range q.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if strings.Join(types, " ") != "samples/count cpu/nanoseconds cycles/count" || q.Period != 250000 {
		t.Errorf("types %v, period %d", types, q.Period)
	}
	if len(q.Sample) != 3 {
		t.Fatalf("%d samples, want 3", len(q.Sample))
	}
	var got []string
	for _, s := range q.Sample {
		got = append(got, fmt.Sprint(s.Value, s.Label["thread_name"]))
		if s.NumLabel["pid"][0] != 7 || len(s.NumLabel["thread"]) != 1 {
			t.Errorf("labels %v", s.NumLabel)
		}
	}
	if strings.Join(got, "|") != "[2 500000 0] [my prog]|[1 250000 0] [my prog]|[1 0 100000] [my prog]" {
		t.Errorf("samples %q", got)
	}
	for _, m := range q.Mapping {
		if m.File == "[kernel.kallsyms]" && (m.Start != 0xffffffff81000104 || m.Limit != 0xffffffffc0001005) {
			t.Errorf("kernel mapping %#x-%#x", m.Start, m.Limit)
		}
	}
}

// TestPerfBuilderUnknown: every sample of the profile has a location
// with a function, as the folded stacks name it, frames of no known
// function and samples without frames included. Grafana Pyroscope drops
// a location without lines, and a sample of only such locations or of
// none: those samples were missing from its totals.
func TestPerfBuilderUnknown(t *testing.T) {
	r, stacks := testStacks(t)
	h := &perfdata.Header{Attrs: []*perfdata.Attr{{Type: perfdata.TypeSoftware, Name: "cpu-clock", SamplePeriod: 4000}}}
	b := NewPerfBuilder(r, h)
	f := NewFolded(r)
	none := &perfunwind.Stack{Pid: 7, Tid: 43, Period: 250000, Comm: "idle"}
	for _, st := range []*perfunwind.Stack{stacks[0], none, none} {
		b.Add(st)
		f.Add(st)
	}
	q := reparse(t, b.Profile)
	var got []string
	for _, s := range q.Sample {
		var names []string
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i]
			if len(l.Line) != 1 || l.Line[0].Function == nil {
				t.Errorf("location %#x of %s: lines %v, want one, of a function", l.Address, s.Label["thread_name"], l.Line)
				continue
			}
			names = append(names, l.Line[0].Function.Name)
		}
		got = append(got, fmt.Sprintf("%s;%s %d", s.Label["thread_name"][0], strings.Join(names, ";"), s.Value[0]))
	}
	if want := []string{"my prog;[unknown];[lib.so];func_a;func_b 1", "idle;[unknown] 2"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("profile's stacks %q, want %q", got, want)
	}
	var buf bytes.Buffer
	f.Write(&buf)
	if want := "idle 2\nmy_prog;[unknown];[lib.so];func_a;func_b 1\n"; buf.String() != want {
		t.Errorf("folded:\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestMergedAndOffCPUSamples checks what a live profiler gives the
// writers: samples merged as they were read (AddSamples, AddWeight), and
// context-switch samples whose periods are off-CPU times, named
// off-cpu/nanoseconds beside cpu/nanoseconds in the profile and marked by
// an [off-cpu] frame in folded stacks. Adding a stack n times and adding
// it once with n must give the same profile.
func TestMergedAndOffCPUSamples(t *testing.T) {
	r, stacks := testStacks(t)
	h := &perfdata.Header{Attrs: []*perfdata.Attr{
		{Type: perfdata.TypeSoftware, Config: 0, Name: "cpu-clock", SamplePeriod: 999, Flags: perfdata.AttrFreq},
		{Type: perfdata.TypeSoftware, Config: 3, Name: "context-switches", SamplePeriod: 1, Index: 1},
	}}
	off := *stacks[1]
	off.Event, off.Period = 1, 7000000 // 7 ms off the CPU, in 3 switches
	one := func(b *PerfBuilder) string {
		p, err := b.Profile()
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, st := range p.SampleType {
			types = append(types, st.Type+"/"+st.Unit)
		}
		var got []string
		for _, s := range p.Sample {
			got = append(got, fmt.Sprint(s.Value))
		}
		return strings.Join(types, " ") + " " + p.DefaultSampleType + ": " + strings.Join(got, " ")
	}
	merged := NewPerfBuilder(r, h)
	merged.SetEventType(1, "off-cpu", "nanoseconds")
	a := *stacks[0]
	a.Period = 3 * 250000
	merged.AddSamples(&a, 3)
	merged.AddSamples(&off, 3)
	single := NewPerfBuilder(r, h)
	single.SetEventType(1, "off-cpu", "nanoseconds")
	for range 3 {
		single.Add(stacks[0])
	}
	for _, p := range []uint64{1000000, 2000000, 4000000} {
		o := off
		o.Period = p
		single.Add(&o)
	}
	want := "samples/count cpu/nanoseconds off-cpu/nanoseconds cpu: [3 750000 0] [3 0 7000000]"
	if got := one(merged); got != want {
		t.Errorf("merged: %s\nwant    %s", got, want)
	}
	if got := one(single); got != want {
		t.Errorf("one by one: %s\nwant        %s", got, want)
	}

	f := NewFolded(r)
	f.SetEventFrame(1, "[off-cpu]")
	f.AddWeight(stacks[0], 750)
	f.AddWeight(&off, 7000)
	f.Add(stacks[0])
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if want := "my_prog;[unknown];[lib.so];func_a;func_b 751\nmy_prog;mod_func;[off-cpu] 7000\n"; buf.String() != want {
		t.Errorf("folded\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestTextQuotesNames writes a stack whose thread and file names carry
// terminal escape sequences and a newline (a recording's COMM and MMAP2
// names are anyone's): perf script's text and the folded form show them
// escaped, one line per frame or stack.
func TestTextQuotesNames(t *testing.T) {
	r, _ := testStacks(t)
	lib := &perfunwind.Mapping{Name: "/tmp/\x1b[2J\nlib.so", Start: 0x7f0000001000, End: 0x7f0000009000, Pgoff: 0x1000}
	st := &perfunwind.Stack{Pid: 7, Tid: 7, Comm: "x\x1b]0;t\x07\u009b", Frames: []perfunwind.Frame{{PC: 0x7f0000001234, Map: lib, First: true, Exact: true}}}
	var script bytes.Buffer
	w := NewScriptWriter(&script, r)
	if err := w.Write(st); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := `x\x1b]0;t\x07\xc2\x9b     7     0.000000: ` + "\n" +
		"\t            1234 [unknown] (/tmp/\\x1b[2J\\x0alib.so)\n\n"
	if got := script.String(); got != want {
		t.Errorf("script text:\n%q\nwant\n%q", got, want)
	}
	f := NewFolded(r)
	f.Add(st)
	var folded bytes.Buffer
	if err := f.Write(&folded); err != nil {
		t.Fatal(err)
	}
	if want := `x\x1b]0:t\x07\xc2\x9b;[\x1b[2J\x0alib.so] 1` + "\n"; folded.String() != want {
		t.Errorf("folded:\n%q\nwant\n%q", folded.String(), want)
	}
}

// TestMainMapping: pprof takes the first mapping for the main binary. In
// a profile of every process it is the executable of the process with
// the most samples, not the lowest mapping of all (the profiler's own, a
// non-PIE Go binary, sampled too).
func TestMainMapping(t *testing.T) {
	r, _ := testStacks(t)
	h := &perfdata.Header{Attrs: []*perfdata.Attr{{Type: perfdata.TypeSoftware, Config: 0, Name: "cpu-clock", SamplePeriod: 999, Flags: perfdata.AttrFreq}}}
	profiler := &perfunwind.Mapping{Name: "/usr/bin/sframe", Start: 0x400000, End: 0x800000}
	exe := &perfunwind.Mapping{Name: "/usr/bin/dd", Start: 0x555555554000, End: 0x555555560000}
	lib := &perfunwind.Mapping{Name: "/usr/lib/libc.so.6", Start: 0x7f0000001000, End: 0x7f0000100000}
	stack := func(pid uint32, frames ...perfunwind.Frame) *perfunwind.Stack {
		return &perfunwind.Stack{Pid: pid, Tid: pid, Comm: "x", Period: 1000, Frames: frames}
	}
	b := NewPerfBuilder(r, h)
	b.AddSamples(stack(10, perfunwind.Frame{PC: 0x401000, Map: profiler}), 3)
	b.AddSamples(stack(20, perfunwind.Frame{PC: 0x7f0000002000, Map: lib}, perfunwind.Frame{PC: 0x555555555000, Map: exe}), 4)
	b.AddSamples(stack(20, perfunwind.Frame{PC: 0x7f0000002000, Map: lib}), 2)
	b.AddSamples(stack(0), 9) // idle: no frames
	q := reparse(t, b.Profile)
	var files []string
	for _, m := range q.Mapping {
		files = append(files, m.File)
	}
	if want := "/usr/bin/dd /usr/bin/sframe /usr/lib/libc.so.6"; strings.Join(files, " ") != want {
		t.Errorf("mappings %q, want %s", files, want)
	}
}

// TestScriptWriterIPOnly checks the one line of a sample without a call
// graph: COMM right-aligned in 16 columns, and the names quoted as in
// the other samples' lines, so that a name with a newline (a JIT's, a
// thread's) cannot add a line.
func TestScriptWriterIPOnly(t *testing.T) {
	r, _ := testStacks(t)
	lib := &perfunwind.Mapping{Name: "/tmp/a\nb.so", Start: 0x7f0000001000, End: 0x7f0000009000, Pgoff: 0x1000}
	var buf bytes.Buffer
	w := NewScriptWriter(&buf, r)
	for _, comm := range []string{"prog", "a\nb"} {
		st := &perfunwind.Stack{Pid: 7, Tid: 42, Time: 12345678901234, Comm: comm, IPOnly: true,
			Frames: []perfunwind.Frame{{PC: 0x7f0000001234, Map: lib, First: true, Exact: true}}}
		if err := w.Write(st); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	want := "            prog    42 12345.678901:      7f0000001234 [unknown] (/tmp/a\\x0ab.so)\n" +
		"          a\\x0ab    42 12345.678901:      7f0000001234 [unknown] (/tmp/a\\x0ab.so)\n"
	if got := buf.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestPerfBuilderLocations checks that a profile has one location per
// mapping, address and kind (signal frame or not), whatever the order
// frames come in: frames of two pieces of one file's mapping (split by a
// later mmap), of another file, and of a third at the first one's
// addresses, interleaved, more distinct addresses than
// the frame cache holds, each address twice, and signal frames at
// addresses that ordinary frames have too. Each sample's locations must
// be its frames' addresses (those looked up: a return address less one),
// in its mapping.
func TestPerfBuilderLocations(t *testing.T) {
	r, _ := testStacks(t)
	// One file mapped at 0x7f0000000000 (offset 0), later cut in two;
	// another file after it.
	lo := &perfunwind.Mapping{Name: "/nonexistent/a.so", Start: 0x7f0000000000, End: 0x7f0000100000}
	hi := &perfunwind.Mapping{Name: "/nonexistent/a.so", Start: 0x7f0000100000, End: 0x7f0000200000, Pgoff: 0x100000}
	other := &perfunwind.Mapping{Name: "/nonexistent/b.so", Start: 0x7f1000000000, End: 0x7f1000100000}
	// And a third, in another process, at the first one's addresses.
	same := &perfunwind.Mapping{Name: "/nonexistent/c.so", Start: 0x7f0000000000, End: 0x7f0000100000}
	type key struct {
		file string
		addr uint64
		sig  bool
	}
	want := map[key]bool{}
	var stacks []*perfunwind.Stack
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 600 {
		st := &perfunwind.Stack{Pid: 7, Tid: 7, Comm: "prog", Period: 1}
		for j := range 8 {
			var f perfunwind.Frame
			switch n := rng.IntN(4000); j % 3 {
			case 0:
				f = perfunwind.Frame{PC: lo.Start + 0x1000 + uint64(n)*16, Map: lo}
			case 1:
				f = perfunwind.Frame{PC: hi.Start + 0x1000 + uint64(n)*16, Map: hi}
				if i%2 == 1 {
					f = perfunwind.Frame{PC: same.Start + 0x1000 + uint64(n)*16, Map: same}
				}
			default:
				f = perfunwind.Frame{PC: other.Start + 0x1000 + uint64(n)*16, Map: other}
			}
			f.First = j == 0
			f.Signal = (i+j)%17 == 0
			st.Frames = append(st.Frames, f)
			want[key{f.Map.Name, f.LookupPC(), f.Signal}] = true
		}
		stacks = append(stacks, st)
	}
	b := NewPerfBuilder(r, &perfdata.Header{Attrs: []*perfdata.Attr{{Type: perfdata.TypeSoftware, Name: "cpu-clock"}}})
	for range 2 { // each stack twice: the second time, every location exists
		for _, st := range stacks {
			b.Add(st)
		}
	}
	q := reparse(t, b.Profile)
	got := map[key]bool{}
	for _, l := range q.Location {
		sig := len(l.Line) > 0 && l.Line[0].Function.Name == "<signal handler called>"
		k := key{l.Mapping.File, l.Address, sig}
		if got[k] {
			t.Errorf("two locations for %s %#x (signal frame %v)", k.file, k.addr, k.sig)
		}
		got[k] = true
	}
	if len(got) != len(want) {
		t.Errorf("%d locations, want %d", len(got), len(want))
	}
	if len(q.Sample) != len(stacks) {
		t.Fatalf("%d samples, want %d", len(q.Sample), len(stacks))
	}
	// The samples' locations, as sets of frames (the profile orders its
	// samples as it likes).
	frames := func(keys []key) string { return fmt.Sprint(keys) }
	wantSamples := map[string]int{}
	for _, st := range stacks {
		var ks []key
		for _, f := range st.Frames {
			ks = append(ks, key{f.Map.Name, f.LookupPC(), f.Signal})
		}
		wantSamples[frames(ks)] += 2
	}
	for _, s := range q.Sample {
		var ks []key
		for _, l := range s.Location {
			sig := len(l.Line) > 0 && l.Line[0].Function.Name == "<signal handler called>"
			ks = append(ks, key{l.Mapping.File, l.Address, sig})
		}
		if wantSamples[frames(ks)] != int(s.Value[0]) {
			t.Errorf("sample %v: %d samples, want %d", ks, s.Value[0], wantSamples[frames(ks)])
		}
	}
}

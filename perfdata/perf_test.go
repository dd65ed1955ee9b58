package perfdata

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
)

func TestMain(m *testing.M) { testprog.Main(m) }

// A recording is a perf record run of testdata/workload.c, made once per
// test binary.
type recording struct {
	name  string
	args  []string // perf record options
	pipe  bool     // perf record -o - > FILE
	work  string   // milliseconds of work per thread
	small bool     // small enough to seed the fuzzer
}

var recordings = []recording{
	{name: "dwarf", args: []string{"--call-graph", "dwarf"}},
	{name: "dwarf-z", args: []string{"-z", "--call-graph", "dwarf"}},
	{name: "pipe-dwarf", args: []string{"--call-graph", "dwarf"}, pipe: true},
	{name: "pipe-z", args: []string{"-z", "--call-graph", "dwarf,1024"}, pipe: true},
	{name: "cpu-clock", args: []string{"-e", "cpu-clock"}, small: true},
	{name: "two-events", args: []string{"-e", "cpu-clock,task-clock"}},
	{name: "switch-events", args: []string{"--switch-events", "-e", "cpu-clock"}},
	{name: "context-switches", args: []string{"-e", "context-switches", "-c", "1"}, small: true},
	{name: "fp", args: []string{"-g", "-e", "cpu-clock"}},
	{name: "many-fields", args: []string{"-e", "cpu-clock", "--sample-cpu", "-d", "--phys-data",
		"--data-page-size", "--code-page-size", "-W", "--transaction", "--sample-identifier", "-s",
		"-T", "--all-cgroups"}, small: true},
	{name: "group-read", args: []string{"-e", "{cpu-clock,task-clock}:S"}, small: true},
	{name: "intr-regs", args: []string{"-e", "cpu-clock", "--intr-regs=ax,bx,sp,ip"}, small: true},
	{name: "tracepoint", args: []string{"-e", "sched:sched_switch", "-e", "sched:sched_process_fork"}, small: true},
	{name: "buildid-mmap", args: []string{"--buildid-mmap", "-e", "cpu-clock"}, small: true},
	{name: "dwarf-small-z", args: []string{"-z", "--call-graph", "dwarf,512", "-e", "cpu-clock", "-c", "1000000"}, small: true},
	// perf record --threads writes a directory: a header file and a
	// file of records per CPU.
	{name: "threads", args: []string{"--threads", "--call-graph", "dwarf", "-e", "cpu-clock"}, work: "150"},
	{name: "threads-z", args: []string{"-z", "--threads", "--call-graph", "dwarf", "-e", "cpu-clock"}},
}

var (
	recMu   sync.Mutex
	recDone = map[string]string{}
	recErr  = map[string]error{}
)

// needPerf skips the test without perf (fails under CI).
func needPerf(t testing.TB) {
	t.Helper()
	testprog.NeedTool(t, "perf")
}

// record makes (once) the recording rc and returns its path. A perf that
// cannot record (no permission, no such event in this kernel) skips the
// test, except under CI.
func record(t testing.TB, rc recording) string {
	t.Helper()
	needPerf(t)
	exe := testprog.Build(t, "testdata/workload.c", "-O1", "-g")
	recMu.Lock()
	defer recMu.Unlock()
	if p, ok := recDone[rc.name]; ok {
		return p
	}
	if err, ok := recErr[rc.name]; ok {
		skipOrFail(t, err)
	}
	path := filepath.Join(testprog.Dir(t), "rec-"+rc.name+".data")
	work := rc.work
	if work == "" {
		work = "60"
	}
	var err error
	if rc.pipe {
		args := append(append([]string{"record", "-q", "-o", "-"}, rc.args...), "--", exe, work)
		cmd := exec.Command("perf", args...)
		var f *os.File
		if f, err = os.Create(path); err == nil {
			cmd.Stdout = f
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err = cmd.Run(); err != nil {
				err = fmt.Errorf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			f.Close()
		}
	} else {
		args := append(append([]string{"record", "-q", "-o", path}, rc.args...), "--", exe, work)
		if out, e := exec.Command("perf", args...).CombinedOutput(); e != nil {
			err = fmt.Errorf("perf %s: %v\n%s", strings.Join(args, " "), e, out)
		}
	}
	if err != nil {
		recErr[rc.name] = err
		skipOrFail(t, err)
	}
	recDone[rc.name] = path
	return path
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("cannot record with perf: %v", err)
	}
	t.Skipf("cannot record with perf: %v", err)
}

// perfOut runs perf with args and returns its standard output.
func perfOut(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("perf", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// dumpRec is one record as perf script -D delivers it.
type dumpRec struct {
	time    uint64
	off     int64
	size    int
	kind    string   // after PERF_RECORD_, up to '(' ':' or ' '
	line    string   // after PERF_RECORD_, trailing blanks removed
	details []string // the sample's field lines (see detailPrefixes)
}

var (
	dumpLineRE     = regexp.MustCompile(`^((?:-?\d+ )*)(0x[0-9a-f]+|-?\d+) \[(0x[0-9a-f]+)\]: PERF_RECORD_(.*)$`)
	detailPrefixes = []string{"... FP chain:", "..... ", "... user regs:", "... intr regs:", ".... ",
		"... ustack:", "... weight:", " . data_src:", " .. phys_addr:", " .. data page size:",
		" .. code page size:", "... transaction:", "... sample_read:", "...... time", "..... id ",
		"... branch"}
)

// perfDump parses perf script -D: the records in perf's delivery order.
func perfDump(t testing.TB, path string) []dumpRec {
	t.Helper()
	out := perfOut(t, "script", "-D", "-i", path)
	var recs []dumpRec
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	inSample := false
	for sc.Scan() {
		l := sc.Text()
		if m := dumpLineRE.FindStringSubmatch(l); m != nil {
			d := dumpRec{line: strings.TrimRight(m[4], " ")}
			// Leading numbers: the CPU and the time, when the sample has them.
			if f := strings.Fields(m[1]); len(f) > 0 {
				d.time, _ = strconv.ParseUint(f[len(f)-1], 10, 64)
			}
			d.off, _ = strconv.ParseInt(m[2], 0, 64)
			sz, _ := strconv.ParseInt(m[3], 0, 64)
			d.size = int(sz)
			d.kind = d.line
			if i := strings.IndexAny(d.kind, "(: "); i >= 0 {
				d.kind = d.kind[:i]
			}
			recs = append(recs, d)
			inSample = d.kind == "SAMPLE"
			continue
		}
		if strings.Contains(l, "@") && strings.Contains(l, "]: event: ") {
			inSample = false
			continue
		}
		if inSample {
			for _, p := range detailPrefixes {
				if strings.HasPrefix(l, p) {
					recs[len(recs)-1].details = append(recs[len(recs)-1].details, strings.TrimRight(l, " "))
					break
				}
			}
		}
	}
	return recs
}

// perfKind is the name perf script -D gives a record type.
func perfKind(t RecordType) string {
	switch t {
	case RecordHeaderAttr:
		return "ATTR"
	case RecordHeaderFeature:
		return "FEATURE"
	case RecordHeaderBuildID:
		return "HEADER_BUILD_ID"
	}
	return t.String()
}

// chex formats v as C's %#x does: 0 without prefix.
func chex(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}

// perfLine formats rec as perf script -D's line after PERF_RECORD_, for
// the record types whose text perf prints from their fields.
func perfLine(rec *Record) (string, bool) {
	switch rec.Type {
	case RecordSample:
		s := rec.Sample()
		if s == nil {
			return "", false
		}
		return fmt.Sprintf("SAMPLE(IP, %#x): %d/%d: %s period: %d addr: %s",
			uint16(rec.Misc), int32(s.Pid), int32(s.Tid), chex(s.IP), s.Period, chex(s.Addr)), true
	case RecordMmap:
		m := rec.Mmap()
		x := byte('x')
		if rec.Misc&MiscMmapData != 0 {
			x = 'r'
		}
		return fmt.Sprintf("MMAP %d/%d: [%s(%s) @ %s]: %c %s", int32(m.Pid), int32(m.Tid),
			chex(m.Addr), chex(m.Len), chex(m.Pgoff), x, m.Filename), true
	case RecordMmap2:
		m := rec.Mmap()
		prot := []byte("---p")
		if m.Prot&1 != 0 {
			prot[0] = 'r'
		}
		if m.Prot&2 != 0 {
			prot[1] = 'w'
		}
		if m.Prot&4 != 0 {
			prot[2] = 'x'
		}
		if m.Flags&1 != 0 { // MAP_SHARED
			prot[3] = 's'
		}
		if m.HasBuildID {
			return fmt.Sprintf("MMAP2 %d/%d: [%s(%s) @ %s <%x>]: %s %s", int32(m.Pid), int32(m.Tid),
				chex(m.Addr), chex(m.Len), chex(m.Pgoff), m.BuildID, prot, m.Filename), true
		}
		return fmt.Sprintf("MMAP2 %d/%d: [%s(%s) @ %s %02x:%02x %d %d]: %s %s", int32(m.Pid), int32(m.Tid),
			chex(m.Addr), chex(m.Len), chex(m.Pgoff), m.Maj, m.Min, m.Ino, m.InoGen, prot, m.Filename), true
	case RecordComm:
		c := rec.Comm()
		exec := ""
		if c.Exec {
			exec = " exec"
		}
		return fmt.Sprintf("COMM%s: %s:%d/%d", exec, c.Comm, int32(c.Pid), int32(c.Tid)), true
	case RecordFork, RecordExit:
		k := rec.Task()
		return fmt.Sprintf("%s(%d:%d):(%d:%d)", rec.Type, int32(k.Pid), int32(k.Tid), int32(k.Ppid), int32(k.Ptid)), true
	case RecordSwitch, RecordSwitchCPUWide:
		w := rec.Switch()
		inOut := "IN"
		if w.Out {
			inOut = "OUT"
			if w.Preempt {
				inOut = "OUT preempt"
			}
		}
		if rec.Type == RecordSwitch {
			return "SWITCH " + inOut, true
		}
		np := "prev"
		if w.Out {
			np = "next"
		}
		return fmt.Sprintf("SWITCH_CPU_WIDE %-11s  %s pid/tid: %5d/%-5d", inOut, np, int32(w.NextPrevPid), int32(w.NextPrevTid)), true
	}
	return "", false
}

// pageSize formats a page size as perf does.
func pageSize(v uint64) string {
	switch {
	case v == 0:
		return "N/A"
	case v%(1<<30) == 0:
		return fmt.Sprintf("%dG", v>>30)
	case v%(1<<20) == 0:
		return fmt.Sprintf("%dM", v>>20)
	case v%(1<<10) == 0:
		return fmt.Sprintf("%dK", v>>10)
	}
	return fmt.Sprint(v)
}

// perfDetails formats a sample's fields as perf script -D's lines.
func perfDetails(rec *Record, a arch.Arch) []string {
	s := rec.Sample()
	var out []string
	add := func(format string, args ...any) {
		out = append(out, strings.TrimRight(fmt.Sprintf(format, args...), " "))
	}
	t := s.Type
	if t&SampleCallchain != 0 {
		add("... FP chain: nr:%d", s.Callchain.Len())
		for i := 0; i < s.Callchain.Len(); i++ {
			add("..... %2d: %016x", i, s.Callchain.At(i))
		}
	}
	regs := func(kind string, r Regs) {
		if r.ABI == RegsABINone {
			return
		}
		abi := "64-bit"
		if r.ABI == RegsABI32 {
			abi = "32-bit"
		}
		add("... %s regs: mask %#x ABI %s", kind, r.Mask, abi)
		i := 0
		for m := r.Mask; m != 0; m &= m - 1 {
			add(".... %-5s 0x%016x", PerfRegisterName(a, trailingZeros(m)), r.At(i))
			i++
		}
	}
	if t&SampleRegsUser != 0 {
		regs("user", s.RegsUser)
	}
	if t&SampleRegsIntr != 0 {
		regs("intr", s.RegsIntr)
	}
	if t&SampleStackUser != 0 {
		// perf prints the offset of the size word before the data.
		off := 0
		if s.StackUserSize != 0 {
			off = cap(rec.Raw) - cap(s.StackUser) - 8
		}
		add("... ustack: size %d, offset %#x", len(s.StackUser), off)
	}
	if t&SampleWeightStruct != 0 {
		add("... weight: %d,%#x,%#x", s.WeightVar1(), s.WeightVar2(), s.WeightVar3())
	} else if t&SampleWeight != 0 {
		add("... weight: %d", s.Weight)
	}
	if t&SampleDataSrc != 0 {
		add(" . data_src: %#x", s.DataSrc)
	}
	if t&SamplePhysAddr != 0 {
		add(" .. phys_addr: %#x", s.PhysAddr)
	}
	if t&SampleDataPageSize != 0 {
		add(" .. data page size: %s", pageSize(s.DataPageSize))
	}
	if t&SampleCodePageSize != 0 {
		add(" .. code page size: %s", pageSize(s.CodePageSize))
	}
	if t&SampleTransaction != 0 {
		add("... transaction: %x", s.Transaction)
	}
	if t&SampleRead != 0 {
		rv := s.Read
		add("... sample_read:")
		if v, ok := rv.TimeEnabled(); ok {
			add("...... time enabled %016x", v)
		}
		if v, ok := rv.TimeRunning(); ok {
			add("...... time running %016x", v)
		}
		counter := func(c Counter) {
			l := fmt.Sprintf("..... id %016x, value %016x", c.ID, c.Value)
			if rv.Format&FormatLost != 0 {
				l += fmt.Sprintf(", lost %d", c.Lost)
			}
			add("%s", l)
		}
		if rv.Format&FormatGroup != 0 {
			add(".... group nr %d", rv.Len())
		}
		for i := 0; i < rv.Len(); i++ {
			counter(rv.Counter(i))
		}
	}
	return out
}

// readAll reads every record of r, calling f for each.
func readAll(t testing.TB, r *Reader, f func(*Record)) {
	t.Helper()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(rec)
	}
}

// TestAgainstPerfDump reads each recording in perf's time order and checks
// every record against perf script -D: the same records in the same order
// (type, offset, size, time), the same text for the records perf prints
// field by field, and the same sample fields (callchain, registers, user
// stack size and offset, weight, data source, page sizes, read values).
func TestAgainstPerfDump(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			want := perfDump(t, path)
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			r.SetTimeOrder(true)
			i := 0
			samples := 0
			readAll(t, r, func(rec *Record) {
				if i >= len(want) {
					t.Fatalf("record %d (%s at %#x) beyond perf's %d", i, rec.Type, rec.Offset, len(want))
				}
				w := want[i]
				i++
				where := fmt.Sprintf("record %d (%s at %#x, perf's at %#x)", i-1, rec.Type, rec.Offset, w.off)
				if got := perfKind(rec.Type); got != w.kind {
					t.Fatalf("%s: type %s, perf has %s", where, got, w.kind)
				}
				if len(rec.Raw) != w.size {
					t.Fatalf("%s: size %#x, perf has %#x", where, len(rec.Raw), w.size)
				}
				off := rec.Offset
				if r.Header().Pipe {
					off -= pipeHeaderSize // perf counts from after the pipe header
				}
				if rec.DecompOffset < 0 && rec.Type != RecordHeaderAttr && off != w.off {
					t.Fatalf("%s: offset differs", where)
				}
				if rec.Type != RecordHeaderAttr && rec.Time() != w.time {
					t.Fatalf("%s: time %d, perf has %d", where, rec.Time(), w.time)
				}
				if line, ok := perfLine(rec); ok && line != w.line {
					t.Fatalf("%s:\n got %s\nwant %s", where, line, w.line)
				}
				if rec.Type == RecordSample {
					samples++
					got := perfDetails(rec, r.Header().Machine())
					if strings.Join(got, "\n") != strings.Join(w.details, "\n") {
						t.Fatalf("%s: sample fields differ:\n got %s\nwant %s", where,
							strings.Join(got, "\n     "), strings.Join(w.details, "\n     "))
					}
				}
			})
			if i != len(want) {
				t.Fatalf("%d records, perf has %d", i, len(want))
			}
			if samples == 0 {
				t.Fatalf("no samples")
			}
			t.Logf("%d records, %d samples equal to perf's", i, samples)
		})
	}
}

// TestEventNamesAgainstPerfScript checks that samples are matched to their
// events by ID as perf matches them: the event name and time of every
// sample equal perf script's.
func TestEventNamesAgainstPerfScript(t *testing.T) {
	for _, rc := range recordings {
		switch rc.name {
		case "two-events", "tracepoint", "pipe-dwarf", "many-fields":
		default:
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			var want []string
			for _, l := range strings.Split(perfOut(t, "script", "-G", "-i", path, "-F", "event,time", "--ns"), "\n") {
				if f := strings.Fields(l); len(f) == 2 {
					want = append(want, strings.TrimSuffix(f[1], ":")+" "+strings.TrimSuffix(f[0], ":"))
				}
			}
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			r.SetTimeOrder(true)
			var got []string
			readAll(t, r, func(rec *Record) {
				if s := rec.Sample(); s != nil {
					got = append(got, fmt.Sprintf("%s %d.%09d", rec.Attr.Name, s.Time/1e9, s.Time%1e9))
				}
			})
			if len(want) == 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("samples (time: event) differ from perf script's:\n got %d: %.400s\nwant %d: %.400s",
					len(got), strings.Join(got, " | "), len(want), strings.Join(want, " | "))
			}
		})
	}
}

// headerField returns the value of "# NAME : VALUE" in perf report
// --header-only output.
func headerField(out, name string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "# "+name); ok {
			if v, ok := strings.CutPrefix(strings.TrimLeft(v, " "), ": "); ok {
				return v, true
			}
		}
	}
	return "", false
}

// TestHeaderAgainstPerf checks the feature sections against perf report
// --header-only: host, kernel, perf version, architecture, CPU counts and
// description, memory, command line, events (name, IDs, type, sample_type,
// read_format, registers, stack size), PMU mappings, sample times,
// compression, and which features are present.
func TestHeaderAgainstPerf(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			out := perfOut(t, "report", "--header-only", "-I", "-i", path)
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			readAll(t, r, func(*Record) {}) // pipe mode: the header comes with the records
			h := r.Header()
			check := func(name, got string) {
				t.Helper()
				want, ok := headerField(out, name)
				if !ok {
					t.Errorf("perf prints no %q", name)
					return
				}
				if got != strings.TrimRight(want, " ") {
					t.Errorf("%s: got %q, perf says %q", name, got, want)
				}
			}
			check("hostname", h.Hostname)
			check("os release", h.OSRelease)
			check("perf version", h.Version)
			check("arch", h.Arch)
			check("nrcpus online", fmt.Sprint(h.NrCPUsOnline))
			check("nrcpus avail", fmt.Sprint(h.NrCPUsAvail))
			check("cpudesc", h.CPUDesc)
			check("cpuid", h.CPUID)
			check("total memory", fmt.Sprintf("%d kB", h.TotalMemKB))
			check("cmdline", strings.Join(h.Cmdline, " "))
			if h.Features.Has(FeatSampleTime) {
				us := func(ns uint64) string { return fmt.Sprintf("%d.%06d", ns/1e9, ns%1e9/1e3) }
				check("time of first sample", us(h.SampleTimeFirst))
				check("time of last sample", us(h.SampleTimeLast))
			}
			if h.Features.Has(FeatCompressed) {
				check("compressed", fmt.Sprintf("Zstd, level = %d, ratio = %d", h.Compression.Level, h.Compression.Ratio))
			}
			if h.Features.Has(FeatPMUMappings) {
				var pm []string
				for _, m := range h.PMUMappings {
					pm = append(pm, fmt.Sprintf("%s = %d", m.Name, m.Type))
				}
				want, _ := headerField(out, "pmu mappings")
				if !strings.HasPrefix(strings.TrimSpace(want), strings.Join(pm, ", ")) {
					t.Errorf("pmu mappings: got %q, perf says %q", strings.Join(pm, ", "), want)
				}
			}
			// Features perf lists as missing are exactly those we lack,
			// among those this perf knows (1 to 31).
			if missing, ok := headerField(out, "missing features"); ok {
				miss := map[string]bool{}
				for _, f := range strings.Fields(missing) {
					miss[f] = true
				}
				for f := Feature(1); f <= FeatPMUCaps; f++ {
					if h.Features.Has(f) == miss[f.String()] {
						t.Errorf("feature %s: present %v, perf lists it missing %v", f, h.Features.Has(f), miss[f.String()])
					}
				}
			}
			// Events, in order.
			var events []string
			for _, l := range strings.Split(out, "\n") {
				if e, ok := strings.CutPrefix(l, "# event : "); ok {
					events = append(events, e)
				}
			}
			if len(events) != len(h.Attrs) {
				t.Fatalf("%d events, perf prints %d", len(h.Attrs), len(events))
			}
			for i, a := range h.Attrs {
				e := events[i]
				var ids []string
				for _, id := range a.IDs {
					ids = append(ids, fmt.Sprint(id))
				}
				want := []string{
					"name = " + a.Name + ",",
					"id = { " + strings.Join(ids, ", ") + " }",
					fmt.Sprintf("type = %d,", a.Type),
					fmt.Sprintf("size = %d,", a.Size),
				}
				// perf lists the bits in an order of its own, and perf 6.1
				// has no name for TRANSACTION and leaves it out.
				if m := regexp.MustCompile(`sample_type = ([A-Z_|]+)`).FindStringSubmatch(e); m != nil {
					p := strings.Split(m[1], "|")
					g := strings.Split((a.SampleType &^ SampleTransaction).String(), "|")
					slicesSort(p)
					slicesSort(g)
					if strings.Join(p, "|") != strings.Join(g, "|") {
						t.Errorf("event %d: sample_type %s, perf says %s", i, a.SampleType, m[1])
					}
				} else if a.SampleType&^SampleTransaction != 0 {
					t.Errorf("event %d: perf prints no sample_type", i)
				}
				if a.ReadFormat != 0 {
					want = append(want, "read_format = "+a.ReadFormat.String())
				}
				if a.SampleRegsUser != 0 {
					want = append(want, fmt.Sprintf("sample_regs_user = %#x", a.SampleRegsUser))
				}
				if a.SampleRegsIntr != 0 {
					want = append(want, fmt.Sprintf("sample_regs_intr = %#x", a.SampleRegsIntr))
				}
				if a.SampleStackUser != 0 {
					want = append(want, fmt.Sprintf("sample_stack_user = %d", a.SampleStackUser))
				}
				if a.SampleIDAll() {
					want = append(want, "sample_id_all = 1")
				}
				for _, w := range want {
					if !strings.Contains(e+",", w) {
						t.Errorf("event %d: perf's %q lacks %q", i, e, w)
					}
				}
			}
		})
	}
}

// TestBuildIDsAgainstPerf compares the build-ID table with perf
// buildid-list.
func TestBuildIDsAgainstPerf(t *testing.T) {
	for _, rc := range recordings {
		if rc.pipe {
			continue // perf buildid-list reads no table from a pipe
		}
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			var want []string
			for _, l := range strings.Split(perfOut(t, "buildid-list", "-i", path), "\n") {
				if l != "" {
					want = append(want, l)
				}
			}
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			h := r.Header()
			if !h.Features.Has(FeatBuildID) {
				// perf lists the files of the MMAP2 records, with the build
				// IDs that the records carry (--buildid-mmap) or none.
				have := map[string]bool{}
				readAll(t, r, func(rec *Record) {
					if m := rec.Mmap(); m != nil && m.HasBuildID {
						name := strings.TrimSuffix(string(m.Filename), "_text") // [kernel.kallsyms]_text
						have[fmt.Sprintf("%x %s", m.BuildID, name)] = true
					}
				})
				for _, w := range want {
					if !strings.HasPrefix(w, " ") && !have[w] {
						t.Errorf("perf lists %q, not among the MMAP2 build IDs %v", w, have)
					}
				}
				return
			}
			var got []string
			for _, b := range h.BuildIDs {
				got = append(got, fmt.Sprintf("%x %s", b.ID, b.Filename))
			}
			slicesSort(got)
			slicesSort(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("build IDs:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestStreamEqualsMapped reads pipe-format recordings both mapped and as
// a stream (bufio over a reader that is not an *os.File): the same records,
// byte for byte, at the same offsets.
func TestStreamEqualsMapped(t *testing.T) {
	for _, rc := range recordings {
		if !rc.pipe {
			continue
		}
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			for _, ordered := range []bool{false, true} {
				m, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				s, err := NewReader(struct{ io.Reader }{f})
				if err != nil {
					t.Fatal(err)
				}
				m.SetTimeOrder(ordered)
				s.SetTimeOrder(ordered)
				n := 0
				for {
					a, errA := m.Next()
					b, errB := s.Next()
					if errA != nil || errB != nil {
						if errA != io.EOF || errB != io.EOF {
							t.Fatalf("record %d: mapped %v, streamed %v", n, errA, errB)
						}
						break
					}
					if a.Offset != b.Offset || a.DecompOffset != b.DecompOffset || string(a.Raw) != string(b.Raw) {
						t.Fatalf("record %d: mapped %s at %#x/%#x, streamed %s at %#x/%#x", n, a.Type, a.Offset, a.DecompOffset, b.Type, b.Offset, b.DecompOffset)
					}
					n++
				}
				m.Close()
				s.Close()
				f.Close()
				if n == 0 {
					t.Fatal("no records")
				}
			}
		})
	}
}

// TestLivePipe reads perf record -o - as it runs.
func TestLivePipe(t *testing.T) {
	needPerf(t)
	exe := testprog.Build(t, "testdata/workload.c", "-O1", "-g")
	cmd := exec.Command("perf", "record", "-q", "-o", "-", "-z", "--call-graph", "dwarf", "--", exe, "50")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetTimeOrder(true)
	samples, last := 0, uint64(0)
	readAll(t, r, func(rec *Record) {
		if s := rec.Sample(); s != nil {
			samples++
			if s.Time < last {
				t.Fatalf("sample at %d after %d", s.Time, last)
			}
			last = s.Time
			if s.RegsUser.ABI != RegsABINone {
				if _, ok := s.RegsUser.Get(PerfRegX86SP); !ok && r.Header().Machine() == arch.AMD64 {
					t.Fatal("no SP in user registers")
				}
			}
		}
	})
	if err := cmd.Wait(); err != nil {
		skipOrFail(t, err)
	}
	if samples == 0 || r.Header().Hostname == "" || len(r.Header().Attrs) == 0 {
		t.Fatalf("%d samples, hostname %q, %d events", samples, r.Header().Hostname, len(r.Header().Attrs))
	}
}

// TestFileOrderHasTheSameRecords checks that time order only reorders:
// the same records, each once.
func TestFileOrderHasTheSameRecords(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			count := func(ordered bool) map[string]int {
				r, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				r.SetTimeOrder(ordered)
				m := map[string]int{}
				readAll(t, r, func(rec *Record) { m[fmt.Sprintf("%d/%d/%x", rec.Offset, rec.DecompOffset, rec.Raw)]++ })
				return m
			}
			a, b := count(false), count(true)
			if len(a) != len(b) {
				t.Fatalf("%d distinct records in file order, %d in time order", len(a), len(b))
			}
			for k, n := range a {
				if b[k] != n {
					t.Fatalf("record %.40s: %d in file order, %d in time order", k, n, b[k])
				}
			}
		})
	}
}

func slicesSort(s []string) { sort.Strings(s) }

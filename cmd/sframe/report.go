package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/hugeheap"
	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/stackprof"
	"github.com/sframekit/sframekit/unwind"
)

func init() {
	register("report", "unwind a perf record --call-graph dwarf recording into a profile", runReport)
}

const reportUsage = `[FILE | -i FILE]

Reads FILE (default perf.data; - for standard input, which must be in
perf's pipe format: perf record -o -; -i FILE names it as perf report
does), a recording made with
perf record --call-graph dwarf, and unwinds each sample's user stack
from its registers and stack copy: SFrame, then CFI (.eh_frame, else
.debug_frame, a separate debug file's too), then frame pointers, per
frame, over the files the recording mapped (found at their paths, or
under --symfs, or in perf's build-ID cache ~/.debug; a file whose build
ID is not the recorded one is not used, nor one without a build ID
replaced or modified since the recording). The walk
ends cleanly where the stack copy ends. Kernel frames come from the
sample's callchain, named from perf's copy of the recorded kernel's
kallsyms (~/.debug/[kernel.kallsyms]/BUILDID/kallsyms), or from
/proc/kallsyms when the recording is from the running kernel, or from
--kallsyms FILE; else they are shown as addresses. Code that a JIT
compiler made (anonymous executable memory, which perf names
/tmp/perf-PID.map) is named from that perf map, as perf names it (node
--perf-basic-prof, python3 -X perf, Java agents write one), under
--symfs or at its path, and from the jitdump files the process mapped
(node --perf-prof), which perf reads only after perf inject --jit.

Formats (--format):
  pprof   (default) a pprof profile, -o FILE (default profile.pb.gz):
          sample types samples/count and, per event, cpu/nanoseconds for
          time-based events (cpu-clock, task-clock; from the period) or
          EVENT/count; mappings with file names and build IDs; functions
          (C++ and Rust demangled), with --source lines and with
          --inlines inlined calls as pprof's inline lines; labels pid, thread (the thread
          id) and thread_name. Open it with go tool pprof.
  folded  one line per distinct stack, "comm;outer;...;inner count", as
          flamegraph.pl, inferno and speedscope read (names as perf
          script shows them; with --inlines inlined calls as frames of
          their own). Of a recording of several events, the samples of
          one, as stackcollapse-perf.pl keeps them: the first event's
          (pprof's default sample type), or --event NAME's (as perf
          script names it, or as the pprof sample type does); a line on
          standard error says how many samples of the others were left
          out
  text    each sample as perf script -F comm,tid,time,ip,sym,dso
          --no-inline prints it, so that the two can be compared with diff
          (with --inlines, as perf script prints it without --no-inline,
          its default where the files have DWARF: the inlined calls, and
          a function whose DWARF name is not its symbol's, a clone such
          as f.constprop.0, as "f (inlined)")

FILE may be a perf.data directory (perf record --threads): its header
file and its data.N files of records are read as perf script reads them,
the records of all merged in time order.

folded and text go to standard output unless -o is given. A summary
goes to standard error: samples read, how their stacks were unwound
(SFrame only, some CFI, some frame pointers), why walks stopped and
where, lost samples. On a terminal, a file that takes more than a
second to read shows a progress bar there.

A signal (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) ends the reading, also of a
pipe waiting for perf: the output has the samples read before, a line
on standard error says how many, and the exit status is that of a
program the signal killed (130 for Ctrl-C). A second signal ends sframe
at once.

Exit status: 0 when every record was read (a file cut, or damaged,
after its records, in the feature sections perf record writes last,
gets a one-line warning: no sample is missing); 1 when the recording
cannot be read, or is cut or damaged among its records (perf record
killed, a file copied in part): the output then has every sample
before the damage, and the error says which bytes of records were lost,
so that a pipeline (set -o pipefail) does not take the profile for the
whole recording; 2 for a usage error.`

func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", reportUsage, stdout, stderr)
	format := fs.String("format", "pprof", "output `FORMAT`: pprof, folded or text")
	output := fs.String("output", "", "write to `FILE` (- for standard output; default profile.pb.gz for pprof, else standard output)")
	fs.alias("o", "output")
	pids := fs.String("pid", "", "only the samples of the processes `PIDS` (comma-separated)")
	tids := fs.String("tid", "", "only the samples of the threads `TIDS` (comma-separated)")
	comms := fs.String("comm", "", "only the samples of the threads named `NAMES` (comma-separated)")
	maxDepth := fs.Int("max-depth", unwind.DefaultMaxDepth, "unwind at most `N` user frames (and show at most N kernel frames)")
	inputFlag := fs.String("input", "", "read the recording `FILE` (as perf report -i; the same as the operand)")
	fs.alias("i", "input")
	// -s is perf report's --sort, which this command has no use for: a
	// flag of its own only to say so, not an unknown one.
	perfSort := fs.String("sort", "", "perf report's sort `KEYS`: not supported (the profile is sorted by the viewer)")
	fs.alias("s", "sort")
	source := fs.Bool("source", false, "add each frame's source file and line, from DWARF")
	inlines := fs.Bool("inlines", false, "add the calls inlined at each frame, from DWARF (implies --source)")
	noDemangle := fs.Bool("no-demangle", false, "keep C++ and Rust symbol names as they are in the symbol table")
	symfs := fs.String("symfs", "", "look for the recorded files under `DIR` (a copy of the recording machine's files)")
	kallsyms := fs.String("kallsyms", "", "name kernel frames from this kallsyms `FILE` (default: perf's copy of the recorded kernel's, or /proc/kallsyms of the same kernel)")
	event := fs.String("event", "", "folded: the stacks of event `NAME`'s samples (default the first event's)")
	quiet := fs.Bool("quiet", false, "print no summary")
	fs.alias("q", "quiet")
	operands, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(operands) > 1 || len(operands) == 1 && *inputFlag != "":
		return fs.fail("one recording at a time")
	case fs.isSet("sort") || fs.isSet("s"):
		return fs.fail("--sort %q: not supported; pprof and flame graph viewers sort the profile (--source and --inlines add lines and inlined calls)", *perfSort)
	case *format != "pprof" && *format != "folded" && *format != "text":
		return fs.fail("unknown format %q (pprof, folded or text)", *format)
	case *maxDepth <= 0:
		return fs.fail("--max-depth must be positive")
	case *event != "" && *format != "folded":
		return fs.fail("--event is for --format folded (a pprof profile has each event's sample type; go tool pprof -sample_index chooses)")
	}
	var filter perfunwind.Filter
	var err error
	if filter.Pids, err = parseIDs(*pids); err != nil {
		return fs.fail("bad --pid: %v", err)
	}
	if filter.Tids, err = parseIDs(*tids); err != nil {
		return fs.fail("bad --tid: %v", err)
	}
	if *comms != "" {
		filter.Comms = map[string]bool{}
		for _, c := range strings.Split(*comms, ",") {
			filter.Comms[c] = true
		}
	}
	input := *inputFlag
	if input == "" {
		input = "perf.data"
	}
	if len(operands) == 1 {
		input = operands[0]
	}
	out := *output
	if out == "" && *format == "pprof" {
		out = "profile.pb.gz"
	}

	// The heap this command touches (tens of MB) in 2 MiB pages: on a
	// virtual machine, faulting it in 4 KiB at a time cost a fifth of
	// the run (but not where the host takes free memory back: see
	// hugeheap).
	hugeheap.Reserve(32 << 20)

	// A signal (Ctrl-C, a closed terminal) ends the reading, and what
	// was read is written out: at the next record, or at once when the
	// reading waits on a pipe.
	var stop atomic.Bool
	var pipe *os.File // a pipe or FIFO read through the poller, or nil
	var pipeMu sync.Mutex
	in := catchInterrupts(func(syscall.Signal) {
		stop.Store(true)
		pipeMu.Lock()
		if pipe != nil {
			pipe.SetReadDeadline(time.Unix(1, 0))
		}
		pipeMu.Unlock()
	}, nil)
	defer in.Stop()
	p, err := openPipe(input)
	if err != nil {
		fs.fileError(input, err)
		return 1
	}
	if p != nil {
		defer p.close()
		pipeMu.Lock()
		pipe = p.f
		if stop.Load() {
			pipe.SetReadDeadline(time.Unix(1, 0))
		}
		pipeMu.Unlock()
	}
	var r *perfdata.Reader
	var size int64
	switch {
	case p != nil:
		r, err = perfdata.NewReader(p.f)
	case input == "-":
		r, err = perfdata.NewReader(stdin)
	default:
		st, serr := os.Stat(input)
		if serr == nil && st.Mode().IsRegular() {
			size = st.Size() // for the progress bar
		}
		r, err = perfdata.Open(input)
	}
	if sig := in.Signal(); err != nil && sig != 0 {
		fmt.Fprintf(stderr, "sframe report: interrupted by %s before the recording's header: nothing written\n", signalName(sig))
		return exitSignaled(sig)
	}
	if perfdata.KindOf(err) == perfdata.ErrNeedSeek {
		// perfdata's message names its own functions: say what to do.
		fmt.Fprintf(stderr, "sframe report: %s: a perf.data file, which cannot be read from a pipe: give its path, or record in pipe format (perf record -o -)\n", displayName(input))
		return 1
	}
	if err != nil {
		fs.fileError(input, err)
		return 1
	}
	defer r.Close()
	if h := r.Header(); *event != "" && len(h.Attrs) > 0 {
		// A file's events are known: no need to read it for nothing.
		// (A pipe's come with its first records: checked at the end.)
		if _, err := stackprof.FindEvent(h.Attrs, *event); err != nil {
			return fs.fail("--event: %s: %v", displayName(input), err)
		}
	}
	// The rest of the options are the zero Options' (what a library user
	// gets): from the recording's header, which a pipe delivers with its
	// first records, and the file.
	opts := perfunwind.Options{SymFS: *symfs, MaxDepth: *maxDepth, Kallsyms: *kallsyms}
	sess, err := perfunwind.NewSession(opts)
	if err != nil {
		fs.fileError(input, err)
		return 1
	}
	defer sess.Close()
	res := perfunwind.NewResolver(sess)
	defer res.Close()
	res.Demangle, res.Source, res.Inlines = !*noDemangle, *source || *inlines, *inlines
	// A pprof profile names functions by Name only.
	res.NameOnly = *format == "pprof"

	w, err := createOutput(out, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "sframe report: %v\n", err)
		return 1
	}
	var sink func(*perfunwind.Stack) error
	var finish func() error
	switch *format {
	case "text":
		sw := stackprof.NewScriptWriter(w, res)
		sink, finish = sw.Write, sw.Flush
	case "folded":
		fw := stackprof.NewFolded(res)
		sink = fw.Add
		finish = func() error {
			// The events are known now, a pipe's too.
			note := stderr
			if *quiet {
				note = io.Discard
			}
			if err := keepEvent(fw, r.Header().Attrs, *event, note); err != nil {
				return err
			}
			return fw.Write(w)
		}
	case "pprof":
		pb := stackprof.NewPerfBuilder(res, r.Header())
		sink = pb.Add
		finish = func() error {
			p, err := pb.Profile()
			if err != nil {
				return err
			}
			return p.Write(w)
		}
	}

	var progress atomic.Int64
	stopBar := startProgress(stderr, size, &progress)
	// The writer takes the other processor while the samples after are
	// unwound; it uses the Resolver, never the Session.
	perr := sess.Process(r, perfunwind.ProcessOptions{Filter: filter, Progress: func(off int64) { progress.Store(off) }, Pipeline: true, Stop: &stop}, sink)
	stopBar()
	sig := in.Signal()
	if sig != 0 {
		// The error is the interruption's (ErrStopped, or the read
		// of a pipe cut short): what came before is the output.
		perr = nil
	}
	var werr *writeError
	if errors.As(perr, &werr) {
		w.Abort()
		fmt.Fprintf(stderr, "sframe report: %v\n", werr.err)
		return 1
	}
	// What could be read is written out, then the error that ended it.
	err = finish()
	if err == nil {
		err = w.Commit()
	} else {
		w.Abort()
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe report: %v\n", err)
		return 1
	}
	if !*quiet {
		perfunwind.WriteSummary(stderr, sess)
	}
	if sig != 0 {
		fmt.Fprintf(stderr, "sframe report: interrupted by %s: the output has the %d samples read before\n", signalName(sig), sess.Stats.Read)
		return exitSignaled(sig)
	}
	if perr != nil {
		if h := r.Header(); h.FeatureErr != nil && errors.Is(perr, h.FeatureErr) {
			// Every record was read: only what perf record writes after
			// them is missing (build IDs, host and CPU descriptions).
			fmt.Fprintf(stderr, "sframe report: %s: warning: every sample was read, but not the feature sections after them: %v\n", displayName(input), withoutPath(input, perr))
			return 0
		}
		fmt.Fprintf(stderr, "sframe report: %s: %v (the output has the %d samples read before)\n", displayName(input), withoutPath(input, perr), sess.Stats.Read)
		return 1
	}
	return 0
}

// keepEvent makes fw keep the samples of one event of attrs: the one
// called name, or the default one, saying so on stderr when samples of
// others are left out.
func keepEvent(fw *stackprof.Folded, attrs []*perfdata.Attr, name string, stderr io.Writer) error {
	keep := stackprof.DefaultEvent(attrs)
	if name != "" {
		var err error
		if keep, err = stackprof.FindEvent(attrs, name); err != nil {
			return fmt.Errorf("--event: %v", err)
		}
	}
	fw.KeepEvent(keep)
	if name != "" {
		return nil
	}
	var left uint64
	var others []string
	for i, a := range attrs {
		if n := fw.EventCounts()[i]; i != keep && n > 0 {
			left += n
			others = append(others, stackprof.EventLabel(a))
		}
	}
	if left > 0 && keep >= 0 {
		fmt.Fprintf(stderr, "sframe report: folded: the %d samples of %s, the first event; left out %d of %s (--event NAME chooses)\n",
			fw.EventCounts()[keep], stackprof.EventLabel(attrs[keep]), left, strings.Join(others, ", "))
	}
	return nil
}

// pollable is an input read through Go's poller, whose reads a deadline
// can cut short: a pipe or FIFO.
type pollable struct {
	f     *os.File
	close func()
}

// openPipe opens the input path ("-" standard input) when it is a pipe
// or FIFO, to be read through the poller, so that a signal can end a
// read that waits for a writer; nil when it is not one (or is a reader a
// test gave as stdin).
func openPipe(path string) (*pollable, error) {
	if path == "-" {
		if f, ok := stdin.(*os.File); ok && f == os.Stdin {
			return pollStdin(), nil
		}
		return nil, nil
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Type() != os.ModeNamedPipe {
		return nil, nil // perfdata.Open says what is wrong
	}
	// os.Open reads a FIFO through the poller.
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &pollable{f: f, close: func() { f.Close() }}, nil
}

// pollStdin returns standard input, when it is a pipe or FIFO, as a file
// read through the poller (a duplicate of descriptor 0 made
// non-blocking; close restores blocking reads), or nil.
func pollStdin() *pollable {
	var st unix.Stat_t
	if unix.Fstat(0, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	fd, err := unix.Dup(0)
	if err != nil {
		return nil
	}
	unix.CloseOnExec(fd)
	if unix.SetNonblock(fd, true) != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "<stdin>")
	return &pollable{f: f, close: func() {
		f.Close()
		unix.SetNonblock(0, false) // the same open file as descriptor 0
	}}
}

// parseIDs parses a comma-separated list of process or thread ids.
func parseIDs(s string) (map[uint32]bool, error) {
	if s == "" {
		return nil, nil
	}
	ids := map[uint32]bool{}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		ids[uint32(n)] = true
	}
	return ids, nil
}

// writeError marks an error of the output, which ends the report at once.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// output is where a report goes (internal/outfile: standard output, a
// device or FIFO written in place, or a regular file replaced on Commit,
// so that a failed report leaves the old file). It marks its write
// errors (writeError), which end the report at once.
type output struct {
	f   *outfile.File
	err error
}

// createOutput opens path for writing ("-" or "" standard output).
func createOutput(path string, stdout io.Writer) (*output, error) {
	if path == "" {
		path = "-"
	}
	f, err := outfile.Create(path, 0o644, stdout)
	if err != nil {
		return nil, err
	}
	return &output{f: f}, nil
}

// Write writes to the output, remembering the first error.
func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.f.Write(p)
	if err != nil {
		o.err = &writeError{err}
	}
	return n, o.err
}

// Commit finishes the output (see outfile.File.Commit).
func (o *output) Commit() error {
	if o.err != nil {
		o.f.Abort()
		return o.err.(*writeError).err
	}
	return o.f.Commit()
}

// Abort drops the output: a temporary file is removed.
func (o *output) Abort() { o.f.Abort() }

// startProgress draws a progress bar on w, when w is a terminal and the
// input's size is known, once reading has taken a second; the returned
// function stops it and clears the line.
func startProgress(w io.Writer, size int64, pos *atomic.Int64) func() {
	f, ok := w.(*os.File)
	if !ok || size <= 0 || !isTerminal(f) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-done:
			return
		case <-time.After(time.Second):
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p := min(max(float64(pos.Load())/float64(size), 0), 1)
			const width = 40
			n := int(p * width)
			fmt.Fprintf(f, "\r[%s%s] %3.0f%% of %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*p, humanBytes(size))
			select {
			case <-done:
				fmt.Fprintf(f, "\r%s\r", strings.Repeat(" ", width+24))
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// humanBytes formats a size as "12.3 MB".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KB", n>>10)
}

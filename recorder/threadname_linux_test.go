package recorder

import (
	"encoding/binary"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfevent"
	"github.com/sframekit/sframekit/perfunwind"
)

// TestNewThreadSamplesBeforeItsFork feeds the recorder the real records
// of a process that starts thread "late", with the thread's first
// samples read before its FORK and COMM records, as a pass over the rings
// reads them when the thread runs on one CPU and its creator on another
// (std::async and thread pools: a third of the stacks of a short run of
// such a program were named ":TID" in sframe record's folded output,
// while perf script names them). Those samples must wait for the records
// written before them: every stack of the thread is named as perf names
// it, by its creator's name until its COMM and "late" after.
func TestNewThreadSamplesBeforeItsFork(t *testing.T) {
	needPerf(t)
	exe := buildProg(t, "-O2", "-Wa,--gsframe")
	prog := testprog.StartCmd(t, exec.Command(exe, "late", "120"))
	pid := prog.PID()
	var opts Options
	po, _ := opts.perfOptions(arch.Host())
	po.PIDs = []int{pid}
	s, err := perfevent.Open(po)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Enable(); err != nil {
		t.Fatal(err)
	}
	// As Record does for a process given by PID: what it has before the
	// thread starts (twice: sess2 for the records without the thread's).
	seeded := func() *perfunwind.Session {
		sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		if err := sess.SeedProcess(pid); err != nil {
			t.Fatal(err)
		}
		return sess
	}
	sess, sess2 := seeded(), seeded()
	io.WriteString(prog.Stdin, "spawn\n")

	var attrs []*perfdata.Attr
	for _, a := range s.Attrs() {
		attrs = append(attrs, a.Attr)
	}
	dec := perfdata.NewDecoder(binary.NativeEndian, attrs)
	var rec perfdata.Record
	var recs, threadRecs [][]byte // threadRecs: the new thread's FORK and COMMs
	var late uint32
	samples := 0
	deadline := time.AfterFunc(time.Minute, s.Stop)
	defer deadline.Stop()
	err = s.Run(func(r *perfevent.Record) error {
		if r.Type == perfdata.RecordFinishedRound {
			return nil
		}
		raw := append([]byte(nil), r.Raw...)
		if err := dec.Decode(&rec, raw); err != nil {
			return err
		}
		switch {
		case rec.Type == perfdata.RecordFork && rec.Task() != nil && rec.Task().Pid == uint32(pid) && rec.Task().Tid != uint32(pid) && late == 0:
			late = rec.Task().Tid
			threadRecs = append(threadRecs, raw)
			return nil
		case rec.Comm() != nil && late != 0 && rec.Comm().Tid == late:
			threadRecs = append(threadRecs, raw)
			return nil
		case rec.Type == perfdata.RecordSample && late != 0 && rec.Sample() != nil && rec.Sample().Tid == late:
			if samples++; samples == 100 {
				s.Stop()
			}
		}
		recs = append(recs, raw)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if samples < 100 {
		t.Fatalf("%d samples of the new thread in a minute, want 100", samples)
	}

	r := newRecorder(sess, arch.Host(), attrs, -1, 64<<20)
	// The thread's samples first, then the records that name it, then
	// the passes that put them in time order.
	feedRecords(t, r, dec, recs)
	feedRecords(t, r, dec, threadRecs)
	for range 3 {
		r.round()
	}
	names := map[string]int64{}
	for _, st := range r.order {
		if st.tid == late {
			names[st.comm] += st.n
		}
	}
	for name, n := range names {
		if name != "recprog" && name != "late" {
			t.Errorf("%d samples of thread %d named %q, want recprog (its creator's name) or late", n, late, name)
		}
	}
	if names["late"] == 0 {
		t.Errorf("no sample of thread %d named late: %v", late, names)
	}
	if r.kept != 0 || len(r.queue) != 0 {
		t.Errorf("after the passes: %d bytes kept, %d events queued; want none", r.kept, len(r.queue))
	}

	// A thread that no record names (one started while Record read
	// /proc): once its first samples have waited their turn, its next
	// ones are unwound at once, named ":TID" as perf script names it.
	r = newRecorder(sess2, arch.Host(), attrs, -1, 64<<20)
	half := len(recs) / 2
	feedRecords(t, r, dec, recs[:half])
	r.round()
	r.round()
	feedRecords(t, r, dec, recs[half:])
	waiting := 0
	for _, e := range r.queue {
		if e.kind != evSample {
			continue
		}
		if err := dec.Decode(&rec, e.raw); err != nil {
			t.Fatal(err)
		}
		if rec.Sample().Tid == late {
			waiting++
		}
	}
	if waiting != 0 {
		t.Errorf("%d samples of the thread no record names wait again, want none", waiting)
	}
}

package recorder

import (
	"cmp"
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
)

// TestWaitingSamplesPollFast checks the recorder's passes over the rings:
// while samples wait for their process's records (here: a process the
// session does not know yet), the reader is asked to pass every fastPoll;
// once they are unwound and none waits, to go back to the ring's wakeups;
// and the copies of samples that waited are reused for the next ones
// instead of taking fresh heap.
func TestWaitingSamplesPollFast(t *testing.T) {
	recs, attrs, pid := liveRecords(t, Options{})
	sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// Processes given by PID are known from the start: the passes start
	// slow, and stay slow while no sample waits.
	idle := newRecorder(sess, arch.Host(), attrs, -1, 64<<20)
	var idlePolls []time.Duration
	idle.poll = func(d time.Duration) { idlePolls = append(idlePolls, d) }
	for range 3 {
		idle.round()
	}
	if len(idlePolls) != 0 || idle.fast {
		t.Fatalf("no command, no sample: polls %v, fast %v; want slow, unchanged", idlePolls, idle.fast)
	}

	// A command: Record starts the passes fast.
	r := newRecorder(sess, arch.Host(), attrs, -1, 64<<20)
	var polls []time.Duration
	r.poll = func(d time.Duration) { polls = append(polls, d) }
	r.waitFirst, r.fast = true, true
	dec := perfdata.NewDecoder(binary.NativeEndian, attrs)
	var rec perfdata.Record
	var samples [][]byte
	for _, raw := range recs {
		if err := dec.Decode(&rec, raw); err != nil {
			t.Fatal(err)
		}
		if rec.Type == perfdata.RecordSample {
			samples = append(samples, raw)
		}
	}
	if len(samples) < 40 {
		t.Fatalf("%d samples, want 40", len(samples))
	}
	// In time order, as the passes below take them: the rings of
	// different CPUs were read one after the other.
	timeOf := func(raw []byte) uint64 {
		if err := dec.Decode(&rec, raw); err != nil {
			t.Fatal(err)
		}
		return rec.Time()
	}
	slices.SortStableFunc(samples, func(a, b []byte) int { return cmp.Compare(timeOf(a), timeOf(b)) })

	// Before any sample, passes stay fast (a command's first samples
	// always wait for its exec's records).
	r.round()
	if len(polls) != 0 || !r.fast {
		t.Fatalf("before any sample: polls %v, fast %v; want fast, unchanged", polls, r.fast)
	}
	// Samples of a process not known yet wait, copied: still fast.
	feedRecords(t, r, dec, samples[:10])
	if r.stats.Deferred != 10 || r.kept == 0 {
		t.Fatalf("deferred %d, kept %d bytes; want the 10 samples of an unknown process kept", r.stats.Deferred, r.kept)
	}
	r.round()
	if len(polls) != 0 || !r.fast {
		t.Fatalf("samples waiting: polls %v, fast %v; want fast", polls, r.fast)
	}
	// The process becomes known (as its MMAP records would make it); two
	// passes later the waiting samples are unwound, and the reader goes
	// back to the ring's wakeups.
	if err := sess.SeedProcess(pid); err != nil {
		t.Fatal(err)
	}
	r.round()
	if r.kept != 0 || len(polls) != 1 || polls[0] != 0 || r.fast {
		t.Fatalf("after the samples were unwound: kept %d, polls %v, fast %v; want none kept and one poll(0)", r.kept, polls, r.fast)
	}
	if len(r.free) != 10 {
		t.Fatalf("%d copies kept for reuse, want 10", len(r.free))
	}
	// Samples of the known process are unwound at once: the passes stay
	// slow.
	feedRecords(t, r, dec, samples[10:20])
	r.round()
	if r.stats.Deferred != 10 || len(polls) != 1 {
		t.Fatalf("known process: deferred %d, polls %v; want 10 and no new poll", r.stats.Deferred, polls)
	}
	// A new wait (an exec: the process's records are held) copies into
	// the buffers of the samples that waited before, and makes passes
	// fast again.
	reused := map[*byte]bool{}
	for _, b := range r.free {
		reused[&b[:1][0]] = true
	}
	r.heldProc[uint32(pid)]++
	feedRecords(t, r, dec, samples[20:25])
	r.heldProc[uint32(pid)]--
	delete(r.heldProc, uint32(pid))
	n := 0
	for _, e := range r.queue {
		if e.kind == evSample && reused[&e.raw[:1][0]] {
			n++
		}
	}
	if n != 5 || len(r.free) != 5 {
		t.Fatalf("%d of 5 waiting samples in reused buffers, %d left for reuse; want 5 and 5", n, len(r.free))
	}
	r.round()
	if len(polls) != 2 || polls[1] != fastPoll || !r.fast {
		t.Fatalf("samples waiting again: polls %v, fast %v; want poll(%v)", polls, r.fast, fastPoll)
	}
	r.round()
	r.round()
	if r.kept != 0 || len(polls) != 3 || polls[2] != 0 {
		t.Fatalf("end: kept %d, polls %v; want none kept and poll(0)", r.kept, polls)
	}
	if got := r.stats.OnCPU; got != 25 {
		t.Errorf("%d samples counted, want 25", got)
	}
}

// feedRecords hands the raw records of batch, decoded by dec, to r in
// turn, as the rings' reader does.
func feedRecords(t *testing.T, r *recorder, dec *perfdata.Decoder, batch [][]byte) {
	t.Helper()
	var rec perfdata.Record
	for _, raw := range batch {
		if err := dec.Decode(&rec, raw); err != nil {
			t.Fatal(err)
		}
		r.record(&rec)
	}
}

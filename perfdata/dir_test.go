//go:build unix

package perfdata

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// threadsRecording returns the perf record --threads recording (a
// directory) and the paths of its data.N files that hold records, the
// largest first (a CPU without events leaves its file empty).
func threadsRecording(t *testing.T) (string, []string) {
	t.Helper()
	var rc recording
	for _, r := range recordings {
		if r.name == "threads" {
			rc = r
		}
	}
	dir := record(t, rc)
	names, err := filepath.Glob(filepath.Join(dir, "data.*"))
	size := func(name string) int64 {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	names = slices.DeleteFunc(names, func(n string) bool { return size(n) == 0 })
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(size(b), size(a)) })
	if err != nil || len(names) == 0 {
		t.Fatalf("%s: no data.N files with records (%v)", dir, err)
	}
	return dir, names
}

// copyDir copies the files of the directory src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "perf.data")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

// readDirCount reads every record of the recording at path in time order,
// returning how many there were, how many were samples, and the error
// that ended the reading (nil at io.EOF).
func readDirCount(t *testing.T, path string, during func()) (recs, samples int, err error) {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetTimeOrder(true)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, samples, nil
		}
		if err != nil {
			return recs, samples, err
		}
		recs++
		if rec.Type == RecordSample {
			samples++
		}
		if recs == 50 && during != nil {
			during()
		}
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestDirectoryHostile: a perf.data directory whose data.N names include
// a FIFO, a device, a directory and an empty file (left out, as perf
// leaves them out, and never opened: a FIFO would block), a symbolic link
// to a data.N file (followed, as perf follows it) and thousands of
// files, read with a bounded number of files open at once.
func TestDirectoryHostile(t *testing.T) {
	src, names := threadsRecording(t)
	wantRecs, wantSamples, err := readDirCount(t, src, nil)
	if err != nil || wantSamples == 0 {
		t.Fatalf("%d samples, %v", wantSamples, err)
	}
	dir := copyDir(t, src)
	if err := syscall.Mkfifo(filepath.Join(dir, "data.fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"data.null": "/dev/null", "data.link": filepath.Base(names[0])} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "data.sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data.empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The first record of a data.N file, in 3000 more files.
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	one := b[:binary.LittleEndian.Uint16(b[6:])]
	const many = 3000
	for i := range many {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("data.%d", 1000+i)), one, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := openFiles(t)
	var during int
	recs, samples, err := readDirCount(t, dir, func() { during = openFiles(t) })
	if err != nil {
		t.Fatal(err)
	}
	oneSample := 0
	if RecordType(binary.LittleEndian.Uint32(one)) == RecordSample {
		oneSample = 1
	}
	// The link adds the records of the file it names again.
	if samples != wantSamples+many*oneSample+countSamplesRaw(t, b) || recs < wantRecs+many {
		t.Errorf("%d records, %d samples; want %d+%d records, %d+%d+%d samples", recs, samples, wantRecs, many, wantSamples, many*oneSample, countSamplesRaw(t, b))
	}
	// The header file, the one data.N file being read, and what the
	// runtime opens besides.
	if during > before+2 {
		t.Errorf("%d files open while reading, %d before", during, before)
	}
}

// countSamplesRaw counts the SAMPLE records of b, the records of a
// data.N file.
func countSamplesRaw(t *testing.T, b []byte) int {
	n := 0
	for len(b) >= recordHeaderSize {
		size := int(binary.LittleEndian.Uint16(b[6:]))
		if size < recordHeaderSize || size > len(b) {
			t.Fatalf("bad record in a data.N file")
		}
		if RecordType(binary.LittleEndian.Uint32(b)) == RecordSample {
			n++
		}
		b = b[size:]
	}
	return n
}

// TestDirectoryCut: a data.N file cut inside a record gives the records
// before the cut, then an error naming the file, the offset and what was
// lost; a data.N file replaced by a FIFO after the listing is refused,
// not opened.
func TestDirectoryCut(t *testing.T) {
	src, names := threadsRecording(t)
	dir := copyDir(t, src)
	cut := filepath.Join(dir, filepath.Base(names[0]))
	st, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	at := st.Size()/2 + 3
	if err := os.Truncate(cut, at); err != nil {
		t.Fatal(err)
	}
	_, samples, err := readDirCount(t, dir, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrTruncated || e.File != filepath.Base(cut) || e.Off >= at || samples == 0 {
		t.Fatalf("%d samples, error %v; want ErrTruncated in %s before %#x", samples, err, filepath.Base(cut), at)
	}
	t.Log(err)

	// Replaced after the listing: Open lists the files, the first Next
	// reads the header file's records, and the FIFO's turn comes later.
	dir = copyDir(t, src)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetTimeOrder(true)
	for _, n := range names {
		p := filepath.Join(dir, filepath.Base(n))
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, err := r.Next()
		if err == io.EOF {
			t.Fatal("read to the end, the data.N files being FIFOs")
		}
		if err != nil {
			if !errors.As(err, &e) || e.File == "" {
				t.Fatalf("%v: want an *Error naming a data.N file", err)
			}
			break
		}
	}
}

// TestDirectoryVersion: a header file without DIR_FORMAT is read alone,
// as perf reads it; a version other than 1 is refused.
func TestDirectoryVersion(t *testing.T) {
	o := binary.LittleEndian
	data := synthData(o)
	// The records of the header file, and of data.0 too.
	single := 0
	for _, tc := range []struct {
		feats map[Feature][]byte
		ok    bool
	}{
		{map[Feature][]byte{FeatHostname: perfString(o, "h")}, true},
		{map[Feature][]byte{FeatDirFormat: (&enc{o: o}).u64(1).b}, true},
		{map[Feature][]byte{FeatDirFormat: (&enc{o: o}).u64(2).b}, false},
	} {
		dir := filepath.Join(t.TempDir(), "perf.data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data"), fileOf(o, synthAttrs(), data, tc.feats), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.0"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(dir)
		if !tc.ok {
			if KindOf(err) != ErrBadFeature {
				t.Errorf("DIR_FORMAT %x: %v, want ErrBadFeature", tc.feats[FeatDirFormat], err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
		r.Close()
		if single == 0 {
			if n == 0 {
				t.Fatal("no records")
			}
			single = n
		} else if n != 2*single {
			t.Errorf("DIR_FORMAT %x: %d records, want %d", tc.feats[FeatDirFormat], n, 2*single)
		}
	}
}

// TestDirectoryUneven: a directory whose files fill at uneven rates
// (the records of a real data.N file dealt into three files, eight of
// ten into one), read in time order with a queue far smaller than the
// recording, gives every record in time order, none early: a full queue
// released by time span (the former way) delivered hundreds out of order.
func TestDirectoryUneven(t *testing.T) {
	src, names := threadsRecording(t)
	dir := copyDir(t, src)
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	var parts [3][]byte
	for i := 0; len(b) >= recordHeaderSize; i++ {
		size := int(binary.LittleEndian.Uint16(b[6:]))
		if size < recordHeaderSize || size > len(b) {
			t.Fatal("bad record in a data.N file")
		}
		k := max(0, i%10-7) // 0 for eight of ten records, then 1, 2
		parts[k] = append(parts[k], b[:size]...)
		b = b[size:]
	}
	if err := os.Remove(filepath.Join(dir, filepath.Base(names[0]))); err != nil {
		t.Fatal(err)
	}
	for k, p := range parts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("data.%d", 100+k)), p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(maxQueued int64) (times []uint64, unordered uint64) {
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.SetTimeOrder(true)
		r.SetLimits(Limits{MaxQueued: maxQueued})
		for {
			rec, err := r.Next()
			if err == io.EOF {
				return times, r.Unordered()
			}
			if err != nil {
				t.Fatal(err)
			}
			if ts := r.timeOf(rec.Raw); ts != 0 && ts != ^uint64(0) {
				times = append(times, ts)
			}
		}
	}
	want, _ := read(0)
	if len(parts[0]) < 4<<20 {
		t.Skipf("a recording of %d bytes: too small to fill the queue", len(parts[0]))
	}
	got, unordered := read(1 << 20)
	if unordered != 0 || !slices.IsSorted(got) || !slices.Equal(got, want) {
		t.Errorf("with a 1 MiB queue: %d records out of order, %d timed records (want %d), in order %v", unordered, len(got), len(want), slices.IsSorted(got))
	}
}

package perfdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// readCount reads r to the end and returns the records read and the final
// error (nil at io.EOF). Every error must be an *Error.
func readCount(t testing.TB, r *Reader) (int, error) {
	t.Helper()
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if _, again := r.Next(); again != err {
				t.Fatalf("error not final: %v then %v", err, again)
			}
			return n, err
		}
		if rec.Sample() != nil {
			// Touch the views, as a user would.
			s := rec.Sample()
			for i := 0; i < s.Callchain.Len(); i++ {
				_ = s.Callchain.At(i)
			}
			for i := 0; i < s.Read.Len() && i < 1000; i++ {
				_ = s.Read.Counter(i)
			}
			for i := 0; i < s.Branches.Len(); i++ {
				_ = s.Branches.At(i)
			}
			s.RegsUser.Get(PerfRegX86SP)
		}
		n++
	}
}

// smallRecordings returns the small recordings, made with perf.
func smallRecordings(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, rc := range recordings {
		if !rc.small && rc.name != "pipe-z" {
			continue
		}
		b, err := os.ReadFile(record(t, rc))
		if err != nil {
			t.Fatal(err)
		}
		out[rc.name] = b
	}
	return out
}

// TestTruncated cuts real recordings at many points: every cut reads the
// records that lie before it and then fails with an error (never a panic,
// never a silent end), except a pipe stream cut between records, which
// is a valid shorter stream.
func TestTruncated(t *testing.T) {
	for name, full := range smallRecordings(t) {
		t.Run(name, func(t *testing.T) {
			r, err := NewBytes(full)
			if err != nil {
				t.Fatal(err)
			}
			// Where each record ends, in file order (outside compressed data).
			var ends []int64
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.DecompOffset < 0 {
					ends = append(ends, rec.Offset+int64(len(rec.Raw))+int64(rec.PayloadSize))
				}
			}
			r.Close()
			pipe := r.Header().Pipe
			step := max(1, len(full)/150)
			for cut := 0; cut < len(full); cut += step {
				b := full[:cut]
				r, err := NewBytes(b)
				if err != nil {
					continue // cut inside the header or attributes
				}
				nFileOrder := -1
				for _, ordered := range []bool{false, true} {
					r, _ := NewBytes(b)
					r.SetTimeOrder(ordered)
					n, err := readCount(t, r)
					r.Close()
					if !ordered {
						nFileOrder = n
					} else if n != nFileOrder {
						t.Fatalf("cut at %d: %d records in time order, %d in file order", cut, n, nFileOrder)
					}
					complete := 0
					for _, e := range ends {
						if e <= int64(cut) {
							complete++
						}
					}
					atBoundary := pipe && (cut == pipeHeaderSize || slicesContains(ends, int64(cut)))
					switch {
					case err == nil && !atBoundary:
						t.Fatalf("cut at %d: %d records and no error", cut, n)
					case !ordered && n < complete && name != "dwarf-small-z" && name != "pipe-z":
						// (compressed records count apart)
						t.Fatalf("cut at %d: %d records before the error %v, %d are complete", cut, n, err, complete)
					}
				}
				r.Close()
			}
		})
	}
}

func slicesContains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestCorrupted flips bytes of real recordings: reading never panics and
// ends with io.EOF or an *Error.
func TestCorrupted(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for name, full := range smallRecordings(t) {
		t.Run(name, func(t *testing.T) {
			b := make([]byte, len(full))
			for i := 0; i < 150; i++ {
				copy(b, full)
				for j := 0; j < 1+rng.Intn(8); j++ {
					p := rng.Intn(len(b))
					b[p] ^= byte(1 + rng.Intn(255))
				}
				for _, ordered := range []bool{false, true} {
					r, err := NewBytes(b)
					if err != nil {
						continue
					}
					r.SetTimeOrder(ordered)
					readCount(t, r)
					r.Close()
				}
			}
		})
	}
}

// TestNoAllocationPerRecord: reading a mapped recording allocates a
// bounded number of times, whatever its number of records.
func TestNoAllocationPerRecord(t *testing.T) {
	path := record(t, recordings[0]) // dwarf
	for _, ordered := range []bool{false, true} {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		r.SetTimeOrder(ordered)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		n, err := readCount(t, r)
		runtime.ReadMemStats(&after)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		allocs := after.Mallocs - before.Mallocs
		t.Logf("time order %v: %d records, %d allocations", ordered, n, allocs)
		if n < 50 || allocs > 40 {
			t.Fatalf("time order %v: %d allocations for %d records", ordered, allocs, n)
		}
	}
}

// fuzzSeedSize bounds the seeds of FuzzReader, and fuzzMaxInput the part
// of an input it reads. The fuzzing engine minimizes each input that
// finds new code, trying it without each of its bytes in turn, then
// without each run of them: with whole recordings of up to 32 KiB as
// seeds it did little else (FuzzReader stalled).
const (
	fuzzSeedSize = 4 << 10
	fuzzMaxInput = 8 << 10
)

// fuzzSeeds are synthetic recordings and, with perf, the first 4 KiB of
// small real ones (header, attributes and first records; the synthetic
// ones have feature sections).
func fuzzSeeds(f *testing.F) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		f.Add(fileOf(o, synthAttrs(), synthData(o), map[Feature][]byte{FeatHostname: perfString(o, "h")}))
		f.Add(pipeOf(o, synthAttrs(), synthData(o)))
		f.Add(fileOf(o, synthAttrs(), synthData(o), map[Feature][]byte{FeatDirFormat: (&enc{o: o}).u64(1).b}))
	}
	if _, err := exec.LookPath("perf"); err != nil {
		return
	}
	for _, b := range smallRecordings(f) {
		f.Add(b[:min(len(b), fuzzSeedSize)])
	}
}

// FuzzReader reads arbitrary bytes as a recording, mapped and streamed, in
// both orders: never a panic, only io.EOF or an *Error, and the same
// records either way.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f)
	lim := Limits{MaxDecompressedRecord: 4 << 20, MaxDecompressRatio: 64, MaxQueued: 4 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Bytes past fuzzMaxInput only make an input slower, and its
		// minimization longer: the engine grows inputs up to 1 MB.
		b = b[:min(len(b), fuzzMaxInput)]
		for _, ordered := range []bool{false, true} {
			m, err := NewBytes(b)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("open: %v is not an *Error", err)
				}
				continue
			}
			m.SetTimeOrder(ordered)
			m.SetLimits(lim)
			var mrecs [][]byte
			for {
				rec, err := m.Next()
				if err != nil {
					var e *Error
					if err != io.EOF && !errors.As(err, &e) {
						t.Fatalf("%v is not an *Error", err)
					}
					break
				}
				mrecs = append(mrecs, bytes.Clone(rec.Raw))
			}
			m.Close()
			if h := m.Header(); !h.Pipe {
				if ordered && h.Features.Has(FeatDirFormat) {
					fuzzDir(t, b, h, lim)
				}
				continue
			}
			s, err := NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("mapped opens, streamed: %v", err)
			}
			s.SetTimeOrder(ordered)
			s.SetLimits(lim)
			i := 0
			for ; ; i++ {
				rec, err := s.Next()
				if err != nil {
					break
				}
				if i >= len(mrecs) || !bytes.Equal(rec.Raw, mrecs[i]) {
					t.Fatalf("record %d differs between mapped and streamed", i)
				}
			}
			s.Close()
			if i != len(mrecs) {
				t.Fatalf("%d records streamed, %d mapped", i, len(mrecs))
			}
		}
	})
}

// fuzzDir reads b, a file-mode recording with the DIR_FORMAT feature, as
// the header file of a perf.data directory whose data.0 holds b's data
// section and data.1 the bytes after it: never a panic, only io.EOF or
// an *Error.
func fuzzDir(t *testing.T, b []byte, h *Header, lim Limits) {
	dir := t.TempDir()
	end := min(h.DataOffset+h.DataSize, int64(len(b)))
	files := map[string][]byte{"data": b, "data.0": b[min(h.DataOffset, end):end], "data.1": b[end:]}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(dir, name), c, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(dir)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("directory: open: %v is not an *Error", err)
		}
		return
	}
	defer r.Close()
	r.SetTimeOrder(true)
	r.SetLimits(lim)
	for {
		_, err := r.Next()
		if err != nil {
			var e *Error
			if err != io.EOF && !errors.As(err, &e) {
				t.Fatalf("directory: %v is not an *Error", err)
			}
			return
		}
	}
}

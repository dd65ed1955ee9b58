//go:build linux

package perfdata

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestStreamingMemory reads 96 MiB recordings of timed samples, in file
// and in time order, with and without FINISHED_ROUND records (without
// them, time order queues every record to the end), and checks what
// stays in memory: the file's mapping (header and features) must not
// become resident as the records are read (/proc/self/smaps), and the
// chunks the records are read into must stay few (those queued records
// lie in, at most maxPinned, the current one and those read ahead).
func TestStreamingMemory(t *testing.T) {
	o := binary.LittleEndian
	for _, rounds := range []bool{true, false} {
		var data []byte
		for k := uint64(0); len(data) < 96<<20; k++ {
			data = append(data, synthSample(o, k)...)
			if rounds && k%2000 == 1999 {
				data = append(data, record1(o, RecordFinishedRound, 0, nil)...)
			}
		}
		path := filepath.Join(t.TempDir(), "big.data")
		if err := os.WriteFile(path, fileOf(o, synthAttrs(), data, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, ordered := range []bool{false, true} {
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r.SetTimeOrder(ordered)
			n, last := 0, uint64(0)
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if s := rec.Sample(); s != nil {
					if ordered && s.Time < last {
						t.Fatalf("sample %d: time %d after %d", n, s.Time, last)
					}
					last = s.Time
					// The sample's bytes are those written (a reused chunk
					// would show another sample's).
					if s.IP != 0x401000+(s.Time-5000) {
						t.Fatalf("sample %d: IP %#x at time %d", n, s.IP, s.Time)
					}
					n++
				}
			}
			rss, err := mappingRSS(uintptr(unsafe.Pointer(&r.mem[0])))
			chunks := len(r.cs.chunks)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if rss > 4<<20 || chunks > maxPinned+1+readAhead {
				t.Errorf("rounds %v, time order %v: %d samples read; %d bytes of the 96 MiB mapping resident (want at most 4 MiB: one large folio of the header), %d chunks (want at most %d)",
					rounds, ordered, n, rss, chunks, maxPinned+1+readAhead)
			}
		}
	}
}

// mappingRSS returns the resident bytes of the mapping starting at addr,
// from /proc/self/smaps.
func mappingRSS(addr uintptr) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	prefix := fmt.Sprintf("%x-", addr)
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, ' '); i > 0 && strings.Contains(line[:i], "-") {
			in = strings.HasPrefix(line, prefix)
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "Rss:"), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no mapping at %#x in /proc/self/smaps", addr)
}

// TestChunksReleased checks that the chunks a file's records are read
// into are unmapped, and the goroutines that read ahead end, when the
// Reader is closed, and when it is dropped without Close.
func TestChunksReleased(t *testing.T) {
	o := binary.LittleEndian
	var data []byte
	for k := uint64(0); len(data) < 24<<20; k++ {
		data = append(data, synthSample(o, k)...)
	}
	path := filepath.Join(t.TempDir(), "r.data")
	if err := os.WriteFile(path, fileOf(o, synthAttrs(), data, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, closeIt := range []bool{true, false} {
		before := runtime.NumGoroutine()
		addrs := func() []uintptr {
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for range 1000 {
				if _, err := r.Next(); err != nil {
					t.Fatal(err)
				}
			}
			var a []uintptr
			for _, c := range r.cs.chunks {
				a = append(a, uintptr(unsafe.Pointer(&c.mem[0])))
			}
			if len(a) < 2 || runtime.NumGoroutine() < before+readers {
				t.Fatalf("%d chunks, %d goroutines (%d before): not reading ahead", len(a), runtime.NumGoroutine(), before)
			}
			if closeIt {
				r.Close()
			}
			return a
		}()
		var left []uintptr
		for try := 0; try < 100; try++ {
			runtime.GC()
			time.Sleep(time.Millisecond)
			left = left[:0]
			for _, a := range addrs {
				if mapped(t, a) {
					left = append(left, a)
				}
			}
			if len(left) == 0 && runtime.NumGoroutine() <= before {
				break
			}
		}
		if len(left) > 0 || runtime.NumGoroutine() > before {
			t.Errorf("closed %v: %d of %d chunks still mapped, %d goroutines (%d before)", closeIt, len(left), len(addrs), runtime.NumGoroutine(), before)
		}
	}
}

// mapped reports whether addr lies in a mapping of this process.
func mapped(t *testing.T, addr uintptr) bool {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && addr >= lo && addr < hi {
			return true
		}
	}
	return false
}

//go:build linux

package perfdata

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestStreamingMemory reads 96 MiB recordings of timed samples, in file
// and in time order, with and without FINISHED_ROUND records (without
// them, time order queues every record to the end), and checks what
// stays in memory: the file's mapping (header and features) must not
// become resident as the records are read (/proc/self/smaps), and the
// chunks the records are read into must stay few (those queued records
// lie in, at most maxPinned, the current one and the one read ahead).
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
			chunks := len(r.chunks)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			if rss > 4<<20 || chunks > maxPinned+3 {
				t.Errorf("rounds %v, time order %v: %d samples read; %d bytes of the 96 MiB mapping resident (want at most 4 MiB: one large folio of the header), %d chunks (want at most %d)",
					rounds, ordered, n, rss, chunks, maxPinned+3)
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

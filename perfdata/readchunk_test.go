package perfdata

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestReadChunk checks the read-ahead's reads against os.File.ReadAt:
// the same bytes at any offset, and at the end of the file the bytes
// there and io.EOF.
func TestReadChunk(t *testing.T) {
	data := make([]byte, 5<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		off int64
		n   int
	}{{0, 2 << 20}, {12345, 2 << 20}, {int64(len(data)) - 100, 100}, {int64(len(data)) - 100, 2 << 20}, {int64(len(data)), 10}} {
		got := make([]byte, c.n)
		m, err := readChunk(f, got, c.off)
		want := make([]byte, c.n)
		wm, werr := f.ReadAt(want, c.off)
		if m != wm || !bytes.Equal(got[:m], want[:wm]) || (err == nil) != (werr == nil) {
			t.Errorf("readChunk(%d bytes at %d) = %d, %v; ReadAt: %d, %v", c.n, c.off, m, err, wm, werr)
		}
		if m < c.n && err != io.EOF {
			t.Errorf("short read at %d: %v, want io.EOF", c.off, err)
		}
	}
}

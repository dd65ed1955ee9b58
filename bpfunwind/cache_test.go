package bpfunwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/testprog"
	"github.com/sframekit/sframekit/unwind"
)

// cachedTable returns the table of the SFrame build of recprog.
func cachedTable(t testing.TB) *Table {
	t.Helper()
	exe := testprog.Build(t, "../recorder/testdata/recprog.c", "-O2", "-Wa,--gsframe", "-pthread")
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return BuildTable(unwind.LoadFileTables(f, exe, unwind.LoadOptions{SFrameFromCFI: true}), arch.AMD64)
}

// TestTableCache: a table kept in the cache reads back equal; a cut,
// corrupted, other machine's or too large one reads as none; a file of
// another size has its own; the directory is trimmed to its bounds.
func TestTableCache(t *testing.T) {
	tab := cachedTable(t)
	dir := t.TempDir()
	id := []byte{0xde, 0xad, 0xbe, 0xef}
	path := cachePath(dir, id, uint32(elf.EM_X86_64), 1234)
	writeCached(path, tab, uint32(elf.EM_X86_64))
	got := readCached(path, uint32(elf.EM_X86_64), DefaultMaxRows)
	if !reflect.DeepEqual(got, tab) {
		t.Fatalf("read back %+v, want %+v", got, tab)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{"cut": b[:len(b)-5], "flipped": bytes.Clone(b)}
	bad["flipped"][cacheHeader+17] ^= 1
	for name, data := range bad {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if readCached(path, uint32(elf.EM_X86_64), DefaultMaxRows) != nil {
			t.Errorf("%s: read as a table", name)
		}
	}
	os.WriteFile(path, b, 0o644)
	if readCached(path, uint32(elf.EM_AARCH64), DefaultMaxRows) != nil || readCached(path, uint32(elf.EM_X86_64), len(tab.Rows)-1) != nil {
		t.Error("read for another machine, or beyond the rows allowed")
	}
	// A file of another size that claims the same build ID has a table
	// of its own.
	if other := cachePath(dir, id, uint32(elf.EM_X86_64), 1235); other == path {
		t.Errorf("files of two sizes share the cached table %s", path)
	}
	if cachePath(dir, nil, 62, 1) != "" || cachePath("", id, 62, 1) != "" {
		t.Error("a cache path without a build ID or a directory")
	}
	for i := range maxCacheFiles + 5 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.tab", i)), []byte("x"), 0o644)
	}
	trimCache(dir)
	if ents, _ := os.ReadDir(dir); len(ents) != maxCacheFiles {
		t.Errorf("%d files after trimming, want %d", len(ents), maxCacheFiles)
	}
}

// FuzzDecodeTable decodes arbitrary bytes as a cached table: never a
// panic, and what decodes encodes back to the same bytes. Each input is
// decoded as it is and with its checksum made right, so that the checks
// after the checksum's (flags, order, spans) see mutated bytes too.
func FuzzDecodeTable(f *testing.F) {
	tab := cachedTable(f)
	f.Add(EncodeTable(tab, 62))
	f.Add(EncodeTable(&Table{}, 62))
	check := func(t *testing.T, b []byte) {
		tab, err := DecodeTable(b, 62, 1<<16)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeTable(tab, 62), b) {
			t.Fatalf("%x decodes to %+v, which encodes otherwise", b, tab)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		if len(b) >= 4 {
			body := slices.Clone(b[:len(b)-4])
			check(t, binary.LittleEndian.AppendUint32(body, crc32.ChecksumIEEE(body)))
		}
	})
}

package perfdata

import (
	"encoding/binary"
	"github.com/klauspost/compress/zstd"
	"io"
	"math/rand"
	"testing"

	"github.com/sframekit/sframekit/internal/memtest"
)

// zstdRLEFrame returns a zstd frame (RFC 8878) of n RLE blocks, each
// repeating the byte b 128 KiB times: 4 bytes of input for every 128 KiB
// of output, the most zstd expands to. Repeated 0x0a bytes read as perf
// records of an unknown type 0x0a0a0a0a and 2,570 bytes each, which every
// reader skips: a stream of them decodes without error for as long as it
// lasts.
func zstdRLEFrame(n int, b byte) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, // magic
		0x00,   // frame header descriptor: window descriptor, no size, no checksum
		7 << 3} // window: 1<<(10+7) = 128 KiB
	for i := range n {
		h := uint32(128<<10)<<3 | 1<<1 // RLE block of 128 KiB
		if i == n-1 {
			h |= 1 // last block
		}
		f = append(f, byte(h), byte(h>>8), byte(h>>16), b)
	}
	return f
}

// bombFile is a recording whose COMPRESSED feature claims a 4 GiB ring
// buffer and whose data is COMPRESSED records of nRec RLE frames of
// blocks bytes each (8 GiB of decompressed records per record at most).
func bombFile(nRec, blocks int) []byte {
	o := binary.LittleEndian
	var data []byte
	for range nRec {
		data = append(data, record1(o, RecordCompressed, 0, zstdRLEFrame(blocks, 0x0a))...)
	}
	comp := (&enc{o: o}).u32(0).u32(1).u32(1).u32(100).u32(0xffffffff).b
	a := synthAttrs()[0]
	a.Flags &^= AttrSampleIDAll
	return fileOf(o, []*Attr{a}, data, map[Feature][]byte{FeatCompressed: comp})
}

// TestHostileMmapLenIgnored: a COMPRESSED feature header claiming a 4 GiB
// ring buffer does not raise the per-record limit past what a record's
// 64 KiB of compressed bytes may expand to at the ratio limit.
func TestHostileMmapLenIgnored(t *testing.T) {
	var h Header
	h.Compression.MmapLen = 0xffffffff
	l := Limits{}.withDefaults(&h)
	if want := int64(zstdPiece) * l.MaxDecompressRatio; l.MaxDecompressedRecord > want {
		t.Errorf("MmapLen 0xffffffff: per-record limit %d, want at most %d", l.MaxDecompressedRecord, want)
	}
	h.Compression.MmapLen = 528 << 10 // perf's default ring
	if l := (Limits{}).withDefaults(&h); l.MaxDecompressedRecord != 528<<10+64<<10 {
		t.Errorf("MmapLen 528 KiB: per-record limit %d", l.MaxDecompressedRecord)
	}
}

// TestZstdBombStreamed: one COMPRESSED record of 64 KiB that expands to
// 2 GiB, in a recording whose header claims a 4 GiB ring, is
// decompressed as it is read: the ratio limit stops it after a bounded
// amount of output, and memory stays small (the whole record was
// decompressed into memory before: 1 GiB, then the error).
func TestZstdBombStreamed(t *testing.T) {
	b := bombFile(1, 16000)
	if len(b) > 70<<10 {
		t.Fatalf("bomb of %d bytes", len(b))
	}
	if memtest.InChild(t) {
		for _, ordered := range []bool{false, true} {
			r, err := NewBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			r.SetTimeOrder(ordered)
			n := 0
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
				n++
			}
			r.Close()
			if err == io.EOF || KindOf(err) != ErrLimit && KindOf(err) != ErrCompressed {
				t.Fatalf("time order %v: %d records, then %v; want a limit error", ordered, n, err)
			}
			// The records delivered before the error: at most the
			// ratio's allowance, and a piece more.
			lim := Limits{}.withDefaults(r.Header())
			max := (lim.MaxDecompressRatio*int64(len(b)) + 16<<20 + 256<<10) / 2570
			t.Logf("time order %v: %d records of 2,570 bytes, then %v", ordered, n, err)
			if int64(n) > max {
				t.Fatalf("time order %v: %d records decompressed, more than the limits allow (%d)", ordered, n, max)
			}
		}
		return
	}
	memtest.AtMost(t, 150<<20, "reading a 64 KiB zstd bomb")
}

// unroundedFile is a recording of timed samples and no FINISHED_ROUND,
// compressed: nRec COMPRESSED records, each a zstd frame of 8 MiB of
// 32-byte samples in runs of 256 with the same time (about 150 to 1, the
// samples' times random and each record 50 KiB).
func unroundedFile(t testing.TB, nRec int) []byte {
	o := binary.LittleEndian
	a := &Attr{Type: TypeSoftware, SampleType: SampleIP | SampleTID | SampleTime, SamplePeriod: 1}
	rng := rand.New(rand.NewSource(1))
	zw, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	var data, plain []byte
	for range nRec {
		plain = plain[:0]
		for len(plain) < 8<<20 {
			ts := rng.Uint64() >> 8
			one := record1(o, RecordSample, MiscUser, (&enc{o: o}).u64(0x401000).u32(1).u32(1).u64(ts).b)
			for range 256 {
				plain = append(plain, one...)
			}
		}
		comp := zw.EncodeAll(plain, nil)
		if len(comp) > 65000 {
			t.Fatalf("a record of %d compressed bytes", len(comp))
		}
		data = append(data, record1(o, RecordCompressed, 0, comp)...)
	}
	return fileOf(o, []*Attr{a}, data, nil)
}

// TestQueueBounded: compressed samples with no FINISHED_ROUND wait in the
// time-order queue until it is full (Limits.MaxQueued), then its older
// half goes: memory stays bounded, every record is delivered, and those
// that arrive older than one delivered are counted. Before, the queue
// took 512 MiB of records and the arena's copies beside them.
func TestQueueBounded(t *testing.T) {
	const nRec = 24 // 192 MiB of samples, 6 million
	if memtest.InChild(t) {
		b := unroundedFile(t, nRec)
		t.Logf("%d-byte file", len(b))
		r, err := NewBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		r.SetTimeOrder(true)
		n, err := readCount(t, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d records, %d out of order", n, r.Unordered())
		if n != nRec*(8<<20)/32 || r.Unordered() == 0 {
			t.Fatalf("%d records (want %d), %d out of order (want some)", n, nRec*(8<<20)/32, r.Unordered())
		}
		return
	}
	memtest.AtMost(t, 300<<20, "ordering 192 MiB of samples without rounds")
}

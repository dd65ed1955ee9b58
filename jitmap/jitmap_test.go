package jitmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/memtest"
)

func TestParsePerfMap(t *testing.T) {
	tab := ParsePerfMap([]byte("1000 100 JS:*fib /tmp/fib.js:1:13\n" +
		"1100 10 Builtin:X\n" +
		"garbage\n" +
		"0x2000 0x10 prefixed\n" + // the JVM's form: perf's strtoull reads the 0x
		"0x 10 no digits\n" +
		"1180 40 later (overlaps the first)\n" +
		"3000 0 empty\n" +
		"4000 10 \n" + // no name
		"5000 10 last, no newline"))
	if tab.Len() != 6 || tab.Skipped != 3 {
		t.Errorf("%d entries, %d skipped; want 6, 3", tab.Len(), tab.Skipped)
	}
	for _, c := range []struct {
		addr uint64
		name string
	}{
		{0xfff, ""}, {0x1000, "JS:*fib /tmp/fib.js:1:13"}, {0x10ff, "JS:*fib /tmp/fib.js:1:13"}, {0x1100, "Builtin:X"},
		{0x110f, "Builtin:X"}, {0x1110, ""}, {0x117f, ""}, {0x1180, "later (overlaps the first)"},
		{0x11bf, "later (overlaps the first)"}, {0x11c0, ""}, {0x2000, "prefixed"}, {0x200f, "prefixed"}, {0x2010, ""},
		{0x3000, "empty"}, {0x3001, ""},
		{0x500f, "last, no newline"}, {0x5010, ""},
	} {
		s, ok := tab.Lookup(c.addr)
		if s.Name != c.name || ok != (c.name != "") {
			t.Errorf("%#x: %q %v, want %q", c.addr, s.Name, ok, c.name)
		}
	}
	// Overlap: the later entry wins where they share addresses, the
	// earlier one keeps the rest.
	tab = ParsePerfMap([]byte("1000 100 old\n1040 20 new\n"))
	for addr, want := range map[uint64]string{0x103f: "old", 0x1040: "new", 0x105f: "new", 0x1060: "old", 0x10ff: "old"} {
		if s, _ := tab.Lookup(addr); s.Name != want {
			t.Errorf("overlap %#x: %q, want %q", addr, s.Name, want)
		}
	}
	tab = ParsePerfMap([]byte("1040 20 small\n1000 100 big\n"))
	if s, _ := tab.Lookup(0x1050); s.Name != "big" {
		t.Errorf("a later big entry: %q", s.Name)
	}
	// A line at the end of the address space.
	tab = ParsePerfMap([]byte("ffffffffffffff00 1000 top\n"))
	if s, _ := tab.Lookup(0xfffffffffffffffe); s.Name != "top" {
		t.Errorf("top: %q", s.Name)
	}
	// Too long a line is skipped.
	tab = ParsePerfMap([]byte("1000 10 " + strings.Repeat("x", MaxLine) + "\n2000 10 ok\n"))
	if tab.Len() != 1 || tab.Skipped != 1 {
		t.Errorf("long line: %d entries, %d skipped", tab.Len(), tab.Skipped)
	}
}

func TestPerfMapEntryLimit(t *testing.T) {
	var b bytes.Buffer
	for i := range MaxEntries + 10 {
		fmt.Fprintf(&b, "%x 1 f\n", i)
	}
	tab := ParsePerfMap(b.Bytes())
	if tab.Len() != MaxEntries || !tab.Truncated {
		t.Errorf("%d entries, truncated %v", tab.Len(), tab.Truncated)
	}
}

// jitdump builds a jitdump file in byte order bo from records.
func jitdump(bo binary.ByteOrder, recs ...[]byte) []byte {
	h := make([]byte, jitHeaderSize)
	bo.PutUint32(h, jitdumpMagic)
	bo.PutUint32(h[4:], 1)
	bo.PutUint32(h[8:], jitHeaderSize)
	bo.PutUint32(h[12:], 62)
	bo.PutUint32(h[20:], 1234)
	for _, r := range recs {
		h = append(h, r...)
	}
	return h
}

func load(bo binary.ByteOrder, addr, size, index uint64, name string) []byte {
	r := make([]byte, jitRecordSize+jitLoadFixed)
	bo.PutUint32(r, jitCodeLoad)
	bo.PutUint64(r[jitRecordSize+16:], addr)
	bo.PutUint64(r[jitRecordSize+24:], size)
	bo.PutUint64(r[jitRecordSize+32:], index)
	r = append(r, name...)
	r = append(r, 0)
	r = append(r, make([]byte, size)...) // the code
	bo.PutUint32(r[4:], uint32(len(r)))
	return r
}

func move(bo binary.ByteOrder, from, to, size, index uint64) []byte {
	r := make([]byte, jitRecordSize+jitMoveFixed)
	bo.PutUint32(r, jitCodeMove)
	bo.PutUint32(r[4:], uint32(len(r)))
	bo.PutUint64(r[jitRecordSize+16:], from)
	bo.PutUint64(r[jitRecordSize+24:], to)
	bo.PutUint64(r[jitRecordSize+32:], size)
	bo.PutUint64(r[jitRecordSize+40:], index)
	return r
}

func TestParseJitdump(t *testing.T) {
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		other := make([]byte, jitRecordSize+8)
		bo.PutUint32(other, 2) // debug info: skipped
		bo.PutUint32(other[4:], uint32(len(other)))
		data := jitdump(bo, load(bo, 0x1000, 0x40, 1, "f"), other, load(bo, 0x2000, 0x10, 2, "g"), move(bo, 0x2000, 0x3000, 0x10, 2))
		tab, err := ParseJitdump(data)
		if err != nil {
			t.Fatal(err)
		}
		for addr, want := range map[uint64]string{0x1000: "f", 0x103f: "f", 0x1040: "", 0x2000: "g", 0x3000: "g", 0x300f: "g", 0x3010: ""} {
			if s, _ := tab.Lookup(addr); s.Name != want {
				t.Errorf("%v %#x: %q, want %q", bo, addr, s.Name, want)
			}
		}
		if tab.Truncated {
			t.Errorf("%v: truncated", bo)
		}
		// Cut inside the last record: the records before it.
		tab, err = ParseJitdump(data[:len(data)-3])
		if err != nil || !tab.Truncated || tab.Len() != 2 {
			t.Errorf("%v cut: %v, %d entries, truncated %v", bo, err, tab.Len(), tab.Truncated)
		}
	}
	if _, err := ParseJitdump([]byte("ELF not a jitdump file at all, 40 bytes+")); err == nil {
		t.Error("not a jitdump: no error")
	}
}

// TestNodeJitdump reads the jitdump file that node --perf-prof writes:
// the functions of the script must be there, and every record read.
func TestNodeJitdump(t *testing.T) {
	node := needNode(t)
	dir := t.TempDir()
	js := filepath.Join(dir, "fib.js")
	os.WriteFile(js, []byte("function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\nfor (let i = 0; i < 30; i++) fib(20);\n"), 0o644)
	c := exec.Command(node, "--perf-prof", js)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	data, err := ReadFile(filepath.Join(dir, fmt.Sprintf("jit-%d.dump", c.Process.Pid)))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseJitdump(data)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Truncated || tab.Skipped != 0 || tab.Len() < 100 {
		t.Errorf("%d functions, %d skipped, truncated %v", tab.Len(), tab.Skipped, tab.Truncated)
	}
	found := false
	for _, s := range tab.syms {
		if strings.Contains(s.Name, "fib") && strings.Contains(s.Name, js) {
			found = true
			if got, ok := tab.Lookup(s.Start + s.Size/2); !ok || !strings.Contains(got.Name, "fib") {
				t.Errorf("%#x: %q", s.Start+s.Size/2, got.Name)
			}
		}
	}
	if !found {
		t.Error("no function fib")
	}
}

func needNode(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return node
}

func FuzzParsePerfMap(f *testing.F) {
	f.Add([]byte("1000 100 JS:*fib /tmp/fib.js:1:13\n1040 10 x\n"), uint64(0x1040))
	f.Add([]byte("ffffffffffffffff ffffffffffffffff wrap\n0 0 z"), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		tab := ParsePerfMap(data)
		checkTable(t, tab, addr)
	})
}

// FuzzAppendPerfMap parses a perf map in parts cut at whole lines, as a
// growing map is read: each lookup agrees with the table of the whole.
func FuzzAppendPerfMap(f *testing.F) {
	f.Add([]byte("1000 100 a\n1040 10 b\n1020 40 c\n1000 8 d\n"), uint(2), uint64(0x1044))
	f.Add([]byte("ffffffffffffffff 10 wrap\n0 0 z\n10 10 y"), uint(1), uint64(0x14))
	f.Fuzz(func(t *testing.T, data []byte, every uint, addr uint64) {
		whole := ParsePerfMap(data)
		every = every%8 + 1
		// Parts of every lines each (the last part's last line maybe
		// without its newline).
		var tab *Table
		for rest := data; len(rest) > 0; {
			j := 0
			for k := uint(0); k < every && j < len(rest); k++ {
				if e := bytes.IndexByte(rest[j:], '\n'); e >= 0 {
					j += e + 1
				} else {
					j = len(rest)
				}
			}
			tab = tab.AppendPerfMap(rest[:j])
			rest = rest[j:]
		}
		if tab == nil {
			tab = ParsePerfMap(nil)
		}
		checkTable(t, tab, addr)
		for _, a := range []uint64{addr, addr - 1, addr + 1} {
			g, gok := tab.Lookup(a)
			w, wok := whole.Lookup(a)
			if gok != wok || g != w {
				t.Fatalf("at %#x: parts give %+v %v, the whole %+v %v", a, g, gok, w, wok)
			}
		}
	})
}

func FuzzParseJitdump(f *testing.F) {
	bo := binary.LittleEndian
	f.Add(jitdump(bo, load(bo, 0x1000, 0x40, 1, "f"), move(bo, 0x1000, 0x2000, 0x40, 1)), uint64(0x2000))
	f.Add(jitdump(binary.BigEndian, load(binary.BigEndian, 0x1000, 0x4, 1, "g")), uint64(0x1000))
	f.Add(jitdump(bo, unwindRec(bo, []byte("eh_frame"), []byte("hdr")), load(bo, 0x1000, 11, 1, "t"), load(bo, 0x1010, 11, 2, "u")), uint64(0x1004))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		tab, err := ParseJitdump(data)
		if err != nil {
			return
		}
		checkTable(t, tab, addr)
		if s, u, ok := tab.LookupUnwinding(addr); ok {
			if l, _ := tab.Lookup(addr); l != s {
				t.Fatalf("%#x: unwinding of %+v, named %+v", addr, s, l)
			}
			if len(u.EHFrame) == 0 || len(u.EHFrameHdr) == 0 || len(u.EHFrame)+len(u.EHFrameHdr) > maxUnwinding {
				t.Fatalf("%#x: unwinding data of %d and %d bytes", addr, len(u.EHFrame), len(u.EHFrameHdr))
			}
		}
	})
}

// checkTable checks a table's invariants: spans sorted and disjoint,
// each inside its symbol, and a lookup that answers one of the symbols
// covering the address.
func checkTable(t *testing.T, tab *Table, addr uint64) {
	for i, s := range tab.spans {
		if s.start >= s.end || i > 0 && tab.spans[i-1].end > s.start {
			t.Fatalf("span %d: %+v after %+v", i, s, tab.spans[max(i-1, 0)])
		}
		sym := tab.syms[s.sym]
		if s.start < sym.Start || s.end-sym.Start > max(sym.Size, 1) && sym.Start+max(sym.Size, 1) > sym.Start {
			t.Fatalf("span %+v outside its symbol %+v", s, sym)
		}
	}
	if s, ok := tab.Lookup(addr); ok && (addr < s.Start || addr-s.Start >= max(s.Size, 1) && s.Start+max(s.Size, 1) > s.Start) {
		t.Fatalf("%#x: %+v does not cover it", addr, s)
	}
}

// bigMap returns a perf map of n functions of 0x40 bytes, as a JIT
// writes them (names of a node program's size).
func bigMap(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%x 40 JS:*function%d /home/user/app/src/module%d.js:%d:%d\n", 0x7f0000000000+i*0x40, i, i%100, i%1000, i%80)
	}
	return b.Bytes()
}

func TestLookupAllocs(t *testing.T) {
	tab := ParsePerfMap(bigMap(1000))
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(0x7f0000000000 + 500*0x40 + 3) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// BenchmarkParsePerfMap reads a perf map of 100,000 functions.
func BenchmarkParsePerfMap(b *testing.B) {
	data := bigMap(100000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		ParsePerfMap(data)
	}
}

// BenchmarkLookup looks up addresses spread over 100,000 functions.
func BenchmarkLookup(b *testing.B) {
	tab := ParsePerfMap(bigMap(100000))
	addr := uint64(0x7f0000000000)
	for b.Loop() {
		tab.Lookup(addr)
		addr += 0x40*7919 + 3
		if addr >= 0x7f0000000000+100000*0x40 {
			addr -= 100000 * 0x40
		}
	}
}

// TestLargestMapCost reads the largest perf map ReadFile accepts, of the
// shortest lines (the most entries a file can hold), from disk: the
// whole costs at most 400 MB (the file, the text its names share, the
// table of MaxEntries and the sweep that builds it).
func TestLargestMapCost(t *testing.T) {
	if memtest.InChild(t) {
		// Written a block at a time: the file held in memory too would
		// make the peak depend on when the collector frees it.
		line := []byte("0 1 f\n")
		block := bytes.Repeat(line, 64<<10/len(line))
		p := filepath.Join(t.TempDir(), "perf-1.map")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		for n := MaxFileSize / len(line); n > 0; n -= len(block) / len(line) {
			if _, err := f.Write(block[:min(n, len(block)/len(line))*len(line)]); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if tab := ParsePerfMap(b); tab.Len() != MaxEntries || !tab.Truncated {
			t.Errorf("%d entries, truncated %v", tab.Len(), tab.Truncated)
		}
		return
	}
	memtest.AtMost(t, 400<<20, "reading a perf map of the largest size")
}

// unwindRec returns a JIT_CODE_UNWINDING_INFO record of the .eh_frame
// ehFrame and the .eh_frame_hdr hdr, padded to 8 bytes as Python pads it.
func unwindRec(bo binary.ByteOrder, ehFrame, hdr []byte) []byte {
	r := make([]byte, jitRecordSize+jitUnwindingFixed)
	bo.PutUint32(r, jitCodeUnwinding)
	bo.PutUint64(r[jitRecordSize:], uint64(len(ehFrame)+len(hdr)))
	bo.PutUint64(r[jitRecordSize+8:], uint64(len(hdr)))
	r = append(append(r, ehFrame...), hdr...)
	for len(r)%8 != 0 {
		r = append(r, 0)
	}
	bo.PutUint32(r[4:], uint32(len(r)))
	return r
}

// TestParseJitdumpUnwinding reads the unwinding data that a
// JIT_CODE_UNWINDING_INFO record gives the next code load only, kept
// once for equal records; records whose sizes do not fit are skipped.
func TestParseJitdumpUnwinding(t *testing.T) {
	for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		eh, hdr := []byte("EHFRAME-bytes"), []byte("HDR")
		bad := unwindRec(bo, eh, hdr)
		bo.PutUint64(bad[jitRecordSize+8:], 99) // a header larger than the data
		data := jitdump(bo,
			unwindRec(bo, eh, hdr), load(bo, 0x1000, 11, 1, "a"),
			load(bo, 0x1010, 11, 2, "b"), // none: the record was the last load's
			unwindRec(bo, eh, hdr), load(bo, 0x1020, 11, 3, "c"),
			bad, load(bo, 0x1030, 11, 4, "d"),
			unwindRec(bo, nil, hdr), load(bo, 0x1040, 11, 5, "e")) // V8's bare header: no CFI
		tab, err := ParseJitdump(data)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Skipped != 1 || len(tab.unwinds) != 1 {
			t.Errorf("%v: %d skipped, %d unwinding data, want 1 and 1", bo, tab.Skipped, len(tab.unwinds))
		}
		for addr, want := range map[uint64]string{0x1000: "a", 0x100a: "a", 0x1010: "", 0x1025: "c", 0x1030: "", 0x1040: "", 0x2000: ""} {
			s, u, ok := tab.LookupUnwinding(addr)
			if ok != (want != "") || s.Name != want {
				t.Errorf("%v %#x: %q %v, want %q", bo, addr, s.Name, ok, want)
				continue
			}
			if ok && (string(u.EHFrame) != string(eh) || string(u.EHFrameHdr) != string(hdr) || u.Order != bo) {
				t.Errorf("%v %#x: %q %q %v", bo, addr, u.EHFrame, u.EHFrameHdr, u.Order)
			}
		}
		if s, _ := tab.Lookup(0x1010); s.Name != "b" {
			t.Errorf("%v: %q named 0x1010", bo, s.Name)
		}
		// Extended by perf map lines, more than half as many entries:
		// the jitdump file's unwinding data stays.
		ext := tab.AppendPerfMap([]byte("3000 10 x\n3010 10 y\n3020 10 z\n"))
		if s, _, ok := ext.LookupUnwinding(0x1025); !ok || s.Name != "c" {
			t.Errorf("%v: extended by a perf map, 0x1025: %q %v", bo, s.Name, ok)
		}
		if s, _ := ext.Lookup(0x3015); s.Name != "y" {
			t.Errorf("%v: extended by a perf map, 0x3015: %q", bo, s.Name)
		}
	}
	u := &Unwinding{}
	for size, want := range map[uint64]uint64{11: 0x90, 16: 0x90, 17: 0x98, 0: 0x80} {
		if got := u.EHFrameAddr(size); got != want {
			t.Errorf("EHFrameAddr(%d) = %#x, want %#x", size, got, want)
		}
	}
}

// TestPerfMapIncremental: a PerfMap reads only what the JIT appended
// since its last Read; its tables name old and new code as a table of
// the whole file does (later lines naming the addresses they share with
// earlier ones, a last line without its newline included), through a
// few segments however many Reads made them; and a map cut, rewritten
// or replaced by another file is read whole again.
func TestPerfMapIncremental(t *testing.T) {
	p := filepath.Join(t.TempDir(), "perf-1.map")
	write := func(flag int, s string) {
		f, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	var m PerfMap
	read := func(wantRead int) *Table {
		t.Helper()
		tab, n, err := m.Read(p)
		if err != nil || n != int64(wantRead) {
			t.Fatalf("read %d bytes, %v; want %d", n, err, wantRead)
		}
		data, _ := os.ReadFile(p)
		whole := ParsePerfMap(data)
		if tab.Len() != whole.Len() || tab.Skipped != whole.Skipped {
			t.Errorf("%d entries, %d skipped; the whole file's table %d, %d", tab.Len(), tab.Skipped, whole.Len(), whole.Skipped)
		}
		for addr := uint64(0xff0); addr < 0x1000+0x40*300; addr += 0x8 {
			got, ok1 := tab.Lookup(addr)
			want, ok2 := whole.Lookup(addr)
			if got != want || ok1 != ok2 {
				t.Fatalf("%#x: %+v, the whole file's table %+v", addr, got, want)
			}
		}
		return tab
	}
	first := "1000 40 f0\n1040 40 f1\n"
	write(os.O_TRUNC, first)
	read(len(first))
	// Appended: an entry over f0's second half, garbage, and a line
	// still being written.
	more := "1020 40 over\nnot a line\n1080 40 pa"
	write(os.O_APPEND, more)
	tab := read(len(more))
	if s, _ := tab.Lookup(0x1030); s.Name != "over" {
		t.Errorf("the later entry: %q", s.Name)
	}
	if s, _ := tab.Lookup(0x1085); s.Name != "pa" {
		t.Errorf("the last line so far: %q", s.Name)
	}
	// The line completed: its start is read again.
	write(os.O_APPEND, "rtial\n")
	if s, _ := read(len("1080 40 partial\n")).Lookup(0x1085); s.Name != "partial" {
		t.Errorf("the completed line: %q", s.Name)
	}
	// Many small appends: each Read reads its bytes only, and the
	// table's segments stay few.
	for i := range 290 {
		line := fmt.Sprintf("%x 40 g%d\n", 0x1000+i*0x40+0x10, i)
		write(os.O_APPEND, line)
		tab = read(len(line))
	}
	if len(tab.older) > 12 {
		t.Errorf("%d segments after 290 reads", len(tab.older)+1)
	}
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(0x1001) }); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
	// Cut and rewritten shorter: read whole.
	write(os.O_TRUNC, "1000 100 cut\n")
	if s, _ := read(len("1000 100 cut\n")).Lookup(0x1050); s.Name != "cut" {
		t.Errorf("after the cut: %q", s.Name)
	}
	// Rewritten in place, longer, the old end no longer a line's end.
	rewritten := "1000 40 rewritten_in_place\n"
	write(os.O_TRUNC, rewritten)
	if s, _ := read(len(rewritten)).Lookup(0x1000); s.Name != "rewritten_in_place" {
		t.Errorf("rewritten in place: %q", s.Name)
	}
	// Another file renamed over it, as long and ending a line where the
	// old one did.
	other := filepath.Join(filepath.Dir(p), "new")
	os.WriteFile(other, []byte("1000 40 another_file_here!\n"), 0o644)
	if err := os.Rename(other, p); err != nil {
		t.Fatal(err)
	}
	if s, _ := read(len(rewritten)).Lookup(0x1000); s.Name != "another_file_here!" {
		t.Errorf("another file: %q", s.Name)
	}
	// Gone, then made anew: read whole.
	os.Remove(p)
	if _, _, err := m.Read(p); err == nil {
		t.Error("a removed map read")
	}
	write(os.O_TRUNC, "1000 40 anew\n")
	if s, _ := read(len("1000 40 anew\n")).Lookup(0x1000); s.Name != "anew" {
		t.Errorf("made anew: %q", s.Name)
	}
}

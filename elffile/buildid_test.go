package elffile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestBuildIDAgainstReadelf compares BuildID with the "Build ID:" line
// readelf -n prints for every corpus file, and, for the executables,
// with the same file stripped of its section headers (as an image in
// memory is), where the ID comes from the PT_NOTE segment.
func TestBuildIDAgainstReadelf(t *testing.T) {
	if _, err := exec.LookPath("readelf"); err != nil {
		t.Skip("no readelf")
	}
	paths := corpus.ELFs(t)
	out, err := exec.Command("readelf", append([]string{"-nW"}, paths...)...).Output()
	if err != nil {
		t.Fatalf("readelf -n: %v", err)
	}
	want := map[string]string{}
	file := regexp.MustCompile(`^File: (.*)$`)
	id := regexp.MustCompile(`\sBuild ID: ([0-9a-f]+)$`)
	cur := ""
	if len(paths) == 1 {
		cur = paths[0]
	}
	for _, l := range bytes.Split(out, []byte("\n")) {
		if m := file.FindSubmatch(l); m != nil {
			cur = string(m[1])
		} else if m := id.FindSubmatch(l); m != nil && want[cur] == "" {
			want[cur] = string(m[1])
		}
	}
	withID, stripped := 0, 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", corpus.Rel(t, p), err)
		}
		if got := hex.EncodeToString(BuildID(f)); got != want[p] {
			t.Errorf("%s: build ID %q, readelf says %q", corpus.Rel(t, p), got, want[p])
		}
		if want[p] != "" {
			withID++
		}
		if f.Type == elf.ET_REL || len(f.Progs) == 0 || f.Class != elf.ELFCLASS64 {
			continue
		}
		// No section headers: e_shoff, e_shnum and e_shstrndx zero.
		img := bytes.Clone(data)
		bo := f.ByteOrder
		bo.PutUint64(img[0x28:], 0)
		bo.PutUint16(img[0x3c:], 0)
		bo.PutUint16(img[0x3e:], 0)
		g, err := elf.NewFile(bytes.NewReader(img))
		if err != nil {
			t.Fatalf("%s without sections: %v", corpus.Rel(t, p), err)
		}
		if len(g.Sections) != 0 {
			t.Fatalf("%s: sections left", corpus.Rel(t, p))
		}
		if got := hex.EncodeToString(BuildID(g)); got != want[p] {
			t.Errorf("%s without sections: build ID %q, readelf says %q", corpus.Rel(t, p), got, want[p])
		}
		stripped++
	}
	if withID == 0 || stripped == 0 {
		t.Fatalf("%d files with a build ID, %d read without sections: the test checked nothing", withID, stripped)
	}
}

// TestNoteBuildIDMalformed checks that notes that do not fit, empty
// build IDs and other owners' notes of type 3 give no build ID, and that
// the ID after them is found.
func TestNoteBuildIDMalformed(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte {
		b := u32s(uint32(len(name)), uint32(len(desc)), typ)
		b = append(b, name...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		b = append(b, desc...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	id := []byte{1, 2, 3, 4, 5}
	for _, c := range []struct {
		name string
		data []byte
		want []byte
	}{
		{"plain", note("GNU\x00", NT_GNU_BUILD_ID, id), id},
		{"after others", append(append(note("GNU\x00", 1, []byte{0, 0, 0, 0}), note("Go\x00\x00", NT_GNU_BUILD_ID, []byte{9})...), note("GNU\x00", NT_GNU_BUILD_ID, id)...), id},
		{"empty first", append(note("GNU\x00", NT_GNU_BUILD_ID, nil), note("GNU\x00", NT_GNU_BUILD_ID, id)...), id},
		{"truncated", note("GNU\x00", NT_GNU_BUILD_ID, id)[:18], nil},
		{"huge size", u32s(4, 0xffffffff, NT_GNU_BUILD_ID), nil},
		{"short", []byte{4, 0, 0}, nil},
	} {
		if got := NoteBuildID(c.data, binary.LittleEndian); !bytes.Equal(got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, got, c.want)
		}
	}
}

// u32s encodes vs little-endian.
func u32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}

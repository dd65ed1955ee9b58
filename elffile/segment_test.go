package elffile_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframegen"
)

// TestAddSFrameSegmentCorpus adds a generated .sframe to every corpus
// executable and shared library (all three architectures) and checks the
// layout: every original section keeps its bytes, and its address unless
// the plan moved it out of the program header table's way; every
// original program header is still there, moved only with its contents;
// the new section is where the plan says, covered by a read-only PT_LOAD
// placed after the others and by PT_GNU_SFRAME; the new segments lie on
// pages of their own; the program header table is where glibc's loader
// looks for it (see checkPhdrTable); and readelf -lS has nothing to say
// on stderr.
func TestAddSFrameSegmentCorpus(t *testing.T) {
	_, haveReadelf := exec.LookPath("readelf")
	n := 0
	for _, p := range corpus.ELFs(t) {
		if strings.HasSuffix(p, ".o") || strings.Contains(p, "/v1/") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		r, err := sframegen.FromCFI(f, sframegen.Options{})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := elffile.PlanSFrameSegment(src)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		data, err := r.Encode(plan.Addr)
		if err != nil {
			t.Fatal(err)
		}
		out, err := elffile.AddSFrameSegment(src, plan, data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		checkAdded(t, p, src, out, plan, data)
		checkOldLoaderPHDRs(t, p, out)
		if haveReadelf == nil {
			tmp := t.TempDir() + "/out"
			os.WriteFile(tmp, out, 0o644)
			cmd := exec.Command("readelf", "-lSW", tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("%s: readelf: %v %s", p, err, stderr.String())
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no corpus executables")
	}
}

// checkAdded checks out, src with data added as plan says (see
// TestAddSFrameSegmentCorpus).
func checkAdded(t *testing.T, p string, src, out []byte, plan *elffile.SegmentPlan, data []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	g, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("%s: output does not parse: %v", p, err)
	}
	moved := map[string]bool{}
	for _, name := range plan.Moved {
		moved[name] = true
	}
	// Original sections unchanged (except .sframe and the name table).
	for i, s := range f.Sections {
		if s.Name == ".sframe" || s.Name == ".shstrtab" || s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_SYMTAB || s.Type == elf.SHT_DYNSYM {
			continue
		}
		gs := g.Sections[i]
		a, _ := s.Data()
		b, _ := gs.Data()
		if s.Type == elf.SHT_DYNAMIC && gs.Type == elf.SHT_DYNAMIC && gs.Addr == s.Addr {
			checkDynamic(t, p, f, g, a, b, moved)
			continue
		}
		if gs.Name != s.Name || !bytes.Equal(a, b) || (gs.Addr != s.Addr) != moved[s.Name] {
			t.Errorf("%s: section %s changed (address %#x, was %#x; moved %v)", p, s.Name, gs.Addr, s.Addr, moved[s.Name])
		}
		if moved[s.Name] && (gs.Addr < plan.SegAddr || gs.Offset-plan.SegOffset != gs.Addr-plan.SegAddr) {
			t.Errorf("%s: moved section %s at %#x/%#x, outside the new segment at %#x/%#x", p, s.Name, gs.Addr, gs.Offset, plan.SegAddr, plan.SegOffset)
		}
	}
	// Symbols keep their values, but for those in moved sections, which
	// move with them.
	for _, dyn := range []bool{false, true} {
		read := (*elf.File).Symbols
		if dyn {
			read = (*elf.File).DynamicSymbols
		}
		a, _ := read(f)
		b, _ := read(g)
		if len(a) != len(b) {
			t.Errorf("%s: %d symbols, was %d", p, len(b), len(a))
			continue
		}
		for i := range a {
			want := a[i]
			if k := int(want.Section); k < len(f.Sections) && moved[f.Sections[k].Name] {
				want.Value += g.Sections[k].Addr - f.Sections[k].Addr
			}
			if b[i] != want {
				t.Errorf("%s: symbol %+v, want %+v", p, b[i], want)
			}
		}
	}
	sec := elffile.FindSFrame(g, "")
	got, _ := sec.Data()
	if sec.Addr != plan.Addr || sec.Offset != plan.Offset || !bytes.Equal(got, data) || sec.Type != elffile.SHT_GNU_SFRAME {
		t.Errorf("%s: .sframe at %#x/%#x (plan %#x/%#x), type %v", p, sec.Addr, sec.Offset, plan.Addr, plan.Offset, sec.Type)
	}
	// Every original program header is still there: the same, or (the
	// table itself, the SFrame segment, segments of moved sections)
	// moved with its contents.
	used := map[int]bool{}
	for _, ph := range f.Progs {
		found := false
		for j, q := range g.Progs {
			if used[j] || q.Type != ph.Type || q.Flags != ph.Flags || q.Align != ph.Align {
				continue
			}
			same := q.ProgHeader == ph.ProgHeader
			switch ph.Type {
			case elf.PT_PHDR, elffile.PT_GNU_SFRAME:
				same = true
			case elf.PT_INTERP, elf.PT_NOTE, elf.PT_GNU_PROPERTY:
				same = same || q.Filesz == ph.Filesz && q.Memsz == ph.Memsz &&
					bytes.Equal(out[q.Off:q.Off+q.Filesz], src[ph.Off:ph.Off+ph.Filesz]) && q.Vaddr-plan.SegAddr == q.Off-plan.SegOffset
			}
			if same {
				used[j], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("%s: program header %+v lost", p, ph.ProgHeader)
		}
	}
	var lastLoad uint64
	var sfOK, loadOK bool
	page := plan.Align
	for _, ph := range g.Progs {
		switch ph.Type {
		case elf.PT_LOAD:
			if ph.Vaddr < lastLoad {
				t.Errorf("%s: PT_LOAD segments out of order", p)
			}
			lastLoad = ph.Vaddr
			if ph.Off%ph.Align != ph.Vaddr%ph.Align {
				t.Errorf("%s: PT_LOAD at %#x/%#x not congruent modulo %#x", p, ph.Off, ph.Vaddr, ph.Align)
			}
			if ph.Flags == elf.PF_R && ph.Vaddr <= sec.Addr && sec.Addr+sec.Size <= ph.Vaddr+ph.Filesz {
				loadOK = true
			}
			if ph.Vaddr < plan.SegAddr && !(plan.MovePHDRs && ph.Off >= uint64(len(src))) {
				continue
			}
			// A new segment: on pages of its own, in the file and in
			// memory.
			for _, q := range f.Progs {
				if q.Type == elf.PT_LOAD && (ph.Off/page*page < alignUp(q.Off+q.Filesz, page) || ph.Vaddr/page*page < alignUp(q.Vaddr+q.Memsz, page)) {
					t.Errorf("%s: new PT_LOAD at %#x/%#x shares a page with the one at %#x/%#x", p, ph.Off, ph.Vaddr, q.Off, q.Vaddr)
				}
			}
		case elffile.PT_GNU_SFRAME:
			sfOK = ph.Vaddr == sec.Addr && ph.Filesz == sec.Size && ph.Off == sec.Offset
		}
	}
	if !sfOK || !loadOK {
		t.Errorf("%s: PT_GNU_SFRAME %v, read-only PT_LOAD %v", p, sfOK, loadOK)
	}
	checkPhdrTable(t, p, out, g)
}

// checkDynamic checks the dynamic section b of out against a, its
// input's: the same entries, but for those holding the address of a
// moved section (the dynamic symbols, their names, hash tables and
// versions), which hold its new address.
func checkDynamic(t *testing.T, p string, f, g *elf.File, a, b []byte, moved map[string]bool) {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: dynamic section of %d bytes, was %d", p, len(b), len(a))
		return
	}
	ptr := map[elf.DynTag]bool{elf.DT_SYMTAB: true, elf.DT_STRTAB: true, elf.DT_HASH: true, elf.DT_GNU_HASH: true,
		elf.DT_VERSYM: true, elf.DT_VERNEED: true, elf.DT_VERDEF: true}
	o := f.ByteOrder
	for i := 0; i+16 <= len(a); i += 16 {
		tag, was, got := elf.DynTag(o.Uint64(a[i:])), o.Uint64(a[i+8:]), o.Uint64(b[i+8:])
		want := was
		for k, s := range f.Sections {
			if ptr[tag] && moved[s.Name] && s.Addr == was {
				want = g.Sections[k].Addr
			}
		}
		if elf.DynTag(o.Uint64(b[i:])) != tag || got != want {
			t.Errorf("%s: dynamic entry %v %#x, was %#x; want %#x", p, elf.DynTag(o.Uint64(b[i:])), got, was, want)
		}
	}
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) / a * a }

// checkPhdrTable checks that glibc's loader finds the program header
// table of the image out where it is: through PT_PHDR when there is one,
// else in the first PT_LOAD whose file pages hold it, as
// _dl_map_object_from_fd computes it, with 4 KiB and 64 KiB pages.
func checkPhdrTable(t *testing.T, p string, out []byte, g *elf.File) {
	t.Helper()
	phoff := g.ByteOrder.Uint64(out[32:])
	size := uint64(len(g.Progs)) * 56
	// The table's address: where the PT_LOAD covering it exactly maps it.
	var addr uint64
	found := false
	for _, ph := range g.Progs {
		if ph.Type == elf.PT_LOAD && ph.Off <= phoff && phoff+size <= ph.Off+ph.Filesz {
			addr, found = ph.Vaddr+phoff-ph.Off, true
			break
		}
	}
	if !found {
		t.Errorf("%s: program header table at %#x not in a PT_LOAD", p, phoff)
		return
	}
	for _, ph := range g.Progs {
		if ph.Type == elf.PT_PHDR {
			if ph.Off != phoff || ph.Vaddr != addr || ph.Filesz != size || ph.Memsz != size {
				t.Errorf("%s: PT_PHDR %+v, table at %#x/%#x, %d bytes", p, ph.ProgHeader, phoff, addr, size)
			}
			return
		}
	}
	for _, page := range []uint64{4 << 10, 64 << 10} {
		for _, ph := range g.Progs {
			if ph.Type != elf.PT_LOAD || ph.Align < page {
				continue
			}
			mapstart, mapend := ph.Vaddr/page*page, alignUp(ph.Vaddr+ph.Filesz, page)
			mapoff := ph.Off / page * page
			if mapoff <= phoff && mapend-mapstart+mapoff >= phoff+size {
				if got := mapstart + phoff - mapoff; got != addr {
					t.Errorf("%s: with %d KiB pages glibc finds the program headers at %#x in the PT_LOAD at %#x, not at %#x", p, page>>10, got, ph.Vaddr, addr)
				}
				break
			}
		}
	}
}

// TestPlanRejects checks the inputs AddSFrameSegment refuses.
func TestPlanRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		src  []byte
	}{
		{"empty", nil},
		{"not ELF", []byte("hello, world, this is not an ELF file at all......................")},
	} {
		if _, err := elffile.PlanSFrameSegment(c.src); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	for _, p := range corpus.ELFs(t) {
		if strings.HasSuffix(p, ".o") {
			src, _ := os.ReadFile(p)
			if _, err := elffile.PlanSFrameSegment(src); err == nil {
				t.Errorf("%s: relocatable object accepted", p)
			}
			break
		}
	}
}

// manyPhdrs crafts an executable with 65,534 program headers (the
// corpus's basic-O2.elf's own, then PT_NULL entries, in a table at the
// end of the file), without its PT_GNU_SFRAME when noSFrameSeg, and adds
// an SFrame segment to it: it returns the original file, the plan and
// the output.
func manyPhdrs(t *testing.T, noSFrameSeg bool) (*elf.File, *elffile.SegmentPlan, []byte) {
	src, err := os.ReadFile(filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.elf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	const n = 65534
	o := binary.LittleEndian
	phoff := alignUp(uint64(len(src)), 8)
	crafted := append(bytes.Clone(src), make([]byte, phoff-uint64(len(src))+n*56)...)
	copy(crafted[phoff:], src[o.Uint64(src[32:]):][:len(f.Progs)*56])
	o.PutUint64(crafted[32:], phoff)
	o.PutUint16(crafted[56:], n)
	for i, p := range f.Progs {
		if p.Type == elffile.PT_GNU_SFRAME && noSFrameSeg {
			o.PutUint32(crafted[phoff+uint64(i)*56:], uint32(elf.PT_NULL))
		}
	}
	plan, err := elffile.PlanSFrameSegment(crafted)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.MovePHDRs || plan.NumPHDRs <= 0xffff {
		t.Fatalf("plan: table moves %v, %d headers", plan.MovePHDRs, plan.NumPHDRs)
	}
	r, err := sframegen.FromCFI(f, sframegen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.Encode(plan.Addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := elffile.AddSFrameSegment(crafted, plan, data)
	if err != nil {
		t.Fatal(err)
	}
	return f, plan, out
}

// TestRewriteSectionsExtendedPhnum shrinks the .sframe of a file with
// more program headers than e_phnum holds, whose PT_GNU_SFRAME comes
// after the 65,535th: RewriteSections reads the count from section 0
// (extended numbering) and shrinks that segment with its section.
func TestRewriteSectionsExtendedPhnum(t *testing.T) {
	_, plan, out := manyPhdrs(t, true)
	h, err := elffile.DecodeHeader(out)
	if err != nil {
		t.Fatal(err)
	}
	g, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	sec := elffile.FindSFrame(g, "")
	res, err := elffile.RewriteSections(out, []elffile.SectionUpdate{{Index: elffile.SectionIndex(g, sec), Data: make([]byte, 16)}})
	if err != nil {
		t.Fatal(err)
	}
	progs, err := h.DecodeProgs(res[h.Phoff:], plan.NumPHDRs)
	if err != nil {
		t.Fatal(err)
	}
	last := progs[len(progs)-1]
	if elf.ProgType(last.Type) != elffile.PT_GNU_SFRAME || last.Off != sec.Offset || last.Filesz != 16 || last.Memsz != 16 {
		t.Errorf("last program header %+v; want PT_GNU_SFRAME at %#x, 16 bytes", last, sec.Offset)
	}
}

// TestExtendedPhdrNumbering crafts an executable with 65,534 program
// headers (the corpus's own, then PT_NULL entries, in a table at the end
// of the file) and adds an SFrame segment: the table outgrows e_phnum's
// 16 bits, so the output uses extended numbering (e_phnum PN_XNUM, the
// count in section 0's sh_info), which readelf and PlanSFrameSegment
// read back, with every original header in place.
func TestExtendedPhdrNumbering(t *testing.T) {
	f, plan, out := manyPhdrs(t, false)
	o := binary.LittleEndian
	shoff := o.Uint64(out[40:])
	if got, info := o.Uint16(out[56:]), o.Uint32(out[shoff+44:]); got != 0xffff || int(info) != plan.NumPHDRs {
		t.Errorf("e_phnum %#x, section 0 sh_info %d; want 0xffff and %d", got, info, plan.NumPHDRs)
	}
	tab := out[o.Uint64(out[32:]):]
	// Every original header, in order, is in the output's table (the
	// PT_PHDR describing the new table).
	var want []elf.Prog64
	for _, ph := range f.Progs {
		if ph.Type == elffile.PT_GNU_SFRAME {
			continue // reused for the new section
		}
		want = append(want, elf.Prog64{Type: uint32(ph.Type), Flags: uint32(ph.Flags), Off: ph.Off, Vaddr: ph.Vaddr, Paddr: ph.Paddr, Filesz: ph.Filesz, Memsz: ph.Memsz, Align: ph.Align})
	}
	got := make([]elf.Prog64, plan.NumPHDRs)
	if _, err := binary.Decode(tab[:plan.NumPHDRs*56], o, got); err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, g := range got {
		if k < len(want) && (g == want[k] || elf.ProgType(g.Type) == elf.PT_PHDR && elf.ProgType(want[k].Type) == elf.PT_PHDR) {
			k++
		}
	}
	if k != len(want) {
		t.Errorf("%d of the %d original headers found in order; missing %+v", k, len(want), want[k])
	}
	// Reading the output back: its headers, plus a PT_LOAD for a new
	// section and one for the table (PT_GNU_SFRAME and PT_PHDR exist).
	again, err := elffile.PlanSFrameSegment(out)
	if err != nil {
		t.Fatal(err)
	}
	if again.NumPHDRs != plan.NumPHDRs+2 {
		t.Errorf("reading back: %d headers planned, want %d", again.NumPHDRs, plan.NumPHDRs+2)
	}
	if _, err := exec.LookPath("readelf"); err == nil {
		tmp := filepath.Join(t.TempDir(), "out")
		os.WriteFile(tmp, out, 0o644)
		hdr, err := exec.Command("readelf", "-h", tmp).Output()
		if want := fmt.Sprintf("65535 (%d)", plan.NumPHDRs); err != nil || !strings.Contains(string(hdr), want) {
			t.Errorf("readelf -h: %v, no %q in\n%s", err, want, hdr)
		}
	}
	// A count past the end of the file is an error, not an allocation.
	bad := bytes.Clone(out)
	o.PutUint32(bad[shoff+44:], 1<<31)
	if _, err := elffile.PlanSFrameSegment(bad); err == nil {
		t.Error("a program header count past the end of the file was accepted")
	}
}

// checkOldLoaderPHDRs checks that loaders computing AT_PHDR as the first
// PT_LOAD's address minus its offset plus e_phoff (qemu-user, Linux
// before 5.18) find the program header table where a PT_LOAD maps it.
func checkOldLoaderPHDRs(t *testing.T, name string, out []byte) {
	t.Helper()
	g, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("%s: output does not parse: %v", name, err)
	}
	if g.Class != elf.ELFCLASS64 {
		return
	}
	phoff := g.ByteOrder.Uint64(out[32:])
	var first *elf.Prog
	for _, ph := range g.Progs {
		if ph.Type == elf.PT_LOAD && (first == nil || ph.Vaddr < first.Vaddr) {
			first = ph
		}
	}
	for _, ph := range g.Progs {
		if ph.Type == elf.PT_LOAD && ph.Off <= phoff && phoff < ph.Off+ph.Filesz {
			if at := ph.Vaddr + phoff - ph.Off; at != first.Vaddr-first.Off+phoff {
				t.Errorf("%s: program headers at %#x, where old loaders look: %#x", name, at, first.Vaddr-first.Off+phoff)
			}
		}
	}
}

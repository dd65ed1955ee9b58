package dump

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

// TestCFIJSONLayout checks, on the corpus files up to 256 KB, that the streamed JSON is
// laid out exactly as encoding/json's indented Encoder lays out the same
// document (WriteCFIJSON used to build the whole document and encode it at
// once), and that it holds every entry and every row of the tables.
func TestCFIJSONLayout(t *testing.T) {
	n := 0
	for _, p := range corpus.ELFs(t) {
		if st, err := os.Stat(p); err != nil || st.Size() > 256<<10 {
			continue
		}
		n++
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteCFIJSON(&got, &CFIInput{Path: p, ELF: f}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var doc cfiJSONFile
		if err := json.Unmarshal(got.Bytes(), &doc); err != nil {
			t.Fatalf("%s: output does not parse: %v", p, err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", " ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: layout differs from encoding/json's:\n%s", p, corpus.FirstDiff(got.String(), want.String()))
		}
		for _, js := range doc.Sections {
			tab, err := cfi.FromELF(f, js.Name)
			if err != nil {
				t.Fatal(err)
			}
			entries, rows, jrows := 0, 0, 0
			for it := tab.Entries(); it.Next(); entries++ {
				if e := it.Entry(); e.Kind == cfi.KindFDE && e.Err == nil {
					for ut := tab.NewUnwindTable(e.FDE); ut.Next(); {
						rows++
					}
				}
			}
			for _, je := range js.Entries {
				if je.Kind == "FDE" {
					jrows += len(je.Rows)
				}
			}
			if len(js.Entries) != entries || jrows != rows {
				t.Errorf("%s %s: %d entries and %d FDE rows in JSON, tables have %d and %d", p, js.Name, len(js.Entries), jrows, entries, rows)
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Fatal("no corpus file compared")
	}
	t.Logf("compared %d files", n)
}

// manyRows is an ELF file whose .eh_frame has one FDE advancing one byte
// n times: n rows from an n-byte program. The CIE is GCC's for x86-64
// (CFA rsp+8, return address at CFA-8) with absolute pointers.
func manyRows(n int) *elf.File {
	le := binary.LittleEndian
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0, 0x0c, 7, 8, 0x90, 1}
	for len(cie)%8 != 4 {
		cie = append(cie, 0) // DW_CFA_nop
	}
	sec := le.AppendUint32(nil, uint32(len(cie)))
	sec = append(sec, cie...)
	fde := le.AppendUint32(nil, uint32(len(sec)+4)) // CIE pointer: back to offset 0
	fde = le.AppendUint64(fde, 0x1000)
	fde = le.AppendUint64(fde, uint64(n)+1)
	fde = append(fde, 0)                                // augmentation data length
	fde = append(fde, bytes.Repeat([]byte{0x41}, n)...) // DW_CFA_advance_loc 1
	for len(fde)%8 != 4 {
		fde = append(fde, 0)
	}
	sec = le.AppendUint32(sec, uint32(len(fde)))
	sec = append(sec, fde...)
	f, err := elf.NewFile(bytes.NewReader(elftest.Build(elf.ET_EXEC, []elftest.Section{
		{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x10000, Data: sec},
	})))
	if err != nil {
		panic(err)
	}
	return f
}

// lineCounter counts the lines written to it, so that the output's size
// is checked without keeping it.
type lineCounter int

func (c *lineCounter) Write(p []byte) (int, error) {
	*c += lineCounter(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// TestManyRowsCFIJSON prints one FDE with 512 Ki rows as JSON (issue 10:
// a million rows cost 1.4 GB): rows must be written as they are computed.
func TestManyRowsCFIJSON(t *testing.T) {
	const n = 512 << 10
	if !memtest.InChild(t) {
		memtest.AtMost(t, 200<<20, fmt.Sprintf("printing %d rows as JSON", n))
		return
	}
	var lines lineCounter
	if err := WriteCFIJSON(&lines, &CFIInput{Path: "rows", ELF: manyRows(n)}); err != nil {
		t.Fatal(err)
	} else if lines < 10*n {
		t.Errorf("%d lines for %d rows", lines, n)
	}
}

package cfi

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// TestJSONLayout checks, on the corpus files up to 256 KB, that the streamed JSON is
// laid out exactly as encoding/json's indented Encoder lays out the same
// document (WriteJSON used to build the whole document and encode it at
// once), and that it holds every entry and every row of the tables.
func TestJSONLayout(t *testing.T) {
	n := 0
	for _, p := range corpusFrames(t) {
		if st, err := os.Stat(p); err != nil || st.Size() > 256<<10 {
			continue
		}
		n++
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := WriteJSON(&got, f, p, ""); err != nil {
			t.Fatalf("%s: %v", rel(t, p), err)
		}
		var doc jsonFile
		if err := json.Unmarshal(got.Bytes(), &doc); err != nil {
			t.Fatalf("%s: output does not parse: %v", rel(t, p), err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", " ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: layout differs from encoding/json's:\n%s", rel(t, p), corpus.FirstDiff(got.String(), want.String()))
		}
		for _, js := range doc.Sections {
			tab, err := FromELF(f, js.Name)
			if err != nil {
				t.Fatal(err)
			}
			entries, rows, jrows := 0, 0, 0
			for it := tab.Entries(); it.Next(); entries++ {
				if e := it.Entry(); e.Kind == KindFDE && e.Err == nil {
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
				t.Errorf("%s %s: %d entries and %d FDE rows in JSON, tables have %d and %d", rel(t, p), js.Name, len(js.Entries), jrows, entries, rows)
			}
		}
		f.Close()
	}
	if n == 0 {
		t.Fatal("no corpus file compared")
	}
	t.Logf("compared %d files", n)
}

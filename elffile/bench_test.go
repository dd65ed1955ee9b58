package elffile

import (
	"os"
	"testing"
)

// libc is a large shared library (about 2 MB, 70 sections) to time the
// header work of the writers on.
const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"

// BenchmarkPlanSFrameSegment decodes libc's header tables and plans a
// new segment, as sframe gen does before encoding.
func BenchmarkPlanSFrameSegment(b *testing.B) {
	src, err := os.ReadFile(libc)
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := PlanSFrameSegment(src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewriteSections rewrites libc's .shstrtab with contents of the
// same size (the image is copied, the headers decoded and written back).
func BenchmarkRewriteSections(b *testing.B) {
	src, err := os.ReadFile(libc)
	if err != nil {
		b.Skip(err)
	}
	f := openBytes(b, src)
	sec := f.Section(".shstrtab")
	if sec == nil {
		b.Skip("no .shstrtab")
	}
	data, _ := sec.Data()
	idx := SectionIndex(f, sec)
	for b.Loop() {
		if _, err := RewriteSections(src, []SectionUpdate{{Index: idx, Data: data}}); err != nil {
			b.Fatal(err)
		}
	}
}

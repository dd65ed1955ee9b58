package bpfunwind

import (
	"debug/elf"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/unwind"
)

func TestLibcTime(t *testing.T) {
	t0 := time.Now()
	f, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip(err)
	}
	tb := unwind.LoadFileTables(f, "/usr/lib/x86_64-linux-gnu/libc.so.6", unwind.LoadOptions{SFrameFromCFI: true})
	t1 := time.Now()
	tab := BuildTable(tb, arch.AMD64)
	t.Logf("load %v build %v rows %d skipped %v", t1.Sub(t0), time.Since(t1), len(tab.Rows), tab.Skipped)
}

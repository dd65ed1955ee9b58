package dump

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/unwind"
)

// TestTraceTextQuotesNames prints a trace whose thread, function, file
// and module names carry terminal escape sequences and newlines (a
// target's binaries and /proc say what they like): each is escaped, and
// every frame stays on one line.
func TestTraceTextQuotesNames(t *testing.T) {
	mod := &unwind.Module{Name: "/tmp/\x1b[31mlib.so", Start: 0x1000, End: 0x2000}
	tr := &unwind.Trace{PID: 1, Threads: []unwind.ThreadTrace{{TID: 1, Name: "a\x1b]0;x\x07",
		Frames: []unwind.SymFrame{{Frame: unwind.Frame{PC: 0x1234, Module: mod}, Func: "f\nThread 9 (forged):", File: "s\x9b.c", Line: 3}}}}}
	var b bytes.Buffer
	if err := WriteTraceText(&b, tr); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\x9b") || strings.Count(out, "\n") != 2 {
		t.Errorf("control characters reach the text:\n%q", out)
	}
	for _, want := range []string{`Thread 1 (a\x1b]0;x\x07):`, `f\x0aThread 9 (forged):`, `s\x9b.c:3`, `\x1b[31mlib.so`} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %s:\n%s", want, out)
		}
	}
}

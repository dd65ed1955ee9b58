package stackprof_test

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/sframekit/sframekit/stackprof"
)

// TestWritePprof writes a profile with WritePprof: pprof must read back
// the same profile, and the gzip stream must say it was compressed at
// the fastest level (XFL 4, RFC 1952), which costs the profiler a
// fraction of profile.Write's default level on many distinct stacks.
func TestWritePprof(t *testing.T) {
	fn := &profile.Function{ID: 1, Name: "main", SystemName: "main"}
	loc := &profile.Location{ID: 1, Address: 0x401000, Line: []profile.Line{{Function: fn}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}},
		Sample:     []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{3}}},
		Location:   []*profile.Location{loc},
		Function:   []*profile.Function{fn},
	}
	var buf bytes.Buffer
	if err := stackprof.WritePprof(&buf, p); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) < 10 || b[0] != 0x1f || b[1] != 0x8b || b[8] != 4 {
		t.Fatalf("not a gzip stream compressed at the fastest level: % x", b[:min(len(b), 10)])
	}
	q, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Sample) != 1 || q.Sample[0].Value[0] != 3 || q.Sample[0].Location[0].Line[0].Function.Name != "main" {
		t.Fatalf("read back %v", q)
	}
}

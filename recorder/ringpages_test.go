package recorder

import (
	"math"
	"os"
	"runtime"
	"testing"
)

// TestRingPages checks each ring's size against the rule ringPages
// states: the power of two nearest (on a log scale) to a quarter of a
// second of one busy thread's samples, 128 pages at least and 64 MiB for
// all the CPUs at most; at sframe's defaults, 4 MiB, not the 8 MiB that
// rounding up gave.
func TestRingPages(t *testing.T) {
	page := float64(os.Getpagesize())
	limit := 64 << 20 / page / float64(max(runtime.NumCPU(), 1))
	for _, o := range []Options{
		{},
		{Freq: 999},
		{Freq: 499},
		{Freq: 4000},
		{Freq: 99, StackSize: 8192},
		{Freq: 20000, StackSize: 65528},
		{Freq: 1},
		{RingPages: 64},
	} {
		got := o.ringPages()
		if o.RingPages != 0 {
			if got != o.RingPages {
				t.Errorf("%+v: %d pages, want the %d asked for", o, got, o.RingPages)
			}
			continue
		}
		if got&(got-1) != 0 {
			t.Errorf("%+v: %d pages, not a power of two", o, got)
		}
		want := float64(o.freq()) * float64(o.stackSize()+512) / 4 / page
		g := float64(got)
		if g < 128 {
			t.Errorf("%+v: %d pages, fewer than 128", o, got)
		}
		if g > 128 && g > max(limit, 128) {
			t.Errorf("%+v: %d pages, past the limit of %.0f", o, got, limit)
		}
		// Not past the nearest power (unless the floor), and not short
		// of it (unless the limit).
		if g > 128 && g > want*math.Sqrt2 || g*2 <= limit && g > 128 && g < want/math.Sqrt2 || g == 128 && 256 <= limit && want > 128*math.Sqrt2 {
			t.Errorf("%+v: %d pages, want the power of two nearest %.0f", o, got, want)
		}
	}
	if os.Getpagesize() == 4096 {
		if got := (&Options{}).ringPages(); got != 1024 {
			t.Errorf("default options: %d pages, want 1,024 (4 MiB: a quarter of a second of 999 samples of 16.5 KiB)", got)
		}
	}
}

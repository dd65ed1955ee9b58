package sframegen

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/sframekit/sframekit/sframe"
)

// Stats summarises what a conversion covers.
type Stats struct {
	// CFIFuncs is the number of FDEs read and CFIBytes the bytes of code
	// they describe.
	CFIFuncs int
	CFIBytes uint64
	// Funcs is the number of SFrame functions written (a PLT FDE gives
	// two) and CoveredBytes the bytes of code they describe with rows.
	Funcs        int
	CoveredBytes uint64
	// Rows is the number of FREs written.
	Rows int
	// Flex, PCMask and Signal count functions written as flexible FDEs,
	// PC-mask (PLT) FDEs and signal frames; SignalNoRows the signal
	// frames written without rows because their CFI cannot be expressed.
	Flex, PCMask, Signal, SignalNoRows int
	// SkippedFuncs and SkippedBytes count the FDEs left out.
	SkippedFuncs int
	SkippedBytes uint64
	// Reasons groups the skipped FDEs by reason, most bytes first.
	Reasons []ReasonCount
	// TextBytes is the size of the file's executable sections (0 when
	// converting a bare table); code without any CFI is not covered.
	TextBytes uint64
	// BadEntries counts CFI entries that could not be decoded;
	// WalkError is the error that ended the walk early, if any.
	BadEntries int
	WalkError  string
}

// ReasonCount is the number of functions and bytes left out for a reason.
type ReasonCount struct {
	Reason Reason
	Funcs  int
	Bytes  uint64
}

func (r *Result) computeStats() {
	s := &r.Stats
	s.Funcs, s.CoveredBytes, s.Rows = len(r.Funcs), 0, 0
	s.Flex, s.PCMask, s.Signal, s.SignalNoRows = 0, 0, 0, 0
	for i := range r.Funcs {
		f := &r.Funcs[i]
		s.Rows += len(f.Rows)
		if len(f.Rows) > 0 {
			s.CoveredBytes += uint64(f.Size)
		} else if f.Signal {
			s.SignalNoRows++
		}
		if f.Type == sframe.FDEFlex {
			s.Flex++
		}
		if f.PCType == sframe.PCMask {
			s.PCMask++
		}
		if f.Signal {
			s.Signal++
		}
	}
	s.SkippedFuncs, s.SkippedBytes = len(r.Skipped), 0
	idx := map[Reason]int{}
	s.Reasons = s.Reasons[:0]
	for _, k := range r.Skipped {
		n := k.End - k.Start
		if k.End < k.Start {
			n = 0
		}
		s.SkippedBytes += n
		i, ok := idx[k.Reason]
		if !ok {
			i = len(s.Reasons)
			idx[k.Reason] = i
			s.Reasons = append(s.Reasons, ReasonCount{Reason: k.Reason})
		}
		rc := &s.Reasons[i]
		rc.Funcs++
		rc.Bytes += n
	}
	slices.SortStableFunc(s.Reasons, func(a, b ReasonCount) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		return cmp.Compare(a.Reason.String(), b.Reason.String())
	})
}

// noun returns word for a count of n: singular for one, else plural.
func noun[T int | uint64](n T, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func pct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// Write prints the statistics as text, one fact per line.
func (s *Stats) Write(w io.Writer) error {
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	p("CFI functions:      %d (%d %s of code)\n", s.CFIFuncs, s.CFIBytes, noun(s.CFIBytes, "byte"))
	p("SFrame functions:   %d written, %d %s (%d flexible, %d PC-mask, %d signal)\n", s.Funcs, s.Rows, noun(s.Rows, "row"), s.Flex, s.PCMask, s.Signal)
	p("covered:            %d %s = %.2f%% of the code with CFI", s.CoveredBytes, noun(s.CoveredBytes, "byte"), pct(s.CoveredBytes, s.CFIBytes))
	if s.TextBytes > 0 {
		p(", %.2f%% of %d %s of executable sections", pct(s.CoveredBytes, s.TextBytes), s.TextBytes, noun(s.TextBytes, "byte"))
	}
	p("\n")
	p("left out:           %d %s, %d %s\n", s.SkippedFuncs, noun(s.SkippedFuncs, "function"), s.SkippedBytes, noun(s.SkippedBytes, "byte"))
	for _, r := range s.Reasons {
		p("  %6d %-9s %9d %-5s  %s\n", r.Funcs, noun(r.Funcs, "function"), r.Bytes, noun(r.Bytes, "byte"), r.Reason)
	}
	if s.SignalNoRows > 0 {
		p("  %6d signal %s written without rows (their CFI cannot be expressed)\n", s.SignalNoRows, noun(s.SignalNoRows, "frame"))
	}
	if s.BadEntries > 0 {
		p("CFI entries that could not be decoded: %d %s\n", s.BadEntries, s.WalkError)
	}
	return err
}

package unwind

import (
	"debug/elf"

	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/sframegen"
)

// LoadOptions adjust how LoadTablesWith, and a Cache, load a file's
// tables.
type LoadOptions struct {
	// SFrameFromCFI compiles an SFrame section in memory from the CFI of
	// a file that has CFI but no usable .sframe (glibc's libraries
	// today), as sframe gen would (sframegen.FromCFITable, version 3,
	// then sframe.Parse and Validate), so that its frames take the
	// unwinder's SFrame path, several times cheaper per frame than CFI.
	// The functions SFrame cannot describe, which sframegen leaves out
	// with a reason, keep being unwound from the CFI, which the tables
	// keep. It costs the conversion, once per file (about 15 ms for
	// libc.so.6), and a few MB per file: it pays when many stacks go
	// through the file (a profiler's samples), not for one stack.
	SFrameFromCFI bool
}

// GenStats describe SFrame compiled from CFI (LoadOptions.SFrameFromCFI).
type GenStats struct {
	// Funcs is the number of SFrame functions written, Skipped the
	// number of CFI functions (FDEs) left to the CFI.
	Funcs, Skipped int
}

// LoadTablesWith reads the SFrame and CFI tables of f as LoadTables
// does, then applies opts.
func LoadTablesWith(f *elf.File, opts LoadOptions) *Tables {
	t := LoadTables(f)
	if opts.SFrameFromCFI && t.SFrame == nil && t.CFI != nil && f.Type != elf.ET_REL {
		t.genSFrame(f)
	}
	return t
}

// genSFrame compiles t's CFI into t.SFrame. A conversion that fails is
// recorded in Errs, and the CFI alone is used.
func (t *Tables) genSFrame(f *elf.File) {
	abi, err := sframegen.ABIFor(f)
	if err != nil {
		return // an architecture SFrame does not describe: CFI only
	}
	r, err := sframegen.FromCFITable(t.CFI, abi, sframegen.Options{})
	if err == nil {
		dedupe(r)
		var s *sframe.Section
		if s, err = encodeGen(r, cfiAddr(f)); err == nil {
			t.SFrame, t.sfx = s, buildSFIndex(s)
			t.Gen = &GenStats{Funcs: len(r.Funcs), Skipped: len(r.Skipped)}
			return
		}
	}
	t.Errs = append(t.Errs, err)
}

// encodeGen encodes r as a section at addr and parses it back.
func encodeGen(r *sframegen.Result, addr uint64) (*sframe.Section, error) {
	data, err := r.Encode(addr)
	if err != nil {
		return nil, err
	}
	s, err := sframe.Parse(data, addr)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// cfiAddr is where the generated section is said to lie: at the CFI
// section, near the code, so that the function starts, encoded relative
// to the section, fit their 32 bits.
func cfiAddr(f *elf.File) uint64 {
	for _, name := range []string{".eh_frame", ".debug_frame", ".text"} {
		if s := f.Section(name); s != nil && s.Addr != 0 {
			return s.Addr
		}
	}
	return 0
}

// dedupe drops the functions of r whose start repeats an earlier one's
// (two FDEs for one address): a sorted SFrame index needs distinct
// starts. sframegen.FromCFI does the same for linked files.
func dedupe(r *sframegen.Result) {
	sorted := true
	for i := 1; i < len(r.Funcs) && sorted; i++ {
		sorted = r.Funcs[i-1].Start < r.Funcs[i].Start
	}
	if sorted {
		return // no start can repeat
	}
	seen := make(map[uint64]bool, len(r.Funcs))
	j := 0
	for i := range r.Funcs {
		if seen[r.Funcs[i].Start] {
			r.Skipped = append(r.Skipped, sframegen.Skip{Start: r.Funcs[i].Start, Reason: sframegen.ReasonDuplicate})
			continue
		}
		seen[r.Funcs[i].Start] = true
		r.Funcs[j] = r.Funcs[i]
		j++
	}
	r.Funcs = r.Funcs[:j]
}

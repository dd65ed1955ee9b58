package unwind

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/sframekit/sframekit/cfi"

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
	// DebugDirs are the roots searched for separate debug files
	// (LoadFileTables), as symbolize.Symbolizer.DebugDirs; nil means
	// symbolize.DefaultDebugDir.
	DebugDirs []string
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
	t.compile(f, opts)
	return t
}

// compile applies opts.SFrameFromCFI to t, the tables of f.
func (t *Tables) compile(f *elf.File, opts LoadOptions) {
	if opts.SFrameFromCFI && t.SFrame == nil && t.cfi != nil && f.Type != elf.ET_REL {
		switch s, g, err := CompileSFrame(t.cfi, nil); {
		case err == errNoABI:
			// An architecture SFrame does not describe: CFI only.
		case err != nil:
			t.Errs = append(t.Errs, err)
		default:
			t.SFrame, t.sfx, t.Gen = s, buildSFIndex(s, slowRanges(t.outer, t.sigpanic)), g
		}
	}
}

var errNoABI = errors.New("SFrame does not describe this architecture")

// CompileSFrame compiles an SFrame section from the CFI c, as
// LoadOptions.SFrameFromCFI does for a whole file: for the functions
// (FDEs) covering the addresses pcs (ELF addresses), or for every one
// when pcs is nil, each from the table that covers it (.eh_frame, then
// .debug_frame: see CFITable). It is version 3 (sframegen.FromFDEs or
// FromCFITables), laid out at c.T's address, parsed back and validated.
// A Module takes it as its SFrame, with the stats as its SFrameGen and c
// as its CFI, for the functions left out and those pcs did not name.
func CompileSFrame(c *CFITable, pcs []uint64) (*sframe.Section, *GenStats, error) {
	t := c.T
	abi, ok := sframe.ABIFor(t.Arch(), t.ByteOrder() == binary.BigEndian)
	if !ok {
		return nil, nil, errNoABI
	}
	var r *sframegen.Result
	var err error
	if pcs == nil {
		r, err = sframegen.FromCFITables(c.tables(), abi, sframegen.Options{})
	} else {
		tabs := c.tables()
		byTab := make([][]cfi.FDE, len(tabs))
		for _, pc := range pcs {
			if ft, f, err := c.FindFDE(pc); err == nil {
				i := slices.Index(tabs, ft)
				byTab[i] = append(byTab[i], f)
			}
		}
		for i, tab := range tabs {
			fdes := byTab[i]
			slices.SortFunc(fdes, func(a, b cfi.FDE) int { return cmp.Compare(a.PCBegin, b.PCBegin) })
			fdes = slices.CompactFunc(fdes, func(a, b cfi.FDE) bool { return a.PCBegin == b.PCBegin })
			more, err := sframegen.FromFDEs(tab, abi, fdes, sframegen.Options{})
			if err != nil {
				return nil, nil, err
			}
			if r == nil {
				r = more
			} else {
				r.Append(more)
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	r.Dedupe()
	data, err := r.Encode(t.Addr())
	if err != nil {
		return nil, nil, err
	}
	s, err := sframe.Parse(data, t.Addr())
	if err != nil {
		return nil, nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	return s, &GenStats{Funcs: len(r.Funcs), Skipped: len(r.Skipped)}, nil
}

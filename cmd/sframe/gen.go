package main

import (
	"debug/elf"
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/sframegen"
)

func init() {
	register("gen", "generate an SFrame section from an ELF file's DWARF CFI", runGen)
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gen", "[--to-version 2|3] [--raw [--base ADDR]] -o OUT FILE", stdout, stderr)
	rw := newRewrite(fs, 3, "SFrame `VERSION` to write: 2 or 3",
		"write only the bare SFrame section",
		"", "with --raw: lay the section out as loaded at `ADDR` (default: the address the loadable copy would use)")
	cfiSec := fs.String("cfi", "", "read CFI from `SECTION` (.eh_frame or .debug_frame; default .eh_frame, and .debug_frame for the functions it does not cover)")
	stats := fs.Bool("stats", false, "print how many functions and bytes of code are covered, and why the rest is not")
	src, perm, code, ok := rw.read(args, func() int {
		switch {
		case *rw.version != 2 && *rw.version != 3:
			return fs.fail("--to-version must be 2 or 3")
		case *rw.base != "" && !*rw.raw:
			return fs.fail("--base needs --raw")
		}
		return 0
	})
	if !ok {
		return code
	}
	in := rw.in
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sframe gen: %s: %v; nothing written\n", in, err)
		return 1
	}
	f, err := elffile.NewFile(src)
	if err != nil {
		return fail(err)
	}
	res, err := sframegen.FromCFI(f.File, sframegen.Options{Version: sframe.Version(*rw.version), Section: *cfiSec})
	if err != nil {
		return fail(err)
	}
	var plan *elffile.SegmentPlan
	if !*rw.raw || *rw.base == "" {
		if plan, err = elffile.PlanSFrameSegment(src); err != nil {
			return fail(err)
		}
	}
	var out []byte
	var addr uint64
	if *rw.raw {
		if *rw.base != "" {
			if addr, err = strconv.ParseUint(*rw.base, 0, 64); err != nil {
				return fs.fail("bad --base %q", *rw.base)
			}
		} else {
			addr = plan.Addr
		}
		if out, err = res.Encode(addr); err != nil {
			return fail(err)
		}
	} else {
		addr = plan.Addr
		data, err := res.Encode(addr)
		if err != nil {
			return fail(err)
		}
		if out, err = elffile.AddSFrameSegment(src, plan, data); err != nil {
			return fail(err)
		}
		if old := elffile.FindSFrame(f.File, ""); old != nil {
			fmt.Fprintf(stderr, "sframe gen: note: %s already has an SFrame section (%s%s); the output has the new one instead\n",
				in, old.Name, sectionVersion(old))
		}
	}
	msgs := rw.write(out, perm, stdout, stderr)
	if msgs == nil {
		return 1
	}
	what := "loadable .sframe"
	if *rw.raw {
		what = "bare section"
	}
	fmt.Fprintf(msgs, "%s: %s %s at %#x, %s, %d left out\n", *rw.output, sframe.Version(*rw.version), what, addr,
		count(res.Stats.Funcs, "function"), res.Stats.SkippedFuncs)
	if *stats {
		res.Stats.Write(msgs)
		for _, s := range res.Skipped {
			fmt.Fprintf(msgs, "  left out %s\n", s)
		}
	}
	return 0
}

// count formats n and the noun, singular or plural: "1 function", "2
// functions".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// sectionVersion returns ", SFRAME_VERSION_N" for a section that starts
// with SFrame's magic number, or "": it reads the preamble's first four
// bytes only (through elffile, so a compressed section is decompressed
// that far), since a note is not worth reading a section that may claim a
// gigabyte.
func sectionVersion(s *elf.Section) string {
	var b [4]byte
	if _, err := elffile.ReadSectionAt(s, b[:], 0); err != nil {
		return ""
	}
	if m := uint16(b[0]) | uint16(b[1])<<8; m != sframe.Magic && m>>8|m<<8 != sframe.Magic {
		return ""
	}
	return ", " + sframe.Version(b[2]).String()
}

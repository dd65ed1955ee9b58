package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/sframekit/sframekit/convert"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

func init() {
	register("gen", "generate an SFrame section from an ELF file's DWARF CFI", runGen)
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("gen", "[--to-version 2|3] [--raw [--base ADDR]] -o OUT FILE", stdout, stderr)
	toVersion := fs.Int("to-version", 3, "SFrame `VERSION` to write: 2 or 3")
	output := fs.String("output", "", "write the result to `FILE` (required; never the input)")
	fs.alias("o", "output")
	raw := fs.Bool("raw", false, "write only the bare SFrame section")
	base := fs.String("base", "", "with --raw: lay the section out as loaded at `ADDR` (default: the address the loadable copy would use)")
	cfiSec := fs.String("cfi", "", "read CFI from `SECTION` (.eh_frame or .debug_frame; default .eh_frame if present)")
	stats := fs.Bool("stats", false, "print how many functions and bytes of code are covered, and why the rest is not")
	files, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(files) == 0:
		return fs.noInput()
	case len(files) > 1:
		return fs.fail("one input file, not %d", len(files))
	case *output == "":
		return fs.fail("--output OUT is required")
	case *toVersion != 2 && *toVersion != 3:
		return fs.fail("--to-version must be 2 or 3")
	case *base != "" && !*raw:
		return fs.fail("--base needs --raw")
	}
	in := files[0]
	if same(in, *output) {
		fmt.Fprintf(stderr, "sframe gen: %s: refusing to overwrite the input\n", in)
		return 2
	}
	src, err := os.ReadFile(in)
	if err != nil {
		fmt.Fprintf(stderr, "sframe gen: %v\n", err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sframe gen: %s: %v; nothing written\n", in, err)
		return 1
	}
	f, err := elffile.NewFile(src)
	if err != nil {
		return fail(err)
	}
	res, err := convert.FromELF(f, convert.Options{Version: sframe.Version(*toVersion), Section: *cfiSec})
	if err != nil {
		return fail(err)
	}
	var plan *elffile.SegmentPlan
	if !*raw || *base == "" {
		if plan, err = elffile.PlanSFrameSegment(src); err != nil {
			return fail(err)
		}
	}
	var out []byte
	var addr uint64
	if *raw {
		if *base != "" {
			if addr, err = strconv.ParseUint(*base, 0, 64); err != nil {
				return fs.fail("bad --base %q", *base)
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
	}
	if err := writeAtomic(*output, out, in); err != nil {
		fmt.Fprintf(stderr, "sframe gen: %v\n", err)
		return 1
	}
	what := "loadable .sframe"
	if *raw {
		what = "bare section"
	}
	fmt.Fprintf(stdout, "%s: %s %s at %#x, %d function(s), %d left out\n", *output, sframe.Version(*toVersion), what, addr, res.Stats.Funcs, res.Stats.SkippedFuncs)
	if *stats {
		res.Stats.Write(stdout)
		for _, s := range res.Skipped {
			fmt.Fprintf(stdout, "  left out %s\n", s)
		}
	}
	return 0
}

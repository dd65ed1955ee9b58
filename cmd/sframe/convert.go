package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/sframegen"
)

func init() {
	register("convert", "rewrite an SFrame section (bare or in an ELF file) as version 2 or 3", runConvert)
}

func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", "--to-version 2|3 -o OUT IN", stdout, stderr)
	rw := newRewrite(fs, 0, "SFrame `VERSION` to write: 2 or 3 (required)",
		"read IN as a bare SFrame section, not an ELF file",
		"0", "with --raw: the address `ADDR` the section is loaded at")
	section := fs.String("section", "", "convert the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	drop := fs.Bool("drop-unrepresentable", false, "drop the functions the target version cannot express instead of failing")
	var baseAddr uint64
	src, perm, code, ok := rw.read(args, func() int {
		switch {
		case !fs.isSet("to-version"):
			return fs.fail("--to-version 2 or 3 is required")
		case *rw.version != 2 && *rw.version != 3:
			return fs.fail("--to-version %d: only versions 2 and 3 can be written", *rw.version)
		case fs.isSet("base") && !*rw.raw:
			return fs.fail("--base needs --raw")
		}
		var err error
		if baseAddr, err = strconv.ParseUint(*rw.base, 0, 64); err != nil {
			return fs.fail("bad --base %q", *rw.base)
		}
		return 0
	})
	if !ok {
		return code
	}
	in := rw.in
	if !*rw.raw {
		if _, err := elffile.NewFile(src); err != nil {
			fs.fileError(in, err)
			return 1
		}
	}
	opts := sframegen.ToVersionOptions{Version: sframe.Version(*rw.version), Section: *section, DropUnrepresentable: *drop}
	var res *sframegen.ToVersionResult
	var err error
	if *rw.raw {
		res, err = sframegen.ToVersionRaw(src, baseAddr, opts)
	} else {
		res, err = sframegen.ToVersion(src, opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sframe convert: %s: %v; nothing written\n", in, err)
		return 1
	}
	for _, d := range res.Dropped {
		fmt.Fprintf(stderr, "sframe convert: %s: dropped %s: %v\n", in, d, d.Err)
	}
	if res.Segment != nil {
		fmt.Fprintf(stderr, "sframe convert: note: %s: the %s section does not fit in the place of the old one; it goes to a new loadable segment at %#x\n",
			in, sframe.Version(*rw.version), res.Segment.Addr)
	}
	msgs := rw.write(res.Data, perm, stdout, stderr)
	if msgs == nil {
		return 1
	}
	fmt.Fprintf(msgs, "%s: %s -> %s, %s written, %d dropped\n", *rw.output, res.From, sframe.Version(*rw.version), count(res.Funcs, "function"), len(res.Dropped))
	return 0
}

package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/sframekit/sframekit/dump"
)

func init() {
	register("dump", "print SFrame sections as objdump --sframe does (or as JSON)", runDump)
}

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump", "FILE...", stderr)
	section := fs.String("section", "", "dump the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	raw := fs.Bool("raw", false, "read each FILE as a bare SFrame section, not an ELF file")
	base := fs.String("base", "0", "with --raw: the section's load `ADDR`ess")
	asJSON := fs.Bool("json", false, "print one JSON object per file")
	files, code, ok := parseOperands(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fs.Usage()
		return 2
	}
	baseAddr, err := strconv.ParseUint(*base, 0, 64)
	if err != nil {
		fmt.Fprintf(stderr, "sframe dump: bad --base %q\n", *base)
		return 2
	}
	status := 0
	for _, path := range files {
		var in *dump.Input
		if *raw {
			in, err = dump.LoadRaw(path, baseAddr, *section)
		} else {
			in, err = dump.LoadELF(path, *section)
		}
		if err == nil {
			if *asJSON {
				err = dump.JSON(stdout, in)
			} else {
				dump.FileHeader(stdout, path, in.Format)
				err = dump.Text(stdout, in.SFrame, in.Section)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "sframe dump: %s: %v\n", path, err)
			status = 1
		}
	}
	return status
}

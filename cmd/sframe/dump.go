package main

import (
	"io"
	"strconv"

	"github.com/sframekit/sframekit/dump"
)

func init() {
	register("dump", "print SFrame sections as objdump --sframe does (or as JSON)", runDump)
}

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump", "FILE...", stdout, stderr)
	section := fs.String("section", "", "dump the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	raw := fs.Bool("raw", false, "read each FILE as a bare SFrame section, not an ELF file (needs --base)")
	base := fs.String("base", "", "with --raw: the address `ADDR` the section is loaded at")
	asJSON := fs.Bool("json", false, "print one JSON object per file (addresses as \"0x...\" strings; see README)")
	files, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	switch {
	case len(files) == 0:
		return fs.noInput()
	case *raw && *base == "":
		return fs.fail("--raw needs --base ADDR, the section's load address")
	case *base != "" && !*raw:
		return fs.fail("--base needs --raw")
	}
	var baseAddr uint64
	if *raw {
		var err error
		if baseAddr, err = strconv.ParseUint(*base, 0, 64); err != nil {
			return fs.fail("bad --base %q", *base)
		}
	}
	status := 0
	for _, path := range files {
		in, err := loadDump(path, *raw, baseAddr, *section)
		if err == nil {
			if *asJSON {
				err = dump.WriteSFrameJSON(stdout, in)
			} else {
				dump.WriteFileHeader(stdout, in.Path, in.Format)
				err = dump.WriteSFrameText(stdout, in)
			}
		}
		if err != nil {
			fs.fileError(path, err)
			status = 1
		}
	}
	return status
}

// loadDump reads the SFrame section of path ("-" for standard input).
func loadDump(path string, raw bool, base uint64, section string) (*dump.Input, error) {
	if raw {
		data, err := readInput(path)
		if err != nil {
			return nil, err
		}
		return dump.FromRaw(data, displayName(path), base, section)
	}
	f, err := openELF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return dump.FromELF(f.File, displayName(path), section)
}

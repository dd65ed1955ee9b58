package main

import (
	"bufio"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/sframekit/sframekit/dump"
)

// The commands that print a file's unwind tables as binutils prints
// them, or as JSON: cfi (the DWARF CFI, as readelf) and dump (the SFrame
// section, as objdump).
func init() {
	register("cfi", "print DWARF CFI tables (like readelf --debug-dump=frames-interp)", runCFI)
	register("dump", "print SFrame sections as objdump --sframe does (or as JSON)", runDump)
}

// runCFI prints the CFI tables of each file: readelf-identical text by
// default, or the JSON form of dump.WriteCFIJSON with --json. A file that
// cannot be read gets a one-line error and exit status 1; the others are
// still printed.
func runCFI(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cfi", "FILE...", stdout, stderr)
	section := fs.String("section", "", "print only `SECTION`: .eh_frame, .debug_frame or .eh_frame_hdr (default: all, in file order)")
	asJSON := fs.Bool("json", false, "print the tables as JSON (addresses as \"0x...\" strings; see README and package dump, WriteCFIJSON)")
	readelf := fs.String("readelf-version", string(dump.Readelf247), "print the text of readelf `VERSION`: 2.47, or 2.40, which prints no .eh_frame_hdr block")
	fs.epilogue = `The text is that of GNU readelf 2.47's --debug-dump=frames-interp (-wF),
byte for byte; --readelf-version 2.40 gives readelf 2.40's, which differs
only in printing no .eh_frame_hdr section. Compare with your readelf as
  diff <(readelf -wF FILE) <(sframe cfi --readelf-version "$(readelf --version | sed -n '1s/.* //p')" FILE)
`
	files, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		return fs.noInput()
	}
	switch *section {
	case "", ".eh_frame", ".debug_frame", ".eh_frame_hdr":
	default:
		return fs.fail("unknown section %q (want .eh_frame, .debug_frame or .eh_frame_hdr)", *section)
	}
	version := dump.ReadelfVersion(*readelf)
	switch {
	case !slices.Contains(dump.ReadelfVersions, version):
		return fs.fail("--readelf-version %s: the text of readelf 2.40 or 2.47 only", *readelf)
	case *asJSON && fs.isSet("readelf-version"):
		return fs.fail("--readelf-version is for the text, not --json")
	case *section == ".eh_frame_hdr" && version == dump.Readelf240:
		return fs.fail("--section .eh_frame_hdr: readelf 2.40 does not print it")
	}
	// The work is a burst of short-lived garbage bounded by the input
	// sizes; collecting less often makes large files print faster.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	w := bufio.NewWriterSize(stdout, 256<<10)
	defer w.Flush()
	header := len(files) > 1 && !*asJSON
	return fs.eachFile(files, func(name string) error {
		err := cfiFile(w, name, *section, *asJSON, header, version)
		if err != nil {
			w.Flush() // what the file printed goes out before its error
		}
		return err
	})
}

func cfiFile(w io.Writer, name, section string, asJSON, header bool, version dump.ReadelfVersion) error {
	f, err := openELF(name)
	if err != nil {
		return err
	}
	defer f.Close()
	name = displayName(name)
	if header {
		// Like readelf with several files.
		fmt.Fprintf(w, "\nFile: %s\n", name)
	}
	if asJSON {
		return dump.WriteCFIJSON(w, &dump.CFIInput{Path: name, ELF: f.File, Section: section})
	}
	return dump.WriteCFIText(w, &dump.CFIInput{ELF: f.File, Section: section, Readelf: version})
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
	return fs.eachFile(files, func(path string) error {
		in, err := loadDump(path, *raw, baseAddr, *section)
		if err != nil {
			return err
		}
		if *asJSON {
			return dump.WriteSFrameJSON(stdout, in)
		}
		dump.WriteFileHeader(stdout, in.Path, in.Format)
		return dump.WriteSFrameText(stdout, in)
	})
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

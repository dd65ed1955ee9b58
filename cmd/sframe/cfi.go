package main

import (
	"bufio"
	"fmt"
	"io"
	"runtime/debug"
	"slices"

	"github.com/sframekit/sframekit/dump"
)

func init() {
	register("cfi", "print DWARF CFI tables (like readelf --debug-dump=frames-interp)", runCFI)
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
	status := 0
	for _, name := range files {
		header := len(files) > 1 && !*asJSON
		if err := cfiFile(w, name, *section, *asJSON, header, version); err != nil {
			w.Flush()
			fs.fileError(name, err)
			status = 1
		}
	}
	return status
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

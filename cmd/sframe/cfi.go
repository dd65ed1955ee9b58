package main

import (
	"bufio"
	"fmt"
	"io"
	"runtime/debug"

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
	// The work is a burst of short-lived garbage bounded by the input
	// sizes; collecting less often makes large files print faster.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	w := bufio.NewWriterSize(stdout, 256<<10)
	defer w.Flush()
	status := 0
	for _, name := range files {
		header := len(files) > 1 && !*asJSON
		if err := cfiFile(w, name, *section, *asJSON, header); err != nil {
			w.Flush()
			fs.fileError(name, err)
			status = 1
		}
	}
	return status
}

func cfiFile(w io.Writer, name, section string, asJSON, header bool) error {
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
	return dump.WriteCFIText(w, &dump.CFIInput{ELF: f.File, Section: section})
}

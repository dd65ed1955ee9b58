package main

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/sframekit/sframekit/cfi"
)

func init() {
	register("cfi", "print DWARF CFI tables (like readelf --debug-dump=frames-interp)", runCFI)
}

// runCFI prints the CFI tables of each file: readelf-identical text by
// default, or the JSON form of cfi.WriteJSON with --json. A file that
// cannot be read gets a one-line error and exit status 1; the others are
// still printed.
func runCFI(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cfi", "FILE...", stderr)
	section := fs.String("section", "", "print only this section: .eh_frame, .debug_frame or .eh_frame_hdr (default: all, in file order)")
	asJSON := fs.Bool("json", false, "print the tables as JSON (see package cfi, WriteJSON)")
	files, code, ok := parseOperands(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "sframe cfi: no input files")
		fs.Usage()
		return 2
	}
	switch *section {
	case "", ".eh_frame", ".debug_frame", ".eh_frame_hdr":
	default:
		fmt.Fprintf(stderr, "sframe cfi: unknown section %q (want .eh_frame, .debug_frame or .eh_frame_hdr)\n", *section)
		return 2
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
			fmt.Fprintf(stderr, "sframe cfi: %s: %v\n", name, err)
			status = 1
		}
	}
	return status
}

func cfiFile(w io.Writer, name, section string, asJSON, header bool) error {
	f, err := elf.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if header {
		// Like readelf with several files.
		fmt.Fprintf(w, "\nFile: %s\n", name)
	}
	if asJSON {
		return cfi.WriteJSON(w, f, name, section)
	}
	return cfi.Dump(w, f, section)
}

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/outfile"
	"github.com/sframekit/sframekit/sframe"
	"github.com/sframekit/sframekit/sframegen"
)

func init() {
	register("convert", "rewrite an SFrame section (bare or in an ELF file) as version 2 or 3", runConvert)
}

func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("convert", "--to-version 2|3 -o OUT IN", stdout, stderr)
	toVersion := fs.Int("to-version", 0, "SFrame `VERSION` to write: 2 or 3 (required)")
	output := fs.rewriteOutput()
	raw := fs.Bool("raw", false, "read IN as a bare SFrame section, not an ELF file")
	base := fs.String("base", "0", "with --raw: the address `ADDR` the section is loaded at")
	section := fs.String("section", "", "convert the SFrame section `NAME` (default .sframe or the SHT_GNU_SFRAME section)")
	drop := fs.Bool("drop-unrepresentable", false, "drop the functions the target version cannot express instead of failing")
	files, code, ok := fs.parse(args)
	if !ok {
		return code
	}
	if code, ok := fs.rewriteOperands(files, *output); !ok {
		return code
	}
	switch {
	case !fs.isSet("to-version"):
		return fs.fail("--to-version 2 or 3 is required")
	case *toVersion != 2 && *toVersion != 3:
		return fs.fail("--to-version %d: only versions 2 and 3 can be written", *toVersion)
	case fs.isSet("base") && !*raw:
		return fs.fail("--base needs --raw")
	}
	baseAddr, err := strconv.ParseUint(*base, 0, 64)
	if err != nil {
		return fs.fail("bad --base %q", *base)
	}
	in := files[0]
	src, perm, code := readRewritten("convert", in, *output, *raw, stderr)
	if code != 0 {
		return code
	}
	if !*raw {
		if _, err := elffile.NewFile(src); err != nil {
			fs.fileError(in, err)
			return 1
		}
	}
	opts := sframegen.ToVersionOptions{Version: sframe.Version(*toVersion), Section: *section, DropUnrepresentable: *drop}
	var res *sframegen.ToVersionResult
	if *raw {
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
			in, sframe.Version(*toVersion), res.Segment.Addr)
	}
	if err := outfile.Write(*output, res.Data, perm, stdout); err != nil {
		fmt.Fprintf(stderr, "sframe convert: %v\n", err)
		return 1
	}
	msgs := stdout
	if *output == "-" {
		msgs = stderr // stdout holds the file
	}
	fmt.Fprintf(msgs, "%s: %s -> %s, %s written, %d dropped\n", *output, res.From, sframe.Version(*toVersion), count(res.Funcs, "function"), len(res.Dropped))
	return 0
}

// readRewritten reads the input file in of a command (convert, gen)
// that writes a rewritten copy to output, which must not be in. It
// returns the input, and the output's mode: the input's (an executable
// stays one), 0644 for a bare section; or nil and the exit status, after
// saying why.
func readRewritten(cmd, in, output string, bare bool, stderr io.Writer) ([]byte, os.FileMode, int) {
	if output != "-" && same(in, output) {
		fmt.Fprintf(stderr, "sframe %s: %s: refusing to overwrite the input\n", cmd, in)
		return nil, 0, 2
	}
	src, err := os.ReadFile(in)
	if err != nil {
		fmt.Fprintf(stderr, "sframe %s: %v\n", cmd, err)
		return nil, 0, 1
	}
	perm := os.FileMode(0o644) // a bare section is data
	if st, err := os.Stat(in); err == nil && !bare {
		perm = st.Mode().Perm()
	}
	return src, perm, 0
}

// same reports whether the two paths name the same existing file.
func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(sa, sb)
}

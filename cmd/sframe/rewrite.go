package main

import (
	"debug/elf"
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

// The commands that write a rewritten copy of one file: convert (an
// SFrame section as another version) and gen (an SFrame section made from
// the DWARF CFI), with what they share (rewrite).
func init() {
	register("convert", "rewrite an SFrame section (bare or in an ELF file) as version 2 or 3", runConvert)
	register("gen", "generate an SFrame section from an ELF file's DWARF CFI", runGen)
}

// rewrite is what the commands that write a rewritten copy of one file
// (convert, gen) share: the flags --to-version, -o/--output, --raw and
// --base, the checks of the operands, the reading of the input and the
// writing of the output.
type rewrite struct {
	fs      *flagSet
	version *int    // --to-version
	output  *string // -o/--output
	raw     *bool   // --raw: a bare SFrame section
	base    *string // --base: with --raw, the section's address
	in      string  // the input file, once read
}

// newRewrite declares the shared flags on fs, with the command's defaults
// and usage texts.
func newRewrite(fs *flagSet, version int, versionUsage, rawUsage, base, baseUsage string) *rewrite {
	r := &rewrite{fs: fs}
	r.version = fs.Int("to-version", version, versionUsage)
	r.output = fs.String("output", "", "write the result to `FILE` (required; never the input; - for standard output)")
	fs.alias("o", "output")
	r.raw = fs.Bool("raw", false, rawUsage)
	r.base = fs.String("base", base, baseUsage)
	return r
}

// read parses args, checks that there is one input file and an output,
// then the command's own flags with check (which returns the exit status
// of a usage error it reported, or 0), and reads the input file: its
// bytes and the output's mode (see readRewritten). When ok is false the
// command returns code at once.
func (r *rewrite) read(args []string, check func() int) (src []byte, perm os.FileMode, code int, ok bool) {
	files, code, ok := r.fs.parse(args)
	if !ok {
		return nil, 0, code, false
	}
	switch {
	case len(files) == 0:
		return nil, 0, r.fs.noInput(), false
	case len(files) > 1:
		return nil, 0, r.fs.fail("one input file, not %d", len(files)), false
	case *r.output == "":
		return nil, 0, r.fs.fail("--output OUT is required"), false
	}
	if code := check(); code != 0 {
		return nil, 0, code, false
	}
	r.in = files[0]
	src, perm, code = readRewritten(r.fs.name, r.in, *r.output, *r.raw, r.fs.stderr)
	return src, perm, code, code == 0
}

// write writes out, the result, to the output with mode perm, and returns
// where the command's summary goes: standard output, or standard error
// when standard output holds the file; nil after reporting an error.
func (r *rewrite) write(out []byte, perm os.FileMode, stdout, stderr io.Writer) io.Writer {
	if err := outfile.Write(*r.output, out, perm, stdout); err != nil {
		fmt.Fprintf(stderr, "sframe %s: %v\n", r.fs.name, err)
		return nil
	}
	if *r.output == "-" {
		return stderr // stdout holds the file
	}
	return stdout
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
		tableMoved(stderr, "convert", in, res.Segment)
	}
	msgs := rw.write(res.Data, perm, stdout, stderr)
	if msgs == nil {
		return 1
	}
	fmt.Fprintf(msgs, "%s: %s -> %s, %s written, %d dropped\n", *rw.output, res.From, sframe.Version(*rw.version), count(res.Funcs, "function"), len(res.Dropped))
	return 0
}

// tableMoved says, when the plan moves the program header table to a
// segment of its own (no section after it can make room: a static
// program's .rela.plt, found by symbols in its code), that elfutils'
// eu-strip cannot strip the output: libelf writes zeros over the table
// there, and its copy would not run. binutils' strip keeps it.
func tableMoved(stderr io.Writer, cmd, in string, plan *elffile.SegmentPlan) {
	if plan.MovePHDRs {
		fmt.Fprintf(stderr, "sframe %s: note: %s: no room after the program header table; it moves to a segment of its own, which binutils' strip keeps and elfutils' eu-strip does not (its copy would not run)\n",
			cmd, in)
	}
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
		tableMoved(stderr, "gen", in, plan)
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

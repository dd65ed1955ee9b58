package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sframekit/sframekit/internal/outfile"
)

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

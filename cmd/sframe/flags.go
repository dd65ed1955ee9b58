package main

import (
	"flag"
	"io"
	"strings"
)

// parseOperands is parseInterspersed as every subcommand uses it: when ok
// is false the subcommand returns code at once, 0 after -h printed the
// usage, 2 after a bad flag (the flag package printed why, and the usage).
func parseOperands(fs *flag.FlagSet, args []string) (operands []string, code int, ok bool) {
	operands, err := parseInterspersed(fs, args)
	switch {
	case err == flag.ErrHelp:
		return nil, 0, false
	case err != nil:
		return nil, 2, false
	}
	return operands, 0, true
}

// parseInterspersed parses flags that may come before or after the file
// names, as binutils tools accept them. A lone "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return files, nil
		}
		// fs.Parse stops at the first non-flag; "--" is consumed by it.
		consumedDashes := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
		if consumedDashes {
			return append(files, rest...), nil
		}
		files = append(files, rest[0])
		args = rest[1:]
	}
}

// newFlagSet makes a flag set whose -h output goes to w and names the
// subcommand, with a usage line listing the operands.
func newFlagSet(name, operands string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sframe "+name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		io.WriteString(w, "usage: sframe "+name+" [flags] "+operands+"\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, u := flag.UnquoteUsage(f)
			line := "  -" + f.Name
			if name != "" {
				line += " " + name
			}
			io.WriteString(w, line+"\n    \t"+strings.ReplaceAll(u, "\n", "\n    \t")+"\n")
		})
	}
	return fs
}

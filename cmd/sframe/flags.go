package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

// flagSet is a subcommand's flags: a flag.FlagSet whose help spells the
// flags as users type them (-o, --output FILE), and whose errors are one
// line naming the command and pointing to its -h, as binutils and git
// print them.
type flagSet struct {
	*flag.FlagSet
	name     string
	operands string
	stdout   io.Writer
	stderr   io.Writer
	short    map[string]string // long name -> one-letter alias
	isShort  map[string]bool
	// epilogue, when set, is printed after the flags in the help (exit
	// statuses and the like).
	epilogue string
	// stopAtOperand ends flag parsing at the first operand, as perf
	// record does: what follows is a command and its own flags.
	stopAtOperand bool
}

// newFlagSet makes the flag set of subcommand name; operands is the rest
// of its usage line (and any text to print before the flags). Help goes
// to stdout, errors to stderr.
func newFlagSet(name, operands string, stdout, stderr io.Writer) *flagSet {
	f := &flagSet{FlagSet: flag.NewFlagSet("sframe "+name, flag.ContinueOnError), name: name, operands: operands,
		stdout: stdout, stderr: stderr, short: map[string]string{}, isShort: map[string]bool{}}
	// The flag package's own messages and usage dump are replaced by
	// parse's one line.
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	return f
}

// alias makes -short another name of the flag --long, shown with it.
func (f *flagSet) alias(short, long string) {
	f.Var(f.Lookup(long).Value, short, "short for --"+long)
	f.short[long] = short
	f.isShort[short] = true
}

// dashes spells a flag name as help shows it: -x or --name.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// help prints the usage line and every flag.
func (f *flagSet) help(w io.Writer) {
	fmt.Fprintf(w, "usage: sframe %s [flags] %s\n\nflags:\n", f.name, f.operands)
	f.VisitAll(func(fl *flag.Flag) {
		if f.isShort[fl.Name] {
			return
		}
		arg, text := flag.UnquoteUsage(fl)
		line := "      " + dashes(fl.Name)
		if s, ok := f.short[fl.Name]; ok {
			line = "  -" + s + ", " + dashes(fl.Name)
		}
		if arg != "" {
			line += " " + strings.ToUpper(arg)
		}
		switch fl.DefValue {
		case "", "0", "false", "0s":
		default:
			if !strings.Contains(text, "default") {
				text += " (default " + fl.DefValue + ")"
			}
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(text, "\n", "\n        "))
	})
	fmt.Fprintf(w, "  -h, --help\n        print this help\n")
	if f.epilogue != "" {
		fmt.Fprintf(w, "\n%s", f.epilogue)
	}
}

// flagErrors are the flag package's messages, rewritten for users. The
// patterns are compiled on the error path: compiled at start-up, they
// cost every run of the program 0.2 ms and some 40 KB of new memory.
var flagErrors = []struct {
	pattern string
	fix     func(m []string) string
}{
	{`^flag provided but not defined: -(.*)$`, func(m []string) string { return "unknown flag " + dashes(m[1]) }},
	{`^flag needs an argument: -(.*)$`, func(m []string) string { return dashes(m[1]) + " needs a value" }},
	{`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:]*): (.*)$`, func(m []string) string {
		return "bad value " + m[1] + " for " + dashes(m[2]) + ": " + m[3]
	}},
}

// fail prints "sframe NAME: MSG (see 'sframe NAME -h')" and returns the
// exit status of a usage error, 2.
func (f *flagSet) fail(format string, args ...any) int {
	fmt.Fprintf(f.stderr, "sframe %s: %s (see 'sframe %s -h')\n", f.name, fmt.Sprintf(format, args...), f.name)
	return 2
}

// noInput is the error of every command run without its operand.
func (f *flagSet) noInput() int { return f.fail("no input file given") }

// parse parses flags that may come before or after the operands, as
// binutils tools accept them; a lone "--" ends flag parsing. When ok is
// false the subcommand returns code at once: 0 after -h printed the
// help, 2 after a one-line error.
func (f *flagSet) parse(args []string) (operands []string, code int, ok bool) {
	var err error
	if f.stopAtOperand {
		err = f.FlagSet.Parse(args)
		operands = f.FlagSet.Args()
	} else {
		operands, err = parseInterspersed(f.FlagSet, args)
	}
	switch {
	case err == flag.ErrHelp:
		f.help(f.stdout)
		return nil, 0, false
	case err != nil:
		msg := err.Error()
		for _, e := range flagErrors {
			if m := regexp.MustCompile(e.pattern).FindStringSubmatch(msg); m != nil {
				msg = e.fix(m)
				break
			}
		}
		return nil, f.fail("%s", msg), false
	}
	return operands, 0, true
}

// isSet reports whether the flag name was given on the command line.
func (f *flagSet) isSet(name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// parseInterspersed parses flags that may come before or after the file
// names. A lone "--" ends flag parsing.
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

// fileError prints the one-line error of a file that could not be read:
// "sframe NAME: FILE: what is wrong", without the path a file system
// error repeats.
func (f *flagSet) fileError(path string, err error) {
	fmt.Fprintf(f.stderr, "sframe %s: %s: %v\n", f.name, displayName(path), withoutPath(path, err))
}

// eachFile runs do on each of files in turn: a file do fails on gets a
// one-line error (fileError) and the exit status 1, and the others are
// still done.
func (f *flagSet) eachFile(files []string, do func(path string) error) int {
	status := 0
	for _, path := range files {
		if err := do(path); err != nil {
			f.fileError(path, err)
			status = 1
		}
	}
	return status
}

// withoutPath is err without the path a file system error repeats, for
// messages that name path already.
func withoutPath(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return pe.Err
	}
	return err
}

// parsePIDs parses the process ids of sframe record's and agent's --pid:
// comma-separated, positive.
func parsePIDs(s string) ([]int, error) {
	var pids []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a process id", f)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

package main

// Tests of the conventions every subcommand follows (issue 10): help as
// users type flags, one-line usage errors, standard input as "-", errors
// that say what is wrong with a file, flags that need each other, one
// JSON convention, and --version.

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/dump"
	"github.com/sframekit/sframekit/internal/testprog"
)

// sample is an executable shipped in the repository, with .sframe and
// .eh_frame.
const sample = "../../testdata/drap-O2.elf"

var subcommands = []string{"agent", "cfi", "convert", "dump", "gen", "record", "report", "stack", "verify"}

// TestEveryCommandTested keeps the lists of this file in step with the
// registered commands.
func TestEveryCommandTested(t *testing.T) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(subcommands) {
		t.Errorf("commands %v, tested %v", names, subcommands)
	}
}

// TestHelp checks that "CMD -h", "CMD --help" and "help CMD" print the
// same help on stdout, with every flag spelled as users type it
// ("-o, --output FILE", "--json"), never as the flag package's "-output
// string".
func TestHelp(t *testing.T) {
	flags := map[string][]string{
		"agent": {"-a, --all-cpus", "--bpf", "--cgroup PATH", "-e, --event EVENT", "-F, --freq HZ", "--hostname NAME", "--kernel",
			"--listen ADDR", "--max-depth N", "--off-cpu", "--otlp ENDPOINT", "--period D", "-p, --pid PIDS", "--pyroscope URL",
			"--queue N", "--service-label LABEL", "--stack-size BYTES"},
		"dump":    {"--base ADDR", "--json", "--raw", "--section NAME"},
		"cfi":     {"--json", "--readelf-version VERSION", "--section SECTION"},
		"convert": {"--base ADDR", "--drop-unrepresentable", "-o, --output FILE", "--raw", "--section NAME", "--to-version VERSION"},
		"gen":     {"--base ADDR", "--cfi SECTION", "-o, --output FILE", "--raw", "--stats", "--to-version VERSION"},
		"verify":  {"--cfi SECTION", "--json", "--section NAME", "--strict"},
		"stack": {"--core CORE", "--count N", "--exe FILE", "-i, --inlines", "--interval D", "--json", "--max-depth N",
			"--no-demangle", "--pprof FILE", "-s, --source", "--sysroot DIR"},
		"report": {"--comm NAMES", "--event NAME", "--format FORMAT", "--inlines", "-i, --input FILE", "--kallsyms FILE", "--max-depth N", "--no-demangle",
			"-o, --output FILE", "--pid PIDS", "-q, --quiet", "-s, --sort KEYS", "--source", "--symfs DIR", "--tid TIDS"},
		"record": {"-a, --all-cpus", "--bpf", "--duration D", "-e, --event EVENT", "--format FORMAT", "-F, --freq HZ", "-i, --inlines",
			"--kernel", "--max-depth N", "--no-demangle", "--off-cpu", "-o, --output FILE", "-p, --pid PIDS", "-q, --quiet",
			"-s, --source", "--stack-size BYTES"},
	}
	// perf's one-letter flags: -F (--freq) is upper case.
	flagLine := regexp.MustCompile(`^(?:  -[a-zA-Z], |      )(--[a-z-]+(?: [A-Z]+)?)$`)
	for _, cmd := range subcommands {
		out, errs, code := runCLI(t, cmd, "-h")
		if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: sframe "+cmd+" [flags] ") {
			t.Errorf("%s -h: exit %d, stderr %q, stdout %.60q", cmd, code, errs, out)
			continue
		}
		for _, args := range [][]string{{cmd, "--help"}, {"help", cmd}} {
			if o, e, c := runCLI(t, args...); c != 0 || o != out || e != "" {
				t.Errorf("%q: exit %d, stderr %q, same help as -h: %v", args, c, e, o == out)
			}
		}
		var got []string
		_, list, _ := strings.Cut(out, "\nflags:\n")
		list, _, _ = strings.Cut(list, "\n\n") // an epilogue (verify's exit statuses) follows a blank line
		for _, line := range strings.Split(strings.TrimSuffix(list, "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, "        "): // description
			case flagLine.MatchString(line):
				got = append(got, strings.TrimSpace(line))
			default:
				t.Errorf("%s -h: line %q is neither a flag nor its description", cmd, line)
			}
		}
		want := append(flags[cmd], "-h, --help")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s -h lists\n  %q\nwant\n  %q", cmd, got, want)
		}
	}
	out, errs, code := runCLI(t, "help")
	if code != 0 || errs != "" || !strings.Contains(out, "sframe help COMMAND") {
		t.Errorf("help: exit %d, stderr %q, stdout %q", code, errs, out)
	}
	for _, c := range []struct{ args []string }{{[]string{"help", "nosuch"}}, {[]string{"nosuch"}}} {
		out, errs, code := runCLI(t, c.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `"nosuch"`) || !strings.Contains(errs, "'sframe help'") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
	}
}

// TestUsageErrors checks that a usage error is one line on stderr naming
// the command and pointing to its -h, with exit status 2: unknown flags
// (before or after the operands), missing or bad flag values, and no
// operand at all, which says the same for every command.
func TestUsageErrors(t *testing.T) {
	see := func(cmd, msg string) string { return "sframe " + cmd + ": " + msg + " (see 'sframe " + cmd + " -h')\n" }
	type tc struct {
		args []string
		want string
	}
	var cases []tc
	for _, cmd := range subcommands {
		cases = append(cases,
			tc{[]string{cmd, "--foo", sample}, see(cmd, "unknown flag --foo")},
			tc{[]string{cmd, "-foo", sample}, see(cmd, "unknown flag --foo")},
			tc{[]string{cmd, sample, "--foo=1"}, see(cmd, "unknown flag --foo")},
			tc{[]string{cmd, "-x", sample}, see(cmd, "unknown flag -x")},
		)
		switch cmd {
		case "report": // which reads perf.data by default, as perf report
		case "agent": // which profiles every process by default, and takes no operand
			cases = append(cases, tc{[]string{cmd, sample}, see(cmd, fmt.Sprintf("unexpected operand %q (the agent profiles running processes: -p, -a or --cgroup)", sample))})
		case "stack": // whose operand is a PID
			cases = append(cases, tc{[]string{cmd}, see(cmd, "no process given: a PID, or --core CORE")})
		case "record": // whose operand is a command, and the flags after it the command's
			cases = cases[:len(cases)-2]
			cases = append(cases, tc{[]string{cmd, "-x", sample}, see(cmd, "unknown flag -x")},
				tc{[]string{cmd}, see(cmd, "nothing to record: give -p PID, -a or a command")})
		default:
			cases = append(cases, tc{[]string{cmd}, see(cmd, "no input file given")})
		}
	}
	cases = append(cases,
		tc{[]string{"convert", "--to-version", "3", "-o", "out"}, see("convert", "no input file given")},
		tc{[]string{"gen", "-o", "out"}, see("gen", "no input file given")},
		tc{[]string{"stack", "--json"}, see("stack", "no process given: a PID, or --core CORE")},
		tc{[]string{"dump", sample, "--section"}, see("dump", "--section needs a value")},
		tc{[]string{"stack", "--count", "many", "1"}, see("stack", `bad value "many" for --count: parse error`)},
		tc{[]string{"stack", "--json=maybe", "1"}, see("stack", `bad value "maybe" for --json: parse error`)},
		tc{[]string{"convert", "--to-version", "4", "-o", "out", sample}, see("convert", "--to-version 4: only versions 2 and 3 can be written")},
		tc{[]string{"gen", sample}, see("gen", "--output OUT is required")},
		tc{[]string{"gen", "-o", "out", sample, sample}, see("gen", "one input file, not 2")},
		tc{[]string{"stack", "1", "2"}, see("stack", "one PID, or --core CORE without a PID")},
		tc{[]string{"cfi", "--section", ".text", sample}, see("cfi", `unknown section ".text" (want .eh_frame, .debug_frame or .eh_frame_hdr)`)},
		tc{[]string{"report", "--format", "json", sample}, see("report", `unknown format "json" (pprof, folded or text)`)},
		tc{[]string{"report", sample, sample}, see("report", "one recording at a time")},
		tc{[]string{"report", "--max-depth", "0", sample}, see("report", "--max-depth must be positive")},
		tc{[]string{"record", "-p", "12", "-a"}, see("record", "give one of -p PID, -a and a command")},
		tc{[]string{"record", "-p", "12", sample}, see("record", "give one of -p PID, -a and a command")},
		tc{[]string{"record", "-p", "12,x"}, see("record", `bad --pid: "x" is not a process id`)},
		tc{[]string{"record", "-e", "bogus", "-a"}, see("record", `unknown event "bogus" (cpu-clock, task-clock, cycles or instructions)`)},
		tc{[]string{"record", "-e", "cs", "-a"}, see("record", "context-switches is what --off-cpu samples; give it instead of -e")},
		tc{[]string{"record", "--format", "text", "-a"}, see("record", `unknown format "text" (pprof or folded)`)},
		tc{[]string{"record", "-F", "0", "-a"}, see("record", "--freq must be positive")},
		tc{[]string{"record", "--stack-size", "100", "-a"}, see("record", "--stack-size must be a positive multiple of 8 up to 65528")},
		tc{[]string{"record", "--stack-size", "65536", "-a"}, see("record", "--stack-size must be a positive multiple of 8 up to 65528")},
		tc{[]string{"record", "--duration", "soon", "-a"}, see("record", `bad value "soon" for --duration: not a duration (10s, 1m30s, or seconds)`)},
		tc{[]string{"record", "--max-depth", "0", "-a"}, see("record", "--max-depth must be positive")},
		tc{[]string{"record", "--off-cpu", "-e", "cycles", "--format", "folded", "-a"},
			see("record", "--off-cpu with --format folded needs a time-based event (cpu-clock or task-clock): the counts are microseconds")},
	)
	for _, c := range cases {
		out, errs, code := runCLI(t, c.args...)
		if code != 2 || out != "" || errs != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n  %q\nwant\n  %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestFlagsThatNeedEachOther checks the flags that mean nothing alone:
// dump --raw without --base (which printed addresses as offsets from 0,
// 0xfffffffffffdcda8), --base without --raw, and stack --interval
// without --count, as gen already refused --base without --raw.
func TestFlagsThatNeedEachOther(t *testing.T) {
	see := func(cmd, msg string) string { return "sframe " + cmd + ": " + msg + " (see 'sframe " + cmd + " -h')\n" }
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dump", "--raw", sample}, see("dump", "--raw needs --base ADDR, the section's load address")},
		{[]string{"dump", "--base", "0x1000", sample}, see("dump", "--base needs --raw")},
		{[]string{"dump", "--raw", "--base", "zero", sample}, see("dump", `bad --base "zero"`)},
		{[]string{"convert", "--base", "0x1000", "--to-version", "3", "-o", out, sample}, see("convert", "--base needs --raw")},
		{[]string{"gen", "--base", "0x1000", "-o", out, sample}, see("gen", "--base needs --raw")},
		{[]string{"stack", "--interval", "5ms", "1"}, see("stack", "--interval needs --count")},
		{[]string{"stack", "--pprof", out, "--interval", "5ms", "1"}, see("stack", "--interval needs --count")},
	} {
		o, errs, code := runCLI(t, c.args...)
		if code != 2 || o != "" || errs != c.want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n  %q\nwant\n  %q", c.args, code, o, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written despite a usage error", out)
	}
}

// TestNotAnELFFile checks, for every command that reads ELF, that empty,
// short, cut-off and text files get one line saying so, where debug/elf
// says "EOF" or "bad magic number '[35 32 115 102]'".
func TestNotAnELFFile(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := []struct{ name, data, want string }{
		{"empty", "", "not an ELF file"},
		{"text", "# sframekit\n", "not an ELF file"},
		{"short", string(whole[:100]), fmt.Sprintf("truncated ELF file (100 of %d bytes)", len(whole))},
		{"half", string(whole[:len(whole)/2]), fmt.Sprintf("truncated ELF file (%d of %d bytes)", len(whole)/2, len(whole))},
	}
	out := filepath.Join(dir, "out")
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, []byte(f.data), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"dump", path},
			{"dump", "--json", path},
			{"cfi", path},
			{"verify", path},
			{"convert", "--to-version", "2", "-o", out, path},
			{"gen", "-o", out, path},
			{"stack", "--core", path},
			{"stack", "--core", sample, "--exe", path},
		} {
			stdout, errs, code := runCLI(t, args...)
			prefix := "sframe " + args[0] + ": " + path + ": " + f.want
			if code == 0 || stdout != "" || !strings.HasPrefix(errs, prefix) || strings.Count(errs, "\n") != 1 {
				t.Errorf("%q: exit %d, stdout %q, stderr %q, want a line starting %q", args, code, stdout, errs, prefix)
			}
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written from a bad input", out)
	}
	// A missing file is named once, not as "x: open x: ...".
	missing := filepath.Join(dir, "missing")
	_, errs, _ := runCLI(t, "dump", missing)
	if errs != "sframe dump: "+missing+": no such file or directory\n" {
		t.Errorf("missing file: %q", errs)
	}
}

// withStdin runs the command with data on a pipe as standard input, as
// a shell pipeline gives it (debug/elf alone fails there with "illegal
// seek").
func withStdin(t *testing.T, data []byte, args ...string) (string, string, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.Write(data)
		w.Close()
	}()
	defer r.Close()
	defer func(old io.Reader) { stdin = old }(stdin)
	stdin = r
	return runCLI(t, args...)
}

// TestStdin checks that "-" reads standard input for dump, cfi and
// verify: the output is that of the file, named "<stdin>".
func TestStdin(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	in, err := dump.LoadELF(sample, "")
	if err != nil {
		t.Fatal(err)
	}
	section, base := in.SFrame.Data(), "0x"+strconv.FormatUint(in.SFrame.Addr(), 16)
	rawPath := filepath.Join(t.TempDir(), "section")
	os.WriteFile(rawPath, section, 0o644)
	for _, c := range []struct {
		data []byte
		file string
		args []string
	}{
		{whole, sample, []string{"dump"}},
		{whole, sample, []string{"dump", "--json"}},
		{section, rawPath, []string{"dump", "--raw", "--base", base}},
		{whole, sample, []string{"cfi"}},
		{whole, sample, []string{"cfi", "--json"}},
		{whole, sample, []string{"verify"}},
		{whole, sample, []string{"verify", "--json"}},
	} {
		want, werrs, wcode := runCLI(t, append(c.args, c.file)...)
		if wcode != 0 || werrs != "" {
			t.Fatalf("%q %s: exit %d, stderr %q", c.args, c.file, wcode, werrs)
		}
		want = strings.ReplaceAll(want, c.file, "<stdin>")
		out, errs, code := withStdin(t, c.data, append(c.args, "-")...)
		if code != 0 || errs != "" || out != want {
			t.Errorf("%q -: exit %d, stderr %q, same output as for the file: %v\n%.300s", c.args, code, errs, out == want, out)
		}
	}
	for _, cmd := range []string{"dump", "cfi", "verify"} {
		_, errs, code := withStdin(t, []byte("hello\n"), cmd, "-")
		if code == 0 || errs != "sframe "+cmd+": <stdin>: not an ELF file\n" {
			t.Errorf("%s - of text: exit %d, stderr %q", cmd, code, errs)
		}
	}
}

// addrKeys are the JSON fields that hold addresses in the output of
// dump, cfi, verify and stack: always "0x..." strings.
var addrKeys = map[string]bool{
	"address": true, "start": true, "end": true, "pc_begin": true, "pc_end": true, "lsda": true,
	"func_start": true, "func_end": true, "pc": true, "sp": true, "cfa": true,
}

var hexString = regexp.MustCompile(`^0x[0-9a-f]+$`)

// checkJSONConvention decodes JSON as jq and JavaScript do (numbers as
// doubles) and checks the convention: every address field a lower-case
// "0x..." string, every number an integer a double holds exactly. It
// returns how many address fields it saw.
func checkJSONConvention(t *testing.T, what, text string) int {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	n := 0
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case float64:
			if addrKeys[key] || v != float64(int64(v)) || v > 1<<53 || v < -(1<<53) {
				t.Errorf("%s: %q is the number %v", what, key, v)
			}
		case string:
			if addrKeys[key] {
				n++
				if !hexString.MatchString(v) {
					t.Errorf("%s: %q is %q, not 0x and hexadecimal digits", what, key, v)
				}
			}
		case []any:
			for _, e := range v {
				walk(key, e)
			}
		case map[string]any:
			for k, e := range v {
				if addrKeys[k] {
					if _, ok := e.(map[string]any); ok {
						// dump's rows: "cfa" is a rule, not an address.
						walk("", e)
						continue
					}
				}
				walk(k, e)
			}
		}
	}
	docs := 0
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		walk("", v)
		docs++
	}
	if docs == 0 {
		t.Errorf("%s: no JSON", what)
	}
	return n
}

// TestJSONConvention checks the one JSON convention of dump, cfi, verify
// and stack, including kernel addresses (above 2^53, which a double
// cannot hold).
func TestJSONConvention(t *testing.T) {
	in, err := dump.LoadELF(sample, "")
	if err != nil {
		t.Fatal(err)
	}
	kernel := filepath.Join(t.TempDir(), "kernel.sframe")
	os.WriteFile(kernel, in.SFrame.Data(), 0o644)
	for _, args := range [][]string{
		{"dump", "--json", sample},
		{"dump", "--json", "--raw", "--base", "0xffffffff81000000", kernel},
		{"cfi", "--json", sample},
		{"verify", "--json", sample},
	} {
		out, errs, code := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		if n := checkJSONConvention(t, strings.Join(args, " "), out); n == 0 {
			t.Errorf("%q: no address fields", args)
		}
		if args[len(args)-1] == kernel && !strings.Contains(out, `"address":"0xffffffff81000000"`) {
			t.Errorf("kernel address not exact:\n%.300s", out)
		}
		if args[0] == "verify" && !strings.Contains(out, `"func_start":"0x`) {
			t.Errorf("verify --json has no disagreement to check:\n%s", out)
		}
	}
	t.Run("stack", func(t *testing.T) {
		p, _ := startStackProg(t)
		out, errs, code := runCLI(t, "stack", "--json", strconv.Itoa(p.PID()))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if n := checkJSONConvention(t, "stack --json", out); n == 0 {
			t.Error("no address fields")
		}
	})
}

// TestVersion checks --version against the build information, and the
// version string for module and clone builds.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errs, code := runCLI(t, args...)
		if code != 0 || errs != "" || out != "sframe "+version()+"\n" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q", args, code, errs, out)
		}
	}
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "c67cc8c"}, {Key: "vcs.modified", Value: "true"}}}, "devel c67cc8c+dirty"},
		{debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.modified", Value: "false"}, {Key: "vcs.revision", Value: "c67cc8c"}}}, "devel c67cc8c"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("%+v: %q, want %q", c.bi, got, c.want)
		}
	}
}

// TestVersionOfClone builds sframe in a fresh clone of this repository,
// as the README says to, and checks that --version names the commit
// (the committed HEAD: the clone has no uncommitted changes).
func TestVersionOfClone(t *testing.T) {
	testprog.NeedTool(t, "git")
	if testing.Short() {
		t.Skip("builds the command in a clone; skipped with -short")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if b, err := exec.Command("git", "clone", "-q", "../..", dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, b)
	}
	// As the README says: plain "go build ./cmd/sframe" cannot write
	// ./sframe, the directory of package sframe.
	build := exec.Command("go", "build", "-buildvcs=true", "-o", "sframe-bin", "./cmd/sframe")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, err := exec.Command(filepath.Join(dir, "sframe-bin"), "--version").Output()
	// Go stamps a pseudo-version v0.0.0-DATE-COMMIT (go 1.24 on) or
	// leaves "(devel)" with the revision in the settings.
	commit := strings.TrimSpace(string(head))[:12]
	if err != nil || !regexp.MustCompile(`^sframe (v0\.0\.0-\d{14}-|devel )`+commit).Match(out) || strings.Count(string(out), "\n") != 1 {
		t.Errorf("--version: %q, %v; want a version naming commit %s", out, err, commit)
	}
}

// packageNames are the names of the module's packages (and "convert",
// sframegen's old name), which no message may show: users know the
// commands, not the packages behind them.
func packageNames(t *testing.T) []string {
	t.Helper()
	names := map[string]bool{"convert": true}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			names[filepath.Base(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(names, "sframe") // the command's own name, checked apart
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return list
}

// TestErrorsNameNoPackage runs commands into the errors of each package
// that reach a user and scans what they print: no line shows a package
// name ("targets: attach ...", "convert: no SFrame section", "sframe:
// function 0" after the command's own "sframe verify: "), verify --json
// writes an object for every file, and each error says what it means
// (--to-version 1 is not a missing --to-version; stack wants a PID).
func TestErrorsNameNoPackage(t *testing.T) {
	pkg := regexp.MustCompile(`(?:^|[\s(])(` + strings.Join(append(packageNames(t), "sframe"), "|") + `): `)
	dir := t.TempDir()
	notELF := filepath.Join(dir, "notelf")
	os.WriteFile(notELF, []byte("not an ELF file\n"), 0o644)
	missing := filepath.Join(dir, "missing")
	// The sample without its SFrame section, and without its CFI.
	testprog.NeedTool(t, "objcopy")
	self, noCFI := filepath.Join(dir, "nosframe.elf"), filepath.Join(dir, "nocfi.elf")
	for _, c := range [][]string{{"-R", ".sframe", sample, self}, {"-R", ".eh_frame", "-R", ".eh_frame_hdr", "-R", ".debug_frame", sample, noCFI}} {
		if out, err := exec.Command("objcopy", c...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %q: %v\n%s", c, err, out)
		}
	}
	// The sample with its .sframe cut short: sframe's own errors.
	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.elf")
	os.WriteFile(cut, corruptSection(t, data, ".sframe"), 0o644)
	perfData := filepath.Join(dir, "perf.data")
	os.WriteFile(perfData, append([]byte("PERFILE2"), make([]byte, 200)...), 0o644)
	for _, c := range []struct {
		args []string
		want string // a line of stderr that must be there
	}{
		{[]string{"verify", self}, "sframe verify: " + self + ": no SFrame section (neither .sframe nor a section of type SHT_GNU_SFRAME)"},
		{[]string{"verify", cut}, "sframe verify: " + cut + ": section .sframe: "},
		{[]string{"gen", "-o", filepath.Join(dir, "out"), noCFI}, "sframe gen: " + noCFI + ": no CFI (neither .eh_frame nor .debug_frame); nothing written"},
		{[]string{"dump", cut}, "sframe dump: " + cut + ": "},
		{[]string{"convert", "--to-version", "1", "-o", filepath.Join(dir, "out"), sample}, "sframe convert: --to-version 1: only versions 2 and 3 can be written (see 'sframe convert -h')"},
		{[]string{"convert", "-o", filepath.Join(dir, "out"), sample}, "sframe convert: --to-version 2 or 3 is required (see 'sframe convert -h')"},
		{[]string{"stack"}, "sframe stack: no process given: a PID, or --core CORE (see 'sframe stack -h')"},
		{[]string{"stack", "2"}, "sframe stack: attach to process 2: it is a kernel thread (kthreadd), which has no user-space stack"},
		{[]string{"stack", "1073741824"}, "sframe stack: attach to process 1073741824: no such process"},
		{[]string{"stack", "--core", sample}, "sframe stack: core " + sample + ": "},
		{[]string{"report", "--format", "text", perfData}, "sframe report: " + perfData + ": "},
		{[]string{"report", "--format", "text", missing}, "sframe report: " + missing + ": no such file or directory"},
	} {
		_, errs, code := runCLI(t, c.args...)
		if code == 0 {
			t.Errorf("%q: exit 0, want an error", c.args)
		}
		found := false
		for _, l := range strings.Split(strings.TrimSuffix(errs, "\n"), "\n") {
			found = found || strings.HasPrefix(l, c.want)
			rest, ok := strings.CutPrefix(l, "sframe "+c.args[0]+": ")
			if !ok {
				t.Errorf("%q: line %q does not start with the command", c.args, l)
			}
			if m := pkg.FindString(rest); m != "" {
				t.Errorf("%q: %q names the package %q", c.args, l, m)
			}
		}
		if !found {
			t.Errorf("%q: stderr %q, want a line starting %q", c.args, errs, c.want)
		}
	}

	// verify --json: one object per file given, failed ones included.
	out, _, code := runCLI(t, "verify", "--json", missing, self, sample)
	var objs []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			t.Fatalf("verify --json: %v in %q", err, out)
		}
		objs = append(objs, o)
	}
	if code != 1 || len(objs) != 3 || objs[0]["file"] != missing || objs[0]["ok"] != false || objs[0]["error"] != "no such file or directory" ||
		objs[1]["file"] != self || objs[1]["ok"] != false || objs[1]["error"] != "no SFrame section (neither .sframe nor a section of type SHT_GNU_SFRAME)" ||
		objs[2]["file"] != sample || objs[2]["ok"] != true {
		t.Errorf("verify --json MISSING NO-SFRAME SAMPLE: exit %d, objects %v", code, objs)
	}
}

// corruptSection returns a copy of the ELF image data with the first 16
// bytes after the first 8 of section name overwritten, so that its
// decoder fails.
func corruptSection(t *testing.T, data []byte, name string) []byte {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(name)
	if s == nil || s.Size < 32 {
		t.Fatalf("%s: no %s", sample, name)
	}
	out := bytes.Clone(data)
	for i := range 16 {
		out[s.Offset+8+uint64(i)] = 0xff
	}
	return out
}

// TestErrorStringsNameNoPackage scans the module's source: no error made
// by errors.New, fmt.Errorf or an Error method starts with a package's
// name, which would reach users behind "sframe COMMAND: ". (The check of
// the output above covers the paths tests reach; this covers the rest.)
func TestErrorStringsNameNoPackage(t *testing.T) {
	pkg := packageNames(t)
	re := regexp.MustCompile(`(?:errors\.New|fmt\.Errorf|fmt\.Sprintf|Error\{fmt\.Sprintf)\(\s*"(` + strings.Join(append(pkg, "sframe"), "|") + `): ` +
		`|s := "(` + strings.Join(append(pkg, "sframe"), "|") + `): `)
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.HasPrefix(path, "../../cmd/") {
			return err
		}
		// The test helpers' messages go to test logs, not to users.
		for _, dir := range []string{"internal/corpus", "internal/testprog", "internal/memtest", "internal/elftest", "internal/cfibuild", "internal/cfiseed"} {
			if strings.HasPrefix(path, "../../"+dir+"/") {
				return nil
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(src), "\n") {
			if m := re.FindString(l); m != "" {
				t.Errorf("%s:%d: an error starting with a package name: %s", path, i+1, strings.TrimSpace(l))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
